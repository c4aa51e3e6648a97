"""The bench's one entry point: every measurement, by name (bench/README.md says what each
measures and how).

    .venv/bin/python bench/run.py --list                 # the measurements
    .venv/bin/python bench/run.py NAME [options]         # one of them (NAME --help: its options)
    .venv/bin/python bench/run.py suite [--quick] [--from NAME] [--render]   # `make bench`

`suite` builds the synthetic histories (cached), runs the speed measurements one after another,
each in a process of its own, then writes docs/performance.md from bench/out/results
(`--render`: only that).
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

# name → (module, function, what it measures). A function named `main` reads its own options.
MEASUREMENTS = {
    "history": ("history", "build_histories", "synthetic histories of N episodes (cached)"),
    "embedding": ("bench_recall", "query_embedding", "query embedding: ONNX against torch"),
    "recall": ("bench_recall", "recall", "dense recall search alone against the ADR-literal one"),
    "hybrid": ("bench_recall", "recall_hybrid", "hybrid recall search alone, and its steps"),
    "turn": ("bench_turn", "turn", "memory work per chat turn, 100k episodes against 1"),
    "turn-http": ("bench_turn", "turn_http", "a chat turn over HTTP, 100k episodes against 1"),
    "serve": ("bench_serve", "serve", "`caesar serve` ready on 100k episodes"),
    "first-start": ("bench_serve", "first_start", "a fresh home's first start, and its memory"),
    "summarise": ("bench_workers", "summarise", "summarise worker overhead per chat; windows"),
    "busy": ("bench_workers", "busy", "chat turns while the workers learn a backlog"),
    "import": ("bench_import", "import_bench", "a ChatGPT export imported, then learned"),
    "load": ("load", "main", "50 concurrent chat clients against serve + workers"),
    "recall-quality": ("recall_quality", "recall_quality", "recall quality on LoCoMo, LongMemEval"),
    "time-probes": ("time_probes", "time_probes", "recall by time: spans, topics, gathering"),
    "prompt-over-http": ("prompt_over_http", "prompt_over_http", "answer in prompt, from outside"),
    "prompt-identity": ("prompt_identity", "main", "every prompt byte-identical before/after"),
    "standing-probe": (
        "standing_probe",
        "standing_probe",
        "a statement said once reaches a later request",
    ),
}

# `make bench`: (measurement, its options, its options with --quick)
SUITE: list[tuple[str, list[str], list[str]]] = [
    ("history", ["10000", "100000", "1000000"], ["10000", "100000"]),
    ("embedding", ["--runs", "300"], ["--runs", "100"]),
    (
        "recall",
        ["--sizes", "10000", "100000", "1000000"],
        ["--sizes", "10000", "100000", "--queries", "100"],
    ),
    (
        "hybrid",
        ["--sizes", "10000", "100000", "1000000"],
        ["--sizes", "10000", "100000", "--runs", "100"],
    ),
    ("turn", ["--turns", "200"], ["--turns", "60"]),
    ("serve", ["--starts", "3"], ["--starts", "1"]),
    ("summarise", ["--chats", "200"], ["--chats", "60"]),
    ("busy", ["--chats", "300"], ["--chats", "60"]),
    ("first-start", ["--starts", "3"], ["--starts", "1"]),
]
# Seconds each step took when it last ran, so a render after one step by hand still has them.
TIMINGS = HERE / "out" / "run_all_timings.json"


def run(name: str, argv: list[str]) -> None:
    import benchlib

    module, function, _ = MEASUREMENTS[name]
    measure = getattr(importlib.import_module(module), function)
    if function == "main":
        sys.argv = [f"run.py {name}", *argv]
        measure()
    else:
        benchlib.cli(measure, argv, prog=f"run.py {name}")


def suite(quick: bool, start: str | None, render_only: bool) -> None:
    import benchlib
    import report

    timings = json.loads(TIMINGS.read_text()) if TIMINGS.exists() else {}
    names = [name for name, _, _ in SUITE]
    if start is not None and start not in names:
        raise SystemExit(f"no step {start!r}; steps: {', '.join(names)}")
    todo = SUITE[names.index(start) :] if start else SUITE
    for name, full, short in [] if render_only else todo:
        print(f"== {name} (load {benchlib.load_avg()})", flush=True)
        started = time.perf_counter()
        command = [sys.executable, str(HERE / "run.py"), name, *(short if quick else full)]
        subprocess.run(command, check=True, cwd=benchlib.ROOT)
        timings[name] = round(time.perf_counter() - started, 1)
        print(f"   {name}: {timings[name]:.0f} s", flush=True)
        TIMINGS.parent.mkdir(parents=True, exist_ok=True)
        TIMINGS.write_text(json.dumps(timings, indent=2))
    path = report.write(benchlib.read_results(), timings)
    print(f"wrote {path.relative_to(benchlib.ROOT)}")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return
    if argv[0] == "--list":
        for name, (module, function, what) in MEASUREMENTS.items():
            print(f"{name:<17} {what}  [{module}.{function}]")
        return
    if argv[0] == "suite":
        parser = argparse.ArgumentParser(prog="run.py suite", description="`make bench`")
        parser.add_argument("--quick", action="store_true", help="10k/100k only, fewer repetitions")
        parser.add_argument("--render", action="store_true", help="only write docs/performance.md")
        parser.add_argument("--from", dest="start", metavar="NAME", help="resume at this step")
        args = parser.parse_args(argv[1:])
        suite(args.quick, args.start, args.render)
        return
    if argv[0] not in MEASUREMENTS:
        raise SystemExit(f"no measurement {argv[0]!r}: bench/run.py --list")
    run(argv[0], argv[1:])


if __name__ == "__main__":
    main()
