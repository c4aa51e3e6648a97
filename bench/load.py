"""Load: 50 concurrent chat clients for 60 s against a real `caesar serve` with its memory
workers on, the provider answering at once. Loopback only; bounded in time and requests.

    .venv/bin/python bench/load.py [--clients 50] [--seconds 60] [--database-url URL]

Three processes, so none steals the others' interpreter: `caesar serve` (HTTP + the
summarise, passages, extract and semantic-index workers in-process, all on one SQLite file in
WAL mode unless --database-url), the instant provider (the test suite's OpenAI wire server; summaries
and facts for the workers, a short reply for chats) and this one, whose asyncio clients each
send one chat at a time, for `--seconds`. It prints requests, errors (any non-200, and any
"database is locked" seen anywhere), p50/p95/p99 latency, and how far the workers got.
Figures go to bench/out/results/load.json like the other benches.
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
async def _client(
    http: httpx.AsyncClient,
    number: int,
    stop_at: float,
    latencies: list[float],
    errors: Counter[str],
) -> None:
    i = 0
    while time.monotonic() < stop_at:
        city = CITIES[(number + i) % len(CITIES)]
        body = {
            "message": f"client {number}, turn {i}: I'm flying to {city} next week, what should I pack?"
        }
        started = time.perf_counter()
        try:
            response = await http.post("/v1/chat", json=body)
            if response.status_code != 200:
                errors[f"HTTP {response.status_code}: {response.text[:120]}"] += 1
            else:
                latencies.append(benchlib.ms(time.perf_counter() - started))
        except httpx.HTTPError as exc:
            errors[f"{type(exc).__name__}: {exc}"[:160]] += 1
        i += 1


async def _load(url: str, clients: int, seconds: float) -> tuple[list[float], Counter[str], float]:
    latencies: list[float] = []
    errors: Counter[str] = Counter()
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30, limits=limits) as http:
        # Untimed warm-up: the embedder loads and the first connections open.
        for _ in range(3):
            (await http.post("/v1/chat", json={"message": "warm up"})).raise_for_status()
        started = time.monotonic()
        stop_at = started + seconds
        await asyncio.gather(
            *(_client(http, n, stop_at, latencies, errors) for n in range(clients))
        )
        elapsed = time.monotonic() - started
    return latencies, errors, elapsed


def _memory_progress(database_url: str) -> dict[str, int]:
    """How far each worker got while the clients chatted: chats done and chats still waiting."""
    from sqlalchemy import func, select

    from caesar import audit
    from caesar.db.engine import Database
    from caesar.db.models import (
        AuditLog,
        EpisodeSummary,
        MemoryExtractCursor,
        MemorySummariseCursor,
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
                ("summarise", MemorySummariseCursor),
                ("extract", MemoryExtractCursor),
                ("semantic_index", SemanticIndexCursor),
            ):
                at = session.scalar(select(cursor.last_audit_id)) or 0
                found[f"{name}_waiting"] = int(session.scalar(chats.where(AuditLog.id > at)) or 0)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--database-url", default=None, help="default: SQLite in a temp home")
    parser.add_argument("--provider-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.provider_only:
        serve_provider()
        return
    if not 1 <= args.clients <= 500 or not 0 < args.seconds <= 3600:
        parser.error("--clients must be 1..500 and --seconds 0..3600")

    with tempfile.TemporaryDirectory(prefix="caesar-load-") as tmp:
        home = Path(tmp)
        provider, provider_url = _start_provider()
        server = None
        try:
            port = benchlib.free_port()
            log = home / "serve.log"
            server = _start_server(_env(home, provider_url, args.database_url), port, log)
            url = f"http://127.0.0.1:{port}"
            latencies, errors, elapsed = asyncio.run(_load(url, args.clients, args.seconds))
            progress = _memory_progress(args.database_url or f"sqlite:///{home / 'caesar.db'}")
        finally:
            for proc in (server, provider):
                if proc is not None:
                    proc.terminate()
                    try:
                        proc.wait(timeout=15)
                    except subprocess.TimeoutExpired:
                        proc.kill()
        server_log = log.read_text(errors="replace")
    if server_log.strip():
        kept = benchlib.OUT / "load-serve.log"
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(server_log)

    locked = server_log.count("database is locked") + sum(
        c for e, c in errors.items() if "locked" in e
    )
    requests = len(latencies) + sum(errors.values())
    result = {
        "clients": args.clients,
        "seconds": round(elapsed, 1),
        "engine": "postgresql" if args.database_url else "sqlite",
        "requests": requests,
        "errors": sum(errors.values()),
        "error_kinds": dict(errors.most_common(5)),
        "database_is_locked": locked,
        "server_tracebacks": server_log.count("Traceback"),
        "throughput_rps": round(len(latencies) / elapsed, 1),
        "latency_ms": {
            "p50": round(benchlib.pct(latencies, 50), 1),
            "p95": round(benchlib.pct(latencies, 95), 1),
            "p99": round(benchlib.pct(latencies, 99), 1),
            "max": round(max(latencies, default=float("nan")), 1),
        },
        "memory_at_the_end": progress,
        "load_avg": benchlib.load_avg(),
    }
    benchlib.write_result("load", result)
    lat = result["latency_ms"]
    print(
        f"load: {args.clients} clients x {result['seconds']} s on {result['engine']}: "
        f"{requests} requests, {result['errors']} errors, {locked} 'database is locked', "
        f"{result['throughput_rps']} req/s; latency p50 {lat['p50']} ms, p95 {lat['p95']} ms, "
        f"p99 {lat['p99']} ms, max {lat['max']} ms"
    )
    print(f"memory workers at the end: {progress}; load average {result['load_avg']}")
    if errors:
        print(f"errors: {dict(errors.most_common(5))}")
    failed = result["errors"] or locked or result["server_tracebacks"] or progress["worker_crashed"]
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
