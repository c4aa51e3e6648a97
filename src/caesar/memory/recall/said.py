"""The memory stage of recall (issue #45): the dated memories — one sentence each of what was
said (memory/dated) — that bear on the message, as one dated line each in the block.

Why: the block shows a few conversations in depth, and an answer spread over many of them
("What has Melanie painted?", "How many weddings did I go to this year?") needs a line from
each, not three turns of two. A memory line costs ~130 characters where an excerpt costs ~600.

How (`candidates`, `rank`, `choose`):
- the candidates are the person's memories nearest the message across every conversation
  that clear the similarity threshold (their own in-process index,
  memory/engine/said_vectors.py, VECTOR_POOL of them) and every
  memory of the conversations recall ranked (`pool`); a span the message names ("in May",
  "this year") keeps those said, or about a time, within it;
- each is ranked by its cosine with the message and by the share of the message's information
  it says (IDF-weighted stems, as the keyword index stems), fused by reciprocal ranks — as the
  prototype that chose this measured (docs/memories.md);
- the lines are taken one per conversation first (best first), then a second of each, within
  `said_share` of the budget, which the excerpts then do without; a line whose turn an excerpt
  shows is dropped; in the block they follow the excerpts, in time order, each with the day it
  was said and the day its words name ("last Saturday": Sat 6 May 2023).
A message that recalls no conversation gets no memory line: an off-topic message shares some
nearest memory with every history.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo

import numpy as np

from caesar.memory.engine.rows import said_rows, said_rows_by_id
from caesar.memory.engine.said_vectors import SaidVectors
from caesar.memory.recall.excerpts import stems, turn_stems
from caesar.memory.recall.keywords import query_terms
from caesar.memory.recall.when import NamedSpan
from caesar.memory.render import SAID_HEADER, said_line
from caesar.memory.scope import Scope

# The memories nearest the message taken as candidates beside the ranked conversations': a
# block holds ~8 lines at 6,000 characters (1,000 of them), ~3 at 2,500.
VECTOR_POOL = 100
RRF_K = 60.0  # reciprocal-rank fusion's customary constant (hybrid.RRF_K)


@dataclass(frozen=True)
class SaidLine:
    """A dated memory that bears on the message: its row, its conversation's episode (0: none),
    and the numbers that ranked it."""

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
    vectors: SaidVectors,
    episode_ids: Sequence[int],
    query: str,
    vector: np.ndarray,
    threshold: float | None,
    spans: Sequence[NamedSpan] = (),
) -> list[SaidLine]:
    """The person's memories that bear on `query`, best first: the nearest across every
    conversation whose cosine clears `threshold` (recall's similarity threshold) and those of
    these ranked episodes' conversations, within `spans` if any."""
    near = vectors.search(scope, vector, VECTOR_POOL, threshold)
    rows = {int(r[0]): r for r in said_rows(scope, episode_ids)}
    found = said_rows_by_id(scope, [i for i in near if i not in rows])
    rows.update((int(r[0]), r) for r in found)
    gone = [i for i in near if i not in rows]
    if gone:  # deleted since the index loaded them
        vectors.forget(gone)
    cosine = {**vectors.cosines(scope, [i for i in rows if i not in near], vector), **near}
    kept = [r for r in rows.values() if not spans or within(r, spans)]
    return rank(kept, query, cosine)


def within(row: Sequence[object], spans: Sequence[NamedSpan]) -> bool:
    """Said within one of the spans, or about a time that overlaps one."""
    said_at, start, end = row[4], row[6], row[7]
    for span in spans:
        if span.start <= said_at < span.end:  # type: ignore[operator]
            return True
        if start is not None and end is not None and start < span.end and span.start < end:  # type: ignore[operator]
            return True
    return False


def rank(rows: Sequence[Sequence[object]], query: str, cosine: dict[int, float]) -> list[SaidLine]:
    """`said_rows` rows, best first: the ranks of their cosine and of their share of the
    message's information (`coverage`) fused (a memory saying none of it has no keyword rank)."""
    if not rows:
        return []
    wanted = stems(" ".join(query_terms(query)))
    texts = [str(r[2]) for r in rows]
    keyword = coverage([turn_stems(t) for t in texts], wanted)
    cos = np.array([cosine.get(int(r[0]), 0.0) for r in rows])  # type: ignore[call-overload]
    fused = 1.0 / (RRF_K + ranks(cos)) + np.where(keyword > 0, 1.0 / (RRF_K + ranks(keyword)), 0.0)
    order = sorted(range(len(rows)), key=lambda i: (-fused[i], -int(rows[i][0])))  # type: ignore[call-overload]
    return [
        SaidLine(
            id=int(rows[i][0]),  # type: ignore[call-overload]
            episode_id=int(rows[i][1] or 0),  # type: ignore[call-overload]
            text=texts[i],
            speaker=str(rows[i][3]),
            said_at=rows[i][4],  # type: ignore[arg-type]
            turn=None if rows[i][5] is None else int(rows[i][5]),  # type: ignore[call-overload]
            refers_start=rows[i][6],  # type: ignore[arg-type]
            refers_end=rows[i][7],  # type: ignore[arg-type]
            cosine=float(cos[i]),
            keyword=float(keyword[i]),
            score=float(fused[i]),
        )
        for i in order
    ]


def ranks(values: np.ndarray) -> np.ndarray:
    """1-based rank of each value, highest first (ties by position)."""
    order = np.argsort(-values, kind="stable")
    out = np.empty(values.size)
    out[order] = np.arange(1, values.size + 1)
    return out


def coverage(docs: Sequence[AbstractSet[str]], wanted: AbstractSet[str]) -> np.ndarray:
    """How much of the message's information each document (its set of stems) holds: the IDF
    weight of the message's stems it says, over theirs all (IDF over these documents, a stem
    none says weighing most)."""
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


@dataclass(frozen=True)
class Lines:
    """The memory lines chosen: the rendered lines in time order (header first) and their
    memories; `chars` what they cost in the block."""

    lines: tuple[str, ...]
    said: tuple[SaidLine, ...]
    chars: int

    def without(self, shown: AbstractSet[tuple[int, int]]) -> Lines:
        """These lines but those whose (episode, turn) an excerpt shows."""
        keep = [
            k
            for k, m in enumerate(self.said)
            if m.turn is None or (m.episode_id, m.turn) not in shown
        ]
        if len(keep) == len(self.said):
            return self
        if not keep:
            return NONE
        lines = (SAID_HEADER, *(self.lines[k + 1] for k in keep))
        return Lines(lines, tuple(self.said[k] for k in keep), sum(len(x) + 1 for x in lines))


NONE = Lines((), (), 0)


def choose(ranked: Sequence[SaidLine], budget: int, now: datetime, zone: tzinfo = UTC) -> Lines:
    """Lines for `ranked` (best first) within `budget` characters, newlines and header
    included: one per conversation first, then a second of each, and so on; the same words
    once. In time order."""
    by_episode: dict[int, list[SaidLine]] = defaultdict(list)
    for m in ranked:
        by_episode[m.episode_id].append(m)
    rounds: list[SaidLine] = []
    depth = max((len(v) for v in by_episode.values()), default=0)
    for k in range(depth):
        rounds.extend(v[k] for v in by_episode.values() if len(v) > k)
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
