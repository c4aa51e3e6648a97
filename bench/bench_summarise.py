"""Figure (e): summarise worker overhead per chat, LLM time excluded.

`memory.summarise` runs until caught up over real conversations (LongMemEval sessions,
imported as `chat.completed` rows by caesar's importer), with an in-process provider that
answers at once with a one-sentence summary of ~30 words (and keeps its own time), the real MiniLM
embedder (one `embed_batch` per worker batch) and SQLite: reading the batch, the prompt,
embedding, writing the summary row (JSON + float32 copy; the FTS triggers run), its audit row
and the cursor. Overhead per chat = (run time − provider time) / chats, at the default batch
size (4) and at 16. Then the chats' 3-turn windows are embedded by their own worker,
`memory.passages`, timed separately (ms per chat and per window).

    .venv/bin/python bench/bench_summarise.py [--chats 200]
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import timedelta
from typing import Any

import benchlib
from bench_turn import InstantProvider, install
from sqlalchemy import select

from caesar.clock import utcnow
from caesar.db import migrate
from caesar.db.models import EpisodeSummary
from caesar.gateway.base import Message
from caesar.importer import import_conversations
from caesar.memory.search import passages
from caesar.services import Services
from caesar.workers import run_until_caught_up

DATA = benchlib.ROOT.parent / "shared" / "data" / "longmemeval_s"
WORK = benchlib.OUT / "summarise"


class SummaryProvider(InstantProvider):
    """Answers a summarise request with a summary built from the chat's first words."""

    def text(self, messages: list[Message], task: str) -> str:
        words = " ".join(messages[-1]["content"].split()[:20])
        return f"We discussed the operator's question: {words}. caesar gave concrete advice."


def conversations(count: int) -> list[dict[str, Any]]:
    """The first `count` distinct LongMemEval sessions, dated over the last 80 days."""
    seen: set[str] = set()
    found: list[dict[str, Any]] = []
    now = utcnow()
    for path in sorted(DATA.glob("*.json")):
        data = json.loads(path.read_text())
        for session_id, turns in zip(
            data["haystack_session_ids"], data["haystack_sessions"], strict=True
        ):
            if session_id in seen or len(turns) < 2 or turns[-1]["role"] != "assistant":
                continue
            seen.add(session_id)
            created = now - timedelta(days=80 * (1 - len(found) / count))
            messages = [{"role": t["role"], "content": t["content"]} for t in turns]
            found.append({"created_at": created.isoformat(), "messages": messages})
            if len(found) == count:
                return found
    return found


def run(chats: int, batch_size: int, items: list[dict[str, Any]]) -> dict[str, Any]:
    path = WORK / f"summarise-{batch_size}.db"
    WORK.mkdir(parents=True, exist_ok=True)
    for leftover in WORK.glob(path.name + "*"):
        leftover.unlink()
    settings = benchlib.bench_settings(
        WORK / "home",
        f"sqlite:///{path}",
        memory={"episodes_summarise": {"enabled": True, "batch_size": batch_size}},
    )
    services = Services.build(settings)
    migrate.upgrade(services.db)
    report = import_conversations(services, items, person=benchlib.OWNER)
    provider = SummaryProvider("local")
    install(services, provider)
    worker = services.workers["memory.summarise"]
    services.embedder.get().embed_batch(["warm up"])  # model load is start-up, not per chat
    c0, started = time.thread_time(), time.perf_counter()
    handled = run_until_caught_up(worker)
    elapsed, cpu = time.perf_counter() - started, time.thread_time() - c0
    embed_started = time.perf_counter()
    services.embedder.get().embed_batch(
        [f"We discussed item {i} in detail." for i in range(batch_size)]
    )
    embed_batch_ms = benchlib.ms(time.perf_counter() - embed_started)
    # Then the conversations' 3-turn windows, by their own worker (memory/episodes/reembed.py).
    windowing = services.workers["memory.passages"]
    c1, started = time.thread_time(), time.perf_counter()
    windowed = run_until_caught_up(windowing)
    window_s, window_cpu = time.perf_counter() - started, time.thread_time() - c1
    with services.db.read() as session:
        blobs = session.scalars(select(EpisodeSummary.passage_vectors)).all()
        # and each turn alone (migration 0018; absent in an older checkout run by CAESAR_SRC)
        turn_blobs = (
            session.scalars(select(EpisodeSummary.turn_vectors)).all()
            if hasattr(EpisodeSummary, "turn_vectors")
            else []
        )
    windows = sum(len(b or b"") // passages.window_bytes(384) for b in blobs)
    turns = sum(len(b or b"") // passages.window_bytes(384) for b in turn_blobs)
    services.close()
    return {
        "batch_size": batch_size,
        "chats": handled,
        "imported": report.imported,
        "total_s": round(elapsed, 2),
        "provider_s": round(provider.seconds, 4),
        "overhead_ms_per_chat": round(benchlib.ms(elapsed - provider.seconds) / max(handled, 1), 2),
        "overhead_cpu_ms_per_chat": round(benchlib.ms(cpu - provider.seconds) / max(handled, 1), 2),
        "one_embed_batch_ms": round(embed_batch_ms, 2),
        "passages_chats": windowed,
        "passages_windows_per_chat": round(windows / max(windowed, 1), 1),
        "passages_turns_per_chat": round(turns / max(windowed, 1), 1),
        "passages_ms_per_chat": round(benchlib.ms(window_s) / max(windowed, 1), 2),
        "passages_cpu_ms_per_chat": round(benchlib.ms(window_cpu) / max(windowed, 1), 2),
        "passages_ms_per_window": round(benchlib.ms(window_s) / max(windows, 1), 2),
        "load_avg": benchlib.load_avg(),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chats", type=int, default=200)
    args = ap.parse_args()
    items = conversations(args.chats)
    rows = [run(len(items), size, items) for size in (4, 16)]
    benchlib.write_result("perf_summarise", {"runs": rows})
    for row in rows:
        print(
            f"summarise, batch {row['batch_size']}: {row['overhead_ms_per_chat']:.2f} ms/chat overhead "
            f"(CPU {row['overhead_cpu_ms_per_chat']:.2f}) over {row['chats']} chats; then windows "
            f"(memory.passages): {row['passages_ms_per_chat']:.1f} ms/chat for "
            f"{row['passages_windows_per_chat']} windows/chat ({row['passages_ms_per_window']:.2f} ms/window) "
            f"and {row['passages_turns_per_chat']} turns/chat"
        )


if __name__ == "__main__":
    main()
