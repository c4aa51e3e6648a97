"""The conversation a memory worker reads, and how it is framed for the LLM.

Only the operator's and caesar's own turns go in: system messages — where caesar injects
recalled facts and episodes — are left out, so recalled memory is never re-learned as new.
"""

from __future__ import annotations

import html
import re
from typing import Any

from caesar.gateway.base import Message

# The fence around injected memory in a system prompt (memory/render.py): defined here,
# beneath both the prompt and the workers that must never learn from what is inside it.
MEMORY_OPEN = "<memory>"
MEMORY_CLOSE = "</memory>"

_TURN = re.compile(r"<(user|assistant)>\n(.*?)\n</\1>", re.DOTALL)
_CONVERSATION = re.compile(r"<conversation>\n(.*?)\n</conversation>", re.DOTALL)


def is_temporary(payload: dict[str, Any]) -> bool:
    """A chat sent as temporary: answered with memory, never learned from — no summary, no
    facts, no windows, no semantic chunks (issue #13)."""
    return payload.get("temporary") is True


def conversation_turns(payload: dict[str, Any]) -> list[Message]:
    """The user/assistant turns of a chat.completed payload, reply included."""
    turns: list[Message] = [
        {"role": m["role"], "content": str(m.get("content", ""))}
        for m in payload.get("messages", [])
        if isinstance(m, dict) and m.get("role") in ("user", "assistant")
    ]
    reply = payload.get("reply")
    if isinstance(reply, str) and reply:
        turns.append({"role": "assistant", "content": reply})
    return turns


def render_transcript(turns: list[Message]) -> str:
    # Escaped so a turn containing "</user>" cannot forge the frame.
    body = "\n".join(
        f"<{t['role']}>\n{html.escape(t['content'], quote=False)}\n</{t['role']}>" for t in turns
    )
    return f"<conversation>\n{body}\n</conversation>"


def parse_transcript(text: str) -> list[Message]:
    """The inverse of render_transcript, for the offline provider."""
    match = _CONVERSATION.search(text)
    if match is None:
        return []
    return [
        {"role": role, "content": html.unescape(content)}
        for role, content in _TURN.findall(match.group(1))
    ]
