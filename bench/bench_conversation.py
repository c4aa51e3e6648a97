"""What a live conversation of 20 turns costs the memory workers (issue #13).

A client that resends the history every turn (the OpenAI protocol, `llm -c`, `caesar chat`)
holds a 20-turn conversation with caesar: the operator's turns and caesar's replies are real
LongMemEval sessions', replayed by an in-process provider that keeps count of every call and of
the characters each task was sent. Then the workers learn from it, two ways, in one run:

- **per turn** (the baseline: what caesar did before conversations were the unit — each turn's
  row summarised as it arrived): `memory.summarise` and `memory.passages` run after every turn,
  with `quiet_seconds = 0`;
- **shipped** (`quiet_seconds = 300`): the summariser finds nothing while the conversation is
  live, and takes it once when it has gone quiet (simulated by `catch_up_step`, as `caesar
  worker --once` does).

Reported for each: summarise calls, characters sent to the summariser, windows embedded, worker
seconds (summarise + passages, the provider's own time excluded), and the episodes left.
`memory.extract` is reported too: it still reads every turn's row (per turn in both).

    .venv/bin/python bench/bench_conversation.py [--turns 20]
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from typing import Any

import benchlib
from bench_turn import InstantProvider, install
from sqlalchemy import func, select

from caesar.brain import Brain
from caesar.db import migrate
from caesar.db.models import EpisodeSummary
from caesar.gateway.base import Message
from caesar.memory.search import passages
from caesar.services import Services
from caesar.workers import run_until_caught_up

DATA = benchlib.ROOT.parent / "shared" / "data" / "longmemeval_s"
WORK = benchlib.OUT / "conversation"


class ReplayProvider(InstantProvider):
    """Chat: the session's next assistant reply. Summarise: a sentence from the transcript's
    first words. Extract: no facts. Counts calls and characters sent per task."""

    def __init__(self, replies: list[str]) -> None:
        super().__init__("local")
        self.replies = replies
        self.turn = 0
        self.calls: Counter[str] = Counter()
        self.chars: Counter[str] = Counter()

    def text(self, messages: list[Message], task: str) -> str:
        self.calls[task] += 1
        self.chars[task] += sum(len(m["content"]) for m in messages)
        if task == "chat":
            self.turn += 1
            return self.replies[(self.turn - 1) % len(self.replies)]
        if task == "memory_summarise":
            return "We discussed " + " ".join(messages[-1]["content"].split()[1:25]) + "."
        return json.dumps({"facts": []})


def session(turns: int) -> tuple[list[str], list[str]]:
    """`turns` exchanges of LongMemEval, from its longest sessions in turn (its longest has 19,
    so a 20-turn conversation moves on to a second topic): (said, replies)."""
    sessions = []
    for path in sorted(DATA.glob("*.json")):
        sessions += json.loads(path.read_text())["haystack_sessions"]
        if len(sessions) > 2000:
            break
    sessions.sort(key=lambda s: -sum(1 for t in s if t["role"] == "user"))
    said: list[str] = []
    replies: list[str] = []
    for turns_ in sessions:
        said += [t["content"] for t in turns_ if t["role"] == "user"]
        replies += [t["content"] for t in turns_ if t["role"] == "assistant"]
        if min(len(said), len(replies)) >= turns:
            return said[:turns], replies[:turns]
    raise SystemExit(f"not {turns} exchanges under {DATA}")


def run(mode: str, said: list[str], replies: list[str]) -> dict[str, Any]:
    path = WORK / f"conversation-{mode}.db"
    WORK.mkdir(parents=True, exist_ok=True)
    for leftover in WORK.glob(path.name + "*"):
        leftover.unlink()
    quiet = 0 if mode == "per_turn" else 300
    settings = benchlib.bench_settings(
        WORK / "home",
        f"sqlite:///{path}",
        memory={
            "episodes_summarise": {"enabled": True, "quiet_seconds": quiet},
            "facts_extract": {"enabled": True},
        },
    )
    services = Services.build(settings)
    migrate.upgrade(services.db)
    provider = ReplayProvider(replies)
    install(services, provider)  # type: ignore[arg-type]
    services.embedder.get().embed_batch(["warm up"])  # model load is start-up, not the turns
    brain = Brain(services)
    summarise, windows = services.workers["memory.summarise"], services.workers["memory.passages"]
    worker_s = 0.0
    history: list[Message] = []

    def learn(catch_up: bool) -> None:
        nonlocal worker_s
        before, started = provider.seconds, time.perf_counter()
        if catch_up:
            run_until_caught_up(summarise)
        else:
            while summarise.step():
                pass
        run_until_caught_up(windows)
        worker_s += time.perf_counter() - started - (provider.seconds - before)

    live_steps = 0
    for message in said:
        result = brain.turn(message, history, person=benchlib.OWNER)
        history += [
            {"role": "user", "content": message},
            {"role": "assistant", "content": result.reply},
        ]
        if mode == "per_turn":
            learn(catch_up=True)
        else:
            live_steps += summarise.step()  # what the running worker finds meanwhile: nothing
    if mode != "per_turn":
        learn(catch_up=True)
    extract_started = time.perf_counter()
    run_until_caught_up(services.workers["memory.extract"])
    extract_s = time.perf_counter() - extract_started
    with services.db.read() as session_:
        episodes = int(session_.scalar(select(func.count()).select_from(EpisodeSummary)) or 0)
        blobs = session_.scalars(select(EpisodeSummary.passage_vectors)).all()
    services.close()
    return {
        "mode": mode,
        "turns": len(said),
        "summarise_calls": provider.calls["memory_summarise"],
        "summarise_chars_sent": provider.chars["memory_summarise"],
        "summarised_while_live": live_steps,
        "extract_calls": provider.calls["memory_extract"],
        "extract_chars_sent": provider.chars["memory_extract"],
        "extract_s": round(extract_s, 2),
        "worker_s": round(worker_s, 2),
        "episodes_left": episodes,
        "windows_kept": sum(len(b or b"") // passages.window_bytes(384) for b in blobs),
        "load_avg": benchlib.load_avg(),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=20)
    args = ap.parse_args()
    said, replies = session(args.turns)
    rows = [run(mode, said, replies) for mode in ("per_turn", "shipped")]
    base, shipped = rows
    ratios = {
        "summarise_calls": shipped["summarise_calls"] / max(base["summarise_calls"], 1),
        "summarise_chars_sent": shipped["summarise_chars_sent"]
        / max(base["summarise_chars_sent"], 1),
        "worker_s": shipped["worker_s"] / max(base["worker_s"], 1e-9),
    }
    benchlib.write_result(
        "perf_conversation",
        {"runs": rows, "ratios": {k: round(v, 3) for k, v in ratios.items()}},
    )
    for row in rows:
        print(
            f"{row['mode']}: {row['turns']} turns → {row['summarise_calls']} summaries "
            f"({row['summarise_chars_sent']:,} chars sent), {row['worker_s']:.2f} s of summarise + "
            f"windows work, {row['episodes_left']} episode(s) left with {row['windows_kept']} windows; "
            f"extract: {row['extract_calls']} calls ({row['extract_chars_sent']:,} chars)"
        )
    print(
        f"shipped / per turn: summaries ×{ratios['summarise_calls']:.2f}, chars sent to the "
        f"summariser ×{ratios['summarise_chars_sent']:.2f}, worker time ×{ratios['worker_s']:.2f}"
    )


if __name__ == "__main__":
    main()
