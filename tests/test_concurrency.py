"""Concurrency (issue 7 §2): the HTTP server (with its own in-process workers) and two more
worker processes on ONE database, while chat clients talk to the server and a backlog of chats
lands in one big transaction. Outcomes stay exactly-once, and no "database is locked" — or any
other error — reaches a chat client or crashes a worker. On SQLite (WAL, BEGIN IMMEDIATE, busy
timeout) and on PostgreSQL.
"""

from __future__ import annotations

import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Self

import crashkit
import exactly_once
import httpx
import pytest
import uvicorn
from conftest import OWNER, PROVIDER_KEY, TEST_TOKEN
from sqlalchemy import func, select

from caesar import audit
from caesar.api import create_app
from caesar.config import Settings
from caesar.db.models import AuditLog
from caesar.memory.scope import Scope

BACKLOG = 200
CLIENTS = 6
CHATS_PER_CLIENT = 10
MEMORY = {
    "episodes_summarise": {
        "enabled": True,
        "interval_seconds": 0.05,
        "batch_size": 8,
        "quiet_seconds": 0,
    },
    "facts_extract": {"enabled": True, "interval_seconds": 0.05, "batch_size": 8},
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Server:
    """uvicorn on loopback in a thread: the real HTTP stack, lifespan (workers) included."""

    def __init__(self, app) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


def _chat(url: str, n: int) -> tuple[int, str]:
    with httpx.Client(
        base_url=url, headers={"Authorization": f"Bearer {TEST_TOKEN}"}, timeout=60
    ) as c:
        response = c.post(
            "/v1/chat", json={"message": f"chat {n}: tell me something about item {n}"}
        )
        return response.status_code, response.text


def _wait_caught_up(db, timeout: float) -> tuple[dict, dict]:
    deadline = time.monotonic() + timeout
    while True:
        _, summarised = exactly_once.check_summarise(db)
        _, extracted = exactly_once.check_extract(db)
        if not summarised.get("pending") and not extracted.get("pending"):
            return summarised, extracted
        assert time.monotonic() < deadline, f"workers did not catch up: {summarised} {extracted}"
        time.sleep(0.2)


@pytest.mark.xdist_group("reliability-heavy")
@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_server_and_two_worker_processes_exactly_once(
    engine, tmp_path, llm, make_services, request
):
    url = (
        f"sqlite:///{tmp_path / 'caesar.db'}"
        if engine == "sqlite"
        else request.getfixturevalue("pg_url")
    )
    settings = crashkit.settings_dict(
        tmp_path / "home", url, llm.base_url, PROVIDER_KEY, memory=MEMORY, api_token=TEST_TOKEN
    )
    services = make_services(settings=Settings(**settings))
    llm.reply = exactly_once.MemoryReplies()
    driver = crashkit.start_driver(
        "workers",
        {
            "settings": settings,
            "workers": ["memory.summarise", "memory.extract"],
            "count": 2,
            "outdir": str(tmp_path),
        },
        tmp_path,
    )
    try:
        assert driver.stdout.readline().strip() == "ready", driver.stderr.read()
        with _Server(create_app(services.settings, services, run_workers=True)) as server:
            with ThreadPoolExecutor(CLIENTS) as pool:
                live = [
                    pool.submit(_chat, server.url, 100_000 + c * 1000 + i)
                    for c in range(CLIENTS)
                    for i in range(CHATS_PER_CLIENT)
                ]
                # The backlog lands while the clients chat: one long write transaction.
                time.sleep(0.3)
                exactly_once.backfill(services, BACKLOG)
                answers = [f.result() for f in live]
            summarised, extracted = _wait_caught_up(services.db, timeout=120)
            healthz = httpx.get(f"{server.url}/healthz").status_code
    finally:
        driver.terminate()
    workers = crashkit.driver_result(driver, timeout=60)

    failed = [(code, text[:200]) for code, text in answers if code != 200]
    assert failed == []
    assert not any("locked" in text for _, text in answers)
    assert healthz == 200
    assert workers["exit_codes"] == [0, 0]

    chats = BACKLOG + CLIENTS * CHATS_PER_CLIENT
    problems_s, summarised = exactly_once.check_summarise(services.db)
    problems_e, extracted = exactly_once.check_extract(services.db)
    assert problems_s == [] and problems_e == []
    assert summarised["summarised"] + summarised["skipped"] + summarised["failed"] == chats
    assert extracted["learned"] + extracted["nothing"] + extracted["failed"] == chats
    # The provider never failed here, so every outcome is a success.
    assert summarised["failed"] == 0 and extracted["failed"] == 0
    with services.db.read() as session:
        crashed = session.scalar(
            select(func.count())
            .select_from(AuditLog)
            .where(AuditLog.event_type == audit.WORKER_CRASHED)
        )
    assert crashed == 0
    lost = sum(w["lost_races"] for w in workers["workers"])
    print(
        f"\n{engine}: {chats} chats ({len(answers)} live, all 200), exactly once: {summarised} "
        f"{extracted}; batches lost to another worker (wasted, not duplicated): {lost}"
    )


def test_postgresql_cursor_never_skips_a_chat_committed_late(pg_url, tmp_path, llm, make_services):
    """The race the test above can hit by chance, forced. PostgreSQL draws ids at INSERT and
    commits in any order: if a chat inserted second (larger id) could commit while the first is
    still open, a worker reading in between would move its cursor past the first chat for good.
    Here the first chat's transaction stays open while a second one appends and a worker steps;
    whatever makes that safe (audit.py serialises appends), the first chat must be learned from."""
    from sqlalchemy import text

    from caesar.workers import run_until_caught_up

    settings = crashkit.settings_dict(tmp_path / "home", pg_url, llm.base_url, PROVIDER_KEY)
    services = make_services(settings=Settings(**settings))
    llm.reply = exactly_once.MemoryReplies()
    worker = services.workers["memory.extract"]

    def blocked() -> int:
        with services.db.read() as session:
            return int(session.scalar(text("SELECT count(*) FROM pg_locks WHERE NOT granted")) or 0)

    def settle(thread: threading.Thread, waiting: int) -> None:
        """Until `thread` has finished, or `waiting` sessions wait on a lock."""
        deadline = time.monotonic() + 30
        while thread.is_alive() and blocked() < waiting:
            assert time.monotonic() < deadline
            time.sleep(0.01)

    with services.db.write() as slow:
        services.audit.append(
            Scope(OWNER, slow), audit.CHAT_COMPLETED, exactly_once.chat_payload(1)
        )
        second = threading.Thread(target=exactly_once.backfill, args=(services, 1, 2))
        second.start()
        settle(second, 1)
        stepping = threading.Thread(target=worker.step)
        stepping.start()
        settle(stepping, 1 + second.is_alive())
    second.join(timeout=30)
    stepping.join(timeout=30)
    run_until_caught_up(worker)
    problems, tally = exactly_once.check_extract(services.db)
    assert problems == []
    assert tally["learned"] == 2 and tally["pending"] == 0


@pytest.mark.xdist_group("reliability-heavy")
def test_a_burst_of_chats_that_recall_episodes_never_locks_up(make_services, llm, tmp_path):
    """More concurrent chats than pooled connections, each recalling episodes (so each turn
    updates the in-process index inside its write transaction while others refresh it). A lock
    taken in the wrong order here stalls every writer until the busy timeout: 'database is
    locked' after 30 s. Found by bench/load.py."""
    from memory_helpers import add_episode, days_ago

    services = make_services(
        api_token=TEST_TOKEN,
        memory={"episodes_recall": {"similarity_threshold": 0.0, "top_k": 3}},
        # The fake provider's listen backlog is small: let the SDK retry a refused connection,
        # as it does by default in production.
        gateway={"providers": {"local": {"max_retries": 3}}},
    )
    for i in range(5):
        add_episode(
            services, f"We talked about packing for a trip to city number {i}.", days_ago(i + 1)
        )
    llm.reply = exactly_once.MemoryReplies()
    app = create_app(services.settings, services, run_workers=False)
    with _Server(app) as server, ThreadPoolExecutor(48) as pool:
        answers = list(pool.map(lambda n: _chat(server.url, n), range(144)))
    failed = [(code, text[:200]) for code, text in answers if code != 200]
    assert failed == []
    with services.db.read() as session:
        recalled = session.scalar(
            select(func.count())
            .select_from(AuditLog)
            .where(AuditLog.event_type == audit.EPISODE_RECALLED)
        )
    assert recalled == 144 * 3  # top_k of each turn: the path under test really ran


def test_recording_recalls_locks_episodes_in_id_order(pg_url, make_services):
    """PostgreSQL: a chat turn bumps the recalled episodes' counters while the memory.passages
    worker updates episodes one by one in id order in one transaction. The turn must take its
    row locks in id order too: an UPDATE … IN locks in scan (physical) order, which deadlocked
    with the worker and aborted the turn (found by the test above)."""
    from memory_helpers import add_episode
    from sqlalchemy import text, update

    from caesar.clock import utcnow
    from caesar.db.models import EpisodeSummary
    from caesar.memory.recall.hits import RecalledEpisode

    svc = make_services(database_url=pg_url)
    now = utcnow()
    first, _ = add_episode(svc, "The operator plans a kayak trip.", now)
    second, _ = add_episode(svc, "The operator repaints the kitchen.", now)
    with svc.db.write() as session:  # the first row's new version now lies after the second's
        session.execute(
            update(EpisodeSummary).where(EpisodeSummary.id == first).values(recall_count=0)
        )
    recalled = [
        RecalledEpisode(i, i, "x", now, 0.5, 0.0, 1.0, 0, 1.0, 0.5) for i in (second, first)
    ]
    worker_has_first = threading.Event()
    errors: list[BaseException] = []

    def worker() -> None:  # as PassagesWorker.step: rows in id order, one transaction
        try:
            with svc.db.write() as session:
                session.execute(
                    update(EpisodeSummary)
                    .where(EpisodeSummary.id == first)
                    .values(passage_vectors=b"")
                )
                worker_has_first.set()
                time.sleep(0.5)  # the turn's UPDATE runs meanwhile and waits
                session.execute(
                    update(EpisodeSummary)
                    .where(EpisodeSummary.id == second)
                    .values(passage_vectors=b"")
                )
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    thread = threading.Thread(target=worker)
    thread.start()
    assert worker_has_first.wait(10)
    try:
        with svc.db.write() as session:
            # a larger table's plan, on two rows: a scan in physical order, not by the index
            for knob in ("enable_indexscan", "enable_bitmapscan", "enable_indexonlyscan"):
                session.execute(text(f"SET LOCAL {knob} = off"))
            svc.episodes.record_recalls(Scope(OWNER, session), recalled, now=now, context={})
    except BaseException as exc:  # noqa: BLE001 - reported below
        errors.append(exc)
    thread.join(10)
    assert errors == []
    with svc.db.read() as session:
        counts = dict(session.execute(select(EpisodeSummary.id, EpisodeSummary.recall_count)).all())
    assert counts == {first: 1, second: 1}
