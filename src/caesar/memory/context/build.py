"""A turn's memory, gathered: the facts block and the past-conversations block, with what went
into each — what the brain injects, the audit rows record and the recall preview shows.

Memory never breaks a turn: a recall failure is kept in `recall_error` (the brain audits it)
and the turn goes on with the facts alone.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from datetime import datetime, tzinfo

import numpy as np

from caesar.config import (
    FactsImportanceSettings,
    FactsInjectSettings,
    StandingSettings,
)
from caesar.embeddings import EmbedderHandle, normalise, vector_of
from caesar.memory.facts.store import FactsStore
from caesar.memory.recall import plain
from caesar.memory.recall.hits import TurnMemory
from caesar.memory.render import FactLine, facts_block
from caesar.memory.scope import Scope
from caesar.memory.standing import kinds
from caesar.memory.standing import prompt as standing_prompt
from caesar.memory.standing.store import StandingMemory, StandingStore

log = logging.getLogger(__name__)


def facts_for_prompt(
    facts: FactsStore,
    inject: FactsInjectSettings,
    now: datetime,
    *,
    scope: Scope,
    sentences: bool = False,
) -> TurnMemory:
    """`person`'s facts for their turn's prompt, most important first, within `inject`'s
    caps: as the facts block, or (`sentences`, the small-model prompt) as plain sentences."""
    ranked = facts.list_all(now, scope=scope, limit=inject.max_facts) if inject.max_facts else []
    lines = [FactLine(f.key, f.value, f.source_audit_id) for f in ranked]
    if sentences:
        said = plain.fact_sentences(lines, max_facts=inject.max_facts, max_chars=inject.max_chars)
        return TurnMemory("", len(said), lines[: len(said)], sentences=said)
    text = facts_block(
        lines,
        max_facts=inject.max_facts,
        max_chars=inject.max_chars,
    )
    used = sum(1 for line in text.splitlines() if line.startswith("- "))
    # facts_block keeps a prefix of the ranking: the first `used` are the ones injected
    return TurnMemory(text, used, lines[:used])


def standing_for_prompt(
    store: StandingStore,
    settings: StandingSettings,
    importance: FactsImportanceSettings,
    now: datetime,
    memory: TurnMemory,
    *,
    scope: Scope,
    vector: np.ndarray | Future[np.ndarray] | None,
    zone: tzinfo,
    small: bool = False,
    embed: Callable[[], Future[np.ndarray]] | None = None,
) -> TurnMemory:
    """`memory` with `person`'s standing statements that bear on the message (the message's
    `vector`: its cosine with each statement's picks them; else `embed` makes it, only when
    there are statements; neither: by importance alone), within `settings`' budget. Memory
    never breaks a turn: a failure is kept as the recall error."""
    person = scope.person
    budget = settings.max_chars or 0  # resolved from the route when the settings load
    if not settings.enabled or budget <= 0:
        return memory
    try:
        with store.db.read() as session:
            current = store.current(Scope(person, session))
        current = untold(current, memory.facts, small=small)
        if not current:
            return memory
        if vector is None and embed is not None:
            vector = embed()
        chosen = standing_prompt.choose(
            current,
            None if vector is None else vector_of(vector),
            now,
            importance,
            max_chars=budget,
            max_statements=settings.max_statements,
            zone=zone,
        )
    except Exception as exc:  # noqa: BLE001 - memory never breaks chat; the brain audits it
        log.warning("standing statements failed: %s", exc)
        memory.recall_error = f"{type(exc).__name__}: {exc}"[:1000]
        return memory
    memory.standing_text, memory.standing = chosen.text, chosen.memories
    memory.standing_sentences = standing_prompt.sentences(chosen.memories)
    return memory


# Words that say nothing a fact's key and value do not: "My dog is called Biscuit" says
# `dog_name: Biscuit`, no more
_SAYS_NOTHING = frozenset(
    """the and but now also just really very my our i i'm im am is are was were be been have has
    had a an to in at on of for with called named name live lives living work works working
    favourite favorite it that this so as""".split()
)


def untold(
    statements: Sequence[StandingMemory], facts: Sequence[FactLine], *, small: bool = False
) -> list[StandingMemory]:
    """The statements the prompt's facts do not already say. "My dog is called Biscuit" is
    `dog_name: Biscuit` told twice (on the first-five-minutes probe the embedded model answered
    3 fewer of 20 with the repeats); "My partner Alex and I adopted a cat called Miso" says more
    than `partner_name: Alex`. A statement is told when facts learned from its own chat say
    every word of it but the ones that say nothing (`_SAYS_NOTHING`; words compared by their
    first four letters: "love" is `loves`). Two statements that contradict each other are
    always kept.

    `small` (the embedded model's prompt): a statement of a chat that taught any fact is left
    to the facts and the recalled excerpts ("I play the cello" beside `plays: cello`) unless it
    is an instruction, a constraint whose subject the facts do not name ("My cat is called
    Pepper and I'm vegetarian" beside `cat_name: Pepper`: the diet is in no fact, and a dinner
    recipe must not miss it; "I'm allergic to peanuts, so I always check labels" beside
    `allergy: peanuts` is told: with that line too, the embedded model missed one more of 20
    on the first-five-minutes probe) or names a name or a number the facts missed ("My partner Alex and I just adopted a cat called Miso": Miso). The 135M model answers worse
    for every line more: with "I play the cello, and my cat Miso hates it" beside `cat_name:
    Miso` it named the cat for "What is my dog called?" (first-five-minutes probe: swapped
    13 of 20 against 17)."""
    by_source: dict[int, list[FactLine]] = {}
    for fact in facts:
        if fact.source is not None:
            by_source.setdefault(fact.source, []).append(fact)
    paired = {m.contradicts for m in statements if m.contradicts} | {
        m.id for m in statements if m.contradicts
    }
    kept = []
    for memory in statements:
        taught = by_source.get(memory.source_audit_id or -1, [])
        if memory.id in paired or not taught:
            kept.append(memory)
            continue
        said = {
            w[:4]
            for f in taught
            for w in _WORD.findall(f"{f.key.replace('_', ' ')} {f.value}".lower())
        }
        words = list(enumerate(_WORD.findall(memory.text)))
        rest = [
            (i, w) for i, w in words if w.lower() not in _SAYS_NOTHING and w.lower()[:4] not in said
        ]
        if small and memory.kind == kinds.CONSTRAINT and memory.about:
            # its subject ("peanut", "vegetarian"), not the rest of its words
            rest = [
                (i, w) for i, w in rest if w.lower()[:4] in {a[:4] for a in memory.about.split()}
            ]
        elif small and memory.kind != kinds.INSTRUCTION:
            # only a name or a number the facts missed ("… a cat called Miso" beside
            # partner_name: Alex), not the rest of the sentence ("… and my cat Miso hates it")
            rest = [(i, w) for i, w in rest if i > 0 and (w[0].isupper() or w[0].isdigit())]
        if rest:
            kept.append(memory)
    return kept


_WORD = re.compile(r"[A-Za-z0-9']+")


def _quoted_in(line: str, said: Sequence[str]) -> bool:
    quote = line.partition('"')[2].rstrip('"')
    return bool(quote) and any(quote in other for other in said)


class SentenceVectors:
    """The small-model prompt puts the facts that match the message first. Their sentences'
    vectors are kept (a fact rarely changes; embedding thirty of them on every turn would cost
    more than the rest of the turn's memory work), the least recently used dropped first."""

    def __init__(self, embedder: EmbedderHandle, size: int = 4096) -> None:
        self._embedder = embedder
        self._size = size
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def rank(self, message: str, sentences: Sequence[str]) -> list[str]:
        """`sentences` by cosine to `message`, best first (ties: in the order given)."""
        if len(sentences) < 2:
            return list(sentences)
        with self._lock:  # embedding under it too: turns on a small model come one at a time
            missing = [s for s in dict.fromkeys(sentences) if s not in self._vectors]
            fresh = normalise(self._embedder.get().embed_batch([message, *missing]))
            for sentence, vector in zip(missing, fresh[1:], strict=True):
                self._vectors[sentence] = vector
            for sentence in sentences:
                self._vectors.move_to_end(sentence)
            matrix = np.stack([self._vectors[s] for s in sentences])
            while len(self._vectors) > self._size:
                self._vectors.popitem(last=False)
        scores = matrix @ fresh[0]
        order = sorted(range(len(sentences)), key=lambda i: (-float(scores[i]), i))
        return [sentences[i] for i in order]


def plain_memory(
    memory: TurnMemory,
    message: str,
    now: datetime,
    zone: tzinfo,
    vectors: SentenceVectors | None,
) -> str:
    """The small-model prompt's memory block (memory/recall/plain.py): the facts and what the
    operator said in the recalled conversations, a sentence a line, those that match `message`
    first (without the embedder: what was said, in recall order, then the facts by importance)."""
    said = plain.said_lines(memory.recalled, now, zone)
    # a statement a recalled excerpt already quotes is not said twice
    standing = [line for line in memory.standing_sentences if not _quoted_in(line, said)]
    lines = said + standing + memory.sentences
    return plain.memory_block(vectors.rank(message, lines) if vectors and lines else lines)
