"""`caesar serve` timed from outside: ready and first recall on the 100k-episode history, and a
fresh home's first start with what serve and its worker then hold in memory (issue #25).
Method: bench/README.md.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import benchlib
import history
import httpx
import procs


def start_once(url: str, now: str, query: str) -> dict[str, float]:
    """Spawn → /healthz 200, and → the first recall that returns episodes, with the CPU the
    server had used at each (a busy machine does not inflate it)."""
    with tempfile.TemporaryDirectory(prefix="caesar-serve-") as home:
        env = procs.caesar_env(
            Path(home),
            database_url=url,
            embedder__cache_dir=str(benchlib.MODEL_CACHE),
            run_workers="false",
            retention__enabled="false",
        )
        server = procs.Server(env, "--no-workers", log=Path(home) / "serve.log", wait=False)
        try:
            healthy = server.wait(poll=0.01)
            healthy_cpu = procs.cpu_seconds(server.process.pid)
            recalled = episodes = 0
            with httpx.Client(base_url=server.url, timeout=120) as client:
                while time.perf_counter() - server.started < 120:
                    answer = client.post("/v1/memory/recall", json={"query": query, "now": now})
                    if answer.status_code == 200 and answer.json().get("episodes"):
                        recalled = time.perf_counter() - server.started
                        episodes = len(answer.json()["episodes"])
                        break
                recalled_cpu = procs.cpu_seconds(server.process.pid)
                if not recalled:
                    raise RuntimeError("caesar serve recalled nothing in time")
                started = time.perf_counter()
                client.post("/v1/memory/recall", json={"query": query, "now": now})
                next_recall = time.perf_counter() - started
        finally:
            server.stop()
    return {
        "healthz_s": round(healthy, 3),
        "first_recall_s": round(recalled, 3),
        "healthz_cpu_s": round(healthy_cpu, 3),
        "first_recall_cpu_s": round(recalled_cpu, 3),
        "episodes_returned": episodes,
        "next_recall_ms": round(benchlib.ms(next_recall), 2),
    }


def serve(
    episodes: int = 100_000,
    starts: int = 3,
    database_url: Annotated[
        str | None, "start on this database instead (e.g. pgvector's 1M)"
    ] = None,
    now: Annotated[str | None, "with --database-url: the recall's time (ISO)"] = None,
    query: Annotated[str | None, "with --database-url: the recall's message"] = None,
) -> None:
    """`caesar serve` (workers off) on the cached 100k-episode history: spawn → /healthz, and
    → the first POST /v1/memory/recall that returns episodes."""
    if database_url:
        url, engine = database_url, database_url.split(":", 1)[0].split("+", 1)[0]
    else:
        hist = history.load(episodes)
        url, now, query, engine = (
            hist.url,
            hist.anchor.isoformat(),
            history.topic_messages()[1],
            "sqlite",
        )
    runs = [start_once(url, str(now), str(query)) for _ in range(starts)]
    result = {"episodes": episodes, "engine": engine, "runs": runs}
    for key in ("healthz_s", "first_recall_s", "healthz_cpu_s", "first_recall_cpu_s"):
        result[f"{key}_median"] = statistics.median(r[key] for r in runs)
    name = "perf_serve" if engine == "sqlite" else f"perf_serve_{engine}"
    benchlib.write_result(name, {**result, "load_avg": benchlib.load_avg()})


# -- the first start -------------------------------------------------------------------------
def start_fresh(cache: Path, settle: float, src: Path | None = None) -> dict[str, Any]:
    """`caesar serve --upgrade` on a fresh home until ready, one chat, then after `settle`
    seconds the resident memory of serve and its worker, and whether either has torch."""
    with tempfile.TemporaryDirectory(prefix="caesar-first-") as tmp:
        env = procs.caesar_env(Path(tmp) / "home", src=src)
        env["XDG_CACHE_HOME"] = str(cache)
        with procs.Server(env, "--upgrade", timeout=300) as server:
            chat = {"message": "Hi! My dog is called Biscuit."}
            httpx.post(f"{server.url}/v1/chat", json=chat, timeout=120).raise_for_status()
            time.sleep(settle)
            pids = [server.process.pid, *procs.children(server.process.pid)]
            memory = {str(pid): round(procs.memory_mb(pid)) for pid in pids}
            return {
                "ready_s": round(server.ready_s or 0, 2),
                "rss_mb": memory,
                "rss_total_mb": sum(memory.values()),
                "torch_loaded": any(procs.has_torch(pid) for pid in pids),
            }


def install(cache: Path, home: Path) -> float:
    """`caesar models prepare` into `cache`, as `make install` runs it: seconds."""
    started = time.perf_counter()
    env = procs.caesar_env(home)
    procs.caesar({**env, "XDG_CACHE_HOME": str(cache)}, "models", "prepare")
    return round(time.perf_counter() - started, 1)


def first_start(
    starts: int = 3,
    settle: Annotated[float, "seconds after the chat"] = 5.0,
    compare: Annotated[Path | None, "a src folder to start in turn with this one"] = None,
) -> None:
    """A fresh home's first start (issue #25): the first serve exporting the embedder, then
    `starts` first starts after an install that exported it; `--compare SRC` instead starts
    SRC's caesar and this one in turn from one install."""
    if compare is not None:
        compare_starts(compare.resolve(), starts, settle)
        return
    results: dict[str, Any] = {"load_before": benchlib.load_avg()}
    with tempfile.TemporaryDirectory(prefix="caesar-cache-") as tmp:
        results["first serve exports"] = [start_fresh(Path(tmp) / "cache", settle)]
    print("first serve exports", json.dumps(results["first serve exports"]), flush=True)
    with tempfile.TemporaryDirectory(prefix="caesar-cache-") as tmp:
        cache = Path(tmp) / "cache"
        results["install_export_s"] = install(cache, Path(tmp) / "install-home")
        results["exported at install"] = [start_fresh(cache, settle) for _ in range(starts)]
    results["load_after"] = benchlib.load_avg()
    before, after = results["first serve exports"][0], results["exported at install"]
    results["summary"] = {
        "ready_s_before": before["ready_s"],
        "ready_s_median": statistics.median(r["ready_s"] for r in after),
        "rss_total_mb_before": before["rss_total_mb"],
        "rss_total_mb_median": statistics.median(r["rss_total_mb"] for r in after),
        "torch_loaded_after": any(r["torch_loaded"] for r in after),
    }
    benchlib.write_result("first_start", results)


def compare_starts(src: Path, starts: int, settle: float) -> None:
    """SRC's first start and this checkout's, in turn, from one install."""
    runs: dict[str, list[dict[str, Any]]] = {"compared": [], "this": []}
    load_before = benchlib.load_avg()
    with tempfile.TemporaryDirectory(prefix="caesar-cache-") as tmp:
        cache = Path(tmp) / "cache"
        install(cache, Path(tmp) / "install-home")
        for _ in range(starts):
            runs["compared"].append(start_fresh(cache, settle, src))
            runs["this"].append(start_fresh(cache, settle))
            print(f"compared {runs['compared'][-1]}\nthis     {runs['this'][-1]}", flush=True)
    ready = {k: statistics.median(r["ready_s"] for r in v) for k, v in runs.items()}
    ratio = round(ready["this"] / ready["compared"], 2)
    load = f"{load_before} -> {benchlib.load_avg()}"
    benchlib.write_result(
        "first_start_compare",
        {"src": str(src), **runs, "ready_median_s": ready, "ratio": ratio, "load": load},
    )
