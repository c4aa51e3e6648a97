"""The recall pipeline, with one entry: `recall(memory, scope, message)` → `Recalled`.

For one message, in the scope's person's memory (nobody else's row is read), at the scope's
time:

1. read what the message says of time and gathering (question.py, when.py);
2. get candidates from the engine and fuse and rank them (`search`: the fusion mode the
   settings name — "hybrid", the default, in hybrid.py; "dense", the ADR's cosine ×
   freshness × recall weight, here), adding the conversations of a span it names that are not
   summarised yet (`unsummarised`);
3. choose the excerpts of each that fit the budget and lay out the block (`with_excerpts`,
   excerpts.py).

`preview` runs the same steps read-only for the recall preview (API, MCP, CLI). The state a
recall needs beyond the scope (the embedder, the settings, the operator's time zone, the
search index) is `EpisodeMemory`'s (episodes.py), which also records what a turn recalled.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from caesar.clock import utcnow
from caesar.config import EpisodesRecallSettings
from caesar.embeddings import vector_of
from caesar.gateway.base import Message
from caesar.memory import passages
from caesar.memory.conversations import NO_CURRENT, Current, unsummarised_within
from caesar.memory.engine.rows import (
    candidate_rows,
    chat_payloads,
    ranked_rows,
    turn_vector_rows,
)
from caesar.memory.engine.vectors import epoch_seconds
from caesar.memory.importance import SECONDS_PER_DAY, episode_rank, freshness, recall_weight
from caesar.memory.passages import window_spans, window_turns
from caesar.memory.recall import excerpts, said
from caesar.memory.recall.hits import Recalled, RecalledEpisode, RecallParams
from caesar.memory.recall.hybrid import hybrid_search
from caesar.memory.recall.question import NOTHING, Asked
from caesar.memory.render import EPISODES_HEADER, EpisodeLine
from caesar.memory.scope import Scope
from caesar.memory.transcript import MEMORY_CLOSE, MEMORY_OPEN, conversation_turns

if TYPE_CHECKING:
    from caesar.memory.recall.episodes import EpisodeMemory

log = logging.getLogger(__name__)

# A message naming a span brings up to this many of its conversations that have no episode
# yet (`unsummarised`), their line saying so.
UNSUMMARISED_POOL = 5
UNSUMMARISED_LINE = "(not summarised yet)"
# Candidates fetched beyond top_k, so fresh counters from the database can reorder them.
OVERFETCH = 4


def recall(
    memory: EpisodeMemory,
    scope: Scope,
    message: str,
    *,
    current: Current = NO_CURRENT,
    vector: Future[np.ndarray] | None = None,
    settings: EpisodesRecallSettings | None = None,
) -> Recalled:
    """The past conversations `message` recalls from the scope's memory at `scope.now`, laid
    out as the prompt's block, or the recall error (memory never breaks a turn: the brain
    audits it). `current`: the turn's own conversation, which is not recalled while it is not
    summarised yet (it is in the prompt as the history). `vector`: the message's, already
    under way (EpisodeMemory.embed_query_soon); else it is embedded here. `settings`: other
    than the memory's (a comparison of layouts)."""
    found = Recalled()
    try:
        now = scope.now or utcnow()
        settings = settings or memory.settings
        params = RecallParams.from_settings(settings)
        found.asked = memory.read(message, now)
        if vector is None:
            vector = memory.embed_query_soon(message)
        pending = unsummarised(memory, scope, found.asked, current=current)
        ranked = search(memory, scope, vector, params, query_text=message, asked=found.asked)
        ranked = with_unsummarised(ranked, pending, found.asked)
        found.text, found.episodes = with_excerpts(
            memory, scope, settings, ranked, message, found.asked, vector=vector
        )
    except Exception as exc:  # noqa: BLE001 - memory never breaks chat; the brain audits it
        log.warning("auto-recall failed: %s", exc)
        found.error = f"{type(exc).__name__}: {exc}"[:1000]
    return found


def preview(
    memory: EpisodeMemory,
    scope: Scope,
    settings: EpisodesRecallSettings,
    query: str,
    **overrides: object,
) -> list[RecalledEpisode]:
    """What auto-recall would surface for the scope's `query`, read-only: the ranking, and
    for the episodes that would reach the prompt, their excerpts and memory lines (the others
    have none), then the conversations shown by memory lines alone."""
    now = scope.now or utcnow()
    # one embedding of the query, for the ranking and the excerpts
    vector = memory.embed_query_soon(query)
    params = RecallParams.from_settings(memory.settings, **overrides)
    ranked = search(memory, scope, vector, params, query_text=query)
    asked = memory.read(query, now)
    ranked = with_unsummarised(ranked, unsummarised(memory, scope, asked), asked)
    _text, shown = with_excerpts(memory, scope, settings, ranked, query, asked, vector=vector)
    # by chat row: the conversations not summarised yet have no episode id
    by_chat = {e.audit_log_id: e for e in shown}
    ranked_chats = {e.audit_log_id for e in ranked}
    # the ranking as the block sees it (those ranked behind it for the memory stage only when
    # a line of theirs is shown), then those shown by memory lines that recall did not rank
    listed = [
        by_chat.get(e.audit_log_id, e) for e in ranked if not e.reserve or e.audit_log_id in by_chat
    ]
    return listed + [e for e in shown if e.audit_log_id not in ranked_chats]


# -- candidates, fused and ranked ----------------------------------------------------------------
def search(
    memory: EpisodeMemory,
    scope: Scope,
    query_vector: np.ndarray | Future[np.ndarray],
    params: RecallParams,
    query_text: str | None = None,
    asked: Asked | None = None,
) -> list[RecalledEpisode]:
    """The scope's episodes nearest the query at `scope.now`, best first: fused with the
    message's words (`params.fusion` "hybrid", with a `query_text`), else by the ADR's dense
    ranking."""
    now = scope.now or utcnow()
    if params.fusion != "dense" and query_text:
        asked = asked or memory.read(query_text, now)
        fused = hybrid_search(scope, query_text, query_vector, now, params, asked)
        return [RecalledEpisode(**vars(hit)) for hit in fused]  # (asdict deep-copies)
    return dense_search(scope, vector_of(query_vector), now, params)


def dense_search(
    scope: Scope, query_vector: np.ndarray, now: datetime, params: RecallParams
) -> list[RecalledEpisode]:
    """The ADR's ranking: cosine × freshness × recall weight over the engine's vector search."""
    engine = scope.search
    now_s = epoch_seconds(now)
    min_created = None
    if params.max_age_days is not None:
        min_created = now_s - params.max_age_days * SECONDS_PER_DAY
    rank = episode_rank(now_s, params.halflife_days, params.recall_weight_scale)

    # Rows swept since they were loaded are found missing and forgotten; searching again
    # lets the rows behind them take their slots (rarely more than one retry).
    for _attempt in range(3):
        engine.refresh(scope)
        hits = engine.search(
            scope,
            query_vector,
            limit=params.top_k * OVERFETCH,
            threshold=params.similarity_threshold,
            min_created=min_created,
            rank=rank,
            # freshness ≤ 1 and recall_weight ≤ its value at the largest count: what
            # lets the IVF stage stop early without changing the result.
            factor_range=(
                0.0,
                recall_weight(engine.max_recall_count, params.recall_weight_scale),
            ),
        )
        if hits.ids.size == 0:
            return []
        ids = [int(i) for i in hits.ids]
        rows = ranked_rows(scope, ids)
        found = {r.id for r in rows}
        gone = [i for i in ids if i not in found]
        if not gone:
            break
        engine.forget(gone)
    cosines = {int(i): float(c) for i, c in zip(hits.ids, hits.cosine, strict=True)}
    return rank_episodes([tuple(r) for r in rows], cosines, now, params)


def rank_episodes(
    rows: list[tuple[int, int, str, datetime, int]],
    cosines: dict[int, float],
    now: datetime,
    params: RecallParams,
) -> list[RecalledEpisode]:
    """Score (id, audit_log_id, summary, created_at, recall_count) rows; best first, top K."""
    out = []
    for episode_id, audit_id, summary, created_at, count in rows:
        age = (now - created_at).total_seconds() / SECONDS_PER_DAY
        fresh = freshness(age, params.halflife_days)
        weight = recall_weight(count, params.recall_weight_scale)
        cosine = cosines[episode_id]
        out.append(
            RecalledEpisode(
                episode_id=episode_id,
                audit_log_id=audit_id,
                summary=summary,
                created_at=created_at,
                cosine=cosine,
                age_days=age,
                freshness=fresh,
                recall_count=count,
                recall_weight=weight,
                score=cosine * fresh * weight,
                relevance=cosine,
                gated=cosine,
            )
        )
    out.sort(key=lambda e: (-e.score, -e.episode_id))
    return out[: params.top_k]


def unsummarised(
    memory: EpisodeMemory, scope: Scope, asked: Asked, *, current: Current = NO_CURRENT
) -> list[RecalledEpisode]:
    """The scope's conversations held in the spans `asked` names that have no episode yet
    (memory/conversations.py `unsummarised_within`; not `current`, the turn's own), newest
    first, as recalled episodes marked `pending`: a chat an hour ago is part of "today"
    before the summariser, which waits for it to go quiet, has reached it. Their line
    says so; their turns are their excerpts, every window alike (no relevance is known:
    the block shows them from the start)."""
    spans = [(s.start, s.end) for s in asked.time.spans]
    if not spans:
        return []
    now = scope.now or utcnow()
    found = unsummarised_within(scope, spans, current=current, limit=UNSUMMARISED_POOL)
    return [
        RecalledEpisode(
            episode_id=0,
            audit_log_id=c.tip_audit_id,
            summary=UNSUMMARISED_LINE,
            created_at=c.last_turn_at,
            cosine=0.0,
            age_days=(now - c.last_turn_at).total_seconds() / SECONDS_PER_DAY,
            freshness=1.0,
            recall_count=0,
            recall_weight=1.0,
            score=0.0,
            # placeholders: with_unsummarised weighs them
            windows=(0.0,) * len(window_spans(len(window_turns(c.turns)))),
            dated=True,
            pending=True,
        )
        for c in found
    ]


def with_unsummarised(
    ranked: list[RecalledEpisode], pending: list[RecalledEpisode], asked: Asked
) -> list[RecalledEpisode]:
    """The ranking with the span's conversations not summarised yet (newest first): they come
    before the others for a message about time alone (they are the newest of the timeline),
    else after the episodes held in the span. They score as the lowest of those (or the best
    of all), and each of their windows as much, so that the block's choice treats them as the
    span's conversations, shown from their first turn."""
    if not pending:
        return ranked
    dated = [e.score for e in ranked if e.dated]
    score = min(dated) if dated else max((e.score for e in ranked), default=1.0)
    pending = [replace(e, score=score, windows=(score,) * len(e.windows or ())) for e in pending]
    if asked.time_only:
        return pending + ranked
    held = next((i for i, e in enumerate(ranked) if not e.dated), len(ranked))
    return ranked[:held] + pending + ranked[held:]


# -- the block ---------------------------------------------------------------------------------
def with_excerpts(
    memory: EpisodeMemory,
    scope: Scope,
    settings: EpisodesRecallSettings,
    ranked: list[RecalledEpisode],
    query: str,
    asked: Asked = NOTHING,
    *,
    vector: np.ndarray | Future[np.ndarray],
) -> tuple[str, list[RecalledEpisode]]:
    """The past-conversations block for `ranked` (best first) under `settings.prompt_chars`,
    and the episodes in it, each with its excerpts (`settings.excerpts` off: the lines alone).
    A message about a span of time or gathering across conversations is shown in breadth.
    `vector`: the message's, the one recall searched with, for the turns' cosines that help
    pick the excerpts (`excerpts.TURN_SHARE`)."""
    if not ranked:
        return "", []
    now = scope.now or utcnow()
    pool, ranked = ranked, [e for e in ranked if not e.reserve]
    ids = [e.audit_log_id for e in ranked]
    turns = conversations(scope, ids) if settings.excerpts else {}
    # a message about time alone has no topic a turn could be near
    lift = settings.excerpts and asked.layout != "timeline"
    windows = _lifted(scope, ranked, vector) if lift else {}
    candidates = [
        excerpts.Candidate(
            EpisodeLine(e.created_at, e.summary),
            turns.get(e.audit_log_id, []),
            windows.get(e.episode_id, e.windows) if settings.excerpts else None,
            e.score,
            e.dated,
            e.pending,
        )
        for e in ranked
    ]
    lines = said.NONE
    if settings.said_share > 0 and asked.layout != "timeline":
        found = said.candidates(
            scope,
            memory.said,
            [e.episode_id for e in pool if not e.pending],
            query,
            vector_of(vector),
            settings.similarity_threshold,
            asked.time.spans,
        )
        # a conversation not summarised yet is not recalled (the turn's own among them)
        found = [m for m in found if m.episode_id]
        lines = said.choose(
            found, int(settings.prompt_chars * settings.said_share), now, memory.zone
        )
    block = excerpts.select(
        candidates,
        query,
        now,
        budget=settings.prompt_chars - lines.chars,
        turn_chars=settings.excerpt_turn_chars,
        summary_chars=settings.summary_chars,
        zone=memory.zone,
        layout=asked.layout,
    )
    shown = [replace(ranked[c.index], excerpts=c.excerpts) for c in block.chosen]
    excerpted = {
        (e.episode_id, x.first_turn + k)
        for e in shown
        for x in e.excerpts
        for k in range(len(x.turns))
    }
    lines = lines.without(excerpted)
    if not lines.said:
        return block.text, shown
    body = (
        block.text[: -len(MEMORY_CLOSE) - 1].split("\n")
        if block.text
        else [EPISODES_HEADER, MEMORY_OPEN]
    )
    text = "\n".join([*body, *lines.lines, MEMORY_CLOSE])
    return text, with_said(scope, shown, pool, list(lines.said))


def with_said(
    scope: Scope,
    shown: list[RecalledEpisode],
    pool: list[RecalledEpisode],
    lines: list[said.SaidLine],
) -> list[RecalledEpisode]:
    """The episodes in the block, each with the memories of it shown (in time order), then
    those shown by memory lines alone: the ranked ones best first, then those recall did not
    rank: every conversation anything in the prompt came from."""
    of: dict[int, list[said.SaidLine]] = {}
    for m in lines:
        of.setdefault(m.episode_id, []).append(m)
    out = [replace(e, said=tuple(of.pop(e.episode_id, ()))) for e in shown]
    out += [replace(e, said=tuple(of.pop(e.episode_id))) for e in pool if e.episode_id in of]
    if of:
        now = scope.now or utcnow()
        out += [
            RecalledEpisode(
                episode_id=int(row[0]),
                audit_log_id=int(row[1]),
                summary=row[2],
                created_at=row[3],
                cosine=0.0,
                age_days=(now - row[3]).total_seconds() / SECONDS_PER_DAY,
                freshness=1.0,
                recall_count=int(row[4]),
                recall_weight=1.0,
                score=0.0,
                said=tuple(of[int(row[0])]),
            )
            for row in candidate_rows(scope, sorted(of))
        ]
    return out


def conversations(scope: Scope, audit_ids: list[int]) -> dict[int, list[Message]]:
    """The user/assistant turns of these chats of the scope's (audit row id → turns), reply
    included: what excerpts are cut from. A chat swept since it was recalled is absent."""
    if not audit_ids:
        return {}
    return {i: conversation_turns(payload or {}) for i, payload in chat_payloads(scope, audit_ids)}


def turn_cosines(scope: Scope, episode_ids: list[int], vector: np.ndarray) -> dict[int, np.ndarray]:
    """Each of these episodes' turn cosines with the (unit) message vector, in turn order
    (memory/passages.py, `turn_texts`), for those of the scope's with turn vectors of its
    dimension: what picks their excerpts with the windows (`passages.lift`)."""
    if not episode_ids:
        return {}
    return passages.cosines(turn_vector_rows(scope, episode_ids), vector)


def _lifted(
    scope: Scope,
    ranked: list[RecalledEpisode],
    vector: np.ndarray | Future[np.ndarray],
) -> dict[int, tuple[float, ...]]:
    """{episode: its windows' relevance lifted by its turns' cosines} of those with windows
    and turn vectors (memory/passages.py, `lift`)."""
    ids = [e.episode_id for e in ranked if e.windows and not e.pending]
    if not ids:
        return {}
    cosines = turn_cosines(scope, ids, vector_of(vector))
    return {
        e.episode_id: passages.lift(e.windows, cosines[e.episode_id], excerpts.TURN_SHARE)
        for e in ranked
        if e.windows and e.episode_id in cosines
    }
