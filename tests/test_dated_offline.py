"""Dated memories made with no LLM (memory/dated/offline.py, issue #45): what is kept from both
speakers, how it is made self-contained, and the time it names resolved on the person's clock."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from caesar.memory.dated.offline import CAESAR, MAX_CAESAR_PER_TURN, PERSON, extract, resolve

SAID = datetime(2023, 5, 8, 13, 0)  # a Monday, naive UTC


def texts(messages: list[dict[str, str]], **kw: object) -> list[str]:
    return [m.text for m in extract(messages, SAID, **kw)]  # type: ignore[arg-type]


def test_both_speakers_are_read_and_kept_apart() -> None:
    found = extract(
        [
            {"role": "user", "content": "I painted a sunset with my kids at the lake."},
            {"role": "assistant", "content": "You could lower the bedroom thermostat to 18 °C."},
        ],
        SAID,
    )
    assert [(m.speaker, m.turn, m.text) for m in found] == [
        (PERSON, 0, "The person painted a sunset with their kids at the lake."),
        (CAESAR, 1, "The person could lower the bedroom thermostat to 18 °C."),
    ]


@pytest.mark.parametrize(
    "said",
    [
        "Thanks so much!",
        "That sounds great, enjoy it!",
        "Good to see you again.",
        "What did you think of the new album?",
        "Can you suggest a dinner recipe?",
        "Haha yes totally.",
        "I'm so glad to hear that.",
        "Ok.",
        # a reaction to what the other said, with the name it addresses them by
        "Woah Joanna, that's incredible!",
        "That's great news, Caroline!",
        "Caroline, so glad you got the support!",
        "What a lovely thing to paint.",
        "How lovely!",
        "[shares a photo: a dog on a beach]",
    ],
)
def test_chit_chat_and_questions_are_not_memories(said: str) -> None:
    assert texts([{"role": "user", "content": said}]) == []


@pytest.mark.parametrize(
    ("said", "kept"),
    [
        ("Hey Mel, I painted a lake at dawn.", "The person painted a lake at dawn."),
        ("Yeah, Jon, I moved to Rome last spring.", "The person moved to Rome last spring."),
        (
            "I adopted a puppy [image] from the shelter.",
            "The person adopted a puppy from the shelter.",
        ),
        ("Yes, Rome was great in the summer.", "Yes, Rome was great in the summer."),
    ],
)
def test_a_name_addressed_and_a_picture_note_are_left_out(said: str, kept: str) -> None:
    assert texts([{"role": "user", "content": said}]) == [kept]


def test_happy_about_something_is_kept() -> None:
    assert texts([{"role": "user", "content": "I'm happy with my new job at the library."}]) == [
        "The person is happy with their new job at the library."
    ]


def test_a_conversation_with_nothing_worth_keeping_yields_nothing() -> None:
    chat = [
        {"role": "user", "content": "Hi there! How are you?"},
        {"role": "assistant", "content": "Hello! I'm happy to help. What can I do for you?"},
        {"role": "user", "content": "Thanks, bye!"},
    ]
    assert extract(chat, SAID) == []


@pytest.mark.parametrize(
    ("said", "kept"),
    [
        ("I love hiking with my dog.", "The person loves hiking with their dog."),
        ("I went to a support group.", "The person went to a support group."),
        ("I don't eat meat anymore.", "The person doesn't eat meat anymore."),
        ("I'm training for a marathon.", "The person is training for a marathon."),
        ("I've moved to Porto with my wife.", "The person has moved to Porto with their wife."),
        ("My sister lives in Lisbon now.", "The person's sister lives in Lisbon now."),
        ("I really enjoy baking bread.", "The person really enjoys baking bread."),
        ("I watch birds every morning.", "The person watches birds every morning."),
        ("I study Japanese at night.", "The person studies Japanese at night."),
    ],
)
def test_the_persons_words_are_made_self_contained(said: str, kept: str) -> None:
    assert texts([{"role": "user", "content": said}]) == [kept]


def test_caesars_words_name_caesar_and_the_person() -> None:
    assert resolve("I suggest a blackout curtain for your bedroom.", CAESAR) == (
        "caesar suggests a blackout curtain for the person's bedroom."
    )
    assert resolve("You're doing great with your plan.", CAESAR) == (
        "The person is doing great with their plan."
    )


def test_a_time_the_sentence_names_is_resolved_on_the_persons_clock() -> None:
    [saturday] = extract(
        [{"role": "user", "content": "I went to a pottery class last Saturday."}],
        SAID,
        ZoneInfo("Europe/Berlin"),
    )
    # Saturday 6 May 2023 in Berlin (UTC+2) is 5 May 22:00 → 6 May 22:00 UTC
    assert (saturday.refers_start, saturday.refers_end) == (
        datetime(2023, 5, 5, 22, 0),
        datetime(2023, 5, 6, 22, 0),
    )
    [plain] = extract([{"role": "user", "content": "I adopted a grey cat."}], SAID)
    assert plain.refers_start is None and plain.refers_end is None


def test_pasted_text_is_not_the_persons_words() -> None:
    chat = [
        {
            "role": "user",
            "content": "Fix this function please.\n```python\nI = compute_everything(my_data)\n```"
            "\n> I am a quoted line from an email\nI moved the tests to a new folder.",
        }
    ]
    assert texts(chat) == [
        "Fix this function please.",
        "The person moved the tests to a new folder.",
    ]


def test_caesars_long_replies_give_their_first_sentences_only() -> None:
    reply = " ".join(f"Step {n} is to check the valve number {n} carefully." for n in range(10))
    kept = texts([{"role": "assistant", "content": reply}])
    assert kept == [f"Step {n} is to check the valve number {n} carefully." for n in range(3)]
    assert len(kept) == MAX_CAESAR_PER_TURN


def test_the_same_thing_said_twice_is_kept_once() -> None:
    chat = [
        {"role": "user", "content": "I adopted a grey cat named Luna."},
        {"role": "assistant", "content": "Lovely!"},
        {"role": "user", "content": "I adopted a grey cat named Luna!"},
    ]
    assert len(extract(chat, SAID)) == 1


def test_long_sentences_are_cut_at_a_word() -> None:
    said = "I planted " + ", ".join(f"tomato variety number {n}" for n in range(40)) + "."
    [kept] = texts([{"role": "user", "content": said}])
    assert len(kept) <= 241 and kept.endswith("…") and not kept.endswith(" …")


def test_system_turns_are_skipped() -> None:
    chat = [
        {"role": "system", "content": "The person likes long walks on the beach."},
        {"role": "user", "content": "I bought a new road bike yesterday."},
    ]
    [bike] = extract(chat, SAID)
    assert bike.turn == 1 and bike.refers_start == datetime(2023, 5, 7)
