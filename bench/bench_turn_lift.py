"""What the turns' lift costs a turn on real conversations: `Brain.prepare` (the memory work
before the provider call) on LoCoMo dev, with the excerpts picked by the windows alone and with
the windows lifted by their turns' cosines (`excerpts.TURN_SHARE`, issue #22).

Each LoCoMo conversation is imported and learned through caesar's own workers (as
`recall_quality.py` does; embeddings cached in bench/out/), then every question is asked of
`Brain.prepare` at its date twice in turn — once with the lift, once with it skipped
(`build._lifted` returning nothing: no turn vectors read, no cosines) — alternating which goes
first, so both see the same caches and the same load. Prints p50 / p90 / mean of each, the
difference, and what `_lifted` itself took.

    .venv/bin/python bench/bench_turn_lift.py [--limit N]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import benchlib
import recall_quality as rq
from benchlib import OWNER

from caesar.brain import Brain
from caesar.config import Settings
from caesar.embeddings import MiniLMEmbedder
from caesar.memory.context import build as context_build


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=None, help="at most N conversations")
    args = ap.parse_args()
    haystacks = rq.load_locomo(rq.DATA / "locomo" / "locomo_dev.json")[: args.limit]
    real = MiniLMEmbedder(Settings(home=rq.OUT, embedder={"cache_dir": rq.OUT / "models"}))
    embedder = rq.CachedEmbedder(real, rq.OUT / "embedding-cache.sqlite")
    lifted = context_build._lifted
    spent: list[float] = []

    def timed_lift(*a, **kw):  # type: ignore[no-untyped-def]
        started = time.perf_counter()
        try:
            return lifted(*a, **kw)
        finally:
            spent.append(time.perf_counter() - started)

    times: dict[str, list[float]] = {"lift": [], "windows alone": []}
    for haystack in haystacks:
        with tempfile.TemporaryDirectory(prefix="caesar-lift-") as home:
            built = rq.build(haystack, embedder, Path(home), rq.bench_settings(Path(home)))
            brain = Brain(built.services)
            try:
                for k, q in enumerate(haystack.questions):
                    brain.prepare(q.text, now=q.now, person=OWNER)  # warm: the query's vector
                    order = ["lift", "windows alone"][:: 1 if k % 2 else -1]
                    for case in order:
                        context_build._lifted = (
                            timed_lift if case == "lift" else (lambda *a, **kw: {})
                        )
                        started = time.perf_counter()
                        brain.prepare(q.text, now=q.now, person=OWNER)
                        times[case].append(time.perf_counter() - started)
            finally:
                context_build._lifted = lifted
                built.services.close()
        print(f"{haystack.name}: {len(haystack.questions)} questions", flush=True)
    base = times["windows alone"]
    for case, values in times.items():
        ms = [1000 * v for v in values]
        print(
            f"{case:>14}: p50 {statistics.median(ms):.2f} ms, p90 "
            f"{statistics.quantiles(ms, n=10)[-1]:.2f} ms, mean {statistics.fmean(ms):.2f} ms "
            f"({len(ms)} turns)"
        )
    diff = statistics.median(1000 * (a - b) for a, b in zip(times["lift"], base, strict=True))
    print(
        f"lift − windows alone, per turn: median {diff:+.2f} ms; `_lifted` itself: median "
        f"{1000 * statistics.median(spent):.2f} ms, p90 "
        f"{1000 * statistics.quantiles(spent, n=10)[-1]:.2f} ms; load {benchlib.load_avg()}"
    )


if __name__ == "__main__":
    main()
