"""A turn's memory, gathered: the facts block and the past-conversations block, with what went
into each — what the brain injects, the audit rows record and the recall preview shows.

Memory never breaks a turn: a recall failure is kept in `recall_error` (the brain audits it)
and the turn goes on with the facts alone.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from datetime import datetime

from caesar.config import EpisodesRecallSettings, FactsInjectSettings
from caesar.memory.context import excerpts
from caesar.memory.context.render import EpisodeLine, FactLine, facts_block
from caesar.memory.episodes.recall import EpisodeMemory, RecalledEpisode, RecallParams
from caesar.memory.facts.store import FactsStore
from caesar.memory.search.question import NOTHING, Asked

log = logging.getLogger(__name__)


@dataclass
class TurnMemory:
    facts_text: str
    facts_used: int
    # the facts in the block, most important first
    facts: list[FactLine] = field(default_factory=list)
    episodes_text: str = ""
    # the episodes in the block, best first, each with its excerpts
    recalled: list[RecalledEpisode] = field(default_factory=list)
    recall_error: str | None = None
    # what the message says of time and gathering (the spans it named …), for the audit row
    asked: Asked = NOTHING

    @property
    def fact_keys(self) -> list[str]:
        return [f.key for f in self.facts]


def facts_for_prompt(facts: FactsStore, inject: FactsInjectSettings, now: datetime) -> TurnMemory:
    ranked = facts.list_all(now, limit=inject.max_facts) if inject.max_facts else []
    lines = [FactLine(f.key, f.value) for f in ranked]
    text = facts_block(
        lines,
        max_facts=inject.max_facts,
        max_chars=inject.max_chars,
    )
    used = sum(1 for line in text.splitlines() if line.startswith("- "))
    # facts_block keeps a prefix of the ranking: the first `used` are the ones injected
    return TurnMemory(text, used, lines[:used])


def with_excerpts(
    episodes: EpisodeMemory,
    settings: EpisodesRecallSettings,
    ranked: list[RecalledEpisode],
    query: str,
    now: datetime,
    asked: Asked = NOTHING,
) -> tuple[str, list[RecalledEpisode]]:
    """The past-conversations block for `ranked` (best first) under `settings.prompt_chars`,
    and the episodes in it, each with its excerpts (`settings.excerpts` off: the lines alone).
    A message about a span of time or gathering across conversations is shown in breadth."""
    if not ranked:
        return "", []
    turns = episodes.conversations([e.audit_log_id for e in ranked]) if settings.excerpts else {}
    candidates = [
        excerpts.Candidate(
            EpisodeLine(e.created_at, e.summary),
            turns.get(e.audit_log_id, []),
            e.windows if settings.excerpts else None,
            e.score,
        )
        for e in ranked
    ]
    block = excerpts.select(
        candidates,
        query,
        now,
        budget=settings.prompt_chars,
        turn_chars=settings.excerpt_turn_chars,
        summary_chars=settings.summary_chars,
        zone=episodes.zone,
        layout=asked.layout,
    )
    shown = [replace(ranked[c.index], excerpts=c.excerpts) for c in block.chosen]
    return block.text, shown


def recall_for_prompt(
    episodes: EpisodeMemory,
    settings: EpisodesRecallSettings,
    message: str,
    now: datetime,
    memory: TurnMemory,
) -> TurnMemory:
    """`memory` with the past conversations `message` recalls, or with the recall error."""
    try:
        params = RecallParams.from_settings(settings)
        memory.asked = episodes.read(message, now)
        vector = episodes.embed_query(message)
        ranked = episodes.search(vector, now, params, query_text=message, asked=memory.asked)
        memory.episodes_text, memory.recalled = with_excerpts(
            episodes, settings, ranked, message, now, memory.asked
        )
    except Exception as exc:  # noqa: BLE001 - memory never breaks chat; the brain audits it
        log.warning("auto-recall failed: %s", exc)
        memory.recall_error = f"{type(exc).__name__}: {exc}"[:1000]
    return memory


def preview(
    episodes: EpisodeMemory,
    settings: EpisodesRecallSettings,
    query: str,
    now: datetime,
    **overrides: object,
) -> list[RecalledEpisode]:
    """What auto-recall would surface for `query`, read-only: the ranking, and for the episodes
    that would reach the prompt, their excerpts (the others have none)."""
    ranked = episodes.preview(query, now, **overrides)
    _text, shown = with_excerpts(episodes, settings, ranked, query, now, episodes.read(query, now))
    by_id = {e.episode_id: e for e in shown}
    return [by_id.get(e.episode_id, e) for e in ranked]
