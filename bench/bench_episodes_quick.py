"""Quick figures for the episodes layer (issue 4); the full benchmark lives elsewhere.

    .venv/bin/python bench/bench_episodes_quick.py [--chats 200] [--episodes 10000] [--runs 200]

1. Summarise worker overhead per chat: `memory.summarise` run until caught up over `--chats`
   chats, the LLM being the local wire server from the test suite (answers at once), with the
   real MiniLM embedder and SQLite. Reported next to the bare LLM round trip through the
   gateway (the openai SDK to a local socket), so the rest is the worker's own cost.
2. Recall at `--episodes` episodes: the full auto-recall step of a turn (embed the message,
   index refresh, top-K search, fetch rows, rank), the search alone on a given vector, the
   cold index load, and the recall bookkeeping transaction (counters + audit rows).
   Episodes have real MiniLM vectors of varied synthetic summaries.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import benchlib
import numpy as np

sys.path.insert(0, str(benchlib.ROOT / "tests"))
from fakes.llm_server import FakeLLMServer

from caesar import audit
from caesar.clock import utcnow
from caesar.config import Settings
from caesar.db import migrate
from caesar.memory.episodes.recall import RecallParams, episode_row
from caesar.services import Services
from caesar.workers import run_until_caught_up

SUMMARY = "We discussed the operator's trouble sleeping; caesar suggested lowering the thermostat."
TOPICS = [
    "sleep",
    "the thermostat",
    "a trip to Lisbon",
    "the kitchen renovation",
    "the dog Biscuit",
    "a job interview",
    "running shoes",
    "tax forms",
    "a birthday present",
    "the garden",
]
VERBS = ["discussed", "planned", "worried about", "compared options for", "made a list about"]


def cpu_ms(fn: Any, runs: int) -> float:
    """Median process CPU time of `fn`: less distorted than wall time on a loaded machine."""
    out = []
    for _ in range(runs):
        started = time.process_time()
        fn()
        out.append(benchlib.ms(time.process_time() - started))
    return round(float(np.median(out)), 3)


def build(home: Path, llm: FakeLLMServer, **extra: Any) -> Services:
    settings = Settings(
        home=home,
        gateway={
            "providers": {
                "local": {
                    "kind": "openai",
                    "base_url": llm.base_url,
                    "api_key": "bench-key-0123456789",
                    "max_retries": 0,
                }
            },
            "routes": {
                "chat": "local:instant",
                "memory_extract": "local:instant",
                "memory_summarise": "local:instant",
            },
        },
        embedder={"cache_dir": benchlib.MODEL_CACHE},
        **extra,
    )
    services = Services.build(settings)
    migrate.upgrade(services.db)
    return services


def bench_summarise(llm: FakeLLMServer, chats: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        services = build(Path(tmp), llm, memory={"episodes_summarise": {"enabled": True}})
        services.embedder.get().embed_batch(["warm up"])
        llm.reply = lambda body, protocol: SUMMARY
        gateway_ms = benchlib.time_calls(
            lambda: services.gateway.complete(
                [{"role": "user", "content": "hi"}], task="memory_summarise"
            ),
            100,
        )
        with services.db.write() as session:
            for i in range(chats):
                services.audit.append(
                    session,
                    audit.CHAT_COMPLETED,
                    {
                        "messages": [
                            {"role": "user", "content": f"I keep waking up at 3am, night {i}."}
                        ],
                        "reply": "Try lowering the thermostat to 65°F and track your sleep for a week.",
                    },
                    person=benchlib.OWNER,
                )
        worker = services.workers["memory.summarise"]
        started, cpu_started = time.perf_counter(), time.process_time()
        handled = run_until_caught_up(worker)
        total_ms = benchlib.ms(time.perf_counter() - started)
        total_cpu_ms = benchlib.ms(time.process_time() - cpu_started)
        services.close()
    per_chat = total_ms / handled
    llm_p50 = float(np.median(gateway_ms))
    return {
        "chats": handled,
        "batch_size": 4,
        "total_ms": round(total_ms, 1),
        "per_chat_ms": round(per_chat, 3),
        "llm_round_trip_p50_ms": round(llm_p50, 3),
        "worker_overhead_per_chat_ms": round(per_chat - llm_p50, 3),
        # CPU of this process per chat: worker + SDK + the in-process fake server
        "cpu_per_chat_ms": round(total_cpu_ms / handled, 3),
    }


def bench_recall(llm: FakeLLMServer, episodes: int, runs: int) -> dict[str, Any]:
    rng = np.random.default_rng(4)
    with tempfile.TemporaryDirectory() as tmp:
        services = build(Path(tmp), llm)
        embedder = services.embedder.get()
        texts = [
            f"We {VERBS[rng.integers(len(VERBS))]} {TOPICS[rng.integers(len(TOPICS))]} "
            f"and {TOPICS[rng.integers(len(TOPICS))]}; note {i}."
            for i in range(episodes)
        ]
        started = time.perf_counter()
        vectors = np.vstack(
            [embedder.embed_batch(texts[i : i + 256]) for i in range(0, episodes, 256)]
        )
        embed_all_s = time.perf_counter() - started
        now = utcnow()
        with services.db.write() as session:
            for summary, vector in zip(texts, vectors, strict=True):
                created = now - timedelta(days=float(rng.uniform(0, 120)))
                row = services.audit.append(
                    session,
                    audit.CHAT_COMPLETED,
                    {"messages": [], "reply": ""},
                    created_at=created,
                    person=benchlib.OWNER,
                )
                session.add(
                    episode_row(
                        audit_log_id=row.id,
                        summary=summary,
                        vector=vector,
                        model=embedder.model_id,
                        created_at=created,
                        recall_count=int(rng.integers(0, 5)),
                        person=benchlib.OWNER,
                    )
                )
        memory = services.episodes
        started = time.perf_counter()
        loaded = memory.warm()
        cold_ms = benchlib.ms(time.perf_counter() - started)
        # Steady state: let a background ANN build (if the index makes one) finish first.
        wait = getattr(memory.index(), "wait_for_ivf", None)
        if wait is not None:
            wait(120)
        params = RecallParams.from_settings(services.settings.memory.episodes_recall)
        query = "I tried the thermostat thing you suggested"
        vector = memory.embed_query(query)
        found = memory.search(vector, utcnow(), params, person=benchlib.OWNER)
        search_ms = benchlib.time_calls(
            lambda: memory.search(vector, utcnow(), params, person=benchlib.OWNER), runs
        )
        full_ms = benchlib.time_calls(
            lambda: memory.search(
                memory.embed_query(query), utcnow(), params, person=benchlib.OWNER
            ),
            runs,
        )
        embed_ms = benchlib.time_calls(lambda: memory.embed_query(query), runs)

        def bookkeeping() -> None:
            with services.db.write() as session:
                memory.record_recalls(
                    session,
                    found,
                    now=utcnow(),
                    context={"turn_audit_id": 0},
                    person=benchlib.OWNER,
                )

        record_ms = benchlib.time_calls(bookkeeping, min(runs, 50))
        cpu = {
            "search_cpu_p50_ms": cpu_ms(
                lambda: memory.search(vector, utcnow(), params, person=benchlib.OWNER), runs
            ),
            "embed_plus_search_cpu_p50_ms": cpu_ms(
                lambda: memory.search(
                    memory.embed_query(query), utcnow(), params, person=benchlib.OWNER
                ),
                runs,
            ),
        }
        services.close()
    return {
        "episodes": loaded,
        "embed_10k_summaries_s": round(embed_all_s, 2) if episodes == 10_000 else None,
        "recalled": len(found),
        "cold_index_load_ms": round(cold_ms, 1),
        "embed_query_ms": benchlib.summary(embed_ms),
        "search_ms": benchlib.summary(search_ms),
        "embed_plus_search_ms": benchlib.summary(full_ms),
        "record_recalls_ms": benchlib.summary(record_ms),
        **cpu,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=200)
    parser.add_argument("--episodes", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    with FakeLLMServer() as llm:
        summarise = bench_summarise(llm, args.chats)
        recall = bench_recall(llm, args.episodes, args.runs)
    result = {"summarise": summarise, "recall": recall}
    path = benchlib.write_result("episodes_quick", result)
    s, r = summarise, recall
    print(
        f"summarise: {s['chats']} chats in {s['total_ms']:.0f} ms = {s['per_chat_ms']:.2f} ms/chat "
        f"(LLM round trip p50 {s['llm_round_trip_p50_ms']:.2f} ms; worker's own {s['worker_overhead_per_chat_ms']:.2f} ms)"
    )
    print(
        f"recall @ {r['episodes']} episodes: cold load {r['cold_index_load_ms']:.0f} ms; "
        f"search p50 {r['search_ms']['p50']:.2f} ms p99 {r['search_ms']['p99']:.2f}; "
        f"embed+search p50 {r['embed_plus_search_ms']['p50']:.2f} ms p99 {r['embed_plus_search_ms']['p99']:.2f}; "
        f"record {r['record_recalls_ms']['p50']:.2f} ms; recalled {r['recalled']}"
    )
    print(
        f"CPU medians: summarise {s['cpu_per_chat_ms']:.2f} ms/chat; search {r['search_cpu_p50_ms']:.2f} ms; "
        f"embed+search {r['embed_plus_search_cpu_p50_ms']:.2f} ms; load average {os.getloadavg()[0]:.1f}"
    )
    print(f"written to {path}")


if __name__ == "__main__":
    main()
