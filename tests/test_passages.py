"""Conversation windows (memory/passages.py): what they cover, how they are stored, and that the
summarise worker writes them with the summary."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import datetime, timedelta

import numpy as np
import pytest
from conftest import OWNER
from memory_helpers import BrokenEmbedder, add_chat
from sqlalchemy import select, update

from caesar import people
from caesar.db.models import EpisodeSummary
from caesar.errors import CaesarError
from caesar.memory import conversations, passages
from caesar.memory.recall import hybrid, pipeline
from caesar.memory.recall.hits import RecallParams
from caesar.memory.scope import Scope
from caesar.workers import WorkerRunner, run_until_caught_up, usable_cores

NOW = datetime(2026, 5, 18, 12, 0)


def _turns(n: int) -> list[dict[str, str]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"t{i}"} for i in range(n)]


def test_windows_slide_over_three_turns():
    assert passages.windows(_turns(5)) == ["t0 t1 t2", "t1 t2 t3", "t2 t3 t4"]


@pytest.mark.parametrize("n, expected", [(0, []), (1, ["t0"]), (2, ["t0 t1"]), (3, ["t0 t1 t2"])])
def test_a_short_conversation_is_one_window(n, expected):
    assert passages.windows(_turns(n)) == expected


def test_blank_turns_are_skipped_and_whitespace_folded():
    turns = [
        {"role": "user", "content": "  a\n\nb "},
        {"role": "assistant", "content": "   "},
        {"role": "user", "content": "c"},
    ]
    assert passages.windows(turns) == ["a b c"]


def test_a_long_conversation_is_capped_and_still_covers_every_turn():
    got = passages.windows(_turns(100), cap=8)
    assert len(got) <= 8
    covered = {w for text in got for w in text.split()}
    assert covered == {f"t{i}" for i in range(100)}
    assert got[0].startswith("t0 ") and got[-1].endswith(" t99")


def test_pack_round_trips_within_float16_precision():
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(4, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    back = passages.unpack(passages.pack(vectors), 384)
    assert back.shape == (4, 384) and back.dtype == np.float32
    assert np.abs(back - vectors).max() < 1e-3
    query = vectors[2]
    assert passages.best_cosine(passages.pack(vectors), query) == pytest.approx(1.0, abs=1e-3)


@pytest.mark.parametrize("blob", [None, b"", b"\x00" * 10])
def test_no_usable_windows_means_no_passage_score(blob):
    assert passages.unpack(blob, 384).shape == (0, 384)
    assert passages.best_cosine(blob, np.ones(384, dtype=np.float32) / np.sqrt(384)) is None


def test_windows_of_another_dimension_are_ignored():
    blob = passages.pack(np.ones((2, 8), dtype=np.float32))
    assert passages.best_cosine(blob, np.ones(384, dtype=np.float32)) is None


def _summarise_and_window(svc) -> None:
    run_until_caught_up(svc.workers["memory.summarise"])
    run_until_caught_up(svc.workers["memory.passages"])


def test_passages_worker_stores_the_conversation_windows(make_services, llm, db_url):
    svc = make_services(database_url=db_url, memory={"episodes_summarise": {"enabled": True}})
    chat_id = add_chat(
        svc, "My sister Ana is visiting in May.", "Nice! Want restaurant ideas for her visit?"
    )
    llm.replies.append("The operator's sister is visiting.")
    run_until_caught_up(svc.workers["memory.summarise"])
    worker = svc.workers["memory.passages"]
    assert worker.enabled and worker.backlog() == 1
    assert run_until_caught_up(worker) == 1
    assert worker.step() == 0  # nothing left: the queue is the rows still without windows
    with svc.db.read() as session:
        row = session.scalars(
            select(EpisodeSummary).where(EpisodeSummary.audit_log_id == chat_id)
        ).one()
    embedder = svc.embedder.get()
    [window] = passages.windows(
        [
            {"role": "user", "content": "My sister Ana is visiting in May."},
            {"role": "assistant", "content": "Nice! Want restaurant ideas for her visit?"},
        ]
    )
    expected = embedder.embed_batch([window])
    stored = passages.unpack(row.passage_vectors, expected.shape[1])
    assert stored.shape == (1, expected.shape[1])
    assert float(stored[0] @ expected[0]) == pytest.approx(1.0, abs=2e-3)
    # and each turn alone, in order
    turns = embedder.embed_batch(
        ["My sister Ana is visiting in May.", "Nice! Want restaurant ideas for her visit?"]
    )
    stored_turns = passages.unpack(row.turn_vectors, turns.shape[1])
    assert stored_turns.shape == (2, turns.shape[1])
    assert np.diag(stored_turns @ turns.T) == pytest.approx([1.0, 1.0], abs=2e-3)


def test_trivial_and_textless_chats(make_services, llm):
    svc = make_services(memory={"episodes_summarise": {"enabled": True}})
    add_chat(svc, "what time is it?", "It's 3pm.")
    add_chat(svc, "   ", "")  # nothing to window: marked done with no windows
    llm.replies.extend(["", "A chat with no words."])
    _summarise_and_window(svc)
    with svc.db.read() as session:
        trivial, textless = session.scalars(select(EpisodeSummary).order_by(EpisodeSummary.id))
    assert trivial.summary == "" and trivial.passage_vectors is None  # never recalled
    assert textless.passage_vectors == b"" and textless.turn_vectors == b""
    assert svc.workers["memory.passages"].backlog() == 0


def test_windows_follow_the_summariser_and_can_be_turned_off(make_services):
    assert not make_services().workers["memory.passages"].enabled  # summariser off by default
    off = make_services(memory={"episodes_summarise": {"enabled": True, "passages": False}})
    assert not off.workers["memory.passages"].enabled


def test_embedder_outage_leaves_the_windows_for_later(make_services, llm, shared_embedder, db_url):
    svc = make_services(database_url=db_url, memory={"episodes_summarise": {"enabled": True}})
    add_chat(svc, "I repaint the kitchen on Sunday.", "Blue would suit it.")
    llm.replies.append("The operator is repainting the kitchen.")
    run_until_caught_up(svc.workers["memory.summarise"])
    svc.embedder.set(BrokenEmbedder())
    with pytest.raises(CaesarError):
        svc.workers["memory.passages"].step()
    assert svc.workers["memory.passages"].backlog() == 1  # nothing lost, nothing half-written
    svc.embedder.set(shared_embedder)
    assert run_until_caught_up(svc.workers["memory.passages"]) == 1


# -- recall: the best window next to the summary ------------------------------------------------
def _params(**overrides):
    base = dict(
        top_k=3,
        similarity_threshold=0.45,
        max_age_days=None,
        halflife_days=30.0,
        recall_weight_scale=0.25,
        fusion="hybrid",
        keyword_weight=0.7,
    )
    return RecallParams(**{**base, **overrides})


def test_the_better_of_summary_and_window_is_the_dense_side():
    rows = [
        (1, 11, "summary misses the detail", NOW - timedelta(days=1), 0),
        (2, 12, "summary matches", NOW - timedelta(days=1), 0),
        (3, 13, "summarised before windows existed", NOW - timedelta(days=1), 0),
    ]
    cosine = {1: 0.1, 2: 0.6, 3: 0.5}
    passage = {1: 0.55, 2: 0.3}  # 2's window is worse than its summary: no harm
    hits = {
        h.episode_id: h
        for h in hybrid.rank_candidates(rows, cosine, {1: 0.5}, NOW, _params(), passage)
    }
    assert hits[1].relevance == pytest.approx(0.55 + 0.7 * 0.5 * 0.45)
    assert hits[1].cosine == 0.1 and hits[1].passage == 0.55 and hits[1].keyword == 0.5
    assert hits[2].relevance == pytest.approx(0.6) and hits[2].passage == 0.3
    assert hits[3].relevance == pytest.approx(0.5) and hits[3].passage is None
    # the ADR's dense fusion is the summary's cosine alone
    dense = hybrid.rank_candidates(rows, cosine, {}, NOW, _params(fusion="dense"), passage)
    assert [h.episode_id for h in dense] == [2, 3]
    assert all(h.passage is None for h in dense)


KNEE_CHAT = [
    ("user", "Any ideas for the weekend?"),
    ("assistant", "How about the science museum downtown?"),
    ("user", "Sounds good. Also my knee has been aching since my long run on Tuesday."),
    ("assistant", "Ice it for 15 minutes and skip running until the swelling is gone."),
]


def test_a_detail_the_summary_left_out_is_recalled_through_its_window(make_services, llm, db_url):
    """No shared word with the message, and a summary about something else: only the window
    ("…knee has been aching… Ice it… skip running…") makes the chat relevant."""
    svc = make_services(database_url=db_url, memory={"episodes_summarise": {"enabled": True}})
    with svc.db.write() as session:
        chat = conversations.add_finished(
            Scope(OWNER, session),
            svc.audit,
            {
                "messages": [{"role": r, "content": c} for r, c in KNEE_CHAT[:-1]],
                "reply": KNEE_CHAT[-1][1],
            },
            NOW - timedelta(days=2),
        )
    llm.replies.append("The operator asked for weekend plans; caesar suggested a museum visit.")
    _summarise_and_window(svc)
    query = "What did you tell me to do about my sore joint after jogging?"
    [hit] = svc.episodes.preview(query, NOW, similarity_threshold=None, scope=Scope(OWNER))
    embedder = svc.embedder.get()
    q = embedder.embed_batch([query])[0]
    windows = embedder.embed_batch(
        passages.windows([{"role": r, "content": c} for r, c in KNEE_CHAT])
    )
    assert hit.audit_log_id == chat
    assert hit.keyword == 0.0
    assert hit.cosine < 0.1  # the summary is about the museum
    assert hit.passage == pytest.approx(float((windows @ q).max()), abs=2e-3)
    assert hit.relevance == pytest.approx(hit.passage, abs=1e-6)
    # …and with the threshold at 0.4 auto-recall surfaces it; with the ADR's dense fusion not
    assert [
        e.audit_log_id
        for e in svc.episodes.preview(query, NOW, similarity_threshold=0.4, scope=Scope(OWNER))
    ] == [chat]
    assert (
        svc.episodes.preview(
            query, NOW, similarity_threshold=0.4, fusion="dense", scope=Scope(OWNER)
        )
        == []
    )


@pytest.mark.parametrize("n", [3, 10, 34, 35, 36, 64, 65, 200, 1001])
@pytest.mark.parametrize("cap", [1, 2, 8, 32])
def test_every_turn_is_in_a_window_and_the_cap_holds(n, cap):
    got = passages.windows(_turns(n), cap=cap)
    assert 1 <= len(got) <= cap
    assert {w for text in got for w in text.split()} == {f"t{i}" for i in range(n)}
    assert all(len(text.split()) >= min(3, n) for text in got)


def test_lift_takes_a_share_from_each_windows_best_turn():
    # five turns: windows (0, 3), (1, 4), (2, 5); turn 3 is the one nearest the message
    turns = np.array([0.1, 0.2, 0.1, 0.9, 0.2], dtype=np.float32)
    got = passages.lift([0.5, 0.5, 0.5], turns, 0.2)
    assert got == pytest.approx([0.8 * 0.5 + 0.2 * 0.2, 0.8 * 0.5 + 0.2 * 0.9, 0.5 * 0.8 + 0.18])
    assert got[1] == got[2] > got[0]
    # turns that do not match the windows (another version of the chat): windows as they are
    assert passages.lift([0.5, 0.4], turns, 0.2) == (0.5, 0.4)


class CountingEmbedder:
    """The real embedder, counting the texts it is given."""

    def __init__(self, inner):
        self.inner, self.texts = inner, []
        self.model_id = inner.model_id

    def embed_batch(self, texts):
        self.texts.extend(texts)
        return self.inner.embed_batch(texts)


def _chat(svc, turns: list[str]) -> int:
    """A past conversation of these turns, user first (an even number: the last is the reply)."""
    roles = ["user", "assistant"] * (len(turns) // 2)
    with svc.db.write() as session:
        return conversations.add_finished(
            Scope(OWNER, session),
            svc.audit,
            {
                "messages": [{"role": r, "content": c} for r, c in zip(roles, turns, strict=True)][
                    :-1
                ],
                "reply": turns[-1],
            },
            NOW - timedelta(days=2),
        )


def test_an_episode_from_before_turn_vectors_gets_its_turns_alone(
    make_services, llm, shared_embedder, db_url
):
    """Migration 0018 leaves every older episode's turn vectors NULL: the worker embeds its
    turns, and keeps the windows it has (not embedded again, their words not indexed twice)."""
    svc = make_services(database_url=db_url, memory={"episodes_summarise": {"enabled": True}})
    chat = _chat(svc, [c for _, c in KNEE_CHAT])
    llm.replies.append("The operator asked for weekend plans and about an aching knee.")
    _summarise_and_window(svc)
    e = EpisodeSummary
    with svc.db.write() as session:
        before = session.scalars(select(e).where(e.audit_log_id == chat)).one()
        windows, turns = before.passage_vectors, before.turn_vectors
        session.execute(update(e).where(e.id == before.id).values(turn_vectors=None))
    worker = svc.workers["memory.passages"]
    assert worker.backlog() == 1
    counting = CountingEmbedder(shared_embedder)
    svc.embedder.set(counting)
    assert run_until_caught_up(worker) == 1
    assert counting.texts == [c for _, c in KNEE_CHAT]  # the turns, not the windows
    with svc.db.read() as session:
        after = session.scalars(select(e).where(e.audit_log_id == chat)).one()
        indexed = svc.episodes.backend.has_windows(session, after.id)
    assert after.passage_vectors == windows
    assert passages.unpack(after.turn_vectors, 384) == pytest.approx(
        passages.unpack(turns, 384), abs=1e-3
    )
    assert indexed and worker.backlog() == 0


GARDEN_CHAT = [
    "I spent the whole weekend in the garden.",
    "The garden must be looking lovely by now!",
    "We planted tomatoes and basil in the raised beds.",
    "Tomatoes and basil go well together in a garden.",
    "Then my neighbour came over to talk about the garden fence.",
    "A garden fence is worth getting right with a neighbour.",
    "She wants to paint the fence dark green before winter.",
    "Dark green will suit a garden fence well.",
]


@pytest.mark.parametrize("nearest", [2, 6])
def test_the_turn_nearest_the_message_picks_the_excerpt(make_services, llm, db_url, nearest):
    """Every window says the message's words alike (equal relevance): the one holding the turn
    nearest the message in meaning is shown first — here, the message's vector is that turn's
    own — and the block holds no room for the rest."""
    svc = make_services(
        database_url=db_url,
        memory={
            "episodes_summarise": {"enabled": True},
            "episodes_recall": {"prompt_chars": 420, "summary_chars": 20},
        },
    )
    chat = _chat(svc, GARDEN_CHAT)
    llm.replies.append("The operator talked about the garden.")
    _summarise_and_window(svc)
    query = "What did we do in the garden?"
    [hit] = svc.episodes.preview(query, NOW, similarity_threshold=None, scope=Scope(OWNER))
    assert hit.audit_log_id == chat and len(hit.windows) == len(GARDEN_CHAT) - 2
    level = replace(hit, windows=(0.5,) * len(hit.windows))
    with svc.db.read() as session:
        blob = session.scalar(
            select(EpisodeSummary.turn_vectors).where(EpisodeSummary.id == hit.episode_id)
        )
    vector = passages.unpack(blob, 384)[nearest]
    vector /= np.linalg.norm(vector)
    # the turns are read for their person only: another's ids bring nothing
    with svc.episodes.reading(OWNER, NOW) as scope:
        assert len(pipeline.turn_cosines(scope, [hit.episode_id], vector)[hit.episode_id]) == 8
    with svc.db.write() as session:
        ben = people.add(session, svc.audit, "Ben")[0].id
    with svc.episodes.reading(ben, NOW) as scope:
        assert pipeline.turn_cosines(scope, [hit.episode_id], vector) == {}
    settings = svc.settings.memory.episodes_recall
    with svc.episodes.reading(OWNER, NOW) as scope:
        text, [shown] = pipeline.with_excerpts(
            svc.episodes, scope, settings, [level], query, vector=vector
        )
    said = [turn for excerpt in shown.excerpts for _, turn in excerpt.turns]
    assert GARDEN_CHAT[nearest] in said and GARDEN_CHAT[nearest] in text
    assert GARDEN_CHAT[8 - nearest] not in said  # the other end of the chat: no room for it


class _Meeting:
    """The real embedder, its first two calls held until both have started: two threads of
    one worker embed at the same time, and each call's texts are kept."""

    def __init__(self, embedder) -> None:
        self.embedder = embedder
        self.model_id = embedder.model_id
        self.meet = threading.Barrier(2, timeout=30)
        self.calls: list[list[str]] = []
        self.lock = threading.Lock()

    def embed_batch(self, texts):
        with self.lock:
            self.calls.append(list(texts))
            first_two = len(self.calls) <= 2
        if first_two:
            self.meet.wait()
        return self.embedder.embed_batch(texts)


def test_two_threads_of_the_worker_never_embed_the_same_episode(
    make_services, llm, shared_embedder, db_url
):
    svc = make_services(
        database_url=db_url,
        memory={"episodes_summarise": {"enabled": True, "passages_batch_size": 1}},
    )
    for i in range(6):
        add_chat(svc, f"Chat {i}: I planted {i} tomatoes.", f"Chat {i}: water them daily.")
    llm.replies.extend(f"The operator planted {i} tomatoes." for i in range(6))
    run_until_caught_up(svc.workers["memory.summarise"])
    worker = svc.workers["memory.passages"]
    assert worker.threads == usable_cores()  # shipped: one thread a core
    meeting = _Meeting(shared_embedder)
    svc.embedder.set(meeting)
    done: list[int] = []
    threads = [
        threading.Thread(target=lambda: done.append(run_until_caught_up(worker))) for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sum(done) == 6 and worker.backlog() == 0
    embedded = [text for call in meeting.calls for text in call if text.endswith("tomatoes.")]
    assert sorted(embedded) == sorted(f"Chat {i}: I planted {i} tomatoes." for i in range(6))
    assert meeting.meet.n_waiting == 0 and not meeting.meet.broken  # they did embed together


def test_the_runner_starts_a_worker_on_its_threads(make_services):
    svc = make_services(memory={"episodes_summarise": {"enabled": True, "passages_threads": 3}})
    runner = WorkerRunner([svc.workers["memory.passages"]])
    runner.start()
    try:
        names = sorted(t.name for t in threading.enumerate() if t.name.startswith("memory.pass"))
    finally:
        runner.stop()
    assert names == ["memory.passages-1", "memory.passages-2", "memory.passages-3"]


def test_a_window_longer_than_the_model_reads_is_the_mean_of_its_turns(make_services, llm, db_url):
    """Three long turns make a window MiniLM would read the first of only: its vector is the
    mean of its turns' vectors (not embedded). A window it reads whole is embedded as it is."""
    svc = make_services(database_url=db_url, memory={"episodes_summarise": {"enabled": True}})
    said = [
        "We planned the garden beds along the south fence with tomatoes and basil. " * 12,
        "Then the kayak trip on the lake, packing the dry bags and the paddles. " * 12,
        "And the bakery order for Saturday, two sourdough loaves and a rye. " * 12,
        "Hi.",
        "Hello! How can I help?",
        "Just saying hi.",
    ]
    chat = _chat(svc, said)
    llm.replies.append("Garden, kayak and bread plans.")
    _summarise_and_window(svc)
    embedder = svc.embedder.get()
    texts = passages.windows([{"role": "user", "content": t} for t in said])
    assert embedder.cut_short(texts) == [True, True, False, False]
    with svc.db.read() as session:
        row = session.scalars(
            select(EpisodeSummary).where(EpisodeSummary.audit_log_id == chat)
        ).one()
    turns = passages.unpack(row.turn_vectors, 384)
    stored = passages.unpack(row.passage_vectors, 384)
    assert stored.shape == (4, 384) and turns.shape == (6, 384)
    for i in (0, 1):  # cut short: the mean of its three turns, made unit
        mean = turns[i : i + 3].mean(axis=0)
        assert float(stored[i] @ (mean / np.linalg.norm(mean))) == pytest.approx(1.0, abs=2e-3)
        assert float(stored[i] @ embedder.embed_batch([texts[i]])[0]) < 0.99  # not the text
    for i in (2, 3):  # read whole: the window's own vector
        assert float(stored[i] @ embedder.embed_batch([texts[i]])[0]) == pytest.approx(
            1.0, abs=2e-3
        )
