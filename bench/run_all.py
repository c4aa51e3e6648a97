"""`make bench`: build the synthetic histories (cached), run every speed benchmark in sequence,
each in its own process, then write docs/performance.md from their results.

    .venv/bin/python bench/run_all.py            # everything (the 1M history: minutes, once)
    .venv/bin/python bench/run_all.py --quick    # 10k and 100k only, fewer repetitions
    .venv/bin/python bench/run_all.py --render   # only rewrite docs/performance.md
    .venv/bin/python bench/run_all.py --from "hybrid"   # resume at a step
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import benchlib
import report

HERE = Path(__file__).resolve().parent
# Seconds each step took when it last ran, kept so `--render` (or rerunning one step by hand
# and then rendering) still reports them.
TIMINGS = benchlib.OUT / "run_all_timings.json"


def load_timings() -> dict[str, float]:
    return json.loads(TIMINGS.read_text()) if TIMINGS.exists() else {}


def steps(quick: bool) -> list[tuple[str, list[str]]]:
    sizes = ["10000", "100000"] if quick else ["10000", "100000", "1000000"]
    return [
        ("synthetic histories", ["history.py", *sizes]),
        ("query embedding", ["bench_query_embedding.py", "--runs", "100" if quick else "300"]),
        (
            "recall search",
            ["bench_recall.py", "--sizes", *sizes, "--queries", "100" if quick else "200"],
        ),
        (
            "hybrid recall search",
            ["bench_recall_hybrid.py", "--sizes", *sizes, "--runs", "100" if quick else "200"],
        ),
        (
            "pgvector recall search (100k)",
            ["bench_pgvector.py", "--episodes", "100000", "--queries", "100" if quick else "300"],
        ),
        (
            "PostgreSQL's words (migration 0015)",
            ["bench_pg_words.py", "--episodes", "2000" if quick else "10000"],
        ),
        ("memory work per turn", ["bench_turn.py", "--turns", "60" if quick else "200"]),
        # the excerpts' turn lift on real conversations (issue #22)
        ("turn lift", ["bench_turn_lift.py", "--limit", "1" if quick else "5"]),
        ("serve ready", ["bench_serve.py", "--starts", "1" if quick else "3"]),
        ("summarise overhead", ["bench_summarise.py", "--chats", "60" if quick else "200"]),
        ("a live conversation", ["bench_conversation.py", "--turns", "20"]),
        ("chat while learning", ["bench_busy.py", "--chats", "60" if quick else "300"]),
        ("a second worker process", ["bench_scale_out.py", "--chats", "60"]),
        (
            "a household (issue #23)",
            [
                "bench_people.py",
                *("--people", "10" if quick else "100", "--episodes-per-person", "10000"),
                *("--turns", "60" if quick else "200"),
            ],
        ),
        ("Open WebUI's next turn", ["bench_openwebui.py", "--rounds", "1" if quick else "3"]),
        ("first start", ["bench_first_start.py", "--starts", "1" if quick else "3"]),
        ("LongMemEval history", ["bench_realistic.py"]),
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="10k/100k only, fewer repetitions")
    ap.add_argument("--render", action="store_true", help="only write docs/performance.md")
    ap.add_argument(
        "--from", dest="start", metavar="STEP", help="resume at the step whose title starts so"
    )
    args = ap.parse_args()
    timings = load_timings()
    todo = steps(args.quick)
    if args.start:
        titles = [title for title, _ in todo]
        first = next((i for i, t in enumerate(titles) if t.startswith(args.start)), None)
        if first is None:
            raise SystemExit(f"no step starts with {args.start!r}; steps: {', '.join(titles)}")
        todo = todo[first:]
    if not args.render:
        for title, command in todo:
            print(f"== {title} (load {benchlib.load_avg()})", flush=True)
            started = time.perf_counter()
            subprocess.run(
                [sys.executable, str(HERE / command[0]), *command[1:]],
                check=True,
                cwd=benchlib.ROOT,
            )
            timings[title] = round(time.perf_counter() - started, 1)
            print(f"   {title}: {timings[title]:.0f} s", flush=True)
            TIMINGS.write_text(json.dumps(timings, indent=2))
    path = report.write(benchlib.read_results(), timings)
    print(f"wrote {path.relative_to(benchlib.ROOT)}")


if __name__ == "__main__":
    main()
