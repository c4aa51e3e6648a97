"""A chat turn over HTTP, as a client meets it: 100k episodes against 1, on SQLite (issue #24's
"SQLite embedded default" row: the added p50 ≤ +10 ms).

    .venv/bin/python bench/bench_turn_http.py [--turns 200] [--episodes 100000]

Two real `caesar serve --no-workers` processes run side by side, each on its own copy of one of
bench_turn's databases (the synthetic history with 1k facts, and one episode with the same 1k
facts), with the shipped recall settings and the test suite's wire server as the provider,
which answers at once. One client sends POST /v1/chat to them in turn (one, then the other,
so a slow minute of the host falls on both), each message a real sentence on a planted topic,
`--turns` timed after 10 untimed ones each. What is timed is everything caesar adds to a turn:
HTTP, facts, embedding, recall, the prompt, the provider round trip on a local socket, the
audit write. Figures go to bench/out/results/perf_turn_http.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import benchlib
import history
import httpx
from bench_chat_latency import Server, env_for
from bench_turn import WORK, copy_history, one_episode_db
from fakes.llm_server import FakeLLMServer


def config(path: Path, llm: FakeLLMServer, database: Path) -> None:
    path.write_text(
        f"""
database_url = "sqlite:///{database}"

[gateway.providers.local]
kind = "openai"
base_url = "{llm.base_url}"
api_key = "bench-key-0123456789"
max_retries = 0

[gateway.routes]
chat = "local:instant"
memory_extract = "local:instant"
memory_summarise = "local:instant"

[embedder]
cache_dir = "{benchlib.MODEL_CACHE}"
"""
    )


def serve(tmp: Path, label: str, source: str, llm: FakeLLMServer) -> Server:
    """`caesar serve --no-workers` on a copy of the database at `source` (a sqlite URL)."""
    home = tmp / label
    home.mkdir()
    database = home / "bench.db"
    shutil.copyfile(source.removeprefix("sqlite:///"), database)
    config(home / "caesar.toml", llm, database)
    env = env_for(home / "home", home / "caesar.toml")
    return Server(env, ["--no-workers"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--episodes", type=int, default=100_000)
    args = parser.parse_args()
    sources = {"1": one_episode_db(WORK / "turn-1.db"), "large": copy_history(args.episodes)}
    messages = history.topic_messages()
    timings: dict[str, list[float]] = {label: [] for label in sources}
    memory: dict[str, list[float]] = {label: [] for label in sources}
    recalled: dict[str, int] = dict.fromkeys(sources, 0)
    load_before = benchlib.load_avg()
    with (
        FakeLLMServer(reply=lambda body, protocol: "ok") as llm,
        tempfile.TemporaryDirectory(prefix="caesar-turn-http-") as tmp,
    ):
        servers = {label: serve(Path(tmp), label, url, llm) for label, url in sources.items()}
        clients = {
            label: httpx.Client(base_url=s.url, timeout=30.0) for label, s in servers.items()
        }
        try:
            for i in range(10 + args.turns):
                for label, client in clients.items():
                    message = messages[i % len(messages)]
                    started = time.perf_counter()
                    response = client.post("/v1/chat", json={"message": message})
                    elapsed = benchlib.ms(time.perf_counter() - started)
                    response.raise_for_status()
                    if i >= 10:
                        timings[label].append(elapsed)
                        recalled[label] += len(response.json().get("recalled") or [])
            for label, client in clients.items():  # what each turn's memory work took, recorded
                events = client.get(
                    "/v1/audit", params={"event_type": "chat.completed", "limit": 1000}
                ).json()["events"]
                timed = sorted(events, key=lambda e: e["id"])[-args.turns :]
                memory[label] = [e["payload"]["memory"]["memory_ms"] for e in timed]
        finally:
            for client in clients.values():
                client.close()
            for server in servers.values():
                server.stop()
    result: dict[str, Any] = {
        "episodes": args.episodes,
        "turns": args.turns,
        "load_before": load_before,
        "load_after": benchlib.load_avg(),
        "host_speed_ms": benchlib.host_speed(),
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
