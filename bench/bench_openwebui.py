"""Time to first token for a message sent right after a reply, with Open WebUI's background
requests on, against the embedded model (issue #26).

Replays `../shared/data/clients/openwebui-0.12.4-requests.jsonl` against a real `caesar serve`
on its shipped defaults (the embedded SmolLM2 through llama.cpp, one slot). After each of the
user's turns, the background requests Open WebUI sent next (a title, tags, follow-ups) are
fired at once, as Open WebUI does when a reply ends; `--gap` seconds later the user's next
turn is sent (streamed), and the time to its first word is measured.

Two servers in one run, so the ratio is against a baseline from the same run:
- `before`: `clients.background_markers` set to match nothing, so the background requests are
  ordinary turns, queued in llama.cpp before the user's (caesar before issue #26);
- `after`: the shipped defaults: background requests recognised, yielding to the user's turn.

    .venv/bin/python bench/bench_openwebui.py [--gap 1.0] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import benchlib
import httpx

CAESAR = [str(Path(sys.executable).with_name("caesar"))]
RECORDING = (
    Path(__file__).resolve().parents[2] / "shared/data/clients/openwebui-0.12.4-requests.jsonl"
)
START_TIMEOUT_SECONDS = 120.0
SENT_HEADERS = ("content-type", "user-agent", "x-openwebui-")


def recorded() -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in RECORDING.read_text().splitlines() if line.strip()]
    return [r for r in rows if r["method"] == "POST"]


def is_task(request: dict[str, Any]) -> bool:
    return str(request["body"]["messages"][-1]["content"]).startswith("### Task")


def headers_of(request: dict[str, Any]) -> dict[str, str]:
    return {k: v for k, v in request["headers"].items() if k.lower().startswith(SENT_HEADERS)}


def start(home: Path, markers: list[str]) -> tuple[subprocess.Popen[bytes], str]:
    config = home / "caesar.toml"
    config.write_text(
        f"[clients]\nbackground_markers = {json.dumps(markers)}\n\n"
        f'[embedder]\ncache_dir = "{benchlib.MODEL_CACHE}"\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAESAR_")}
    env.update(CAESAR_HOME=str(home), CAESAR_CONFIG=str(config), HF_HUB_OFFLINE="1")
    subprocess.run([*CAESAR, "db", "upgrade"], env=env, check=True, capture_output=True)
    port = benchlib.free_port()
    process = subprocess.Popen(
        [*CAESAR, "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError("caesar serve exited during start-up")
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return process, url
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    process.kill()
    raise RuntimeError("caesar serve did not answer /healthz in time")


def user_turn(client: httpx.Client, request: dict[str, Any]) -> tuple[float, float]:
    """(time to the first word, to the end) of one streamed turn, in ms."""
    started = time.perf_counter()
    first = None
    with client.stream(
        "POST", request["path"], json=request["body"], headers=headers_of(request)
    ) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if first is None and line.startswith("data: {") and '"content": "' in line:
                if '"content": ""' not in line:
                    first = time.perf_counter()
    done = time.perf_counter()
    return benchlib.ms((first or done) - started), benchlib.ms(done - started)


def background(url: str, request: dict[str, Any], took: list[float]) -> threading.Thread:
    def run() -> None:
        started = time.perf_counter()
        httpx.post(
            f"{url}{request['path']}",
            json=request["body"],
            headers=headers_of(request),
            timeout=600,
        )
        took.append(benchlib.ms(time.perf_counter() - started))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def replay(url: str, gap: float) -> dict[str, Any]:
    """The recording in order; each user turn after a batch of background requests is timed."""
    ttft: list[float] = []
    first_turn: list[float] = []
    background_ms: list[float] = []
    threads: list[threading.Thread] = []
    batch_pending = False
    with httpx.Client(base_url=url, timeout=600) as client:
        for request in recorded():
            if is_task(request):
                threads.append(background(url, request, background_ms))
                batch_pending = True
                continue
            if batch_pending:
                time.sleep(gap)
            to_first, _total = user_turn(client, request)
            (ttft if batch_pending else first_turn).append(to_first)
            batch_pending = False
    for thread in threads:
        thread.join()
    return {
        "ttft_after_reply_ms": [round(x) for x in ttft],
        "ttft_first_turn_ms": [round(x) for x in first_turn],
        "background_ms": sorted(round(x) for x in background_ms),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gap", type=float, default=1.0, help="seconds after a reply")
    parser.add_argument("--rounds", type=int, default=2, help="fresh servers, alternating")
    args = parser.parse_args()
    results: dict[str, Any] = {"gap_s": args.gap, "load_before": benchlib.load_avg()}
    runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    for _ in range(args.rounds):
        for name, markers in (("before", ["\u0000matches nothing"]), ("after", ["### Task:"])):
            with tempfile.TemporaryDirectory(prefix=f"caesar-owui-{name}-") as tmp:
                process, url = start(Path(tmp), markers)
                try:
                    runs[name].append(replay(url, args.gap))
                finally:
                    process.terminate()
                    process.wait(timeout=30)
            print(name, json.dumps(runs[name][-1]), flush=True)
    for name, replays in runs.items():
        ttft = [x for r in replays for x in r["ttft_after_reply_ms"]]
        results[name] = {
            "replays": replays,
            "ttft_after_reply_median_ms": round(statistics.median(ttft)),
            "ttft_after_reply_max_ms": max(ttft),
            "samples": len(ttft),
        }
    results["load_after"] = benchlib.load_avg()
    before, after = results["before"], results["after"]
    ratio = after["ttft_after_reply_median_ms"] / before["ttft_after_reply_median_ms"]
    results["ratio_after_to_before"] = round(ratio, 3)
    print(
        f"time to first word, a message {args.gap:g} s after a reply ({after['samples']} "
        f"turns each): before median {before['ttft_after_reply_median_ms'] / 1000:.1f} s, "
        f"worst {before['ttft_after_reply_max_ms'] / 1000:.1f} s; after median "
        f"{after['ttft_after_reply_median_ms'] / 1000:.1f} s, worst "
        f"{after['ttft_after_reply_max_ms'] / 1000:.1f} s (median {ratio:.3f}x); "
        f"load {results['load_before']} -> {results['load_after']}"
    )
    benchlib.write_result("openwebui_ttft", results)


if __name__ == "__main__":
    main()
