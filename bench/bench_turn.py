"""Memory work per chat turn at 100k episodes + 1k facts against 1 episode: in-process
(`Brain.turn` against an instant provider, each part of `Brain.prepare` timed alone too) and
over HTTP (two `caesar serve`, one client). Method: bench/README.md.
"""

from __future__ import annotations

import http.client
import itertools
import json
import random
import shutil
import socket
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import benchlib
import history
import httpx
import numpy as np
import procs
from benchlib import OWNER

from caesar import audit
from caesar.brain import Brain
from caesar.clock import utcnow
from caesar.db import Database, migrate
from caesar.db.models import AuditLog, EpisodeSummary, Fact
from caesar.memory.recall.hits import RecallParams
from caesar.memory.scope import Scope
from caesar.minilm import MODEL_ID
from caesar.services import Services

WORK = benchlib.OUT / "turn"


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
                "person_id": OWNER,
            }
        )
        for _ in range(rng.choice([0] * 9 + [1, 2, 3])):
            edits.append(
                {
                    "event_type": audit.FACT_USER_EDITED,
                    "created_at": updated,
                    "payload": {"key": key, "value": "edited"},
                    "subject_key": key,
                    "person_id": OWNER,
                }
            )
    with db.write() as session:
        session.execute(Fact.__table__.insert(), facts)
        if edits:
            session.execute(AuditLog.__table__.insert(), edits)


def one_episode_db(path: Path) -> str:
    """A fresh database holding a single episode, on the first planted topic, and 1k facts."""
    for leftover in path.parent.glob(path.name + "*"):
        leftover.unlink()
    db = Database(f"sqlite:///{path}")
    migrate.upgrade(db)
    vector = np.round(history.centres()[0].astype(np.float64), 4)  # the same planted topic
    now = utcnow()
    chat = {"id": 1, "event_type": "chat.completed", "created_at": now, "payload": {}}
    episode = {
        "audit_log_id": 1,
        "summary": history.TOPIC_TEXTS[0][0],
        "embedding": vector.tolist(),
        "embedding_f32": vector.astype("<f4").tobytes(),
        "model": MODEL_ID,
        "created_at": now - timedelta(days=2),
        "recall_count": 0,
    }
    with db.write() as session:
        session.execute(AuditLog.__table__.insert(), [{**chat, "person_id": OWNER}])
        session.execute(EpisodeSummary.__table__.insert(), [{**episode, "person_id": OWNER}])
    add_facts(db, 1000)
    db.dispose()
    return f"sqlite:///{path}"


def copy_history(episodes: int, adr: bool = False) -> str:
    """A copy of the synthetic history of that size, with 1k facts (`adr`: shaped like an
    install upgraded from the ADR's schema, history.load)."""
    hist = history.load(episodes, adr)
    WORK.mkdir(parents=True, exist_ok=True)
    target = WORK / f"turn-{episodes}{'-adr' if adr else ''}.db"
    for leftover in WORK.glob(target.name + "*"):
        leftover.unlink()
    shutil.copyfile(hist.path, target)
    db = Database(f"sqlite:///{target}")
    add_facts(db, 1000)
    db.dispose()
    return f"sqlite:///{target}"


# The memory stage's share measured (docs/memories.md): opt-in, so the bench sets it.
SAID_SHARE = 0.17


def run_case(
    label: str,
    url: str,
    turns: int,
    fusion: str = "dense",
    prompt_chars: int | None = None,
    said_share: float | None = SAID_SHARE,
) -> dict[str, Any]:
    chars = {} if prompt_chars is None else {"prompt_chars": prompt_chars}
    if said_share is not None:
        chars["said_share"] = said_share
    recall = {"episodes_recall": {"fusion": fusion, **chars}}
    services = Services.build(benchlib.bench_settings(WORK / f"home-{label}", url, memory=recall))
    provider = benchlib.InstantProvider()
    benchlib.install(services, provider)
    services.episodes.warm()
    services.episodes.index(person=OWNER).wait_for_ivf()
    if services.episodes.warm_said():  # as serve does once ready; its IVF built
        services.episodes.said.index(OWNER).wait_for_ivf()
    brain = Brain(services)
    messages = history.topic_messages()
    for message in messages[:10]:  # warm-up: embedder, caches, first writes
        brain.turn(message, scope=Scope(OWNER))
    total, memory, memory_cpu, recalled = [], [], [], []
    said: list[int] = []
    for i in range(turns):
        provider.seconds = 0.0
        c0, started = time.thread_time(), time.perf_counter()
        result = brain.turn(messages[i % len(messages)], scope=Scope(OWNER))
        elapsed, cpu = time.perf_counter() - started, time.thread_time() - c0
        total.append(benchlib.ms(elapsed))
        memory.append(benchlib.ms(elapsed - provider.seconds))
        memory_cpu.append(benchlib.ms(cpu - provider.seconds))
        recalled.append(len(result.recalled))
        said.append(sum(len(e.said) for e in result.recalled))
    now = utcnow()
    params = RecallParams.from_settings(services.settings.memory.episodes_recall)
    vectors = {m: services.episodes.embed_query(m) for m in messages}
    then = now - timedelta(days=20)
    day = f"{then:%B} {then.day}, {then.year}"
    it = itertools.cycle(messages)

    def recall_search(message: str) -> object:
        vector = vectors[message]
        return services.episodes.search(vector, now, params, query_text=message, scope=Scope(OWNER))

    timed = {
        "facts_list_all": lambda: services.facts.list_all(
            now, limit=services.settings.memory.facts_inject.max_facts, scope=Scope(OWNER)
        ),
        "query_embedding": lambda: services.episodes.embed_query(next(it)),
        "recall_search": lambda: recall_search(next(it)),
        "prepare": lambda: brain.prepare(next(it), scope=Scope(OWNER)),
        # a message naming a day 20 days back, whose conversations join the candidates
        # (memory/recall/dates.py), and the same words without the day: what a named day costs
        "prepare_dated": lambda: brain.prepare(
            f"{next(it)} What did we say on {day}?", scope=Scope(OWNER)
        ),
        "prepare_undated": lambda: brain.prepare(
            f"{next(it)} What did we say then?", scope=Scope(OWNER)
        ),
    }
    parts, parts_cpu = {}, {}
    for name, fn in timed.items():
        parts[name], parts_cpu[name] = benchlib.time_calls_cpu(fn, 100)
    work = benchlib.summary(memory)
    prepare = round(statistics.median(parts["prepare"]), 3)
    row = {
        "case": label,
        "fusion": fusion,
        "episodes": len(services.episodes.index(person=OWNER)),
        "turn_ms": benchlib.summary(total),
        "memory_work_ms": work,
        "memory_work_cpu_ms": benchlib.summary(memory_cpu),
        "recalled_per_turn": statistics.mean(recalled),
        "memory_lines_per_turn": statistics.mean(said),
        "parts_p50_ms": {k: round(statistics.median(v), 3) for k, v in parts.items()},
        "parts_cpu_p50_ms": {k: round(statistics.median(v), 3) for k, v in parts_cpu.items()},
        "load_avg": benchlib.load_avg(),
        "record_p50_ms_estimate": round(work["p50"] - prepare, 3),
    }
    services.close()
    return row


def turn(turns: int = 200, episodes: int = 100_000, prompt_chars: int | None = None) -> None:
    """Memory work per chat turn (turn − provider time), 100k episodes + 1k facts against one
    episode, with the ADR's dense recall and the default hybrid one."""
    cases = {}
    for key, label in (("large", str(episodes)), ("small", "1")):
        for suffix, fusion in (("", "dense"), ("_hybrid", "hybrid")):
            url = copy_history(episodes) if key == "large" else one_episode_db(WORK / "turn-1.db")
            name = label + suffix.replace("_", "-")
            cases[key + suffix] = run_case(name, url, turns, fusion, prompt_chars)
    # the memory stage off (issue #45's baseline, the same history and run): what it adds
    cases["large_hybrid_no_said"] = run_case(
        f"{episodes}-hybrid-no-said", copy_history(episodes), turns, "hybrid", prompt_chars, 0.0
    )
    big, small = cases["large"], cases["small"]
    added = {
        "added_latency_ms_p50_hybrid": cases["large_hybrid"]["turn_ms"]["p50"]
        - cases["small_hybrid"]["turn_ms"]["p50"],
        "added_latency_ms_p50": big["turn_ms"]["p50"] - small["turn_ms"]["p50"],
        "added_cpu_ms_p50": big["memory_work_cpu_ms"]["p50"] - small["memory_work_cpu_ms"]["p50"],
        "said_added_ms_p50": cases["large_hybrid"]["memory_work_ms"]["p50"]
        - cases["large_hybrid_no_said"]["memory_work_ms"]["p50"],
    }
    benchlib.write_result("perf_turn", {**cases, **{k: round(v, 3) for k, v in added.items()}})


# -- over HTTP -------------------------------------------------------------------------------
def connection(port: int) -> http.client.HTTPConnection:
    """A kept-alive connection with Nagle off, whose requests go out in one write (http.client
    joins a bytes body to its headers). httpx writes the body after the headers, and with
    Nagle on a turn could wait out the server's delayed ACK (~40 ms): the same server measured
    21 or 60 ms a turn by the order of the requests around it."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.connect()
    conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return conn


def post(conn: http.client.HTTPConnection, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json"}
    conn.request("POST", path, body=json.dumps(body).encode(), headers=headers)
    response = conn.getresponse()
    return response.status, json.loads(response.read())


def settled(server: procs.Server, limit_s: float = 300.0) -> float:
    """Seconds until the server's process stops working on its own after start (its CPU time
    moving < 0.1 s over 2 s): at 100k episodes the episode index builds its IVF stage in the
    background (~15 s of a core), and turns meanwhile share the two cores with it."""
    started = time.perf_counter()
    last = procs.cpu_seconds(server.process.pid)
    while time.perf_counter() - started < limit_s:
        time.sleep(2.0)
        now = procs.cpu_seconds(server.process.pid)
        if now - last < 0.1:
            break
        last = now
    return round(time.perf_counter() - started, 1)


def serve_copy(home: Path, source: str, llm_url: str) -> procs.Server:
    """`caesar serve --no-workers` on a copy of the SQLite database at `source`, every task
    routed to the instant wire server at `llm_url`."""
    home.mkdir()
    database = home / "bench.db"
    shutil.copyfile(source.removeprefix("sqlite:///"), database)
    config = f'''database_url = "sqlite:///{database}"
[gateway.providers.local]
kind = "openai"
base_url = "{llm_url}"
api_key = "bench-key-0123456789"
max_retries = 0
[gateway.routes]
chat = "local:instant"
memory_extract = "local:instant"
memory_summarise = "local:instant"
[embedder]
cache_dir = "{benchlib.MODEL_CACHE}"
'''
    return procs.Server(procs.caesar_env(home, config), "--no-workers", timeout=60)


def turn_http(turns: int = 200, episodes: int = 100_000, warmup: int = 10) -> None:
    """A chat turn over HTTP as a client meets it, 100k episodes against 1 (SQLite): on the
    bench's history (windows, turn vectors, dated memories) and on one shaped like an upgraded
    install; three `caesar serve --no-workers` asked in turn once all have settled."""
    from fakes.llm_server import FakeLLMServer

    sources = {
        "1": one_episode_db(WORK / "turn-1.db"),
        "large": copy_history(episodes),
        # an upgraded install's history: summaries and JSON embeddings alone (issue #45)
        "large_adr": copy_history(episodes, adr=True),
    }
    messages = history.topic_messages()
    timings: dict[str, list[float]] = {label: [] for label in sources}
    memory: dict[str, list[float]] = {}
    recalled = dict.fromkeys(sources, 0)
    first_timed: dict[str, int] = {}
    load_before = benchlib.load_avg()
    with (
        FakeLLMServer(reply=lambda body, protocol: "ok") as llm,
        tempfile.TemporaryDirectory(prefix="caesar-turn-http-") as tmp,
    ):
        servers = {k: serve_copy(Path(tmp) / k, url, llm.base_url) for k, url in sources.items()}
        clients = {k: httpx.Client(base_url=s.url, timeout=30.0) for k, s in servers.items()}
        for client in clients.values():  # the embedder and the index warm up
            client.post("/v1/memory/recall", json={"query": messages[0]}).raise_for_status()
        waited = {label: settled(server) for label, server in servers.items()}
        raw = {label: connection(server.port) for label, server in servers.items()}
        try:
            for i in range(warmup + turns):
                for label in raw:
                    started = time.perf_counter()
                    status, body = post(
                        raw[label], "/v1/chat", {"message": messages[i % len(messages)]}
                    )
                    elapsed = benchlib.ms(time.perf_counter() - started)
                    if status != 200:
                        raise RuntimeError(f"{label}: /v1/chat answered {status}: {body}")
                    if i >= warmup:
                        first_timed.setdefault(label, body["audit_id"])
                        timings[label].append(elapsed)
                        recalled[label] += len(body.get("recalled") or [])
            for label, client in clients.items():  # what each turn's memory work took, recorded
                params = {"event_type": "chat.completed", "after_id": first_timed[label] - 1}
                events = client.get("/v1/audit", params={**params, "limit": 1000}).json()["events"]
                timed = sorted(events, key=lambda e: e["id"])[:turns]
                memory[label] = [e["payload"]["memory"]["memory_ms"] for e in timed]
        finally:
            for closing in (*clients.values(), *raw.values()):
                closing.close()
            for server in servers.values():
                server.stop()
    result: dict[str, Any] = {
        "episodes": episodes,
        "turns": turns,
        "load_before": load_before,
        "load_after": benchlib.load_avg(),
        "settled_after_s": waited,
    }
    for label in sources:
        result[label] = {
            "turn_ms": benchlib.summary(timings[label]),
            "memory_ms": benchlib.summary(memory[label]),
            "recalled_per_turn": round(recalled[label] / turns, 2),
        }
    added = result["large"]["turn_ms"]["p50"] - result["1"]["turn_ms"]["p50"]
    added_adr = result["large_adr"]["turn_ms"]["p50"] - result["1"]["turn_ms"]["p50"]
    benchlib.write_result(
        "perf_turn_http",
        {
            **result,
            "added_turn_ms_p50": round(added, 2),
            "added_turn_ms_p50_adr": round(added_adr, 2),
        },
    )


if __name__ == "__main__":
    benchlib.cli(turn)
