"""Recall search alone, query embedding excluded, on the synthetic histories (bench/history.py):
the ADR's dense search against the ADR taken literally, and the default hybrid search; and the
query embedding it would be given. Method: bench/README.md.
"""

from __future__ import annotations

import math
import statistics
import time
from datetime import datetime
from functools import partial
from typing import Any

import benchlib
import history
import numpy as np
from benchlib import OWNER
from sqlalchemy import select

from caesar.db.models import EpisodeSummary
from caesar.embeddings import embed_one
from caesar.memory.engine.vectors import epoch_seconds
from caesar.memory.importance import SECONDS_PER_DAY
from caesar.memory.recall.hits import RecallParams
from caesar.memory.scope import Scope
from caesar.minilm import MiniLM
from caesar.services import Services

BASELINE_SAMPLE = 50_000
SIZES = [10_000, 100_000, 1_000_000]


def query_embedding(runs: int = 300) -> None:
    """Query embedding p50: the production path (MiniLM exported to a fused ONNX graph, ONNX
    Runtime on one thread, `embeddings.embed_one`) against sentence-transformers on torch."""
    messages = history.topic_messages()
    models = {b: MiniLM(benchlib.MODEL_CACHE, backend=b, threads=1) for b in ("onnx", "torch")}
    result: dict[str, Any] = {}
    for backend, model in models.items():
        started = time.perf_counter()
        model.load()
        result[f"{backend}_load_s"] = round(time.perf_counter() - started, 2)
        calls = benchlib.each(partial(embed_one, model), messages)
        wall, cpu = benchlib.time_calls_cpu(calls, runs, 20)
        result[f"{backend}_ms"], result[f"{backend}_cpu_ms"] = map(benchlib.summary, (wall, cpu))
    vectors = [m.embed_batch(messages) for m in models.values()]
    result["speedup"] = round(result["torch_ms"]["p50"] / result["onnx_ms"]["p50"], 1)
    result["max_abs_difference"] = float(np.abs(vectors[0] - vectors[1]).max())
    benchlib.write_result("perf_query_embedding", {**result, "load_avg": benchlib.load_avg()})


# -- dense -----------------------------------------------------------------------------------
def adr_literal_search(
    session: Any,
    query: list[float],
    now: datetime,
    params: RecallParams,
    model: str,
    limit: int | None,
) -> list[tuple[float, int]]:
    """ADR-0034 §3–4 taken literally: JSON embeddings, cosine in a Python loop."""
    e = EpisodeSummary
    rows = select(e.id, e.embedding, e.created_at, e.recall_count)
    rows = rows.where(e.model == model, e.summary != "").order_by(e.id).limit(limit)
    q_norm = math.sqrt(sum(x * x for x in query))
    scored = []
    for row_id, embedding, created_at, recall_count in session.execute(rows):
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
    index = services.episodes.index(person=OWNER)
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


def recall_size(episodes: int, queries: int, baseline_runs: int) -> dict[str, Any]:
    hist = history.load(episodes)
    services = Services.build(benchlib.bench_settings(benchlib.OUT / "home-recall", hist.url))
    memory = services.episodes
    started = time.perf_counter()
    loaded = memory.warm()
    load_s = time.perf_counter() - started
    now = hist.anchor
    params = RecallParams.from_settings(services.settings.memory.episodes_recall)
    vectors = hist.topic_queries(queries)
    misses = history.unit(np.random.default_rng(3).standard_normal((queries, history.DIM)))
    memory.index(OWNER).wait_for_ivf()  # serve warms it in the background; timed separately
    ivf_s = time.perf_counter() - started - load_s
    timed = {}
    for name, batch in (("hits", vectors), ("misses", misses)):
        calls = benchlib.each(lambda v: memory.search(v, now, params, scope=Scope(OWNER)), batch)
        wall, cpu = benchlib.time_calls_cpu(calls, max(queries, 100), 5)
        timed[f"search_{name}_ms"], timed[f"search_{name}_cpu_ms"] = map(
            benchlib.summary, (wall, cpu)
        )
    found = [len(memory.search(v, now, params, scope=Scope(OWNER))) for v in vectors[:20]]
    params5 = RecallParams.from_settings(services.settings.memory.episodes_recall, top_k=5)
    overlaps = []
    for v in vectors:
        got = [e.episode_id for e in memory.search(v, now, params5, scope=Scope(OWNER))]
        want = reference_top(services, v, now, params5)
        if want:
            overlaps.append(len(set(got) & set(want)) / len(want))
    limit = None if episodes <= 100_000 else BASELINE_SAMPLE
    scanned = episodes if limit is None else limit
    baseline, baseline_cpu = [], []
    query_list = [float(x) for x in vectors[0]]
    for _ in range(baseline_runs):
        with services.db.read() as session:
            c0, t0 = time.thread_time(), time.perf_counter()
            adr_literal_search(
                session, query_list, now, params, memory.index(OWNER).model_id, limit
            )
            baseline.append(benchlib.ms(time.perf_counter() - t0) * episodes / scanned)
            baseline_cpu.append(benchlib.ms(time.thread_time() - c0) * episodes / scanned)
    services.close()
    baseline_p50, baseline_cpu_p50 = statistics.median(baseline), statistics.median(baseline_cpu)
    return {
        "episodes": episodes,
        "loaded": loaded,
        "index_load_s": round(load_s, 2),
        "ivf_build_s": round(ivf_s, 2),
        "ivf_rows": memory.index(OWNER).ivf_rows,
        **timed,
        "results_per_query": statistics.mean(found),
        "recall_at_5": round(statistics.mean(overlaps) if overlaps else float("nan"), 4),
        "recall_at_5_queries": len(overlaps),
        "baseline_ms_p50": round(baseline_p50, 1),
        "baseline_cpu_ms_p50": round(baseline_cpu_p50, 1),
        "baseline_runs": baseline_runs,
        "baseline_extrapolated_from": scanned if limit else None,
        "speedup": round(baseline_p50 / timed["search_hits_ms"]["p50"], 1),
        "speedup_cpu": round(baseline_cpu_p50 / timed["search_hits_cpu_ms"]["p50"], 1),
        "load_avg": benchlib.load_avg(),
    }


def recall(sizes: list[int] = SIZES, queries: int = 200) -> None:
    """Recall search alone (the ADR's dense one) at each size, against the ADR-literal baseline
    in the same run, and its recall@5 against an exact search."""
    rows = [recall_size(size, queries, 5 if size <= 10_000 else 3) for size in sizes]
    benchlib.write_result("perf_recall", {"sizes": rows, "machine": benchlib.machine()})


# -- hybrid ----------------------------------------------------------------------------------
def hybrid_size(episodes: int, runs: int) -> dict[str, Any]:
    hist = history.load(episodes)
    services = Services.build(benchlib.bench_settings(benchlib.OUT / "home-recall", hist.url))
    memory = services.episodes
    memory.warm()
    memory.index(OWNER).wait_for_ivf()
    now = hist.anchor
    settings = services.settings.memory.episodes_recall
    hybrid_params = RecallParams.from_settings(settings)
    dense = RecallParams.from_settings(settings, fusion="dense")
    if hybrid_params.fusion != "hybrid":
        raise SystemExit(f"the default fusion is {hybrid_params.fusion!r}: this bench times it")
    row: dict[str, Any] = {"episodes": episodes}
    for label, texts in (("topic", history.topic_messages()), ("offtopic", history.OFF_TOPIC)):
        vectors = [memory.embed_query(t) for t in texts]
        for name, params in (("hybrid", hybrid_params), ("dense", dense)):

            def one(pair: tuple[np.ndarray, str], params: RecallParams = params) -> object:
                return memory.search(pair[0], now, params, query_text=pair[1], scope=Scope(OWNER))

            calls = benchlib.each(one, list(zip(vectors, texts, strict=True)))
            wall, cpu = benchlib.time_calls_cpu(calls, runs, warmup=len(texts))
            found = [
                len(memory.search(v, now, params, query_text=t, scope=Scope(OWNER)))
                for v, t in zip(vectors, texts, strict=True)
            ]
            row[f"{name}_{label}_ms"] = benchlib.summary(wall)
            row[f"{name}_{label}_cpu_ms"] = benchlib.summary(cpu)
            row[f"{name}_{label}_recalled"] = round(statistics.mean(found), 2)
    row["load_avg"] = benchlib.load_avg()
    services.close()
    return row


def recall_hybrid(sizes: list[int] = SIZES, runs: int = 200) -> None:
    """Recall search alone with the default hybrid recall (the message's text and vector), at
    each size, dense on the same vectors beside it."""
    benchlib.write_result("perf_recall_hybrid", {"sizes": [hybrid_size(s, runs) for s in sizes]})
