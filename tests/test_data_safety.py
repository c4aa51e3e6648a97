"""Data safety (issue 7 §6): foreign keys on every SQLite connection; the retention sweep racing
the memory workers leaves zero orphans; `caesar db backup` makes a consistent, openable copy
while caesar writes; `caesar export` round-trips every row, consistently, while caesar writes.
(The sweep's own cascade rules are tested in test_retention.py.)
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path
from typing import Self

import crashkit
import exactly_once
import numpy as np
import pytest
from conftest import OWNER, PROVIDER_KEY
from sqlalchemy import func, select, text
from typer.testing import CliRunner

from caesar import audit
from caesar.cli.main import app
from caesar.clock import utcnow
from caesar.config import Settings
from caesar.db.backup import libpq_url
from caesar.db.models import AuditLog, EpisodeSummary, Fact, Memory
from caesar.export import Export, write_jsonl
from caesar.memory.dated.offline import CAESAR, PERSON, DatedMemory
from caesar.memory.episodes.rows import episode_row
from caesar.memory.scope import Scope
from caesar.workers import WorkerRunner

ORPHANS = {
    "episode_summaries": "SELECT count(*) FROM episode_summaries e LEFT JOIN audit_log a "
    "ON a.id = e.audit_log_id WHERE a.id IS NULL",
    "semantic_chunks": "SELECT count(*) FROM semantic_chunks c LEFT JOIN audit_log a "
    "ON a.id = c.audit_log_id WHERE a.id IS NULL",
    "facts": "SELECT count(*) FROM facts f LEFT JOIN audit_log a ON a.id = f.source_audit_id "
    "WHERE f.source_audit_id IS NOT NULL AND a.id IS NULL",
}


def _count(services, model) -> int:
    with services.db.read() as session:
        return int(session.scalar(select(func.count()).select_from(model)) or 0)


# -- foreign keys ------------------------------------------------------------------------------
def test_every_sqlite_connection_enforces_foreign_keys(services):
    """Not just the first connection: every pooled one, from any thread, read or write."""
    barrier = threading.Barrier(12)

    def pragmas(write: bool) -> tuple[int, str, int]:
        with services.db.write() if write else services.db.read() as session:
            barrier.wait(timeout=30)  # all twelve sessions open at once: twelve connections
            return (
                session.scalar(text("PRAGMA foreign_keys")),
                session.scalar(text("PRAGMA journal_mode")),
                session.scalar(text("PRAGMA busy_timeout")),
            )

    with ThreadPoolExecutor(12) as pool:
        # One writer at a time (BEGIN IMMEDIATE), so only one write session joins the barrier.
        seen = list(pool.map(pragmas, [True] + [False] * 11))
    assert seen == [(1, "wal", 30_000)] * 12
    assert services.db.engine.pool.checkedout() == 0
    raw = services.db.engine.raw_connection()
    try:
        assert raw.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    finally:
        raw.close()


# -- retention racing the workers ----------------------------------------------------------------
@pytest.mark.xdist_group("reliability-heavy")
def test_sweep_racing_the_memory_workers_leaves_zero_orphans(make_services, llm, tmp_path):
    """A backlog of year-old chats (an import) is summarised, extracted and indexed while the
    sweep deletes it and new chats arrive: whatever the interleaving, nothing derived outlives
    its chat, fresh chats keep exactly one outcome, and no worker crashes on the race."""
    settings = crashkit.settings_dict(
        tmp_path / "home",
        f"sqlite:///{tmp_path / 'caesar.db'}",
        llm.base_url,
        PROVIDER_KEY,
        semantic={"index_enabled": True, "interval_seconds": 0.02, "batch_size": 8},
        memory={
            "episodes_summarise": {
                "enabled": True,
                "interval_seconds": 0.02,
                "batch_size": 8,
                "quiet_seconds": 0,
            },
            "facts_extract": {"enabled": True, "interval_seconds": 0.02, "batch_size": 8},
        },
        retention={"ttl_days": 90, "interval_seconds": 0.02},
    )
    services = make_services(settings=Settings(**settings))
    llm.reply = exactly_once.MemoryReplies()
    old = utcnow() - timedelta(days=365)
    with services.db.write() as session:
        for n in range(300):
            services.audit.append(
                Scope(OWNER, session),
                audit.CHAT_COMPLETED,
                exactly_once.chat_payload(n),
                created_at=old,
            )
    services.workers["retention.sweep"].batch_size = 25  # many small sweeps: many interleavings
    runner = WorkerRunner(services.enabled_workers())
    assert {w.name for w in runner.workers} >= {
        "memory.summarise",
        "memory.extract",
        "semantic.index",
        "retention.sweep",
    }
    runner.start()
    try:
        fresh = [exactly_once.backfill(services, 1, start=1000 + i)[0] for i in range(40)]
        deadline = utcnow() + timedelta(seconds=90)
        while True:
            _, summarised = exactly_once.check_summarise(services.db)
            _, extracted = exactly_once.check_extract(services.db)
            with services.db.read() as session:
                left = session.scalar(
                    select(func.count()).select_from(AuditLog).where(AuditLog.created_at == old)
                )
            if not summarised["pending"] and not extracted["pending"] and left <= 3:
                break
            assert utcnow() < deadline, (summarised, extracted, left)
            threading.Event().wait(0.1)
    finally:
        runner.stop()

    with services.db.read() as session:
        orphans = {table: session.scalar(text(sql)) for table, sql in ORPHANS.items()}
        crashed = [
            r.payload["error"]
            for r in audit.list_events(Scope(OWNER, session), event_type=audit.WORKER_CRASHED)
        ]
        surviving = set(
            session.scalars(select(AuditLog.id).where(AuditLog.event_type == audit.CHAT_COMPLETED))
        )
    raw = sqlite3.connect(services.db.engine.url.database)
    try:
        fk_violations = raw.execute("PRAGMA foreign_key_check").fetchall()
    finally:
        raw.close()
    assert orphans == dict.fromkeys(ORPHANS, 0)
    assert fk_violations == []
    assert crashed == []
    assert set(fresh) <= surviving
    problems_s, _ = exactly_once.check_summarise(services.db)
    problems_e, _ = exactly_once.check_extract(services.db)
    assert problems_s == [] and problems_e == []


# -- backup --------------------------------------------------------------------------------------
class _Writer:
    """Keeps writing a chat and its episode in one transaction, until stopped."""

    def __init__(self, services) -> None:
        self.services = services
        self.pairs = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        vector = self.services.embedder.get().embed_batch(["a pair"])[0]
        while not self._stop.is_set():
            with self.services.db.write() as session:
                chat = self.services.audit.append(
                    Scope(OWNER, session),
                    audit.CHAT_COMPLETED,
                    exactly_once.chat_payload(self.pairs),
                )
                session.add(
                    episode_row(
                        audit_log_id=chat.id,
                        summary=f"pair {self.pairs}",
                        vector=vector,
                        model="all-MiniLM-L6-v2",
                        created_at=utcnow(),
                        scope=Scope(OWNER),
                    )
                )
            self.pairs += 1

    def __enter__(self) -> Self:
        self._thread.start()
        while self.pairs < 20:  # really writing before the copy starts
            threading.Event().wait(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def _cli(home: Path, *args: str, database_url: str | None = None):
    env = {"CAESAR_HOME": str(home)}
    if database_url:
        env["CAESAR_DATABASE_URL"] = database_url
    return CliRunner().invoke(app, list(args), env=env)


def test_backup_is_a_consistent_openable_copy_while_writes_happen(services, tmp_path):
    home = Path(services.settings.home)
    target = tmp_path / "backup.db"
    with _Writer(services) as writer:
        before = writer.pairs
        result = _cli(home, "db", "backup", str(target))
        after = writer.pairs
    assert result.exit_code == 0, result.output
    assert "integrity check ok" in result.output
    copy = sqlite3.connect(target)
    try:
        assert copy.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert copy.execute("PRAGMA foreign_key_check").fetchall() == []
        assert copy.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # one file
        chats = copy.execute(
            "SELECT count(*) FROM audit_log WHERE event_type = 'chat.completed'"
        ).fetchone()[0]
        episodes = copy.execute("SELECT count(*) FROM episode_summaries").fetchone()[0]
        revision = copy.execute("SELECT version_num FROM alembic_version").fetchone()[0]
    finally:
        copy.close()
    assert chats == episodes  # a snapshot: never half a transaction
    assert before <= chats <= after + 1
    assert not target.with_name(f".{target.name}.partial").exists()
    assert revision
    # The copy is a working caesar database.
    copied = _cli(
        home,
        "export",
        "--out",
        str(tmp_path / "from-copy.jsonl"),
        database_url=f"sqlite:///{target}",
    )
    assert copied.exit_code == 0, copied.output
    # A backup never overwrites one that is there.
    again = _cli(home, "db", "backup", str(target))
    assert again.exit_code == 1 and "already exists" in again.output


def test_backup_on_postgresql_prints_pg_dump_without_the_password(services, tmp_path):
    url = "postgresql+psycopg://caesar:s3cret-pw@db.internal:5433/caesar?sslmode=require"
    result = _cli(
        Path(services.settings.home), "db", "backup", str(tmp_path / "x.dump"), database_url=url
    )
    assert result.exit_code == 1  # nothing was written, and a script must know it
    assert "pg_dump --format=custom" in result.output
    assert "postgresql://caesar@db.internal:5433/caesar?sslmode=require" in result.output
    assert "s3cret-pw" not in result.output and "psycopg" not in result.output
    assert not (tmp_path / "x.dump").exists()


# -- export --------------------------------------------------------------------------------------
def _seed(services) -> None:
    chats = exactly_once.backfill(services, 30)
    services.facts.set_by_operator("dog_name", "Biscuit", scope=Scope(OWNER))
    services.facts.set_by_operator("home_city", "Lisbon — “quoted” ünïcode", scope=Scope(OWNER))
    # a standing statement and two dated memories of the first chat (3 audit rows in all)
    services.standing.add(
        services.audit,
        "I keep a gluten-free diet",
        kind="constraint",
        slot="diet",
        scope=Scope(OWNER),
    )
    said = [
        DatedMemory(PERSON, "The person ran a half marathon in Porto.", 0, datetime(2026, 10, 3)),
        DatedMemory(CAESAR, "caesar suggested an ice bath.", 1),
    ]
    with services.db.write() as session:
        services.dated.learn(
            Scope(OWNER, session),
            services.audit,
            said,
            [np.ones(384, np.float32) / np.sqrt(384), None],
            source_audit_id=chats[0],
            conversation_id=session.get(AuditLog, chats[0]).subject_id,
            said_at=datetime(2026, 10, 5, 9),
        )
    vector = services.embedder.get().embed_batch(["we talked about the dog"])[0]
    with services.db.write() as session:
        for chat_id in (1, 2, 3):
            session.add(
                episode_row(
                    audit_log_id=chat_id,
                    summary=f"summary of #{chat_id}",
                    vector=vector,
                    model="all-MiniLM-L6-v2",
                    created_at=utcnow(),
                    recall_count=chat_id,
                    scope=Scope(OWNER),
                )
            )


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_export_round_trips_every_row(make_services, db_url, tmp_path):
    services = make_services(database_url=db_url)
    _seed(services)
    out = tmp_path / "export.jsonl"
    result = _cli(Path(services.settings.home), "export", "--out", str(out), database_url=db_url)
    assert result.exit_code == 0, result.output
    records = _read(out)
    header, rows = records[0], records[1:]
    kinds = Counter(r["type"] for r in rows)
    db_counts = {
        "fact": _count(services, Fact),
        "memory": _count(services, Memory),
        "episode": _count(services, EpisodeSummary),
        "audit": _count(services, AuditLog),
    }
    assert header["type"] == "export" and header["counts"] == db_counts == dict(kinds)
    assert header["format"] == 2
    assert db_counts == {"fact": 2, "memory": 3, "episode": 3, "audit": 34}
    # the memories: every field but the vector, the dated ones with their conversation and time
    memories = {r["text"]: r for r in rows if r["type"] == "memory"}
    assert all("vector" not in r and "model" not in r for r in memories.values())
    gluten = memories["I keep a gluten-free diet"]
    assert (gluten["kind"], gluten["slot"], gluten["speaker"]) == ("constraint", "diet", "person")
    run = memories["The person ran a half marathon in Porto."]
    assert run == {
        **run,
        "kind": "said",
        "slot": "",
        "speaker": "person",
        "said_at": "2026-10-05T09:00:00",
        "turn": 0,
        "refers_start": "2026-10-03T00:00:00",
        "refers_end": None,
    }
    first_chat = min(r["id"] for r in rows if r.get("event_type") == audit.CHAT_COMPLETED)
    assert run["source_audit_id"] == first_chat
    assert run["conversation_id"] is not None
    assert memories["caesar suggested an ice bath."]["speaker"] == "caesar"
    assert all("embedding" not in r for r in rows if r["type"] == "episode")
    # Every audit row as stored, in id order.
    with services.db.read() as session:
        stored = [
            (a.id, a.event_type, a.payload)
            for a in session.scalars(select(AuditLog).order_by(AuditLog.id))
        ]
    assert [
        (r["id"], r["event_type"], r["payload"]) for r in rows if r["type"] == "audit"
    ] == stored
    facts = {r["key"]: r["value"] for r in rows if r["type"] == "fact"}
    assert facts["home_city"] == "Lisbon — “quoted” ünïcode"

    with_vectors = tmp_path / "with.jsonl"
    assert (
        _cli(
            Path(services.settings.home),
            "export",
            "--with-embeddings",
            "-o",
            str(with_vectors),
            database_url=db_url,
        ).exit_code
        == 0
    )
    episodes = [r for r in _read(with_vectors) if r["type"] == "episode"]
    assert [len(e["embedding"]) for e in episodes] == [384] * 3


def test_export_to_stdout_is_pure_jsonl(services):
    _seed(services)
    result = CliRunner().invoke(app, ["export"], env={"CAESAR_HOME": str(services.settings.home)})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert [json.loads(line)["type"] for line in lines[:1]] == ["export"]
    assert len(lines) == 1 + 2 + 3 + 3 + 34  # the progress bar and summary went to stderr
    assert "exported 2 facts, 3 memories, 3 episodes, 34 audit rows" in result.stderr


def test_export_is_one_snapshot_while_writes_happen(make_services, db_url, tmp_path):
    services = make_services(database_url=db_url)
    _seed(services)
    with (
        _Writer(services) as writer,
        Export(services.db, scope=Scope(OWNER)) as export,
        (tmp_path / "live.jsonl").open("w") as out,
    ):
        # More pairs are committed after the snapshot began and before a row is read: none
        # of them may show up, and the header's counts must match the lines.
        started = writer.pairs
        while writer.pairs < started + 5:
            threading.Event().wait(0.01)
        write_jsonl(export.records(), out)
    records = _read(tmp_path / "live.jsonl")
    kinds = Counter(r["type"] for r in records[1:])
    assert dict(kinds) == records[0]["counts"]
    chats = {
        r["id"] for r in records if r["type"] == "audit" and r["event_type"] == audit.CHAT_COMPLETED
    }
    assert {r["audit_log_id"] for r in records if r["type"] == "episode"} <= chats
    assert _count(services, AuditLog) > kinds["audit"]


def test_libpq_url_drops_the_password_and_the_driver():
    class _Db:
        url = "postgresql+psycopg://me:pa%40ss@localhost/caesar"

    assert libpq_url(_Db()) == "postgresql://me@localhost/caesar"  # type: ignore[arg-type]
