"""Facts-block build time: what every chat turn pays before it calls the LLM.

    .venv/bin/python bench/bench_facts.py [--sizes 1000 10000] [--runs 50]

For each size N, a real migrated SQLite database holds N facts (random ages up to a year,
random confidences), operator edits on every tenth fact (1-3 `memory.fact.user_edited` rows
each, so edit_count has work to do) and a deletion on every fiftieth key. Timed, p50/p90 in ms:
`FactsStore.list_all()` (load + edit counts + importance + sort, every fact: what GET /v1/facts
and the dashboard pay), `facts_block()` over the ranking (cap 30 facts / 2048 chars), and
`list_all(limit=30)` + `facts_block()` together, as brain.prepare runs them on every turn.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import benchlib
from sqlalchemy import insert

from caesar import audit
from caesar.audit import Audit
from caesar.clock import utcnow
from caesar.config import FactsImportanceSettings, FactsInjectSettings
from caesar.db import Database, migrate
from caesar.db.models import AuditLog, Fact
from caesar.memory.context.render import FactLine, facts_block
from caesar.memory.facts.store import FactsStore


def build(path: Path, n: int, seed: int = 0) -> Database:
    rng = random.Random(seed)
    now = utcnow()
    db = Database(f"sqlite:///{path}")
    migrate.upgrade(db)
    facts, events = [], []
    for i in range(n):
        when = now - timedelta(days=rng.uniform(0, 365))
        key = f"fact_{i:06d}"
        facts.append(
            {
                "key": key,
                "value": f"value {i} " + "x" * rng.randint(5, 60),
                "confidence": round(rng.uniform(0.3, 1.0), 3),
                "created_at": when,
                "updated_at": when,
                "person_id": benchlib.OWNER,
            }
        )
        if i % 10 == 0:
            for _ in range(rng.randint(1, 3)):
                events.append(_event(audit.FACT_USER_EDITED, key, when))
        if i % 50 == 0:
            events.append(_event(audit.FACT_USER_DELETED, key, when - timedelta(days=1)))
    with db.write() as session:
        session.execute(insert(Fact), facts)
        session.execute(insert(AuditLog), events)
    return db


def _event(event_type: str, key: str, when: object) -> dict[str, object]:
    return {
        "event_type": event_type,
        "created_at": when,
        "payload": {"key": key},
        "subject_key": key,
        "person_id": benchlib.OWNER,
    }


def _cpu_calls(fn: object, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        started = time.process_time()
        fn()  # type: ignore[operator]
        out.append((time.process_time() - started) * 1000)
    return out


def measure(n: int, runs: int) -> dict[str, object]:
    inject = FactsInjectSettings()
    with tempfile.TemporaryDirectory() as tmp:
        db = build(Path(tmp) / "facts.db", n)
        store = FactsStore(db, FactsImportanceSettings(), Audit())
        top = store.list_all(limit=inject.max_facts, person=benchlib.OWNER)

        def block(facts: list = top) -> str:
            lines = [FactLine(f.key, f.value) for f in facts]
            return facts_block(lines, max_facts=inject.max_facts, max_chars=inject.max_chars)

        def both() -> str:  # what brain.prepare runs
            return block(store.list_all(limit=inject.max_facts, person=benchlib.OWNER))

        result = {
            "facts": n,
            "list_all_ms": benchlib.summary(benchlib.time_calls(store.list_all, runs)),
            "facts_block_ms": benchlib.summary(benchlib.time_calls(block, runs)),
            # the headline figure: the facts-block build time of one chat turn
            "turn_ms": benchlib.summary(benchlib.time_calls(both, runs)),
            # CPU time of the same calls: steadier than wall time on a shared, busy machine
            "turn_cpu_ms": benchlib.summary(_cpu_calls(both, runs)),
            "block_chars": len(block()),
        }
        db.dispose()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    rows = [measure(n, args.runs) for n in args.sizes]
    print(
        f"{'facts':>7} {'list_all p50':>13} {'p90':>8} {'block p50':>10} {'turn p50':>10} "
        f"{'p90':>8} {'turn cpu p50':>13}"
    )
    for r in rows:
        la, fb, tot, cpu = r["list_all_ms"], r["facts_block_ms"], r["turn_ms"], r["turn_cpu_ms"]
        print(
            f"{r['facts']:>7} {la['p50']:>10.2f} ms {la['p90']:>8.2f} {fb['p50']:>7.3f} ms "
            f"{tot['p50']:>7.2f} ms {tot['p90']:>8.2f} {cpu['p50']:>10.2f} ms"
        )
    if len(rows) > 1:
        first, last = rows[0], rows[-1]
        ratio = last["turn_ms"]["p50"] / first["turn_ms"]["p50"]
        print(f"turn p50 {last['facts']} vs {first['facts']} facts: {ratio:.1f}x")
    path = benchlib.write_result("facts_block", {"runs": args.runs, "sizes": rows})
    print(f"written {path.relative_to(benchlib.ROOT)}")


if __name__ == "__main__":
    main()
