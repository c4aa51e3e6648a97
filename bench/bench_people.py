"""A household in one database (issue #23): one person's chat turn among 100 people with 10k
episodes each (1M episodes), against a one-person install of the same 10k episodes, measured in
the same run, on SQLite and on PostgreSQL with pgvector; each case's start-up, memory and turns
in a fresh process. Method: bench/README.md.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import benchlib
import history
import numpy as np
import procs
from sqlalchemy import create_engine, text

from caesar.memory.scope import Scope

BLOCK = 500  # a person's episodes arrive in blocks of this many, interleaved with the others'
FACTS = 100  # per person
TARGET_ADDED_MS = 3.0


# -- writing the databases ---------------------------------------------------------------------
def _planted(person: int, episodes: int) -> np.ndarray:
    """Which of the person's episodes belong to a planted topic (-1: none), ~0.5% as in
    bench/history.py, at least 20 a topic (fewer when the person has fewer episodes)."""
    rng = np.random.default_rng([person, 0])
    planted = np.full(episodes, -1, dtype=np.int64)
    per_topic = max(20, episodes // (history.TOPICS * 200))
    chosen = rng.choice(episodes, size=min(episodes, per_topic * history.TOPICS), replace=False)
    planted[chosen] = np.arange(chosen.size) % history.TOPICS
    return planted


def _block_rows(
    person: int, person_id: int, block: int, lo: int, hi: int, planted: np.ndarray, ctx: Any
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[tuple[int, int, list[str]]]]:
    """The audit and summary rows of episodes lo..hi of `person` (ids from ctx.next_id), and
    each one's window texts, from a seed of its own: the same rows in any database."""
    from caesar.memory import passages
    from caesar.memory.transcript import conversation_turns

    rng = np.random.default_rng([person, block + 1])
    n = hi - lo
    vectors = history._block(rng, n, planted[lo:hi], ctx.centres)
    f32 = vectors.astype("<f4")
    windows = history.unit(f32 + rng.standard_normal(f32.shape).astype(np.float32) * 0.03)
    encoded = history.json_rows(vectors)
    ages = rng.uniform(0, history.SPREAD_DAYS * 86_400.0, size=n)
    recalls = rng.geometric(0.6, size=n) - 1
    audits, summaries, texts = [], [], []
    for j in range(n):
        i = ctx.next_id
        ctx.next_id += 1
        created = ctx.anchor - timedelta(seconds=float(ages[j]))
        audit, summary = history.episode_rows(
            i,
            lo + j,
            int(planted[lo + j]),
            created,
            encoded[j],
            f32[j],
            windows[j],
            int(recalls[j]),
            person_id,
        )
        audits.append(audit)
        summaries.append(summary)
        texts.append((person_id, i, passages.windows(conversation_turns(audit["payload"]))))
    return audits, summaries, texts


def _window_rows(conn: Any, sqlite: bool, texts: list[tuple[int, int, list[str]]]) -> None:
    """(person, episode id, windows) as the engine's add_windows writes them."""
    from caesar.memory.engine import sqlite as sqlite_search
    from caesar.memory.engine.postgres import FTS_CONFIG

    if sqlite:  # each person's own table
        for person in sorted({p for p, _i, _w in texts}):
            table = sqlite_search.PersonTables(person).windows
            rows = [r for p, i, w in texts if p == person for r in sqlite_search.sqlite_rows(i, w)]
            if rows:
                conn.execute(
                    text(f"INSERT INTO {table} (rowid, body) VALUES (:rowid, :body)"), rows
                )
        return
    else:
        rows = [{"id": i, "k": k, "body": b} for _p, i, w in texts for k, b in enumerate(w)]
        sql = (
            "INSERT INTO episode_window_fts (episode_id, window_no, document) "
            f"VALUES (:id, :k, to_tsvector('{FTS_CONFIG}', :body))"
        )
    if rows:
        conn.execute(text(sql), rows)


def _facts(person_id: int, anchor: datetime) -> list[dict[str, Any]]:
    rng = random.Random(person_id)
    rows = []
    for i in range(FACTS):
        updated = anchor - timedelta(days=rng.uniform(0, 365))
        rows.append(
            {
                "key": f"fact_{i:04d}",
                "value": f"value {i} about the operator's {history.WORDS[i % len(history.WORDS)]}",
                "confidence": rng.uniform(0.3, 1.0),
                "created_at": updated,
                "updated_at": updated,
                "person_id": person_id,
            }
        )
    return rows


class _Ctx:
    def __init__(self, anchor: datetime, centres: np.ndarray) -> None:
        self.anchor, self.centres, self.next_id = anchor, centres, 1


def populate(url: str, people: int, per_person: int, anchor: datetime) -> dict[str, Any]:
    """Write `people` people (the owner first) with `per_person` episodes each into the empty
    database at `url`, migrated first; on PostgreSQL, move the vectors into pgvector."""
    from caesar.db import Database, migrate
    from caesar.db.models import AuditLog, EpisodeSummary, Fact, Person
    from caesar.minilm import MODEL_ID

    db = Database(url)
    migrate.upgrade(db)
    started = time.perf_counter()
    ctx = _Ctx(anchor, history.centres())
    sqlite = db.is_sqlite
    with db.write() as session:
        ids = [int(session.scalar(text("SELECT id FROM people WHERE is_owner")) or 0)]
        for p in range(1, people):
            row = Person(name=f"person {p}", token_hash=None, is_owner=False, created_at=anchor)
            session.add(row)
            session.flush()
            ids.append(row.id)
    planted = [_planted(p, per_person) for p in range(people)]
    # bench/history.py's JSON text passes through as it is (on SQLite, and on PostgreSQL's
    # JSONB, which the pgvector trigger then copies as a vector)
    engine = create_engine(url, json_serializer=history._serialize)
    with engine.connect() as conn:
        for p in range(people):
            with conn.begin():
                conn.execute(Fact.__table__.insert(), _facts(ids[p], anchor))
        for block, lo in enumerate(range(0, per_person, BLOCK)):
            hi = min(per_person, lo + BLOCK)
            audits, summaries, texts = [], [], []
            for p in range(people):
                a, s, t = _block_rows(p, ids[p], block, lo, hi, planted[p], ctx)
                audits += a
                summaries += s
                texts += t
                if len(audits) >= 10_000 or p == people - 1:
                    with conn.begin():
                        conn.execute(AuditLog.__table__.insert(), audits)
                        conn.execute(EpisodeSummary.__table__.insert(), summaries)
                        _window_rows(conn, sqlite, texts)
                    audits, summaries, texts = [], [], []
            done = hi * people
            rate = done / max(time.perf_counter() - started, 1e-9)
            print(
                f"\r  {url.split('/')[-1]}: {done:,} episodes ({rate:,.0f}/s)", end="", flush=True
            )
        if not sqlite:  # ids were given: the sequences go on from the last
            for table in ("audit_log", "episode_summaries"):
                conn.execute(text(f"SELECT setval('{table}_id_seq', {ctx.next_id})"))
            conn.execute(text("ANALYZE"))
            conn.commit()
    engine.dispose()
    print()
    built = {"build_s": round(time.perf_counter() - started, 1)}
    if not sqlite:
        from caesar.memory.engine import pgvector_migration

        t0 = time.perf_counter()
        status = pgvector_migration.migrate(db, MODEL_ID)
        assert status.ready, status.describe()
        built["pgvector_migration_s"] = round(time.perf_counter() - t0, 1)
    db.dispose()
    return built


# -- measuring one case (in its own process) -------------------------------------------------
def measure(url: str, turns: int, home: Path) -> dict[str, Any]:
    from caesar.brain import Brain
    from caesar.services import Services

    owner = benchlib.OWNER
    started = time.perf_counter()
    services = Services.build(benchlib.bench_settings(home, url))
    provider = benchlib.InstantProvider()
    benchlib.install(services, provider)
    services.episodes.embed_query("warm up")  # as `caesar serve` warms: the embedder,
    loaded = services.episodes.warm()  # then the episodes' search
    start_ms = benchlib.ms(time.perf_counter() - started)
    rss_started = procs.memory_mb()
    if services.db.is_sqlite:  # the owner's index at its steady state (an IVF from 50k rows)
        services.episodes.index(owner).wait_for_ivf()
    brain = Brain(services)
    messages = history.topic_messages()
    t0 = time.perf_counter()  # the first turn: loads the owner's index if start-up did not
    brain.turn(messages[0], scope=Scope(owner))
    first_turn_ms = benchlib.ms(time.perf_counter() - t0)
    for message in messages[1:10]:
        brain.turn(message, scope=Scope(owner))
    sql = _SqlTimes(services.db.engine)
    memory, recalled = [], []
    for i in range(turns):
        provider.seconds = 0.0
        t0 = time.perf_counter()
        result = brain.turn(messages[i % len(messages)], scope=Scope(owner))
        memory.append(benchlib.ms(time.perf_counter() - t0 - provider.seconds))
        recalled.append(len(result.recalled))
    services.close()
    return {
        "sql_ms_per_turn": sql.per_turn(turns),
        "episodes_warmed": loaded,
        "start_ms": round(start_ms, 1),
        "first_turn_ms": round(first_turn_ms, 1),
        "rss_after_start_mb": round(rss_started, 1),
        "rss_peak_mb": round(procs.memory_mb(key="VmHWM"), 1),
        "memory_work_ms": benchlib.summary(memory),
        "recalled_per_turn": round(sum(recalled) / max(len(recalled), 1), 2),
    }


class _SqlTimes:
    """Time spent in each SQL statement (by its first words) from now on: where a case's turn
    goes, so the household's added time can be placed."""

    def __init__(self, engine: Any) -> None:
        from sqlalchemy import event

        self.total: dict[str, float] = {}
        self._started: dict[int, float] = {}
        event.listen(engine, "before_cursor_execute", self._before)
        event.listen(engine, "after_cursor_execute", self._after)

    def _before(self, _conn: Any, cursor: Any, *_args: Any) -> None:
        self._started[id(cursor)] = time.perf_counter()

    def _after(self, _conn: Any, cursor: Any, statement: str, *_args: Any) -> None:
        began = self._started.pop(id(cursor), None)
        if began is not None:
            key = " ".join(statement.split())[:90]
            self.total[key] = self.total.get(key, 0.0) + time.perf_counter() - began

    def per_turn(self, turns: int, top: int = 6) -> dict[str, float]:
        """All statements' ms a turn, then the `top` costliest."""
        ranked = sorted(self.total.items(), key=lambda kv: -kv[1])[:top]
        out = {"all": benchlib.ms(sum(self.total.values()) / max(turns, 1))}
        out.update({k: benchlib.ms(v / max(turns, 1)) for k, v in ranked})
        return out


def _measured(url: str, turns: int, home: Path) -> dict[str, Any]:
    """`measure` in a fresh process: its start-up and memory are the case's alone."""
    command = [sys.executable, __file__, "--measure", url, str(turns), str(home)]
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


# -- the run -------------------------------------------------------------------------------------
def run_engine(
    engine: str, people: int, per_person: int, turns: int, pg_data_root: str | None, work: Path
) -> dict[str, Any]:
    from caesar.clock import utcnow

    anchor = utcnow().replace(microsecond=0)
    server = None
    if engine == "sqlite":
        urls = {case: f"sqlite:///{work / f'{case}.db'}" for case in ("household", "one")}
    else:
        from pg import create_database, start_postgres

        # pgvector builds HNSW fast while the graph fits in maintenance_work_mem; 1M vectors of
        # 384 dimensions take ~2.2 GB, and at 1GB the build outlasted 50 minutes (2026-12-05)
        server = start_postgres(
            work / "pg",
            settings={"maintenance_work_mem": "4GB", "shared_buffers": "256MB"},
            data_root=pg_data_root,
        )
        urls = {case: create_database(server) for case in ("household", "one")}
    try:
        sizes = {"household": people, "one": 1}
        built = {case: populate(url, sizes[case], per_person, anchor) for case, url in urls.items()}
        cases = {}
        for case, url in urls.items():
            cases[case] = {**built[case], **_measured(url, turns, work / f"home-{case}")}
            print(f"  {engine} {case}: {json.dumps(cases[case])}", flush=True)
    finally:
        if server is not None:
            server.stop()
    household, one = cases["household"], cases["one"]
    added = household["memory_work_ms"]["p50"] - one["memory_work_ms"]["p50"]
    return {
        "household": household,
        "one_person": one,
        "added_p50_ms": round(added, 3),
        "within_target": added <= TARGET_ADDED_MS,
        "ratio_p50": round(household["memory_work_ms"]["p50"] / one["memory_work_ms"]["p50"], 3),
        "ratio_start": round(household["start_ms"] / one["start_ms"], 3),
        "ratio_rss": round(household["rss_after_start_mb"] / one["rss_after_start_mb"], 3),
    }


def household(
    people: int = 100,
    episodes_per_person: int = 10_000,
    turns: int = 200,
    engines: Annotated[str, "comma-separated: sqlite, postgresql"] = "sqlite,postgresql",
    pg_data_root: Annotated[str | None, "PostgreSQL's data (default /dev/shm)"] = None,
) -> None:
    """One person's chat turn (memory work), start-up and memory among `people` people with
    `episodes_per_person` episodes each, against one person with the same episodes."""
    if people < 1 or episodes_per_person < 1:
        raise SystemExit("--people and --episodes-per-person must be at least 1")
    unknown = set(engines.split(",")) - {"sqlite", "postgresql"}
    if unknown:
        raise SystemExit(f"unknown engine(s) {', '.join(sorted(unknown))}: sqlite, postgresql")
    results: dict[str, Any] = {}
    benchlib.OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-people-", dir=benchlib.OUT) as tmp:
        for engine in engines.split(","):
            print(f"{engine}: {people} people × {episodes_per_person:,} episodes")
            results[engine] = run_engine(
                engine, people, episodes_per_person, turns, pg_data_root, Path(tmp)
            )
    data = {
        "people": people,
        "episodes_per_person": episodes_per_person,
        "episodes": people * episodes_per_person,
        "turns": turns,
        "target_added_ms": TARGET_ADDED_MS,
        "engines": results,
        "load": benchlib.load_avg(),
    }
    benchlib.write_result("perf_people", data)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--measure"]:  # one case, in a process of its own (`_measured`)
        print(json.dumps(measure(sys.argv[2], int(sys.argv[3]), Path(sys.argv[4]))))
    else:
        benchlib.cli(household)
