"""What the time probes' phrases mean, for scoring (bench/time_probes.py). Pure.

This is the bench's own reading of each reference, written down so a probe's expected
conversations are not a matter of taste; caesar's resolver is not consulted. Every span is
[start, end) in the operator's zone, never past `now`; a conversation belongs to a span when
its local start time falls in it.

- today: midnight → now. this morning 05:00–12:00, this afternoon 12:00–18:00, this evening /
  tonight 18:00 → now; last night: yesterday 18:00 → today 05:00.
- yesterday, the day before yesterday, N days ago: that calendar day.
- a few days ago: 2–5 days back (both included).
- N weeks ago, a couple of weeks ago (N = 2), last week (N = 1): the calendar week (Monday to
  Sunday) N weeks back. this week: Monday → now; earlier this week: Monday → today's midnight.
- last weekend: Saturday and Sunday of the previous calendar week; this weekend: those of the
  current week, up to now (asked on a Sunday).
- N months ago, a month ago, last month: the calendar month N back; this month: the 1st → now;
  earlier this month: the 1st → today's midnight.
- N years ago, a year ago, last year: the calendar year N back; this year, earlier this year as
  for the month.
- <weekday> ("last Tuesday", "on Tuesday"): the most recent such day before today, 1–7 days
  back (on a Thursday, "last Thursday" is a week ago).
- a month without a year ("in August"): its latest occurrence that has begun (the current
  month, up to now, if it is this one).
- a season (northern hemisphere, meteorological: spring March–May, summer June–August, autumn
  September–November, winter December–February): its latest occurrence that has begun.
- between <month> and <month>: from the first month's start to the second's end, the second
  being its latest occurrence that has ended or begun, the first the latest one before it.
- a calendar date: that day. "X or Y": the union.
- recently: no span (not scored).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime, time, timedelta

Span = tuple[datetime, datetime]  # [start, end), aware, in the operator's zone

MONTHS = (
    "January February March April May June July August September October November December"
).split()
WEEKDAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "winter": 12}  # the first month of each
NUMBERS = "zero one two three four five six seven eight nine ten eleven twelve".split()


def at(day: date, now: datetime, hour: int = 0) -> datetime:
    return datetime.combine(day, time(hour), now.tzinfo)


def clip(span: Span, now: datetime) -> Span:
    return span[0], min(span[1], now)


def day(now: datetime, back: int) -> Span:
    d = now.date() - timedelta(days=back)
    return clip((at(d, now), at(d + timedelta(days=1), now)), now)


def days(now: datetime, first: int, last: int) -> Span:
    """Days `first` to `last` back, both included (first ≥ last)."""
    return day(now, first)[0], day(now, last)[1]


def part_of_today(now: datetime, start_hour: int, end_hour: int) -> Span:
    """From `start_hour` to `end_hour` (24: midnight) today, up to now."""
    end = at(now.date(), now) + timedelta(hours=end_hour)
    return clip((at(now.date(), now, start_hour), end), now)


def last_night(now: datetime) -> Span:
    yesterday = now.date() - timedelta(days=1)
    return clip((at(yesterday, now, 18), at(now.date(), now, 5)), now)


def week(now: datetime, back: int) -> Span:
    monday = now.date() - timedelta(days=now.weekday() + 7 * back)
    return clip((at(monday, now), at(monday + timedelta(days=7), now)), now)


def earlier_this_week(now: datetime) -> Span:
    return week(now, 0)[0], at(now.date(), now)


def weekend(now: datetime, back: int) -> Span:
    monday = week(now, back)[0].date()
    saturday = monday + timedelta(days=5)
    return clip((at(saturday, now), at(saturday + timedelta(days=2), now)), now)


def _month_start(year: int, month: int, now: datetime) -> datetime:
    year += (month - 1) // 12
    return at(date(year, (month - 1) % 12 + 1, 1), now)


def month(now: datetime, back: int) -> Span:
    index = now.year * 12 + now.month - 1 - back
    start = _month_start(index // 12, index % 12 + 1, now)
    return clip((start, _month_start(start.year, start.month + 1, now)), now)


def earlier_this_month(now: datetime) -> Span:
    return month(now, 0)[0], at(now.date(), now)


def year(now: datetime, back: int) -> Span:
    y = now.year - back
    return clip((at(date(y, 1, 1), now), at(date(y + 1, 1, 1), now)), now)


def earlier_this_year(now: datetime) -> Span:
    return year(now, 0)[0], at(now.date(), now)


def weekday(now: datetime, name: str) -> Span:
    back = (now.weekday() - WEEKDAYS.index(name)) % 7 or 7
    return day(now, back)


def named_month(now: datetime, name: str) -> Span:
    number = MONTHS.index(name) + 1
    y = now.year if number <= now.month else now.year - 1
    start = _month_start(y, number, now)
    return clip((start, _month_start(y, number + 1, now)), now)


def season(now: datetime, name: str) -> Span:
    first = SEASONS[name]
    # the latest start of this season that is not after now (winter starts in December)
    y = now.year if now.month >= first else now.year - 1
    start = _month_start(y, first, now)
    return clip((start, _month_start(y, first + 3, now)), now)


def between_months(now: datetime, first: str, last: str) -> Span:
    end_start, end = named_month(now, last)
    months_before = (MONTHS.index(last) - MONTHS.index(first)) % 12
    start = _month_start(end_start.year, end_start.month - months_before, now)
    return start, end


def calendar_day(now: datetime, when: date) -> Span:
    return clip((at(when, now), at(when + timedelta(days=1), now)), now)


def contains(spans: Iterable[Span], when: datetime) -> bool:
    return any(start <= when < end for start, end in spans)


def in_words(n: int) -> str:
    return NUMBERS[n] if n < len(NUMBERS) else str(n)
