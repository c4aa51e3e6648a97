"""VectorIndex returns exactly what brute force over the same rows returns: same ids, same
order, same cosines — with thresholds, age filters, a rank, forgotten rows, rows added later,
another model's rows around, and its 8-bit first pass on (small blocks) or off."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import OWNER
from sqlalchemy import delete
from sqlalchemy import inspect as sa_inspect

from caesar.db import Database, migrate
from caesar.db.models import AuditLog, EpisodeSummary
from caesar.memory.engine import ann, quantized
from caesar.memory.engine.vectors import (
    VectorIndex,
    epoch_seconds,
    epoch_seconds_v,
    top_indices,
    unseen_bound,
    window_start,
)
from caesar.memory.importance import SECONDS_PER_DAY

DIM = 64
MODEL = "test-model"
NOW = datetime(2026, 6, 1, 12, 0, 0)


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


class Corpus:
    """Rows written into a real SQLite database, and the same rows kept here for brute force."""

    def __init__(self, db: Database, seed: int = 0, person: int = OWNER) -> None:
        self.db = db
        self.person = person  # whose rows (on a database at migration 0009 or later)
        self.rng = np.random.default_rng(seed)
        self.centres = unit(self.rng.standard_normal((6, DIM)))
        self.vectors: dict[int, np.ndarray] = {}
        self.created: dict[int, datetime] = {}
        self.recalls: dict[int, int] = {}
        self.model: dict[int, str] = {}
        self.next_id = 1

    def add(self, count: int, *, model: str = MODEL, shuffle_days: float = 2.0) -> list[int]:
        """`count` rows, a third of them near one of the topic centres; created mostly in id
        order over 120 days before NOW, with a few days of jitter so order is not monotone."""
        ids = list(range(self.next_id, self.next_id + count))
        self.next_id += count
        x = self.rng.standard_normal((count, DIM)).astype(np.float32)
        topics = self.rng.integers(0, len(self.centres), size=count)
        near = self.rng.random(count) < 0.33
        x[near] = self.centres[topics[near]] + x[near] * self.rng.uniform(
            0.05, 0.2, (near.sum(), 1)
        )
        x = unit(x)
        span = 120 * SECONDS_PER_DAY
        base = np.linspace(span, 0, count, endpoint=False) if count else np.zeros(0)
        jitter = self.rng.normal(0, shuffle_days * SECONDS_PER_DAY, count)
        audits, rows = [], []
        for j, row_id in enumerate(ids):
            created = NOW - timedelta(seconds=float(base[j] + jitter[j]))
            recalls = int(self.rng.geometric(0.5) - 1)
            self.vectors[row_id], self.created[row_id] = x[j], created
            self.recalls[row_id], self.model[row_id] = recalls, model
            audits.append(
                {
                    "id": row_id,
                    "event_type": "chat.completed",
                    "created_at": created,
                    "payload": {},
                }
            )
            rows.append(
                {
                    "id": row_id,
                    "audit_log_id": row_id,
                    "summary": f"episode {row_id}",
                    "embedding": [float(v) for v in x[j]],
                    # Every tenth row has no float32 copy: the index must read the JSON record.
                    "embedding_f32": None if row_id % 10 == 0 else x[j].astype("<f4").tobytes(),
                    "model": model,
                    "created_at": created,
                    "recall_count": recalls,
                }
            )
        columns = {c["name"] for c in sa_inspect(self.db.engine).get_columns("audit_log")}
        if "person_id" in columns:  # written at an older revision too (migration tests)
            for row in (*audits, *rows):
                row["person_id"] = self.person
        with self.db.write() as session:
            session.execute(AuditLog.__table__.insert(), audits)
            session.execute(EpisodeSummary.__table__.insert(), rows)
        return ids

    def delete(self, ids: list[int]) -> None:
        with self.db.write() as session:
            session.execute(delete(EpisodeSummary).where(EpisodeSummary.id.in_(ids)))
        for row_id in ids:
            self.model[row_id] = "deleted"

    def brute_force(
        self,
        query: np.ndarray,
        *,
        limit: int,
        threshold: float | None = None,
        min_created: float | None = None,
        ranked: bool = False,
        model: str = MODEL,
    ) -> tuple[list[int], dict[int, tuple[float, float]]]:
        """Per-row Python reference: filter on model, cosine and age, order by the score
        (ties: newer id first). Also returns (score, cosine) for every row that passes the
        filters."""
        scored = []
        for row_id, vector in self.vectors.items():
            if self.model[row_id] != model:
                continue
            cosine = float(np.dot(vector, query))
            created = epoch_seconds(self.created[row_id])
            if threshold is not None and cosine < threshold:
                continue
            if min_created is not None and created < min_created:
                continue
            key = adr_score(cosine, created, self.recalls[row_id]) if ranked else cosine
            scored.append((key, row_id, cosine))
        scored.sort(key=lambda s: (-s[0], -s[1]))
        top = scored[:limit]
        return [s[1] for s in top], {s[1]: (s[0], s[2]) for s in scored}


NOW_S = epoch_seconds(NOW)


def adr_score(cosine: float, created: float, recalls: float) -> float:
    age = max((NOW_S - created) / SECONDS_PER_DAY, 0.0)
    return cosine * 0.5 ** (age / 30.0) * (1 + 0.25 * np.log1p(recalls))


def adr_rank(cos: np.ndarray, created: np.ndarray, recalls: np.ndarray) -> np.ndarray:
    age = np.maximum((NOW_S - created) / SECONDS_PER_DAY, 0.0)
    return cos * np.power(0.5, age / 30.0) * (1 + 0.25 * np.log1p(recalls))


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(f"sqlite:///{tmp_path / 'vectors.db'}")
    migrate.upgrade(database)
    yield database
    database.dispose()


def make_index(db: Database, **kwargs: object) -> VectorIndex:
    kwargs.setdefault("background", False)  # sealing and IVF builds inline: deterministic
    index = VectorIndex(EpisodeSummary, MODEL, **kwargs)  # type: ignore[arg-type]
    with db.read() as session:
        index.refresh(session)
    return index


CASES = [
    {"limit": 5},
    {"limit": 12, "threshold": 0.45},
    {"limit": 12, "threshold": 0.2, "age_days": 90},
    {"limit": 3, "threshold": 0.45, "age_days": 30, "ranked": True},
    {"limit": 12, "ranked": True},
    {"limit": 50, "threshold": -0.1, "age_days": 60, "ranked": True},
    {"limit": 2000, "threshold": 0.0},
]


TIE = 1e-6  # scores this close are a float32 rounding tie, either order is exact


def searches(
    index: Any, corpus: Corpus, queries: np.ndarray, model: str = MODEL
) -> Iterator[tuple[dict[str, Any], Any, list[int], dict[int, tuple[float, float]]]]:
    """Every case, every query: (case, the index's hits, brute force's ids, brute force's
    (score, cosine) of each row passing the filters) over `model`'s rows. `index`: anything
    with VectorIndex.search's signature."""
    top_recalls = 1 + 0.25 * np.log1p(max(corpus.recalls.values()))
    for case in CASES:
        min_created = None
        if "age_days" in case:
            min_created = NOW_S - case["age_days"] * SECONDS_PER_DAY
        ranked = bool(case.get("ranked"))
        for query in queries:
            hits = index.search(
                query,
                limit=case["limit"],
                threshold=case.get("threshold"),
                min_created=min_created,
                rank=adr_rank if ranked else None,
                factor_range=(0.0, top_recalls) if ranked else (1.0, 1.0),
            )
            want_ids, scores = corpus.brute_force(
                query,
                limit=case["limit"],
                threshold=case.get("threshold"),
                min_created=min_created,
                ranked=ranked,
                model=model,
            )
            yield case, hits, want_ids, scores


def check(index: Any, corpus: Corpus, queries: np.ndarray, model: str = MODEL) -> int:
    """Every case, every query: identical to brute force over `model`'s rows. Returns how many
    hits compared."""
    compared = 0
    for case, hits, want_ids, scores in searches(index, corpus, queries, model):
        got_ids = [int(i) for i in hits.ids]
        assert len(got_ids) == len(want_ids), case
        for got, want in zip(got_ids, want_ids, strict=True):
            # Same order, except where two rows' scores tie to float32 rounding (a matrix
            # product over a block and a dot product per row round differently).
            assert got == want or (
                got in scores and abs(scores[got][0] - scores[want][0]) <= TIE
            ), (case, got, want)
        np.testing.assert_allclose(hits.cosine, [scores[i][1] for i in got_ids], atol=1e-5)
        compared += len(want_ids)
    return compared


def queries_for(corpus: Corpus, count: int = 6) -> np.ndarray:
    near = unit(corpus.centres[:count] + corpus.rng.standard_normal((count, DIM)) * 0.08)
    return np.vstack([near, unit(corpus.rng.standard_normal((2, DIM)))])


@pytest.mark.parametrize("quantize", [True, False], ids=["8bit-first-pass", "float32-only"])
def test_same_top_k_as_brute_force(db: Database, quantize: bool) -> None:
    corpus = Corpus(db)
    corpus.add(1500)
    corpus.add(200, model="other-model")
    index = make_index(db, quantize=quantize, seal_rows=256)
    assert len(index) == 1500
    if quantize:
        assert index.sealed_rows == 1500  # one block, tail empty
    assert check(index, corpus, queries_for(corpus)) > 100


def test_incremental_refresh_forget_and_blocks(db: Database) -> None:
    corpus = Corpus(db, seed=1)
    corpus.add(700)
    index = make_index(db, seal_rows=256)
    queries = queries_for(corpus)
    check(index, corpus, queries)

    corpus.add(100)  # below seal_rows: scanned exactly as the tail
    with db.read() as session:
        assert index.refresh(session) == 100
    assert index.sealed_rows == 700
    check(index, corpus, queries)

    corpus.add(300)  # a second block
    with db.read() as session:
        assert index.refresh(session) == 300
        assert index.refresh(session) == 0
    assert index.sealed_rows == 1100
    check(index, corpus, queries)

    # Forget the best rows of every query, as retention would: never returned again, and the
    # rows behind them move up.
    gone = set()
    for query in queries:
        gone.update(corpus.brute_force(query, limit=4, threshold=0.2)[0])
    corpus.delete(sorted(gone))
    index.forget(sorted(gone))
    index.forget(sorted(gone))  # twice is harmless
    assert len(index) == 1100 - len(gone)
    check(index, corpus, queries)


def test_recall_counts_move_rankings(db: Database) -> None:
    corpus = Corpus(db, seed=2)
    corpus.add(600)
    index = make_index(db, seal_rows=128)
    query = queries_for(corpus)[0]
    loser = corpus.brute_force(query, limit=20, threshold=0.2, ranked=True)[0][-1]
    corpus.recalls[loser] = 10_000
    index.set_recall_count(loser, 10_000)
    assert index.max_recall_count == 10_000
    check(index, corpus, queries_for(corpus))
    hits = index.search(
        query,
        limit=1,
        threshold=0.2,
        rank=adr_rank,
        factor_range=(0.0, 1 + 0.25 * np.log1p(10_000)),
    )
    assert int(hits.ids[0]) == loser


def test_another_model_is_a_separate_index(db: Database) -> None:
    corpus = Corpus(db, seed=3)
    corpus.add(300)
    other_ids = corpus.add(50, model="other-model")
    other = VectorIndex(EpisodeSummary, "other-model")
    with db.read() as session:
        other.refresh(session)
    assert len(other) == 50
    query = corpus.vectors[other_ids[7]]
    assert int(other.search(query, limit=1).ids[0]) == other_ids[7]
    mine = make_index(db)
    assert other_ids[7] not in [int(i) for i in mine.search(query, limit=350).ids]


def test_query_of_the_wrong_dimension_is_refused(db: Database) -> None:
    Corpus(db).add(10)
    index = make_index(db)
    with pytest.raises(ValueError, match="dims"):
        index.search(np.ones(DIM + 1, dtype=np.float32), limit=3)


def test_empty_index_returns_nothing(db: Database) -> None:
    index = make_index(db)
    assert index.search(np.ones(DIM, dtype=np.float32), limit=3).ids.size == 0


# -- pure parts ----------------------------------------------------------------------------------
def test_window_start_skips_only_rows_that_are_too_old() -> None:
    created = np.array([5.0, 1.0, 7.0, 6.0, 9.0, 8.0])
    cummax = np.maximum.accumulate(created)
    for min_created in [0.0, 1.0, 5.5, 6.5, 7.0, 8.5, 9.0, 10.0]:
        start = window_start(cummax, min_created)
        assert all(c < min_created for c in created[:start])
        assert start == len(created) or created[start] >= min_created
    assert window_start(cummax, None) == 0


def test_top_indices_orders_by_key_then_newer_id() -> None:
    keys = np.array([0.5, 0.9, 0.5, 0.7, 0.5])
    ids = np.array([10, 11, 12, 13, 14])
    assert list(ids[top_indices(keys, ids, 3)]) == [11, 13, 14]
    assert list(ids[top_indices(keys, ids, 10)]) == [11, 13, 14, 12, 10]
    assert top_indices(keys, ids, 0).size == 0


def test_unseen_bound() -> None:
    assert unseen_bound(0.5, (0.0, 2.0)) == 1.0
    assert unseen_bound(-0.5, (0.0, 2.0)) == 0.0
    assert unseen_bound(-0.5, (0.5, 2.0)) == -0.25


def test_epoch_seconds_vectorised_matches_scalar() -> None:
    stamps = [datetime(2026, 1, 1, 0, 0, 0, 123456), datetime(1999, 12, 31, 23, 59, 59)]
    assert list(epoch_seconds_v(stamps)) == [epoch_seconds(s) for s in stamps]
    # SQLite hands the index the stored text: parsed to the same seconds.
    assert list(epoch_seconds_v([str(s) for s in stamps])) == [epoch_seconds(s) for s in stamps]


def test_quantized_bound_holds() -> None:
    """The promise the first pass rests on: no row's cosine exceeds what its block's error
    bound allows around the approximate score."""
    rng = np.random.default_rng(5)
    rows = unit(rng.standard_normal((3000, 384)))
    block = quantized.seal(rows, start=100)
    assert (block.start, block.stop) == (100, 3100)
    for _ in range(5):
        query = unit(rng.standard_normal(384))
        positions, approx, exhausted = block.nearest(query, 3000, lo=100)
        assert exhausted and sorted(positions) == list(range(100, 3100))
        exact = rows[positions - 100] @ query
        assert np.all(np.abs(exact - approx) <= block.error + quantized.ROUNDING_SLACK)
        positions, approx, exhausted = block.nearest(query, 10, lo=2000)
        assert not exhausted and positions.min() >= 2000 and len(positions) == 10
        assert np.all(np.diff(approx) <= 0)


def test_ivf_float16_scores_stay_within_its_error_bound() -> None:
    """The IVF scans float16 codes: every score it gives is within |query| × error of the exact
    inner product, `above` misses no scanned row whose exact score reaches the radius, and
    `nearest` comes back best first."""
    rng = np.random.default_rng(11)
    rows = unit(rng.standard_normal((3000, DIM)))
    ivf = ann.build(rows, np.arange(3000), 3000, probe_fraction=1.0)  # every list scanned
    assert 0 < ivf.error < 1e-3
    for query in (rows[7], unit(rows[7] + 0.3 * rng.standard_normal(DIM)), 3 * rows[9]):
        norm = float(np.linalg.norm(query))
        exact = rows @ query
        radius = float(np.sort(exact)[-40])  # ~40 rows reach it
        positions, approx = ivf.above(query, radius, lo=0)
        assert np.all(np.abs(exact[positions] - approx) <= norm * ivf.error + 1e-5)
        assert set(np.flatnonzero(exact >= radius)) <= set(positions.tolist())
        assert set(positions.tolist()) <= set(
            np.flatnonzero(exact >= radius - 2 * norm * ivf.error - 1e-5)
        )
        positions, approx, _ = ivf.nearest(query, 10, lo=100)
        assert positions.min() >= 100 and np.all(np.diff(approx) <= 0)
        assert np.all(np.abs(exact[positions] - approx) <= norm * ivf.error + 1e-5)


def test_ivf_stage_matches_exact_on_clustered_data(db: Database) -> None:
    """Above ivf_min_rows the IVF proposes candidates: results are exact re-scored rows, so
    every returned cosine is right and, on clustered data, the same top-K as brute force."""
    corpus = Corpus(db, seed=6)
    corpus.add(3000)
    index = make_index(db, seal_rows=512, ivf_min_rows=1000, background=False)
    assert index.ivf_rows == 3000
    queries = queries_for(corpus)
    overlap = []
    for number, query in enumerate(queries):
        for threshold in (0.45, None):
            hits = index.search(query, limit=5, threshold=threshold)
            want, _ = corpus.brute_force(query, limit=5, threshold=threshold)
            got = [int(i) for i in hits.ids]
            for row_id, cosine in zip(got, hits.cosine, strict=True):
                assert cosine == pytest.approx(float(corpus.vectors[row_id] @ query), abs=1e-5)
                assert threshold is None or cosine >= threshold
            if want and number < 6:  # near a topic; random queries on random rows have no
                overlap.append(len(set(got) & set(want)) / len(want))  # neighbourhood to find
    assert len(overlap) >= 10 and np.mean(overlap) >= 0.95

    # Rows added later are scanned exactly until the IVF is rebuilt over them.
    new_ids = corpus.add(400)
    with db.read() as session:
        index.refresh(session)
    query = corpus.vectors[new_ids[-1]]
    assert int(index.search(query, limit=1, threshold=0.9).ids[0]) == new_ids[-1]
    index.forget([new_ids[-1]])
    assert new_ids[-1] not in [int(i) for i in index.search(query, limit=5).ids]


def test_ivf_is_rebuilt_after_growth_and_forgetting(db: Database) -> None:
    corpus = Corpus(db, seed=7)
    corpus.add(1200)
    index = make_index(db, seal_rows=256, ivf_min_rows=1000, background=False)
    assert index.ivf_rows == 1200
    corpus.add(400)  # more than a quarter of the IVF's rows, sealed: a new IVF covers them
    with db.read() as session:
        index.refresh(session)
    assert index.ivf_rows == 1600
    gone = list(range(1, 601))  # over a third forgotten: rebuilt without them
    corpus.delete(gone)
    index.forget(gone)
    assert index.ivf_rows == 1000 and len(index) == 1000
    query = corpus.vectors[1500]
    assert int(index.search(query, limit=1, threshold=0.9).ids[0]) == 1500


def test_background_maintenance_keeps_results_exact(db: Database) -> None:
    """Served while sealing and the IVF build run in a thread: the same answers before,
    during and after (unsealed rows are scanned exactly meanwhile)."""
    corpus = Corpus(db, seed=8)
    corpus.add(2500)
    index = make_index(db, seal_rows=256, ivf_min_rows=None, background=True)
    queries = queries_for(corpus)
    check(index, corpus, queries)  # possibly mid-sealing
    index.wait_for_ivf()
    assert index.sealed_rows == 2500
    check(index, corpus, queries)


def test_newest_and_cosines_read_the_loaded_rows_exactly(db: Database) -> None:
    corpus = Corpus(db, seed=5)
    corpus.add(300)
    corpus.add(20, model="other-model")  # interleaved ids of another model: not this index's
    corpus.add(100)
    index = make_index(db, seal_rows=128)
    with db.read() as session:
        index.refresh(session)
    query = queries_for(corpus)[0]
    mine = sorted(i for i, m in corpus.model.items() if m == MODEL)
    gone = mine[-3:-1]
    corpus.delete(gone)
    index.forget(gone)

    newest = index.newest(query, limit=10)
    alive = [i for i in mine if i not in gone]
    assert list(newest.ids) == alive[::-1][:10]  # last loaded first, forgotten ones skipped
    assert np.allclose(newest.cosine, [corpus.vectors[i] @ query for i in newest.ids], atol=1e-6)

    cutoff = corpus.created[alive[-5]]  # created is only roughly in id order: filter exactly
    recent = index.newest(query, limit=400, min_created=epoch_seconds(cutoff))
    assert sorted(recent.ids) == sorted(i for i in alive if corpus.created[i] >= cutoff)
    after_all = epoch_seconds(max(corpus.created.values())) + 1
    assert index.newest(query, limit=5, min_created=after_all).ids.size == 0

    asked = [alive[0], gone[0], alive[-1], 10**6, mine[0] + 300]  # forgotten and unknown ids too
    got = index.cosines(asked, query)
    assert set(got) == {alive[0], alive[-1]}
    assert got[alive[-1]] == pytest.approx(float(corpus.vectors[alive[-1]] @ query), abs=1e-6)
