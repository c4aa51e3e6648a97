"""Property tests (issue 7 §4) for the pure parts: the importance formulas (ADR-0034 §4, with
DESIGN.md's true half-life), relative-time phrasing, the memory fence in the prompt, and the
importer's handling of broken lines.
"""

from __future__ import annotations

import json
import math
import re
from datetime import datetime, timedelta

import numpy as np
import pytest
from conftest import OWNER
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from caesar.memory import importance as imp
from caesar.memory.render import (
    MEMORY_CLOSE,
    MEMORY_OPEN,
    EpisodeLine,
    FactLine,
    episodes_block,
    facts_block,
    relative_time,
)
from caesar.memory.scope import Scope

ages = st.floats(min_value=0, max_value=1e6, allow_nan=False)
any_age = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)
halflives = st.floats(min_value=1e-3, max_value=1e5, allow_nan=False)
unit = st.floats(min_value=0, max_value=1, allow_nan=False)
counts = st.integers(min_value=0, max_value=10_000)
scales = st.floats(min_value=0, max_value=10, allow_nan=False)


# -- importance --------------------------------------------------------------------------------
@given(any_age, halflives)
def test_freshness_is_bounded(age, halflife):
    assert 0.0 <= imp.freshness(age, halflife) <= 1.0


@given(ages, ages, halflives)
def test_freshness_never_grows_with_age(a, b, halflife):
    young, old = sorted((a, b))
    assert imp.freshness(young, halflife) >= imp.freshness(old, halflife)


@given(halflives, st.integers(min_value=0, max_value=20))
def test_half_life_is_exact(halflife, k):
    # After k half-lives exactly 2**-k is left: a true half-life, not exp(-t/h).
    assert math.isclose(imp.freshness(k * halflife, halflife), 0.5**k, rel_tol=1e-9)
    assert imp.freshness(0.0, halflife) == 1.0


@given(st.floats(min_value=-1e6, max_value=0, allow_nan=False), halflives)
def test_a_future_timestamp_is_as_fresh_as_now(age, halflife):
    assert imp.freshness(age, halflife) == 1.0


@given(ages, ages, unit, counts, halflives, scales)
def test_fact_importance_bounded_and_decays(a, b, confidence, edits, halflife, scale):
    young, old = sorted((a, b))

    def score(age: float) -> float:
        return imp.fact_importance(
            age_days=age,
            confidence=confidence,
            edit_count=edits,
            halflife_days=halflife,
            edit_weight_scale=scale,
        )

    ceiling = confidence * (1 + scale * edits)
    assert 0.0 <= score(old) <= score(young) <= ceiling * (1 + 1e-12)
    assert math.isclose(score(halflife), 0.5 * ceiling, rel_tol=1e-9, abs_tol=1e-300)


@given(ages, unit, counts, counts, halflives, scales)
def test_operator_edits_only_raise_fact_importance(age, confidence, e1, e2, halflife, scale):
    few, many = sorted((e1, e2))
    args = {
        "age_days": age,
        "confidence": confidence,
        "halflife_days": halflife,
        "edit_weight_scale": scale,
    }
    assert imp.fact_importance(edit_count=few, **args) <= imp.fact_importance(
        edit_count=many, **args
    )


@given(counts, counts, scales)
def test_recall_weight_starts_at_one_and_grows(c1, c2, scale):
    few, many = sorted((c1, c2))
    assert imp.recall_weight(0, scale) == 1.0
    assert 1.0 <= imp.recall_weight(few, scale) <= imp.recall_weight(many, scale)


@given(st.floats(min_value=0, max_value=1, allow_nan=False), ages, ages, counts, halflives, scales)
def test_episode_score_decays_with_age_and_is_bounded(cosine, a, b, recalls, halflife, scale):
    young, old = sorted((a, b))
    kw = {
        "cosine": cosine,
        "recall_count": recalls,
        "halflife_days": halflife,
        "recall_weight_scale": scale,
    }
    s_young, s_old = imp.episode_score(age_days=young, **kw), imp.episode_score(age_days=old, **kw)
    assert 0.0 <= s_old <= s_young <= cosine * imp.recall_weight(recalls, scale) * (1 + 1e-12)


@given(
    st.lists(any_age, min_size=1, max_size=50),
    halflives,
    st.lists(counts, min_size=1, max_size=50),
    scales,
)
def test_vectorised_formulas_match_the_scalar_ones(age_list, halflife, count_list, scale):
    fresh = imp.freshness_v(np.array(age_list), halflife)
    assert np.allclose(fresh, [imp.freshness(a, halflife) for a in age_list], rtol=1e-12, atol=0)
    weights = imp.recall_weight_v(np.array(count_list), scale)
    assert np.allclose(
        weights, [imp.recall_weight(c, scale) for c in count_list], rtol=1e-12, atol=0
    )


# -- relative time -----------------------------------------------------------------------------
_ORDER = [
    "today",
    "yesterday",
    "days",
    "last week",
    "weeks",
    "last month",
    "months",
    "last year",
    "years",
]
_COUNTED = re.compile(r"^(\d+) (days|weeks|months|years) ago$")
moments = st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31))


def _rank(phrase: str) -> tuple[int, int]:
    """today < yesterday < 2..6 days ago < last week < 2..4 weeks ago < ... < N years ago."""
    counted = _COUNTED.match(phrase)
    if counted:
        n, unit_ = int(counted.group(1)), counted.group(2)
        assert n >= 2, f"{phrase!r}: a count of one has its own words"
        return _ORDER.index(unit_), n
    assert phrase in _ORDER, f"unexpected phrase {phrase!r}"
    return _ORDER.index(phrase), 0


@given(moments, moments)
def test_relative_time_never_raises_and_always_says_something(then, now):
    phrase = relative_time(then, now)
    assert phrase and phrase == phrase.strip()
    _rank(phrase)


@given(moments, moments, moments)
def test_relative_time_is_monotone(a, b, now):
    recent, older = max(a, b), min(a, b)
    assert _rank(relative_time(recent, now)) <= _rank(relative_time(older, now))


@pytest.mark.parametrize(
    ("days", "phrase"),
    [
        (0, "today"),
        (1, "yesterday"),
        (3, "3 days ago"),
        (7, "last week"),
        (13, "last week"),
        (14, "2 weeks ago"),
        (30, "last month"),
        (60, "2 months ago"),
        (365, "last year"),
        (730, "2 years ago"),
    ],
)
def test_relative_time_examples(days, phrase):
    now = datetime(2026, 5, 18, 12, 0)
    assert relative_time(now - timedelta(days=days), now) == phrase


def test_relative_time_counts_calendar_days():
    assert relative_time(datetime(2026, 5, 17, 23, 50), datetime(2026, 5, 18, 0, 10)) == "yesterday"


# -- the memory fence --------------------------------------------------------------------------
_PIECES = [
    "<",
    ">",
    "/",
    "memory",
    MEMORY_OPEN,
    MEMORY_CLOSE,
    " ",
    "\n",
    "\u2028",
    "&",
    "MEMORY",
    "a",
]
tricky = st.lists(st.sampled_from(_PIECES), max_size=30).map("".join) | st.text(max_size=80)


@given(st.lists(st.tuples(tricky, tricky), min_size=1, max_size=10))
@settings(max_examples=200)
def test_stored_facts_cannot_break_out_of_the_fence(pairs):
    block = facts_block([FactLine(k, v) for k, v in pairs], max_facts=30, max_chars=100_000)
    assume(block)
    _assert_fenced(block)


@given(st.lists(tricky, min_size=1, max_size=10))
@settings(max_examples=200)
def test_recalled_episodes_cannot_break_out_of_the_fence(summaries):
    now = datetime(2026, 5, 18)
    block = episodes_block([EpisodeLine(now - timedelta(days=3), s) for s in summaries], now)
    _assert_fenced(block)


def _assert_fenced(block: str) -> None:
    assert block.count(MEMORY_OPEN) == 1 and block.count(MEMORY_CLOSE) == 1
    lines = block.split("\n")
    assert lines[1] == MEMORY_OPEN and lines[-1] == MEMORY_CLOSE


# -- the importer ------------------------------------------------------------------------------
_content = st.text(min_size=1, max_size=60).filter(lambda t: t.strip())
_moments = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2025, 12, 31))


@st.composite
def _conversations(draw) -> dict:
    turns = draw(st.integers(min_value=1, max_value=3))
    messages = []
    for _ in range(turns):
        messages += [
            {"role": "user", "content": draw(_content)},
            {"role": "assistant", "content": draw(_content)},
        ]
    suffix = draw(st.sampled_from(["", "Z", "+00:00"]))
    return {"created_at": draw(_moments).isoformat() + suffix, "messages": messages}


def _junk_text(text: str) -> bool:
    return "\n" not in text and "\r" not in text and bool(text.strip())


_junk = st.one_of(
    st.text(max_size=80).filter(_junk_text),  # anything at all
    st.sampled_from(["{", "[]", "null", "42", '"text"', '{"created_at": "2024-01-01"}']),
    _conversations().map(lambda c: {**c, "created_at": 1_700_000_000}),  # not ISO-8601
    _conversations().map(lambda c: {**c, "created_at": "3024-01-01T00:00:00"}),  # future
    _conversations().map(lambda c: {**c, "messages": c["messages"][:-1]}),  # no reply
    _conversations().map(lambda c: {**c, "messages": [{"role": "wizard", "content": "hi"}] * 2}),
    _conversations().map(lambda c: json.dumps(c)[:-1]),  # cut short
)
_lines = st.lists(
    st.one_of(
        _conversations().map(lambda c: ("valid", c)),
        _junk.map(lambda j: ("junk", j)),
        st.sampled_from(["", "   ", "\t"]).map(lambda b: ("blank", b)),
        st.sampled_from([b"\xff\xfe", b'{"a": "\xc3"}']).map(lambda b: ("bytes", b)),
    ),
    min_size=1,
    max_size=25,
)


def _identity(conversation: dict) -> tuple:
    moment = datetime.fromisoformat(conversation["created_at"])
    moment = moment.replace(tzinfo=None)  # every suffix drawn above means UTC
    # NUL is stored as U+FFFD (audit.py: PostgreSQL's JSONB cannot hold it), documented.
    return moment, tuple(
        (m["role"], m["content"].replace("\x00", "\ufffd")) for m in conversation["messages"]
    )


def test_importer_imports_valid_lines_once_and_reports_the_rest_by_number(services, tmp_path):
    from sqlalchemy import delete, select

    from caesar import audit
    from caesar.db.models import AuditLog
    from caesar.importer import import_file

    @given(_lines, st.booleans())
    @settings(
        max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    def check(lines, repeat_valid):
        if repeat_valid:  # duplicates within the file
            lines = lines + [line for line in lines if line[0] == "valid"]
        with services.db.write() as session:
            session.execute(delete(AuditLog))
        raw: list[bytes] = []
        for kind, item in lines:
            if kind == "bytes":
                raw.append(item)
            elif isinstance(item, dict):
                raw.append(json.dumps(item, ensure_ascii=False).encode())
            else:
                raw.append(item.encode())
        path = tmp_path / "import.jsonl"
        path.write_bytes(b"\n".join(raw) + b"\n")

        report = import_file(services, path, scope=Scope(OWNER))
        bad = [n for n, (kind, _) in enumerate(lines, start=1) if kind in ("junk", "bytes")]
        assert [e.line for e in report.errors] == bad
        assert all(e.error for e in report.errors)
        valid = [item for kind, item in lines if kind == "valid"]
        distinct = {_identity(c) for c in valid}
        assert report.imported == len(distinct)
        assert report.duplicates == len(valid) - len(distinct)

        with services.db.read() as session:
            rows = session.scalars(
                select(AuditLog).where(AuditLog.event_type == audit.CHAT_COMPLETED)
            ).all()
            stored = {
                (
                    r.created_at,
                    tuple((m["role"], m["content"]) for m in r.payload["messages"])
                    + (("assistant", r.payload["reply"]),),
                )
                for r in rows
            }
        assert len(rows) == len(distinct) and stored == distinct

        again = import_file(services, path, scope=Scope(OWNER))  # the same file twice adds nothing
        assert again.imported == 0 and again.duplicates == len(valid)
        assert [e.line for e in again.errors] == bad

    check()
