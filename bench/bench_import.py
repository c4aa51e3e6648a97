"""`caesar import` of a ChatGPT export (issue 48): 2,000 conversations of realistic length
(LongMemEval's haystack sessions, dev data) written as ChatGPT's data export, then
- parse and write: `caesar import export.zip --no-learn` from outside (the command's wall time,
  start-up included) and `importer.import_path` in-process on a fresh database;
- learned: `caesar serve` with its workers (shipped: their own niced process) until every
  imported conversation is summarised, windowed and read for facts, standing statements and
  dated memories (import_learning.progress, what "learning N of M" shows), one client sending
  chat turns back to back for its first minutes (`--chat-seconds`) in rounds, each followed by
  the same turns with the server restarted without workers on the history as they left it
  (idle), then the learning alone. Targets: ≥ 200 conversations/s written; learned
  ≤ 15 min on SQLite; busy p50 ≤ 1.5× idle p50.
`--postgres` runs the same on a PostgreSQL with pgvector started for the run.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import zipfile
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Annotated, Any

import benchlib
import httpx
import procs
from bench_workers import busy_env, one_turn
from benchlib import OWNER

from caesar import import_learning
from caesar.config import load_settings
from caesar.importer import import_path
from caesar.memory.scope import Scope
from caesar.services import Services


def chatgpt_conversation(n: int, chat: dict[str, Any]) -> dict[str, Any]:
    """One `benchlib.conversations` chat as ChatGPT's export holds it: a message tree with one
    branch (each message a minute after the one before), a hidden system root."""
    from datetime import datetime

    start = datetime.fromisoformat(chat["created_at"]).timestamp()
    conv_id = f"bench-{n:05d}"
    root = f"{conv_id}-root"
    mapping: dict[str, Any] = {
        root: {
            "id": root,
            "message": {
                "id": root,
                "author": {"role": "system"},
                "create_time": None,
                "content": {"content_type": "text", "parts": [""]},
                "metadata": {"is_visually_hidden_from_conversation": True},
                "recipient": "all",
            },
            "parent": None,
            "children": [],
        }
    }
    parent = root
    for i, message in enumerate(chat["messages"]):
        node = f"{conv_id}-{i}"
        mapping[node] = {
            "id": node,
            "message": {
                "id": node,
                "author": {"role": message["role"]},
                "create_time": start + 60 * i,
                "content": {"content_type": "text", "parts": [message["content"]]},
                "metadata": {},
                "recipient": "all",
            },
            "parent": parent,
            "children": [],
        }
        mapping[parent]["children"].append(node)
        parent = node
    return {
        "id": conv_id,
        "title": chat["messages"][0]["content"][:40],
        "create_time": start,
        "update_time": start + 60 * len(chat["messages"]),
        "mapping": mapping,
        "current_node": parent,
    }


def write_export(path: Path, count: int) -> dict[str, Any]:
    chats = benchlib.conversations(count)
    data = [chatgpt_conversation(n, c) for n, c in enumerate(chats)]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("conversations.json", json.dumps(data, ensure_ascii=False))
    turns = [len(c["messages"]) for c in chats]
    chars = [sum(len(m["content"]) for m in c["messages"]) for c in chats]
    return {
        "conversations": len(chats),
        "turns_p50": benchlib.pct(turns, 50),
        "chars_p50": benchlib.pct(chars, 50),
        "chars_total": sum(chars),
        "zip_bytes": path.stat().st_size,
    }


@contextmanager
def _env(env: dict[str, str]) -> Any:
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def services_of(env: dict[str, str]) -> Services:
    """This process's view of the caesar `env` runs (its settings, its database)."""
    with _env(env):
        return Services.build(load_settings())


def write_rate(env: dict[str, str], export: Path) -> dict[str, Any]:
    """In-process: detect, parse and write, on the fresh database of `env`."""
    services = services_of(env)
    try:
        started = time.perf_counter()
        report = import_path(services, export, scope=Scope(OWNER))
        seconds = time.perf_counter() - started
    finally:
        services.close()
    return {
        "imported": report.imported,
        "seconds": round(seconds, 2),
        "per_second": round(report.imported / seconds, 1),
    }


def turns_for(http: httpx.Client, seconds: float, first: int, phase: str) -> list[float]:
    """Chat turns back to back for `seconds`, after 5 untimed ones (a server just started)."""
    for i in range(5):
        one_turn(http, first + i, phase)
    timed: list[float] = []
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        timed.append(one_turn(http, first + 5 + len(timed), phase))
    return timed


def learn_while_chatting(
    env: dict[str, str], home: Path, max_seconds: float, chat_seconds: float, rounds: int
) -> dict[str, Any]:
    """`caesar serve` on the imported history, in `rounds` rounds: a client chats back to back
    while the server's workers learn (busy), then with the server restarted without workers
    on the history as they left it (idle, a third as long), until `chat_seconds` of busy
    turns; then the learning alone, until learned or `max_seconds` of learning (the idle
    rounds not counted). Busy and idle turns so sample the same histories."""
    services = services_of(env)
    [record] = import_learning.recent(services, Scope(OWNER), limit=1)
    busy: list[float] = []
    idle: list[float] = []
    headers = {"Authorization": f"Bearer {procs.TOKEN}"}

    def state() -> import_learning.Learning:
        return import_learning.progress(services, Scope(OWNER), record.first_id, record.last_id)

    progress = [(0.0, state().done)]
    learned_for = 0.0  # seconds the workers ran, over every start of the server
    now = state()
    segment = chat_seconds / max(rounds, 1)
    try:
        for run in [*["chat"] * (rounds if chat_seconds > 0 else 0), "alone"]:
            with procs.Server(env, log=home / "learn.log") as server:
                started = last = time.monotonic()
                with httpx.Client(base_url=server.url, headers=headers, timeout=60) as http:
                    if run == "chat":
                        busy += turns_for(http, segment, len(busy) + len(idle), "busy")
                    while (
                        run == "alone"
                        and not now.finished
                        and learned_for + (time.monotonic() - started) < max_seconds
                    ):
                        time.sleep(2.0)
                        if time.monotonic() - last > 5.0:
                            now, last = state(), time.monotonic()
                            progress.append((round(learned_for + last - started, 1), now.done))
                learned_for += time.monotonic() - started
            now = state()
            progress.append((round(learned_for, 1), now.done))
            if run == "chat":
                with procs.Server(env, "--no-workers", log=home / "idle.log") as server:
                    with httpx.Client(base_url=server.url, headers=headers, timeout=60) as http:
                        idle += turns_for(http, segment / 3, len(busy) + len(idle), "idle")
            if now.finished:
                break
    finally:
        services.close()
    at_15_min = max((done for t, done in progress if t <= 900.0), default=0)
    busy_ms, idle_ms = benchlib.summary(busy), benchlib.summary(idle)
    return {
        "learned": now.done,
        "of": now.total,
        "seconds": round(learned_for, 1),
        "finished": now.finished,
        "per_minute": round(now.done / (learned_for / 60), 1),
        "learned_in_15_min": at_15_min,
        "progress": progress[:: max(1, len(progress) // 30)],
        "chat_seconds": chat_seconds,
        "rounds": rounds,
        "busy_ms": busy_ms,
        "idle_ms": idle_ms,
        "busy_p50_over_idle_p50": round(busy_ms["p50"] / idle_ms["p50"], 2) if idle else None,
    }


def import_bench(
    conversations: Annotated[int, "conversations in the export"] = 2000,
    rounds: Annotated[int, "busy/idle rounds of the chat (each busy one chat-seconds/rounds)"] = 4,
    max_seconds: Annotated[float, "stop waiting for the learning after this"] = 2400.0,
    chat_seconds: Annotated[float, "chat back to back for the learning's first seconds"] = 180.0,
    postgres: Annotated[bool, "on a PostgreSQL with pgvector started for the run"] = False,
) -> None:
    """`caesar import` of a ChatGPT export: parse and write, then learned while chatting."""
    result: dict[str, Any] = {"engine": "postgresql" if postgres else "sqlite"}
    with ExitStack() as stack:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="caesar-import-")))
        llm = stack.enter_context(procs.instant_provider())
        export = root / "chatgpt-export.zip"
        result["export"] = write_export(export, conversations)
        server_pg = None
        if postgres:
            from pg import create_database, start_postgres

            server_pg = stack.enter_context(start_postgres(root / "pg"))

        def home(name: str) -> tuple[Path, dict[str, str]]:
            path = root / name
            path.mkdir(parents=True, exist_ok=True)  # PostgreSQL writes no file there
            env = busy_env(path, llm)
            if server_pg is not None:
                env["CAESAR_DATABASE_URL"] = create_database(server_pg, with_vector=True)
            procs.caesar(env, "db", "upgrade")
            return path, env

        _, fresh = home("inprocess")
        result["write_in_process"] = write_rate(fresh, export)

        learn_home, env = home("cli")
        started = time.perf_counter()
        said = procs.caesar(env, "import", str(export), "--no-learn")
        cli_s = time.perf_counter() - started
        result["write_cli"] = {
            "seconds": round(cli_s, 2),
            "per_second": round(conversations / cli_s, 1),
            "said": said.strip().splitlines()[-2:],
        }
        result["learn"] = learn_while_chatting(env, learn_home, max_seconds, chat_seconds, rounds)
    name = "perf_import_pg" if postgres else "perf_import"
    benchlib.write_result(name, {**result, "load_avg": benchlib.load_avg()})
