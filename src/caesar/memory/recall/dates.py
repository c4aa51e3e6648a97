"""The calendar days a message names, for recall (memory/recall/hybrid.py).

Why: a conversation's date is not in its words, so "What did Gina find for her store on
1 February, 2023?" matches the day's conversation neither by meaning nor by keyword — yet the
message says when. A conversation held within a span the message names is a candidate
whatever its cosine, and its relevance is lifted towards 1 (hybrid.rank_candidates). Measured
in docs/recall-quality.md ("Dates").

What counts as naming a date: a day with its month ("1 February 2023", "February 1st, 2023",
"the 3rd of June", "June 3", "2023-06-03") or a month with its year ("March 2023"). A day
without a year is its latest occurrence up to now. "May" and "March" are months only when
capitalised (WORD_MONTHS). Left out, as too loose to pick a day: a month
alone ("in June" — and "may", "march" are also words), weekdays, and relative phrases
("last week", "two days ago"). Pure; reads at most MAX_CHARS of the message.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

MONTHS = (
    "january february march april may june july august september october november december"
).split()
_MONTH = "|".join(MONTHS)
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_ISO = re.compile(r"\b(?P<year>(?:19|20)\d\d)-(?P<month>\d\d)-(?P<day>\d\d)\b")
_PATTERNS = (
    _ISO,
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?(?P<name>{_MONTH})\b(?:,?\s+{_YEAR}\b)?", re.I),
    re.compile(rf"\b(?P<name>{_MONTH})\s+{_DAY}\b(?!:)(?:,?\s+{_YEAR}\b)?", re.I),
    re.compile(rf"\b(?P<name>{_MONTH}),?\s+{_YEAR}\b", re.I),
)
# Month names that are also common words: only capitalised are they months ("may 5 of us
# come?", "march 10 miles" name no day; "May 5" and "March 10" do).
WORD_MONTHS = frozenset({"may", "march"})
MAX_CHARS = 2000
MAX_SPANS = 4
# A day's span reaches a day either side: when a conversation is stored (UTC) and the day the
# operator means (local) can differ, and "yesterday" in it is still about the day named.
SLACK = timedelta(days=1)

Span = tuple[datetime, datetime]  # [start, end), naive UTC like episode_summaries.created_at


def named_spans(text: str, now: datetime) -> list[Span]:
    """The spans of time `text` names by date, in the order it names them, at most MAX_SPANS;
    none that start after `now`. Linear, and cheap when no month name has a digit near it: the
    patterns run only around such spots."""
    return [span for _, _, span in dated_matches(text, now)][:MAX_SPANS]


def dated_matches(text: str, now: datetime) -> list[tuple[int, int, Span]]:
    """(start, end, span) of each date `text` names (in its first MAX_CHARS), in order."""
    head = text[:MAX_CHARS]
    found: list[tuple[int, int, Span]] = []
    for start, piece in _spots(head):
        taken: list[tuple[int, int]] = []  # character ranges already read as a date
        for pattern in _PATTERNS:
            for m in pattern.finditer(piece):
                if any(m.start() < end and begin < m.end() for begin, end in taken):
                    continue
                name = m.groupdict().get("name")
                if name and name.lower() in WORD_MONTHS and not name[0].isupper():
                    continue  # "may", "march": words
                span = _span(m, now)
                if span is None:  # "31 February": its month may still be read
                    continue
                # a day after now is read as a date that names no span: not as its month
                taken.append((m.start(), m.end()))
                if span[0] <= now and span not in (s for *_, s in found):
                    found.append((start + m.start(), start + m.end(), span))
    return sorted(found)


# How far from a month name its day, "of" and year can be ("the 21st of", "21st, 2023"), with
# room for doubled spaces: a year cut off would read as the day's latest occurrence.
_REACH = 16


def fold(text: str) -> str:
    """`text` in lower case, character for character: offsets into it are offsets into `text`
    ("İ".lower() is two characters)."""
    low = text.lower()
    if len(low) == len(text):
        return low
    return "".join(c.lower()[:1] for c in text)


def _spots(head: str) -> list[tuple[int, str]]:
    """(offset, text) of the parts of `head` that may name a date: around each month name with
    a digit near it (merged where they touch), and the whole of it if it has an ISO-like
    date. Most messages have none, and "may" or "march" without a digit is a word."""
    low = fold(head)
    ranges: list[tuple[int, int]] = []
    for name in MONTHS:
        at = low.find(name)
        while at >= 0:
            lo, hi = max(0, at - _REACH), min(len(head), at + len(name) + _REACH)
            if any(c.isdigit() for c in low[lo:hi]):
                ranges.append((lo, hi))
            at = low.find(name, at + len(name))
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    spots = [(lo, head[lo:hi]) for lo, hi in merged]
    if "-" in head and _ISO.search(head):
        spots.append((0, head))  # ISO dates anywhere (a month name's window read again: deduped)
    return spots


def _span(m: re.Match[str], now: datetime) -> Span | None:
    parts = m.groupdict()
    name = parts.get("name")
    month = MONTHS.index(name.lower()) + 1 if name else int(parts["month"])
    year = int(parts["year"]) if parts.get("year") else None
    try:
        if parts.get("day") is None:  # a month of a year: the one pattern without a day
            start = datetime(int(parts["year"]), month, 1)
            end = datetime(start.year + month // 12, month % 12 + 1, 1)
            return start - SLACK, end + SLACK
        day = int(parts["day"])
        when = datetime(year or now.year, month, day)
        if year is None and when > now:
            when = datetime(now.year - 1, month, day)
    except ValueError:  # "31 February", month 13
        return None
    return when - SLACK, when + timedelta(days=1) + SLACK
