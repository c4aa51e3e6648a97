"""What a second worker process buys (issue #16): the same imported backlog learned by one
`caesar worker` process and by two on the same database, no chat meanwhile.

    .venv/bin/python bench/bench_scale_out.py [--chats 60]

Each run starts from a fresh import of `--chats` LongMemEval-size conversations (SQLite),
starts N `caesar worker` processes with the shipped settings (offline summariser, windows,
offline extraction) and times until every conversation is summarised and windowed. Every
worker write is exactly-once, so the second process only ever takes work the first has not.
On 2 cores two processes compete for the same cores: a second *machine* gets its own.
Figures go to bench/out/results/perf_scale_out.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import benchlib
from bench_busy import _backlog, _env, _imported
from bench_summarise import conversations
from load import CAESAR


def run(
    processes: int, history: Path, root: Path, max_seconds: float, chats: int
) -> dict[str, Any]:
    home = root / f"workers-{processes}"
    home.mkdir()
    env = _env(home, "http://127.0.0.1:9/v1")
    subprocess.run([CAESAR, "db", "upgrade"], env=env, check=True, capture_output=True)
    subprocess.run([CAESAR, "import", str(history)], env=env, check=True, capture_output=True)
    url = f"sqlite:///{home / 'caesar.db'}"
    upto = _imported(url)
    at_start = _backlog(url, upto)
    started = time.monotonic()
    procs = [
        subprocess.Popen([CAESAR, "worker"], env=env, stdout=subprocess.DEVNULL)
        for _ in range(processes)
    ]
    left = at_start
    try:
        while left and time.monotonic() - started < max_seconds:
            time.sleep(1.0)
            left = _backlog(url, upto)
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=30)
    elapsed = time.monotonic() - started
    return {
        "processes": processes,
        "items_at_start": at_start,
        "items_left": left,
        "seconds": round(elapsed, 1),
        # each conversation is two items (its summary, then its windows)
        "conversations_per_minute": round(max(0, chats - (left + 1) // 2) / (elapsed / 60), 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chats", type=int, default=60)
    ap.add_argument("--max-seconds", type=float, default=900.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="caesar-scale-") as tmp:
        root = Path(tmp)
        history = root / "history.jsonl"
        history.write_text(
            "\n".join(json.dumps(c, ensure_ascii=False) for c in conversations(args.chats))
        )
        runs = [run(n, history, root, args.max_seconds, args.chats) for n in (1, 2)]
    one, two = runs
    ratio = two["conversations_per_minute"] / max(one["conversations_per_minute"], 1e-9)
    benchlib.write_result(
        "perf_scale_out",
        {
            "chats": args.chats,
            "runs": runs,
            "two_over_one": round(ratio, 2),
            "host_speed_ms": benchlib.host_speed(),
            "load_avg": benchlib.load_avg(),
        },
    )
    for r in runs:
        print(
            f"{r['processes']} worker process(es): {r['seconds']:.0f} s, "
            f"{r['conversations_per_minute']} conversations/min ({r['items_left']} items left)"
        )
    print(f"two processes / one: ×{ratio:.2f} throughput")


if __name__ == "__main__":
    main()
