"""The first five minutes (issue #25): a fresh home's first `caesar serve`, timed from outside,
and what serve and its worker hold in memory after a first chat.

Both in one run, each on a fresh home and a fresh model cache:
- `first serve exports`: nothing prepared, so the first start exports the embedder to ONNX
  (caesar before issue #25; also what happens when `make install` could not export);
- `exported at install`: `caesar models prepare` ran first (as `make install` does; its own
  time is reported as the install's cost), then `caesar serve --upgrade` (as `make run` does).

Ready = GET /healthz answers 200 "ok" (the embedder, the index and the chat model loaded).
Then one chat turn (POST /v1/chat), and after `--settle` seconds the resident memory (VmRSS)
of the serve process and its worker process, and whether either has torch mapped.

    .venv/bin/python bench/bench_first_start.py [--starts 3] [--settle 5]

`--compare SRC` also starts the caesar in SRC (e.g. `git archive <commit> src | tar -x -C
/tmp/before`) from the same install, alternating with this checkout's start for start, so that
both see the same load; it prints both medians and their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import benchlib
import httpx

CAESAR = str(Path(sys.executable).with_name("caesar"))
TIMEOUT_S = 300.0


def environment(home: Path, cache: Path, src: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAESAR_")}
    env.update(CAESAR_HOME=str(home), XDG_CACHE_HOME=str(cache), HF_HUB_OFFLINE="1")
    env["PYTHONPATH"] = str(src or benchlib.ROOT / "src")
    return env


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid:
            found.append(int(stat.parent.name))
    return found


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def has_torch(pid: int) -> bool:
    return "libtorch" in Path(f"/proc/{pid}/maps").read_text()


def first_start(cache: Path, settle: float, src: Path | None = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="caesar-first-") as tmp:
        home = Path(tmp) / "home"
        env = environment(home, cache, src)
        port = benchlib.free_port()
        started = time.perf_counter()
        process = subprocess.Popen(
            [CAESAR, "serve", "--upgrade", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            ready = None
            while time.perf_counter() - started < TIMEOUT_S:
                if process.poll() is not None:
                    raise RuntimeError("caesar serve exited during start-up")
                try:
                    if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                        ready = time.perf_counter() - started
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.05)
            if ready is None:
                raise RuntimeError("caesar serve was not ready in time")
            chat = httpx.post(
                f"{url}/v1/chat", json={"message": "Hi! My dog is called Biscuit."}, timeout=120
            )
            chat.raise_for_status()
            time.sleep(settle)
            pids = [process.pid, *children(process.pid)]
            memory = {str(pid): round(rss_mb(pid)) for pid in pids}
            return {
                "ready_s": round(ready, 2),
                "rss_mb": memory,
                "rss_total_mb": sum(memory.values()),
                "torch_loaded": any(has_torch(pid) for pid in pids),
            }
        finally:
            process.terminate()
            process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=3, help="first starts after an install")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds after the chat")
    parser.add_argument("--compare", type=Path, help="a src folder to start in turn with this one")
    args = parser.parse_args()
    if args.compare:
        compare(args.compare.resolve(), args.starts, args.settle)
        return
    results: dict[str, Any] = {"load_before": benchlib.load_avg()}
    with tempfile.TemporaryDirectory(prefix="caesar-cache-") as tmp:
        results["first serve exports"] = [first_start(Path(tmp) / "cache", args.settle)]
    print("first serve exports", json.dumps(results["first serve exports"]), flush=True)
    with tempfile.TemporaryDirectory(prefix="caesar-cache-") as tmp:
        cache = Path(tmp) / "cache"
        started = time.perf_counter()
        subprocess.run(
            [CAESAR, "models", "prepare"],
            env=environment(Path(tmp) / "install-home", cache),
            check=True,
            capture_output=True,
        )
        results["install_export_s"] = round(time.perf_counter() - started, 1)
        results["exported at install"] = [
            first_start(cache, args.settle) for _ in range(args.starts)
        ]
    print("exported at install", json.dumps(results["exported at install"]), flush=True)
    results["load_after"] = benchlib.load_avg()
    before = results["first serve exports"][0]
    after = results["exported at install"]
    ready = statistics.median(r["ready_s"] for r in after)
    rss = statistics.median(r["rss_total_mb"] for r in after)
    results["summary"] = {
        "ready_s_before": before["ready_s"],
        "ready_s_median": ready,
        "rss_total_mb_before": before["rss_total_mb"],
        "rss_total_mb_median": rss,
        "torch_loaded_after": any(r["torch_loaded"] for r in after),
    }
    print(
        f"first serve ready: {before['ready_s']:.1f} s exporting, {ready:.1f} s after an install "
        f"(median of {len(after)}; the install's export took {results['install_export_s']} s); "
        f"serve + worker resident after a chat: {before['rss_total_mb']} MB → {rss:.0f} MB; "
        f"torch in a serving process: {results['summary']['torch_loaded_after']}; "
        f"load {results['load_before']} -> {results['load_after']}"
    )
    benchlib.write_result("first_start", results)


def compare(src: Path, starts: int, settle: float) -> None:
    """SRC's first start and this checkout's, in turn, from one install."""
    with tempfile.TemporaryDirectory(prefix="caesar-cache-") as tmp:
        cache = Path(tmp) / "cache"
        home = Path(tmp) / "install-home"
        env = environment(home, cache)
        subprocess.run([CAESAR, "models", "prepare"], env=env, check=True, capture_output=True)
        runs: dict[str, list[dict[str, Any]]] = {"compared": [], "this": []}
        load_before = benchlib.load_avg()
        for _ in range(starts):
            runs["compared"].append(first_start(cache, settle, src))
            runs["this"].append(first_start(cache, settle))
            print(f"compared {runs['compared'][-1]}\nthis     {runs['this'][-1]}", flush=True)
    ready = {k: statistics.median(r["ready_s"] for r in v) for k, v in runs.items()}
    rss = {k: statistics.median(r["rss_total_mb"] for r in v) for k, v in runs.items()}
    print(
        f"ready (median of {starts}): {src} {ready['compared']:.2f} s, this checkout "
        f"{ready['this']:.2f} s (ratio {ready['this'] / ready['compared']:.2f}); resident "
        f"{rss['compared']:.0f} → {rss['this']:.0f} MB; load {load_before} -> "
        f"{benchlib.load_avg()}"
    )
    benchlib.write_result("first_start_compare", {"src": str(src), **runs})


if __name__ == "__main__":
    main()
