"""A chat's turns, its 3-turn windows and its conversation hash, for the migrations: a frozen
copy, as of 2026-12-07, of

- `caesar.memory.transcript.conversation_turns`,
- `caesar.memory.passages.window_spans`, `window_turns`, `windows` (`WINDOW_TURNS`,
  `MAX_WINDOWS`),
- `caesar.memory.conversations.turns_key` (`KEY_PREFIX`).

A migration carries the code it runs, so that its meaning does not drift when live code
changes. Do not edit this to follow live code: a change there that matters to data already
written (the windows an index holds, the hashes turns are matched by) needs a migration of its
own, with its own copy. tests/test_migrations_frozen.py fails when this and live code disagree.
Pure: no I/O, nothing of caesar's imported.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any, TypedDict


class Turn(TypedDict):
    """A chat message as these functions read it (live code's `Message`, without tool calls)."""

    role: str
    content: str


WINDOW_TURNS = 3
MAX_WINDOWS = 32
KEY_PREFIX = "t:"


def conversation_turns(payload: dict[str, Any]) -> list[Turn]:
    """The user/assistant turns of a chat.completed payload, reply included."""
    turns: list[Turn] = [
        {"role": m["role"], "content": str(m.get("content", ""))}
        for m in payload.get("messages", [])
        if isinstance(m, dict) and m.get("role") in ("user", "assistant")
    ]
    reply = payload.get("reply")
    if isinstance(reply, str) and reply:
        turns.append({"role": "assistant", "content": reply})
    return turns


def window_spans(n: int, size: int = WINDOW_TURNS, cap: int = MAX_WINDOWS) -> list[tuple[int, int]]:
    """[start, end) turn ranges of the windows of `n` non-empty turns, sliding by one turn; fewer
    than `size` turns are one window. Past `cap` windows the stride widens, and each window with
    it, so that every turn is still in one."""
    if n <= 0:
        return []
    if n - size + 1 <= cap:
        return [(i, min(i + size, n)) for i in range(max(n - size + 1, 1))]
    if cap <= 1:
        return [(0, n)]
    width = max(size, -(-n // cap))
    starts = sorted({round(i * (n - width) / (cap - 1)) for i in range(cap)})
    return [(i, i + width) for i in starts]


def window_turns(turns: Sequence[Turn]) -> list[Turn]:
    """The turns windows are made of: those with text, their whitespace runs made single."""
    out: list[Turn] = []
    for t in turns:
        text = " ".join(t["content"].split())
        if text:
            out.append({"role": t["role"], "content": text})
    return out


def windows(turns: Sequence[Turn], size: int = WINDOW_TURNS, cap: int = MAX_WINDOWS) -> list[str]:
    """Texts of the windows (`window_spans`) of the conversation's non-empty turns."""
    texts = [t["content"] for t in window_turns(turns)]
    return [" ".join(texts[a:b]) for a, b in window_spans(len(texts), size, cap)]


def turns_key(turns: Sequence[Turn]) -> str:
    """The hash a completed turn's row is found by: of its conversation up to its reply."""
    spoken = [
        [t["role"], " ".join(str(t.get("content", "")).split())]
        for t in turns
        if t.get("role") in ("user", "assistant")
    ]
    digest = hashlib.sha256(json.dumps(spoken, ensure_ascii=False).encode()).hexdigest()
    return KEY_PREFIX + digest[:32]
