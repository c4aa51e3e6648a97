"""A client's background tasks answered offline (issue #49): are the titles about the chat,
and how long does each answer take? Method: bench/README.md.

    .venv/bin/python bench/bench_client_tasks.py [--conversations 100] [--no-http]
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import bench_openwebui
import benchlib
import httpx

from caesar.gateway import client_tasks, offline
from caesar.gateway.textrank import stop_words

PLACEHOLDERS = ("your concise title here", "tag1", "suggested next message")


def prompts() -> dict[str, str]:
    """Open WebUI's own task prompts, from the recording, with their chat history cut out."""
    found: dict[str, str] = {}
    for request in bench_openwebui.recorded():
        said = str(request["body"]["messages"][-1]["content"])
        if said.startswith("### Task"):
            kind = client_tasks.kind_of(said)
            found.setdefault(kind, said[: said.index("<chat_history>")])
    return found


def with_history(prompt: str, turns: list[dict[str, str]]) -> str:
    lines = [f"{t['role'].upper()}: {t['content']}" for t in turns]
    return prompt + "<chat_history>\n" + "\n".join(lines) + "\n</chat_history>"


def sessions(count: int) -> list[tuple[str, list[dict[str, str]]]]:
    seen = {
        key: chat
        for key, chat in benchlib.longmemeval_sessions().items()
        if len(chat) >= 2 and chat[0]["role"] == "user"
    }
    keys = sorted(seen)
    step = max(1, len(keys) // count)
    return [(k, seen[k]) for k in keys[::step][:count]]


def content_words(text: str) -> set[str]:
    stop = stop_words()
    return {w for w in re.findall(r"[a-z][a-z'-]{2,}", text.lower()) if w not in stop}


def quality(chats: list[tuple[str, list[dict[str, str]]]]) -> dict[str, Any]:
    asks = prompts()
    rows: dict[str, list[float]] = {"ms": []}
    counts = {"named": 0, "copies": 0, "tags_ok": 0, "follow_ups_ok": 0, "follow_ups_given": 0}
    shown = []
    for key, chat in chats:
        first = [chat[0], {"role": "assistant", "content": ""}]
        started = time.perf_counter()
        title = json.loads(client_tasks.answer(with_history(asks["title"], first)))["title"]
        tags = json.loads(client_tasks.answer(with_history(asks["tags"], chat)))["tags"]
        ups = json.loads(client_tasks.answer(with_history(asks["follow_ups"], chat)))
        rows["ms"].append((time.perf_counter() - started) * 1000 / 3)
        summary = offline.summarise(chat)  # type: ignore[arg-type]
        counts["named"] += bool(content_words(title) & content_words(summary))
        counts["copies"] += title.strip().lower() == chat[0]["content"].strip().lower()
        counts["tags_ok"] += bool(tags) and not any(
            p in json.dumps(tags).lower() for p in PLACEHOLDERS
        )
        follow = ups["follow_ups"]
        counts["follow_ups_ok"] += isinstance(follow, list) and not any(
            p in json.dumps(follow).lower() for p in PLACEHOLDERS
        )
        counts["follow_ups_given"] += bool(follow)
        shown.append(
            {"session": key, "first": chat[0]["content"][:100], "title": title, "tags": tags}
        )
    n = len(chats)
    return {
        "conversations": n,
        **{k: f"{v} of {n}" for k, v in counts.items()},
        "ms_per_answer": benchlib.summary(rows["ms"]),
        "examples": shown[:12],
    }


def over_http(settle: float) -> dict[str, Any]:
    """The recorded task requests against a real server on its shipped defaults."""
    took: dict[str, list[float]] = {}
    answers = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        bench_openwebui.start(Path(tmp), bench_openwebui.MARKERS["after"]) as server,
    ):
        time.sleep(settle)  # serve's warm-up after ready; Open WebUI asks after a reply
        with httpx.Client(base_url=server.url, timeout=60) as client:
            for _ in range(5):
                for request in bench_openwebui.recorded():
                    if not bench_openwebui.is_task(request):
                        continue
                    said = str(request["body"]["messages"][-1]["content"])
                    kind = client_tasks.kind_of(said)
                    started = time.perf_counter()
                    response = client.post(
                        request["path"],
                        json=request["body"],
                        headers=bench_openwebui.headers_of(request),
                    )
                    took.setdefault(kind, []).append((time.perf_counter() - started) * 1000)
                    response.raise_for_status()
                    answers.append(response.json()["choices"][0]["message"]["content"])
    return {
        "requests": sum(len(v) for v in took.values()),
        "ms": {kind: benchlib.summary(v) for kind, v in took.items()},
        "answers": sorted(set(answers)),
    }


def background_tasks(
    conversations: int = 100,
    no_http: Annotated[bool, "in-process only"] = False,
    settle: Annotated[float, "seconds between ready and the first request"] = 5.0,
) -> None:
    """A client's background tasks answered offline (issue #49): titles, tags and follow-ups
    for LongMemEval chats in two halves, and their time in-process and over HTTP."""
    chats = sessions(conversations)
    result: dict[str, Any] = {"half 1": quality(chats[0::2]), "half 2": quality(chats[1::2])}
    if not no_http:
        result["http"] = over_http(settle)
    benchlib.write_result("client_tasks", {**result, "machine": benchlib.machine()})


if __name__ == "__main__":
    benchlib.cli(background_tasks)
