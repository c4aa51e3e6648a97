"""Figure (c): memory work per chat turn, at 100k episodes + 1k facts and at 1 episode.

`Brain.turn(message)` runs whole — facts block, query embedding (real MiniLM on ONNX),
auto-recall, system prompt, the provider call, and the write transaction (chat.completed,
memory.episode.recalled rows, recall counters) — against an in-process provider that answers
at once (registered in the gateway the way a provider is, and timed itself): memory work =
turn time − provider time. Messages are real sentences on the planted topics, so recall
surfaces episodes and the audit writes happen as in a live turn. Each case runs on its own copy
of the database (turns write to it). Also timed alone: `Brain.prepare`, its parts
(`recall_search` is the recall the case's fusion does: hybrid is given the message's text).

Cases: the large history with the ADR's dense recall and with the default hybrid recall
(`memory.episodes_recall.fusion`), and a one-episode history with each.

    .venv/bin/python bench/bench_turn.py [--turns 200] [--episodes 100000] [--prompt-chars N]
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import benchlib
import history
import numpy as np

from caesar import audit
from caesar.brain import Brain
from caesar.clock import utcnow
from caesar.db import Database, migrate
from caesar.db.models import AuditLog, EpisodeSummary, Fact
from caesar.gateway.base import Completion, Message, StreamChunk, Usage
from caesar.memory.episodes.recall import RecallParams
from caesar.minilm import MODEL_ID
from caesar.services import Services

WORK = benchlib.OUT / "turn"


class InstantProvider:
    """A caesar.gateway.base.Provider that answers at once and keeps its own time. The benches'
    other providers change only what it says (`text`)."""

    can_chat = True

    def __init__(self, name: str) -> None:
        self.name = name
        self.seconds = 0.0

    def text(self, messages: list[Message], task: str) -> str:
        return "Noted."

    def complete(
        self,
        messages: list[Message],
        model: str,
        *,
        task: str,
        json_mode: bool = False,
        generation: Any = None,
    ) -> Completion:
        started = time.perf_counter()
        reply = Completion(self.text(messages, task), self.name, model, Usage(1, 1), 0.0)
        self.seconds += time.perf_counter() - started
        return reply

    def stream(
        self, messages: list[Message], model: str, *, task: str, generation: Any = None
    ) -> Iterator[StreamChunk]:
        yield StreamChunk(self.complete(messages, model, task=task).text)


def install(services: Services, provider: InstantProvider) -> None:
    """Route every task of the bench settings ("local:…") to the in-process provider."""
    services.gateway._providers["local"] = provider  # the bench's provider seam (private)


def add_facts(db: Database, count: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    now = utcnow()
    facts, edits = [], []
    for i in range(count):
        updated = now - timedelta(days=rng.uniform(0, 365))
        key = f"fact_{i:04d}"
        facts.append(
            {
                "key": key,
                "value": f"value number {i} about the operator's {history.WORDS[i % len(history.WORDS)]}",
                "confidence": rng.uniform(0.3, 1.0),
                "created_at": updated - timedelta(days=rng.uniform(0, 30)),
                "updated_at": updated,
                "person_id": benchlib.OWNER,
            }
        )
        for _ in range(rng.choice([0] * 9 + [1, 2, 3])):
            edits.append(
                {
                    "event_type": audit.FACT_USER_EDITED,
                    "created_at": updated,
                    "payload": {"key": key, "value": "edited"},
                    "subject_key": key,
                    "person_id": benchlib.OWNER,
                }
            )
    with db.write() as session:
        session.execute(Fact.__table__.insert(), facts)
        if edits:
            session.execute(AuditLog.__table__.insert(), edits)


def one_episode_db(path: Path) -> str:
    """A fresh database holding a single episode, on the first planted topic."""
    for leftover in path.parent.glob(path.name + "*"):
        leftover.unlink()
    db = Database(f"sqlite:///{path}")
    migrate.upgrade(db)
    centre = history.centres()[0]  # the same planted topic
    vector = np.round(centre.astype(np.float64), 4)
    now = utcnow()
    with db.write() as session:
        session.execute(
            AuditLog.__table__.insert(),
            [
                {
                    "id": 1,
                    "event_type": "chat.completed",
                    "created_at": now,
                    "payload": {},
                    "person_id": benchlib.OWNER,
                }
            ],
        )
        session.execute(
            EpisodeSummary.__table__.insert(),
            [
                {
                    "audit_log_id": 1,
                    "summary": history.TOPIC_TEXTS[0][0],
                    "embedding": vector.tolist(),
                    "embedding_f32": vector.astype("<f4").tobytes(),
                    "model": MODEL_ID,
                    "created_at": now - timedelta(days=2),
                    "recall_count": 0,
                    "person_id": benchlib.OWNER,
                }
            ],
        )
    add_facts(db, 1000)
    db.dispose()
    return f"sqlite:///{path}"


def copy_history(episodes: int) -> str:
    hist = history.load(episodes)
    WORK.mkdir(parents=True, exist_ok=True)
    target = WORK / f"turn-{episodes}.db"
    for leftover in WORK.glob(target.name + "*"):
        leftover.unlink()
    shutil.copyfile(hist.path, target)
    db = Database(f"sqlite:///{target}")
    add_facts(db, 1000)
    db.dispose()
    return f"sqlite:///{target}"


# --prompt-chars: the past-conversations budget (None: the bench route's, by its provider kind)
PROMPT_CHARS: int | None = None


def run_case(label: str, url: str, turns: int, fusion: str = "dense") -> dict[str, Any]:
    chars = {} if PROMPT_CHARS is None else {"prompt_chars": PROMPT_CHARS}
    recall = {"episodes_recall": {"fusion": fusion, **chars}}
    services = Services.build(benchlib.bench_settings(WORK / f"home-{label}", url, memory=recall))
    provider = InstantProvider("local")
    install(services, provider)
    services.episodes.warm()
    services.episodes.index(person=benchlib.OWNER).wait_for_ivf()
    brain = Brain(services)
    messages = history.topic_messages()
    for message in messages[:10]:  # warm-up: embedder, caches, first writes
        brain.turn(message, person=benchlib.OWNER)
    total, memory, memory_cpu, recalled = [], [], [], []
    for i in range(turns):
        provider.seconds = 0.0
        c0, started = time.thread_time(), time.perf_counter()
        result = brain.turn(messages[i % len(messages)], person=benchlib.OWNER)
        elapsed, cpu = time.perf_counter() - started, time.thread_time() - c0
        total.append(benchlib.ms(elapsed))
        memory.append(benchlib.ms(elapsed - provider.seconds))
        memory_cpu.append(benchlib.ms(cpu - provider.seconds))
        recalled.append(len(result.recalled))
    now = utcnow()
    params = RecallParams.from_settings(services.settings.memory.episodes_recall)
    vectors = [services.episodes.embed_query(m) for m in messages]
    it = iter(range(10**9))
    then = now - timedelta(days=20)
    day = f"{then:%B} {then.day}, {then.year}"

    def recall(i: int) -> object:
        return services.episodes.search(
            vectors[i], now, params, query_text=messages[i], person=benchlib.OWNER
        )

    def nxt() -> int:
        return next(it) % len(messages)

    timed = {
        "facts_list_all": lambda: services.facts.list_all(
            now, limit=services.settings.memory.facts_inject.max_facts, person=benchlib.OWNER
        ),
        "query_embedding": lambda: services.episodes.embed_query(messages[nxt()]),
        "recall_search": lambda: recall(nxt()),
        "prepare": lambda: brain.prepare(messages[nxt()], person=benchlib.OWNER),
        # the messages naming a day 20 days back, whose conversations join the candidates
        # (memory/search/dates.py), and the same words without the day: their difference is
        # what a named day costs
        "prepare_dated": lambda: brain.prepare(
            f"{messages[nxt()]} What did we say on {day}?", person=benchlib.OWNER
        ),
        "prepare_undated": lambda: brain.prepare(
            f"{messages[nxt()]} What did we say then?", person=benchlib.OWNER
        ),
    }
    parts, parts_cpu = {}, {}
    for name, fn in timed.items():
        parts[name], parts_cpu[name] = benchlib.time_calls_cpu(fn, 100)
    row = {
        "case": label,
        "fusion": fusion,
        "episodes": len(services.episodes.index(person=benchlib.OWNER)),
        "turn_ms": benchlib.summary(total),
        "memory_work_ms": benchlib.summary(memory),
        "memory_work_cpu_ms": benchlib.summary(memory_cpu),
        "recalled_per_turn": statistics.mean(recalled),
        "parts_p50_ms": {k: round(statistics.median(v), 3) for k, v in parts.items()},
        "parts_cpu_p50_ms": {k: round(statistics.median(v), 3) for k, v in parts_cpu.items()},
        "load_avg": benchlib.load_avg(),
    }
    parts_p50 = row["parts_p50_ms"]
    row["record_p50_ms_estimate"] = round(row["memory_work_ms"]["p50"] - parts_p50["prepare"], 3)
    services.close()
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--episodes", type=int, default=100_000)
    ap.add_argument("--prompt-chars", type=int, default=None, help="past-conversations budget")
    args = ap.parse_args()
    global PROMPT_CHARS
    PROMPT_CHARS = args.prompt_chars
    # Both recalls on the record: the ADR's dense one and the default hybrid one (keyword
    # relevance from the full-text index too).
    big = run_case(f"{args.episodes}", copy_history(args.episodes), args.turns)
    big_hybrid = run_case(
        f"{args.episodes}-hybrid", copy_history(args.episodes), args.turns, "hybrid"
    )
    small = run_case("1", one_episode_db(WORK / "turn-1.db"), args.turns)
    small_hybrid = run_case("1-hybrid", one_episode_db(WORK / "turn-1.db"), args.turns, "hybrid")
    added = big["turn_ms"]["p50"] - small["turn_ms"]["p50"]
    added_cpu = big["memory_work_cpu_ms"]["p50"] - small["memory_work_cpu_ms"]["p50"]
    benchlib.write_result(
        "perf_turn",
        {
            "large": big,
            "large_hybrid": big_hybrid,
            "small": small,
            "small_hybrid": small_hybrid,
            "added_latency_ms_p50_hybrid": round(
                big_hybrid["turn_ms"]["p50"] - small_hybrid["turn_ms"]["p50"], 3
            ),
            "added_latency_ms_p50": round(added, 3),
            "added_cpu_ms_p50": round(added_cpu, 3),
        },
    )
    for row in (big, big_hybrid, small, small_hybrid):
        work = row["memory_work_ms"]
        print(
            f"{row['episodes']:>7,} episodes + 1k facts ({row['fusion']}): memory work p50 {work['p50']:.2f} ms "
            f"p90 {work['p90']:.2f} ms "
            f"(CPU {row['memory_work_cpu_ms']['p50']:.2f} ms; turn {row['turn_ms']['p50']:.2f} ms; "
            f"{row['recalled_per_turn']:.1f} recalled) parts {row['parts_p50_ms']}"
        )
    print(f"added by {args.episodes:,} episodes: {added:+.2f} ms p50")


if __name__ == "__main__":
    main()
