""" "Answer in prompt" (issue #12): does the gold answer reach the system prompt caesar builds?
caesar's prompt (the real `Brain.prepare`), the summary lines alone (what caesar injected before
issue #12) and BM25 over 3-turn windows at the same budget, where the answer is written in the
evidence sessions (../shared/eval/answer_match.py). bench/recall_quality.py asks.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rank_bm25 import BM25Okapi

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "shared" / "eval"))
from answer_match import present, toks  # noqa: E402
from benchlib import OWNER

from caesar.brain import Brain  # noqa: E402
from caesar.config import EpisodesRecallSettings  # noqa: E402
from caesar.memory.passages import windows  # noqa: E402
from caesar.memory.recall import pipeline
from caesar.memory.render import (  # noqa: E402
    EPISODES_HEADER,
    FACTS_HEADER,
    system_prompt,
)
from caesar.memory.scope import Scope
from caesar.services import Services  # noqa: E402

CAESAR = "caesar (defaults)"
SUMMARY_ONLY = "summary lines only (ADR ranking, top 3)"
BM25 = "BM25 over 3-turn windows, same budget"
SYSTEMS = (CAESAR, SUMMARY_ONLY, BM25)


@dataclass
class PromptTally:
    n: int = 0
    hits: int = 0
    chars: int = 0

    def add(self, hit: bool, chars: int) -> None:
        self.n += 1
        self.hits += hit
        self.chars += chars

    def cell(self) -> str:
        if not self.n:
            return "–"
        return f"{self.hits / self.n:.3f} ({self.chars / self.n:,.0f} ch)"


class WindowBM25:
    """The baseline: every 3-turn window of the history, ranked by BM25 for a question."""

    def __init__(self, conversations: list[list[dict[str, str]]]) -> None:
        self.windows = [w for turns in conversations for w in windows(turns)]
        self.bm25 = BM25Okapi([toks(w) for w in self.windows]) if self.windows else None

    def block(self, question: str, budget: int) -> str:
        if self.bm25 is None:
            return ""
        scores = self.bm25.get_scores(toks(question))
        out: list[str] = []
        used = 0
        for i in np.argsort(-scores, kind="stable"):
            text = self.windows[i][: budget - used]
            out.append(text)
            used += len(text) + 1
            if used >= budget:
                break
        return "\n".join(out)


def summary_only_settings(shipped: EpisodesRecallSettings) -> EpisodesRecallSettings:
    return shipped.model_copy(
        update={"excerpts": False, "top_k": 3, "ranking": "adr", "summary_chars": 2000}
    )


def prompts(
    services: Services, baseline: WindowBM25, question: str, now: Any, ctx: Any = None
) -> dict[str, tuple[str, int]]:
    """system → (the prompt, or the baseline's memory text; memory characters). `ctx`: the
    turn `Brain.prepare` already built for this question and time, if any."""
    ctx = ctx or Brain(services).prepare(question, now=now, scope=Scope(OWNER))
    settings = services.settings
    shipped = settings.memory.episodes_recall
    facts_text = ""  # the bench runs no fact extraction: the shipped default is off
    caesar_chars = memory_chars(ctx.messages[0]["content"])
    with services.episodes.reading(OWNER, now) as scope:
        old = pipeline.recall(
            services.episodes, scope, question, settings=summary_only_settings(shipped)
        )
    old_prompt = system_prompt(
        settings.system_prompt, facts_text, old.text, settings.operator_prompt
    )
    bm25 = baseline.block(question, shipped.prompt_chars)
    return {
        CAESAR: (ctx.messages[0]["content"], caesar_chars),
        SUMMARY_ONLY: (old_prompt, len(old.text)),
        BM25: (bm25, len(bm25)),
    }


def memory_chars(prompt: str) -> int:
    """Characters of the prompt from its first memory block on (the bench's operator prompt
    is empty)."""
    starts = [prompt.find(h) for h in (FACTS_HEADER, EPISODES_HEADER) if h in prompt]
    return len(prompt) - min(starts) if starts else 0


def score(
    tallies: dict[tuple[str, str, str], PromptTally],
    dataset: str,
    category: str,
    answer: str,
    built: dict[str, tuple[str, int]],
) -> None:
    for name, (text, chars) in built.items():
        hit = bool(present(answer, set(toks(text))))
        for cat in (category, "all"):
            tallies[(dataset, name, cat)].add(hit, chars)


def table(tallies: dict[tuple[str, str, str], PromptTally], dataset: str) -> str:
    cats = sorted({c for d, _, c in tallies if d == dataset and c != "all"}) + ["all"]
    head = "| category (n) | " + " | ".join(SYSTEMS) + " |"
    lines = [head, "| --- |" + " ---: |" * len(SYSTEMS)]
    for cat in cats:
        n = tallies[(dataset, CAESAR, cat)].n
        cells = [tallies[(dataset, s, cat)].cell() for s in SYSTEMS]
        label = f"**all** ({n})" if cat == "all" else f"{cat} ({n})"
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
