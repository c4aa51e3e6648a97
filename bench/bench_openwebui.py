"""Time to first word for a message sent right after a reply, with Open WebUI's background
requests on, against the embedded model (issue #26): its recorded chats replayed against
`caesar serve` on the shipped defaults, the background requests as turns (before) and
recognised (after), alternately. Method: bench/README.md.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Annotated, Any

import benchlib
import httpx
import procs

RECORDING = benchlib.DATA / "clients" / "openwebui-0.12.4-requests.jsonl"
SENT_HEADERS = ("content-type", "user-agent", "x-openwebui-")
MARKERS = {"before": ["\u0000matches nothing"], "after": ["### Task:"]}


def recorded() -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in RECORDING.read_text().splitlines() if line.strip()]
    return [r for r in rows if r["method"] == "POST"]


def is_task(request: dict[str, Any]) -> bool:
    return str(request["body"]["messages"][-1]["content"]).startswith("### Task")


def headers_of(request: dict[str, Any]) -> dict[str, str]:
    return {k: v for k, v in request["headers"].items() if k.lower().startswith(SENT_HEADERS)}


def start(home: Path, markers: list[str]) -> procs.Server:
    """`caesar serve` on the shipped defaults but `clients.background_markers`."""
    config = f'[clients]\nbackground_markers = {json.dumps(markers)}\n\n[embedder]\ncache_dir = "{benchlib.MODEL_CACHE}"\n'
    return procs.Server(procs.caesar_env(home, config), upgrade=True)


def user_turn(client: httpx.Client, request: dict[str, Any]) -> float:
    """The time to the first word of one streamed turn, in ms."""
    started = time.perf_counter()
    first = None
    body, headers = request["body"], headers_of(request)
    with client.stream("POST", request["path"], json=body, headers=headers) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if first is None and line.startswith("data: {") and '"content": "' in line:
                if '"content": ""' not in line:
                    first = time.perf_counter()
    return benchlib.ms((first or time.perf_counter()) - started)


def background(url: str, request: dict[str, Any], took: list[float]) -> threading.Thread:
    def run() -> None:
        started = time.perf_counter()
        body, headers = request["body"], headers_of(request)
        httpx.post(f"{url}{request['path']}", json=body, headers=headers, timeout=600)
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
            (ttft if batch_pending else first_turn).append(user_turn(client, request))
            batch_pending = False
    for thread in threads:
        thread.join()
    return {
        "ttft_after_reply_ms": [round(x) for x in ttft],
        "ttft_first_turn_ms": [round(x) for x in first_turn],
        "background_ms": sorted(round(x) for x in background_ms),
    }


def openwebui(
    gap: Annotated[float, "seconds after a reply"] = 1.0,
    rounds: Annotated[int, "fresh servers, alternating"] = 2,
) -> None:
    """Time to first word of a message sent `gap` s after a reply, Open WebUI's background
    requests fired at the reply's end: as turns queued first (before issue #26) and
    recognised (after), fresh servers alternating."""
    results: dict[str, Any] = {"gap_s": gap, "load_before": benchlib.load_avg()}
    runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    for _ in range(rounds):
        for name, markers in MARKERS.items():
            with tempfile.TemporaryDirectory(prefix=f"caesar-owui-{name}-") as tmp:
                with start(Path(tmp), markers) as server:
                    runs[name].append(replay(server.url, gap))
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
    ratio = (
        results["after"]["ttft_after_reply_median_ms"]
        / results["before"]["ttft_after_reply_median_ms"]
    )
    benchlib.write_result("openwebui_ttft", {**results, "ratio_after_to_before": round(ratio, 3)})
