"""Time probes (issue #22): does "what did we talk about yesterday / last Tuesday / in the
spring?" bring that span's conversations into the prompt — and does topic recall hold when a
message also names a time?

Usage: .venv/bin/python bench/time_probes.py [--prompt-chars 2500,6000,12000] [--no-docs]
       (part of `make bench-quality`; CAESAR_SRC=/path/to/src runs another checkout's caesar)

Two histories of real LongMemEval chats (bench/time_history.py) are imported through
caesar.importer, learned with the shipped offline routes (SummariseWorker, memory.passages,
run_until_caught_up) and asked through the real `Brain.prepare` at a fixed `now`, shipped
settings, with the operator's zone set to Europe/Berlin by the `timezone` setting (where this
caesar has it; the expected spans are always Berlin's):

- **A**: Thursday 12 November 2026, 22:30 — chats on 3 days of every week over the last 150
  days, four today (00:35, 08:40, 14:10, 20:05), two yesterday, one on each other day of the
  past week, one on each calendar date a probe names, and eleven older ones (spring and winter
  2026, 2025, 2024).
- **B**: Sunday 11 January 2026, 21:15 — the same over 70 days (for this weekend, this year,
  a week across the new year).

A conversation is *shown* when its episode is in `ctx.recalled`: its dated line or excerpts
are in the past-conversations block. Probe families, each scored per kind and overall:

- **span**: a time-only message for every kind of reference in the issue, in varied wording;
  the expected conversations are those whose local start time falls in the span
  (bench/time_spans.py defines each). Scores: all of them shown; at least one; the share of
  shown conversations that lie outside the span. The issue's own messages are marked.
- **topic**: 30 single-session questions whose evidence chat is placed, asked plain and with a
  time phrase that covers the chat's date: evidence shown, both ways.
- **time + topic**: a knowledge update's two chats (the same thing, two values) on different
  dates; the message names the time of one: that one shown, and shown before the other.
- **gather**: 10 multi-session questions ("How many …", "total …") whose evidence chats are
  all placed: all shown.
- **robust**: "recently" (no span), absurd and future references, ordinary words that are not
  times ("may", "march", "second", "a while"): nothing breaks; conversations shown.
- **off-topic**: 30 LoCoMo questions about other people: the share of turns that inject anything.

Span probes whose span holds no conversation are dropped (listed in the detail file). The
full run rewrites the time-probes block of docs/recall-quality.md; every probe with what it
brought is written to bench/out/time-probes-<prompt_chars>.md.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from datetime import time as clock
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parent))

import recall_quality as rq  # puts the caesar under test on the path
import shown
import time_history as th
import time_spans as ts

from caesar.brain import Brain
from caesar.config import Settings
from caesar.services import Services

ZONE = "Europe/Berlin"
TZ = ZoneInfo(ZONE)
NOW_A = datetime(2026, 11, 12, 22, 30, tzinfo=TZ)
NOW_B = datetime(2026, 1, 11, 21, 15, tzinfo=TZ)
SEED = 22

SPAN_TEMPLATES = (
    "What did we talk about {t}?",
    "What did we discuss {t}?",
    "What did we chat about {t}?",
    "Remind me what we discussed {t}.",
    "What was I telling you {t}?",
    "Can you remind me what we talked about {t}?",
    "{T}, what did we talk about?",
)
TOPIC_TEMPLATES = (
    "{q} We talked about it {t}.",
    "Going back to what we discussed {t}: {q}",
    "{q} (I asked you about it {t}.)",
)


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


def references_a(now: datetime) -> list[Ref]:
    d, w = ts.day, ts.weekday
    return [
        ("named day", "today", "today", [d(now, 0)], None),
        ("named day", "this morning", "this morning", [ts.part_of_today(now, 5, 12)],
         "What did we talk about this morning?"),
        ("named day", "this afternoon", "this afternoon", [ts.part_of_today(now, 12, 18)], None),
        ("named day", "tonight", "tonight", [ts.part_of_today(now, 18, 24)], None),
        ("named day", "this evening", "this evening", [ts.part_of_today(now, 18, 24)], None),
        ("named day", "yesterday", "yesterday", [d(now, 1)], "What did we talk about yesterday?"),
        ("named day", "last night", "last night", [ts.last_night(now)], None),
        ("named day", "the day before yesterday", "the day before yesterday", [d(now, 2)], None),
        ("counted back", "N days ago (words)", "three days ago", [d(now, 3)],
         "Remind me what we discussed three days ago."),
        ("counted back", "N days ago (digits)", "6 days ago", [d(now, 6)], None),
        ("counted back", "N days ago (words)", "four days ago", [d(now, 4)], None),
        ("counted back", "N days ago (digits)", "9 days ago", [d(now, 9)], None),
        ("counted back", "a few days ago", "a few days ago", [ts.days(now, 5, 2)], None),
        ("counted back", "N weeks ago (words)", "two weeks ago", [ts.week(now, 2)],
         "What were we talking about two weeks ago?"),
        ("counted back", "N weeks ago (digits)", "3 weeks ago", [ts.week(now, 3)], None),
        ("counted back", "a couple of weeks ago", "a couple of weeks ago", [ts.week(now, 2)], None),
        ("counted back", "N months ago (words)", "two months ago", [ts.month(now, 2)], None),
        ("counted back", "N months ago (digits)", "3 months ago", [ts.month(now, 3)], None),
        ("counted back", "a month ago", "a month ago", [ts.month(now, 1)], None),
        ("counted back", "a year ago", "a year ago", [ts.year(now, 1)], None),
        ("counted back", "N years ago (words)", "two years ago", [ts.year(now, 2)], None),
        ("counted back", "N years ago (digits)", "2 years ago", [ts.year(now, 2)], None),
        ("period", "last week", "last week", [ts.week(now, 1)], "What did we talk about last week?"),
        ("period", "this week", "this week", [ts.week(now, 0)], None),
        ("period", "earlier this week", "earlier this week", [ts.earlier_this_week(now)], None),
        ("period", "last weekend", "last weekend", [ts.weekend(now, 1)], None),
        ("period", "last month", "last month", [ts.month(now, 1)], "What did we discuss last month?"),
        ("period", "this month", "this month", [ts.month(now, 0)], None),
        ("period", "earlier this month", "earlier this month", [ts.earlier_this_month(now)], None),
        ("period", "last year", "last year", [ts.year(now, 1)], None),
        ("weekday", "last <weekday>", "last Tuesday", [w(now, "Tuesday")], None),
        ("weekday", "on <weekday>", "on Monday", [w(now, "Monday")], None),
        ("weekday", "last <weekday>", "last Saturday", [w(now, "Saturday")], None),
        ("weekday", "on <weekday>", "on Friday", [w(now, "Friday")], None),
        ("weekday", "last <weekday>", "last Thursday", [w(now, "Thursday")],
         "What did we chat about last Thursday?"),
        ("weekday", "on <weekday>", "on Sunday", [w(now, "Sunday")], None),
        ("month / season", "month without a year", "in October", [ts.named_month(now, "October")], None),
        ("month / season", "month without a year", "back in August",
         [ts.named_month(now, "August")], "What did we discuss back in August?"),
        ("month / season", "month without a year", "in June", [ts.named_month(now, "June")], None),
        ("month / season", "month without a year", "in April", [ts.named_month(now, "April")], None),
        ("month / season", "month without a year", "in December",
         [ts.named_month(now, "December")], None),
        ("month / season", "between <month> and <month>", "between March and May",
         [ts.between_months(now, "March", "May")], None),
        ("month / season", "season", "in the spring", [ts.season(now, "spring")], None),
        ("month / season", "season", "last winter", [ts.season(now, "winter")], None),
        ("combination", "yesterday or the day before", "yesterday or the day before",
         [d(now, 1), d(now, 2)], None),
        ("combination", "<weekday> or <weekday>", "on Monday or Tuesday",
         [w(now, "Monday"), w(now, "Tuesday")], None),
        ("calendar date", "day month year", "on 3 October 2026",
         [ts.calendar_day(now, date(2026, 10, 3))], None),
        ("calendar date", "month day, no year", "on September 14th",
         [ts.calendar_day(now, date(2026, 9, 14))], None),
        ("calendar date", "ISO date", "on 2026-08-05", [ts.calendar_day(now, date(2026, 8, 5))], None),
    ]  # fmt: skip


def references_b(now: datetime) -> list[Ref]:
    d, w = ts.day, ts.weekday
    return [
        ("named day", "today", "today", [d(now, 0)], None),
        ("named day", "this morning", "this morning", [ts.part_of_today(now, 5, 12)], None),
        ("named day", "this afternoon", "this afternoon", [ts.part_of_today(now, 12, 18)], None),
        ("named day", "yesterday", "yesterday", [d(now, 1)], None),
        ("named day", "the day before yesterday", "the day before yesterday", [d(now, 2)], None),
        ("weekday", "on <weekday>", "on Saturday", [w(now, "Saturday")], None),
        ("weekday", "last <weekday>", "last Sunday", [w(now, "Sunday")], None),
        ("period", "this weekend", "this weekend", [ts.weekend(now, 0)], None),
        ("period", "last weekend", "last weekend", [ts.weekend(now, 1)], None),
        ("period", "this week", "this week", [ts.week(now, 0)], None),
        ("period", "earlier this week", "earlier this week", [ts.earlier_this_week(now)], None),
        ("period", "this year", "this year", [ts.year(now, 0)], None),
        ("period", "earlier this year", "earlier this year", [ts.earlier_this_year(now)], None),
        ("period", "last month", "last month", [ts.month(now, 1)], None),
        ("period", "this month", "this month", [ts.month(now, 0)], None),
        ("counted back", "a couple of weeks ago", "a couple of weeks ago", [ts.week(now, 2)], None),
        ("counted back", "N weeks ago (words)", "three weeks ago", [ts.week(now, 3)], None),
        ("counted back", "N days ago (digits)", "8 days ago", [d(now, 8)], None),
        ("month / season", "month without a year", "in December",
         [ts.named_month(now, "December")], None),
        ("calendar date", "day month, no year", "on 2 January", [ts.calendar_day(now, date(2026, 1, 2))], None),
    ]  # fmt: skip


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


ROBUST = (
    ("recently (no span)", "What have we talked about recently?"),
    ("absurd", "What did we talk about 100000 years ago?"),
    ("absurd", "Remind me what we discussed 99999999999999999999 days ago."),
    ("future", "What will we talk about next week?"),
    ("future", "What are we going to discuss tomorrow?"),
    ("ordinary words", "May I ask what you think about my second attempt at sourdough?"),
    ("ordinary words", "It's been a while; could we march through my to-do list?"),
    ("ordinary words", "Give me a second, I may have a question about the spring in my mattress."),
)


def other_probes(scenario: Scenario) -> None:
    for kind, text in ROBUST:
        scenario.probes.append(Probe("robust", kind, text))
    locomo = rq.load_locomo(rq.DATA / "locomo" / "locomo_dev.json")[0]
    for q in [q for q in locomo.questions if q.category == "cat4"][:30]:
        scenario.probes.append(Probe("off-topic", "LoCoMo, other people", q.text))


def scenarios() -> tuple[list[Scenario], th.Pool]:
    pool = th.load_pool([rq.DATA / "longmemeval_s", rq.DATA / "longmemeval_s_more"])
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
    span_probes(a, references_a(NOW_A))
    question_probes(a, pool)
    other_probes(a)
    forced_b = {0: [clock(9, 10), clock(15, 30), clock(19, 40)], 1: [random_time],
                2: [random_time], 7: [random_time], 8: [random_time]}  # fmt: skip
    older_b = [date(2026, 1, 2), date(2025, 8, 16), date(2025, 6, 7), date(2024, 12, 20)]
    slots = th.schedule(NOW_B, 70, forced_b, older_b, SEED + 1)
    b = Scenario("B", NOW_B, th.place(pool, slots, SEED + 1, with_questions=False))
    span_probes(b, references_b(NOW_B), start=3)
    return [a, b], pool


# -- asking ----------------------------------------------------------------------------------
@dataclass
class Outcome:
    scenario: Scenario
    probe: Probe
    shown: list[str]  # session keys, in the block's order
    chars: int
    error: str | None = None


def ask(
    scenario: Scenario, embedder: Any, budgets: list[int | None]
) -> tuple[dict[int, list[Outcome]], dict[str, Any]]:
    """Every probe of `scenario` at every budget; and what the history came to."""
    results: dict[int, list[Outcome]] = defaultdict(list)
    now = scenario.now.astimezone(UTC).replace(tzinfo=None)
    with tempfile.TemporaryDirectory(prefix="caesar-time-") as tmp:
        home = Path(tmp)
        built = rq.build(
            th.haystack(scenario.name, scenario.placed),
            embedder,
            home,
            rq.bench_settings(home, budgets[0], ZONE),
        )
        others = [Services.build(rq.bench_settings(home, b, ZONE)) for b in budgets[1:]]
        for other in others:
            other.embedder.set(embedder)
        try:
            for services in (built.services, *others):
                budget = rq.budget_of(services.settings)
                brain = Brain(services)
                for probe in scenario.probes:
                    results[budget].append(one(brain, scenario, probe, now, built))
        finally:
            built.services.close()
            for other in others:
                other.close()
    facts = {
        "placed": len(scenario.placed),
        "episodes": len(built.session_of_episode),
        "refused": built.rejected,
    }
    return results, facts


def one(brain: Brain, scenario: Scenario, probe: Probe, now: datetime, built: Any) -> Outcome:
    try:
        ctx = brain.prepare(probe.text, now=now)
    except Exception as exc:  # noqa: BLE001 - a probe that breaks the turn is what is counted
        return Outcome(scenario, probe, [], 0, f"{type(exc).__name__}: {exc}")
    keys = shown.shown_sessions(ctx.recalled, built.sessions_of_episode)
    chars = shown.memory_chars(ctx.messages[0]["content"])
    return Outcome(scenario, probe, keys, chars, ctx.recall_error)


# -- scoring ---------------------------------------------------------------------------------
@dataclass
class Score:
    n: int = 0
    all: int = 0
    any: int = 0
    shown: int = 0
    outside: int = 0  # shown but not expected
    expected: int = 0
    expected_shown: int = 0
    ordered: int = 0  # time + topic: the named chat shown, and before the other
    other: int = 0  # time + topic: the other chat shown
    injected: int = 0  # anything shown
    errors: int = 0
    chars: int = 0
    max_chars: int = 0

    def add(self, o: Outcome) -> None:
        got = set(o.shown)
        self.n += 1
        self.all += o.probe.expected <= got
        self.any += bool(o.probe.expected & got)
        self.shown += len(got)
        self.outside += len(got - o.probe.expected)
        self.expected += len(o.probe.expected)
        self.expected_shown += len(o.probe.expected & got)
        named = [k for k in o.shown if k in o.probe.expected | o.probe.other]
        self.ordered += bool(named) and named[0] in o.probe.expected
        self.other += bool(o.probe.other & got)
        self.injected += bool(got)
        self.errors += o.error is not None
        self.chars += o.chars
        self.max_chars = max(self.max_chars, o.chars)

    def rate(self, part: int, whole: int | None = None) -> str:
        whole = self.n if whole is None else whole
        return f"{part / whole:.3f}" if whole else "–"

    def chars_cell(self) -> str:
        return f"{self.chars / self.n:,.0f} / {self.max_chars:,}" if self.n else "–"


def tally(outcomes: list[Outcome]) -> dict[tuple[str, str], Score]:
    """(family, row) → score; row "all" for the whole family; span rows by reference group,
    plus the issue's own messages."""
    scores: dict[tuple[str, str], Score] = defaultdict(Score)
    for o in outcomes:
        p = o.probe
        rows = [p.group or p.kind, "all"] + (["the issue's messages"] if p.issue else [])
        for row in rows:
            scores[(p.family, row)].add(o)
    return scores


def report(outcomes: list[Outcome], budget: int, facts: dict[str, Any]) -> str:
    s = tally(outcomes)
    zone = "set" if "timezone" in Settings.model_fields else "not a setting of this caesar"
    head = (
        f"Histories: A — {facts['A']['placed']} conversations, {facts['A']['episodes']} "
        f"episodes, now {NOW_A:%a %d %b %Y %H:%M}; B — {facts['B']['placed']} conversations, "
        f"{facts['B']['episodes']} episodes, now {NOW_B:%a %d %b %Y %H:%M}; zone {ZONE} "
        f"(`timezone` {zone}); `prompt_chars` {budget:,}; shipped settings otherwise."
    )
    groups = [
        "named day", "counted back", "period", "weekday", "month / season", "combination",
        "calendar date", "the issue's messages", "all",
    ]  # fmt: skip
    span = [
        "| reference (n) | all of the span shown | any shown | shown from outside the span "
        "| in span / shown, mean | chars mean / max |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for g in groups:
        t = s.get(("span", g))
        if t is None:
            continue
        label = f"**all** ({t.n})" if g == "all" else f"{g} ({t.n})"
        span.append(
            f"| {label} | {t.rate(t.all)} | {t.rate(t.any)} | {t.rate(t.outside, t.shown)} "
            f"| {t.expected / t.n:.1f} / {t.shown / t.n:.1f} | {t.chars_cell()} |"
        )
    plain, timed = s[("topic", "all")], s[("topic+time", "all")]
    lost, gained = topic_changes(outcomes)
    topic = [
        "| topic question (n) | evidence shown | chars mean / max |",
        "| --- | ---: | ---: |",
        f"| plain ({plain.n}) | {plain.rate(plain.any)} | {plain.chars_cell()} |",
        f"| with a time covering its date ({timed.n}) | {timed.rate(timed.any)} "
        f"| {timed.chars_cell()} |",
    ]
    pair = [
        "| time + topic (n) | the named chat shown | shown before the other | the other shown |",
        "| --- | ---: | ---: | ---: |",
    ]
    for row in ("older chat named", "newer chat named", "all"):
        t = s.get(("time+topic", row))
        if t is not None:
            label = f"**all** ({t.n})" if row == "all" else f"{row} ({t.n})"
            pair.append(f"| {label} | {t.rate(t.any)} | {t.rate(t.ordered)} | {t.rate(t.other)} |")
    g = s[("gather", "all")]
    robust = [
        "| message (n) | broke the turn | conversations shown, mean |",
        "| --- | ---: | ---: |",
    ]
    for kind in dict.fromkeys(k for k, _ in ROBUST):
        t = s[("robust", kind)]
        robust.append(f"| {kind} ({t.n}) | {t.errors} | {t.shown / t.n:.1f} |")
    off = s[("off-topic", "all")]
    errors = sum(o.error is not None for o in outcomes)
    return "\n".join(
        [
            head,
            "",
            "Time-only messages (span probes):",
            "",
            *span,
            "",
            "Topic questions, plain and with a time phrase that covers the evidence chat's date "
            f"(lost with the time: {lost}, gained: {gained}):",
            "",
            *topic,
            "",
            "A time and a topic, the same topic in another chat outside the span "
            "(knowledge updates: two chats, two values):",
            "",
            *pair,
            "",
            f"Gathering questions ({g.n}, {g.expected / g.n:.1f} evidence chats each): all shown "
            f"{g.rate(g.all)}, any {g.rate(g.any)}, evidence chats shown "
            f"{g.rate(g.expected_shown, g.expected)}; chars {g.chars_cell()}.",
            "",
            *robust,
            "",
            f"Off-topic (LoCoMo questions about other people, asked of A): "
            f"{off.rate(off.injected)} of {off.n} turns injected a past conversation. "
            f"Turns that broke or recorded a recall error, all probes: {errors}.",
        ]
    )


def topic_changes(outcomes: list[Outcome]) -> tuple[int, int]:
    plain = [o for o in outcomes if o.probe.family == "topic"]
    timed = [o for o in outcomes if o.probe.family == "topic+time"]
    lost = gained = 0
    for p, t in zip(plain, timed, strict=True):
        a, b = bool(p.probe.expected & set(p.shown)), bool(t.probe.expected & set(t.shown))
        lost += a and not b
        gained += b and not a
    return lost, gained


def curve(by_budget: dict[int, list[Outcome]]) -> str:
    lines = [
        "| prompt_chars | span: all shown | any shown | from outside | the issue's messages "
        "| topic plain / with a time | time + topic: named shown first | gather: all shown "
        "| span chars mean / max |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for budget, outcomes in by_budget.items():
        s = tally(outcomes)
        sp, iss = s[("span", "all")], s[("span", "the issue's messages")]
        pl, tm, tt, g = (
            s[("topic", "all")],
            s[("topic+time", "all")],
            s[("time+topic", "all")],
            s[("gather", "all")],
        )
        lines.append(
            f"| {budget:,} | {sp.rate(sp.all)} | {sp.rate(sp.any)} | {sp.rate(sp.outside, sp.shown)} "
            f"| {iss.all} of {iss.n} | {pl.rate(pl.any)} / {tm.rate(tm.any)} | {tt.rate(tt.ordered)} "
            f"| {g.rate(g.all)} | {sp.chars_cell()} |"
        )
    return "\n".join(lines)


def detail(outcomes: list[Outcome], dropped: list[str]) -> str:
    """Every probe with what it brought: ✓ in the span (or evidence), ✗ not."""
    lines = ["# Time probes, one by one", ""]
    for o in outcomes:
        when = {p.key: p.when for p in o.scenario.placed}
        mark = "ALL" if o.probe.expected and o.probe.expected <= set(o.shown) else (
            "some" if o.probe.expected & set(o.shown) else "none"
        )  # fmt: skip
        lines.append(
            f"- [{o.scenario.name}] {o.probe.family} / {o.probe.kind}: {o.probe.text!r} — "
            f"{mark} of {len(o.probe.expected)} expected"
            + (f"; ERROR {o.error}" if o.error else "")
        )
        if o.probe.expected:
            dates = ", ".join(
                f"{when[k]:%a %d %b %Y %H:%M}" for k in sorted(o.probe.expected, key=when.get)
            )
            lines.append(f"  - expected: {dates}")
        for k in o.shown:
            sign = "✓" if k in o.probe.expected else ("other" if k in o.probe.other else "✗")
            lines.append(f"  - shown {sign} {when[k]:%a %d %b %Y %H:%M} {k}")
    lines += ["", "Dropped:", *(f"- {d}" for d in dropped)]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompt-chars", default=None, help="e.g. 6000 or 2500,6000,12000")
    parser.add_argument("--no-docs", action="store_true", help="do not rewrite the docs block")
    args = parser.parse_args()
    budgets = rq.parse_budgets(args.prompt_chars)
    started = time.monotonic()
    print(f"caesar from {rq.SRC}", flush=True)
    from caesar.embeddings import MiniLMEmbedder

    real = MiniLMEmbedder(
        Settings(home=rq.OUT, embedder={"cache_dir": rq.OUT / "models", "threads": 2})
    )
    embedder = rq.CachedEmbedder(real, rq.OUT / "embedding-cache.sqlite")
    histories, _pool = scenarios()
    by_budget: dict[int, list[Outcome]] = defaultdict(list)
    facts: dict[str, Any] = {}
    for scenario in histories:
        results, facts[scenario.name] = ask(scenario, embedder, budgets)
        for budget, outcomes in results.items():
            by_budget[budget].extend(outcomes)
        print(f"[{time.monotonic() - started:5.0f}s] history {scenario.name} asked", flush=True)
    dropped = [d for h in histories for d in h.dropped]
    texts = []
    for budget, outcomes in by_budget.items():
        rq.OUT.mkdir(parents=True, exist_ok=True)
        (rq.OUT / f"time-probes-{budget}.md").write_text(detail(outcomes, dropped))
        texts.append(report(outcomes, budget, facts))
    seconds = round(time.monotonic() - started)
    print(f"\nembeddings: {embedder.hits} cached, {embedder.misses} computed\n")
    text = "\n\n".join(texts) + f"\n\nRun time: {seconds} s."
    print(text)
    table = curve(by_budget) + f"\n\nRun time: {seconds} s." if len(by_budget) > 1 else ""
    if table:
        print("\nBy `prompt_chars`:\n\n" + table)
    if dropped:
        print("\ndropped: " + "; ".join(dropped))
    if not args.no_docs:
        if table:
            rq.write_doc(table, "time-budget-curve")
        elif budgets == [None]:
            rq.write_doc(text, "time-probes")
        print(f"\nwrote {rq.DOC.relative_to(rq.ROOT)}")


if __name__ == "__main__":
    main()
