"""Load: 50 concurrent chat clients for 60 s against a real `caesar serve` with its memory
workers on, the provider answering at once. Loopback only; bounded in time and requests.

    .venv/bin/python bench/load.py [--clients 50] [--seconds 60] [--database-url URL]
        [--postgres] [--servers N --workers M] [--restart-at S --down D]

Three processes, so none steals the others' interpreter: `caesar serve` (HTTP + the
summarise, passages, extract and semantic-index workers in-process, all on one SQLite file in
WAL mode unless --database-url), the instant provider (the test suite's OpenAI wire server; summaries
and facts for the workers, a short reply for chats) and this one, whose asyncio clients each
send one chat at a time, for `--seconds`. It prints requests, errors (any non-200, and any
"database is locked" seen anywhere), p50/p95/p99 latency, and how far the workers got.
Figures go to bench/out/results/load.json like the other benches.

Beyond one machine (issue #24, item 5): `--postgres` starts a PostgreSQL with pgvector for the
run (the test suite's, tests/pg.py); `--servers N --workers M` runs N `caesar serve
--no-workers` behind the clients (client k talks to server k mod N, as a load balancer would)
and M `caesar worker` processes. `--restart-at S --down D` shuts that PostgreSQL down S seconds
into the load and starts it again D seconds later, on its data and port. Then a 503
`database_unavailable` is the answer expected while it is down: those are counted apart (the
client waits its `Retry-After`, as an SDK does), and the run fails on any other error. Either way, every chat answered 200 must be in the audit log
exactly once, and no refused one at all.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
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

CAESAR = str(Path(sys.executable).parent / "caesar")
TOKEN = "bench-load-token-0123456789"
START_TIMEOUT_SECONDS = 120.0
CITIES = ("Lisbon", "Porto", "Kyoto", "Oslo", "Quito", "Perth", "Accra", "Lima")


# -- the instant provider (its own process) ----------------------------------------------------
def _provider_reply(body: dict[str, Any], protocol: str) -> str:
    from caesar.memory.episodes.summarise import SUMMARISE_SYSTEM
    from caesar.memory.facts.extract import EXTRACT_SYSTEM

    messages = body.get("messages") or []
    system = str(messages[0].get("content", "")) if messages else ""
    if system.startswith(EXTRACT_SYSTEM[:40]):
        return json.dumps({"facts": [{"key": "trip_city", "value": "Lisbon", "confidence": 0.7}]})
    if system.startswith(SUMMARISE_SYSTEM[:40]):
        return "The operator planned a trip and caesar suggested what to pack."
    return "Pack light, check the weather, and bring a good book."


def serve_provider() -> None:
    sys.path.insert(0, str(benchlib.ROOT / "tests"))
    from fakes.llm_server import FakeLLMServer

    with FakeLLMServer(reply=_provider_reply) as llm:
        print(llm.base_url, flush=True)
        signal.sigwait({signal.SIGTERM, signal.SIGINT})


def _start_provider() -> tuple[subprocess.Popen[str], str]:
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})  # for sigwait
    try:
        proc = subprocess.Popen(
            [sys.executable, __file__, "--provider-only"], stdout=subprocess.PIPE, text=True
        )
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


# -- caesar ------------------------------------------------------------------------------------
def _env(home: Path, provider_url: str, database_url: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAESAR_")}
    settings: dict[str, Any] = {
        "CAESAR_HOME": str(home),
        "CAESAR_HOST": "127.0.0.1",
        "CAESAR_API_TOKEN": TOKEN,
        "CAESAR_GATEWAY": {
            "providers": {
                "local": {
                    "kind": "openai",
                    "base_url": provider_url,
                    "api_key": "bench-key-0123456789",
                    "max_retries": 0,
                    "timeout_seconds": 30,
                },
            },
            "routes": {
                task: "local:instant" for task in ("chat", "memory_extract", "memory_summarise")
            },
        },
        "CAESAR_EMBEDDER": {"cache_dir": str(benchlib.MODEL_CACHE)},
        "CAESAR_SEMANTIC": {"index_enabled": True, "interval_seconds": 0.5},
        "CAESAR_MEMORY": {
            "episodes_summarise": {"enabled": True, "interval_seconds": 0.5, "batch_size": 16},
            "facts_extract": {"enabled": True, "interval_seconds": 0.5, "batch_size": 16},
        },
    }
    if database_url:
        settings["CAESAR_DATABASE_URL"] = database_url
    for key, value in settings.items():
        env[key] = value if isinstance(value, str) else json.dumps(value)
    env["HF_HUB_OFFLINE"] = "1"
    return env


def _start_server(
    env: dict[str, str], port: int, log: Path, extra: list[str] | None = None
) -> subprocess.Popen[bytes]:
    subprocess.run([CAESAR, "db", "upgrade"], env=env, check=True, capture_output=True)
    proc = subprocess.Popen(
        [CAESAR, "serve", "--host", "127.0.0.1", "--port", str(port), *(extra or [])],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
    )
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    with httpx.Client(timeout=2) as client:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"caesar serve exited: {log.read_text()[-2000:]}")
            try:
                if client.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                    return proc
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError("caesar serve did not answer /healthz in time")
            time.sleep(0.05)


# -- the clients -------------------------------------------------------------------------------
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
    urls: list[str],
    clients: int,
    seconds: float,
    postgres: Any = None,
    outage: tuple[float, float] | None = None,
) -> tuple[Tally, float, dict[str, float]]:
    tally = Tally()
    seen: dict[str, float] = {}
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    https = [
        httpx.AsyncClient(base_url=url, headers=headers, timeout=30, limits=limits) for url in urls
    ]
    try:
        # Untimed warm-up: the embedder loads and the first connections open, on every server.
        for http in https:
            for _ in range(3):
                (await http.post("/v1/chat", json={"message": "warm up"})).raise_for_status()
        started = time.monotonic()
        stop_at = started + seconds
        jobs = [_client(https[n % len(https)], n, stop_at, tally) for n in range(clients)]
        if outage is not None:
            jobs.append(_outage(postgres, *outage, seen))
        await asyncio.gather(*jobs)
        elapsed = time.monotonic() - started
        seen = {k: round(v - started, 1) for k, v in seen.items()}
    finally:
        for http in https:
            await http.aclose()
    return tally, elapsed, seen


def _recorded(database_url: str) -> Counter[str]:
    """How many chat.completed rows hold each message, as its last user turn."""
    from sqlalchemy import select

    from caesar import audit
    from caesar.db.engine import Database
    from caesar.db.models import AuditLog

    db = Database(database_url)
    try:
        with db.read() as session:
            payloads = session.scalars(
                select(AuditLog.payload).where(AuditLog.event_type == audit.CHAT_COMPLETED)
            )
            return Counter(str(p["messages"][-1]["content"]) for p in payloads)
    finally:
        db.dispose()


def _memory_progress(database_url: str) -> dict[str, int]:
    """How far each worker got while the clients chatted: chats done and chats still waiting."""
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

    db = Database(database_url)
    try:
        with db.read() as session:
            chats = (
                select(func.count())
                .select_from(AuditLog)
                .where(AuditLog.event_type == audit.CHAT_COMPLETED)
            )
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
                session.scalar(select(func.count()).select_from(Conversation).where(behind)) or 0
            )
            # memory.passages has no cursor: its queue is the summarised episodes still
            # without windows (memory/episodes/reembed.py).
            episodes = select(func.count()).select_from(EpisodeSummary)
            found["episodes"] = int(session.scalar(episodes) or 0)
            found["passages_waiting"] = int(
                session.scalar(episodes.where(EpisodeSummary.passage_vectors.is_(None))) or 0
            )
            crashed = (
                select(func.count())
                .select_from(AuditLog)
                .where(AuditLog.event_type == audit.WORKER_CRASHED)
            )
            found["worker_crashed"] = int(session.scalar(crashed) or 0)
        return found
    finally:
        db.dispose()


def _postgres(stack: ExitStack, root: Path) -> tuple[Any, str]:
    """A PostgreSQL with pgvector for this run (the test suite's), and its database's URL."""
    sys.path.insert(0, str(benchlib.ROOT / "tests"))
    from pg import create_database, start_postgres

    server = stack.enter_context(start_postgres(root / "pg"))
    return server, create_database(server, with_vector=True)


def _start_workers(env: dict[str, str], count: int, home: Path) -> list[subprocess.Popen[bytes]]:
    return [
        subprocess.Popen(
            [CAESAR, "worker"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=(home / f"worker-{k}.log").open("wb"),
        )
        for k in range(count)
    ]


def _stop(procs: list[subprocess.Popen[Any]]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


def main() -> None:
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
    parser.add_argument("--provider-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.provider_only:
        serve_provider()
        return
    if not 1 <= args.clients <= 500 or not 0 < args.seconds <= 3600:
        parser.error("--clients must be 1..500 and --seconds 0..3600")
    if not 1 <= args.servers <= 8 or not 0 <= args.workers <= 8:
        parser.error("--servers must be 1..8 and --workers 0..8")
    if args.servers > 1 and args.workers == 0:
        parser.error("several servers need --workers: each server runs none of its own")
    if args.restart_at is not None and not args.postgres:
        parser.error("--restart-at needs --postgres (a PostgreSQL this run controls)")

    with tempfile.TemporaryDirectory(prefix="caesar-load-") as tmp, ExitStack() as stack:
        home = Path(tmp)
        postgres, database_url = None, args.database_url
        if args.postgres:
            postgres, database_url = _postgres(stack, home)
        provider, provider_url = _start_provider()
        procs: list[subprocess.Popen[Any]] = [provider]
        logs = [home / f"serve-{k}.log" for k in range(args.servers)]
        try:
            env = _env(home, provider_url, database_url)
            urls = []
            extra = ["--no-workers"] if args.workers else []
            for log in logs:
                port = benchlib.free_port()
                procs.append(_start_server(env, port, log, extra))
                urls.append(f"http://127.0.0.1:{port}")
            procs += _start_workers(env, args.workers, home)
            outage = None if args.restart_at is None else (args.restart_at, args.down)
            tally, elapsed, seen = asyncio.run(
                _load(urls, args.clients, args.seconds, postgres, outage)
            )
            url = database_url or f"sqlite:///{home / 'caesar.db'}"
            progress = _memory_progress(url)
            recorded = _recorded(url)
        finally:
            _stop(procs[::-1])
        server_log = "".join(log.read_text(errors="replace") for log in logs)
        worker_log = "".join(
            (home / f"worker-{k}.log").read_text(errors="replace") for k in range(args.workers)
        )
    if server_log.strip():
        kept = benchlib.OUT / "load-serve.log"
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(server_log)

    errors, latencies = tally.errors, tally.latencies
    locked = server_log.count("database is locked") + sum(
        c for e, c in errors.items() if "locked" in e
    )
    lost = [m for m in tally.answered if recorded[m] == 0]
    twice = [m for m in tally.answered if recorded[m] > 1]
    refused_kept = [m for m in tally.unavailable if recorded[m] > 0]
    requests = len(latencies) + sum(errors.values()) + len(tally.unavailable)
    result = {
        "clients": args.clients,
        "seconds": round(elapsed, 1),
        "engine": "postgresql" if database_url else "sqlite",
        "servers": args.servers,
        "worker_processes": args.workers,
        "requests": requests,
        "errors": sum(errors.values()),
        "error_kinds": dict(errors.most_common(5)),
        "database_is_locked": locked,
        "server_tracebacks": server_log.count("Traceback"),
        "worker_tracebacks": worker_log.count("Traceback"),
        "throughput_rps": round(len(latencies) / elapsed, 1),
        "latency_ms": {
            "p50": round(benchlib.pct(latencies, 50), 1),
            "p95": round(benchlib.pct(latencies, 95), 1),
            "p99": round(benchlib.pct(latencies, 99), 1),
            "max": round(max(latencies, default=float("nan")), 1),
        },
        "answered": len(tally.answered),
        "answered_not_recorded": len(lost),
        "answered_recorded_twice": len(twice),
        "refused_database_unavailable": len(tally.unavailable),
        "refused_but_recorded": len(refused_kept),
        "outage": {"at_s": args.restart_at, "down_s": args.down, **seen}
        if args.restart_at is not None
        else None,
        "memory_at_the_end": progress,
        "load_avg": benchlib.load_avg(),
    }
    benchlib.write_result("load", result)
    lat = result["latency_ms"]
    print(
        f"load: {args.clients} clients x {result['seconds']} s on {result['engine']}, "
        f"{args.servers} server(s), {args.workers or 'in-server'} worker process(es): "
        f"{requests} requests, {result['errors']} errors, {locked} 'database is locked', "
        f"{result['throughput_rps']} req/s; latency p50 {lat['p50']} ms, p95 {lat['p95']} ms, "
        f"p99 {lat['p99']} ms, max {lat['max']} ms"
    )
    print(
        f"chats answered {len(tally.answered)}: not recorded {len(lost)}, recorded twice "
        f"{len(twice)}; refused as database_unavailable {len(tally.unavailable)}, of them "
        f"recorded {len(refused_kept)}"
    )
    if result["outage"]:
        print(f"PostgreSQL outage: {result['outage']}")
    print(f"memory workers at the end: {progress}; load average {result['load_avg']}")
    if errors:
        print(f"errors: {dict(errors.most_common(5))}")
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
