"""What the time probes ask (bench/time_probes.py asks it and scores): the two histories, each
probe's message and the conversations it should bring. The families and histories are
described in time_probes.py's docstring; what each time phrase means, in time_spans.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from datetime import time as clock
from zoneinfo import ZoneInfo

import recall_quality as rq  # puts the caesar under test on the path
import time_history as th
import time_spans as ts

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
