"""What the time probes ask (bench/time_probes.py asks it and scores): the two histories, each
probe's message and the conversations it should bring (the references and messages are data:
bench/data/time_probes.json). What each time phrase means: time_spans.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from datetime import time as clock
from pathlib import Path
from zoneinfo import ZoneInfo

import recall_quality as rq  # puts the caesar under test on the path
import time_history as th
import time_spans as ts

ZONE = "Europe/Berlin"
TZ = ZoneInfo(ZONE)
NOW_A = datetime(2026, 11, 12, 22, 30, tzinfo=TZ)
NOW_B = datetime(2026, 1, 11, 21, 15, tzinfo=TZ)
SEED = 22

_DATA = json.loads((Path(__file__).parent / "data" / "time_probes.json").read_text())
SPAN_TEMPLATES = tuple(_DATA["span_templates"])
TOPIC_TEMPLATES = tuple(_DATA["topic_templates"])


@dataclass
class Probe:
    family: str  # span, topic, topic+time, time+topic, gather, robust, off-topic
    kind: str
    text: str
    expected: frozenset[str] = frozenset()
    other: frozenset[str] = frozenset()  # time + topic: the same-topic chat outside the span
    issue: bool = False  # one of the messages the issue reports
    group: str = ""  # span: the reference's family (named day, counted back, …)


@dataclass
class Scenario:
    name: str
    now: datetime
    placed: list[th.Placed]
    probes: list[Probe] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # span probes with nothing in the span


# -- the span probes -------------------------------------------------------------------------
Ref = tuple[str, str, str, list[ts.Span], str | None]  # group, kind, phrase, spans, exact text


def references(name: str, now: datetime) -> list[Ref]:
    """History `name`'s span references (bench/data/time_probes.json), their spans resolved
    at `now`: each a time_spans function and its arguments (a date as ISO text)."""

    def arg(value: object) -> object:
        return (
            date.fromisoformat(value) if isinstance(value, str) and value[:1].isdigit() else value
        )

    return [
        (
            group,
            kind,
            phrase,
            [getattr(ts, f)(now, *map(arg, a)) for f, *a in spans],
            exact[0] if exact else None,
        )
        for group, kind, phrase, spans, *exact in _DATA["references"][name]
    ]


def span_probes(scenario: Scenario, refs: list[Ref], start: int = 0) -> None:
    for i, (group, kind, phrase, spans, exact) in enumerate(refs, start=start):
        expected = frozenset(p.key for p in scenario.placed if ts.contains(spans, p.when))
        template = SPAN_TEMPLATES[i % len(SPAN_TEMPLATES)]
        text = exact or template.format(t=phrase, T=phrase[0].upper() + phrase[1:])
        if not expected:
            scenario.dropped.append(f"{scenario.name}: {text} (nothing in the span)")
            continue
        scenario.probes.append(
            Probe("span", kind, text, expected, issue=exact is not None, group=group)
        )


# -- time phrases that cover a date, for the topic probes ----------------------------------
def covering(now: datetime, when: datetime) -> list[tuple[str, list[ts.Span]]]:
    """Phrases whose span holds `when`, the narrowest first."""
    back = (now.date() - when.date()).days
    weeks = ((now.date() - timedelta(days=now.weekday()) - when.date()).days + 6) // 7
    months = (now.year - when.year) * 12 + now.month - when.month
    out: list[tuple[str, list[ts.Span]]] = []
    if back == 0:
        out.append(("today", [ts.day(now, 0)]))
    if back == 1:
        out.append(("yesterday", [ts.day(now, 1)]))
    if back == 2:
        out.append(("the day before yesterday", [ts.day(now, 2)]))
    if 2 <= back <= 7:
        name = ts.WEEKDAYS[when.weekday()]
        out.append((f"on {name}", [ts.weekday(now, name)]))
        out.append((f"{ts.in_words(back)} days ago", [ts.day(now, back)]))
    if back > 0 and weeks == 1:
        out.append(("last week", [ts.week(now, 1)]))
    if weeks in (2, 3):
        out.append((f"{ts.in_words(weeks)} weeks ago", [ts.week(now, weeks)]))
    if months == 0 and back > 0:
        out.append(("earlier this month", [ts.earlier_this_month(now)]))
    if months == 1:
        out.append(("last month", [ts.month(now, 1)]))
    if 2 <= months <= 11:
        name = ts.MONTHS[when.month - 1]
        out.append((f"in {name}", [ts.named_month(now, name)]))
        out.append((f"{ts.in_words(months)} months ago", [ts.month(now, months)]))
    if now.year - when.year == 1:
        out.append(("last year", [ts.year(now, 1)]))
    if now.year - when.year >= 2:
        out.append(
            (f"{ts.in_words(now.year - when.year)} years ago", [ts.year(now, now.year - when.year)])
        )
    checked = [(p, s) for p, s in out if ts.contains(s, when)]
    assert checked == out, (when, out)
    return out


def without_now(question: str) -> str:
    return question.replace(" now?", "?").replace(" so far?", "?")


def question_probes(scenario: Scenario, pool: th.Pool) -> None:
    when = {p.key: p.when for p in scenario.placed}
    for i, q in enumerate(pool.topic):
        [key] = q.evidence
        phrases = covering(scenario.now, when[key])
        phrase, _ = phrases[i % min(2, len(phrases))]
        template = TOPIC_TEMPLATES[i % len(TOPIC_TEMPLATES)]
        scenario.probes.append(Probe("topic", q.qtype, q.text, frozenset(q.evidence)))
        scenario.probes.append(
            Probe("topic+time", q.qtype, template.format(q=q.text, t=phrase), frozenset(q.evidence))
        )
    for q in pool.gather:
        scenario.probes.append(Probe("gather", q.qtype, q.text, frozenset(q.evidence)))
    for q in pool.update:
        for this, that in (q.evidence, reversed(q.evidence)):
            fitting = [
                p for p, spans in covering(scenario.now, when[this])
                if not ts.contains(spans, when[that])
            ]  # fmt: skip
            if not fitting:
                scenario.dropped.append(f"{scenario.name}: {q.qid}: no phrase parts its chats")
                continue
            kind = "older chat named" if this == q.evidence[0] else "newer chat named"
            text = f"Going back to what we discussed {fitting[0]}: {without_now(q.text)}"
            scenario.probes.append(
                Probe("time+topic", kind, text, frozenset({this}), frozenset({that}))
            )


ROBUST = [tuple(r) for r in _DATA["robust"]]


def other_probes(scenario: Scenario) -> None:
    for kind, text in ROBUST:
        scenario.probes.append(Probe("robust", kind, text))
    locomo = rq.load_locomo(rq.DATA / "locomo" / "locomo_dev.json")[0]
    for q in [q for q in locomo.questions if q.category == "cat4"][:30]:
        scenario.probes.append(Probe("off-topic", "LoCoMo, other people", q.text))


def scenarios() -> tuple[list[Scenario], th.Pool]:
    pool = th.load_pool()
    random_time = None
    forced_a = {0: [clock(0, 35), clock(8, 40), clock(14, 10), clock(20, 5)],
                1: [clock(10, 15), clock(21, 40)], 2: [random_time], 3: [random_time],
                4: [random_time], 5: [random_time], 6: [random_time], 7: [random_time]}  # fmt: skip
    calendar_a = [date(2026, 10, 3), date(2026, 9, 14), date(2026, 8, 5)]
    older_a = [date(2026, 5, 9), date(2026, 4, 18), date(2026, 3, 14), date(2026, 2, 11),
               date(2026, 1, 20), date(2025, 12, 15), date(2025, 11, 20), date(2025, 9, 6),
               date(2025, 5, 24), date(2024, 11, 16), date(2024, 3, 2)]  # fmt: skip
    slots = th.schedule(NOW_A, 150, forced_a, calendar_a + older_a, SEED)
    a = Scenario("A", NOW_A, th.place(pool, slots, SEED))
    span_probes(a, references("A", NOW_A))
    question_probes(a, pool)
    other_probes(a)
    forced_b = {0: [clock(9, 10), clock(15, 30), clock(19, 40)], 1: [random_time],
                2: [random_time], 7: [random_time], 8: [random_time]}  # fmt: skip
    older_b = [date(2026, 1, 2), date(2025, 8, 16), date(2025, 6, 7), date(2024, 12, 20)]
    slots = th.schedule(NOW_B, 70, forced_b, older_b, SEED + 1)
    b = Scenario("B", NOW_B, th.place(pool, slots, SEED + 1, with_questions=False))
    span_probes(b, references("B", NOW_B), start=3)
    return [a, b], pool
