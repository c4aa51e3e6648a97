"""Server start time and chat-turn latency through the HTTP API, with an instant provider.

    .venv/bin/python bench/bench_chat_latency.py [--turns 200] [--starts 3]

A real `caesar serve` process (its own CAESAR_HOME, a TOML file in CAESAR_CONFIG, as an
operator runs it) talks to the local wire server from the test suite (tests/fakes), which
answers at once; so what is timed is caesar's own overhead per turn: HTTP, validation, facts,
embedding the message and auto-recall, the openai SDK round trip to a local socket, the audit
write.

- `db upgrade`: `caesar db upgrade` on a fresh home (process start included).
- start: spawn `caesar serve` on the upgraded, empty database until GET /healthz answers 200
  (process start, imports, app build; the embedder warms up in the background after that).
- chat: POST /v1/chat, one at a time, `--turns` timed after 10 untimed ones, with memory on
  (the defaults: auto-recall embeds every message) and off (`semantic.enabled = false`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import benchlib
import httpx

sys.path.insert(0, str(benchlib.ROOT / "tests"))
from fakes.llm_server import FakeLLMServer

CAESAR = [str(Path(sys.executable).parent / "caesar")]
START_TIMEOUT_SECONDS = 60.0


def write_config(
    path: Path, llm: FakeLLMServer, semantic: bool, database: Path | None = None
) -> None:
    """The operator's TOML: every task routed to the instant wire server; `database`: a
    SQLite file to serve instead of the home's."""
    url = f'database_url = "sqlite:///{database}"\n' if database is not None else ""
    path.write_text(
        f"""{url}
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

[semantic]
enabled = {str(semantic).lower()}
"""
    )


def env_for(home: Path, config: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAESAR_")}
    env.update(CAESAR_HOME=str(home), CAESAR_CONFIG=str(config), HF_HUB_OFFLINE="1")
    return env


def db_upgrade(env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run([*CAESAR, "db", "upgrade"], env=env, check=True, capture_output=True)
    return benchlib.ms(time.perf_counter() - started)


class Server:
    """`caesar serve` in a child process; `start_ms` is spawn → first 200 from /healthz."""

    def __init__(self, env: dict[str, str], options: Sequence[str] = ()) -> None:
        self.port = benchlib.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        started = time.perf_counter()
        self.process = subprocess.Popen(
            [*CAESAR, "serve", "--port", str(self.port), *options],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        with httpx.Client(timeout=1.0) as client:
            while True:
                if self.process.poll() is not None:
                    raise RuntimeError(
                        f"caesar serve exited: {self.process.stderr.read().decode()}"
                    )  # type: ignore[union-attr]
                if time.perf_counter() - started > START_TIMEOUT_SECONDS:
                    self.stop()
                    raise RuntimeError("caesar serve did not answer /healthz in time")
                try:
                    if client.get(f"{self.url}/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.005)
        self.start_ms = benchlib.ms(time.perf_counter() - started)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def chat_turns(url: str, turns: int, warmup: int = 10) -> tuple[list[float], list[dict[str, Any]]]:
    timings: list[float] = []
    audit_ids: list[int] = []
    with httpx.Client(base_url=url, timeout=30.0) as client:
        for i in range(warmup + turns):
            message = {"message": f"turn {i}: my dog Biscuit wants a walk by the river"}
            started = time.perf_counter()
            response = client.post("/v1/chat", json=message)
            elapsed = benchlib.ms(time.perf_counter() - started)
            response.raise_for_status()
            if i >= warmup:
                timings.append(elapsed)
                audit_ids.append(response.json()["audit_id"])
        events = client.get(
            "/v1/audit",
            params={"event_type": "chat.completed", "after_id": audit_ids[0] - 1, "limit": 1000},
        ).json()["events"]
    return timings, [e["payload"] for e in events]


def measure(llm: FakeLLMServer, turns: int, starts: int, semantic: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="caesar-bench-") as tmp:
        home, config = Path(tmp) / "home", Path(tmp) / "caesar.toml"
        write_config(config, llm, semantic)
        env = env_for(home, config)
        upgrade_ms = db_upgrade(env)
        start_ms = []
        for _ in range(starts - 1):  # start-up only: launch, wait for /healthz, stop
            server = Server(env)
            start_ms.append(server.start_ms)
            server.stop()
        server = Server(env)
        start_ms.append(server.start_ms)
        try:
            timings, payloads = chat_turns(server.url, turns)
        finally:
            server.stop()
    provider_ms = [p["latency_ms"] for p in payloads]
    memory_ms = [p["memory"]["memory_ms"] for p in payloads]
    return {
        "db_upgrade_ms": round(upgrade_ms, 1),
        "start_ms": [round(s, 1) for s in start_ms],
        "start_ms_median": round(statistics.median(start_ms), 1),
        "turn_ms": benchlib.summary(timings),
        "provider_call_ms": benchlib.summary(provider_ms),
        "memory_ms": benchlib.summary(memory_ms),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--starts", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, Any] = {"machine": benchlib.machine(), "load_before": benchlib.load_avg()}
    with FakeLLMServer(reply=lambda body, protocol: "ok") as llm:
        for label, semantic in (("memory_on", True), ("memory_off", False)):
            results[label] = measure(llm, args.turns, args.starts, semantic)
    results["load_after"] = benchlib.load_avg()
    path = benchlib.write_result("chat_latency", results)

    print(f"load average before/after: {results['load_before']} / {results['load_after']}")
    for label in ("memory_on", "memory_off"):
        r = results[label]
        turn, prov, mem = r["turn_ms"], r["provider_call_ms"], r["memory_ms"]
        print(f"\n[{label}]")
        print(f"  caesar db upgrade (fresh home, incl. process start): {r['db_upgrade_ms']:.0f} ms")
        print(
            f"  caesar serve → /healthz 200: median {r['start_ms_median']:.0f} ms "
            f"(runs: {', '.join(f'{s:.0f}' for s in r['start_ms'])})"
        )
        print(
            f"  chat turn over HTTP, n={turn['n']}: p50 {turn['p50']:.1f} ms, "
            f"p90 {turn['p90']:.1f} ms, p99 {turn['p99']:.1f} ms"
        )
        print(f"    of which provider call (SDK → instant fake) p50 {prov['p50']:.1f} ms")
        print(f"    of which memory (facts + embed + recall)   p50 {mem['p50']:.1f} ms")
    print(f"\nwritten to {path}")


if __name__ == "__main__":
    main()
