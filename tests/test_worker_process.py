"""`caesar serve`'s memory workers in a niced child process (issue #16): the real `caesar
worker` command, supervised — it learns, runs at the asked priority, comes back if it dies and
goes when stopped."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import crashkit
import numpy as np
from conftest import OWNER, PROVIDER_KEY
from memory_helpers import add_chat, add_episode, days_ago
from sqlalchemy import select, update

from caesar.config import Settings
from caesar.db.models import Conversation, EpisodeSummary
from caesar.memory.engine.vectors import from_row
from caesar.memory.scope import Scope
from caesar.worker_process import WorkerProcess
from caesar.workers import run_until_caught_up


def _wait(check: Any, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_the_worker_process_learns_at_low_priority_and_is_restarted(make_services, tmp_path: Path):
    settings = crashkit.settings_dict(
        tmp_path / "home",
        f"sqlite:///{tmp_path / 'caesar.db'}",
        "http://127.0.0.1:9/v1",
        PROVIDER_KEY,
        memory={
            "episodes_summarise": {"enabled": True, "interval_seconds": 0.1, "quiet_seconds": 0},
            "facts_extract": {"enabled": False},
        },
    )
    settings["gateway"]["routes"]["memory_summarise"] = "offline:textrank"
    services = make_services(settings=Settings(**settings))
    process = WorkerProcess(15, env=crashkit.settings_env(settings)).start()
    try:
        first = process.pid
        assert first is not None
        _wait(lambda: os.getpriority(os.PRIO_PROCESS, first) == 15)

        def summarised() -> bool:
            with services.db.read() as session:
                found = session.scalars(select(Conversation)).all()
            return bool(found) and all(c.summarised_audit_id == c.tip_audit_id for c in found)

        add_chat(services, "I keep waking up at 3am, is the room too warm?", "Try 65°F.")
        _wait(summarised)

        os.kill(first, 9)  # it dies: another takes its place
        _wait(lambda: process.restarts == 1 and process.pid != first)
        second = process.pid
        add_chat(services, "My kayak is red and I paddle at dawn.", "Wear a bright vest.")
        with services.db.read() as session:
            assert len(session.scalars(select(Conversation)).all()) == 2
        _wait(summarised)  # the new process learns too
    finally:
        process.stop()
    assert second is not None
    _wait(lambda: not Path(f"/proc/{second}").exists() or _zombie(second), timeout=15)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except FileNotFoundError:
        return True


def test_old_episodes_get_their_float32_copy_once_in_the_background(make_services):
    """Rows of the ADR's schema (the JSON embedding only) are upgraded by `memory.upgrade`:
    the copy is the JSON's vector, written once; recall finds them before and after."""
    services = make_services()
    ids = [
        add_episode(services, f"We discussed the operator's {topic}.", time_ago)[0]
        for topic, time_ago in (("kayak", days_ago(2)), ("violin", days_ago(3)))
    ]
    with services.db.write() as session:
        session.execute(update(EpisodeSummary).values(embedding_f32=None))
    worker = services.workers["memory.upgrade"]
    assert worker.enabled and worker.backlog() == 2
    assert run_until_caught_up(worker) == 2
    assert worker.backlog() == 0 and run_until_caught_up(worker) == 0
    with services.db.read() as session:
        rows = session.scalars(select(EpisodeSummary).where(EpisodeSummary.id.in_(ids))).all()
    for row in rows:
        assert row.embedding_f32 is not None
        copy = from_row(row.embedding_f32, None)
        assert np.array_equal(copy, np.asarray(row.embedding, np.float32))
    [hit, *_] = services.episodes.preview("my kayak", similarity_threshold=None, scope=Scope(OWNER))
    assert "kayak" in hit.summary


def test_a_worker_process_started_from_a_passing_thread_outlives_it():
    """serve starts the worker process from its warm-up thread, which then ends; the child's
    exit-with-the-server signal follows the thread that spawned it, so that thread must not be
    the warm-up thread (the first child was killed at once, and replaced, before the fix)."""
    import sys
    import threading

    process = WorkerProcess(5, command=[sys.executable, "-c", "import time; time.sleep(60)"])
    starter = threading.Thread(target=process.start)
    starter.start()
    starter.join()
    try:
        first = process.pid
        assert first is not None
        time.sleep(1.5)  # the signal, if it came, came at once
        assert process.pid == first and process.restarts == 0
        assert not _zombie(first)
    finally:
        process.stop()
