""" "Evidence shown" (issue #22): do *all* the conversations a question needs reach the prompt?
The conversations behind `ctx.recalled` of the real `Brain.prepare`, tallied per dataset, budget
and category (bench/recall_quality.py asks; bench/README.md says what is counted).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from prompt_quality import memory_chars, present, toks


@dataclass
class ShownTally:
    n: int = 0
    all: int = 0
    any: int = 0
    answerable: int = 0
    answered: int = 0
    chars: int = 0
    max_chars: int = 0
    newest_n: int = 0
    newest_first: int = 0

    def share(self, part: int, whole: int | None = None) -> str:
        whole = self.n if whole is None else whole
        return f"{part / whole:.3f}" if whole else "–"

    def chars_cell(self) -> str:
        return f"{self.chars / self.n:,.0f} / {self.max_chars:,}" if self.n else "–"


# (dataset, budget, category) → tally; category "all" holds every question
Tallies = dict[tuple[str, int, str], ShownTally]


def shown_sessions(recalled: Iterable[Any], sessions_of_episode: dict[int, list[str]]) -> list[str]:
    """The sessions behind the episodes in the block, in the block's order (an episode of a
    chat that several identical sessions were imported as stands for each of them)."""
    out: list[str] = []
    for episode in recalled:
        for key in sessions_of_episode.get(episode.episode_id, []):
            if key not in out:
                out.append(key)
    return out


def score(
    tallies: Tallies,
    dataset: str,
    budget: int,
    category: str,
    evidence: frozenset[str],
    ctx: Any,
    sessions_of_episode: dict[int, list[str]],
    answer: str | None,
    dates: dict[str, datetime],
) -> None:
    """One question at one budget. `answer`: None when it is not written in its evidence."""
    prompt = ctx.messages[0]["content"]
    shown = shown_sessions(ctx.recalled, sessions_of_episode)
    chars = memory_chars(prompt)
    newest = (
        max(evidence, key=lambda k: dates[k])
        if category == "knowledge-update" and len(evidence) > 1
        else None
    )
    for cat in (category, "all"):
        tally = tallies[(dataset, budget, cat)]
        tally.n += 1
        tally.all += evidence <= set(shown)
        tally.any += bool(evidence & set(shown))
        tally.chars += chars
        tally.max_chars = max(tally.max_chars, chars)
        if answer is not None:
            tally.answerable += 1
            tally.answered += bool(present(answer, set(toks(prompt))))
        if newest is not None:
            tally.newest_n += 1
            order = [key for key in shown if key in evidence]  # newest shown first among them?
            tally.newest_first += bool(order) and order[0] == newest


def table(tallies: Tallies, dataset: str, budget: int) -> str:
    cats = sorted({c for d, b, c in tallies if d == dataset and b == budget and c != "all"})
    lines = [
        "| category (n) | all evidence shown | any evidence shown | answer in prompt (n) "
        "| past-conversation chars, mean / max |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for cat in [*cats, "all"]:
        t = tallies[(dataset, budget, cat)]
        label = f"**all** ({t.n})" if cat == "all" else f"{cat} ({t.n})"
        lines.append(
            f"| {label} | {t.share(t.all)} | {t.share(t.any)} "
            f"| {t.share(t.answered, t.answerable)} ({t.answerable}) | {t.chars_cell()} |"
        )
    t = tallies[(dataset, budget, "all")]
    if t.newest_n:
        lines.append(
            f"\nKnowledge updates, newest evidence shown first among the evidence in the block: "
            f"{t.share(t.newest_first, t.newest_n)} of {t.newest_n}."
        )
    return "\n".join(lines)


def curve(tallies: Tallies, budgets: Sequence[int]) -> str:
    """One row per budget: the figures the issue's targets are read from."""

    def cell(dataset: str, budget: int, cat: str, what: str) -> str:
        t = tallies.get((dataset, budget, cat))
        if t is None or not t.n:
            return "–"
        if what == "all":
            return t.share(t.all)
        if what == "answer":
            return t.share(t.answered, t.answerable)
        return t.chars_cell()

    columns = [
        ("LME temporal, all shown", "longmemeval", "temporal-reasoning", "all"),
        ("LME multi-session, all shown", "longmemeval", "multi-session", "all"),
        ("LME knowledge-update, all shown", "longmemeval", "knowledge-update", "all"),
        ("LME all, all shown", "longmemeval", "all", "all"),
        ("LME answer in prompt", "longmemeval", "all", "answer"),
        ("LME chars mean / max", "longmemeval", "all", "chars"),
        ("LoCoMo answer in prompt", "locomo", "all", "answer"),
        ("LoCoMo cat1, all shown", "locomo", "cat1", "all"),
        ("LoCoMo all, all shown", "locomo", "all", "all"),
        ("LoCoMo chars mean / max", "locomo", "all", "chars"),
    ]
    present_sets = {d for d, _, _ in tallies}
    columns = [c for c in columns if c[1] in present_sets]
    lines = [
        "| prompt_chars | " + " | ".join(c[0] for c in columns) + " |",
        "| ---: |" + " ---: |" * len(columns),
    ]
    for budget in budgets:
        cells = [cell(d, budget, cat, what) for _, d, cat, what in columns]
        lines.append(f"| {budget:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
