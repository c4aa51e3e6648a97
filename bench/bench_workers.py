"""The memory workers: the summariser's overhead per chat in-process (LLM time excluded) and the
windows worker after it; and chat turns from outside while the workers learn an imported
backlog (issue #16). Method: bench/README.md.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

import benchlib
import httpx
import procs
from benchlib import OWNER
from sqlalchemy import func, select

from caesar import audit
from caesar.db import migrate
from caesar.db.engine import Database
from caesar.db.models import AuditLog, Conversation, EpisodeSummary
from caesar.importer import import_conversations
from caesar.memory import passages
from caesar.memory.scope import Scope
from caesar.services import Services
from caesar.workers import run_until_caught_up

WORK = benchlib.OUT / "summarise"


class SummaryProvider(benchlib.InstantProvider):
    """Answers a summarise request with a summary built from the chat's first words."""

    def text(self, messages: list[Any], task: str) -> str:
        words = " ".join(messages[-1]["content"].split()[:20])
        return f"We discussed the operator's question: {words}. caesar gave concrete advice."


def summarise_run(batch_size: int, items: list[dict[str, Any]]) -> dict[str, Any]:
    path = WORK / f"summarise-{batch_size}.db"
    WORK.mkdir(parents=True, exist_ok=True)
    for leftover in WORK.glob(path.name + "*"):
        leftover.unlink()
    memory = {"episodes_summarise": {"enabled": True, "batch_size": batch_size}}
    services = Services.build(
        benchlib.bench_settings(WORK / "home", f"sqlite:///{path}", memory=memory)
    )
    migrate.upgrade(services.db)
    report = import_conversations(services, items, scope=Scope(OWNER))
    provider = SummaryProvider()
    benchlib.install(services, provider)
    embedder = services.embedder.get()
    embedder.embed_batch(["warm up"])  # model load is start-up, not per chat
    c0, started = time.thread_time(), time.perf_counter()
    handled = run_until_caught_up(services.workers["memory.summarise"])
    elapsed, cpu = time.perf_counter() - started, time.thread_time() - c0
    started = time.perf_counter()
    embedder.embed_batch([f"We discussed item {i} in detail." for i in range(batch_size)])
    embed_batch_ms = benchlib.ms(time.perf_counter() - started)
    # Then the conversations' 3-turn windows, by their own worker (memory/episodes/reembed.py).
    c1, started = time.thread_time(), time.perf_counter()
    windowed = run_until_caught_up(services.workers["memory.passages"])
    window_s, window_cpu = time.perf_counter() - started, time.thread_time() - c1
    with services.db.read() as session:
        blobs = session.scalars(select(EpisodeSummary.passage_vectors)).all()
        turn_blobs = session.scalars(select(EpisodeSummary.turn_vectors)).all()
    size = passages.window_bytes(384)
    windows = sum(len(b or b"") // size for b in blobs)
    turns = sum(len(b or b"") // size for b in turn_blobs)
    services.close()
    chats, done = max(handled, 1), max(windowed, 1)
    return {
        "batch_size": batch_size,
        "chats": handled,
        "imported": report.imported,
        "total_s": round(elapsed, 2),
        "provider_s": round(provider.seconds, 4),
        "overhead_ms_per_chat": round(benchlib.ms(elapsed - provider.seconds) / chats, 2),
        "overhead_cpu_ms_per_chat": round(benchlib.ms(cpu - provider.seconds) / chats, 2),
        "one_embed_batch_ms": round(embed_batch_ms, 2),
        "passages_chats": windowed,
        "passages_windows_per_chat": round(windows / done, 1),
        "passages_turns_per_chat": round(turns / done, 1),
        "passages_ms_per_chat": round(benchlib.ms(window_s) / done, 2),
        "passages_cpu_ms_per_chat": round(benchlib.ms(window_cpu) / done, 2),
        "passages_ms_per_window": round(benchlib.ms(window_s) / max(windows, 1), 2),
        "load_avg": benchlib.load_avg(),
    }


def summarise(chats: int = 200) -> None:
    """`memory.summarise` until caught up over real LongMemEval chats, an instant provider:
    overhead per chat at batch 4 (the default) and 16; then `memory.passages` over them."""
    items = benchlib.conversations(chats)
    benchlib.write_result("perf_summarise", {"runs": [summarise_run(n, items) for n in (4, 16)]})


# -- chat while learning ---------------------------------------------------------------------
QUESTIONS = (
    "What did we talk about when I asked about {}?",
    "Remind me what you suggested for {}.",
    "I tried the {} thing you mentioned, any follow-up?",
    "Do you remember my question on {}?",
)
TOPICS = ("sleep", "recipes", "travel", "running", "budget", "garden", "music", "work")
MODES: dict[str, dict[str, str]] = {
    # the baseline, same run: the workers as threads of the server (before issue #16)
    "threads": {"CAESAR_WORKERS_PROCESS": "false"},
    # shipped: their own process, niced (workers_nice, default 10)
    "process": {},
    "process-nice19": {"CAESAR_WORKERS_NICE": "19"},
    "process-nice0": {"CAESAR_WORKERS_NICE": "0"},
}
SHIPPED = ["threads", "process"]  # the modes measured by default: before issue #16, and now


def busy_env(home: Path, provider_url: str) -> dict[str, str]:
    """Chat on the instant provider; the shipped memory routes (offline: TextRank summaries,
    pattern facts) every half second; no semantic index and no retention (the imported
    history spans months)."""
    gateway = procs.provider_settings(provider_url)
    often = {"interval_seconds": 0.5}
    return procs.caesar_env(
        home,
        host="127.0.0.1",
        api_token=procs.TOKEN,
        gateway={**gateway, "routes": {"chat": "local:instant"}},
        embedder={"cache_dir": str(benchlib.MODEL_CACHE)},
        semantic=often,
        memory={"episodes_summarise": often, "facts_extract": often},
        retention={"enabled": False},
    )


def backlog(database_url: str, upto: int) -> int:
    """Of the conversations up to id `upto` (the imported ones): those not yet summarised,
    plus those summarised but still without windows."""
    c, e = Conversation, EpisodeSummary
    behind = select(func.count()).select_from(c)
    behind = behind.where(c.tip_audit_id > c.summarised_audit_id, c.id <= upto)
    bare = select(func.count()).select_from(e)
    bare = bare.where(e.passage_vectors.is_(None), e.summary != "", e.conversation_id <= upto)
    return int(read(database_url, behind) or 0) + int(read(database_url, bare) or 0)


def read(database_url: str, statement: Any, scalars: bool = False) -> Any:
    db = Database(database_url)
    try:
        with db.read() as session:
            return session.scalars(statement).all() if scalars else session.scalar(statement)
    finally:
        db.dispose()


def inside(database_url: str) -> dict[str, Any]:
    """p50 of the memory work and of the provider call the turns' rows recorded, idle and busy
    (the bench's busy turns say so)."""
    chats = AuditLog.event_type == audit.CHAT_COMPLETED
    rows = read(database_url, select(AuditLog.payload).where(chats), scalars=True)
    out: dict[str, Any] = {}
    for phase, busy in (("idle", False), ("busy", True)):
        mine = [
            r for r in rows
            if r.get("temporary") and r["messages"][-1]["content"].endswith("busy)") == busy
        ]  # fmt: skip
        if mine:
            out[phase] = {
                "memory_ms_p50": round(
                    benchlib.pct([float(r["memory"]["memory_ms"]) for r in mine], 50), 2
                ),
                "provider_ms_p50": round(
                    benchlib.pct([float(r["latency_ms"]) for r in mine], 50), 2
                ),
            }
    return out


def one_turn(http: httpx.Client, i: int, phase: str = "idle") -> float:
    message = QUESTIONS[i % len(QUESTIONS)].format(TOPICS[(i // len(QUESTIONS)) % len(TOPICS)])
    started = time.perf_counter()
    # temporary: answered with memory, never learned from, so the bench's own turns add no
    # work to the backlog it measures
    response = http.post(
        "/v1/chat", json={"message": f"{message} ({i}, {phase})", "temporary": True}
    )
    elapsed = benchlib.ms(time.perf_counter() - started)
    response.raise_for_status()
    return elapsed


def imported_home(root: Path, name: str, provider_url: str, history: Path, **extra: str) -> Any:
    home = root / name
    env = {**busy_env(home, provider_url), **extra}
    procs.caesar(env, "db", "upgrade")
    procs.caesar(env, "import", str(history), "--no-learn")
    return home, env, f"sqlite:///{home / 'caesar.db'}"


def busy_run(
    env: dict[str, str], home: Path, url: str, chats: int, max_seconds: float
) -> dict[str, Any]:
    """Turns back to back while the workers catch up on the imported backlog."""
    upto = int(read(url, select(func.max(Conversation.id))) or 0)
    left = at_start = backlog(url, upto)
    turns: list[float] = []
    headers = {"Authorization": f"Bearer {procs.TOKEN}"}
    with procs.Server(env, log=home / "busy.log") as server:
        started = last_check = time.monotonic()
        with httpx.Client(base_url=server.url, headers=headers, timeout=60) as http:
            while left > 0 and time.monotonic() - started < max_seconds:
                turns.append(one_turn(http, len(turns), "busy"))
                if time.monotonic() - last_check > 2.0:
                    left, last_check = backlog(url, upto), time.monotonic()
        elapsed = time.monotonic() - started
    if left:
        tail = (home / "busy.log").read_text(errors="replace")[-2000:]
        print(f"backlog not finished; server log tail:\n{tail}")
    done = chats if not left else max(0, chats - (left + 1) // 2)  # two items a conversation
    busy_ms = benchlib.summary(turns)
    return {
        "backlog_items_at_start": at_start,
        "backlog_items_left": left,
        "seconds": round(elapsed, 1),
        "conversations_done": done,
        "conversations_per_minute": round(done / (elapsed / 60), 1),
        "inside_ms": inside(url).get("busy"),
        "busy_ms": busy_ms,
    }


def busy(
    chats: int = 300,
    idle_turns: int = 100,
    max_seconds: float = 900.0,
    modes: list[Literal["threads", "process", "process-nice19", "process-nice0"]] = SHIPPED,
) -> None:
    """Chat while caesar learns (issue #16): `caesar serve` over HTTP, one client, turns back to
    back; idle (`--no-workers`), then while the workers learn `chats` imported conversations."""
    result: dict[str, Any] = {"chats": chats, "modes": {}}
    headers = {"Authorization": f"Bearer {procs.TOKEN}"}
    with tempfile.TemporaryDirectory(prefix="caesar-busy-") as tmp, procs.instant_provider() as llm:
        root = Path(tmp)
        history = root / "history.jsonl"
        lines = (json.dumps(c, ensure_ascii=False) for c in benchlib.conversations(chats))
        history.write_text("\n".join(lines))
        home, env, url = imported_home(root, "idle", llm, history)
        with procs.Server(env, "--no-workers", log=home / "idle.log") as server:
            with httpx.Client(base_url=server.url, headers=headers, timeout=60) as http:
                for i in range(5):  # untimed warm-up
                    one_turn(http, i)
                idle = benchlib.summary([one_turn(http, i) for i in range(idle_turns)])
        result.update(idle_ms=idle, idle_inside_ms=inside(url).get("idle"))
        for mode in modes:
            home, env, url = imported_home(root, mode, llm, history, **MODES[mode])
            run = busy_run(env, home, url, chats, max_seconds)
            run["busy_p50_over_idle_p50"] = round(run["busy_ms"]["p50"] / idle["p50"], 2)
            run["busy_p90_over_idle_p50"] = round(run["busy_ms"]["p90"] / idle["p50"], 2)
            result["modes"][mode] = run
    benchlib.write_result("perf_busy", {**result, "load_avg": benchlib.load_avg()})
