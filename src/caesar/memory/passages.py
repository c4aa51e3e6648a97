"""Passages: the parts of a past conversation dense recall compares a message with, besides
its summary (issue #6).

A summary keeps one or two sentences; a question about anything else in the conversation has
nothing to match densely. So the `memory.passages` worker (memory/episodes/reembed.py) also embeds the
conversation itself, as sliding windows of `WINDOW_TURNS` consecutive turns (a question and its answer, with the turn
that led to it), and stores the vectors with the episode (`episode_summaries.passage_vectors`,
float16, one row per window). Recall takes an episode's best window — `passage`, its highest
cosine with the message — and uses `max(cosine, passage)` as the dense side of the fusion
(memory/recall/hybrid.py). A window longer than the model reads (three long turns past 256
tokens) is the mean of its turns' vectors instead (memory/episodes/reembed.py, `embed_windows`). Measured in docs/recall-quality.md: windows of 3 turns beat single turns,
windows of 2 and 4, and non-overlapping chunks on LoCoMo.

The worker also embeds each turn alone (`turn_texts`; `episode_summaries.turn_vectors`). Those
are not a recall signal: they pick which of a recalled conversation's windows are shown
(`lift`, memory/context/build.py). A window holds the message's words three turns wide; the
turn that answers often shares few of them ("What game did Nate play at the convention?" —
"We played this game Catan"), and its own cosine finds it among the windows that all match
(docs/recall-by-time.md, "Turns that answer").

Windows are a re-ranking signal: recall reads them for its candidates (the summary index's, the
keyword index's and the last-written episodes), not through an index of their own (see
docs/episodes.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from caesar.gateway.base import Message

WINDOW_TURNS = 3
# A long conversation gets wider windows rather than unbounded rows: at most this many
# windows (each 768 bytes as float16 at 384 dimensions), still covering every turn.
MAX_WINDOWS = 32
_DTYPE = "<f2"


def window_spans(n: int, size: int = WINDOW_TURNS, cap: int = MAX_WINDOWS) -> list[tuple[int, int]]:
    """[start, end) turn ranges of the windows of a conversation of `n` non-empty turns, sliding
    by one turn; a conversation shorter than `size` is one window. Past `cap` windows the stride
    widens and each window with it (never narrower than `size`), so every turn is still in one
    and there are at most `cap`. Pure; the one definition `windows` and the excerpts share."""
    if n <= 0:
        return []
    if n - size + 1 <= cap:
        return [(i, min(i + size, n)) for i in range(max(n - size + 1, 1))]
    if cap <= 1:
        return [(0, n)]
    # `cap` windows, evenly spread, each wide enough that together they cover every turn.
    width = max(size, -(-n // cap))
    starts = sorted({round(i * (n - width) / (cap - 1)) for i in range(cap)})
    return [(i, i + width) for i in starts]


def window_turns(turns: Sequence[Message]) -> list[Message]:
    """The turns windows are made of: those with text, their whitespace runs made single."""
    out: list[Message] = []
    for t in turns:
        text = " ".join(t["content"].split())
        if text:
            out.append({"role": t["role"], "content": text})
    return out


def turn_texts(turns: Sequence[Message]) -> list[str]:
    """The texts each turn vector is embedded from: the turns windows are made of, in order."""
    return [t["content"] for t in window_turns(turns)]


def windows(
    turns: Sequence[Message], size: int = WINDOW_TURNS, cap: int = MAX_WINDOWS
) -> list[str]:
    """Texts of the windows (`window_spans`) of the conversation's non-empty turns. Pure.
    The window index (memory/engine/window_keywords.py) is derived again from these texts on
    delete: they must not change without a migration that rebuilds it."""
    texts = [t["content"] for t in window_turns(turns)]
    return [" ".join(texts[a:b]) for a, b in window_spans(len(texts), size, cap)]


def pack(vectors: np.ndarray) -> bytes:
    """Window vectors (n × dim) as float16 bytes: half the disk of float32, and well under
    the cosine differences recall ranks by (float16 keeps ~3 significant digits)."""
    return np.ascontiguousarray(np.asarray(vectors, dtype=np.float32).astype(_DTYPE)).tobytes()


def window_bytes(dim: int) -> int:
    """Bytes of one packed window vector of `dim` dimensions."""
    return 2 * dim


def unpack(blob: bytes | None, dim: int) -> np.ndarray:
    """(n × dim) float32 window vectors; (0 × dim) for an episode without windows or of a
    different dimension (another embedder model)."""
    if not blob or dim <= 0 or len(blob) % window_bytes(dim):
        return np.zeros((0, max(dim, 0)), dtype=np.float32)
    return np.frombuffer(blob, dtype=_DTYPE).reshape(-1, dim).astype(np.float32)


def best_cosine(blob: bytes | None, query: np.ndarray) -> float | None:
    """The highest cosine of the (unit) query with the episode's windows, or None when it has
    none (summarised before windows existed, or by another model)."""
    vectors = unpack(blob, int(query.shape[0]))
    if vectors.shape[0] == 0:
        return None
    return float((vectors @ np.asarray(query, dtype=np.float32)).max())


def lift(windows: Sequence[float], turns: np.ndarray, share: float) -> tuple[float, ...]:
    """Each window's relevance with `share` of it taken from its best turn's cosine with the
    message (`turns`: one cosine per turn, `turn_texts` order). `windows` unchanged when the
    turns do not match them (another count: embedded from another version of the chat)."""
    n = len(turns)
    spans = window_spans(n)
    if len(spans) != len(windows) or not spans:
        return tuple(windows)
    # the windows of a conversation are all as wide (window_spans): each one's best turn is the
    # running maximum over that width, taken at the windows' starts (every start, uncapped)
    width = spans[0][1] - spans[0][0]
    cos = np.asarray(turns, dtype=np.float64)
    best = cos[: n - width + 1]
    for k in range(1, width):
        best = np.maximum(best, cos[k : n - width + 1 + k])
    if len(best) != len(spans):
        best = best[[a for a, _ in spans]]
    lifted = (1 - share) * np.asarray(windows, dtype=np.float64) + share * best
    return tuple(np.round(lifted, 6).tolist())


def cosines(blobs: Sequence[tuple[int, bytes]], query: np.ndarray) -> dict[int, np.ndarray]:
    """{id: the cosines of the (unit) query with its packed vectors, in order} for those of
    `blobs` (id, packed vectors) that hold vectors of the query's dimension: one matrix product
    over all of them."""
    query = np.asarray(query, dtype=np.float32)
    row_bytes = window_bytes(query.shape[0])
    found = [(i, blob) for i, blob in blobs if blob and len(blob) % row_bytes == 0]
    if not found:
        return {}
    matrix = unpack(b"".join(blob for _, blob in found), query.shape[0])
    counts = [len(blob) // row_bytes for _, blob in found]
    parts = np.split(matrix @ query, np.cumsum(counts[:-1]))
    return {i: part for (i, _), part in zip(found, parts, strict=True)}
