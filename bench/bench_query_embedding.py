"""Figure (b): query embedding p50 — the production path (all-MiniLM-L6-v2 exported to a fused
ONNX graph with pooling inside, run by ONNX Runtime on one thread with its weights on huge
pages, `caesar.embeddings.embed_one`) against sentence-transformers on torch, the
reference implementation, in the same run. Both produce the same vectors (checked).

    .venv/bin/python bench/bench_query_embedding.py [--runs 300]
"""

from __future__ import annotations

import argparse
import statistics
import time

import benchlib
import history
import numpy as np

from caesar.embeddings import embed_one
from caesar.minilm import MiniLM


def measure(
    model: MiniLM, messages: list[str], runs: int
) -> tuple[list[float], list[float], float]:
    started = time.perf_counter()
    model.load()
    load_s = time.perf_counter() - started
    it = iter(range(10**9))
    wall, cpu = benchlib.time_calls_cpu(
        lambda: embed_one(model, messages[next(it) % len(messages)]), runs, warmup=20
    )
    return wall, cpu, load_s


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=300)
    args = ap.parse_args()
    messages = history.topic_messages()
    onnx = MiniLM(benchlib.MODEL_CACHE, backend="onnx", threads=1)
    torch_model = MiniLM(benchlib.MODEL_CACHE, backend="torch", threads=1)
    onnx_ms, onnx_cpu, onnx_load = measure(onnx, messages, args.runs)
    torch_ms, torch_cpu, torch_load = measure(torch_model, messages, args.runs)
    diff = float(np.abs(onnx.embed_batch(messages) - torch_model.embed_batch(messages)).max())
    result = {
        "onnx_ms": benchlib.summary(onnx_ms),
        "torch_ms": benchlib.summary(torch_ms),
        "onnx_cpu_ms": benchlib.summary(onnx_cpu),
        "torch_cpu_ms": benchlib.summary(torch_cpu),
        "onnx_load_s": round(onnx_load, 2),
        "torch_load_s": round(torch_load, 2),
        "speedup": round(statistics.median(torch_ms) / statistics.median(onnx_ms), 1),
        "max_abs_difference": diff,
        "load_avg": benchlib.load_avg(),
    }
    benchlib.write_result("perf_query_embedding", result)
    print(
        f"query embedding p50: onnx {result['onnx_ms']['p50']:.2f} ms, "  # type: ignore[index]
        f"torch {result['torch_ms']['p50']:.2f} ms → {result['speedup']}× (max |Δ| {diff:.1e})"  # type: ignore[index]
    )
    # On a shared machine wall time includes waiting for a core; CPU time is the call's cost.
    print(
        f"  CPU p50: onnx {result['onnx_cpu_ms']['p50']:.2f} ms, "  # type: ignore[index]
        f"torch {result['torch_cpu_ms']['p50']:.2f} ms; load average {result['load_avg']}"  # type: ignore[index]
    )


if __name__ == "__main__":
    main()
