"""Migration 0015 on an install with episodes (issue #24): how long the upgrade takes, and then
how long PostgreSQL takes to index every older episode and window again under FTS5's words
(`caesar_porter`; memory/search/pg_words.py, what `caesar serve` runs in the background).

    .venv/bin/python bench/bench_pg_words.py [--episodes 20000]

A throw-away PostgreSQL 18 (tests/pg.py). N episodes are written at migration 0014, as caesar
wrote them then: each chat a real LongMemEval session (../shared/data/longmemeval_s, cycled),
its audit row, its episode (indexed by migration 0002's trigger, `english`) and its 3-turn
windows (`english`); not timed. Then `caesar db upgrade` to 0015 is timed, and the reindex
after it (as `caesar db words` runs it), its rate given per 1,000 episodes (it reads every row
once, so it grows linearly; larger sizes are extrapolated, and said to be). Then migration 0016
and the count of the person's words after it (`pg_words.count_words`, migration 0016: one
person, one transaction, episode writes waiting meanwhile), timed the same way. Figures go to
bench/out/results/perf_pg_words.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

import benchlib

sys.path.insert(0, str(benchlib.ROOT / "tests"))

DATA = benchlib.ROOT.parent / "shared" / "data" / "longmemeval_s"
NOW = datetime(2026, 6, 1, 12, 0, 0)


def sessions(limit: int) -> list[list[dict[str, str]]]:
    found: list[list[dict[str, str]]] = []
    for path in sorted(DATA.glob("*.json")):
        found.extend(json.loads(path.read_text())["haystack_sessions"])
        if len(found) >= limit:
            break
    return [s for s in found if len(s) >= 2][:limit]


def fill(conninfo: str, count: int, chats: list[list[dict[str, str]]]) -> int:
    """`count` episodes and their windows at migration 0014; returns the windows written."""
    import psycopg

    from caesar.memory.search import passages
    from caesar.memory.transcript import conversation_turns

    windows = 0
    with psycopg.connect(conninfo, autocommit=False) as conn:
        owner = conn.execute("SELECT id FROM people WHERE is_owner").fetchone()[0]  # type: ignore[index]
        for start in range(0, count, 2_000):
            stop = min(count, start + 2_000)
            payloads = []
            for i in range(start, stop):
                turns = chats[i % len(chats)]
                *asked, reply = turns
                payloads.append({"messages": asked, "reply": reply["content"]})
            with conn.cursor() as cur:
                with cur.copy(
                    "COPY audit_log (id, event_type, created_at, payload, person_id) FROM STDIN"
                ) as copy:
                    for j, payload in enumerate(payloads):
                        created = NOW - timedelta(minutes=count - start - j)
                        copy.write_row(
                            (start + j + 1, "chat.completed", created, json.dumps(payload), owner)
                        )
                with cur.copy(
                    "COPY episode_summaries (id, audit_log_id, summary, embedding, model, "
                    "created_at, person_id) FROM STDIN"
                ) as copy:
                    for j, payload in enumerate(payloads):
                        i = start + j + 1
                        created = NOW - timedelta(minutes=count - start - j)
                        summary = str(payload["messages"][0]["content"])[:200]  # type: ignore[index]
                        copy.write_row((i, i, summary, "[0.6, 0.8]", "m", created, owner))
                rows = [
                    (start + j + 1, k, body)
                    for j, payload in enumerate(payloads)
                    for k, body in enumerate(passages.windows(conversation_turns(payload)))
                ]
                cur.executemany(
                    "INSERT INTO episode_window_fts (episode_id, window_no, document) "
                    "VALUES (%s, %s, to_tsvector('english', %s))",
                    rows,
                )
                windows += len(rows)
            conn.commit()
            print(f"  written {stop:,} of {count:,} episodes ({windows:,} windows)", flush=True)
        conn.execute("SELECT setval('audit_log_id_seq', %s)", [count])
        conn.execute("SELECT setval('episode_summaries_id_seq', %s)", [count])
        conn.execute("ANALYZE")
        conn.commit()
    return windows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=20_000)
    args = parser.parse_args()

    from pg import create_database, start_postgres

    from caesar.db import Database, migrate

    chats = sessions(4_000)
    server = start_postgres(Path(tempfile.mkdtemp(prefix="bench-pg-words-")))
    try:
        url = create_database(server)
        db = Database(url)
        migrate.upgrade(db, "0014")
        windows = fill(server.conninfo(url.rsplit("/", 1)[1]), args.episodes, chats)
        from caesar.memory.search import pg_words

        started = time.perf_counter()
        migrate.upgrade(db, "0015")
        upgrade_s = time.perf_counter() - started
        started = time.perf_counter()
        done = pg_words.reindex(db)
        took = time.perf_counter() - started
        assert done.finished, done
        started = time.perf_counter()
        migrate.upgrade(db, "0016")
        upgrade_0016_s = time.perf_counter() - started
        started = time.perf_counter()
        assert pg_words.count_words(db) == 0
        count_s = time.perf_counter() - started
        with db.engine.connect() as c:
            words = int(c.exec_driver_sql(f"SELECT count(*) FROM {pg_words.VOCABULARY}").scalar())
        db.dispose()
    finally:
        server.stop()
    per_1k = took / args.episodes * 1000
    result = {
        "episodes": args.episodes,
        "windows": windows,
        "distinct_chats": len(chats),
        "upgrade_s": round(upgrade_s, 2),
        "reindex_s": round(took, 2),
        "per_1k_episodes_s": round(per_1k, 3),
        "extrapolated_100k_s": round(per_1k * 100, 1),
        "extrapolated_1m_s": round(per_1k * 1000, 1),
        "upgrade_0016_s": round(upgrade_0016_s, 2),
        "count_words_s": round(count_s, 2),
        "count_words_per_1k_episodes_s": round(count_s / args.episodes * 1000, 3),
        "vocabulary_rows": words,
        "load": benchlib.load_avg(),
    }
    print(
        f"migration 0015 over {args.episodes:,} episodes ({windows:,} windows): upgrade "
        f"{upgrade_s:.2f} s, then the reindex {took:.1f} s, "
        f"{per_1k:.2f} s per 1,000 episodes; extrapolated (linear, not measured): "
        f"100k {per_1k * 100:.0f} s, 1M {per_1k * 1000:.0f} s; load {result['load']}"
    )
    print(
        f"migration 0016: upgrade {upgrade_0016_s:.2f} s, then counting the person's words "
        f"{count_s:.2f} s ({words:,} words), {count_s / args.episodes * 1000:.3f} s per 1,000 "
        "episodes"
    )
    benchlib.write_result("perf_pg_words", result)


if __name__ == "__main__":
    main()
