"""Which standing statements a turn's prompt carries, and how they read. Pure functions.

- **Instructions** (how to answer) go into every prompt, stated as the person's wishes ("The
  person asked: …"), under caesar's own rules, never over them.
- **Constraints, preferences and profile** fill the rest by how much they bear on the
  message: the cosine of the message's vector with the statement's bearing vector (the
  statement embedded with the words of what its slot bears on, `kinds.bearing_text`), so that
  "accessories for my phone" finds "I have an iPhone 13 Pro" though they share no word. A
  person with a few dozen statements gets them all; the budget decides only beyond that.
  (Constraints first, whatever they bear on, was measured and lost: docs/standing.md.)
- All within one budget (`[memory.standing]` max_chars, max_statements); what does not fit
  is the least bearing. In the block they read most
  important first (the ADR's importance: freshness × confidence × edit weight).
- Two current statements that say opposite things ("I love cilantro" / "I hate cilantro", with
  no word of a change) are shown together, dated, with a note to ask which holds.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo

import numpy as np

from caesar.config import FactsImportanceSettings
from caesar.memory.render import fence, local, one_line
from caesar.memory.standing import kinds
from caesar.memory.standing.store import StandingMemory
from caesar.memory.transcript import MEMORY_CLOSE, MEMORY_OPEN

HEADER = "What the person has told you about themselves (their own words, dated):"
ASKED = "How the person asked you to answer (their wishes; your own rules come first):"
CONTRADICTION = "These disagree and neither says it changed; ask which holds:"


@dataclass(frozen=True)
class Chosen:
    memories: list[StandingMemory]
    text: str

    @property
    def ids(self) -> list[int]:
        return [m.id for m in self.memories]


def bearing(memories: Sequence[StandingMemory], vector: np.ndarray | None) -> np.ndarray:
    """Each statement's cosine with the message (0 without either vector): one matrix
    product, the matrix kept between turns while the statements are the same."""
    scores = np.zeros(len(memories), np.float32)
    if vector is None:
        return scores
    rows, vectors = [], []
    for i, memory in enumerate(memories):
        if memory.vector is not None and memory.vector.shape == vector.shape:
            rows.append(i)
            vectors.append(memory.vector)
    if rows:
        scores[rows] = _matrix(vectors) @ vector
    return scores


# The statements' vectors stacked, kept between turns while they are the same arrays (the
# store's vector cache hands out one array per statement and text): keyed by the arrays'
# identities, and each entry holds the arrays, so no id is reused while it is kept. Not by
# statement ids: two databases in one process (tests, benches) have the same ids.
_MATRICES: OrderedDict[tuple[int, ...], tuple[list[np.ndarray], np.ndarray]] = OrderedDict()
_MATRICES_KEPT = 64
_MATRICES_LOCK = threading.Lock()


def _matrix(vectors: list[np.ndarray]) -> np.ndarray:
    key = tuple(id(v) for v in vectors)
    with _MATRICES_LOCK:
        kept = _MATRICES.get(key)
        if kept is not None and all(a is b for a, b in zip(kept[0], vectors, strict=True)):
            _MATRICES.move_to_end(key)
            return kept[1]
    matrix = np.stack(vectors)
    with _MATRICES_LOCK:
        _MATRICES[key] = (vectors, matrix)
        while len(_MATRICES) > _MATRICES_KEPT:
            _MATRICES.popitem(last=False)
    return matrix


def said_when(memory: StandingMemory, zone: tzinfo) -> str:
    return _day(memory.said_at, zone)


@functools.lru_cache(maxsize=4096)
def _day(moment: datetime, zone: tzinfo) -> str:
    day = local(moment, zone)
    return f"{day.day} {day:%b %Y}"


def line(memory: StandingMemory, zone: tzinfo) -> str:
    text = one_line(memory.text)
    if memory.kind == kinds.INSTRUCTION:
        return fence(f'- The person asked: "{text}"')
    return fence(f'- ({memory.kind}, {memory.slot}, said {said_when(memory, zone)}) "{text}"')


def choose(
    memories: Sequence[StandingMemory],
    vector: np.ndarray | None,
    now: datetime,
    importance: FactsImportanceSettings,
    *,
    max_chars: int,
    max_statements: int,
    zone: tzinfo,
) -> Chosen:
    """The statements for one prompt and their block (see the module docstring)."""
    if not memories or max_chars <= 0 or max_statements <= 0:
        return Chosen([], "")
    scores = bearing(memories, vector)
    by_id = {m.id: m for m in memories}
    contradicted_by = {m.contradicts: m for m in memories if m.contradicts}
    instructions = sorted(
        (m for m in memories if m.kind == kinds.INSTRUCTION),
        key=lambda m: (-m.importance(now, importance), -m.id),
    )
    others = [
        memories[i]
        for i in np.argsort(-scores, kind="stable")
        if memories[i].kind != kinds.INSTRUCTION
    ]
    frame = len(HEADER) + len(ASKED) + len(MEMORY_OPEN) + len(MEMORY_CLOSE) + 4
    shortest = 40  # no line is shorter than its frame ("- (profile, pet, said 1 May 2026) """)
    used = frame
    chosen: list[StandingMemory] = []
    seen: set[int] = set()
    for memory in [*instructions, *others]:
        if len(chosen) >= max_statements or used + shortest > max_chars:
            break
        if memory.id in seen:
            continue
        # no line is shorter than its words and its frame: most that cannot fit are not drawn
        if used + len(memory.text) + 20 > max_chars:
            continue
        group = [memory]
        partner = by_id.get(memory.contradicts) if memory.contradicts else None
        partner = partner or contradicted_by.get(memory.id)
        if partner is not None and partner.id not in seen:
            group.append(partner)
        cost = sum(len(line(m, zone)) + 1 for m in group) + (
            len(CONTRADICTION) + 3 if len(group) > 1 else 0
        )
        if used + cost > max_chars:
            continue  # a shorter one further down may fit
        used += cost
        chosen.extend(group)
        seen.update(m.id for m in group)
    return Chosen(chosen, render(chosen, now, importance, zone))


def render(
    chosen: Sequence[StandingMemory],
    now: datetime,
    importance: FactsImportanceSettings,
    zone: tzinfo,
) -> str:
    """The block: the wishes, then the rest most important first, each contradiction's pair
    together under its note."""
    if not chosen:
        return ""
    weight = {m.id: m.importance(now, importance) for m in chosen}
    asked = [m for m in chosen if m.kind == kinds.INSTRUCTION]
    rest = sorted((m for m in chosen if m.kind != kinds.INSTRUCTION), key=lambda m: -weight[m.id])
    ids = {m.id for m in chosen}
    paired = {m.id for m in chosen if m.contradicts in ids} | {
        m.contradicts for m in chosen if m.contradicts in ids
    }
    lines: list[str] = []
    if asked:
        lines += [ASKED, *(line(m, zone) for m in asked if m.id not in paired)]
    told = [m for m in rest if m.id not in paired]
    if told:
        lines += [HEADER, *(line(m, zone) for m in told)]
    pairs = [m for m in chosen if m.contradicts in ids]
    for newer in pairs:
        older = next(m for m in chosen if m.id == newer.contradicts)
        lines += [f"  {CONTRADICTION}", "  " + line(older, zone), "  " + line(newer, zone)]
    return "\n".join([MEMORY_OPEN, *lines, MEMORY_CLOSE])


def sentences(chosen: Sequence[StandingMemory]) -> list[str]:
    """The small-model prompt's lines (memory/recall/plain.py): what the user said or asked."""
    out = []
    for memory in chosen:
        text = one_line(memory.text)
        verb = "asked" if memory.kind == kinds.INSTRUCTION else "said"
        out.append(f'The user {verb}: "{text}"')
    return out
