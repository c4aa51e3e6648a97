"""Shared by the bench scripts: timing, percentiles, results files, settings for a bench home.

Each script writes its figures to bench/out/results/<name>.json; bench/run_all.py runs the
scripts in sequence and renders docs/performance.md from those files.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# The owner's person id in every database the migrations make (migration 0008 creates the
# owner first; nothing removes them). The benches measure a one-person install: the owner's.
OWNER = 1
ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
RESULTS = OUT / "results"
# One ONNX export for every bench (made once by the first that needs it, then reused).
MODEL_CACHE = OUT / "models"

try:
    import caesar  # noqa: F401
except ImportError:  # run from a checkout without the editable install
    sys.path.insert(0, str(ROOT / "src"))


def ms(seconds: float) -> float:
    return seconds * 1000.0


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    pos = (len(ordered) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summary(values_ms: list[float]) -> dict[str, float]:
    return {
        "p50": round(statistics.median(values_ms), 4),
        "p90": round(pct(values_ms, 90), 4),
        "p99": round(pct(values_ms, 99), 4),
        "n": len(values_ms),
    }


def time_calls(fn: Callable[[], Any], runs: int, warmup: int = 3) -> list[float]:
    """Milliseconds of each of `runs` calls, after `warmup` untimed ones."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        out.append(ms(time.perf_counter() - started))
    return out


def time_calls_cpu(
    fn: Callable[[], Any], runs: int, warmup: int = 3
) -> tuple[list[float], list[float]]:
    """(wall ms, CPU ms of this thread) of each call. On a busy machine wall time includes
    waiting for a core; the CPU time is what the call costs (≈ wall on a quiet machine, for
    work done on the calling thread — caesar's search, embedding and SQLite all are)."""
    for _ in range(warmup):
        fn()
    wall, cpu = [], []
    for _ in range(runs):
        c0, t0 = time.thread_time(), time.perf_counter()
        fn()
        wall.append(ms(time.perf_counter() - t0))
        cpu.append(ms(time.thread_time() - c0))
    return wall, cpu


def host_speed(rounds: int = 5) -> float:
    """ms for a fixed workload — a pure-Python loop and float32 array arithmetic over 30 MB
    (one thread: numpy's elementwise code, not its threaded BLAS) — best of `rounds`. This shared host's speed drifts by tens
    of percent within an hour, with nothing else running here: stored with every result, it
    tells a slow run of the code from a slow hour of the machine."""
    matrix = np.random.default_rng(0).standard_normal((20_000, 384)).astype(np.float32)
    vector = matrix[0].copy()
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        total = 0
        for i in range(300_000):
            total += i & 7
        for _ in range(5):
            (matrix * vector).sum(axis=1)
        best = min(best, ms(time.perf_counter() - started))
    return round(best, 2)


def write_result(name: str, data: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    data = {
        "name": name,
        "written_at": time.strftime("%Y-%m-%d %H:%M:%S"),
        "host_speed_ms": host_speed(),
        **data,
    }
    path.write_text(json.dumps(data, indent=2, default=float))
    return path


def read_results() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    if RESULTS.is_dir():
        for path in sorted(RESULTS.glob("*.json")):
            found[path.stem] = json.loads(path.read_text())
    return found


def free_port() -> int:
    """A loopback port nobody listens on now, for a `caesar serve` a bench starts."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def load_avg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def machine() -> dict[str, str]:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    ram = "?"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                ram = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    versions: dict[str, str] = {}
    for module in ("numpy", "onnxruntime", "faiss", "sqlalchemy", "torch", "sentence_transformers"):
        try:
            versions[module] = str(__import__(module).__version__)
        except Exception as exc:  # noqa: BLE001 - reported as-is in the machine table
            versions[module] = f"unavailable ({type(exc).__name__})"
    blas = "?"
    try:
        from threadpoolctl import threadpool_info

        blas = "; ".join(
            f"{i.get('internal_api')} {i.get('version')} {i.get('architecture')} threads={i.get('num_threads')}"
            for i in threadpool_info()
            if i.get("user_api") == "blas"
        )
    except ImportError:
        pass
    return {
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "ram": ram,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "blas": blas,
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE", "(unset)"),
        **{k: v for k, v in versions.items()},
    }


def bench_settings(home: Path, database_url: str | None = None, **overrides: Any) -> Any:
    """Settings for a bench run: its own home, the shared model cache, nothing on the network.
    The `local` provider points at a closed port: benches swap in an in-process provider."""
    from caesar.config import Settings

    base: dict[str, Any] = {
        "home": home,
        "embedder": {"cache_dir": MODEL_CACHE},
        "gateway": {
            "providers": {
                "local": {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "api_key": "x"},
                "offline": {"kind": "offline"},
            },
            "routes": {
                "chat": "local:instant",
                "memory_extract": "local:instant",
                "memory_summarise": "local:instant",
            },
        },
    }
    if database_url:
        base["database_url"] = database_url
    base.update(overrides)
    return Settings(**base)


def longmemeval_sessions() -> dict[str, list[dict[str, str]]]:
    """Every LongMemEval dev session (../shared/data, both folders), once each by its id, in
    file order: role and content of each turn."""
    data = Path(__file__).resolve().parents[2] / "shared" / "data"
    seen: dict[str, list[dict[str, str]]] = {}
    for folder in ("longmemeval_s", "longmemeval_s_more"):
        for path in sorted((data / folder).glob("*.json")):
            item = json.loads(path.read_text())
            for key, turns in zip(
                item["haystack_session_ids"], item["haystack_sessions"], strict=True
            ):
                seen.setdefault(key, [{"role": t["role"], "content": t["content"]} for t in turns])
    return seen
