"""Which parts of the recalled conversations go into the prompt, under one character budget.
Pure: no I/O.

Why: a one- or two-sentence summary rarely holds what a later question asks (offline
summaries held the answer for ~6 % of LoCoMo questions, the dataset's own LLM summaries ~35 %).
The conversation itself does. Recall already scores every window of every candidate — three
consecutive turns (memory/search/passages.py) — by the same fusion of dense and keyword
relevance as the episode; those scores pick the excerpts.

The selection (`select`):
- every window of every recalled episode is a candidate, its priority the mean of its
  episode's score and its own relevance — so the best windows of the best episode come first,
  but a strongly matching window of the second episode beats a weak third one of the first;
- comparable episodes (scoring at least 85 % of the best one's) are shown together: the best
  window of each of the two whose best windows rank highest comes first, so an old statement
  and the one updating it both reach the prompt rather than every window of the first;
- candidates are taken best first while they fit the budget; an episode's line (time anchor
  and summary) is paid for when its first window is taken;
- windows of one conversation that overlap are merged: no turn is shown twice;
- a turn longer than `turn_chars` is cut to its sentences that share the most words with the
  message (stemmed as the keyword index stems them), in order, with … where text was left out.
An episode none of whose windows fits is left out of the block (and is not recalled). Measured
in docs/recall-quality.md ("answer in prompt").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

import Stemmer

from caesar.gateway.base import Message
from caesar.memory.context.render import (
    BLOCK_FRAME,
    GAP_LINE,
    EpisodeLine,
    episode_header,
    excerpt_line,
    past_conversations,
)
from caesar.memory.episodes.recall import Excerpt
from caesar.memory.search.keywords import query_terms
from caesar.memory.search.passages import window_spans, window_turns

# The share of a window's priority that is its episode's score (the rest is its own relevance).
EPISODE_SHARE = 0.5
# Comparable conversations are both shown: among the episodes scoring at least
# COMPARABLE_SHARE of the best one's, the SHOWN_TOGETHER whose best windows rank highest each
# get that window before any episode gets a second — an old statement and the one updating it,
# rather than every window of the first (docs/recall-quality.md, "Excerpts").
COMPARABLE_SHARE = 0.85
SHOWN_TOGETHER = 2
ELLIPSIS = "…"
_SENTENCE = re.compile(r"(?<=[.!?…])\s+|\n+")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


@dataclass(frozen=True)
class Candidate:
    """A recalled episode, best first: its line, its conversation and its windows' relevance
    (None: no windows stored — the line alone is offered)."""

    line: EpisodeLine
    turns: Sequence[Message]
    windows: Sequence[float] | None
    score: float


@dataclass(frozen=True)
class Chosen:
    """What of candidate `index` goes into the prompt: its excerpts, in conversation order."""

    index: int
    excerpts: tuple[Excerpt, ...]


@dataclass(frozen=True)
class Block:
    text: str
    chosen: tuple[Chosen, ...]


@lru_cache(maxsize=1)
def _stemmer() -> Stemmer.Stemmer:
    # Porter: the stemmer of the keyword index's FTS5 tokenizer (memory/search/keywords.py)
    return Stemmer.Stemmer("porter")


def stems(text: str) -> set[str]:
    return set(_stemmer().stemWords(_WORD.findall(text.lower())))


def trim_turn(text: str, wanted: set[str], max_chars: int) -> str:
    """`text` on one line; if longer than `max_chars`, its sentences sharing most of the
    `wanted` stems, in order, with … where sentences were left out, at most `max_chars`."""
    flat = " ".join(text.split())
    if len(flat) <= max_chars:
        return flat
    parts = [" ".join(p.split()) for p in _SENTENCE.split(text)]
    parts = [p for p in parts if p]
    shared = [len(stems(p) & wanted) for p in parts]
    keep: list[int] = []
    used = 0
    for i in sorted(range(len(parts)), key=lambda k: (-shared[k], k)):
        if keep and shared[i] == 0:
            break
        if used + len(parts[i]) + 2 <= max_chars:
            keep.append(i)
            used += len(parts[i]) + 2
    if not keep:  # one sentence longer than the whole allowance: its start
        return flat[: max_chars - 2].rsplit(" ", 1)[0] + " " + ELLIPSIS
    keep.sort()
    out: list[str] = []
    previous = -1
    for i in keep:
        if i != previous + 1:
            out.append(ELLIPSIS)
        out.append(parts[i])
        previous = i
    if previous != len(parts) - 1:
        out.append(ELLIPSIS)
    return " ".join(out)


class _Episode:
    """One candidate during selection: the turns taken so far and what its lines cost."""

    def __init__(self, candidate: Candidate, header: str, wanted: set[str], turn_chars: int):
        self.turns = window_turns(candidate.turns)
        self.spans = window_spans(len(self.turns))
        self.header = header
        self.taken: set[int] = set()
        self.best: dict[int, float] = {}  # taken turn → the best window that brought it in
        self._wanted, self._turn_chars = wanted, turn_chars
        self._shown: dict[int, str] = {}  # each turn cut once, however often it is costed

    def key(self, turn: int) -> tuple[str, str]:
        """What makes two turns the same turn, across conversations."""
        t = self.turns[turn]
        return (t["role"], t["content"])

    def shown(self, turn: int) -> str:
        """The turn's text as the prompt shows it (cut if long)."""
        if turn not in self._shown:
            content = self.turns[turn]["content"]
            self._shown[turn] = trim_turn(content, self._wanted, self._turn_chars)
        return self._shown[turn]

    def line(self, turn: int) -> str:
        return excerpt_line(self.turns[turn]["role"], self.shown(turn))

    def cost(self, turns: set[int]) -> int:
        """Characters of this episode's lines (header, turns, gaps), newlines included."""
        total = len(self.header) + 1
        previous = None
        for t in sorted(turns):
            if previous is not None and t != previous + 1:
                total += len(GAP_LINE) + 1
            total += len(self.line(t)) + 1
            previous = t
        return total

    def excerpts(self) -> tuple[Excerpt, ...]:
        """The taken turns as runs of consecutive turns, each with the best relevance of the
        windows that brought it in."""
        runs: list[list[int]] = []
        for t in sorted(self.taken):
            if runs and t == runs[-1][-1] + 1:
                runs[-1].append(t)
            else:
                runs.append([t])
        return tuple(
            Excerpt(
                run[0],
                tuple((self.turns[t]["role"], self.shown(t)) for t in run),
                max(self.best.get(t, 0.0) for t in run),
            )
            for run in runs
        )


def _comparable_first(
    items: list[tuple[float, int, int]], candidates: Sequence[Candidate]
) -> list[tuple[float, int, int]]:
    """`items` (best first) with the best window of each of the SHOWN_TOGETHER comparable
    episodes moved to the front, the better episode first."""
    top = max((c.score for c in candidates), default=0.0)
    if top <= 0:
        return items
    lead: dict[int, tuple[float, int, int]] = {}
    for item in items:
        ci = item[1]
        if len(lead) == SHOWN_TOGETHER:
            break
        if ci not in lead and candidates[ci].score >= COMPARABLE_SHARE * top:
            lead[ci] = item
    front = sorted(lead.values(), key=lambda item: (-candidates[item[1]].score, item[1]))
    taken = set(front)
    return front + [item for item in items if item not in taken]


def select(
    candidates: Sequence[Candidate],
    query: str,
    now: datetime,
    *,
    budget: int,
    turn_chars: int,
    summary_chars: int,
) -> Block:
    """The past-conversations block for these recalled episodes (best first), at most `budget`
    characters, fences included (see the module docstring)."""
    wanted = set(_stemmer().stemWords(query_terms(query)))
    episodes = [
        _Episode(c, episode_header(c.line, now, summary_chars), wanted, turn_chars)
        for c in candidates
    ]
    items: list[tuple[float, int, int]] = []  # (−priority, candidate, window)
    for ci, c in enumerate(candidates):
        windows = list(c.windows or [])[: len(episodes[ci].spans)]
        if not windows:
            items.append((-c.score, ci, -1))  # no windows: its line alone
        for wi, relevance in enumerate(windows):
            priority = EPISODE_SHARE * c.score + (1 - EPISODE_SHARE) * relevance
            items.append((-priority, ci, wi))
    items = _comparable_first(sorted(items), candidates)
    used = BLOCK_FRAME
    included: list[int] = []
    costs = [0] * len(candidates)
    # What is already in the block, across episodes: a client that resends its history makes
    # episodes that share turns and summaries, and nothing is shown twice.
    shown_turns: set[tuple[str, str]] = set()
    shown_summaries: set[str] = set()
    for _, ci, wi in items:
        ep = episodes[ci]
        if ci not in included and candidates[ci].line.summary in shown_summaries:
            continue  # the same line as an episode already in the block
        if wi < 0:
            if ci not in included and used + len(ep.header) + 1 <= budget:
                included.append(ci)
                shown_summaries.add(candidates[ci].line.summary)
                costs[ci] = len(ep.header) + 1
                used += costs[ci]
            continue
        start, end = ep.spans[wi]
        new = {t for t in range(start, end) if t not in ep.taken and ep.key(t) not in shown_turns}
        if not new:
            continue
        turns = ep.taken | new
        cost = ep.cost(turns)
        if used - costs[ci] + cost > budget:
            continue
        if ci not in included:
            included.append(ci)
            shown_summaries.add(candidates[ci].line.summary)
        used += cost - costs[ci]
        costs[ci] = cost
        ep.taken = turns
        shown_turns.update(ep.key(t) for t in new)
        relevance = candidates[ci].windows[wi]  # type: ignore[index]
        for t in new:
            ep.best[t] = max(ep.best.get(t, relevance), relevance)
    lines: list[str] = []
    chosen: list[Chosen] = []
    for ci in sorted(included):
        ep = episodes[ci]
        lines.append(ep.header)
        parts = ep.excerpts()
        for k, part in enumerate(parts):
            if k:
                lines.append(GAP_LINE)
            lines.extend(ep.line(part.first_turn + j) for j in range(len(part.turns)))
        chosen.append(Chosen(ci, parts))
    return Block(past_conversations(lines), tuple(chosen))
