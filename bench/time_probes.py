"""Time probes (issue #22): does "what did we talk about yesterday / last Tuesday / in the
spring?" bring that span's conversations into the prompt — and does topic recall hold when a
message also names a time?

Usage: .venv/bin/python bench/time_probes.py [--prompt-chars 2500,6000,12000] [--no-docs]
       (part of `make bench-quality`; CAESAR_SRC=/path/to/src runs another checkout's caesar)

Two histories of real chats placed on dates the bench chooses (time_history.py), the probes
(time_probe_set.py) asked through `Brain.prepare`; a conversation is *shown* when its episode is
in `ctx.recalled`. The full run rewrites the time-probes block of docs/recall-quality.md; every
probe with what it brought goes to bench/out/time-probes-<prompt_chars>.md. Method:
bench/README.md.
"""

from __future__ import annotations

import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import benchlib
import recall_quality as rq  # puts the caesar under test on the path
import recall_report
import shown
import time_history as th
from benchlib import OWNER
from shown import ShownTally
from time_probe_set import NOW_A, NOW_B, ROBUST, ZONE, Probe, Scenario, scenarios

import caesar
from caesar.brain import Brain
from caesar.config import Settings
from caesar.memory.scope import Scope
from caesar.services import Services


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
        ctx = brain.prepare(probe.text, now=now, scope=Scope(OWNER))
    except Exception as exc:  # noqa: BLE001 - a probe that breaks the turn is what is counted
        return Outcome(scenario, probe, [], 0, f"{type(exc).__name__}: {exc}")
    keys = shown.shown_sessions(ctx.recalled, built.sessions_of_episode)
    chars = shown.memory_chars(ctx.messages[0]["content"])
    return Outcome(scenario, probe, keys, chars, ctx.recall_error)


# -- scoring ---------------------------------------------------------------------------------
@dataclass
class Score(ShownTally):  # n, all, any, chars, max_chars; share() and chars_cell()
    shown: int = 0
    outside: int = 0  # shown but not expected
    expected: int = 0
    expected_shown: int = 0
    ordered: int = 0  # time + topic: the named chat shown, and before the other
    other: int = 0  # time + topic: the other chat shown
    injected: int = 0  # anything shown
    errors: int = 0

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
            f"| {label} | {t.share(t.all)} | {t.share(t.any)} | {t.share(t.outside, t.shown)} "
            f"| {t.expected / t.n:.1f} / {t.shown / t.n:.1f} | {t.chars_cell()} |"
        )
    plain, timed = s[("topic", "all")], s[("topic+time", "all")]
    lost, gained = topic_changes(outcomes)
    topic = [
        "| topic question (n) | evidence shown | chars mean / max |",
        "| --- | ---: | ---: |",
        f"| plain ({plain.n}) | {plain.share(plain.any)} | {plain.chars_cell()} |",
        f"| with a time covering its date ({timed.n}) | {timed.share(timed.any)} "
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
            pair.append(
                f"| {label} | {t.share(t.any)} | {t.share(t.ordered)} | {t.share(t.other)} |"
            )
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
            f"{g.share(g.all)}, any {g.share(g.any)}, evidence chats shown "
            f"{g.share(g.expected_shown, g.expected)}; chars {g.chars_cell()}.",
            "",
            *robust,
            "",
            f"Off-topic (LoCoMo questions about other people, asked of A): "
            f"{off.share(off.injected)} of {off.n} turns injected a past conversation. "
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
            f"| {budget:,} | {sp.share(sp.all)} | {sp.share(sp.any)} | {sp.share(sp.outside, sp.shown)} "
            f"| {iss.all} of {iss.n} | {pl.share(pl.any)} / {tm.share(tm.any)} | {tt.share(tt.ordered)} "
            f"| {g.share(g.all)} | {sp.chars_cell()} |"
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


def time_probes(
    prompt_chars: Annotated[str | None, "e.g. 6000 or 2500,6000,12000"] = None,
    no_docs: Annotated[bool, "do not rewrite the docs block"] = False,
) -> None:
    budgets = recall_report.parse_budgets(prompt_chars)
    started = time.monotonic()
    print(f"caesar from {Path(caesar.__file__).parent}", flush=True)
    embedder = rq.cached_embedder(threads=2)
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
    if not no_docs:
        if table:
            recall_report.write_doc(table, "time-budget-curve")
        elif budgets == [None]:
            recall_report.write_doc(text, "time-probes")
        print(f"\nwrote {recall_report.DOC.relative_to(rq.ROOT)}")


if __name__ == "__main__":
    benchlib.cli(time_probes)
