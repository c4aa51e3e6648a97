"""The calendar days a message names (memory/recall/dates.py). Pure."""

from __future__ import annotations

from datetime import date, datetime

import pytest

from caesar.memory.recall.dates import named_spans

NOW = datetime(2023, 12, 1, 12, 0)


def _days(text: str) -> list[tuple[date, date]]:
    return [(a.date(), b.date()) for a, b in named_spans(text, NOW)]


@pytest.mark.parametrize(
    "text",
    [
        "What did Gina find for her store on 1 February, 2023?",
        "what did we say on February 1st 2023",
        "the 1st of February 2023",
        "on 2023-02-01",
    ],
)
def test_a_day_is_that_day_with_a_day_either_side(text):
    assert _days(text) == [(date(2023, 1, 31), date(2023, 2, 3))]


def test_a_month_of_a_year_is_the_whole_month():
    assert _days("What did John attend in March 2023?") == [(date(2023, 2, 28), date(2023, 4, 2))]
    assert _days("in December, 2022") == [(date(2022, 11, 30), date(2023, 1, 2))]


def test_a_day_without_its_year_is_its_latest_occurrence_up_to_now():
    assert _days("what did I say on June 3?") == [(date(2023, 6, 2), date(2023, 6, 5))]
    assert _days("on 5 December") == [(date(2022, 12, 4), date(2022, 12, 7))]


def test_several_dates_in_the_order_named_and_none_in_the_future():
    assert _days("between August 11 and August 15 2023") == [
        (date(2023, 8, 10), date(2023, 8, 13)),
        (date(2023, 8, 14), date(2023, 8, 17)),
    ]
    assert _days("my appointment on 3 March 2024") == []


@pytest.mark.parametrize(
    "text",
    [
        "May I ask you something?",
        "When did Melanie go camping in June?",  # a month alone picks no day
        "we march on",
        "could we march 10 miles?",  # "may" and "march" are months only when capitalised
        "may 5 of us come along?",
        "meet me at June 3:30",
        "I tried the thermostat thing you suggested",
    ],
)
def test_what_names_no_day(text):
    assert _days(text) == []


def test_a_capitalised_may_is_the_month_and_a_day_that_is_none_leaves_its_month():
    assert _days("what did I book for May 5?") == [(date(2023, 5, 4), date(2023, 5, 7))]
    # "30 February 2023" is no day; its "February 2023" is still a month
    assert _days("on 30 February 2023") == [(date(2023, 1, 31), date(2023, 3, 2))]
