"""Which parts of the recalled conversations go into the prompt, under one character budget.
Pure: no I/O.

Why: a one- or two-sentence summary rarely holds what a later question asks (offline
summaries held the answer for ~6 % of LoCoMo questions, the dataset's own LLM summaries ~35 %).
The conversation itself does. Recall already scores every window of every candidate — three
consecutive turns (memory/passages.py) — by the same fusion of dense and keyword
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

import math
import re
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from functools import lru_cache
from typing import Literal

import Stemmer

from caesar.gateway.base import Message
from caesar.memory.passages import window_spans, window_turns
from caesar.memory.recall.hits import Excerpt
from caesar.memory.recall.keywords import query_terms
from caesar.memory.render import (
    BLOCK_FRAME,
    GAP_LINE,
    EpisodeLine,
    episode_header,
    excerpt_line,
    past_conversations,
)

# The share of a window's priority that is its episode's score (the rest is its own relevance).
EPISODE_SHARE = 0.5
# A window's relevance, for choosing the excerpts, takes this share from its best turn's own
# cosine with the message (memory/passages.py, `lift`; memory/context/build.py): a
# window says the message's words three turns wide, and the turn that answers is the one whose
# own meaning is nearest (docs/recall-by-time.md, "Turns that answer"). LoCoMo dev at 2,500
# characters, answer in prompt of 484: 385 without; in depth only (a prototype) 0.2 / 0.3 /
# 0.6: 389 / 388 / 378; as shipped, every layout but time alone, 0.2: 388.
TURN_SHARE = 0.2
# Comparable conversations are both shown: among the episodes scoring at least
# COMPARABLE_SHARE of the best one's, the SHOWN_TOGETHER whose best windows rank highest each
# get that window before any episode gets a second — an old statement and the one updating it,
# rather than every window of the first (docs/recall-quality.md, "Excerpts"). When no more
# than SHOWN_TOGETHER were recalled, all are comparable: the threshold let only them through.
COMPARABLE_SHARE = 0.85
SHOWN_TOGETHER = 2
# Breadth (a message about a span of time, or one that gathers across conversations): every
# conversation's line first, its summary cut to BREADTH_SUMMARY, then each one's most telling
# turn cut to BREADTH_TURN, then the rest of the budget as in depth.
BREADTH_SUMMARY = 140
BREADTH_TURN = 220
# ... and when the message has a topic, a conversation that says any of its words shows, in
# place of its summary, its most telling turn from anywhere in it (not only its best window),
# cut short: the sentences that hold what is gathered ("What has Melanie painted?": the horse,
# the sunset, the sunrise, each said in another chat), not "The operator said: "It's so sweet
# to see your love for…" cut to fit. How short is by how much of the message it says: the line
# of the conversation that says most of it (by weight) is cut to BREADTH_SAID_MOST, one that
# says little nearer BREADTH_SAID_LEAST, in proportion, so the likely answers get the room.
# Every line at one length first: longer put more answers in the prompt and fewer
# conversations (LoCoMo dev at 2,500 characters, lead 0.5: 160 → answer 0.783 but all of a
# multi-hop question's evidence 0.493, LongMemEval multi-session all evidence 0.841 → 0.795);
# 120 with a lead of 0.3 was the one measured no worse than before on any figure. Then, against
# 120 for every line, LoCoMo dev answer in prompt 381 → 385 of 484 with 60–200 (80–160: 383;
# 60–260 and 40–200: 383, each losing more evidence), all evidence shown 625 → 624 of 760
# (docs/recall-by-time.md, "What each line says").
BREADTH_SAID_LEAST = 60
BREADTH_SAID_MOST = 200
# ... but first, the best windows (as in depth) within this share of the budget: a question
# read as gathering may still want one answer in full. LoCoMo answer in prompt at 0 / 0.3 /
# 0.5: 0.752 / 0.771 / 0.777, all evidence shown 0.770 each (docs/recall-quality.md). 0.5
# until the lines showed what each conversation said (`_said`): with them, 0.3 left the
# lines the room to show as many conversations as before (docs/recall-by-time.md, "What each
# line says").
BREADTH_LEAD = 0.3
# ... and a turn that asks counts for this share of the message's words it says: it echoes the
# question ("You play any instruments?") where the reply holds the answer ("Yeah, I play
# clarinet!"). When it still tells most, its line shows the reply after it, both cut to the
# line's length (`_with_reply`). LoCoMo dev, with the span rule of depth below: answer in prompt
# 380 → 381 of 484 (docs/recall-by-time.md, "What each line says").
ASKING_WEIGHT = 0.5
# A question that gathers (layout "breadth") may take this much more than the budget: it shows
# many conversations, one line each, and the condition is the mean over all turns
# (issue #22). LoCoMo dev at 2,500 characters, ×1.0 / 1.1 / 1.2 / 1.4: answer in prompt 0.773 /
# 0.781 / 0.781 / 0.787 of 484, past-conversation characters a turn, mean 2,407 / 2,449 /
# 2,490 / 2,574 (docs/recall-quality.md, "Room for a question that gathers").
GATHER_ROOM = 1.1
# In breadth the summaries are cut so that every line fits: (budget − frame) / lines − the
# anchor's share, but never below MIN_SUMMARY.
ANCHOR_CHARS = 36
MIN_SUMMARY = 60
# "timeline": breadth for a message about time alone — no topic, so no lead
Layout = Literal["depth", "breadth", "timeline"]
# Among comparable conversations shown (see COMPARABLE_SHARE), the newest is marked: when they
# state different values for one thing, the later statement is the one that holds.
LATEST_NOTE = "the latest of these"
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
    # held in the span of time the message names: such episodes lead the block (their windows
    # before any other's), as they lead the ranking
    dated: bool = False
    # not summarised yet: its line is the same for every such conversation, so it never
    # makes one the duplicate of another (their turns still are not shown twice)
    pending: bool = False


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
    # Porter: the stemmer of the keyword index's FTS5 tokenizer (memory/recall/keywords.py)
    return Stemmer.Stemmer("porter")


def stems(text: str) -> set[str]:
    return set(_stemmer().stemWords(_WORD.findall(text.lower())))


# Turns stemmed, by their text: the conversations a person's turns recall recur from turn to
# turn, and a breadth block stems every turn of up to 24 of them (~500 LoCoMo turns, 12–17 ms
# in-process). A few MB at most.
TURN_STEMS_CACHED = 8192


@lru_cache(maxsize=TURN_STEMS_CACHED)
def turn_stems(text: str) -> frozenset[str]:
    return frozenset(stems(text))


def _overlap(
    have: AbstractSet[str], wanted: AbstractSet[str], weights: dict[str, float] | None
) -> float:
    """How much of `wanted` `have` holds: a count, or the weights of the stems shared."""
    shared = have & wanted
    if weights is None:
        return len(shared)
    return sum(weights.get(w, 0.0) for w in shared)


def stem_weights(texts: Sequence[AbstractSet[str]], wanted: set[str]) -> dict[str, float]:
    """Each wanted stem's weight among these texts (their stems): the rarer, the heavier, as
    BM25's IDF — a name that every turn says ("Melanie") tells little."""
    n = len(texts)
    return {w: math.log((n + 1) / (0.5 + sum(1 for t in texts if w in t))) for w in wanted}


def trim_turn(
    text: str, wanted: set[str], max_chars: int, weights: dict[str, float] | None = None
) -> str:
    """`text` on one line; if longer than `max_chars`, its sentences sharing most of the
    `wanted` stems, in order, with … where sentences were left out, at most `max_chars`."""
    flat = " ".join(text.split())
    if len(flat) <= max_chars:
        return flat
    parts = [" ".join(p.split()) for p in _SENTENCE.split(text)]
    parts = [p for p in parts if p]
    shared = [_overlap(stems(p), wanted, weights) for p in parts]
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


class _Weights:
    """`stem_weights` of the wanted stems over every candidate's turns, computed on first use:
    breadth needs them for every telling turn, depth only if a turn must be cut."""

    def __init__(self, episodes: Sequence[_Episode], wanted: set[str]):
        self._episodes, self._wanted = episodes, wanted
        self._weights: dict[str, float] | None = None

    def get(self) -> dict[str, float]:
        if self._weights is None:
            turns = [t for ep in self._episodes for t in ep.turn_stems()]
            self._weights = stem_weights(turns, self._wanted)
        return self._weights


class _Episode:
    """One candidate during selection: the turns taken so far and what its lines cost."""

    def __init__(
        self,
        candidate: Candidate,
        header: str,
        wanted: set[str],
        turn_chars: int,
        short_chars: int | None = None,
    ):
        self.turns = window_turns(candidate.turns)
        self.spans = window_spans(len(self.turns))
        self.header = header
        self.taken: set[int] = set()
        self.short: set[int] = set()  # taken turns shown cut to short_chars (telling turns)
        self.best: dict[int, float] = {}  # taken turn → the best window that brought it in
        self._wanted, self._turn_chars = wanted, turn_chars
        self.short_chars = short_chars or turn_chars
        # the wanted stems' weights, shared by the episodes of a selection (select sets it)
        self.weights: _Weights | None = None
        self._stems: list[frozenset[str]] | None = None
        # each turn cut once (per length), however often it is costed
        self._shown: dict[tuple[int, bool], str] = {}

    def turn_stems(self) -> list[frozenset[str]]:
        if self._stems is None:
            self._stems = [turn_stems(t["content"]) for t in self.turns]
        return self._stems

    def key(self, turn: int) -> tuple[str, str]:
        """What makes two turns the same turn, across conversations."""
        t = self.turns[turn]
        return (t["role"], t["content"])

    def shown(self, turn: int, short: bool | None = None) -> str:
        """The turn's text as the prompt shows it (cut if long; to short_chars if `short`,
        by default if it was taken as a telling turn)."""
        short = turn in self.short if short is None else short
        if (turn, short) not in self._shown:
            content = self.turns[turn]["content"]
            limit = self.short_chars if short else self._turn_chars
            # weighed only when a turn must be cut: the weights stem every candidate's turns
            weights = self.weights.get() if self.weights and len(content) > limit else None
            self._shown[(turn, short)] = trim_turn(content, self._wanted, limit, weights)
        return self._shown[(turn, short)]

    def line(self, turn: int, short: bool | None = None) -> str:
        return excerpt_line(self.turns[turn]["role"], self.shown(turn, short))

    def cost(self, turns: set[int], short: set[int] | None = None) -> int:
        """Characters of this episode's lines (header, turns, gaps), newlines included, with
        `short` (default: those taken so) cut to short_chars."""
        short = self.short if short is None else short
        total = len(self.header) + 1
        previous = None
        for t in sorted(turns):
            if previous is not None and t != previous + 1:
                total += len(GAP_LINE) + 1
            total += len(self.line(t, t in short)) + 1
            previous = t
        return total

    def telling(
        self,
        wanted: set[str],
        within: tuple[int, int] | None = None,
        weights: dict[str, float] | None = None,
    ) -> int | None:
        """The turn sharing most of `wanted` (the first such, by `weights` if given; None: no
        turns), among the turns `within` (start, end) if given."""
        if not self.turns:
            return None
        start, end = within or (0, len(self.turns))
        have = self.turn_stems()
        return max(range(start, end), key=lambda k: (_overlap(have[k], wanted, weights), -k))

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


def _leading(
    items: list[tuple[float, int, int]], candidates: Sequence[Candidate]
) -> list[tuple[float, int, int]]:
    """The best window of each of the SHOWN_TOGETHER comparable episodes, the better episode
    first: they come before any episode's second window. When the message names a span of
    time, the comparable among the episodes held in it come first, then those among all."""
    front = _comparable(items, candidates, [c.dated for c in candidates])
    return front + _comparable(items, candidates, [True] * len(candidates), skip=front)


def _comparable(
    items: list[tuple[float, int, int]],
    candidates: Sequence[Candidate],
    among: Sequence[bool],
    skip: Sequence[tuple[float, int, int]] = (),
) -> list[tuple[float, int, int]]:
    """The best window of each of the SHOWN_TOGETHER episodes `among` whose best windows rank
    highest and that score at least COMPARABLE_SHARE of the best of them, the better first;
    none of `skip`'s episodes."""
    top = max((c.score for c, ok in zip(candidates, among, strict=True) if ok), default=0.0)
    if top <= 0:
        return []
    if len(candidates) <= SHOWN_TOGETHER:
        top = 0.0  # no more recalled than are shown together: each is a match, all lead
    done = {item[1] for item in skip}
    lead: dict[int, tuple[float, int, int]] = {}
    for item in items:
        ci = item[1]
        if len(lead) == SHOWN_TOGETHER:
            break
        if among[ci] and ci not in done and ci not in lead:
            if candidates[ci].score >= COMPARABLE_SHARE * top:
                lead[ci] = item
    return sorted(lead.values(), key=lambda item: (-candidates[item[1]].score, item[1]))


def select(
    candidates: Sequence[Candidate],
    query: str,
    now: datetime,
    *,
    budget: int,
    turn_chars: int,
    summary_chars: int,
    zone: tzinfo = UTC,
    layout: Layout = "depth",
) -> Block:
    """The past-conversations block for these recalled episodes (best first), at most `budget`
    characters (GATHER_ROOM times it for a question that gathers), fences included (see the
    module docstring). `layout` "breadth" (a span of
    time, or a question that gathers): the best windows within BREADTH_LEAD of the budget,
    then every conversation's line, its summary cut so that all fit — or, for one that says
    the message's words, its most telling turn in place of the summary (cut short;
    see `_said`) — then each other one's most telling turn (cut to BREADTH_TURN), then the
    rest of the budget as in "depth"; the lines
    newest first in the block. Measured against a line with its turn, best
    first, on the gathering probes: all evidence shown 0.300 against 0.100. "timeline" (a
    message about time alone): the same without the lead — there is no topic to lead with."""
    # a message about time alone has no topic: its words are about talking and when
    wanted = set() if layout == "timeline" else set(_stemmer().stemWords(query_terms(query)))
    breadth = layout != "depth"
    if layout == "breadth":
        budget = int(budget * GATHER_ROOM)
    lead = int(budget * BREADTH_LEAD) if layout == "breadth" else 0
    if breadth:
        summary_chars = min(summary_chars, BREADTH_SUMMARY)
    if breadth and candidates:
        share = (budget - lead - BLOCK_FRAME) // len(candidates) - ANCHOR_CHARS
        summary_chars = max(MIN_SUMMARY, min(summary_chars, share))
    notes = [""] * len(candidates) if breadth else _latest_notes(candidates)
    episodes = [
        _Episode(
            c,
            episode_header(c.line, now, summary_chars, zone=zone, note=notes[ci]),
            wanted,
            turn_chars,
            BREADTH_TURN,
        )
        for ci, c in enumerate(candidates)
    ]
    weights = _Weights(episodes, wanted) if wanted else None
    for ep in episodes:
        ep.weights = weights
    state = _Selection(candidates, episodes, budget)
    telling = [
        (
            ep.telling(wanted, _best_window(ep, c), weights.get())
            if weights
            else ep.telling(stems(c.line.summary))
        )
        if breadth
        else None
        for ep, c in zip(episodes, candidates, strict=True)
    ]
    # breadth with a topic: what each conversation said of it, in place of its summary
    headers = [ep.header for ep in episodes]
    said = _said(episodes, candidates, wanted, weights, now, zone) if lead and weights else {}
    items: list[tuple[float, int, int]] = []  # (−priority, candidate, window)
    for ci, c in enumerate(candidates):
        windows = list(c.windows or [])[: len(episodes[ci].spans)]
        if not windows:
            items.append((-c.score, ci, -1))  # no windows: its line alone
        for wi, relevance in enumerate(windows):
            priority = EPISODE_SHARE * c.score + (1 - EPISODE_SHARE) * relevance
            items.append((-priority, ci, wi))
    held = None if breadth else _span_leaders(candidates)
    # depth, a message naming a span: the windows of its best conversations first, each
    # group best first (`_span_leaders`)
    items.sort(key=(lambda item: (not held[item[1]], item)) if held else None)
    # the best window of each comparable episode first (see _leading)
    front = _leading(items, candidates)
    led = set(front)
    items = front + [item for item in items if item not in led]
    if lead:  # breadth: the best windows first, within the lead's share of the budget
        state.budget = lead
        _fill(state, items, candidates, episodes)
        state.budget = budget
    for ci in range(len(candidates)) if breadth else ():
        if ci in said:  # its line is the turn (and the reply to it): all or none
            state.take(ci, _with_reply(episodes[ci], said[ci]), candidates[ci].score, short=True)
            if ci in state.included:
                continue
            # no room for what it said: its summary line, as any other's
            episodes[ci].header, episodes[ci].short_chars = headers[ci], BREADTH_TURN
            del said[ci]
        state.take_line(ci)
    for ci in range(len(candidates)) if breadth else ():
        turn = telling[ci]
        if turn is not None and ci in state.included and ci not in said:
            state.take(ci, {turn}, candidates[ci].score, short=True)
    if not breadth:
        # depth: a leading episode whose best window does not fit (a long turn beside the
        # first's window) still comes, as its line and that window's telling turn, cut short
        _fill(state, front, candidates, episodes)
        for _, ci, wi in front:
            if ci not in state.included and wi >= 0:
                ep = episodes[ci]
                turn = ep.telling(wanted, ep.spans[wi], weights.get() if weights else None)
                if turn is not None:
                    state.take(ci, {turn}, candidates[ci].windows[wi], short=True)  # type: ignore[index]
    # depth has tried the front already
    _fill(state, items if breadth else items[len(front) :], candidates, episodes, breadth)
    lines: list[str] = []
    chosen: list[Chosen] = []
    order = sorted(state.included)
    if breadth:  # a timeline: newest first
        order.sort(key=lambda ci: (candidates[ci].line.created_at, -ci), reverse=True)
    for ci in order:
        ep = episodes[ci]
        lines.append(ep.header)
        parts = ep.excerpts()
        for k, part in enumerate(parts):
            if k:
                lines.append(GAP_LINE)
            lines.extend(ep.line(part.first_turn + j) for j in range(len(part.turns)))
        chosen.append(Chosen(ci, parts))
    return Block(past_conversations(lines), tuple(chosen))


class _Selection:
    """The block being filled: what is in it and what it costs."""

    def __init__(self, candidates: Sequence[Candidate], episodes: list[_Episode], budget: int):
        self.candidates, self.episodes, self.budget = candidates, episodes, budget
        self.used = BLOCK_FRAME
        self.included: list[int] = []
        self.costs = [0] * len(candidates)
        # What is already in the block, across episodes: a client that resends its history
        # makes episodes that share turns and summaries, and nothing is shown twice.
        self.shown_turns: set[tuple[str, str]] = set()
        self.shown_summaries: set[str] = set()

    def _duplicate(self, ci: int) -> bool:
        candidate = self.candidates[ci]
        if candidate.pending or ci in self.included:
            return False
        return candidate.line.summary in self.shown_summaries

    def _include(self, ci: int) -> None:
        if ci not in self.included:
            self.included.append(ci)
            if not self.candidates[ci].pending:
                self.shown_summaries.add(self.candidates[ci].line.summary)

    def take_line(self, ci: int) -> None:
        """The episode's line alone, if it fits and is not in yet."""
        ep = self.episodes[ci]
        if ci in self.included or self._duplicate(ci):
            return
        if self.used + len(ep.header) + 1 <= self.budget:
            self._include(ci)
            self.costs[ci] = len(ep.header) + 1
            self.used += self.costs[ci]

    def take(self, ci: int, turns: set[int], relevance: float, short: bool = False) -> None:
        """These turns of the episode (with its line), those not shown yet, if they fit;
        `short`: cut to short_chars (a telling turn). A window takes a turn shown short in
        full."""
        ep = self.episodes[ci]
        if self._duplicate(ci):
            return
        new = {t for t in turns if t not in ep.taken and ep.key(t) not in self.shown_turns}
        lengthened = set() if short else turns & ep.short
        if not new and not lengthened:
            return
        cut = (ep.short | new) if short else (ep.short - lengthened)
        cost = ep.cost(ep.taken | new, cut)
        if self.used - self.costs[ci] + cost > self.budget:
            return
        self._include(ci)
        self.used += cost - self.costs[ci]
        self.costs[ci] = cost
        ep.taken |= new
        ep.short = cut
        self.shown_turns.update(ep.key(t) for t in new)
        for t in new:
            ep.best[t] = max(ep.best.get(t, relevance), relevance)


def _fill(
    state: _Selection,
    items: list[tuple[float, int, int]],
    candidates: Sequence[Candidate],
    episodes: list[_Episode],
    lines_first: bool = False,
) -> None:
    """Windows in priority order while they fit (`lines_first`: only of episodes whose line
    is in already)."""
    for _, ci, wi in items:
        if wi < 0:
            state.take_line(ci)
            continue
        if lines_first and ci not in state.included:
            continue  # its line did not fit: no excerpt without it
        start, end = episodes[ci].spans[wi]
        state.take(ci, set(range(start, end)), candidates[ci].windows[wi])  # type: ignore[index]


def _said(
    episodes: Sequence[_Episode],
    candidates: Sequence[Candidate],
    wanted: set[str],
    weights: _Weights,
    now: datetime,
    zone: tzinfo,
) -> dict[int, int]:
    """{candidate: its most telling turn} of the conversations that say any of `wanted` (by
    weight, a turn that asks counting ASKING_WEIGHT of it, anywhere in them; of turns that say
    as much, the first in its most relevant window, else the first), each turned into what its
    line shows: its time anchor, then that turn (its summary is left out), cut to between
    BREADTH_SAID_LEAST and BREADTH_SAID_MOST by how much of `wanted` it says against the
    conversation that says most."""
    found: dict[int, int] = {}
    told_most: dict[int, float] = {}
    w = weights.get()
    for ci, (ep, c) in enumerate(zip(episodes, candidates, strict=True)):
        told = [_overlap(have, wanted, w) for have in ep.turn_stems()]
        told = [v * ASKING_WEIGHT if v and _asks(ep.turns[k]) else v for k, v in enumerate(told)]
        top = max(told, default=0.0)
        if top <= 0:
            continue
        start, end = _best_window(ep, c) or (0, 0)
        most = [k for k, v in enumerate(told) if v == top]
        found[ci] = next((k for k in most if start <= k < end), most[0])
        ep.header = episode_header(EpisodeLine(c.line.created_at, ""), now, zone=zone).rstrip()
        told_most[ci] = top
    most_of_all = max(told_most.values(), default=0.0)
    for ci, top in told_most.items():
        share = top / most_of_all
        episodes[ci].short_chars = round(
            BREADTH_SAID_LEAST + (BREADTH_SAID_MOST - BREADTH_SAID_LEAST) * share
        )
    return found


def _span_leaders(candidates: Sequence[Candidate]) -> list[bool] | None:
    """Which candidates' windows all come before any other's in depth (None: no span named,
    or none held in it): those held in the span that match it best — their best window at
    least COMPARABLE_SHARE of the best of the span's. Window relevance, not the score: the
    span lifts every score it holds alike. The span is what the message asks about; a strong
    topic match outside it still comes before the span's weak ones (issue #22;
    docs/recall-by-time.md, "Depth within a span")."""
    if not any(c.dated for c in candidates):
        return None
    best = [max(c.windows or [c.score]) if c.dated else 0.0 for c in candidates]
    top = max(best)
    return [c.dated and b >= COMPARABLE_SHARE * top for b, c in zip(best, candidates, strict=True)]


def _asks(turn: Message) -> bool:
    """Whether the turn ends by asking: what answers it is in the next turn (the turns are
    `window_turns`', their whitespace trimmed)."""
    return turn["content"].endswith("?")


def _with_reply(ep: _Episode, turn: int) -> set[int]:
    """The turn, and the other side's next turn if it asks (see ASKING_WEIGHT)."""
    after = turn + 1
    if _asks(ep.turns[turn]) and after < len(ep.turns):
        if ep.turns[after]["role"] != ep.turns[turn]["role"]:
            return {turn, after}
    return {turn}


def _best_window(ep: _Episode, c: Candidate) -> tuple[int, int] | None:
    """The turns (start, end) of the candidate's most relevant window, if it has any."""
    windows = list(c.windows or [])[: len(ep.spans)]
    if not windows:
        return None
    return ep.spans[max(range(len(windows)), key=lambda k: (windows[k], -k))]


def _latest_notes(candidates: Sequence[Candidate]) -> list[str]:
    """LATEST_NOTE on the newest of the comparable candidates (scoring at least
    COMPARABLE_SHARE of the best), when there are two or more of them on different days."""
    notes = [""] * len(candidates)
    top = max((c.score for c in candidates), default=0.0)
    if top <= 0:
        return notes
    comparable = [i for i, c in enumerate(candidates) if c.score >= COMPARABLE_SHARE * top]
    days = {candidates[i].line.created_at.date() for i in comparable}
    if len(days) > 1:
        newest = max(comparable, key=lambda i: (candidates[i].line.created_at, -i))
        notes[newest] = LATEST_NOTE
    return notes
