"""What a message asks of memory besides its topic (memory/recall/question.py): time-only
questions, questions that gather across conversations, and the topic left once the time is
read. Pure."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo, available_timezones

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from caesar.memory.recall.question import MAX_CHARS, META_WORDS, NOTHING, Asked, read_question
from caesar.memory.recall.when import TimeRead, read_time

NOW = datetime(2026, 10, 29, 15, 0)  # naive UTC; Thursday
BERLIN = ZoneInfo("Europe/Berlin")


def ask(text: str, now: datetime = NOW) -> Asked:
    return read_question(text, now, BERLIN)


# -- time only ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        "What did we talk about yesterday?",
        "Remind me what we discussed three days ago.",
        "What were we talking about two weeks ago?",
        "what did we chat about last Thursday?",
        "What did we talk about this morning?",
        "What did we discuss last month?",
        "What did we talk about back in August?",
        "Can you recap what we covered last week?",
        "What did I tell you yesterday?",
        "what happened yesterday?",
        "what did we say the other day?",
        "anything from last week?",
        "What was I up to last week?",
        "What did we talk about on Monday?",
        "What did we talk about yesterday or the day before?",
        "YESTERDAY?",
    ],
)
def test_a_question_about_a_time_alone_is_time_only(text):
    asked = ask(text)
    assert asked.time.spans
    assert asked.topic == ()
    assert asked.time_only is True
    assert asked.gathers is False
    assert asked.breadth is True


def test_time_only_carries_the_spans_read_in_the_operators_zone():
    asked = ask("What did we talk about yesterday?")
    assert asked.time == read_time("What did we talk about yesterday?", NOW, BERLIN)
    ((start, end),) = [(s.start, s.end) for s in asked.time.spans]
    # Wed 28 October in Berlin (CET, UTC+1)
    assert (start, end) == (datetime(2026, 10, 27, 23), datetime(2026, 10, 28, 23))
    assert read_question("yesterday", NOW).time.spans[0].start == datetime(2026, 10, 28)


# -- a time and a topic ------------------------------------------------------------------------
def test_a_time_with_a_topic_is_not_time_only():
    asked = ask("what did you suggest last week about my run?")
    assert len(asked.time.spans) == 1
    assert asked.time_only is False
    assert asked.breadth is False
    # "suggest" is the assistant's speech act, a meta word like "tell" or "say"
    assert asked.topic == ("run",)


@pytest.mark.parametrize(
    ("text", "topic"),
    [
        # deciding and planning are what was done, not the talk itself: a topic
        ("what did we decide last week?", ("decide",)),
        ("what did we plan yesterday?", ("plan",)),
        ("Who did I meet for lunch last Tuesday?", ("meet", "lunch")),
        ("What did I say about running last week?", ("running",)),
        ("what was that recipe from last week?", ("recipe",)),
    ],
)
def test_the_topic_left_besides_the_time(text, topic):
    asked = ask(text)
    assert asked.time.spans
    assert asked.topic == topic
    assert asked.time_only is False


@pytest.mark.parametrize(
    "text",
    [
        # the assistant's speech acts are about the talk, like tell / say / mention
        "What did you suggest last week?",
        "What did you recommend last week?",
        "What did you advise last week?",
        # a clock time is no topic
        "What did we talk about at 3pm yesterday?",
    ],
)
def test_speech_acts_and_clock_times_are_no_topic(text):
    asked = ask(text)
    assert asked.time.spans and asked.topic == () and asked.time_only is True


def test_digits_and_meta_words_are_no_topic():
    asked = ask("What did we talk about 3 days ago, 42?")
    assert asked.topic == ()
    assert asked.time_only is True


def test_no_time_is_not_time_only_and_reads_no_topic():
    for text in ("What did we talk about?", "what is my dog called?", "Tell me a joke"):
        asked = ask(text)
        assert asked.time.spans == ()
        assert asked.time_only is False
        assert asked.topic == ()  # the topic is only read when a time was


def test_recently_is_no_span_so_not_time_only():
    asked = ask("What did we talk about recently?")
    assert asked.time.recent is True
    assert asked.time.spans == ()
    assert asked.time_only is False


def test_a_weekday_alone_is_no_time():
    # documented: when.py reads a weekday only after "on", "last", "this (past)"
    asked = ask("What did we talk about Monday?")
    assert asked.time.spans == ()
    assert asked.time_only is False


# -- gathering ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        "How many times did I go running?",
        "HOW MANY TIMES did I run?",
        "Which books have I mentioned?",
        "all the restaurants I've been to",
        "every time I felt anxious",
        "How many art events did I attend in the past month?",
        "How often do I go swimming?",
        "how much did I spend in total?",
        "How many countries have I visited altogether?",
        "list all my trips",
        "What are all the books I've read?",
        "which films did I watch?",
        "Each time we talked about work, what did I complain about?",
        # a sum, an average, a difference of things told apart; which of two came first
        "What is the total price of the bike and the helmet?",
        "What's the combined weight of both parcels?",
        "What was the average score over my three exams?",
        "How much did I pay for each ticket?",
        "What is the difference between my rent and my sister's?",
        "How much older is my brother than my cousin?",
        "How many more books did I read than my partner?",
        "Which came first, the move to Leeds or the new job?",
        "Did I adopt the cat first or the dog?",
        "Who did I see first: the dentist or my GP?",
    ],
)
def test_questions_that_gather_across_conversations(text):
    asked = ask(text)
    assert asked.gathers is True
    assert asked.breadth is True


@pytest.mark.parametrize(
    "text",
    [
        "what is my dog called?",
        "how are you?",
        "how much is it?",
        "how much did I spend?",
        "which one is better?",
        "What did we talk about yesterday?",
        "Is it time to go?",
        "I have a dog",
        "How many days ago did I attend the baking class?",  # a date, not a count of chats
        "How many weeks ago did I start yoga?",
        # the same words said, not asked
        "On average I sleep six hours.",
        "First tea or coffee, then we talk.",
        "I'm more than happy with it.",
        "Total nonsense, that film.",
        "We love each other. What is my name?",
        # a word in s that is no plural asks for one thing
        "What exciting news did Maria share on 16 June, 2023?",
        "What analysis did I ask for?",
        "",
    ],
)
def test_ordinary_questions_do_not_gather(text):
    asked = ask(text)
    assert asked.gathers is False


@pytest.mark.parametrize(
    "text",
    [
        # documented borderline: these match the gathering patterns though they ask for one
        # thing or are no question at all
        "Which restaurant did I like?",
        "all the best",
        "Each time I call my mum she cries",
    ],
)
def test_borderline_gathering(text):
    assert ask(text).gathers is True


def test_a_gathering_question_with_a_time_keeps_its_topic():
    asked = ask("How many art events did I attend in the past month?")
    assert asked.gathers is True
    assert len(asked.time.spans) == 1
    assert asked.time_only is False
    # the gathering words ("many") are no topic
    assert asked.topic == ("art", "events", "attend")


def test_counting_the_conversations_of_a_span_is_time_only():
    asked = ask("How many times did we talk last week?")
    assert asked.gathers is True
    assert asked.topic == ()
    assert asked.time_only is True


# -- shape -------------------------------------------------------------------------------------
def test_nothing_and_json():
    assert NOTHING == Asked()
    assert NOTHING.time == TimeRead()
    assert NOTHING.breadth is False
    assert NOTHING.as_json() == {"spans": [], "recent": False, "time_only": False, "gathers": False}
    asked = ask("What did we talk about yesterday?")
    assert asked.as_json() == {
        "spans": [
            {"said": "yesterday", "from": "2026-10-27T23:00:00", "to": "2026-10-28T23:00:00"}
        ],
        "recent": False,
        "time_only": True,
        "gathers": False,
    }


def test_reads_only_the_head_of_a_long_message():
    assert ask("x " * MAX_CHARS + "How many times did I run yesterday?") == Asked(
        TimeRead(rest=("x " * MAX_CHARS)[:MAX_CHARS])
    )
    long = ask("How many times did I run yesterday? " + "word " * 100_000)
    assert long.gathers is True
    assert len(long.time.spans) == 1


def test_unicode_and_empty():
    assert ask("") == Asked(TimeRead())
    assert ask("¿Qué? 🙂 名前").time_only is False
    asked = ask("What did we talk about yesterday? 🙂")
    assert asked.time_only is True


# -- properties --------------------------------------------------------------------------------
words = st.sampled_from(
    """what did we talk about yesterday last week how many times often all the every time which
    books have I mentioned my run in total list of recently lately 3 days ago two weeks ago on
    Monday in May may march the day before or and between from to suggest tell me ? ,""".split()
)
texts = st.one_of(st.text(max_size=300), st.lists(words, max_size=16).map(" ".join))
nows = st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2100, 12, 31))
zones = st.sampled_from(sorted(available_timezones()))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts, nows, zones)
def test_any_message_reads_consistently(text, now, zone):
    asked = read_question(text, now, ZoneInfo(zone))
    assert asked.time_only == (bool(asked.time.spans) and not asked.topic)
    assert asked.breadth == (asked.time_only or asked.gathers)
    if not asked.time.spans:
        assert asked.topic == ()
    for term in asked.topic:
        assert term not in META_WORDS
        assert not term.isdigit()
        assert term == term.lower()
    for span in asked.time.spans:
        assert span.start < span.end <= now


@settings(max_examples=100, deadline=None)
@given(texts)
def test_the_default_zone_is_utc(text):
    assume(len(text.lower()) == len(text))
    assert read_question(text, NOW) == read_question(text, NOW, UTC)
