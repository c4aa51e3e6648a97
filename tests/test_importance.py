"""ADR-0034 §4 importance, with numbers worked by hand, and the injection cap built on it."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

import numpy as np
import pytest
from conftest import OWNER

from caesar import audit
from caesar.audit import Audit
from caesar.config import FactsImportanceSettings
from caesar.db.models import Fact
from caesar.memory.facts.store import FactsStore
from caesar.memory.importance import (
    episode_score,
    fact_importance,
    fact_importance_v,
    freshness,
    freshness_v,
    recall_weight,
    recall_weight_v,
)
from caesar.memory.render import FACTS_HEADER, MEMORY_CLOSE, FactLine, facts_block
from caesar.memory.scope import Scope

NOW = datetime(2026, 5, 21, 12, 0)


# -- formulas ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("age_days", "expected"),
    [(0, 1.0), (30, 2**-0.5), (60, 0.5), (120, 0.25), (180, 0.125), (-5, 1.0)],
)
def test_freshness_is_a_true_half_life(age_days, expected):
    assert freshness(age_days, 60) == pytest.approx(expected)


def test_freshness_is_not_the_adr_exp_which_halves_at_069_halflife():
    # exp(-60/60) = 0.368 would make `halflife_days = 60` a lie (DESIGN.md).
    assert freshness(60, 60) == pytest.approx(0.5)
    assert freshness(60, 60) != pytest.approx(math.exp(-1))


@pytest.mark.parametrize(
    ("age", "confidence", "edits", "expected"),
    [
        (0, 1.0, 0, 1.0),
        (60, 0.8, 0, 0.4),  # 0.5 × 0.8 × 1
        (60, 0.8, 2, 0.8),  # 0.5 × 0.8 × (1 + 0.5 × 2)
        (120, 0.9, 1, 0.3375),  # 0.25 × 0.9 × 1.5
        (0, 0.0, 5, 0.0),
    ],
)
def test_fact_importance_is_freshness_times_confidence_times_edit_weight(
    age, confidence, edits, expected
):
    got = fact_importance(
        age_days=age,
        confidence=confidence,
        edit_count=edits,
        halflife_days=60,
        edit_weight_scale=0.5,
    )
    assert got == pytest.approx(expected)


def test_vectorised_fact_importance_matches_the_scalar_formula():
    ages, conf, edits = (
        np.array([0.0, 60.0, 120.0, -3.0]),
        np.array([1.0, 0.8, 0.9, 0.5]),
        np.array([0, 2, 1, 4]),
    )
    got = fact_importance_v(
        age_days=ages, confidence=conf, edit_count=edits, halflife_days=60, edit_weight_scale=0.5
    )
    expected = [
        fact_importance(
            age_days=a, confidence=c, edit_count=int(e), halflife_days=60, edit_weight_scale=0.5
        )
        for a, c, e in zip(ages, conf, edits, strict=True)
    ]
    assert got == pytest.approx(expected) and got[1] == pytest.approx(0.8)


def test_episode_score_numbers():
    # cosine 0.8, one half-life old (30 d), recall_count e-1 → log1p = 1 → weight 1.25
    assert recall_weight(math.e - 1, 0.25) == pytest.approx(1.25)
    score = episode_score(
        cosine=0.8, age_days=30, recall_count=0, halflife_days=30, recall_weight_scale=0.25
    )
    assert score == pytest.approx(0.4)
    ages, counts = np.array([0.0, 30.0, 90.0, -1.0]), np.array([0, 1, 10, 3])
    assert freshness_v(ages, 30) == pytest.approx([freshness(a, 30) for a in ages])
    assert recall_weight_v(counts, 0.25) == pytest.approx([recall_weight(c, 0.25) for c in counts])


# -- ranking in the store (both engines) ---------------------------------------------------------
def _store(db) -> FactsStore:
    return FactsStore(db, FactsImportanceSettings(), Audit())


def _add(db, key: str, value: str, confidence: float, age_days: float) -> None:
    when = NOW - timedelta(days=age_days)
    with db.write() as session:
        session.add(
            Fact(
                key=key,
                value=value,
                confidence=confidence,
                created_at=when,
                updated_at=when,
                person_id=OWNER,
            )
        )


def _edit_rows(db, key: str, n: int, event: str = audit.FACT_USER_EDITED) -> None:
    with db.write() as session:
        for _ in range(n):
            Audit().append(
                Scope(OWNER, session),
                event,
                {"key": key},
                subject_key=key,
                created_at=NOW - timedelta(days=90),
            )


def test_list_all_ranks_by_importance_with_edit_counts_from_audit(migrated_db):
    _add(migrated_db, "fresh_unsure", "a", 0.5, 0)  # 1 × 0.5 × 1 = 0.5
    _add(migrated_db, "old_sure", "b", 1.0, 60)  # 0.5 × 1 × 1 = 0.5 → tie, broken by key
    _add(migrated_db, "older_edited", "c", 0.9, 120)  # 0.25 × 0.9 × (1 + 0.5 × 3) = 0.5625
    _add(migrated_db, "stale", "d", 0.9, 240)  # 0.0625 × 0.9 = 0.05625
    _edit_rows(migrated_db, "older_edited", 3)
    _edit_rows(migrated_db, "stale", 1, audit.FACT_USER_DELETED)  # deletions are not edits

    ranked = _store(migrated_db).list_all(NOW, scope=Scope(OWNER))

    assert [f.key for f in ranked] == ["older_edited", "fresh_unsure", "old_sure", "stale"]
    assert [f.importance for f in ranked] == pytest.approx([0.5625, 0.5, 0.5, 0.05625])
    assert [f.edit_count for f in ranked] == [3, 0, 0, 0]
    assert _store(migrated_db).list_all(NOW, limit=2, scope=Scope(OWNER)) == ranked[:2]
    # the same fact ranks lower as time passes: importance is computed at read time
    later = _store(migrated_db).list_all(NOW + timedelta(days=60), scope=Scope(OWNER))
    assert later[0].importance == pytest.approx(0.5625 / 2)


def test_deleting_a_fact_forgets_its_edits(migrated_db):
    store = _store(migrated_db)
    store.set_by_operator("dog_name", "Biscuit", scope=Scope(OWNER))
    store.set_by_operator("dog_name", "Biscuit!", scope=Scope(OWNER))
    assert store.get("dog_name", scope=Scope(OWNER)).edit_count == 2
    store.delete("dog_name", scope=Scope(OWNER))
    store.set_by_operator("dog_name", "Rex", scope=Scope(OWNER))
    fact = store.get("dog_name", scope=Scope(OWNER))
    assert fact.edit_count == 1
    assert fact.importance == pytest.approx(1.5, rel=1e-3)  # fresh, confidence 1, one edit


# -- the injection cap --------------------------------------------------------------------------
def test_facts_block_caps_at_30_facts_keeping_the_most_important():
    facts = [FactLine(f"fact_{i:02d}", "v") for i in range(40)]  # already most important first
    block = facts_block(facts, max_facts=30, max_chars=2048)
    keys = [line[2:].split(":")[0] for line in block.splitlines() if line.startswith("- ")]
    assert keys == [f"fact_{i:02d}" for i in range(30)]


def test_facts_block_caps_at_2048_chars_dropping_the_least_important():
    facts = [FactLine(f"fact_{i:02d}", "x" * 150) for i in range(30)]
    block = facts_block(facts, max_facts=30, max_chars=2048)
    lines = [line for line in block.splitlines() if line.startswith("- ")]
    assert len(block) <= 2048
    # each line is 161 chars + a newline; the frame takes the rest: 12 fit, 13 would not
    assert len(lines) == 12
    assert lines[-1].startswith("- fact_11:")
    assert block.startswith(FACTS_HEADER) and block.endswith(MEMORY_CLOSE)
    # exactly at the boundary: one character less and the last fact goes
    assert facts_block(facts, max_facts=30, max_chars=len(block) - 1).count("\n- ") == 11


def test_facts_block_stops_at_a_fact_that_does_not_fit_rather_than_skipping_it():
    facts = [FactLine("important", "y" * 1000), FactLine("minor", "z")]
    block = facts_block(facts, max_facts=30, max_chars=500)
    assert block == ""  # "minor" must not take the place of a more important fact
    assert facts_block(facts, max_facts=0, max_chars=2048) == ""


def test_brain_injects_the_capped_ranking(make_services):
    services = make_services()
    with services.db.write() as session:
        for i in range(40):  # importance falls with i: older and older
            when = NOW - timedelta(days=i)
            session.add(
                Fact(
                    key=f"fact_{i:02d}",
                    value="v",
                    confidence=1.0,
                    created_at=when,
                    updated_at=when,
                    person_id=OWNER,
                )
            )
    from caesar.brain import Brain

    ctx = Brain(services).prepare("hello", now=NOW, scope=Scope(OWNER))
    system = ctx.messages[0]["content"]
    assert ctx.facts_used == 30
    assert "- fact_00: v" in system and "- fact_29: v" in system and "fact_30" not in system
    assert system.index("fact_00") < system.index("fact_01") < system.index("fact_29")
