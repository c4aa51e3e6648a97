"""Statement plumbing shared by the search backends (memory/engine/sqlite.py, postgres.py) and
the engine-agnostic candidate reads (memory/recall/hybrid.py): nothing here knows the engine."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import TextClause, bindparam, text
from sqlalchemy.orm import Session

from caesar.memory.scope import Scope


def driver_rows(session: Session, sql: str, params: Sequence[object]) -> list[Any]:
    """Rows of `sql`, sent to the driver as written with positional parameters (write the
    placeholders with `marks`): for the hot statements of a recall, SQLAlchemy's compile-cache
    lookup, expanding-list processing and row wrapping cost more than SQLite's own work."""
    return list(session.connection().exec_driver_sql(sql, tuple(params)).fetchall())


def marks(session: Session, n: int) -> str:
    """n positional placeholders in the driver's own style (sqlite3 '?', psycopg '%s')."""
    mark = "?" if session.get_bind().dialect.paramstyle == "qmark" else "%s"
    return ", ".join([mark] * n)


@functools.lru_cache(maxsize=1024)
def statement(sql: str, *expanding: str) -> TextClause:
    """text(sql), built once per statement, with `expanding` parameters taking lists: a new
    text() is parsed (its bind parameters found by regex) and its cache key built on every
    execution. Lists go in as parameters, never formatted into the statement, so statements
    repeat and SQLAlchemy's compiled cache is hit."""
    clause = text(sql)
    return clause.bindparams(*(bindparam(n, expanding=True) for n in expanding))


def count(session: Session, sql: str, params: dict[str, object] | None = None) -> int:
    """The single integer `sql` selects (0 for NULL)."""
    return int(session.execute(text(sql), params or {}).scalar() or 0)


def all_exist(session: Session, checks: list[str], params: dict[str, object]) -> list[bool]:
    """The truth of each EXISTS (…) of `checks`, in one statement."""
    row = session.execute(statement(f"SELECT {', '.join(checks)}"), params).one()
    return [bool(v) for v in row]


def by_window(rows: Sequence[Any]) -> dict[int, dict[int, float]]:
    """(episode id, window number, score) rows as {episode: {window: score}}, scores > 0."""
    out: dict[int, dict[int, float]] = {}
    for episode_id, window_no, score in rows:
        if score > 0:
            out.setdefault(int(episode_id), {})[int(window_no)] = float(score)
    return out


def episode_filters(
    key: str,
    *,
    model_id: str | None,
    min_created: datetime | None,
    min_id: int | None,
) -> tuple[tuple[str, ...], list[str], dict[str, object]]:
    """(joins, WHERE conditions, parameters) restricting a full-text table keyed by episode id
    (`key`) to the episodes of `model_id`, created ≥ min_created, id ≥ min_id (each unless
    None). The table is the person's own, or filtered by person on its rows: with neither
    model_id nor min_created the index is read alone, without the episode rows."""
    params: dict[str, object] = {}
    where = []
    if model_id is not None:
        where.append("e.model = :model")
        params["model"] = model_id
    if min_created is not None:
        where.append("e.created_at >= :min_created")
        params["min_created"] = min_created
    join = (f"JOIN episode_summaries AS e ON e.id = {key}",) if where else ()
    if min_id is not None:
        where.append(f"{key} >= :min_id")
        params["min_id"] = min_id
    return join, where, params


# Where a list of ids drives a lookup, the person is checked on the rows found (`+person_id`:
# unary plus keeps an index out of that term, on both engines). Without statistics SQLite's
# planner takes an equality on an indexed column for ~10 rows, and read the person's whole
# index instead of the ids' rows: 60 candidates' rows took 28 ms at 100k episodes against
# 0.3 ms by the primary key (bench/bench_turn.py). tests/test_query_plans.py holds the turn to it.
PERSON_CHECK = "+person_id"


def person_checked(column: Any, scope: Scope) -> Any:
    """`column = person` for an ORM query whose ids drive the lookup: `column + 0` keeps the
    person's index out of the plan (see PERSON_CHECK)."""
    person = scope.person
    return column + 0 == person


def owned(scope: Scope, ids: Sequence[int]) -> list[int]:
    """Those of episodes `ids` that are `person`'s, sorted."""
    session, person = scope.session, scope.person
    if not ids:
        return []
    sql = (
        f"SELECT id FROM episode_summaries WHERE id IN ({marks(session, len(ids))}) "
        f"AND {PERSON_CHECK} = {marks(session, 1)} ORDER BY id"
    )
    return [int(r[0]) for r in driver_rows(session, sql, [*(int(i) for i in ids), int(person)])]


def person_episodes(scope: Scope) -> tuple[int, int, int]:
    """(count, smallest id, largest id) of `person`'s indexed episodes (non-empty summary)."""
    session, person = scope.session, scope.person
    sql = (
        "SELECT count(*), min(id), max(id) FROM episode_summaries "
        "WHERE person_id = :person AND summary <> ''"
    )
    n, lo, hi = session.execute(statement(sql), {"person": person}).one()
    return int(n or 0), int(lo or 0), int(hi or 0)
