"""The calendar days a message names, for recall (memory/search/hybrid.py).

Why: a conversation's date is not in its words, so "What did Gina find for her store on
1 February, 2023?" matches the day's conversation neither by meaning nor by keyword — yet the
message says when. A conversation held within a span the message names is a candidate
whatever its cosine, and its relevance is lifted towards 1 (hybrid.rank_candidates). Measured
in docs/recall-quality.md ("Dates").

What counts as naming a date: a day with its month ("1 February 2023", "February 1st, 2023",
"the 3rd of June", "June 3", "2023-06-03") or a month with its year ("March 2023"). A day
without a year is its latest occurrence up to now. Left out, as too loose to pick a day: a month
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
_PATTERNS = (
    re.compile(r"\b(?P<year>(?:19|20)\d\d)-(?P<month>\d\d)-(?P<day>\d\d)\b"),
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?(?P<name>{_MONTH})\b(?:,?\s+{_YEAR}\b)?", re.I),
    re.compile(rf"\b(?P<name>{_MONTH})\s+{_DAY}\b(?!:)(?:,?\s+{_YEAR}\b)?", re.I),
    re.compile(rf"\b(?P<name>{_MONTH}),?\s+{_YEAR}\b", re.I),
)
MAX_CHARS = 2000
MAX_SPANS = 4
# A day's span reaches a day either side: when a conversation is stored (UTC) and the day the
# operator means (local) can differ, and "yesterday" in it is still about the day named.
SLACK = timedelta(days=1)

Span = tuple[datetime, datetime]  # [start, end), naive UTC like episode_summaries.created_at


def named_spans(text: str, now: datetime) -> list[Span]:
    """The spans of time `text` names by date, in the order it names them, at most MAX_SPANS;
    none that start after `now`."""
    head = text[:MAX_CHARS]
    found: list[tuple[int, Span]] = []
    taken: list[tuple[int, int]] = []  # character ranges already read as a date
    for pattern in _PATTERNS:
        for m in pattern.finditer(head):
            if any(m.start() < end and start < m.end() for start, end in taken):
                continue
            span = _span(m, now)
            if span is not None and span[0] <= now and span not in (s for _, s in found):
                found.append((m.start(), span))
                taken.append((m.start(), m.end()))
    return [span for _, span in sorted(found)][:MAX_SPANS]


def _span(m: re.Match[str], now: datetime) -> Span | None:
    parts = m.groupdict()
    month = MONTHS.index(parts["name"].lower()) + 1 if parts.get("name") else int(parts["month"])
    year = int(parts["year"]) if parts.get("year") else None
    try:
        if parts.get("day") is None:  # a month of a year
            assert year is not None
            start = datetime(year, month, 1)
            end = datetime(year + month // 12, month % 12 + 1, 1)
            return start - SLACK, end + SLACK
        day = int(parts["day"])
        when = datetime(year or now.year, month, day)
        if year is None and when > now:
            when = datetime(now.year - 1, month, day)
    except ValueError:  # "31 February", month 13
        return None
    return when - SLACK, when + timedelta(days=1) + SLACK
