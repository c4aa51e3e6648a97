"""Chat while caesar learns (issue #16): turn latency from outside, idle and while the memory
workers catch up on an imported backlog.

    .venv/bin/python bench/bench_busy.py [--chats 300] [--idle-turns 100] [--max-seconds 900]

Three processes, as an operator runs it: the instant provider (the test suite's OpenAI wire
server, its own process), `caesar serve` on SQLite, and this one, which sends one
`POST /v1/chat` at a time (real recall over the history; the provider answers at once). First
`caesar import` stores `--chats` LongMemEval-size conversations. Then:

1. **idle**: `caesar serve --no-workers`, `--idle-turns` turns;
2. **busy**: `caesar serve` with its memory workers (the offline summariser, windows,
   offline extraction), turns sent back to back from the moment it is ready until the backlog
   is done (every conversation summarised and windowed) or `--max-seconds`.

It reports idle and busy p50/p90, the ratios (targets: busy p50 ≤ 1.5× idle p50, busy p90 ≤
3× idle p50), and the backlog's throughput in conversations per minute. Figures go to
bench/out/results/perf_busy.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import benchlib
import httpx
from bench_summarise import conversations
from load import CAESAR, TOKEN, _start_provider, _start_server
from load import _env as load_env

QUESTIONS = (
    "What did we talk about when I asked about {}?",
    "Remind me what you suggested for {}.",
    "I tried the {} thing you mentioned, any follow-up?",
    "Do you remember my question on {}?",
)
HEADERS = {"Authorization": f"Bearer {TOKEN}"}
MODES: dict[str, dict[str, str]] = {
    # the baseline, same run: the workers as threads of the server (before issue #16)
    "threads": {"CAESAR_WORKERS_PROCESS": "false"},
    # shipped: their own process, niced (workers_nice, default 10)
    "process": {},
    "process-nice19": {"CAESAR_WORKERS_NICE": "19"},
    "process-nice0": {"CAESAR_WORKERS_NICE": "0"},
}
TOPICS = ("sleep", "recipes", "travel", "running", "budget", "garden", "music", "work")


def _env(home: Path, provider_url: str) -> dict[str, str]:
    """load.py's environment, with the shipped memory routes (offline: TextRank summaries,
    pattern facts), no semantic index and no retention (the imported history spans months)."""
    env = load_env(home, provider_url, None)
    gateway = json.loads(env["CAESAR_GATEWAY"])
    gateway["routes"] = {"chat": "local:instant"}
    env.update(
        CAESAR_GATEWAY=json.dumps(gateway),
        CAESAR_SEMANTIC=json.dumps({"interval_seconds": 0.5}),
        CAESAR_MEMORY=json.dumps(
            {
                "episodes_summarise": {"interval_seconds": 0.5},
                "facts_extract": {"interval_seconds": 0.5},
            }
        ),
        CAESAR_RETENTION=json.dumps({"enabled": False}),
    )
    return env


def _backlog(database_url: str, upto: int | None = None) -> int:
    """Of the conversations up to id `upto` (the imported ones): those not yet summarised,
    plus those summarised but still without windows."""
    from sqlalchemy import func, select

    from caesar.db.engine import Database
    from caesar.db.models import Conversation, EpisodeSummary

    db = Database(database_url)
    try:
        with db.read() as session:
            c, e = Conversation, EpisodeSummary
            if upto is None:
                upto = int(session.scalar(select(func.max(c.id))) or 0)
            behind = (
                select(func.count())
                .select_from(c)
                .where(c.tip_audit_id > c.summarised_audit_id, c.id <= upto)
            )
            unwindowed = (
                select(func.count())
                .select_from(e)
                .where(e.passage_vectors.is_(None), e.summary != "", e.conversation_id <= upto)
            )
            return int(session.scalar(behind) or 0) + int(session.scalar(unwindowed) or 0)
    finally:
        db.dispose()


def _done(left: int, chats: int) -> int:
    """Conversations finished, from the items left (each has two: summary, windows)."""
    return max(0, chats - (left + 1) // 2)


def _inside(database_url: str) -> dict[str, Any]:
    """p50 of the memory work and of the provider call the turns' rows recorded, idle and busy
    (the bench's busy turns say so)."""
    from sqlalchemy import select

    from caesar import audit
    from caesar.db.engine import Database
    from caesar.db.models import AuditLog

    db = Database(database_url)
    try:
        with db.read() as session:
            rows = session.scalars(
                select(AuditLog.payload).where(AuditLog.event_type == audit.CHAT_COMPLETED)
            ).all()
    finally:
        db.dispose()
    out: dict[str, Any] = {}
    for phase, busy in (("idle", False), ("busy", True)):
        mine = [
            r for r in rows
            if r.get("temporary") and r["messages"][-1]["content"].endswith("busy)") == busy
        ]  # fmt: skip
        memory = [float(r["memory"]["memory_ms"]) for r in mine]
        provider = [float(r["latency_ms"]) for r in mine]
        if memory:
            out[phase] = {
                "memory_ms_p50": round(benchlib.pct(memory, 50), 2),
                "provider_ms_p50": round(benchlib.pct(provider, 50), 2),
            }
    return out


def _imported(database_url: str) -> int:
    from sqlalchemy import func, select

    from caesar.db.engine import Database
    from caesar.db.models import Conversation

    db = Database(database_url)
    try:
        with db.read() as session:
            return int(session.scalar(select(func.max(Conversation.id))) or 0)
    finally:
        db.dispose()


def _turn(http: httpx.Client, i: int, phase: str = "idle") -> float:
    message = QUESTIONS[i % len(QUESTIONS)].format(TOPICS[(i // len(QUESTIONS)) % len(TOPICS)])
    started = time.perf_counter()
    # temporary: answered with memory, never learned from, so the bench's own turns add no
    # work to the backlog it measures
    response = http.post(
        "/v1/chat", json={"message": f"{message} ({i}, {phase})", "temporary": True}
    )
    elapsed = benchlib.ms(time.perf_counter() - started)
    response.raise_for_status()
    return elapsed


def _serve(env: dict[str, str], log: Path, workers: bool) -> tuple[subprocess.Popen[bytes], str]:
    port = benchlib.free_port()
    flag = [] if workers else ["--no-workers"]
    proc = _start_server(env, port, log, extra=flag)
    return proc, f"http://127.0.0.1:{port}"


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


def _busy(
    env: dict[str, str], home: Path, database_url: str, chats: int, max_seconds: float
) -> dict[str, Any]:
    """Turns back to back while the workers catch up on the imported backlog."""
    upto = _imported(database_url)
    left = backlog_at_start = _backlog(database_url, upto)
    server, url = _serve(env, home / "busy.log", workers=True)
    busy: list[float] = []
    started = last_check = time.monotonic()
    try:
        with httpx.Client(base_url=url, headers=HEADERS, timeout=60) as http:
            i = 0
            while left > 0 and time.monotonic() - started < max_seconds:
                busy.append(_turn(http, i, "busy"))
                i += 1
                if time.monotonic() - last_check > 2.0:
                    left, last_check = _backlog(database_url, upto), time.monotonic()
        elapsed = time.monotonic() - started
    finally:
        _stop(server)
    done = chats if not left else _done(left, chats)
    return {
        "turns_ms": busy,
        "backlog_items_at_start": backlog_at_start,
        "backlog_items_left": left,
        "seconds": round(elapsed, 1),
        "conversations_done": done,
        "conversations_per_minute": round(done / (elapsed / 60), 1),
        "inside_ms": _inside(database_url).get("busy"),
    }


def _home(root: Path, name: str, provider_url: str, history: Path, **env_extra: str) -> Any:
    home = root / name
    home.mkdir()
    env = {**_env(home, provider_url), **env_extra}
    subprocess.run([CAESAR, "db", "upgrade"], env=env, check=True, capture_output=True)
    subprocess.run([CAESAR, "import", str(history)], env=env, check=True, capture_output=True)
    return home, env, f"sqlite:///{home / 'caesar.db'}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chats", type=int, default=300)
    ap.add_argument("--idle-turns", type=int, default=100)
    ap.add_argument("--max-seconds", type=float, default=900.0)
    ap.add_argument("--modes", nargs="+", default=["threads", "process"], choices=list(MODES))
    args = ap.parse_args()
    modes = {m: MODES[m] for m in args.modes}
    runs: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="caesar-busy-") as tmp:
        root = Path(tmp)
        history = root / "history.jsonl"
        history.write_text(
            "\n".join(json.dumps(c, ensure_ascii=False) for c in conversations(args.chats))
        )
        provider, provider_url = _start_provider()
        try:
            home, env, database_url = _home(root, "idle", provider_url, history)
            server, url = _serve(env, home / "idle.log", workers=False)
            try:
                with httpx.Client(base_url=url, headers=HEADERS, timeout=60) as http:
                    for i in range(5):  # untimed warm-up
                        _turn(http, i)
                    idle = [_turn(http, i) for i in range(args.idle_turns)]
            finally:
                _stop(server)
            idle_inside = _inside(database_url).get("idle")
            for mode, extra in modes.items():
                home, env, database_url = _home(root, mode, provider_url, history, **extra)
                runs[mode] = _busy(env, home, database_url, args.chats, args.max_seconds)
                if runs[mode]["backlog_items_left"]:
                    tail = (home / "busy.log").read_text(errors="replace")[-2000:]
                    print(f"{mode}: backlog not finished; server log tail:\n{tail}")
        finally:
            provider.terminate()
            provider.wait(timeout=15)

    idle_s = benchlib.summary(idle)
    result: dict[str, Any] = {
        "chats": args.chats,
        "idle_ms": idle_s,
        "idle_inside_ms": idle_inside,
        "modes": {},
        "host_speed_ms": benchlib.host_speed(),
        "load_avg": benchlib.load_avg(),
    }
    print(f"idle: p50 {idle_s['p50']:.1f} ms p90 {idle_s['p90']:.1f} ms ({idle_s['n']} turns)")
    for mode, run in runs.items():
        busy_s = benchlib.summary(run.pop("turns_ms"))
        run.update(
            busy_ms=busy_s,
            busy_p50_over_idle_p50=round(busy_s["p50"] / idle_s["p50"], 2),
            busy_p90_over_idle_p50=round(busy_s["p90"] / idle_s["p50"], 2),
        )
        result["modes"][mode] = run
        print(
            f"{mode}: busy p50 {busy_s['p50']:.1f} ms p90 {busy_s['p90']:.1f} ms "
            f"({busy_s['n']} turns) → ×{run['busy_p50_over_idle_p50']} p50, "
            f"×{run['busy_p90_over_idle_p50']} p90/idle p50; backlog "
            f"{run['conversations_done']}/{args.chats} conversations in {run['seconds']:.0f} s = "
            f"{run['conversations_per_minute']}/min; inside the server {run['inside_ms']}"
        )
    benchlib.write_result("perf_busy", result)


if __name__ == "__main__":
    main()
