"""Is every prompt caesar builds byte-identical before and after a change? (issue #47)

Every LoCoMo and LongMemEval dev question asked through the real `Brain.prepare`
(bench/recall_quality.py's `--dump`, shipped settings, the embedded model's 2,500 characters),
each prompt kept in bench/out/identity/NAME-DATASET.jsonl; then two recordings compared.

    .venv/bin/python bench/prompt_identity.py record before [--postgres]   # before the change
    .venv/bin/python bench/prompt_identity.py record after [--postgres]    # after it
    .venv/bin/python bench/prompt_identity.py compare before after
"""

from __future__ import annotations

import argparse
import difflib
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "out" / "identity"
DATASETS = ("locomo", "longmemeval")


def path_of(name: str, dataset: str) -> Path:
    return OUT / f"{name}-{dataset}.jsonl"


def record(name: str, datasets: list[str], postgres: bool) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for dataset in datasets:
        command = [sys.executable, str(HERE / "recall_quality.py"), "--dataset", dataset]
        command += ["--no-docs", "--prompt-chars", "2500", "--dump", str(path_of(name, dataset))]
        command += ["--postgres"] if postgres else []
        print("$", " ".join(command), flush=True)
        subprocess.run(command, check=True)


def prompts(path: Path) -> dict[str, str]:
    rows = (json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return {f"{r['dataset']}:{r['qid']}": r["prompt"] for r in rows}


def compare(before: str, after: str, datasets: list[str]) -> int:
    """How many prompts differ (or are missing on one side), across the datasets."""
    differing = 0
    for dataset in datasets:
        old_path, new_path = path_of(before, dataset), path_of(after, dataset)
        if not old_path.exists() or not new_path.exists():
            print(f"{dataset}: no recording ({old_path.name} or {new_path.name} missing)")
            differing += 1
            continue
        old, new = prompts(old_path), prompts(new_path)
        same = [q for q in old if new.get(q) == old[q]]
        changed = [q for q in old if q in new and new[q] != old[q]]
        missing = sorted(set(old) ^ set(new))
        print(
            f"{dataset}: {len(same)} of {len(old)} prompts byte-identical; "
            f"{len(changed)} differ; {len(missing)} asked on one side only"
        )
        for qid in changed[:3]:
            diff = difflib.unified_diff(
                old[qid].splitlines(), new[qid].splitlines(), before, after, lineterm="", n=1
            )
            print(f"--- {qid}")
            print("\n".join(list(diff)[:30]))
        differing += len(changed) + len(missing)
    return differing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    rec = commands.add_parser("record", help="record every prompt under NAME")
    rec.add_argument("name")
    rec.add_argument("--postgres", action="store_true")
    rec.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    cmp = commands.add_parser("compare", help="compare two recordings")
    cmp.add_argument("before")
    cmp.add_argument("after")
    cmp.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    args = parser.parse_args()
    if args.command == "record":
        record(args.name, args.datasets, args.postgres)
        return
    sys.exit(1 if compare(args.before, args.after, args.datasets) else 0)


if __name__ == "__main__":
    main()
