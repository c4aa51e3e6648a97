"""Claude's data export: `conversations.json` (in the emailed .zip, with `users.json`,
`projects.json`, …): a JSON array of conversations, each with its messages in order
(`chat_messages`: sender "human" or "assistant", `content` blocks, `text`, attachments).

An edited message forks the conversation. Newer exports link each message to the one before
it (`parent_message_uuid`); the branch read is the one ending at the last message. Older
exports have no links and hold every version of an edited message of the person's in a row;
the last of them is read.

Kept: the text blocks of each message (its `text` when it has no blocks); an attachment or
uploaded file is "[file: name]". Skipped: thinking, tool calls and their results.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from caesar.import_formats._common import (
    Unreadable,
    as_list,
    as_object,
    each_conversation,
    file_placeholder,
    first_time,
    from_iso,
    merged,
    text_or_none,
    with_placeholders,
)
from caesar.import_formats.source import Broken, Source, SourceMessage

NAME = "claude"
LABEL = "Claude export"
MARKER = "chat_messages"  # the key only this format's conversations have

_ROLES = {"human": "user", "assistant": "assistant"}
# The parent of a conversation's first message in the exports that link messages.
_ROOT_PARENT = "00000000-0000-4000-8000-000000000000"


def is_conversation(item: dict[str, Any]) -> bool:
    return MARKER in item


def read(items: list[Any]) -> Iterator[Source | Broken]:
    return each_conversation(items, NAME, ("uuid",), _conversation)


def _conversation(conversation: dict[str, Any], key: str) -> Source:
    if MARKER not in conversation:
        raise Unreadable(f"has no {MARKER!r}")
    raw = as_list(conversation[MARKER], repr(MARKER))
    listed = [as_object(m, f"message #{n}") for n, m in enumerate(raw, start=1)]
    turns = [_turn(m, n) for n, m in _kept_branch(listed, conversation)]
    messages = merged(t for t in turns if t is not None)
    created = from_iso(conversation.get("created_at"), "created_at")
    if created is None:
        first_said = next((m.at for m in messages if m.at is not None), None)
        created = first_time(first_said, from_iso(conversation.get("updated_at"), "updated_at"))
    if created is None:
        raise Unreadable("has no date: no created_at, updated_at or dated message")
    return Source(key, text_or_none(conversation.get("name")), created, messages)


def _kept_branch(
    listed: list[dict[str, Any]], conversation: dict[str, Any]
) -> list[tuple[int, dict[str, Any]]]:
    """(position from 1, message) of the branch read, in order."""
    numbered = list(enumerate(listed, start=1))
    linked = any(isinstance(m.get("parent_message_uuid"), str) for m in listed)
    if not numbered or not linked:
        return _last_of_each_edit(numbered)
    by_id = {m["uuid"]: (n, m) for n, m in numbered if isinstance(m.get("uuid"), str)}
    leaf_id = conversation.get("current_leaf_message_uuid")
    leaf = by_id.get(leaf_id) if isinstance(leaf_id, str) else None
    chain = [leaf or numbered[-1]]
    seen = {id(chain[0][1])}
    while True:
        n, message = chain[-1]
        parent = message.get("parent_message_uuid")
        if parent is None or parent == _ROOT_PARENT:
            break
        if not isinstance(parent, str) or parent not in by_id:
            raise Unreadable(
                f"message #{n} names parent {parent!r}, which is not among the messages"
            )
        step = by_id[parent]
        if id(step[1]) in seen:
            raise Unreadable(f"the parents of message #{n} loop back to {parent!r}")
        seen.add(id(step[1]))
        chain.append(step)
    chain.reverse()
    return chain


def _last_of_each_edit(
    numbered: list[tuple[int, dict[str, Any]]],
) -> list[tuple[int, dict[str, Any]]]:
    """Without links, the versions of an edited message are the person's messages in a row
    (Claude answers each one it keeps): all but the last of such a run are left out."""
    kept: list[tuple[int, dict[str, Any]]] = []
    for n, message in numbered:
        if kept and message.get("sender") == "human" and kept[-1][1].get("sender") == "human":
            kept[-1] = (n, message)
        else:
            kept.append((n, message))
    return kept


def _turn(message: dict[str, Any], n: int) -> SourceMessage | None:
    sender = message.get("sender")
    role = _ROLES.get(sender) if isinstance(sender, str) else None
    if role is None:
        return None
    placeholders = [
        file_placeholder(item.get("file_name"))
        for field in ("attachments", "files")
        for item in as_list(message.get(field), f"{field} of message #{n}")
        if isinstance(item, dict)
    ]
    text = with_placeholders(placeholders, _text(message))
    at = from_iso(message.get("created_at"), f"created_at of message #{n}")
    return SourceMessage("user" if role == "user" else "assistant", text, at)


def _text(message: dict[str, Any]) -> str:
    """The text blocks: run together where they touch (a cited answer is split into many), a
    blank line where a thinking or tool block stood between them."""
    blocks = message.get("content")
    if not isinstance(blocks, list) or not blocks:
        text = message.get("text")
        return text if isinstance(text, str) else ""
    runs: list[str] = []
    current: list[str] = []
    for block in blocks:
        if isinstance(block, dict) and block.get("type") == "text":
            text = block.get("text")
            current.append(text if isinstance(text, str) else "")
        elif current:
            runs.append("".join(current))
            current = []
    if current:
        runs.append("".join(current))
    return "\n\n".join(run.strip() for run in runs if run.strip())
