"""A chat turn over HTTP, as a client meets it: 100k episodes against 1, on SQLite (issue #24's
"SQLite embedded default" row: the added p50 ≤ +10 ms).

    .venv/bin/python bench/bench_turn_http.py [--turns 200] [--episodes 100000] [--warmup 10]

Two real `caesar serve --no-workers` processes run side by side, each on its own copy of one of
bench_turn's databases (the synthetic history with 1k facts, and one episode with the same 1k
facts), with the shipped recall settings and the test suite's wire server as the provider,
which answers at once. One client sends POST /v1/chat to them in turn (one, then the other,
so a slow minute of the host falls on both) once each has settled after its start (see
`settled`), each message a real sentence on a planted topic,
`--turns` timed after `--warmup` untimed ones each. What is timed is everything caesar adds to a turn:
HTTP, facts, embedding, recall, the prompt, the provider round trip on a local socket, the
audit write. Figures go to bench/out/results/perf_turn_http.json.
"""

from __future__ import annotations

import argparse
import http.client
import json
import shutil
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

import benchlib
import history
import httpx
from bench_chat_latency import Server, env_for, write_config
from bench_serve import cpu_seconds
from bench_turn import WORK, copy_history, one_episode_db
from fakes.llm_server import FakeLLMServer


def serve(tmp: Path, label: str, source: str, llm: FakeLLMServer) -> Server:
    """`caesar serve --no-workers` on a copy of the database at `source` (a sqlite URL)."""
    home = tmp / label
    home.mkdir()
    database = home / "bench.db"
    shutil.copyfile(source.removeprefix("sqlite:///"), database)
    write_config(home / "caesar.toml", llm, True, database)
    env = env_for(home / "home", home / "caesar.toml")
    return Server(env, ["--no-workers"])


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
    conn.request(
        "POST", path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    response = conn.getresponse()
    return response.status, json.loads(response.read())


def settled(server: Server, limit_s: float = 300.0) -> float:
    """Seconds until the server's process stops working on its own after start (its CPU time
    moving < 0.1 s over 2 s): at 100k episodes the episode index builds its IVF stage in the
    background (~15 s of a core), and turns meanwhile share the two cores with it."""
    started = time.perf_counter()
    last = cpu_seconds(server.process.pid)
    while time.perf_counter() - started < limit_s:
        time.sleep(2.0)
        now = cpu_seconds(server.process.pid)
        if now - last < 0.1:
            break
        last = now
    return round(time.perf_counter() - started, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--episodes", type=int, default=100_000)
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args()
    sources = {"1": one_episode_db(WORK / "turn-1.db"), "large": copy_history(args.episodes)}
    messages = history.topic_messages()
    timings: dict[str, list[float]] = {label: [] for label in sources}
    memory: dict[str, list[float]] = {label: [] for label in sources}
    recalled: dict[str, int] = dict.fromkeys(sources, 0)
    first_timed: dict[str, int] = {}
    load_before = benchlib.load_avg()
    with (
        FakeLLMServer(reply=lambda body, protocol: "ok") as llm,
        tempfile.TemporaryDirectory(prefix="caesar-turn-http-") as tmp,
    ):
        servers = {label: serve(Path(tmp), label, url, llm) for label, url in sources.items()}
        clients = {
            label: httpx.Client(base_url=s.url, timeout=30.0) for label, s in servers.items()
        }
        for client in clients.values():  # the embedder and the index warm up
            client.post("/v1/memory/recall", json={"query": messages[0]}).raise_for_status()
        waited = {label: settled(server) for label, server in servers.items()}
        raw = {label: connection(server.port) for label, server in servers.items()}
        try:
            for i in range(args.warmup + args.turns):
                for label in raw:
                    message = messages[i % len(messages)]
                    started = time.perf_counter()
                    status, body = post(raw[label], "/v1/chat", {"message": message})
                    elapsed = benchlib.ms(time.perf_counter() - started)
                    if status != 200:
                        raise RuntimeError(f"{label}: /v1/chat answered {status}: {body}")
                    if i >= args.warmup:
                        first_timed.setdefault(label, body["audit_id"])
                        timings[label].append(elapsed)
                        recalled[label] += len(body.get("recalled") or [])
            for label, client in clients.items():  # what each turn's memory work took, recorded
                after = first_timed[label] - 1
                events = client.get(
                    "/v1/audit",
                    params={"event_type": "chat.completed", "after_id": after, "limit": 1000},
                ).json()["events"]
                timed = sorted(events, key=lambda e: e["id"])[: args.turns]
                memory[label] = [e["payload"]["memory"]["memory_ms"] for e in timed]
        finally:
            for client in clients.values():
                client.close()
            for conn in raw.values():
                conn.close()
            for server in servers.values():
                server.stop()
    result: dict[str, Any] = {
        "episodes": args.episodes,
        "turns": args.turns,
        "load_before": load_before,
        "load_after": benchlib.load_avg(),
        "host_speed_ms": benchlib.host_speed(),
        "settled_after_s": waited,
    }
    for label in sources:
        result[label] = {
            "turn_ms": benchlib.summary(timings[label]),
            "memory_ms": benchlib.summary(memory[label]),
            "recalled_per_turn": round(recalled[label] / args.turns, 2),
        }
    added = result["large"]["turn_ms"]["p50"] - result["1"]["turn_ms"]["p50"]
    result["added_turn_ms_p50"] = round(added, 2)
    path = benchlib.write_result("perf_turn_http", result)
    print(json.dumps(result, indent=2))
    print(
        f"chat turn over HTTP, p50: {result['large']['turn_ms']['p50']:.2f} ms at "
        f"{args.episodes:,} episodes, {result['1']['turn_ms']['p50']:.2f} ms at 1 → "
        f"{added:+.2f} ms (target ≤ +10 ms); written to {path}"
    )


if __name__ == "__main__":
    main()
