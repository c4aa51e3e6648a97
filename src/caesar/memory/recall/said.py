"""The memory stage of recall (issue #45): the dated memories — one sentence each of what was
said (memory/dated) — that bear on the message, as one dated line each in the block.

Why: the block shows a few conversations in depth, and an answer spread over many of them
("What has Melanie painted?", "How many weddings did I go to this year?") needs a line from
each, not three turns of two. A memory line costs ~130 characters where an excerpt costs ~600.

How:
- the candidates are the memories of the conversations recall ranked (`pool`): the ones the
  block shows and those ranked behind them (`RecalledEpisode.reserve`), every one of which
  cleared the similarity threshold — so a message that recalls nothing gets no memory line, and
  the stage reads at most a few hundred rows, whatever the size of the history;
- each is scored by its own cosine with the message and by its words (BM25 over the
  candidates, stemmed as the keyword index stems), fused by reciprocal ranks; one that shares
  no content word with the message and whose cosine is under the threshold is left out;
- a memory whose source turn is shown in an excerpt already is left out;
- lines are taken one per conversation first (best first), then a second of each, while they
  fit the stage's share of the budget (`share`); in the block they are in time order, each with
  the day it was said and the day its words name ("last Saturday": Sat 6 May 2023).
Pure but for `candidates`, which reads the rows.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo

import numpy as np

from caesar.memory.engine.rows import said_rows
from caesar.memory.recall.excerpts import stems, turn_stems
from caesar.memory.recall.keywords import query_terms
from caesar.memory.render import SAID_HEADER, said_line
from caesar.memory.scope import Scope

RRF_K = 60.0  # reciprocal-rank fusion's constant (hybrid.RRF_K): the customary 60
# BM25's customary constants: term saturation and length normalisation.
BM25_K1 = 1.2
BM25_B = 0.75


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
) -> list[SaidLine]:
    """The dated memories of these episodes' conversations that bear on `query`, best first."""
    return rank(said_rows(scope, episode_ids), query, vector, model_id, threshold)


def rank(
    rows: Sequence[Sequence[object]],
    query: str,
    vector: np.ndarray,
    model_id: str | None,
    threshold: float | None,
) -> list[SaidLine]:
    """`said_rows` rows scored against the message, best first (see the module docstring)."""
    if not rows:
        return []
    wanted = stems(" ".join(query_terms(query)))
    texts = [str(r[2]) for r in rows]
    keyword = bm25([turn_stems(t) for t in texts], [len(t.split()) for t in texts], wanted)
    cosine = np.zeros(len(rows))
    for i, r in enumerate(rows):
        blob, model = r[8], r[9]
        if blob is not None and model == model_id:
            stored = np.frombuffer(bytes(blob), dtype=np.float32)  # type: ignore[arg-type]
            if stored.shape == vector.shape:
                cosine[i] = float(stored @ vector)
    keep = cosine >= (-1.0 if threshold is None else threshold)
    if not keep.any():
        return []
    fused = rrf(cosine, keyword)
    order = sorted(np.flatnonzero(keep), key=lambda i: (-fused[i], -int(rows[i][0])))  # type: ignore[call-overload]
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
            score=float(fused[i]),
        )
        for i in order
    ]


def bm25(
    docs: Sequence[AbstractSet[str]], lengths: Sequence[int], wanted: AbstractSet[str]
) -> np.ndarray:
    """Okapi BM25 of each document (its set of stems; a sentence rarely says a word twice, so a
    term counts once) for the query's stems, over these documents alone."""
    scores = np.zeros(len(docs))
    if not wanted or not docs:
        return scores
    df = Counter(t for d in docs for t in wanted if t in d)
    if not df:
        return scores
    n = len(docs)
    avg = max(1.0, sum(lengths) / n)
    idf = {t: math.log(1 + (n - c + 0.5) / (c + 0.5)) for t, c in df.items()}
    for i, d in enumerate(docs):
        hit = [idf[t] for t in df if t in d]
        if hit:
            norm = BM25_K1 * (1 - BM25_B + BM25_B * lengths[i] / avg)
            scores[i] = sum(hit) * (BM25_K1 + 1) / (1 + norm)
    return scores


def rrf(cosine: np.ndarray, keyword: np.ndarray) -> np.ndarray:
    """Σ 1 / (RRF_K + rank) over the cosine ranking and the keyword ranking (a memory with no
    keyword match has no keyword rank)."""

    def ranks(values: np.ndarray) -> np.ndarray:
        order = np.argsort(-values, kind="stable")
        out = np.empty(values.size)
        out[order] = np.arange(1, values.size + 1)
        return out

    fused = 1.0 / (RRF_K + ranks(cosine))
    return fused + np.where(keyword > 0, 1.0 / (RRF_K + ranks(keyword)), 0.0)


@dataclass(frozen=True)
class Lines:
    """The memory lines chosen: the rendered lines in time order (header first) and their
    memories; `chars` what they cost in the block."""

    lines: tuple[str, ...]
    said: tuple[SaidLine, ...]
    chars: int


NONE = Lines((), (), 0)


def choose(
    ranked: Sequence[SaidLine],
    budget: int,
    now: datetime,
    zone: tzinfo = UTC,
    shown: AbstractSet[tuple[int, int]] = frozenset(),
) -> Lines:
    """Lines for `ranked` (best first) within `budget` characters, newlines and header
    included: one per conversation first, then a second of each, and so on; none whose
    (episode, turn) is in `shown` (an excerpt holds its turn). In time order."""
    by_episode: dict[int, list[SaidLine]] = defaultdict(list)
    for m in ranked:
        if m.turn is None or (m.episode_id, m.turn) not in shown:
            by_episode[m.episode_id].append(m)
    rounds: list[SaidLine] = []
    depth = max((len(v) for v in by_episode.values()), default=0)
    for k in range(depth):
        rounds.extend(v[k] for v in by_episode.values() if len(v) > k)
    # rounds keeps the best-first order of each round (dicts keep insertion order)
    room = budget - len(SAID_HEADER) - 1
    taken: list[tuple[SaidLine, str]] = []
    seen: set[str] = set()
    for m in rounds:
        key = m.text.lower()
        if key in seen:
            continue
        line = said_line(m.text, m.said_at, now, zone, refers(m, zone))
        if len(line) + 1 <= room:
            taken.append((m, line))
            seen.add(key)
            room -= len(line) + 1
    if not taken:
        return NONE
    taken.sort(key=lambda t: (t[0].said_at, t[0].turn or 0, t[0].id))
    lines = (SAID_HEADER, *(line for _, line in taken))
    return Lines(lines, tuple(m for m, _ in taken), sum(len(x) + 1 for x in lines))


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
