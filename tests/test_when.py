"""The spans of time a message names, on the operator's clock (memory/recall/when.py). Pure.

Expected spans are written as local wall times in the operator's zone and converted to naive
UTC, so each assertion says "from local midnight of that day to local midnight of the next".
`NOW` is Thursday 29 October 2026, 15:00 UTC: 16:00 in Berlin, in the week after Berlin left
summer time (Sunday 25 October was 25 hours long there).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, available_timezones

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from caesar.memory.recall import when
from caesar.memory.recall.when import (
    MAX_CHARS,
    MAX_SPANS,
    NamedSpan,
    TimeRead,
    names_a_plan,
    read_time,
)

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
TOKYO = ZoneInfo("Asia/Tokyo")
NOW = datetime(2026, 10, 29, 15, 0)  # naive UTC; Thu 29 Oct 2026 16:00 CET in Berlin
# Thu 23:30 UTC: Fri 08:30 in Tokyo, Fri 00:30 in Berlin, Thu 19:30 in New York
LATE = datetime(2026, 10, 29, 23, 30)


def at(zone: tzinfo, year: int, month: int, day: int, hour: int = 0) -> datetime:
    """A local wall time in `zone` as naive UTC (how spans come back)."""
    return datetime(year, month, day, hour, tzinfo=zone).astimezone(UTC).replace(tzinfo=None)


def B(month: int, day: int, hour: int = 0, year: int = 2026) -> datetime:
    """Berlin wall time as naive UTC."""
    return at(BERLIN, year, month, day, hour)


def local(when: datetime, zone: tzinfo) -> datetime:
    return when.replace(tzinfo=UTC).astimezone(zone)


def spans(text: str, now: datetime = NOW, zone: tzinfo = BERLIN) -> list[tuple[datetime, datetime]]:
    return [(s.start, s.end) for s in read_time(text, now, zone).spans]


def said(text: str, now: datetime = NOW, zone: tzinfo = BERLIN) -> list[str]:
    return [s.said for s in read_time(text, now, zone).spans]


# -- every kind, resolved in Berlin ------------------------------------------------------------
KINDS = [
    # named days
    ("What did we talk about today?", [(B(10, 29), NOW)]),
    ("earlier today", [(B(10, 29), NOW)]),
    ("this morning", [(B(10, 29, 5), B(10, 29, 12))]),
    ("this afternoon", [(B(10, 29, 12), NOW)]),
    ("yesterday", [(B(10, 28), B(10, 29))]),
    ("Yesterday morning", [(B(10, 28, 5), B(10, 28, 12))]),
    ("yesterday afternoon", [(B(10, 28, 12), B(10, 28, 18))]),
    ("yesterday evening", [(B(10, 28, 18), B(10, 29))]),
    ("yesterday night", [(B(10, 28, 18), B(10, 29, 6))]),
    ("last night", [(B(10, 28, 18), B(10, 29, 6))]),
    ("the day before yesterday", [(B(10, 27), B(10, 28))]),
    ("day before yesterday", [(B(10, 27), B(10, 28))]),
    ("the other day", [(B(10, 22), B(10, 28))]),  # 2 to 7 days back
    # counted back, in words and digits: that day / calendar week / calendar month / year
    ("3 days ago", [(B(10, 26), B(10, 27))]),
    ("three days ago", [(B(10, 26), B(10, 27))]),
    ("a day ago", [(B(10, 28), B(10, 29))]),
    ("twenty days ago", [(B(10, 9), B(10, 10))]),
    ("a week ago", [(B(10, 19), B(10, 26))]),
    ("one week back", [(B(10, 19), B(10, 26))]),
    ("two weeks ago", [(B(10, 12), B(10, 19))]),  # Mon 12 – Sun 18 October
    ("2 weeks ago", [(B(10, 12), B(10, 19))]),
    ("a month ago", [(B(9, 1), B(10, 1))]),
    ("2 months ago", [(B(8, 1), B(9, 1))]),  # that calendar month
    ("two months ago", [(B(8, 1), B(9, 1))]),
    ("a year ago", [(B(1, 1, year=2025), B(1, 1))]),
    ("3 years ago", [(B(1, 1, year=2023), B(1, 1, year=2024))]),
    ("a year back", [(B(1, 1, year=2025), B(1, 1))]),
    # vague counts are ranges: a couple 1–3, a few 2–5, several 3–7 units back
    ("a couple of weeks ago", [(B(10, 5), B(10, 26))]),
    ("a couple days ago", [(B(10, 26), B(10, 29))]),
    ("a few days ago", [(B(10, 24), B(10, 28))]),
    ("a few weeks ago", [(B(9, 21), B(10, 19))]),
    ("several months ago", [(B(3, 1), B(8, 1))]),
    # calendar periods
    ("last week", [(B(10, 19), B(10, 26))]),
    ("this week", [(B(10, 26), NOW)]),
    ("last weekend", [(B(10, 24), B(10, 26))]),
    ("over the weekend", [(B(10, 24), B(10, 26))]),
    ("at the weekend", [(B(10, 24), B(10, 26))]),
    ("this past weekend", [(B(10, 24), B(10, 26))]),
    ("last month", [(B(9, 1), B(10, 1))]),
    ("this month", [(B(10, 1), NOW)]),
    ("last year", [(B(1, 1, year=2025), B(1, 1))]),
    ("this year", [(B(1, 1), NOW)]),
    ("earlier this week", [(B(10, 26), B(10, 29))]),  # up to the start of today
    ("earlier this month", [(B(10, 1), B(10, 29))]),
    ("earlier this year", [(B(1, 1), B(10, 29))]),
    ("Last Week", [(B(10, 19), B(10, 26))]),
    # weekdays: the most recent one before today
    ("last Tuesday", [(B(10, 27), B(10, 28))]),
    ("on Tuesday", [(B(10, 27), B(10, 28))]),
    ("on tuesday", [(B(10, 27), B(10, 28))]),  # after "on" any case counts
    ("this past Tuesday", [(B(10, 27), B(10, 28))]),
    ("last Thursday", [(B(10, 22), B(10, 23))]),  # asked on a Thursday: a week ago
    ("on Thursday", [(B(10, 22), B(10, 23))]),
    ("past Tuesday", [(B(10, 27), B(10, 28))]),
    ("on Monday morning", [(B(10, 26, 5), B(10, 26, 12))]),
    ("last Friday evening", [(B(10, 23, 18), B(10, 24))]),
    ("last Sunday", [(B(10, 25), B(10, 26))]),
    # months and seasons without a year: the latest occurrence that has begun
    ("in August", [(B(8, 1), B(9, 1))]),
    ("back in August", [(B(8, 1), B(9, 1))]),
    ("in October", [(B(10, 1), NOW)]),  # the current month, so far
    ("in November", [(B(11, 1, year=2025), B(12, 1, year=2025))]),
    ("last October", [(B(10, 1, year=2025), B(11, 1, year=2025))]),  # under way: the one before
    ("since March", [(B(3, 1), B(4, 1))]),
    ("in May", [(B(5, 1), B(6, 1))]),
    ("IN MAY", [(B(5, 1), B(6, 1))]),
    ("between March and May", [(B(3, 1), B(6, 1))]),
    ("from June to August", [(B(6, 1), B(9, 1))]),
    ("in the spring", [(B(3, 1), B(6, 1))]),  # meteorological, northern hemisphere
    ("in Spring", [(B(3, 1), B(6, 1))]),
    ("in the summer", [(B(6, 1), B(9, 1))]),
    ("last summer", [(B(6, 1), B(9, 1))]),
    ("in autumn", [(B(9, 1), NOW)]),
    ("in the fall", [(B(9, 1), NOW)]),
    ("last fall", [(B(9, 1, year=2025), B(12, 1, year=2025))]),
    ("in the winter", [(B(12, 1, year=2025), B(3, 1))]),
    # combinations
    ("yesterday or the day before", [(B(10, 28), B(10, 29)), (B(10, 27), B(10, 28))]),
    ("last Monday or the day before", [(B(10, 26), B(10, 27)), (B(10, 25), B(10, 26))]),
    ("between last Monday and last Wednesday", [(B(10, 26), B(10, 29))]),
    ("between yesterday and today", [(B(10, 28), NOW)]),
    ("yesterday and today", [(B(10, 28), B(10, 29)), (B(10, 29), NOW)]),
]


@pytest.mark.parametrize(("text", "expected"), KINDS, ids=[t for t, _ in KINDS])
def test_every_kind_resolves_to_local_boundaries_in_berlin(text, expected):
    assert spans(text) == expected


@pytest.mark.parametrize(("text", "expected"), KINDS, ids=[t for t, _ in KINDS])
def test_nothing_starts_after_now_and_every_end_is_clipped_at_now(text, expected):
    for start, end in spans(text):
        assert start < end <= NOW


DAY_PHRASES = [
    "today",
    "yesterday",
    "the day before yesterday",
    "3 days ago",
    "a week ago",
    "last week",
    "this week",
    "last weekend",
    "last month",
    "2 months ago",
    "last year",
    "last Tuesday",
    "in August",
    "in the winter",
    "earlier this month",
]


@pytest.mark.parametrize("zone", [BERLIN, NEW_YORK, TOKYO, UTC], ids=str)
@pytest.mark.parametrize("text", DAY_PHRASES)
def test_day_spans_begin_and_end_at_local_midnight(text, zone):
    (start, end), *_ = spans(text, LATE, zone)
    assert local(start, zone).time().isoformat() == "00:00:00"
    assert end == LATE or local(end, zone).time().isoformat() == "00:00:00"


# -- daylight saving ---------------------------------------------------------------------------
def test_the_week_berlin_left_summer_time_is_a_week_and_an_hour():
    # Mon 19 Oct 00:00 CEST (18 Oct 22:00 UTC) to Mon 26 Oct 00:00 CET (25 Oct 23:00 UTC)
    assert spans("last week") == [(datetime(2026, 10, 18, 22), datetime(2026, 10, 25, 23))]
    ((start, end),) = spans("last Sunday")
    assert end - start == timedelta(hours=25)
    ((start, end),) = spans("last weekend")
    assert end - start == timedelta(hours=49)


def test_the_week_berlin_entered_summer_time_is_a_week_less_an_hour():
    now = datetime(2026, 4, 1, 10, 0)  # Wed 1 April, 12:00 CEST
    assert spans("last week", now) == [(datetime(2026, 3, 22, 23), datetime(2026, 3, 29, 22))]
    ((start, end),) = spans("last Sunday", now)
    assert (start, end) == (datetime(2026, 3, 28, 23), datetime(2026, 3, 29, 22))
    assert end - start == timedelta(hours=23)
    assert spans("last month", now) == [(datetime(2026, 2, 28, 23), datetime(2026, 3, 31, 22))]


def test_last_night_across_the_spring_change():
    now = datetime(2026, 3, 29, 10, 0)  # Sun 29 March, 12:00 CEST
    # Sat 18:00 CET (17:00 UTC) to Sun 06:00 CEST (04:00 UTC): eleven hours of wall clock
    assert spans("last night", now) == [(datetime(2026, 3, 28, 17), datetime(2026, 3, 29, 4))]


def test_new_york_leaving_summer_time():
    now = datetime(2026, 11, 3, 15, 0)  # Tue 3 Nov 2026, 10:00 EST
    assert spans("yesterday", now, NEW_YORK) == [
        (datetime(2026, 11, 2, 5), datetime(2026, 11, 3, 5))
    ]
    ((start, end),) = spans("last Sunday", now, NEW_YORK)  # 1 November, 25 hours
    assert (start, end) == (datetime(2026, 11, 1, 4), datetime(2026, 11, 2, 5))
    assert spans("last week", now, NEW_YORK) == [
        (datetime(2026, 10, 26, 4), datetime(2026, 11, 2, 5))
    ]


# -- zones: the operator's day, not UTC's ------------------------------------------------------
@pytest.mark.parametrize(
    ("zone", "today"),
    [
        (UTC, date(2026, 10, 29)),
        (NEW_YORK, date(2026, 10, 29)),
        (BERLIN, date(2026, 10, 30)),
        (TOKYO, date(2026, 10, 30)),
    ],
    ids=str,
)
def test_named_days_are_the_operators_days(zone, today):
    def midnight(days_back: int) -> datetime:
        day = today - timedelta(days=days_back)
        return at(zone, day.year, day.month, day.day)

    assert spans("today", LATE, zone) == [(midnight(0), LATE)]
    assert spans("yesterday", LATE, zone) == [(midnight(1), midnight(0))]
    assert spans("the day before yesterday", LATE, zone) == [(midnight(2), midnight(1))]
    assert spans("3 days ago", LATE, zone) == [(midnight(3), midnight(2))]
    monday = today - timedelta(days=today.weekday())
    assert spans("this week", LATE, zone) == [
        (at(zone, monday.year, monday.month, monday.day), LATE)
    ]


def test_tokyo_is_nine_hours_ahead_all_year():
    assert spans("yesterday", LATE, TOKYO) == [
        (datetime(2026, 10, 28, 15), datetime(2026, 10, 29, 15))
    ]
    summer = datetime(2026, 7, 15, 12, 0)
    assert spans("yesterday", summer, TOKYO) == [
        (datetime(2026, 7, 13, 15), datetime(2026, 7, 14, 15))
    ]


def test_today_asked_at_the_stroke_of_local_midnight_is_no_span():
    # 15:00 UTC is 00:00 on Friday in Tokyo: today has not begun to hold anything
    assert spans("today", NOW, TOKYO) == []
    assert spans("yesterday", NOW, TOKYO) == [(datetime(2026, 10, 28, 15), NOW)]


def test_the_default_zone_is_utc():
    assert read_time("yesterday", NOW) == read_time("yesterday", NOW, UTC)
    assert spans("yesterday", NOW, UTC) == [(datetime(2026, 10, 28), datetime(2026, 10, 29))]


@pytest.mark.parametrize("zone", [BERLIN, NEW_YORK, TOKYO, UTC], ids=str)
@pytest.mark.parametrize(
    ("text", "days"),
    [
        ("in the past month", 30),
        ("the past month", 30),
        ("the last 3 days", 3),
        ("in the last year", 365),
        ("the past week", 7),
        ("this past week", 7),
        ("over the past few days", 5),  # the most of "a few"
        ("the past couple of weeks", 21),
        ("the past 2 weeks", 14),
        ("the previous week", 7),
        ("previous month", 30),
        ("in the last 12 months", 360),  # a month is 30 days here
    ],
)
def test_rolling_periods_reach_back_from_now_whatever_the_zone(text, days, zone):
    assert spans(text, NOW, zone) == [(NOW - timedelta(days=days), NOW)]


# -- periods and weekdays on other days of the week --------------------------------------------
def test_weekdays_asked_on_a_tuesday():
    now = datetime(2026, 10, 27, 12, 0)  # Tue 27 October, 13:00 CET
    assert spans("last Tuesday", now) == [(B(10, 20), B(10, 21))]  # a week ago, not today
    assert spans("on Tuesday", now) == [(B(10, 20), B(10, 21))]
    assert spans("this Tuesday", now) == [(B(10, 20), B(10, 21))]
    assert spans("on Thursday", now) == [(B(10, 22), B(10, 23))]
    assert spans("last Thursday", now) == [(B(10, 22), B(10, 23))]
    assert spans("on Monday", now) == [(B(10, 26), B(10, 27))]  # yesterday
    assert spans("Monday", now) == []  # a weekday alone names no day


def test_weekends_asked_on_a_sunday_and_a_saturday():
    sunday = datetime(2026, 10, 25, 12, 0)
    assert spans("last weekend", sunday) == [(B(10, 17), B(10, 19))]  # the one before this
    assert spans("this weekend", sunday) == [(B(10, 24), sunday)]
    assert spans("over the weekend", sunday) == [(B(10, 24), sunday)]
    saturday = datetime(2026, 10, 24, 12, 0)
    assert spans("last weekend", saturday) == [(B(10, 17), B(10, 19))]
    assert spans("this weekend", saturday) == [(B(10, 24), saturday)]
    monday = datetime(2026, 10, 26, 12, 0)
    assert spans("last weekend", monday) == [(B(10, 24), B(10, 26))]


def test_earlier_this_period_on_its_first_day_is_no_span():
    monday = datetime(2026, 10, 26, 12, 0)
    assert spans("earlier this week", monday) == []
    assert spans("this week", monday) == [(B(10, 26), monday)]
    new_year = datetime(2026, 1, 1, 12, 0)
    assert spans("earlier this year", new_year) == []
    assert spans("earlier this month", new_year) == []
    assert spans("this year", new_year) == [(B(1, 1), new_year)]
    assert spans("last year", new_year) == [(B(1, 1, year=2025), B(1, 1))]
    assert spans("last month", new_year) == [(B(12, 1, year=2025), B(1, 1))]
    assert spans("in January", new_year) == [(B(1, 1), new_year)]


def test_parts_of_today_that_have_not_begun_are_no_span():
    # 16:00 in Berlin: the evening has not begun
    assert spans("this evening") == []
    evening = datetime(2026, 10, 29, 19, 0)  # 20:00 CET
    assert spans("this evening", evening) == [(B(10, 29, 18), evening)]
    assert spans("tonight", evening) == [(B(10, 29, 18), evening)]  # the evening, as said
    assert spans("tonight") == []
    early = datetime(2026, 10, 29, 3, 0)  # 04:00 CET
    assert spans("this morning", early) == []


def test_a_month_asked_in_that_month():
    december = datetime(2026, 12, 15, 12, 0)
    assert spans("last December", december) == [(B(12, 1, year=2025), B(1, 1))]
    assert spans("in December", december) == [(B(12, 1), december)]
    assert spans("in the winter", december) == [(B(12, 1), december)]
    assert spans("last winter", december) == [(B(12, 1, year=2025), B(3, 1))]


def test_seasons_asked_in_january():
    january = datetime(2027, 1, 15, 12, 0)
    # the winter under way began in December; "last winter" is the one before it
    assert spans("last winter", january) == [(B(12, 1, year=2025), B(3, 1))]
    assert spans("this past winter", january) == [(B(12, 1, year=2025), B(3, 1))]
    assert spans("in the winter", january) == [(B(12, 1), january)]
    assert spans("during the winter", january) == [(B(12, 1), january)]
    assert spans("last summer", january) == [(B(6, 1), B(9, 1))]


def test_a_range_that_does_not_wrap_the_year():
    assert spans("from November to January", datetime(2027, 2, 10, 12)) == [
        (B(11, 1), B(2, 1, year=2027))
    ]
    assert spans("from September to November", datetime(2026, 11, 10, 12)) == [
        (B(9, 1), datetime(2026, 11, 10, 12))
    ]


# -- calendar dates, as dates.py reads them -----------------------------------------------------
def test_calendar_dates_still_work_with_their_day_of_slack_in_utc():
    # dates.py spans are naive UTC with a day either side, not resolved in the zone
    assert spans("on 3 October 2026") == [(datetime(2026, 10, 2), datetime(2026, 10, 5))]
    assert spans("2026-10-03") == [(datetime(2026, 10, 2), datetime(2026, 10, 5))]
    assert spans("on October 3rd, 2026") == [(datetime(2026, 10, 2), datetime(2026, 10, 5))]
    assert spans("March 2023") == [(datetime(2023, 2, 28), datetime(2023, 4, 2))]
    assert said("What did we say on 3 October 2026?") == ["3 October 2026"]


def test_calendar_dates_are_clipped_at_now_too():
    # the slack would reach past now; read_time clips it as the docstring promises
    assert spans("on 29 October 2026") == [(datetime(2026, 10, 28), NOW)]
    assert spans("on 28 October") == [(datetime(2026, 10, 27), NOW)]
    assert spans("October 2026") == [(datetime(2026, 9, 30), NOW)]
    # a day without a year not yet reached this year is last year's
    assert spans("on 30 October") == [(datetime(2025, 10, 29), datetime(2025, 11, 1))]


def test_tomorrows_date_with_its_year_reaches_today_through_the_slack():
    # documented behaviour: 30 October 2026 is tomorrow, but its day of slack begins
    # yesterday (UTC), so today so far is read
    assert spans("on 30 October 2026") == [(datetime(2026, 10, 29), NOW)]


def test_a_future_day_with_its_year_is_no_span():
    assert spans("What is planned on 31 October 2026?") == []


def test_a_day_that_is_none():
    assert spans("on 31 February") == []
    # with a year its month is still read (as dates.py does for "30 February 2023")
    assert spans("on 31 February 2026") == [(datetime(2026, 1, 31), datetime(2026, 3, 2))]


def test_a_calendar_range():
    assert spans("between 3 March 2026 and 5 May 2026") == [
        (datetime(2026, 3, 2), datetime(2026, 5, 7))
    ]
    assert said("from 2026-03-01 to 2026-04-01") == ["2026-03-01 2026-04-01"]


# -- recently / lately -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    ["recently", "What have we talked about lately?", "anything of late?", "Recently I felt"],
)
def test_recently_is_a_preference_not_a_span(text):
    read = read_time(text, NOW, BERLIN)
    assert read.recent is True
    assert read.spans == ()


def test_recently_with_a_span():
    read = read_time("recently, yesterday", NOW, BERLIN)
    assert read.recent is True
    assert [(s.start, s.end) for s in read.spans] == [(B(10, 28), B(10, 29))]


def test_no_time_is_not_recent():
    read = read_time("what is my dog called?", NOW, BERLIN)
    assert read == TimeRead((), False, "what is my dog called?")


# -- no false spans ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        "may I ask",
        "May I ask you something?",
        "I may go",
        "could we march 10 miles",
        "we march on",
        "in march",  # lower-case march is a verb
        "in may be",
        "the second one",
        "a while ago",
        "a long time ago",
        "next Tuesday",
        "see you next Friday",
        "next week",
        "next month",
        "next year",
        "tomorrow",
        "tomorrow morning",
        "every Monday",
        # a weekday alone names no day, capitalised or not ("the Sunday mass")
        "Monday",
        "monday",
        "What did we discuss Monday?",
        "what about tuesday",
        "Tuesday morning",
        "The Sunday mass",
        "Ash Wednesday",
        "between Monday and Wednesday",
        "Friday next",
        "Fall down",
        "spring cleaning",
        "Spring is here",
        "Summer is nice",
        "winter",
        "the last time",
        "the last one",
        "last but not least",
        "in the past",
        "past tense",
        "a year",
        "the week",
        "weekly",
        "a month of Sundays",
        "it was a good year",
        "this is great",
        "come back",
        "I'm back",
        "going back",
        "an hour ago",
        "5 minutes ago",
        "0 days ago",
        "zero days ago",
        "the day before",
        "or the day before",  # nothing before it to count from
        "April fool",
        "",
        "   ",
    ],
)
def test_ordinary_words_name_no_span(text):
    assert spans(text) == []


def test_lower_case_month_after_an_intro_word_only_for_unambiguous_months():
    assert spans("in august") == [(B(8, 1), B(9, 1))]
    assert spans("in march") == []
    assert spans("in March") == [(B(3, 1), B(4, 1))]


# -- what actually happens on borderline wording (documented, not endorsed) --------------------
def test_borderline_this_weekend_on_a_weekday_is_the_weekend_just_gone():
    # said on a Thursday it usually means the coming one (the future, so nothing); it is read
    # as the latest weekend that has begun
    assert spans("this weekend") == [(B(10, 24), B(10, 26))]


def test_a_name_after_and_is_no_month():
    # "and" ends a range of months ("between March and May") only after a month: a person
    # called June or May is no month
    assert spans("Mike and June went to the cinema") == []
    assert spans("I saw Tom and May") == []
    assert spans("in April and May") == [(B(4, 1), B(5, 1)), (B(5, 1), B(6, 1))]


def test_borderline_on_friday_next_is_last_friday():
    # British "on Friday next" (the coming Friday): "next" is looked for only before the weekday
    assert spans("on Friday next") == [(B(10, 23), B(10, 24))]


def test_borderline_this_season_is_no_span():
    # "this winter" / "this spring" are not read at all ("this" does not introduce a season)
    assert spans("this winter", datetime(2027, 1, 15, 12)) == []
    assert spans("this spring", datetime(2026, 4, 15, 12)) == []
    assert spans("this March", datetime(2026, 4, 15, 12)) == []


def test_borderline_a_fall_is_a_season_after_in():
    assert spans("I fell in the fall") == [(B(9, 1), NOW)]
    assert spans("I love spring cleaning in the spring") == [(B(3, 1), B(6, 1))]


def test_borderline_the_last_week_is_rolling_but_last_week_is_the_calendar_week():
    assert spans("in the last week") == [(NOW - timedelta(days=7), NOW)]
    assert spans("last week") == [(B(10, 19), B(10, 26))]
    assert spans("previous week") == [(NOW - timedelta(days=7), NOW)]


def test_time_words_are_blanked_even_when_they_resolve_to_nothing():
    read = read_time("what did we say this evening?", NOW, BERLIN)
    assert read.spans == ()
    assert read.rest == "what did we say " + " " * len("this evening") + "?"
    assert read_time("73201 weeks ago", NOW, BERLIN).rest.strip() == ""


# -- absurd input ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        "100000 years ago",
        "9999999 days ago",
        "9999999 weeks ago",
        "9999999 months ago",
        "201 years ago",
        "2401 months ago",
        "73201 days ago",
        "the past 201 years",
        "the past 2500 months",
        "the past 9999999 days",
        "the past 0 days",
        "9" * 5000 + " days ago",
        "31 February",
    ],
)
def test_absurd_counts_name_nothing_and_do_not_crash(text):
    assert spans(text) == []


def test_counts_up_to_max_years_back_are_read():
    assert spans("200 years ago") == [(B(1, 1, year=1826), B(1, 1, year=1827))]
    assert spans("2400 months ago") == [(B(10, 1, year=1826), B(11, 1, year=1826))]
    old = datetime(1900, 6, 1, 12)
    assert spans("200 years ago", old, UTC) == [(datetime(1700, 1, 1), datetime(1701, 1, 1))]
    assert spans("the past 200 years", old, UTC) == [(old - timedelta(days=73000), old)]


def test_weeks_beyond_max_years_back_are_not_read():
    assert spans("50000 weeks ago") == []


@pytest.mark.parametrize(
    ("text", "days_back"),
    [("twenty-one days ago", 21), ("twenty one days ago", 21), ("forty two days ago", 42)],
)
def test_compound_numbers_are_not_read_as_their_last_word(text, days_back):
    day = date(2026, 10, 29) - timedelta(days=days_back)
    assert spans(text) in ([], [(B(day.month, day.day), B(day.month, day.day) + timedelta(days=1))])


@pytest.mark.parametrize(
    ("text", "now", "first_month"),
    [
        ("between March and May", datetime(2026, 4, 15, 12), 3),
        ("from March to May", datetime(2026, 4, 15, 12), 3),
        ("from November to January", datetime(2026, 12, 15, 12), 11),
        ("from November to January", datetime(2026, 11, 10, 12), 11),
    ],
)
def test_a_month_range_under_way_starts_at_its_first_month(text, now, first_month):
    # either the range so far (first month of this cycle .. now) or the last whole one is
    # sensible; a span that begins with the range's last month is neither
    ((start, end),) = spans(text, now, UTC)
    assert start.month == first_month and start.day == 1
    assert end - start <= timedelta(days=92)


def test_huge_text_reads_only_its_head():
    assert spans("x" * MAX_CHARS + " yesterday") == []
    assert spans("yesterday " + "x" * 1_000_000) == [(B(10, 28), B(10, 29))]
    assert len(read_time("x" * 1_000_000, NOW, BERLIN).rest) == MAX_CHARS
    for text in ("a couple of " * 500, "in May " * 500, "Monday " * 500, "last " * 1000):
        read = read_time(text, NOW, BERLIN)
        assert len(read.spans) <= MAX_SPANS


def test_unicode_around_time_words():
    assert spans("¿Qué hablamos yesterday? 🙂") == [(B(10, 28), B(10, 29))]
    assert spans("名前 last week ✓") == [(B(10, 19), B(10, 26))]
    assert spans("straße in May") == [(B(5, 1), B(6, 1))]


@pytest.mark.parametrize("text", ["İİİ in May", "İİİİİİ since March"])
def test_dotted_capital_i_does_not_crash(text):
    read_time(text, NOW, BERLIN)


def test_dotted_capital_i_keeps_offsets():
    read = read_time("İstanbul yesterday", NOW, BERLIN)
    assert said("İstanbul yesterday") == ["yesterday"]
    assert read.rest == "İstanbul          "


# -- plans are not questions about the past (issue 46, item 5) ---------------------------------
# Saturday 31 October 2026, 21:00 UTC: 22:00 in Berlin, so this morning, tonight, this weekend,
# "on Friday" (yesterday) and "on Saturday" (a week ago) have all begun and would name a span.
SATURDAY_NIGHT = datetime(2026, 10, 31, 21, 0)

# The same time words in both halves. A plan names no span; a question or statement about the
# past names one.
PLANS = [
    "Can you suggest a dinner recipe for tonight?",
    "Any plans for this weekend?",
    "What should I order at a wine bar on Friday?",
    "I'm going to see a concert tonight, what should I wear?",
    "I want to cook something special this evening.",
    "Help me plan a picnic this weekend.",
    "I'm hosting friends this weekend, ideas?",
    "What should I wear on Friday for the office party?",
    "Could you recommend a movie to watch tonight?",
    "I need to finish my report today, how should I split the work?",
    "What should I bring to the barbecue on Saturday?",
    "I'm thinking of going for a run this morning, is it too cold?",
    "I'll be travelling in May, which cities are worth a visit?",
    "What's a good workout plan for this week?",
    "I'd like to read a few books this month, any suggestions?",
    "Should I take an umbrella today?",
    "We're having guests over this evening, what dessert would go well?",
    "What can I make for lunch today with eggs and spinach?",
    "I'm planning to repaint the kitchen this month, which colours work?",
    "Where should we go hiking on Saturday?",
    "I'm going to Lisbon in the summer, what should I pack?",
]
PAST = [
    "What did we talk about tonight?",
    "What did we discuss this weekend?",
    "What did I eat on Friday?",
    "Remind me what we discussed this evening.",
    "I told you something this morning, what was it?",
    "What was the recipe you gave me on Friday?",
    "Which wine did you recommend this weekend?",
    "What did I say about my report today?",
    "What movie did you suggest tonight?",
    "What did I bring to the barbecue on Saturday?",
    "What were we talking about this morning?",
    "Which books did I mention this month?",
    "Where did I say I went hiking on Saturday?",
    "What did we decide about the kitchen colours this week?",
    "Did I tell you about my trip in May?",
    "What dessert did you suggest this evening?",
    "The workout plan you made for me this week, what was in it?",
    "What was I asking you about umbrellas today?",
    "Can you remind me what we talked about this afternoon?",
    "You mentioned a good bakery this morning, what was its name?",
    "What did I tell you about Lisbon in the summer?",
]
# Written after the rule and checked without changing it: other activities, other phrasings.
# The first was held out (17 of 20 at first; the sentence-then-message fallback came from its
# two present-tense misses); the second was written after that change (19 of 20: "drew" was
# missing from the irregular past forms, which were then completed).
REWORDED = (
    [
        "Got any tips for a first date tonight?",  # missed: "got" reads as a past
        "My sister visits on Sunday; what board games would suit a family of five?",
        "Thinking about baking bread this afternoon — which flour works best?",
        "How do I prepare for a job interview this Friday?",
        "Is it a good idea to go swimming this evening after eating?",
        "Which trail would you pick for a long walk this weekend?",
        "I have a dentist appointment this afternoon, how can I calm my nerves?",
        "Shall we make a grocery list for this week?",
        "My parents arrive tonight. What could I cook for them?",
        "Going to the theatre over the weekend — what should I know about the play?",
    ],
    [
        "Which board games did I say my sister liked on Sunday?",
        "What flour did you advise for bread this afternoon?",
        "How did the job interview go on Friday?",
        "I mentioned a swimming pool this evening, which one was it?",
        "Which trail had you picked for me over the weekend?",
        "I described my dentist visit this afternoon; what did I say?",
        "Show me the grocery list we wrote this week.",
        "What did I cook for my parents tonight?",
        "Our chat about the play over the weekend — what was the title?",
        "What first-date tips did you give me tonight?",
    ],
)
REWORDED_AGAIN = (
    [
        "We fly to Rome on Sunday. Which neighbourhood should we stay in?",
        "Tonight I'm making risotto for the first time, any advice?",
        "Need a playlist for this evening's dinner party.",
        "Will it be too windy to cycle this afternoon?",
        "I'd love to try a new yoga class this week, what style suits beginners?",
        "My friends are coming over on Saturday and I have no idea what to cook.",
        "Can we brainstorm birthday gifts for my dad today?",
        "Is there anything I ought to read before the book club in December?",
        "I'm about to leave for the airport this morning, what should I not forget?",
        "Please put together a study schedule for this month.",
    ],
    [
        "What risotto tips did you share tonight?",
        "I asked you about a playlist this evening; which songs were on it?",
        "Was it windy when I cycled this afternoon?",
        "Which yoga style did we settle on this week?",
        "My friends came over on Saturday — what did I cook?",
        "What gift ideas for my dad came up today?",
        "What did I say I'd read for the book club in December?",
        "Which flight did I book this morning?",
        "The study schedule we drew up this month — can you show it again?",
        "Remind me which café we went to on Sunday.",
    ],
)


def misread(plans: list[str], past: list[str]) -> list[str]:
    """The messages read wrong: a plan that names a span, a past that names none."""
    wrong = [f"plan read as past: {t}" for t in plans if spans(t, SATURDAY_NIGHT)]
    return wrong + [f"past read as a plan: {t}" for t in past if not spans(t, SATURDAY_NIGHT)]


def test_every_message_of_the_sets_names_a_span_without_the_plan_check(monkeypatch):
    # the sets measure the plan check, not the reading: without it each one names a span at
    # SATURDAY_NIGHT
    monkeypatch.setattr(when, "_planned", lambda low, markers, begin, end: False)
    for text in PLANS + PAST + REWORDED[0] + REWORDED[1] + REWORDED_AGAIN[0] + REWORDED_AGAIN[1]:
        assert spans(text, SATURDAY_NIGHT), text


def test_plans_and_past_questions_with_the_same_time_words():
    assert len(PLANS) >= 20 and len(PAST) >= 20
    wrong = misread(PLANS, PAST)
    print(
        f"\nplans and the past: {len(PLANS) + len(PAST) - len(wrong)} of {len(PLANS) + len(PAST)}"
    )
    print("\n".join(wrong))
    assert len(wrong) <= 0.05 * (len(PLANS) + len(PAST)), wrong


@pytest.mark.parametrize("plans, past", [REWORDED, REWORDED_AGAIN], ids=["reworded", "again"])
def test_plans_and_past_questions_reworded(plans, past):
    wrong = misread(plans, past)
    print(f"\nreworded: {len(plans) + len(past) - len(wrong)} of {len(plans) + len(past)}")
    print("\n".join(wrong))
    assert len(wrong) <= 0.1 * (len(plans) + len(past)), wrong


def test_a_plans_time_words_are_still_blanked_from_the_rest():
    text = "Can you suggest a dinner recipe for tonight?"
    read = read_time(text, SATURDAY_NIGHT, BERLIN)
    assert read.spans == ()
    assert read.rest == text.replace("tonight", " " * len("tonight"))


@pytest.mark.parametrize(
    "text, named",
    [
        ("What should I cook, given what I ate yesterday?", "yesterday"),
        ("Should I repeat what I did last Friday?", "last Friday"),
        ("I want to finish what we started earlier today", "earlier today"),
        ("What should I do with the kale I bought three days ago?", "three days ago"),
        ("I'm still thinking about what you said last weekend", "last weekend"),
        ("What should I read next, given what I read since March?", "since March"),
        ("Any ideas for dinner, like what we had this past Friday?", "this past Friday"),
    ],
)
def test_the_past_only_words_ignore_a_plan_around_them(text, named):
    assert said(text, SATURDAY_NIGHT) == [named]


def test_each_time_in_a_message_gets_its_own_reading():
    text = "I told you this morning that I'm cooking tonight, any wine ideas?"
    assert said(text, SATURDAY_NIGHT) == ["this morning"]
    text = "What did we discuss this morning, and what should I cook tonight?"
    assert said(text, SATURDAY_NIGHT) == ["this morning"]
    assert said("I cooked pasta this morning but tonight I want soup", SATURDAY_NIGHT) == [
        "this morning"
    ]


def test_a_continued_weekday_or_month_is_read_as_the_one_it_continues():
    assert said("I'm free on Monday or Tuesday, what should we plan?", SATURDAY_NIGHT) == []
    assert said("What did we talk about on Monday or Tuesday?", SATURDAY_NIGHT) == [
        "on Monday",
        "or Tuesday",
    ]
    assert said("I'll be away between March and May, any tips?", SATURDAY_NIGHT) == []
    assert said("What did we discuss between March and May?", SATURDAY_NIGHT) == [
        "between March and May"
    ]


@pytest.mark.parametrize(
    "text, plan",
    [
        # the word just before: "for" a plan, "from" the past
        ("What's for dinner tonight?", True),  # "for" is not just before: "'s" (is) decides
        ("Ideas for tonight", True),
        ("the recipe from this morning", False),
        ("from today on I want to run", True),
        # a past auxiliary governs the verbs after it; a nearer one before the time wins
        ("What would you suggest tonight?", True),
        ("What did you suggest tonight?", False),
        ("What did I say I should cook tonight?", True),
        ("Can you remind me what we talked about tonight?", False),
        ("Remind me to call my mother tonight", True),
        ("What were you going to tell me this morning?", False),
        ("What am I doing this weekend?", True),
        ("What was I doing this weekend?", False),
        ("What have we discussed this week?", False),
        ("What books have I read this month?", False),
        # adjectives and nouns are no verbs
        ("What should I serve with grilled fish tonight?", True),
        ("I'm tired today", True),
        ("I love spring cleaning in the spring", False),
        # nothing in the message says: the past, as before
        ("this morning?", False),
        ("Tonight, what did we talk about?", False),
        ("Tonight, any ideas?", True),
    ],
)
def test_names_a_plan(text, plan):
    low = text.lower()
    for phrase in ("tonight", "this morning", "this weekend", "this week", "this month",
                   "today", "in the spring"):  # fmt: skip
        if phrase in low:
            begin = low.rindex(phrase) if phrase == "in the spring" else low.index(phrase)
            assert names_a_plan(text, begin, begin + len(phrase)) is plan
            return
    raise AssertionError(text)


# -- shape of the answer -----------------------------------------------------------------------
def test_spans_come_in_the_order_named_at_most_max_spans_and_deduplicated():
    text = "yesterday, last week, last month, last year and two years ago"
    assert said(text) == ["yesterday", "last week", "last month", "last year"]
    assert len(spans(text)) == MAX_SPANS
    assert said("yesterday and yesterday") == ["yesterday"]
    assert said("on Tuesday, I mean last Tuesday") == ["on Tuesday"]


def test_rest_blanks_the_time_words_and_keeps_the_length():
    text = "what did you suggest last week about my run?"
    read = read_time(text, NOW, BERLIN)
    assert read.rest == "what did you suggest           about my run?"
    assert len(read.rest) == len(text)


def test_contains_and_as_json():
    read = read_time("yesterday", NOW, BERLIN)
    assert read.contains(B(10, 28))
    assert read.contains(B(10, 28, 23))
    assert not read.contains(B(10, 29))  # [start, end)
    assert not read.contains(B(10, 27, 23))
    assert read.spans[0].as_json() == {
        "said": "yesterday",
        "from": "2026-10-27T23:00:00",
        "to": "2026-10-28T23:00:00",
    }
    assert not TimeRead().contains(NOW)
    span = NamedSpan(datetime(2026, 1, 1), datetime(2026, 1, 2), "x")
    assert span.as_json()["from"] == "2026-01-01T00:00:00"


def test_a_skipped_local_day_gives_no_empty_span():
    apia = ZoneInfo("Pacific/Apia")
    for start, end in spans("yesterday", datetime(2011, 12, 30, 22), apia):
        assert start < end


# -- properties --------------------------------------------------------------------------------
ZONES = sorted(available_timezones())
VOCABULARY = """today tonight yesterday the day before last this next past previous earlier ago
back a an one two three twenty couple of few several 0 1 3 7 12 99 200 201 100000 9999999 day
days week weeks weekend month months year years morning afternoon evening night other on in
between from to and or until since during over Monday monday Tuesday Sunday January March march
May may December spring Summer fall winter recently lately 2023 2026 1999 3 31 February
2026-10-03 1st of , ? - –""".split()
texts = st.one_of(
    st.text(max_size=300),
    st.lists(st.sampled_from(VOCABULARY), max_size=14).map(" ".join),
)
nows = st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2100, 12, 31))
zones = st.sampled_from(ZONES)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts, nows, zones)
def test_any_text_any_now_any_zone_gives_well_formed_spans(text, now, zone):
    read = read_time(text, now, ZoneInfo(zone))
    assert len(read.spans) <= MAX_SPANS
    for span in read.spans:
        assert span.start < span.end <= now
        assert span.said
    assert len(read.rest) == len(text[:MAX_CHARS])


@settings(max_examples=200, deadline=None)
@given(
    nows,
    st.sampled_from(
        [
            "Europe/Berlin",
            "America/New_York",
            "Asia/Tokyo",
            "UTC",
            "America/Havana",  # these change their clocks at midnight
            "America/Sao_Paulo",
            "America/Santiago",
            "Asia/Beirut",
            "Australia/Lord_Howe",  # a half-hour change
            "Asia/Kathmandu",
        ]
    ),
)
def test_yesterday_is_the_local_day_before_today(now, zone):
    tz = ZoneInfo(zone)
    ((start, end),) = spans("yesterday", now, tz)
    today = local(now, tz).date()
    assert local(start, tz).date() == today - timedelta(days=1)
    assert local(end, tz).date() == today
    assert end <= now
    assert timedelta(hours=22) <= end - start <= timedelta(hours=26)


@settings(max_examples=200, deadline=None)
@given(nows, zones, st.integers(min_value=1, max_value=365), st.sampled_from(["past", "last"]))
def test_rolling_days_ignore_the_zone(now, zone, n, word):
    assert spans(f"in the {word} {n} days", now, ZoneInfo(zone)) == [(now - timedelta(days=n), now)]


@settings(max_examples=200, deadline=None)
@given(nows, zones, st.sampled_from(["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]))
def test_last_weekday_is_that_weekday_within_the_past_week(now, zone, weekday):
    tz = ZoneInfo(zone)
    ((start, end),) = spans(f"last {weekday}", now, tz)
    today = local(now, tz).date()
    day = local(start, tz).date()
    assert day.strftime("%A") == weekday
    assert 1 <= (today - day).days <= 7
