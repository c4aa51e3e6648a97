"""What the standing statements cost a turn, and what learning them costs (issue #46): on
against off for 0, 30 and 300 statements; the offline shapes over LongMemEval's user turns.

    .venv/bin/python bench/bench_standing.py [--turns 200]     (= bench/run.py standing)
"""

from __future__ import annotations

import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import benchlib
import numpy as np
import recall_quality as rq
from benchlib import OWNER

from caesar.brain import Brain
from caesar.clock import utcnow
from caesar.db import migrate
from caesar.db.models import Memory
from caesar.importer import import_conversations
from caesar.memory.scope import Scope
from caesar.memory.standing import kinds
from caesar.memory.standing.offline import extract_statements
from caesar.services import Services
from caesar.workers import run_until_caught_up

MESSAGES = (
    "Can you suggest a dinner recipe for tonight?",
    "Which laptop should I buy for video editing?",
    "How should I plan my training this month?",
    "What did we talk about last week?",
)


def learning_rate() -> dict[str, float]:
    chats = list(benchlib.longmemeval_sessions().values())
    chars = sum(len(t["content"]) for c in chats for t in c if t["role"] == "user")
    started = time.process_time()
    found = sum(len(extract_statements(c)) for c in chats)
    cpu = time.process_time() - started
    return {
        "conversations": len(chats),
        "statements": found,
        "ms_per_conversation": round(cpu * 1000 / len(chats), 3),
        "ms_per_1000_user_chars": round(cpu * 1000 / (chars / 1000), 4),
    }


def statements(services: Services, count: int) -> None:
    """`count` current statements of every kind, with bearing vectors from the real embedder."""
    slots = list(kinds.SLOTS.values())
    texts = [
        (slots[i % len(slots)], f"I said thing number {i} about {slots[i % len(slots)].bears_on}.")
        for i in range(count)
    ]
    vectors = services.standing.vectors([(s.name, t) for s, t in texts])
    now = utcnow()
    with services.db.write() as session:
        for i, ((slot, text), vector) in enumerate(zip(texts, vectors, strict=True)):
            when = now - timedelta(days=i % 90)
            session.add(
                Memory(
                    person_id=OWNER,
                    kind=slot.kind,
                    slot=slot.name,
                    text=text,
                    about=str(i),
                    polarity=1,
                    confidence=0.8,
                    speaker="person",
                    said_at=when,
                    created_at=now,
                    updated_at=when,
                    vector=np.asarray(vector, np.float32).tobytes(),
                    model=services.standing.model,
                )
            )


def history(home: Path, conversations: int) -> tuple[Services, Services]:
    """`conversations` LongMemEval sessions, summarised and windowed; the same database behind
    two Services, [memory.standing] on and off."""
    settings = rq.bench_settings(home)
    services = Services.build(settings)
    migrate.upgrade(services.db)
    chats = [
        t
        for t in (
            rq.importable(c) for c in list(benchlib.longmemeval_sessions().values())[:conversations]
        )
        if t is not None
    ]
    now = utcnow()
    import_conversations(
        services,
        [
            {"created_at": (now - timedelta(days=i + 1)).isoformat(), "messages": c}
            for i, c in enumerate(chats)
        ],
        scope=Scope(OWNER),
    )
    for name in ("memory.summarise", "memory.passages"):
        run_until_caught_up(services.workers[name])
    off_settings = settings.model_copy(deep=True)
    off_settings.memory.standing.enabled = False
    services_off = Services.build(off_settings)
    services_off.embedder.set(services.embedder.get())
    return services, services_off


def turn_cost(on: Brain, off: Brain, turns: int) -> dict[str, float]:
    """memory_ms of `turns` turns each, on and off alternately (the first four dropped)."""
    times: dict[str, list[float]] = {"on": [], "off": []}
    for i in range(turns):
        message = MESSAGES[i % len(MESSAGES)]
        for name, brain in (("on", on), ("off", off)) if i % 2 else (("off", off), ("on", on)):
            ctx = brain.prepare(message, scope=Scope(OWNER))
            if i >= 4:
                times[name].append(ctx.memory_ms)
    p50 = {k: statistics.median(v) for k, v in times.items()}
    return {
        "on_p50_ms": round(p50["on"], 3),
        "off_p50_ms": round(p50["off"], 3),
        "added_p50_ms": round(p50["on"] - p50["off"], 3),
    }


def standing(turns: int = 200, conversations: int = 60) -> None:
    """What the standing statements cost a turn (on against off, 0, 30 and 300 statements,
    beside `conversations` past ones) and what learning them costs."""
    result: dict[str, Any] = {"machine": benchlib.load_avg(), "learning": learning_rate()}
    print("learning:", result["learning"], flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        services, services_off = history(Path(tmp), conversations)
        on, off = Brain(services), Brain(services_off)
        added = 0
        for count in (0, 30, 300):
            statements(services, count - added)
            added = count
            result[f"turn_{count}"] = turn_cost(on, off, turns)
            print(f"{count} statements:", result[f"turn_{count}"], flush=True)
        services.close()
        services_off.close()
    benchlib.write_result("standing", result)


if __name__ == "__main__":
    benchlib.cli(standing)
