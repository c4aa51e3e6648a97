"""Recall's memory stage (issue #45, memory/recall/said.py): the dated memories of the
conversations recall ranks reach the prompt as one dated line each, within their share of the
budget, for the conversations the block cannot show; the turn reports every conversation a
line came from; a message that recalls nothing gets none; nobody else's are read."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from conftest import OWNER
from sqlalchemy import select

from caesar import people
from caesar.brain import Brain
from caesar.db.models import AuditLog, EpisodeSummary, Memory
from caesar.memory import conversations
from caesar.memory.recall import said
from caesar.memory.render import SAID_HEADER
from caesar.memory.scope import Scope
from caesar.workers import run_until_caught_up

NOW = datetime(2026, 11, 30, 12, 0)
# Four conversations about painting, each with turns about other things around it, so that
# the block's budget shows one or two of them in depth.
FILLER = [
    ("We had a long week at work and the deadlines kept moving around.", "That sounds tiring."),
    ("The weather was grey most days but Sunday was sunny and warm.", "Nice to get some sun."),
    ("My neighbour's car alarm went off twice at night again.", "That must be annoying."),
]
PAINTED = [
    "I painted a sunset over the lake with my kids.",
    "I painted a portrait of my grandmother in oils.",
    "I painted the neighbour's spaniel in watercolour.",
    "I painted a mural of sunflowers on the garden shed.",
]
SUBJECT = {
    p: w for p, w in zip(PAINTED, ("sunset", "grandmother", "spaniel", "sunflowers"), strict=True)
}


def _services(make_services, **recall):
    return make_services(
        memory={
            "facts_extract": {"enabled": True},
            "episodes_summarise": {"enabled": True},
            "episodes_recall": {"prompt_chars": 1100, "said_share": 0.5, **recall},
        },
        gateway={
            "routes": {"memory_extract": "offline:patterns", "memory_summarise": "offline:textrank"}
        },
    )


def _add(services, person: int, painted: str, when: datetime) -> int:
    messages: list[dict[str, str]] = []
    for user, reply in FILLER:
        messages += [{"role": "user", "content": user}, {"role": "assistant", "content": reply}]
    messages.append({"role": "user", "content": painted})
    with services.db.write() as session:
        return conversations.add_finished(
            Scope(person, session),
            services.audit,
            {"messages": messages, "reply": "What a lovely thing to paint."},
            when,
        )


def _learn(services) -> None:
    for name in ("memory.summarise", "memory.passages", "memory.extract"):
        run_until_caught_up(services.workers[name])


def _history(services, person: int = OWNER) -> dict[int, str]:
    """The four conversations, a week apart: {conversation id: what was painted in it}."""
    out = {}
    for n, painted in enumerate(PAINTED):
        chat = _add(services, person, painted, NOW - timedelta(days=7 * (len(PAINTED) - n)))
        with services.db.read() as session:
            out[session.get(AuditLog, chat).subject_id] = painted
    _learn(services)
    return out


def _conversation_of_episode(services) -> dict[int, int]:
    with services.db.read() as session:
        rows = session.execute(select(EpisodeSummary.id, EpisodeSummary.conversation_id)).all()
    return {int(e): int(c) for e, c in rows}


def test_lines_reach_conversations_the_block_cannot_show(make_services):
    services = _services(make_services)
    painted_in = _history(services)

    ctx = Brain(services).prepare("What have I painted?", now=NOW, scope=Scope(OWNER))
    prompt = ctx.messages[0]["content"]

    assert SAID_HEADER in prompt, prompt
    lines = prompt.split(SAID_HEADER, 1)[1].split("</memory>", 1)[0].strip().splitlines()
    assert lines and all(line.startswith("- ") for line in lines)
    conversation = _conversation_of_episode(services)
    by_lines = [e for e in ctx.recalled if e.said]
    assert by_lines, "a conversation shown by its memory lines is reported"
    for episode in by_lines:
        excerpted = {x.first_turn + k for x in episode.excerpts for k in range(len(x.turns))}
        for memory in episode.said:
            assert memory.turn not in excerpted  # a line says what no excerpt shows
            assert memory.text in prompt and memory.episode_id == episode.episode_id
            # the memory is what was said in the conversation it is reported under
            said_there = painted_in[conversation[episode.episode_id]]
            assert SUBJECT[said_there] in memory.text
    # every painting reaches the prompt, by an excerpt or a line, and every conversation
    # anything came from is reported
    for subject in SUBJECT.values():
        assert subject in prompt
    assert {conversation[e.episode_id] for e in ctx.recalled} == set(painted_in)
    # within the budget: the block, lines and frame included
    start = prompt.index("Possibly relevant past conversations:")
    assert len(prompt) - start <= 1100 + 2  # the closing fence's newline pair


def test_lines_are_in_time_order_and_name_the_day_they_were_said(make_services):
    services = _services(make_services)
    _history(services)
    ctx = Brain(services).prepare("What have I painted?", now=NOW, scope=Scope(OWNER))
    shown = [m for e in ctx.recalled for m in e.said]
    prompt = ctx.messages[0]["content"]
    positions = [prompt.index(m.text) for m in sorted(shown, key=lambda m: m.said_at)]
    assert positions == sorted(positions)
    for m in shown:
        assert f"{m.said_at:%a} {m.said_at.day} {m.said_at:%b %Y}" in prompt


def test_no_share_no_lines_and_the_block_has_the_whole_budget(make_services):
    services = _services(make_services, said_share=0)
    _history(services)
    ctx = Brain(services).prepare("What have I painted?", now=NOW, scope=Scope(OWNER))
    assert SAID_HEADER not in ctx.messages[0]["content"]
    assert all(not e.said for e in ctx.recalled)


def test_a_message_that_recalls_nothing_gets_no_line(make_services):
    services = _services(make_services)
    _history(services)
    ctx = Brain(services).prepare(
        "How do I convert a PDF to plain text on Linux?", now=NOW, scope=Scope(OWNER)
    )
    assert SAID_HEADER not in ctx.messages[0]["content"]
    assert not ctx.recalled


def test_another_persons_memories_never_come(make_services):
    services = _services(make_services)
    with services.db.write() as session:
        other = people.add(session, services.audit, "dana")[0].id
    _history(services, person=other)
    ctx = Brain(services).prepare("What have I painted?", now=NOW, scope=Scope(OWNER))
    prompt = ctx.messages[0]["content"]
    assert SAID_HEADER not in prompt and "painted" not in prompt.split("past conversations")[-1]
    assert not ctx.recalled


def test_the_turns_audit_rows_name_the_lines(make_services):
    services = _services(make_services)
    _history(services)
    ctx = Brain(services).prepare("What have I painted?", now=NOW, scope=Scope(OWNER))
    data = [e.as_json() for e in ctx.recalled]
    with_lines = [d for d in data if d["said"]]
    assert with_lines
    for d in with_lines:
        assert {"id", "text", "said_at", "turn", "speaker", "cosine", "score"} <= set(d["said"][0])


# -- the pure parts ------------------------------------------------------------------------------
def _line(i: int, episode: int, text: str, day: int, score: float = 0.6, turn: int = 0):
    return said.SaidLine(
        i, episode, text, "person", datetime(2026, 5, day, 12), turn, None, None, score, 1.0, score
    )


def test_choose_takes_one_line_per_conversation_first_then_shows_them_in_time_order():
    ranked = [
        _line(1, 10, "The person painted a sunset over the lake.", 9, 0.9),
        _line(2, 10, "The person painted a second sunset at dawn.", 9, 0.8, turn=2),
        _line(3, 20, "The person painted a portrait of their grandmother.", 2, 0.7),
    ]
    two = said.choose(ranked, 10_000, NOW)
    room = two.chars - len(two.lines[2]) - 1  # all but the second sunset
    chosen = said.choose(ranked, room, NOW)
    assert [m.id for m in chosen.said] == [3, 1]  # one per conversation, in time order
    assert chosen.lines[0] == SAID_HEADER and "grandmother" in chosen.lines[1]
    assert chosen.chars == sum(len(x) + 1 for x in chosen.lines) <= room
    assert [m.id for m in two.said] == [3, 1, 2]


def test_the_same_words_come_once_and_a_line_an_excerpt_shows_goes():
    ranked = [
        _line(1, 10, "The person painted a sunset over the lake.", 9, turn=4),
        _line(2, 20, "The person painted a sunset over the lake.", 10),
        _line(3, 30, "The person painted a fox.", 11),
    ]
    chosen = said.choose(ranked, 10_000, NOW)
    assert [m.id for m in chosen.said] == [1, 3]
    left = chosen.without({(10, 4)})
    assert [m.id for m in left.said] == [3] and left.lines[0] == SAID_HEADER
    assert left.chars == sum(len(x) + 1 for x in left.lines)
    assert chosen.without({(30, 0), (10, 4)}) is said.NONE


def test_rank_fuses_the_cosine_and_the_words_ranks():
    rows = [
        (1, 10, "The person painted a sunset.", "person", NOW, 0, None, None),
        (2, 20, "The person walked the dog.", "person", NOW, 0, None, None),
        (3, 30, "The person painted the dog.", "person", NOW, 0, None, None),
    ]
    ranked = said.rank(rows, "Did I paint the dog?", {1: 0.5, 2: 0.6, 3: 0.55})
    assert [m.id for m in ranked][0] == 3  # both words and a near cosine
    assert ranked[0].keyword == 1.0


def test_coverage_is_the_share_of_the_message_said_the_rarer_word_weighing_more():
    docs = [{"paint", "sunset"}, {"paint", "dog"}, {"walk", "dog"}]
    scores = said.coverage(docs, {"sunset", "paint"})
    assert scores[0] == 1.0 and 0 < scores[1] < 0.5 and scores[2] == 0


def test_within_a_span_by_when_it_was_said_or_the_time_it_names():
    from caesar.memory.recall.when import read_time

    span = read_time("in May 2026", NOW).spans
    said_in_may = (1, 1, "x", "person", datetime(2026, 5, 9), 0, None, None)
    about_may = (
        2,
        1,
        "x",
        "person",
        datetime(2026, 6, 9),
        0,
        datetime(2026, 5, 2),
        datetime(2026, 5, 3),
    )
    neither = (3, 1, "x", "person", datetime(2026, 6, 9), 0, None, None)
    assert [said.within(r, span) for r in (said_in_may, about_may, neither)] == [True, True, False]


def test_refers_names_the_day_month_or_year_its_words_name():
    base = _line(1, 1, "x", 9)

    def named(start, end):
        return replace(base, refers_start=start, refers_end=end)

    assert said.refers(named(datetime(2026, 5, 2), datetime(2026, 5, 3)), UTC) == "Sat 2 May 2026"
    assert said.refers(named(datetime(2026, 3, 1), datetime(2026, 4, 1)), UTC) == "March 2026"
    assert said.refers(named(datetime(2025, 1, 1), datetime(2026, 1, 1)), UTC) == "2025"
    assert said.refers(named(datetime(2026, 5, 9), datetime(2026, 5, 10)), UTC) == ""  # its day
    assert said.refers(base, UTC) == ""


def test_the_chat_panel_names_each_line_and_the_conversation_it_came_from(make_services, llm):
    from fastapi.testclient import TestClient
    from test_dashboard import _csrf
    from test_dashboard_chat import STREAM, _events

    from caesar.api import create_app

    services = _services(make_services)
    _history(services)
    with TestClient(create_app(services.settings, services, run_workers=False)) as client:
        page = client.get("/dashboard/chat").text
        llm.replies.append("A sunset, a portrait, a spaniel and sunflowers.")
        sent = client.post(
            "/dashboard/chat/send",
            data={"message": "What have I painted?", "csrf": _csrf(page)},
            headers=STREAM,
        )
        done = _events(sent)[-1]
        html = client.get(done["memory_url"]).text
        turn = services.db.read
    lines = re.findall(r'<li class="said-memory" data-memory="(\d+)">(.*?)</li>', html, re.S)
    assert lines
    episodes = html.split('<li class="remembered-episode"')[1:]
    with turn() as session:
        for memory_id, shown in lines:
            row = session.get(Memory, int(memory_id))
            assert row.text in shown and f"said {row.said_at:%Y-%m-%d}" in shown
            # under the conversation it came from, with the link that opens it
            (episode,) = [e for e in episodes if f'data-memory="{memory_id}"' in e]
            assert f'href="/dashboard/chat/{row.conversation_id}"' in episode
    # the reply's row names every conversation a line came from
    with turn() as session:
        recalled = session.scalars(
            select(AuditLog).where(AuditLog.event_type == "memory.episode.recalled")
        ).all()
    said_ids = {m["id"] for r in recalled for m in r.payload.get("said", [])}
    assert {int(i) for i, _ in lines} <= said_ids
