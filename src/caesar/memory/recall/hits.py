"""What recall hands back, in one small module: the parameters of a search (`RecallParams`),
a recalled conversation (`RecalledEpisode`) with its verbatim `Excerpt`s, what one recall
found (`Recalled`), and a turn's whole memory (`TurnMemory`: the facts, the recalled
conversations and the standing statements, as the brain injects them and the audit row, the
dashboard and the recall preview show them).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any

from caesar.config import EpisodesRecallSettings
from caesar.memory.recall.question import NOTHING, Asked
from caesar.memory.render import FactLine

if TYPE_CHECKING:
    from caesar.memory.recall.hybrid import Fusion, Ranking
    from caesar.memory.recall.said import SaidLine
    from caesar.memory.standing.store import StandingMemory


@dataclass(frozen=True)
class RecallParams:
    top_k: int
    similarity_threshold: float | None
    max_age_days: float | None
    halflife_days: float
    recall_weight_scale: float
    fusion: Fusion = "dense"
    keyword_weight: float = 0.0
    ranking: Ranking = "adr"
    comparable_within: float = 0.0
    date_weight: float = 0.0
    # hybrid: rank up to GATHER_K conversations, those behind top_k as reserve, for the memory
    # stage (memory/recall/said.py); on when it has a share of the budget
    said_pool: bool = False

    @classmethod
    def from_settings(cls, s: EpisodesRecallSettings, **overrides: object) -> RecallParams:
        values: dict[str, object] = {
            "top_k": s.top_k,
            "similarity_threshold": s.similarity_threshold,
            "max_age_days": s.max_age_days,
            "halflife_days": s.halflife_days,
            "recall_weight_scale": s.recall_weight_scale,
            "fusion": s.fusion,
            "keyword_weight": s.keyword_weight,
            "ranking": s.ranking,
            "comparable_within": s.comparable_within,
            "date_weight": s.date_weight,
            "said_pool": s.said_share > 0 and s.fusion == "hybrid",
        }
        values.update(overrides)
        return cls(**values)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Excerpt:
    """Consecutive turns of a past conversation, verbatim but for long turns cut to the
    sentences that match (marked with …): `turns` are (role, text), from turn `first_turn`
    (0-based, among the conversation's non-empty turns); `score` is the best window relevance
    that brought them in."""

    first_turn: int
    turns: tuple[tuple[str, str], ...]
    score: float

    def as_json(self) -> dict[str, object]:
        return {
            "first_turn": self.first_turn,
            "score": round(self.score, 6),
            "turns": [{"role": role, "text": text} for role, text in self.turns],
        }


@dataclass(frozen=True)
class RecalledEpisode:
    episode_id: int
    audit_log_id: int
    summary: str
    created_at: datetime
    cosine: float
    age_days: float
    freshness: float
    recall_count: int
    recall_weight: float
    score: float
    keyword: float = 0.0  # normalised keyword relevance ∈ [0, 1] (hybrid fusion only)
    relevance: float = 0.0  # what ranks it: cosine, or fused with keyword (threshold: `gated`)
    # best cosine of the conversation's windows (hybrid fusion; None: not used or none stored)
    passage: float | None = None
    # best window's keyword relevance (hybrid fusion; None: not used or no windows indexed)
    window_keyword: float | None = None
    # each window's relevance (hybrid fusion): what picks the excerpts; not in the JSON
    windows: tuple[float, ...] | None = None
    # hybrid: the share of the message's information the history holds anywhere, and the
    # relevance with the keyword side scaled by it — what the threshold applies to
    known: float = 1.0
    gated: float = 0.0
    # hybrid: held within a span of time the message names (memory/recall/when.py)
    dated: bool = False
    # the verbatim parts of the conversation shown with the summary (memory/recall/excerpts.py)
    excerpts: tuple[Excerpt, ...] = ()
    # a conversation the summariser has not reached yet (`unsummarised`): no episode
    # (`episode_id` 0), `audit_log_id` its latest turn, `summary` UNSUMMARISED_LINE
    pending: bool = False
    # ranked behind the block's candidates: a conversation for the memory stage alone
    reserve: bool = False
    # the dated memories of it in the block, in time order (memory/recall/said.py)
    said: tuple[SaidLine, ...] = ()

    def as_json(self) -> dict[str, object]:
        # Field by field, not asdict: that deep-copies `windows` (one float per window of the
        # conversation) only to drop it, and this runs for every recalled episode of a turn.
        data: dict[str, Any] = {f.name: getattr(self, f.name) for f in _JSON_FIELDS}
        data["excerpts"] = [e.as_json() for e in self.excerpts]
        data["said"] = [m.as_json() for m in self.said]
        data["created_at"] = self.created_at.isoformat()
        for key in (
            "cosine",
            "passage",
            "keyword",
            "window_keyword",
            "relevance",
            "known",
            "gated",
            "age_days",
            "freshness",
            "recall_weight",
            "score",
        ):
            if data[key] is not None:
                data[key] = round(float(data[key]), 6)
        return data


_JSON_FIELDS = tuple(f for f in fields(RecalledEpisode) if f.name not in ("windows", "said"))


@dataclass
class Recalled:
    """One recall for a message: the past-conversations block (`text`), the episodes in it
    best first, each with its excerpts (`episodes`), what the message says of time and
    gathering (`asked`), or why recall failed (`error`: memory never breaks a turn)."""

    text: str = ""
    episodes: list[RecalledEpisode] = field(default_factory=list)
    asked: Asked = NOTHING
    error: str | None = None


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
    # the small-model prompt (memory/recall/plain.py): the facts as sentences, in `facts` order
    sentences: list[str] = field(default_factory=list)
    # the person's standing statements that bear on the message (memory/standing/prompt.py)
    standing_text: str = ""
    standing: list[StandingMemory] = field(default_factory=list)
    standing_sentences: list[str] = field(default_factory=list)

    @property
    def fact_keys(self) -> list[str]:
        return [f.key for f in self.facts]

    @property
    def standing_ids(self) -> list[int]:
        return [m.id for m in self.standing]
