"""Figure (d): `caesar serve` ready with 100k episodes.

Spawns the real command on the cached 100k-episode database (workers off, so nothing writes
to it) and times, from the spawn: GET /healthz answering 200, and the first
POST /v1/memory/recall that returns episodes (the embedder and the episode index warm in a
background thread started by `caesar serve`; a recall arriving earlier waits for them).
Also the CPU seconds the server process had used at each point (/proc/<pid>/stat: all
threads, user + system), which a busy machine does not inflate.

    .venv/bin/python bench/bench_serve.py [--episodes 100000] [--starts 3]
                                          [--database-url URL --now ISO --query TEXT]

`--database-url`: start on that database instead (e.g. PostgreSQL holding bench_pgvector's
1M episodes, `--reuse`d), recalling `--query` at `--now`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import benchlib
import history

CAESAR = Path(sys.executable).with_name("caesar")
TIMEOUT_S = 120.0


def request(url: str, body: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, {}


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system, all threads) a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_once(url: str, now: str, query: str) -> dict[str, float]:
    port = benchlib.free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="caesar-serve-") as home:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("CAESAR_")},
            "CAESAR_HOME": home,
            "CAESAR_DATABASE_URL": url,
            "CAESAR_EMBEDDER__CACHE_DIR": str(benchlib.MODEL_CACHE),
            "CAESAR_RUN_WORKERS": "false",
            "CAESAR_RETENTION__ENABLED": "false",
            "HF_HUB_OFFLINE": "1",
        }
        started = time.perf_counter()
        proc = subprocess.Popen(
            [str(CAESAR), "serve", "--port", str(port), "--no-workers"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            healthy = recalled = None
            healthy_cpu = recalled_cpu = 0.0
            episodes = 0
            while time.perf_counter() - started < TIMEOUT_S:
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"caesar serve exited: {proc.stderr.read().decode()[-2000:]}"
                    )  # type: ignore[union-attr]
                try:
                    if healthy is None:
                        status, _ = request(f"{base}/healthz")
                        if status == 200:
                            healthy = time.perf_counter() - started
                            healthy_cpu = cpu_seconds(proc.pid)
                        continue
                    status, body = request(f"{base}/v1/memory/recall", {"query": query, "now": now})
                    if status == 200 and body.get("episodes"):
                        recalled = time.perf_counter() - started
                        recalled_cpu = cpu_seconds(proc.pid)
                        episodes = len(body["episodes"])
                        break
                except (urllib.error.URLError, ConnectionError, TimeoutError):
                    time.sleep(0.01)
            if healthy is None or recalled is None:
                raise RuntimeError("caesar serve did not become ready in time")
            warm_started = time.perf_counter()
            request(f"{base}/v1/memory/recall", {"query": query, "now": now})
            next_recall = time.perf_counter() - warm_started
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    return {
        "healthz_s": round(healthy, 3),
        "first_recall_s": round(recalled, 3),
        "healthz_cpu_s": round(healthy_cpu, 3),
        "first_recall_cpu_s": round(recalled_cpu, 3),
        "episodes_returned": episodes,
        "next_recall_ms": round(benchlib.ms(next_recall), 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=100_000)
    ap.add_argument("--starts", type=int, default=3)
    ap.add_argument("--database-url", help="start on this database instead (see the doc)")
    ap.add_argument("--now", help="with --database-url: the recall's time (ISO)")
    ap.add_argument("--query", help="with --database-url: the recall's message")
    args = ap.parse_args()
    if args.database_url:
        url, now, query = args.database_url, args.now, args.query
        engine = url.split(":", 1)[0].split("+", 1)[0]
    else:
        hist = history.load(args.episodes)
        url, now, query = hist.url, hist.anchor.isoformat(), history.topic_messages()[1]
        engine = "sqlite"
    runs = [start_once(url, now, query) for _ in range(args.starts)]
    result = {
        "episodes": args.episodes,
        "engine": engine,
        "runs": runs,
        "healthz_s_median": statistics.median(r["healthz_s"] for r in runs),
        "first_recall_s_median": statistics.median(r["first_recall_s"] for r in runs),
        "healthz_cpu_s_median": statistics.median(r["healthz_cpu_s"] for r in runs),
        "first_recall_cpu_s_median": statistics.median(r["first_recall_cpu_s"] for r in runs),
        "load_avg": benchlib.load_avg(),
    }
    benchlib.write_result("perf_serve" if engine == "sqlite" else f"perf_serve_{engine}", result)
    print(
        f"caesar serve, {args.episodes:,} episodes ({engine}): /healthz after {result['healthz_s_median']:.2f} s, "
        f"first recall after {result['first_recall_s_median']:.2f} s (median of {args.starts})"
    )


if __name__ == "__main__":
    main()
