"""The memory stage of recall (issue #45): the dated memories — one sentence each of what was
said (memory/dated) — that bear on the message, as one dated line each in the block.

Why: the block shows a few conversations in depth, and an answer spread over many of them
("What has Melanie painted?", "How many weddings did I go to this year?") needs a line from
each, not three turns of two. A memory line costs ~130 characters where an excerpt costs ~600.

How:
- the candidates are the memories of the conversations recall ranked (`pool`): the ones the
  block is chosen from and those ranked behind them (`RecalledEpisode.reserve`), every one of
  which cleared the similarity threshold — so a message that recalls nothing gets no memory
  line, and the stage reads at most a few hundred rows, whatever the size of the history;
- each is scored as an episode is (hybrid.fuse): its own cosine with the message, lifted by
  its words (the share of the message's information it says, IDF-weighted over the
  candidates, stemmed as the keyword index stems), in cosine units; those under the
  similarity threshold are left out;
- the block's selection (excerpts.select) takes them as items beside the windows, by the same
  priority (half their conversation's score, half their own relevance), within the one budget
  and at most `said_share` of it; one whose turn an excerpt shows, or whose line another
  says, is left out. In the block they follow the excerpts, in time order, each with the day
  it was said and the day its words name ("last Saturday": Sat 6 May 2023).
Pure but for `candidates`, which reads the rows.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo

import numpy as np

from caesar.memory.engine.rows import said_rows
from caesar.memory.recall.excerpts import SaidItem, stems, turn_stems
from caesar.memory.recall.hybrid import fuse
from caesar.memory.recall.keywords import query_terms
from caesar.memory.render import said_line
from caesar.memory.scope import Scope


@dataclass(frozen=True)
class SaidLine:
    """A dated memory that bears on the message: its row, its conversation's episode, and the
    numbers that ranked it."""

    id: int
    episode_id: int
    text: str
    speaker: str
    said_at: datetime
    turn: int | None
    refers_start: datetime | None
    refers_end: datetime | None
    cosine: float
    keyword: float
    score: float

    def as_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "text": self.text,
            "speaker": self.speaker,
            "said_at": self.said_at.isoformat(),
            "turn": self.turn,
            "refers_start": self.refers_start.isoformat() if self.refers_start else None,
            "refers_end": self.refers_end.isoformat() if self.refers_end else None,
            "cosine": round(self.cosine, 6),
            "keyword": round(self.keyword, 6),
            "score": round(self.score, 6),
        }


def candidates(
    scope: Scope,
    episode_ids: Sequence[int],
    query: str,
    vector: np.ndarray,
    model_id: str | None,
    threshold: float | None,
    keyword_weight: float,
) -> list[SaidLine]:
    """The dated memories of these episodes' conversations that bear on `query`, best first."""
    rows = said_rows(scope, episode_ids)
    return rank(rows, query, vector, model_id, threshold, keyword_weight)


def rank(
    rows: Sequence[Sequence[object]],
    query: str,
    vector: np.ndarray,
    model_id: str | None,
    threshold: float | None,
    keyword_weight: float,
) -> list[SaidLine]:
    """`said_rows` rows scored against the message, best first: the cosine fused with the
    keyword side as an episode's is (hybrid.fuse, in cosine units; the keyword side the share
    of the message's information the memory says, `coverage`), those clearing `threshold`."""
    if not rows:
        return []
    wanted = stems(" ".join(query_terms(query)))
    texts = [str(r[2]) for r in rows]
    keyword = coverage([turn_stems(t) for t in texts], wanted)
    cosine = np.zeros(len(rows))
    for i, r in enumerate(rows):
        blob, model = r[8], r[9]
        if blob is not None and model == model_id:
            stored = np.frombuffer(bytes(blob), dtype=np.float32)  # type: ignore[arg-type]
            if stored.shape == vector.shape:
                cosine[i] = float(stored @ vector)
    relevance = fuse(cosine, keyword, method="hybrid", keyword_weight=keyword_weight)
    keep = relevance >= (-1.0 if threshold is None else threshold)
    order = sorted(np.flatnonzero(keep), key=lambda i: (-relevance[i], -int(rows[i][0])))  # type: ignore[call-overload]
    return [
        SaidLine(
            id=int(rows[i][0]),  # type: ignore[call-overload]
            episode_id=int(rows[i][1]),  # type: ignore[call-overload]
            text=texts[i],
            speaker=str(rows[i][3]),
            said_at=rows[i][4],  # type: ignore[arg-type]
            turn=None if rows[i][5] is None else int(rows[i][5]),  # type: ignore[call-overload]
            refers_start=rows[i][6],  # type: ignore[arg-type]
            refers_end=rows[i][7],  # type: ignore[arg-type]
            cosine=float(cosine[i]),
            keyword=float(keyword[i]),
            score=float(relevance[i]),
        )
        for i in order
    ]


def coverage(docs: Sequence[AbstractSet[str]], wanted: AbstractSet[str]) -> np.ndarray:
    """How much of the message's information each document (its set of stems) holds: the IDF
    weight of the message's stems it says, over theirs all (IDF over these documents, a stem
    none says weighing most) — a memory that says one of five words holds a fifth, however it
    ranks against the others."""
    scores = np.zeros(len(docs))
    if not wanted or not docs:
        return scores
    n = len(docs)
    df = Counter(t for d in docs for t in wanted if t in d)
    idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in wanted}
    total = sum(idf.values())
    for i, d in enumerate(docs):
        scores[i] = sum(idf[t] for t in wanted if t in d) / total
    return scores


def items(
    ranked: Sequence[SaidLine],
    candidate_of: dict[int, int],
    score_of: dict[int, float],
    now: datetime,
    zone: tzinfo = UTC,
) -> tuple[list[SaidLine], list[SaidItem]]:
    """The memories as the block's items (excerpts.SaidItem), in time order: their line, the
    block candidate of their conversation (`candidate_of`: episode → index; absent: ranked
    behind them) and its score (`score_of`)."""
    timed = sorted(ranked, key=lambda m: (m.said_at, m.turn or 0, m.id))
    return timed, [
        SaidItem(
            said_line(m.text, m.said_at, now, zone, refers(m, zone)),
            candidate_of.get(m.episode_id),
            # a conversation recall did not rank: known by this memory alone
            score_of.get(m.episode_id, m.score),
            m.score,
            m.turn,
        )
        for m in timed
    ]


def refers(m: SaidLine, zone: tzinfo) -> str:
    """The time a memory's words name, as the block says it: a day ("Sat 6 May 2023"), a month
    ("May 2023"), a year ("2023"), else a range of days; "" when it names none or the day it was
    said."""
    if m.refers_start is None or m.refers_end is None:
        return ""
    start = m.refers_start.replace(tzinfo=UTC).astimezone(zone)
    end = (m.refers_end.replace(tzinfo=UTC).astimezone(zone)) - timedelta(microseconds=1)
    said = m.said_at.replace(tzinfo=UTC).astimezone(zone)
    if start.date() == end.date():
        return "" if start.date() == said.date() else f"{start:%a} {start.day} {start:%b %Y}"
    if (
        start.day == 1
        and (end + timedelta(days=1)).day == 1
        and (start.year, start.month)
        == (
            end.year,
            end.month,
        )
    ):
        return f"{start:%B %Y}"
    if (start.month, start.day, end.month, end.day) == (1, 1, 12, 31) and start.year == end.year:
        return f"{start.year}"
    return f"{start.day} {start:%b %Y} – {end.day} {end:%b %Y}"
