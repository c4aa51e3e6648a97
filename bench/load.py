"""Load: 50 concurrent chat clients for 60 s against a real `caesar serve` with its memory
workers on, the provider answering at once. Loopback only; bounded in time and requests.

    .venv/bin/python bench/load.py [--clients 50] [--seconds 60] [--database-url URL]
        [--postgres] [--servers N --workers M] [--restart-at S --down D]

Exits non-zero on any error, "database is locked" or server traceback, and on a chat answered
200 that is not in the audit log exactly once (or a refused one that is). Method, and what
`--postgres`, `--servers`, `--workers` and `--restart-at` do: bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import benchlib
import httpx
import procs
from sqlalchemy import func, select

from caesar import audit
from caesar.db.engine import Database
from caesar.db.models import (
    AuditLog,
    Conversation,
    EpisodeSummary,
    MemoryExtractCursor,
    SemanticIndexCursor,
)

CITIES = ("Lisbon", "Porto", "Kyoto", "Oslo", "Quito", "Perth", "Accra", "Lima")


def load_env(home: Path, provider_url: str, database_url: str | None) -> dict[str, str]:
    """Every task on the instant provider; every worker on, every half second, 16 a batch."""
    often = {"enabled": True, "interval_seconds": 0.5, "batch_size": 16}
    url = {"database_url": database_url} if database_url else {}
    return procs.caesar_env(
        home,
        host="127.0.0.1",
        api_token=procs.TOKEN,
        gateway=procs.provider_settings(provider_url),
        embedder={"cache_dir": str(benchlib.MODEL_CACHE)},
        semantic={"index_enabled": True, "interval_seconds": 0.5},
        memory={"episodes_summarise": often, "facts_extract": often},
        **url,
    )


@dataclass
class Tally:
    """What the clients saw: latencies of the answered chats, errors by kind, the messages
    answered and those refused as `database_unavailable` (the ones expected while PostgreSQL
    is down)."""

    latencies: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    answered: list[str] = field(default_factory=list)
    unavailable: list[str] = field(default_factory=list)


async def _client(http: httpx.AsyncClient, number: int, stop_at: float, tally: Tally) -> None:
    i = 0
    while time.monotonic() < stop_at:
        city = CITIES[(number + i) % len(CITIES)]
        message = f"client {number}, turn {i}: I'm flying to {city} next week, what should I pack?"
        started = time.perf_counter()
        try:
            response = await http.post("/v1/chat", json={"message": message})
            if response.status_code == 200:
                tally.latencies.append(benchlib.ms(time.perf_counter() - started))
                tally.answered.append(message)
            elif response.status_code == 503 and "database_unavailable" in response.text:
                tally.unavailable.append(message)
                # as an SDK client does: wait as told before the next request
                await asyncio.sleep(float(response.headers.get("retry-after", "1")))
            else:
                tally.errors[f"HTTP {response.status_code}: {response.text[:120]}"] += 1
        except httpx.HTTPError as exc:
            tally.errors[f"{type(exc).__name__}: {exc}"[:160]] += 1
        i += 1


async def _outage(postgres: Any, at: float, down: float, seen: dict[str, float]) -> None:
    """PostgreSQL shut down `at` seconds in, started again `down` seconds later."""
    await asyncio.sleep(at)
    seen["paused_at"] = time.monotonic()
    await asyncio.to_thread(postgres.pause)
    await asyncio.sleep(down)
    await asyncio.to_thread(postgres.resume)
    seen["resumed_at"] = time.monotonic()


async def _load(
    urls: list[str], clients: int, seconds: float, postgres: Any, outage: tuple[float, float] | None
) -> tuple[Tally, float, dict[str, float]]:
    tally = Tally()
    seen: dict[str, float] = {}
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    headers = {"Authorization": f"Bearer {procs.TOKEN}"}
    https = [
        httpx.AsyncClient(base_url=u, headers=headers, timeout=30, limits=limits) for u in urls
    ]
    try:
        # Untimed warm-up: the embedder loads and the first connections open, on every server.
        for http in https:
            for _ in range(3):
                (await http.post("/v1/chat", json={"message": "warm up"})).raise_for_status()
        started = time.monotonic()
        jobs = [_client(https[n % len(https)], n, started + seconds, tally) for n in range(clients)]
        if outage is not None:
            jobs.append(_outage(postgres, *outage, seen))
        await asyncio.gather(*jobs)
        elapsed = time.monotonic() - started
        seen = {k: round(v - started, 1) for k, v in seen.items()}
    finally:
        for http in https:
            await http.aclose()
    return tally, elapsed, seen


def _recorded(db: Database) -> Counter[str]:
    """How many chat.completed rows hold each message, as its last user turn."""
    chats = select(AuditLog.payload).where(AuditLog.event_type == audit.CHAT_COMPLETED)
    with db.read() as session:
        return Counter(str(p["messages"][-1]["content"]) for p in session.scalars(chats))


def _memory_progress(db: Database) -> dict[str, int]:
    """How far each worker got while the clients chatted: chats done and chats still waiting."""
    count = select(func.count())
    chats = count.select_from(AuditLog).where(AuditLog.event_type == audit.CHAT_COMPLETED)
    with db.read() as session:
        found = {"chats": int(session.scalar(chats) or 0)}
        for name, cursor in (
            ("extract", MemoryExtractCursor),
            ("semantic_index", SemanticIndexCursor),
        ):
            at = session.scalar(select(cursor.last_audit_id)) or 0
            found[f"{name}_waiting"] = int(session.scalar(chats.where(AuditLog.id > at)) or 0)
        # memory.summarise's queue: the conversations whose episode is behind their tip
        behind = Conversation.tip_audit_id > Conversation.summarised_audit_id
        found["summarise_waiting"] = int(
            session.scalar(count.select_from(Conversation).where(behind)) or 0
        )
        # memory.passages has no cursor: its queue is the summarised episodes still without
        # windows (memory/episodes/reembed.py).
        episodes = count.select_from(EpisodeSummary)
        found["episodes"] = int(session.scalar(episodes) or 0)
        bare = episodes.where(EpisodeSummary.passage_vectors.is_(None))
        found["passages_waiting"] = int(session.scalar(bare) or 0)
        crashed = count.select_from(AuditLog).where(AuditLog.event_type == audit.WORKER_CRASHED)
        found["worker_crashed"] = int(session.scalar(crashed) or 0)
    return found


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--database-url", default=None, help="default: SQLite in a temp home")
    parser.add_argument(
        "--postgres", action="store_true", help="start a PostgreSQL with pgvector for the run"
    )
    parser.add_argument("--servers", type=int, default=1, help="caesar serve processes")
    parser.add_argument(
        "--workers", type=int, default=0, help="caesar worker processes (0: in the server)"
    )
    parser.add_argument(
        "--restart-at", type=float, default=None, help="shut PostgreSQL down after S seconds"
    )
    parser.add_argument("--down", type=float, default=5.0, help="... for D seconds")
    args = parser.parse_args()
    if not 1 <= args.clients <= 500 or not 0 < args.seconds <= 3600:
        parser.error("--clients must be 1..500 and --seconds 0..3600")
    if not 1 <= args.servers <= 8 or not 0 <= args.workers <= 8:
        parser.error("--servers must be 1..8 and --workers 0..8")
    if args.servers > 1 and args.workers == 0:
        parser.error("several servers need --workers: each server runs none of its own")
    if args.restart_at is not None and not args.postgres:
        parser.error("--restart-at needs --postgres (a PostgreSQL this run controls)")
    return args


def main() -> None:
    args = _arguments()
    with tempfile.TemporaryDirectory(prefix="caesar-load-") as tmp, ExitStack() as stack:
        home = Path(tmp)
        postgres, database_url = None, args.database_url
        if args.postgres:
            from pg import create_database, start_postgres

            postgres = stack.enter_context(start_postgres(home / "pg"))
            database_url = create_database(postgres, with_vector=True)
        env = load_env(home, stack.enter_context(procs.instant_provider()), database_url)
        logs = [home / f"serve-{k}.log" for k in range(args.servers)]
        extra = ["--no-workers"] if args.workers else []
        servers = [
            stack.enter_context(procs.Server(env, *extra, log=log, upgrade=True)) for log in logs
        ]
        workers = [
            subprocess.Popen(
                [procs.CAESAR, "worker"],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=(home / f"worker-{k}.log").open("wb"),
            )
            for k in range(args.workers)
        ]
        try:
            outage = None if args.restart_at is None else (args.restart_at, args.down)
            urls = [s.url for s in servers]
            tally, elapsed, seen = asyncio.run(
                _load(urls, args.clients, args.seconds, postgres, outage)
            )
            db = Database(database_url or f"sqlite:///{home / 'caesar.db'}")
            progress, recorded = _memory_progress(db), _recorded(db)
            db.dispose()
        finally:
            for worker in workers:
                procs.stop(worker, 15)
            for server in servers:
                server.stop()
        server_log = "".join(log.read_text(errors="replace") for log in logs)
        worker_log = "".join(
            (home / f"worker-{k}.log").read_text(errors="replace") for k in range(args.workers)
        )
    if server_log.strip():
        benchlib.OUT.mkdir(parents=True, exist_ok=True)
        (benchlib.OUT / "load-serve.log").write_text(server_log)

    errors, latencies = tally.errors, tally.latencies
    locked = server_log.count("database is locked") + sum(
        c for e, c in errors.items() if "locked" in e
    )
    lost = [m for m in tally.answered if recorded[m] == 0]
    twice = [m for m in tally.answered if recorded[m] > 1]
    refused_kept = [m for m in tally.unavailable if recorded[m] > 0]
    outage_seen = {"at_s": args.restart_at, "down_s": args.down, **seen}
    result = {
        "clients": args.clients,
        "seconds": round(elapsed, 1),
        "engine": "postgresql" if database_url else "sqlite",
        "servers": args.servers,
        "worker_processes": args.workers,
        "requests": len(latencies) + sum(errors.values()) + len(tally.unavailable),
        "errors": sum(errors.values()),
        "error_kinds": dict(errors.most_common(5)),
        "database_is_locked": locked,
        "server_tracebacks": server_log.count("Traceback"),
        "worker_tracebacks": worker_log.count("Traceback"),
        "throughput_rps": round(len(latencies) / elapsed, 1),
        "latency_ms": {
            **{f"p{q}": round(benchlib.pct(latencies, q), 1) for q in (50, 95, 99)},
            "max": round(max(latencies, default=float("nan")), 1),
        },
        "answered": len(tally.answered),
        "answered_not_recorded": len(lost),
        "answered_recorded_twice": len(twice),
        "refused_database_unavailable": len(tally.unavailable),
        "refused_but_recorded": len(refused_kept),
        "outage": outage_seen if args.restart_at is not None else None,
        "memory_at_the_end": progress,
        "load_avg": benchlib.load_avg(),
    }
    benchlib.write_result("load", result)
    # While PostgreSQL is down the workers' batches fail (logged with their traceback, and
    # audited once it is back): only an outage-free run must have none.
    calm = args.restart_at is None
    failed = (
        result["errors"]
        or locked
        or (calm and result["server_tracebacks"])
        or (calm and progress["worker_crashed"])
        or lost
        or twice
        or refused_kept
        or (calm and tally.unavailable)
    )
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
