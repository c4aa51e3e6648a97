"""Figure (a): recall search alone (query embedding excluded) at 10k / 100k / 1M episodes,
against the ADR-literal baseline measured in the same run.

caesar: `EpisodeMemory.search(vector, now, params)` as a chat turn calls it — refresh the
index by id, vector search with the threshold, age filter and ADR score, fetch the winners'
rows, rank them (default settings: top 3, threshold 0.45, 90 days).

Baseline (ADR-0034 as written): load every summary of the model with its JSON embedding,
then a Python loop computing cosine × freshness × recall_weight, filter, sort, top K. At 1M
it runs on a 50k-row sample and is extrapolated linearly (it is linear: one pass).

Also checks the results: recall@5 of caesar's search against an exact numpy reference.

    .venv/bin/python bench/bench_recall.py [--sizes 10000 100000 1000000]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from datetime import datetime

import benchlib
import history
import numpy as np
from sqlalchemy import select

from caesar.db.models import EpisodeSummary
from caesar.memory.episodes.recall import RecallParams
from caesar.memory.importance import SECONDS_PER_DAY
from caesar.memory.search.vectors import epoch_seconds
from caesar.services import Services

BASELINE_SAMPLE = 50_000


def adr_literal_search(
    session: object,
    query: list[float],
    now: datetime,
    params: RecallParams,
    model: str,
    limit: int | None,
) -> list[tuple[float, int]]:
    """ADR-0034 §3–4 taken literally: JSON embeddings, cosine in a Python loop."""
    rows_query = (
        select(
            EpisodeSummary.id,
            EpisodeSummary.embedding,
            EpisodeSummary.created_at,
            EpisodeSummary.recall_count,
        )
        .where(EpisodeSummary.model == model, EpisodeSummary.summary != "")
        .order_by(EpisodeSummary.id)
    )
    if limit is not None:
        rows_query = rows_query.limit(limit)
    q_norm = math.sqrt(sum(x * x for x in query))
    scored = []
    for row_id, embedding, created_at, recall_count in session.execute(rows_query):  # type: ignore[attr-defined]
        dot = sum(a * b for a, b in zip(query, embedding, strict=True))
        cosine = dot / (q_norm * math.sqrt(sum(b * b for b in embedding)))
        age = (now - created_at).total_seconds() / SECONDS_PER_DAY
        if params.similarity_threshold is not None and cosine < params.similarity_threshold:
            continue
        if params.max_age_days is not None and age > params.max_age_days:
            continue
        fresh = 0.5 ** (max(age, 0.0) / params.halflife_days)
        weight = 1.0 + params.recall_weight_scale * math.log1p(recall_count)
        scored.append((cosine * fresh * weight, row_id))
    scored.sort(reverse=True)
    return scored[: params.top_k]


def reference_top(
    services: Services, query: np.ndarray, now: datetime, params: RecallParams
) -> list[int]:
    """Exact brute force over the loaded matrix (numpy), same filters and score."""
    index = services.episodes.index(person=benchlib.OWNER)
    n = index._n
    cos = index._vectors[:n] @ query
    created = index._created[:n]
    now_s = epoch_seconds(now)
    keep = index._alive[:n].copy()
    if params.similarity_threshold is not None:
        keep &= cos >= params.similarity_threshold
    if params.max_age_days is not None:
        keep &= created >= now_s - params.max_age_days * SECONDS_PER_DAY
    at = np.flatnonzero(keep)
    age = (now_s - created[at]) / SECONDS_PER_DAY
    score = cos[at] * 0.5 ** (np.maximum(age, 0) / params.halflife_days)
    score *= 1 + params.recall_weight_scale * np.log1p(index._recalls[at])
    order = np.lexsort((-index._ids[at], -score))[: params.top_k]
    return [int(i) for i in index._ids[at][order]]


def run_size(episodes: int, queries: int, baseline_runs: int) -> dict[str, object]:
    hist = history.load(episodes)
    home = benchlib.OUT / "home-recall"
    services = Services.build(benchlib.bench_settings(home, hist.url))
    memory = services.episodes
    started = time.perf_counter()
    loaded = memory.warm()
    load_s = time.perf_counter() - started
    now = hist.anchor
    params = RecallParams.from_settings(services.settings.memory.episodes_recall)
    vectors = hist.topic_queries(queries)
    misses = history.unit(np.random.default_rng(3).standard_normal((queries, history.DIM)))

    def cycle(batch: np.ndarray) -> object:
        it = iter(range(10**9))
        return lambda: memory.search(
            batch[next(it) % len(batch)], now, params, person=benchlib.OWNER
        )

    memory.index().wait_for_ivf()  # serve warms it in the background; timed separately
    ivf_s = time.perf_counter() - started - load_s
    hit_times, hit_cpu = benchlib.time_calls_cpu(cycle(vectors), runs=max(queries, 100), warmup=5)
    miss_times, miss_cpu = benchlib.time_calls_cpu(cycle(misses), runs=max(queries, 100), warmup=5)
    found = [len(memory.search(v, now, params, person=benchlib.OWNER)) for v in vectors[:20]]

    params5 = RecallParams.from_settings(services.settings.memory.episodes_recall, top_k=5)
    overlaps = []
    for v in vectors:
        got = [e.episode_id for e in memory.search(v, now, params5, person=benchlib.OWNER)]
        want = reference_top(services, v, now, params5)
        if want:
            overlaps.append(len(set(got) & set(want)) / len(want))
    recall_at_5 = statistics.mean(overlaps) if overlaps else float("nan")

    limit = None if episodes <= 100_000 else BASELINE_SAMPLE
    scanned = episodes if limit is None else limit
    baseline, baseline_cpu = [], []
    query_list = [float(x) for x in vectors[0]]
    for _ in range(baseline_runs):
        with services.db.read() as session:
            c0, t0 = time.thread_time(), time.perf_counter()
            adr_literal_search(session, query_list, now, params, memory.index().model_id, limit)
            baseline.append(benchlib.ms(time.perf_counter() - t0) * episodes / scanned)
            baseline_cpu.append(benchlib.ms(time.thread_time() - c0) * episodes / scanned)
    services.close()
    caesar_p50 = statistics.median(hit_times)
    baseline_p50 = statistics.median(baseline)
    return {
        "episodes": episodes,
        "loaded": loaded,
        "index_load_s": round(load_s, 2),
        "ivf_build_s": round(ivf_s, 2),
        "ivf_rows": memory.index().ivf_rows,
        "search_hits_ms": benchlib.summary(hit_times),
        "search_hits_cpu_ms": benchlib.summary(hit_cpu),
        "search_misses_ms": benchlib.summary(miss_times),
        "search_misses_cpu_ms": benchlib.summary(miss_cpu),
        "results_per_query": statistics.mean(found),
        "recall_at_5": round(recall_at_5, 4),
        "recall_at_5_queries": len(overlaps),
        "baseline_ms_p50": round(baseline_p50, 1),
        "baseline_cpu_ms_p50": round(statistics.median(baseline_cpu), 1),
        "baseline_runs": baseline_runs,
        "baseline_extrapolated_from": scanned if limit else None,
        "speedup": round(baseline_p50 / caesar_p50, 1),
        "speedup_cpu": round(statistics.median(baseline_cpu) / statistics.median(hit_cpu), 1),
        "load_avg": benchlib.load_avg(),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--queries", type=int, default=200)
    args = ap.parse_args()
    results = []
    for size in args.sizes:
        runs = 5 if size <= 10_000 else 3
        row = run_size(size, args.queries, runs)
        results.append(row)
        hits = row["search_hits_ms"]
        print(
            f"{size:>9,} episodes: search p50 {hits['p50']:.2f} ms (p90 {hits['p90']:.2f}, "  # type: ignore[index]
            f"CPU {row['search_hits_cpu_ms']['p50']:.2f}), "  # type: ignore[index]
            f"baseline {row['baseline_ms_p50']:,.0f} ms → {row['speedup']:,}×; "
            f"recall@5 {row['recall_at_5']}; index load {row['index_load_s']} s"
        )
    benchlib.write_result("perf_recall", {"sizes": results, "machine": benchlib.machine()})


if __name__ == "__main__":
    main()
