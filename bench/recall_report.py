"""The tables of bench/recall_quality.py, and the blocks of docs/recall-quality.md it and
bench/time_probes.py rewrite."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import prompt_quality
import shown

DOC = Path(__file__).resolve().parents[1] / "docs" / "recall-quality.md"
# (dataset, system, category) → recall_quality.Tally
Tallies = dict[tuple[str, str, str], Any]


def table(tallies: Tallies, dataset: str, category: str = "all") -> str:
    head = (
        "| system | R@1 | R@3 | R@5 | MRR | auto-recall hit | off-topic surfaced "
        "| update: newest first |"
    )
    lines = [head, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for (ds, name, cat), tally in tallies.items():
        if ds == dataset and cat == category:
            lines.append(f"| {name} | " + " | ".join(tally.row()) + " |")
    return "\n".join(lines)


def by_category(tallies: Tallies, dataset: str) -> str:
    names = list(dict.fromkeys(name for ds, name, _ in tallies if ds == dataset))
    cats = sorted({cat for ds, _, cat in tallies if ds == dataset and cat != "all"})
    lines = ["| category (n) | " + " | ".join(names) + " |", "| --- |" + " ---: |" * len(names)]
    for cat in cats:
        n = tallies[(dataset, names[0], cat)].n
        cells = [
            tallies[(dataset, name, cat)].row()[2] + " / " + tallies[(dataset, name, cat)].row()[3]
            for name in names
        ]
        lines.append(f"| {cat} ({n}) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def report(
    tallies: Tallies,
    notes: dict[str, Any],
    datasets: list[str],
    budgets: list[int],
) -> str:
    """The ranking tables and the evidence-shown tables at the first budget."""
    parts = []
    for ds in datasets:
        n = tallies[(ds, next(name for d, name, _ in tallies if d == ds), "all")].n
        parts.append(
            f"**{ds}** — {n} questions, {notes[f'{ds}:episodes']} episodes "
            f"({notes[f'{ds}:skipped']} questions without usable evidence skipped, "
            f"{notes[f'{ds}:rejected']} sessions refused by the importer)\n\n"
            + table(tallies, ds)
            + "\n\nAnswer in prompt (share of answerable questions; mean memory characters "
            + f"per turn; {notes[f'{ds}:unanswerable']} questions whose answer is not in their "
            + "evidence sessions' text left out):\n\n"
            + prompt_quality.table(notes["prompt"], ds)
            + "\n\nR@5 / MRR by category:\n\n"
            + by_category(tallies, ds)
        )
        if notes[f"{ds}:offtopic_turns"]:
            injected = notes[f"{ds}:offtopic_injected"] / notes[f"{ds}:offtopic_turns"]
            parts[-1] += (
                f"\n\nOff-topic turns that injected a past conversation (the real "
                f"`Brain.prepare`, shipped defaults): {injected:.3f} of "
                f"{notes[f'{ds}:offtopic_turns']}."
            )
        parts[-1] += "\n\n" + shown_section(notes, ds, budgets[0])
    return "\n\n".join(parts) + f"\n\nRun time: {notes['seconds']} s."


def shown_section(notes: dict[str, Any], ds: str, budget: int) -> str:
    histories = (
        f"longmemeval_s/ and longmemeval_s_more/, {notes[f'{ds}:shown_histories']} questions"
        if ds == "longmemeval"
        else f"{notes[f'{ds}:shown_histories']} conversations"
    )
    return (
        f"Evidence shown — every question ({histories}; "
        f"{notes[f'{ds}:shown_skipped']} without usable evidence skipped), the real "
        f"`Brain.prepare` at the question's time, shipped settings, `prompt_chars` "
        f"{budget:,}; the conversations in the past-conversations block:\n\n"
        + shown.table(notes["shown"], ds, budget)
    )


def curve_section(notes: dict[str, Any], budgets: list[int]) -> str:
    return (
        "Evidence shown by `prompt_chars` (every question, shipped settings otherwise; "
        "chars: past-conversations block per turn, mean / max):\n\n"
        + shown.curve(notes["shown"], budgets)
        + f"\n\nRun time: {notes['seconds']} s."
    )


def write_doc(text: str, block: str = "results") -> None:
    start, end = f"<!-- {block}:start -->", f"<!-- {block}:end -->"
    doc = DOC.read_text()
    if start not in doc or end not in doc:
        raise SystemExit(f"{DOC}: {block} markers missing")
    head, rest = doc.split(start, 1)
    DOC.write_text(f"{head}{start}\n{text}\n{end}{rest.split(end, 1)[1]}")


def parse_budgets(text: str | None) -> list[int | None]:
    """ "2500,6000,12000" → [2500, 6000, 12000]; none given: [None] (shipped)."""
    if not text:
        return [None]
    return [int(part.replace("_", "")) for part in text.split(",") if part.strip()]
