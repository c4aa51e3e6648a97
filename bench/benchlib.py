"""The bench harness, shared by every measurement: paths, timing, results files, a bench's
settings, the public datasets, the in-process provider, and the command line a measurement gets
from its signature.

Each measurement writes its figures to bench/out/results/<name>.json; bench/run.py lists and
runs them (bench/README.md says what each measures and how).
"""

from __future__ import annotations

import argparse
import inspect
import itertools
import json
import os
import platform
import statistics
import sys
import time
import typing
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# The owner's person id in every database the migrations make (migration 0008 creates the
# owner first; nothing removes them). The benches measure a one-person install: the owner's.
OWNER = 1
ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
RESULTS = OUT / "results"
DATA = ROOT.parent / "shared" / "data"  # the public datasets (LoCoMo, LongMemEval, clients)
BENCH_DATA = ROOT / "bench" / "data"  # the benches' own: probe sets, topics, the page template
# One ONNX export for every bench (made once by the first that needs it, then reused).
MODEL_CACHE = OUT / "models"

# The caesar under test: this checkout's, or another's (a baseline worktree) by CAESAR_SRC.
SRC = Path(os.environ.get("CAESAR_SRC") or ROOT / "src").resolve()
sys.path.insert(0, str(SRC))
sys.path.append(str(ROOT / "tests"))  # the test suite's fakes (fakes.llm_server) and pg.py


# -- timing ----------------------------------------------------------------------------------
def ms(seconds: float) -> float:
    return seconds * 1000.0


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    pos = (len(ordered) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summary(values_ms: Sequence[float]) -> dict[str, float]:
    return {
        "p50": round(statistics.median(values_ms), 4),
        "p90": round(pct(values_ms, 90), 4),
        "p99": round(pct(values_ms, 99), 4),
        "n": len(values_ms),
    }


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


def each(fn: Callable[[Any], Any], items: Sequence[Any]) -> Callable[[], Any]:
    """A call of `fn` on the next of `items`, in turn for ever: a timed call's next message."""
    it = itertools.cycle(items)
    return lambda: fn(next(it))


def host_speed(rounds: int = 5) -> float:
    """ms for a fixed workload — a pure-Python loop and float32 array arithmetic over 30 MB
    (one thread: numpy's elementwise code, not its threaded BLAS) — best of `rounds`. This
    shared host's speed drifts by tens of percent within an hour, with nothing else running
    here: stored with every result, it tells a slow run of the code from a slow hour."""
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


def load_avg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


# -- results ---------------------------------------------------------------------------------
def write_result(name: str, data: dict[str, Any]) -> Path:
    """bench/out/results/<name>.json, stamped with the time and the host's speed; printed."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    data = {
        "name": name,
        "written_at": time.strftime("%Y-%m-%d %H:%M:%S"),
        "host_speed_ms": host_speed(),
        **data,
    }
    path.write_text(json.dumps(data, indent=2, default=float))
    print(json.dumps(data, indent=1, default=float, ensure_ascii=False))
    print(f"written to {path.relative_to(ROOT)}")
    return path


def read_results() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    if RESULTS.is_dir():
        for path in sorted(RESULTS.glob("*.json")):
            found[path.stem] = json.loads(path.read_text())
    return found


def machine() -> dict[str, str]:
    def first(path: str, key: str) -> str | None:
        try:
            lines = Path(path).read_text().splitlines()
        except OSError:
            return None
        return next((line.split(":", 1)[1].strip() for line in lines if line.startswith(key)), None)

    kib = first("/proc/meminfo", "MemTotal")
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
        "cpu": first("/proc/cpuinfo", "model name") or "?",
        "ram": f"{int(kib.split()[0]) / 1024 / 1024:.1f} GiB" if kib else "?",
        "python": platform.python_version(),
        "platform": platform.platform(),
        "blas": blas,
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE", "(unset)"),
        **versions,
    }


# -- caesar in this process ------------------------------------------------------------------
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


class InstantProvider:
    """A caesar.gateway.base.Provider that answers at once and keeps its own time. The benches'
    other providers change only what it says (`text`)."""

    can_chat = True

    def __init__(self, name: str = "local") -> None:
        self.name = name
        self.seconds = 0.0

    def text(self, messages: list[Any], task: str) -> str:
        return "Noted."

    def complete(
        self, messages: list[Any], model: str, *, task: str, json_mode: bool = False, **_: Any
    ) -> Any:
        from caesar.gateway.base import Completion, Usage

        started = time.perf_counter()
        reply = Completion(self.text(messages, task), self.name, model, Usage(1, 1), 0.0)
        self.seconds += time.perf_counter() - started
        return reply

    def stream(self, messages: list[Any], model: str, *, task: str, **_: Any) -> Iterator[Any]:
        from caesar.gateway.base import StreamChunk

        yield StreamChunk(self.complete(messages, model, task=task).text)


def install(services: Any, provider: InstantProvider) -> None:
    """Route every task of the bench settings ("local:…") to the in-process provider."""
    services.gateway._providers["local"] = provider  # the bench's provider seam (private)


# -- the public datasets (../shared/data) -----------------------------------------------------
def lme_date(text: str) -> datetime:
    """LongMemEval's '2023/05/20 (Sat) 05:04' → datetime(2023, 5, 20, 5, 4)."""
    return datetime.strptime(text, "%Y/%m/%d (%a) %H:%M")


def longmemeval_items(
    folders: Sequence[str] = ("longmemeval_s", "longmemeval_s_more"),
) -> Iterator[Any]:
    """Every LongMemEval dev question of those folders, in file order."""
    for folder in folders:
        for path in sorted((DATA / folder).glob("*.json")):
            yield json.loads(path.read_text())


def longmemeval_sessions(
    folders: Sequence[str] = ("longmemeval_s", "longmemeval_s_more"),
) -> dict[str, list[dict[str, str]]]:
    """Every LongMemEval dev session, once each by its id, in file order: role and content of
    each turn."""
    seen: dict[str, list[dict[str, str]]] = {}
    for item in longmemeval_items(folders):
        for key, turns in zip(item["haystack_session_ids"], item["haystack_sessions"], strict=True):
            seen.setdefault(key, [{"role": t["role"], "content": t["content"]} for t in turns])
    return seen


def conversations(count: int) -> list[dict[str, Any]]:
    """The first `count` distinct longmemeval_s sessions that end with a reply, as
    `caesar import` reads them, dated over the last 80 days."""
    from caesar.clock import utcnow

    now = utcnow()
    chats = [
        c
        for c in longmemeval_sessions(["longmemeval_s"]).values()
        if len(c) >= 2 and c[-1]["role"] == "assistant"
    ][:count]
    return [
        {"created_at": (now - timedelta(days=80 * (1 - i / count))).isoformat(), "messages": c}
        for i, c in enumerate(chats)
    ]


# -- the command line ------------------------------------------------------------------------
def cli(
    measure: Callable[..., Any], argv: Sequence[str] | None = None, prog: str | None = None
) -> Any:
    """Call `measure` with the options on the command line. Each keyword parameter is one:
    `turns: int = 200` is `--turns N`, a bool a flag, a list several values, a Literal its
    choices; `Annotated[T, "help"]` says what it is. The function's docstring (or else its
    module's) is the help."""
    doc = inspect.getdoc(measure) or sys.modules[measure.__module__].__doc__ or ""
    parser = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0])
    hints = typing.get_type_hints(measure, include_extras=True)
    for name, param in inspect.signature(measure).parameters.items():
        kind, help_, positional = hints[name], None, param.default is inspect.Parameter.empty
        if typing.get_origin(kind) is Annotated:
            kind, help_ = typing.get_args(kind)[:2]
        options: dict[str, Any] = {"help": help_, "dest": name}
        args = [a for a in typing.get_args(kind) if a is not type(None)]
        if kind is bool:
            options["action"] = "store_true"
        elif typing.get_origin(kind) is Literal:
            options["choices"] = args
        elif typing.get_origin(kind) is list:
            inner = args[0]
            choices = typing.get_args(inner) if typing.get_origin(inner) is Literal else None
            nargs = "*" if positional else "+"
            options.update(nargs=nargs, choices=choices, type=None if choices else inner)
        else:
            options["type"] = args[0] if args else kind
        if positional:
            parser.add_argument(name, **{k: v for k, v in options.items() if k != "dest"})
        else:
            parser.add_argument("--" + name.replace("_", "-"), default=param.default, **options)
    return measure(**vars(parser.parse_args(argv)))
