"""Benchmark caesar.minilm: ONNX (onnxruntime) vs torch (sentence-transformers) backends.

Usage: HF_HUB_OFFLINE=1 .venv/bin/python bench/bench_embedder.py [--runs 200] [--threads 1]

Prints: ONNX export time, model load times, single short-query latency (p50/p90/p99 over
--runs calls) and batch throughput (64 texts of ~40 words), plus onnx/torch ratios.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

try:
    import caesar.minilm  # noqa: F401
except ImportError:
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "src"))

import numpy as np

from caesar.minilm import MiniLM, export_onnx

QUERY = "did I ever tell you what my sister said about the trip?"  # ~10 words
SENTENCE = (
    "the assistant should remember that my daughter has a piano recital next friday evening "
    "and that I promised to bring flowers plus the camera so grandma can watch the video later "
    "because she could not travel this month after her knee surgery went slightly worse than planned"
)
WORDS = SENTENCE.split()


def batch_texts(n: int = 64, words: int = 40) -> list[str]:
    rng = np.random.default_rng(0)
    return [" ".join(rng.choice(WORDS, size=words)) for _ in range(n)]


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q))


def time_single(model: MiniLM, runs: int) -> list[float]:
    for _ in range(20):
        model.embed_batch([QUERY])
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        model.embed_batch([QUERY])
        out.append((time.perf_counter() - t0) * 1000)
    return out


def time_batch(model: MiniLM, texts: list[str], reps: int) -> float:
    model.embed_batch(texts)  # warm-up
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        model.embed_batch(texts)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--batch-reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()

    texts = batch_texts()
    with tempfile.TemporaryDirectory(prefix="caesar-bench-") as tmp:
        cache = pathlib.Path(tmp)
        onnx = MiniLM(cache, backend="onnx", threads=args.threads)

        t0 = time.perf_counter()
        export_onnx(onnx.model_dir, onnx.onnx_path)
        export_s = time.perf_counter() - t0

        t0 = time.perf_counter()
        onnx.load()
        onnx_load_s = time.perf_counter() - t0

        onnx_single = time_single(onnx, args.runs)
        onnx_batch = time_batch(onnx, texts, args.batch_reps)

        torch_model = MiniLM(cache, backend="torch", threads=args.threads)
        t0 = time.perf_counter()
        torch_model.load()
        torch_load_s = time.perf_counter() - t0

        torch_single = time_single(torch_model, args.runs)
        torch_batch = time_batch(torch_model, texts, args.batch_reps)

        a, b = onnx.embed_batch(texts), torch_model.embed_batch(texts)
        min_cos = float((a * b).sum(1).min())

    n_tok = len(onnx._tokenizer.encode(QUERY).ids)
    n_tok_b = int(np.mean([len(e.ids) for e in onnx._tokenizer.encode_batch(texts)]))
    print(f"cpus={os.cpu_count()} threads={args.threads} runs={args.runs}")
    print(f"onnx export (one-off)          {export_s:8.2f} s")
    print(f"onnx session load (cached)     {onnx_load_s * 1000:8.1f} ms")
    print(f"torch model load               {torch_load_s * 1000:8.1f} ms  (after torch import)")
    print(f"single query ({n_tok} tokens):")
    for name, xs in (("onnx", onnx_single), ("torch", torch_single)):
        print(
            f"  {name:5s} p50 {pct(xs, 50):6.2f} ms  p90 {pct(xs, 90):6.2f} ms"
            f"  p99 {pct(xs, 99):6.2f} ms"
        )
    print(f"  ratio onnx/torch p50          {pct(onnx_single, 50) / pct(torch_single, 50):8.2f}")
    print(f"batch of {len(texts)} texts (~40 words, ~{n_tok_b} tokens each):")
    for name, s in (("onnx", onnx_batch), ("torch", torch_batch)):
        print(f"  {name:5s} {s * 1000:8.1f} ms/batch  {len(texts) / s:8.1f} texts/s")
    print(f"  ratio onnx/torch time         {onnx_batch / torch_batch:8.2f}")
    print(f"min cosine onnx vs torch        {min_cos:.6f}")


if __name__ == "__main__":
    main()
