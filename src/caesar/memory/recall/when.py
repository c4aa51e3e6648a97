"""When a message is about: the spans of time it names, read on the operator's clock. Pure.

Why: people ask about their past by when ("what did we talk about yesterday?", "last
Tuesday", "two weeks ago", "back in August") and a conversation's date is not in its words, so
neither the cosine nor the keywords find it. `read_time` turns the phrases into spans of naive
UTC (how episodes store `created_at`), resolved in the operator's zone: "yesterday" is the
operator's yesterday, midnight to midnight where they live.

What is read (all resolved against `now`, nothing after it):
- named days: today, this morning / afternoon / evening, tonight, yesterday (and its morning,
  afternoon, evening, night), last night, the day before yesterday, the other day (2–7 days);
- counted back, in words or digits: "N days / weeks / months / years ago" (that day; that
  calendar week, Monday to Sunday; that calendar month; that year), "a couple of weeks ago",
  "a few days ago" (a range: 2–5 days, 2–4 weeks …);
- rolling periods: "in the past / last N days / weeks / months", "the past week";
- calendar periods: last / this week, last / this weekend, last / this month, last / this
  year, "earlier this week / month / year", "earlier today";
- weekdays: "last Tuesday", "on Tuesday", "this past Tuesday", "on Tuesday morning": the most
  recent one before today (a weekday alone names none: "the Sunday mass", "Ash Wednesday");
- months and seasons without a year: their latest occurrence that has begun ("in August",
  "last March", "in the spring"; seasons are meteorological, northern hemisphere), "between
  March and May" and "from June to August" as one range;
- combinations: "yesterday or the day before";
- calendar dates, as memory/recall/dates.py reads them ("on 3 October 2026", "March 2023").
"recently" and "lately" name no span: they set `recent`, a soft preference for the new.

Not read, on purpose: the future ("tomorrow", "next week" — no conversation is held there);
"may", "march", "second", "a while" as ordinary words (a month without a digit counts only
after a word that introduces a time, "in May", "since March"); counts beyond MAX_YEARS_BACK.
Nor a plan: words that can point either way (today but not "earlier today", tonight, this
morning / afternoon / evening, this week / weekend / month / year, over the weekend, on or
this <weekday>, in <month>, in the <season>) name no span where they say when something will
happen or is wanted rather than when it was said: "a dinner recipe for tonight", "any plans
this weekend?", "what should I order at a wine bar on Friday?" (`names_a_plan`). Their words
are blanked from `rest` all the same. "Last …", "yesterday", "N days ago", "since March",
"earlier today" always name the past. The rule, on the words around the time (no list of
topics or activities):
- "for" just before it is a plan ("for tonight", "for this weekend"); "from" just before it is
  the past ("the recipe from this morning"; not "from today on").
- Otherwise the words that tell a tense decide. Strong ones decide alone: past auxiliaries
  (did, was, were, had), -ed verbs and irregular past forms (said, told, gave, ate, went,
  "have I read"), the verbs of memory (remind, remember, recall, recap, summarise); and the
  plan's: modals (will, 'll, should, shall, can, could, would, might, must, gonna, let's),
  "going to" (but "was I going to" is past), "what / where / how to", and the present of be
  and do (I'm, we're, is, are, does: "I'm hosting friends this weekend" is no question about
  the past). Weak ones — a plan's verbs and nouns (want, need, plan, suggest, recommend,
  idea, tip, advice, have, do), "want to", "need to", "remind me to", an -ing word opening
  its sentence ("Planning a party this weekend"), and the words of a conversation (talk,
  chat, say, tell, mention) — decide only when no strong word does, so a past auxiliary
  governs them: "what did you suggest tonight?" is past, "what would you suggest tonight?"
  a plan.
- Where: the clause holding the time (its sentence cut at commas and at and, but, so,
  because, while, although): the nearest strong word before the time, else the first strong
  one after it ("Tonight I want to cook"), else the nearest weak one. When both a past and a
  plan's word are there, the nearer one before the time governs it: "what did I say I should
  cook tonight?" is a plan (tonight is when to cook), "can you remind me what we talked about
  tonight?" past. Failing the clause, the nearest in the sentence, then in the message ("My
  parents arrive tonight. What could I cook for them?"). Failing all, the past, as before: a
  time alone ("this morning?") still names its span.
An -ed word after a determiner, a preposition or a present "be" is no past ("grilled fish",
"I'm tired"). Known misses: a present tense with no auxiliary ("what wine goes with fish
tonight?" names tonight), elliptic "Got any tips for a first date tonight?" (got: past).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo

from caesar.memory.recall import dates

MAX_CHARS = dates.MAX_CHARS
MAX_SPANS = 4
MAX_YEARS_BACK = 200

WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
_NUMBERS = {
    w: n
    for n, w in enumerate(
        """zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen
        fifteen sixteen seventeen eighteen nineteen twenty""".split()
    )
}
_NUMBERS.update({"a": 1, "an": 1, "one": 1, "thirty": 30, "forty": 40, "fifty": 50})
# vague counts: (fewest, most) units back
_VAGUE = {
    "a couple of": (1, 3),
    "a couple": (1, 3),
    "couple of": (1, 3),
    "a few": (2, 5),
    "few": (2, 5),
    "several": (3, 7),
}
_TENS = ("twenty", "thirty", "forty", "fifty")
_UNITS = "one two three four five six seven eight nine".split()
_COUNT = (
    r"(?P<n>\d{1,7}|a\s+couple(?:\s+of)?|couple\s+of|a\s+few|few|several|"
    + rf"(?:{'|'.join(_TENS)})[-\s]+(?:{'|'.join(_UNITS)})\b|"  # twenty-one
    + "|".join(sorted(_NUMBERS, key=len, reverse=True))
    + r")"
)
_UNIT = r"(?P<unit>day|week|month|year)s?"
_PART = r"(?P<part>morning|afternoon|evening|night)"
_WEEKDAY = "(?P<weekday>" + "|".join(WEEKDAYS) + ")"
_MONTH = "(?P<month>" + "|".join(dates.MONTHS) + ")"
_SEASON = r"(?P<season>spring|summer|autumn|fall|winter)"
# The local hours of a part of a day: [from, to), to may pass midnight.
PARTS = {"morning": (5, 12), "afternoon": (12, 18), "evening": (18, 24), "night": (18, 30)}
SEASON_NAMES = ("spring", "summer", "autumn", "fall", "winter")
SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}  # first month
# words that introduce a month or season named without a digit ("in May", "since March")
_INTRO = r"(?:in|during|since|last|this\s+past|early|mid|late|through|throughout|from|between|of|over|around|until|till|and|to|back\s+in)"

# (kind, pattern, words one of which it needs): a pattern runs only where one of them is.
_PATTERNS: tuple[tuple[str, re.Pattern[str], tuple[str, ...]], ...] = tuple(
    (kind, re.compile(pattern), needs)
    for kind, pattern, needs in (
        ("before_yesterday", r"\b(?:the\s+)?day\s+before\s+yesterday\b", ("yesterday",)),
        ("or_day_before", r"\b(?:or|and)\s+the\s+day\s+before\b", ("before",)),
        ("yesterday", rf"\byesterday(?:\s+{_PART})?\b", ("yesterday",)),
        ("last_night", r"\blast\s+night\b", ("night",)),
        ("today", r"\b(?:earlier\s+)?today\b", ("today",)),
        ("tonight", r"\btonight\b", ("tonight",)),
        ("this_part", rf"\bthis\s+{_PART}\b", ("this",)),
        ("other_day", r"\bthe\s+other\s+day\b", ("other",)),
        ("ago", rf"\b{_COUNT}\s+{_UNIT}\s+(?:ago|back)\b", ("ago", "back")),
        (
            "past",
            rf"\b(?:the\s+)(?:past|last|previous)\s+(?:{_COUNT}\s+)?{_UNIT}\b",
            ("past", "last", "previous"),
        ),
        ("past", rf"\b(?:past|previous)\s+(?:{_COUNT}\s+)?{_UNIT}\b", ("past", "previous")),
        ("earlier", r"\bearlier\s+this\s+(?P<unit>week|month|year)\b", ("earlier",)),
        (
            "period",
            r"\b(?P<which>last|this\s+past|this|previous|past)\s+(?P<unit>weekend|week|month|year)\b",
            ("last", "this", "previous", "past"),
        ),
        ("weekend", r"\b(?:over|at|on|during)\s+the\s+weekend\b", ("weekend",)),
        (
            "weekday",
            rf"\b(?P<which>last|on|this\s+past|this|past|or|and)\s+{_WEEKDAY}(?:\s+{_PART})?\b",
            tuple(WEEKDAYS),
        ),
        ("season", rf"\b(?P<which>{_INTRO})\s+(?:the\s+)?{_SEASON}\b", SEASON_NAMES),
        ("month", rf"\b(?P<which>{_INTRO})\s+{_MONTH}\b(?!\s*\d)", tuple(dates.MONTHS)),
        ("recent", r"\b(?:recently|lately|of\s+late)\b", ("recent", "late")),
    )
)
# The patterns run only around these words (most messages have none): every pattern holds one
# ("day" is in today, yesterday and every weekday). Found with str.find: a regex alternation
# over the whole message costs more than all the patterns around them.
_ANCHORS = (
    "day tonight ago week month year morning afternoon evening night recent late".split()
    + dates.MONTHS
    + list(SEASON_NAMES)
)
_REACH = 48  # characters either side of an anchor word that a pattern can span

_RANGE_OPENER = re.compile(r"\b(?:between|from)\b")
_RANGE_JOIN = re.compile(r"\s*(?:(?:and|to|until|till|through|-|–)\s*)?")
_JOIN_WORD = re.compile(r"(?:and|to|until|till|through)\b")


@dataclass(frozen=True)
class NamedSpan:
    """[start, end) in naive UTC, and the words that named it."""

    start: datetime
    end: datetime
    said: str

    def as_json(self) -> dict[str, str]:
        return {"said": self.said, "from": self.start.isoformat(), "to": self.end.isoformat()}


@dataclass(frozen=True)
class TimeRead:
    """What a message says about when: the spans it names (at most MAX_SPANS, in the order
    named), whether it asks for the recent (`recent`), and its text with the time words
    blanked (`rest`: what it asks about besides when)."""

    spans: tuple[NamedSpan, ...] = ()
    recent: bool = False
    rest: str = ""

    def contains(self, when: datetime) -> bool:
        return any(s.start <= when < s.end for s in self.spans)


@dataclass(frozen=True)
class _Found:
    begin: int
    end: int
    kind: str
    match: re.Match[str] | None
    fixed: tuple[datetime, datetime] | None = None  # already in naive UTC (a calendar date)


class _Clock:
    """`now` on the operator's clock, and local dates and hours as naive UTC."""

    def __init__(self, now: datetime, zone: tzinfo) -> None:
        self.now = now
        self.zone = zone
        self.local = now.replace(tzinfo=UTC).astimezone(zone)
        self.today = self.local.date()

    def at(self, day: date, hour: int = 0) -> datetime:
        """Local `day` at `hour` (may pass 24) as naive UTC."""
        day, hour = day + timedelta(days=hour // 24), hour % 24
        local = datetime.combine(day, time(hour), tzinfo=self.zone)
        return local.astimezone(UTC).replace(tzinfo=None)

    def days(self, first: date, last: date) -> tuple[datetime, datetime]:
        """From local `first` to the end of local `last`."""
        return self.at(first), self.at(last + timedelta(days=1))

    def week_start(self, weeks_back: int) -> date:
        return self.today - timedelta(days=self.today.weekday() + 7 * weeks_back)

    def month_start(self, months_back: int) -> date:
        months = self.today.year * 12 + self.today.month - 1 - months_back
        return date(months // 12, months % 12 + 1, 1)


def read_time(text: str, now: datetime, zone: tzinfo = UTC) -> TimeRead:
    """The spans of time `text` names (see the module docstring). `now` is naive UTC, `zone`
    the operator's; spans come back in naive UTC, none starting after `now`, none ending
    after it."""
    head = text[:MAX_CHARS]
    low = dates.fold(head)
    found: list[_Found] = []
    taken: list[tuple[int, int]] = []
    # calendar dates first: "the 3rd of June" is a day, not "of June"
    for begin, end, dated in dates.dated_matches(head, now):
        taken.append((begin, end))
        found.append(_Found(begin, end, "date", None, dated))
    recent = False
    for offset, piece in _spots(low):
        for kind, pattern, needs in _PATTERNS:
            if not any(word in piece for word in needs):
                continue
            for m in pattern.finditer(piece):
                begin, end = offset + m.start(), offset + m.end()
                if any(begin < b and a < end for a, b in taken):
                    continue
                if kind == "month" and not _month_ok(head, m, offset):
                    continue
                if kind in _CONTINUED and not _introduced(kind, m, begin, found):
                    continue
                if kind == "weekday" and not _weekday_ok(head, m, offset):
                    continue
                taken.append((begin, end))
                if kind == "recent":
                    recent = True
                else:
                    found.append(_Found(begin, end, kind, m))
    clock = _Clock(now, zone)
    spans: list[NamedSpan] = []
    last: _Found | None = None
    planned = False
    plain: tuple[str, list[_Marker]] | None = None  # the words that tell a tense, read once
    for item in sorted(found, key=lambda f: f.begin):
        if item.kind in _CONTINUED and item.match and item.match.group("which") in _JOINERS:
            pass  # "on Monday or Tuesday": Tuesday is read as Monday was
        elif _either_way(item):
            if plain is None:
                plain_low = _plain(head)
                plain = plain_low, _message_markers(head, plain_low)
            planned = _planned(*plain, item.begin, item.end)
        else:
            planned = False
        if planned:  # "a recipe for tonight": no conversation is asked about; still blanked
            last = None
            continue
        try:
            utc = item.fixed or _resolve(item, clock, spans[-1] if spans and last else None)
        except (ValueError, OverflowError):  # "100000 years ago", a year before 1
            utc = None
        if utc is None or utc[0] >= now or utc[0] >= utc[1]:  # after now; a day never held
            last = None
            continue
        span = NamedSpan(utc[0], min(utc[1], now), head[item.begin : item.end].strip())
        if last is not None and spans and _ranged(low, last, item):
            first = spans[-1]
            until = span.end
            if span.start < first.start:  # "from November to January": the January after
                until = min(_next_year(until), now)
            span = NamedSpan(first.start, max(first.end, until), f"{first.said} {span.said}")
            spans[-1] = span
        elif not any((s.start, s.end) == (span.start, span.end) for s in spans):
            spans.append(span)
        last = item
    return TimeRead(tuple(spans[:MAX_SPANS]), recent, _blank(head, taken))


def _next_year(moment: datetime) -> datetime:
    try:
        return moment.replace(year=moment.year + 1)
    except ValueError:  # 29 February
        return moment.replace(year=moment.year + 1, day=28)


def _spots(low: str) -> list[tuple[int, str]]:
    """(offset, text) of the parts of `low` around anchor words, merged where they touch and
    widened to whole words."""
    found: list[tuple[int, int]] = []
    for word in _ANCHORS:
        at = low.find(word)
        while at >= 0:
            found.append((max(0, at - _REACH), min(len(low), at + len(word) + _REACH)))
            at = low.find(word, at + len(word))
    ranges: list[list[int]] = []
    for lo, hi in sorted(found):
        if ranges and lo <= ranges[-1][1]:
            ranges[-1][1] = max(ranges[-1][1], hi)
        else:
            ranges.append([lo, hi])
    spots = []
    for lo, hi in ranges:
        while lo > 0 and low[lo - 1].isalnum():
            lo -= 1
        while hi < len(low) and low[hi].isalnum():
            hi += 1
        spots.append((lo, low[lo:hi]))
    return spots


def _ranged(low: str, first: _Found, second: _Found) -> bool:
    """`first … second` is one range: "between March and May", "from June to August"."""
    opened = _RANGE_OPENER.search(low, max(0, first.begin - 8), first.end)
    gap = low[first.end : second.begin]
    joined = _RANGE_JOIN.fullmatch(gap) is not None and (
        gap.strip() != "" or _JOIN_WORD.match(low, second.begin) is not None
    )
    return opened is not None and joined


_JOINERS = frozenset({"and", "to", "until", "till", "through", "or"})


# what may continue what: "between March and the summer", "on Monday or Tuesday"
_CONTINUED = {"month": ("month", "season"), "season": ("month", "season"), "weekday": ("weekday",)}


def _introduced(kind: str, m: re.Match[str], begin: int, found: list[_Found]) -> bool:
    """A month, season or weekday after "and" / "to" / "or" continues one just before it
    ("between March and May", "on Monday or Tuesday"): alone it names none — "Mike and June",
    "Tom and May" name no month."""
    if m.group("which") not in _JOINERS:
        return True
    return any(f.kind in _CONTINUED[kind] and 0 <= begin - f.end <= 2 for f in found)


def _month_ok(head: str, m: re.Match[str], offset: int) -> bool:
    """ "may" and "march" are months only capitalised ("in May"; "in may be" is no month)."""
    at = offset + m.start("month")
    name = m.group("month")
    return name not in dates.WORD_MONTHS or head[at].isupper()


def _weekday_ok(head: str, m: re.Match[str], offset: int) -> bool:
    """A weekday counts after "last", "on", "this (past)"; not after "every" or "next" (the
    future), nor alone: "the Sunday mass", "Ash Wednesday" name no day."""
    start = offset + m.start()
    before = head[max(0, start - 6) : start].lower()
    return "next" not in before and "every" not in before


def _resolve(
    item: _Found, clock: _Clock, previous: NamedSpan | None
) -> tuple[datetime, datetime] | None:
    m = item.match
    assert m is not None
    today = clock.today
    kind = item.kind
    if kind == "before_yesterday":
        return clock.days(today - timedelta(days=2), today - timedelta(days=2))
    if kind == "or_day_before":
        if previous is None:
            return None
        day = (previous.start.replace(tzinfo=UTC).astimezone(clock.zone)).date()
        return clock.days(day - timedelta(days=1), day - timedelta(days=1))
    if kind == "yesterday":
        return _part_of(clock, today - timedelta(days=1), m.group("part"))
    if kind == "last_night":
        return _part_of(clock, today - timedelta(days=1), "night")
    if kind == "today":
        return clock.days(today, today)
    if kind == "tonight":
        return _part_of(clock, today, "evening")
    if kind == "this_part":
        return _part_of(clock, today, m.group("part"))
    if kind == "other_day":
        return clock.days(today - timedelta(days=7), today - timedelta(days=2))
    if kind == "ago":
        return _ago(clock, m.group("n"), m.group("unit"))
    if kind == "past":
        n = m.group("n")
        low, high = _count(n) if n else (1, 1)
        return _rolling(clock, high, m.group("unit"))
    if kind == "earlier":
        start = _period_start(clock, m.group("unit"), 0)
        return (clock.at(start), clock.at(today)) if start < today else None
    if kind == "period":
        which = " ".join(m.group("which").split())
        unit = m.group("unit")
        if unit == "weekend":
            return _weekend(clock, which != "this")
        back = 1 if which in ("last", "previous", "past") else 0
        if which == "this past":
            return _rolling(clock, 1, unit)
        first = _period_start(clock, unit, back)
        last_day = _period_start(clock, unit, back - 1) - timedelta(days=1) if back else today
        return clock.days(first, last_day)
    if kind == "weekend":
        return _weekend(clock, False)
    if kind == "weekday":
        wanted = WEEKDAYS.index(m.group("weekday"))
        back = (today.weekday() - wanted) % 7 or 7
        return _part_of(clock, today - timedelta(days=back), m.group("part"))
    if kind == "season":
        return _named_months(clock, SEASONS[m.group("season")], 3, m.group("which"))
    if kind == "month":
        return _named_months(clock, dates.MONTHS.index(m.group("month")) + 1, 1, m.group("which"))
    raise AssertionError(kind)


def _part_of(clock: _Clock, day: date, part: str | None) -> tuple[datetime, datetime]:
    if part is None:
        return clock.days(day, day)
    begin, end = PARTS[part]
    return clock.at(day, begin), clock.at(day, end)


def _count(said: str) -> tuple[int, int]:
    """(fewest, most) of a count in words or digits."""
    said = " ".join(said.split())
    if said in _VAGUE:
        return _VAGUE[said]
    if said.isdigit():
        return int(said), int(said)
    words = said.replace("-", " ").split()
    n = sum(_NUMBERS[w] for w in words)  # "twenty one": 20 + 1
    return n, n


def _ago(clock: _Clock, said: str, unit: str) -> tuple[datetime, datetime] | None:
    """ "N units ago": that day; that calendar week, month or year (a range for a vague N)."""
    low, high = _count(said)
    if low < 1 or high > _MOST_BACK[unit]:
        return None
    today = clock.today
    if unit == "day":
        return clock.days(today - timedelta(days=high), today - timedelta(days=low))
    if unit == "week":
        first = clock.week_start(high)
        return clock.days(first, clock.week_start(low) + timedelta(days=6))
    if unit == "month":
        return clock.at(clock.month_start(high)), clock.at(clock.month_start(low - 1))
    return clock.days(date(today.year - high, 1, 1), date(today.year - low, 12, 31))


def _rolling(clock: _Clock, n: int, unit: str) -> tuple[datetime, datetime] | None:
    """ "the past N units": from N units before now up to now."""
    days = _UNIT_DAYS[unit] * n
    if n < 1 or days > MAX_YEARS_BACK * 366:
        return None
    return clock.now - timedelta(days=days), clock.now


_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}
_MOST_BACK = {
    "day": MAX_YEARS_BACK * 366,
    "week": MAX_YEARS_BACK * 53,
    "month": MAX_YEARS_BACK * 12,
    "year": MAX_YEARS_BACK,
}


def _period_start(clock: _Clock, unit: str, back: int) -> date:
    if unit == "week":
        return clock.week_start(back)
    if unit == "month":
        return clock.month_start(back)
    return date(clock.today.year - back, 1, 1)


def _weekend(clock: _Clock, before_this: bool) -> tuple[datetime, datetime]:
    """The latest Saturday–Sunday that has begun; `before_this` ("last weekend" said on a
    weekend day): the one before it."""
    today = clock.today
    saturday = today - timedelta(days=(today.weekday() - 5) % 7)
    if before_this and today.weekday() >= 5:
        saturday -= timedelta(days=7)
    return clock.days(saturday, saturday + timedelta(days=1))


def _named_months(
    clock: _Clock, first_month: int, months: int, which: str
) -> tuple[datetime, datetime]:
    """`months` months from `first_month` in their latest occurrence that has begun; after
    "last" (or "this past") one that is under way now means the one before."""
    today = clock.today
    year = today.year if (today.month, 1) >= (first_month, 1) else today.year - 1
    start = date(year, first_month, 1)
    months_in = (today.year * 12 + today.month) - (year * 12 + first_month)
    if " ".join(which.split()) in ("last", "this past") and 0 <= months_in < months:
        start = date(year - 1, first_month, 1)
    index = start.year * 12 + start.month - 1 + months
    end = date(index // 12, index % 12 + 1, 1)
    return clock.at(start), clock.at(end)


def _blank(head: str, taken: list[tuple[int, int]]) -> str:
    """`head` with the time words replaced by spaces."""
    out = list(head)
    for a, b in taken:
        out[a:b] = " " * (b - a)
    return "".join(out)


# -- plans: a time that names when something will happen or is wanted ------------------------
# Kinds whose words point either way ("tonight": "what did we talk about tonight?" and "a
# recipe for tonight"); every other kind ("yesterday", "last Friday", "three days ago",
# "earlier today", "since March") names the past whatever the clause says.
_PAST_ONLY_WHICH = frozenset({"last", "this past", "past", "previous", "since", "back in"})


def _either_way(item: _Found) -> bool:
    if item.kind in ("tonight", "this_part", "weekend"):
        return True
    if item.kind == "today":
        return not item.match or not item.match.group(0).startswith("earlier")
    if item.kind in ("period", "weekday", "season", "month") and item.match:
        return " ".join(item.match.group("which").split()) not in _PAST_ONLY_WHICH
    return False


# The words that tell a clause's time, each weighed "strong" (a tensed auxiliary or verb: it
# decides) or "weak" (a verb or noun whose tense an auxiliary before it may carry: "did you
# suggest", "was your plan"), and read "past" or "plan" (the future, a wish, a request, the
# present: anything but a past that a conversation could have been held in).
_STRONG_PAST = frozenset(
    """did didn't didnt was wasn't wasnt were weren't werent had hadn't hadnt remind remember
    recall recap summarise summarize""".split()  # noqa: SIM905
)
_STRONG_PLAN = frozenset(
    """will 'll won't wont shall should shouldn't can can't cannot could couldn't would
    wouldn't might must ought gonna wanna gotta let's 'm am 're are aren't is isn't does
    doesn't don't""".split()  # noqa: SIM905
)
_WEAK_PLAN = frozenset(
    """want wants need needs hope plan plans planning host hosting suggest suggestion
    suggestions recommend recommendation recommendations idea ideas tip tips advice advise
    option options help do have 've""".split()  # noqa: SIM905
)
_WEAK_PAST = frozenset(
    """talk chat chats conversation conversations convo discussion discussions discuss say
    tell mention speak""".split()  # noqa: SIM905
)
# past tenses and participles that do not end in -ed
_IRREGULAR_PAST = frozenset(
    """said told gave given ate eaten went gone made saw seen got gotten came brought bought
    thought wrote written spoke spoken sent took taken found knew known met felt heard paid
    drank drove driven ran sang sung began begun forgot forgotten chose chosen taught caught
    sold spent lost won wore worn slept kept built meant held stood understood fell fallen
    flew flown grew grown threw thrown swam sat fed hid woke broke broken became done been
    drew drawn dug shook shaken rode ridden bitten blew blown dealt dreamt fought forgave
    forgiven froze frozen hung laid lent rang rung risen sank sunk shone shot
    showed shown sought spun stole stolen stuck struck swore sworn swept tore torn wept
    withdrew overslept mistook mistaken""".split()  # noqa: SIM905
)
# participles that are also present forms: past only after have / has / had ("have I read")
_PERFECT_ONLY = frozenset("read put cut set hit run come become quit shut hurt cost".split())
_PERFECT = frozenset({"have", "has", "had", "'ve", "haven't", "hasn't", "hadn't"})
# after these an -ed word is an adjective ("grilled fish", "a used car")
_DETERMINERS = frozenset(
    """a an the my your our his her their its this that these those some any no with of for
    about very so too more most really freshly""".split()  # noqa: SIM905
)
# after these an -ed word is an adjective or a passive in the present ("I'm tired")
_BE_NOW = frozenset({"am", "'m", "is", "are", "'re", "be", "being", "get", "gets", "feel", "feels"})
_NOT_VERBS = frozenset(
    """hundred sacred naked wicked beloved need speed indeed bed red shed morning evening
    during nothing something anything everything thing spring string bring king ring
    wedding ceiling pudding""".split()  # noqa: SIM905
)
# "want to", "going to": the infinitive after them is what is wanted or will happen
_TO_PLAN = frozenset(
    """want wants need needs have has plan plans planning hope hoping try trying like love
    intend wish""".split()  # noqa: SIM905
)
_WH = frozenset({"what", "where", "how", "which", "when", "whether", "who"})
_IS_AFTER = _WH | {"it", "that", "there", "here", "he", "she"}  # "it's": it is
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)*|'[a-z]+")
_SENTENCE_END = re.compile(r"[.!?;:](?=\s|$)|[\n()\[\]{}\"“”—…]|\s[-–]\s")
_ONWARDS = re.compile(r"\s*(?:on|onwards?|forward)\b")
_PIECE_END = re.compile(r",|\b(?:and|but|so|because|although|though|while|whereas)\b")


@dataclass(frozen=True)
class _Marker:
    at: int  # where the word begins in the text
    strong: bool
    past: bool


def names_a_plan(text: str, begin: int, end: int) -> bool:
    """Whether the time words at text[begin:end] name when something will happen or is wanted
    ("a recipe for tonight", "what should I wear on Friday?", "I'm hosting friends this
    weekend") rather than a past a conversation was held in ("what did we talk about
    tonight?", "the recipe you gave me on Friday"). Pure; see the module docstring."""
    low = _plain(text)
    return _planned(low, _message_markers(text, low), begin, end)


def _plain(text: str) -> str:
    return dates.fold(text).replace("’", "'")


def _planned(low: str, markers: list[_Marker], begin: int, end: int) -> bool:
    """names_a_plan, given `low` (_plain) and the message's markers."""
    before = low[max(0, begin - 12) : begin].split()
    if before and before[-1] == "for":  # "for tonight": when it is for, not when it was said
        return True
    if before and before[-1] == "from" and not _ONWARDS.match(low, end):
        return False  # "the recipe from this morning"; not "from today on"
    start, stop = _bounds(low, begin, end, _SENTENCE_END)
    first, last = _bounds(low, begin, end, _PIECE_END, start, stop)
    piece = [m for m in markers if first <= m.at < last]
    earlier = [m for m in piece if m.at < begin]
    later = [m for m in piece if m.at >= end]
    for strong in (True, False):  # in the piece: the nearest before, else the first after
        chosen = [m for m in earlier if m.strong == strong][-1:] or [
            m for m in later if m.strong == strong
        ][:1]
        if chosen:
            return not chosen[0].past
    rest = [m for m in markers if not first <= m.at < last]
    sentence = [m for m in rest if start <= m.at < stop]
    for scope in (sentence, rest):  # elsewhere in the sentence, then in the message
        for strong in (True, False):
            near = [m for m in scope if m.strong == strong]
            if near:
                nearest = min(near, key=lambda m: min(abs(m.at - begin), abs(m.at - end)))
                return not nearest.past
    return False  # nothing says: the past, as a time alone ("this morning?") always was


def _bounds(
    low: str, begin: int, end: int, ends: re.Pattern[str], lo: int = 0, hi: int | None = None
) -> tuple[int, int]:
    """[from, to) of the stretch of low[lo:hi] between two `ends` that holds [begin, end)."""
    hi = len(low) if hi is None else hi
    first, last = lo, hi
    for m in ends.finditer(low, lo, hi):
        if m.end() <= begin:
            first = m.end()
        elif m.start() >= end:
            last = m.start()
            break
    return first, last


def _markers(text: str, low: str, start: int, stop: int) -> list[_Marker]:
    """The words of low[start:stop] that tell a time, in order."""
    found = list(_WORD.finditer(low, start, stop))
    words = [m.group() for m in found]
    plain = [_contracted(w) for w in words]
    out: list[_Marker] = []
    for i, m in enumerate(found):
        at = m.start()
        read = _reading(
            words[i], plain[max(0, i - 3) : i], words[i + 1 : i + 3], text[at].islower()
        )
        if read is not None:
            out.append(_Marker(at, *read))
    return out


def _message_markers(text: str, low: str) -> list[_Marker]:
    """The markers of every sentence of `low`."""
    out: list[_Marker] = []
    start = 0
    for m in _SENTENCE_END.finditer(low):
        out += _markers(text, low, start, m.start())
        start = m.end()
    return out + _markers(text, low, start, len(low))


def _contracted(word: str) -> str:
    """The auxiliary a contraction ends in: "I'm" → "'m", "what's" → "is"; "Maria's" (no verb)
    and every other word as it is."""
    if "'" not in word or word in _STRONG_PAST or word in _STRONG_PLAN:  # "didn't", "let's"
        return word
    for tail in ("'ll", "'m", "'re", "'ve"):
        if word.endswith(tail):
            return tail
    if word.endswith("'s") and word[:-2] in _IS_AFTER:
        return "is"
    return word


def _reading(
    word: str, before: list[str], ahead: list[str], lower: bool
) -> tuple[bool, bool] | None:
    """(strong, past) of one word, or None: it tells no time. `before`: up to three words
    before it, `ahead`: up to two after it."""
    prev = before[-1] if before else ""
    if word.endswith("'d") and word not in _STRONG_PAST | _STRONG_PLAN:  # would or had
        return (True, False) if ahead[:1] in (["like"], ["love"], ["rather"], ["prefer"]) else None
    word = _contracted(word)
    if word == "to":
        if prev in _WH:  # "what to cook", "where to go"
            return True, False
        if prev == "going":  # "I'm going to"; "was I going to" is the past's
            return True, bool(set(before) & {"was", "were", "wasn't", "weren't"})
        if prev in _TO_PLAN or (prev == "me" and set(before) & {"remind", "remember"}):
            return False, False  # "want to", "remind me to": "did you want to" is past
        return None
    if word in ("remind", "remember", "recall") and "to" in ahead:
        return None  # "remind me to call": its "to" tells
    if word == "may" and not lower:
        return None  # "May": the month
    if word in _STRONG_PAST:
        return True, True
    if word in _STRONG_PLAN:
        return True, False
    if word in _WEAK_PLAN:
        return False, False
    if word in _WEAK_PAST:
        return False, True
    if word in _NOT_VERBS:
        return None
    if word in _PERFECT_ONLY:
        return (True, True) if set(before) & _PERFECT else None
    if word in _IRREGULAR_PAST or (
        len(word) >= 4 and word.endswith("ed") and not word.endswith("eed")
    ):
        if prev in _DETERMINERS or prev in _BE_NOW:
            return None  # "grilled fish", "I'm tired"
        return True, True
    if len(word) >= 5 and word.endswith("ing") and not before:
        return False, False  # "Planning a party this weekend, …": it opens its sentence
    return None
