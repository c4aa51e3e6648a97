"""Figure (a'): recall search alone with the default hybrid recall, at 10k / 100k / 1M episodes.

bench_recall.py times the ADR's dense search (a vector, no text). A chat turn with the default
`fusion = "hybrid"` also gives the message's text: `EpisodeMemory.search(vector, now, params,
query_text=message)` then runs memory/search/hybrid.py — the dense pool drawn above the threshold,
the keyword pool from the full-text index, the RECENT_POOL last-written episodes, the
candidates' rows (float32 vector + window vectors) and the fusion. Query embedding excluded.

Messages are real sentences: the planted topics' chat messages (they have hits) and
off-topic ones (no planted topic; hybrid may still recall a recent or keyword-matching one), embedded with MiniLM once, then searched in turn.
The same vectors are also searched with `fusion = "dense"` in the same run, for comparison.

    .venv/bin/python bench/bench_recall_hybrid.py [--sizes 10000 100000 1000000]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import benchlib
import history
import numpy as np

from caesar.memory.episodes.recall import EpisodeMemory, RecallParams
from caesar.memory.importance import episode_rank, recall_weight
from caesar.memory.search import hybrid
from caesar.memory.search.vectors import epoch_seconds
from caesar.services import Services

# Nothing in the synthetic histories is about these (their words are not in WORDS either).
OFF_TOPIC = [
    "What is the capital of Mongolia?",
    "Translate 'good morning' into Japanese please.",
    "Write a haiku about autumn leaves.",
    "How many moons does Jupiter have?",
    "Explain how a transistor works in simple terms.",
    "Who won the football world cup in 1998?",
    "Convert 72 degrees Fahrenheit to Celsius.",
    "Suggest a name for a pet goldfish.",
]


def stages(
    memory: EpisodeMemory,
    texts: list[str],
    vectors: list[np.ndarray],
    now: datetime,
    params: RecallParams,
    runs: int,
) -> dict[str, float]:
    """p50 ms of each step of memory/search/hybrid.py's `hybrid_search`, timed one by one in the
    order it runs them (the same calls, repeated here so each gets its own clock)."""
    backend = memory.backend
    pool = max(hybrid.MIN_POOL, 4 * params.top_k)
    assert params.max_age_days is not None
    min_created = now - timedelta(days=params.max_age_days)
    decayed = episode_rank(epoch_seconds(now), params.halflife_days, params.recall_weight_scale)

    factor_range = (0.0, recall_weight(backend.max_recall_count, params.recall_weight_scale))
    times: dict[str, list[float]] = {}

    def timed(name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        out = fn(*args, **kwargs)
        times.setdefault(name, []).append(benchlib.ms(time.perf_counter() - started))
        return out

    for i in range(runs + len(texts)):
        text, vector = texts[i % len(texts)], vectors[i % len(texts)]
        with memory.db.read() as session:
            timed("refresh", backend.refresh, session)
            hits = timed(
                "dense_pool",
                backend.search,
                session,
                vector,
                limit=pool,
                threshold=hybrid.dense_pool_threshold(params),
                min_created=epoch_seconds(min_created),
                rank=decayed,
                factor_range=factor_range,
            )
            cosine = {int(k): float(c) for k, c in zip(hits.ids, hits.cosine, strict=True)}
            recent = timed(
                "recent_pool",
                backend.newest,
                session,
                vector,
                limit=hybrid.RECENT_POOL,
                min_created=epoch_seconds(min_created),
            )
            for k, c in zip(recent.ids, recent.cosine, strict=True):
                cosine.setdefault(int(k), float(c))
            match = timed(
                "keyword_stage",
                hybrid.keyword_stage,
                session,
                text,
                model_id=backend.model_id,
                pool=pool,
                min_created=min_created,
                candidates=cosine.keys(),
                backend=backend,
            )
            keyword = match.relevance
            ids = sorted(set(cosine) | set(keyword))
            rows = timed("candidate_rows", hybrid.candidate_rows, session, ids)
            missing = [r[0] for r in rows if r[0] not in cosine]
            cosine.update(timed("vector_cosines", backend.cosines, session, missing, vector))
            each_cosine = timed("passage_cosines", hybrid.window_cosines, rows, vector)
            passage = {i: float(v.max()) for i, v in each_cosine.items()}
            each_keyword = timed(
                "window_keywords", hybrid.window_keyword_relevance, session, match, rows, backend
            )
            window = {i: max(v.values(), default=0.0) for i, v in each_keyword.items()}
            hits = timed(
                "rank",
                hybrid.rank_candidates,
                [tuple(r[:5]) for r in rows],
                cosine,
                keyword,
                now,
                params,
                passage,
                window,
            )
            timed("windows", _with_windows, hits, each_cosine, each_keyword, params)
            times.setdefault("candidates", []).append(float(len(ids)))
    # the first len(texts) rounds are warm-up
    return {k: round(statistics.median(v[len(texts) :]), 3) for k, v in times.items()}


def _with_windows(hits: list[Any], each_cosine: Any, each_keyword: Any, params: Any) -> list[Any]:
    return [hybrid.with_windows(h, each_cosine, each_keyword, params) for h in hits]


def cycle(
    memory: EpisodeMemory,
    texts: list[str],
    vectors: list[np.ndarray],
    now: datetime,
    params: RecallParams,
) -> Callable[[], object]:
    """A search of the next message in turn, as a chat turn makes it."""
    it = iter(range(10**9))

    def one() -> object:
        i = next(it) % len(texts)
        return memory.search(vectors[i], now, params, query_text=texts[i], person=benchlib.OWNER)

    return one


def run_size(episodes: int, runs: int) -> dict[str, object]:
    hist = history.load(episodes)
    services = Services.build(benchlib.bench_settings(benchlib.OUT / "home-recall", hist.url))
    memory = services.episodes
    memory.warm()
    memory.index().wait_for_ivf()
    now = hist.anchor
    settings = services.settings.memory.episodes_recall
    hybrid_params = RecallParams.from_settings(settings)
    dense = RecallParams.from_settings(settings, fusion="dense")
    if hybrid_params.fusion != "hybrid":
        raise SystemExit(f"the default fusion is {hybrid_params.fusion!r}: this bench times it")
    row: dict[str, object] = {"episodes": episodes}
    for label, texts in (("topic", history.topic_messages()), ("offtopic", OFF_TOPIC)):
        vectors = [memory.embed_query(t) for t in texts]
        for name, params in (("hybrid", hybrid_params), ("dense", dense)):
            one = cycle(memory, texts, vectors, now, params)
            wall, cpu = benchlib.time_calls_cpu(one, runs, warmup=len(texts))
            found = [
                len(memory.search(v, now, params, query_text=t, person=benchlib.OWNER))
                for v, t in zip(vectors, texts, strict=True)
            ]
            row[f"{name}_{label}_ms"] = benchlib.summary(wall)
            row[f"{name}_{label}_cpu_ms"] = benchlib.summary(cpu)
            row[f"{name}_{label}_recalled"] = round(statistics.mean(found), 2)
        if label == "topic":
            row["hybrid_stages_p50_ms"] = stages(memory, texts, vectors, now, hybrid_params, runs)
    row["load_avg"] = benchlib.load_avg()
    services.close()
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--runs", type=int, default=200)
    args = ap.parse_args()
    rows = []
    for size in args.sizes:
        row = run_size(size, args.runs)
        rows.append(row)
        h, d = row["hybrid_topic_ms"], row["dense_topic_ms"]
        print(
            f"{size:>9,} episodes: hybrid search p50 {h['p50']:.2f} ms (p90 {h['p90']:.2f}; "  # type: ignore[index]
            f"off-topic {row['hybrid_offtopic_ms']['p50']:.2f}), dense on the same vectors "  # type: ignore[index]
            f"{d['p50']:.2f} ms; recalled {row['hybrid_topic_recalled']} / "  # type: ignore[index]
            f"{row['dense_topic_recalled']}; load {row['load_avg']}"
        )
        print(f"    stages p50 ms: {row['hybrid_stages_p50_ms']}")
    benchlib.write_result("perf_recall_hybrid", {"sizes": rows})


if __name__ == "__main__":
    main()
