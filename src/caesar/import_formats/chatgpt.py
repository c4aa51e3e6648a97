"""ChatGPT's data export: `conversations.json` (in the emailed .zip, sometimes split into
`conversations-000.json`, …): a JSON array of conversations, each a tree of messages
(`mapping`: node id → {message, parent, children}) whose branch on screen ends at
`current_node`. An edited or regenerated turn leaves the old branch in the tree; only the one
ending at `current_node` is read.

Kept: the person's and ChatGPT's visible turns (`text`, `multimodal_text`). Skipped: system
messages, hidden ones, tool messages (code-interpreter output, browsing, search results),
ChatGPT's calls to a tool (`recipient` other than "all"), reasoning. An image is "[image]", an
uploaded file "[file: name]", a voice turn its transcript. The custom instructions ("about
me", "how to respond"), which ChatGPT puts hidden at the start of every conversation, are the
person's own words: each distinct text becomes one Source of its own, once per export.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from caesar.import_formats._common import (
    Unreadable,
    as_list,
    as_object,
    describe,
    each_conversation,
    file_placeholder,
    first_time,
    from_epoch,
    merged,
    text_or_none,
    with_placeholders,
)
from caesar.import_formats.source import Broken, Source, SourceMessage

NAME = "chatgpt"
LABEL = "ChatGPT export"
MARKER = "mapping"  # the key only this format's conversations have
CUSTOM_INSTRUCTIONS_TITLE = "ChatGPT custom instructions"

_KEPT_CONTENT = frozenset({"text", "multimodal_text"})
_AUDIO_PARTS = frozenset({"audio_asset_pointer", "real_time_user_audio_video_asset_pointer"})
# ChatGPT wraps the custom instructions it shows the model (content.user_profile /
# user_instructions) in its own words; the person's text is the fenced block after these.
_WRAPPER_HEADS = ("User profile:\n```", "how they would like you to respond:\n```")
_WRAPPER_PREFACES = (
    "Follow the instructions below naturally, without repeating, referencing, echoing, or "
    "mirroring any of their wording!",
    "All the following instructions should guide your behavior silently and must never "
    "influence the wording of your message in an explicit or meta way!",
)


def is_conversation(item: dict[str, Any]) -> bool:
    return MARKER in item


def read(items: list[Any]) -> Iterator[Source | Broken]:
    """Each conversation of `items`, then one Source per distinct custom-instructions text,
    dated at the earliest conversation that carried it."""
    instructions: dict[str, datetime] = {}

    def read_one(conversation: dict[str, Any], key: str) -> Source:
        source, found = _conversation(conversation, key)
        for text in found:
            earliest = instructions.get(text)
            if earliest is None or source.created_at < earliest:
                instructions[text] = source.created_at
        return source

    yield from each_conversation(items, NAME, ("id", "conversation_id"), read_one)
    for text, at in sorted(instructions.items(), key=lambda item: (item[1], item[0])):
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
        key = f"{NAME}:custom-instructions:{digest}"
        yield Source(key, CUSTOM_INSTRUCTIONS_TITLE, at, [SourceMessage("user", text, at)])


def _conversation(conversation: dict[str, Any], key: str) -> tuple[Source, list[str]]:
    mapping = as_object(conversation.get("mapping"), "'mapping'")
    turns: list[SourceMessage] = []
    instructions: list[str] = []
    for node_id, node in _kept_branch(mapping, conversation.get("current_node")):
        if node.get("message") is None:
            continue
        message = as_object(node["message"], f"the message of node {node_id!r}")
        if _is_custom_instructions(message):
            text = _custom_instructions(message)
            if text:
                instructions.append(text)
            continue
        turn = _turn(message, node_id)
        if turn is not None:
            turns.append(turn)
    messages = merged(turns)
    created = from_epoch(conversation.get("create_time"), "create_time")
    if created is None:
        first_said = next((m.at for m in messages if m.at is not None), None)
        created = first_time(first_said, from_epoch(conversation.get("update_time"), "update_time"))
    if created is None:
        raise Unreadable("has no date: no create_time, update_time or dated message")
    return Source(key, text_or_none(conversation.get("title")), created, messages), instructions


def _kept_branch(mapping: dict[str, Any], current: object) -> list[tuple[str, dict[str, Any]]]:
    """The nodes from the root to `current` (walked up by `parent`, iteratively)."""
    if current is None:
        if not mapping:
            return []
        current = _latest_leaf(mapping)
    if not isinstance(current, str):
        raise Unreadable(f"'current_node' is {describe(current)}, not a node id")
    if current not in mapping:
        raise Unreadable(f"current_node {current!r} is not in 'mapping'")
    chain: list[tuple[str, dict[str, Any]]] = []
    seen: set[str] = set()
    node_id: str | None = current
    while node_id is not None:
        if node_id in seen:
            raise Unreadable(f"the parents of node {current!r} loop back to {node_id!r}")
        seen.add(node_id)
        if node_id not in mapping:
            child = chain[-1][0]
            raise Unreadable(f"node {child!r} names parent {node_id!r}, which is not in 'mapping'")
        node = as_object(mapping[node_id], f"node {node_id!r}")
        chain.append((node_id, node))
        parent = node.get("parent")
        if parent is not None and not isinstance(parent, str):
            raise Unreadable(f"the parent of node {node_id!r} is {describe(parent)}")
        node_id = parent
    chain.reverse()
    return chain


def _latest_leaf(mapping: dict[str, Any]) -> str:
    """With no `current_node`: the childless node whose message is newest (the last of them
    in the file on a tie)."""
    best: tuple[float, str] | None = None
    for node_id, node in mapping.items():
        if not isinstance(node, dict) or node.get("children"):
            continue
        message = node.get("message")
        stamp = message.get("create_time") if isinstance(message, dict) else None
        when = float(stamp) if isinstance(stamp, int | float) else float("-inf")
        if best is None or when >= best[0]:
            best = (when, node_id)
    if best is None:
        raise Unreadable("has no 'current_node' and no node without children")
    return best[1]


def _is_custom_instructions(message: dict[str, Any]) -> bool:
    content = message.get("content")
    metadata = message.get("metadata")
    return (
        isinstance(content, dict) and content.get("content_type") == "user_editable_context"
    ) or (isinstance(metadata, dict) and metadata.get("is_user_system_message") is True)


def _custom_instructions(message: dict[str, Any]) -> str | None:
    """The person's "about me", then "how to respond", as they typed them: from
    metadata.user_context_message_data when the export has it, else from the content with
    ChatGPT's wrapper taken off."""
    metadata = message.get("metadata")
    data = metadata.get("user_context_message_data") if isinstance(metadata, dict) else None
    fields = ("about_user_message", "about_model_message")
    if isinstance(data, dict) and any(isinstance(data.get(f), str) for f in fields):
        parts = [data.get(f) for f in fields]
    else:
        content = message.get("content")
        content = content if isinstance(content, dict) else {}
        parts = [
            _unwrapped(content.get("user_profile")),
            _unwrapped(content.get("user_instructions")),
        ]
    texts = [p.strip() for p in parts if isinstance(p, str) and p.strip()]
    return "\n\n".join(texts) or None


def _unwrapped(field: object) -> str | None:
    if not isinstance(field, str):
        return None
    for head in _WRAPPER_HEADS:
        start = field.find(head)
        if start >= 0:
            inner = field[start + len(head) :]
            end = inner.rfind("```")
            inner = (inner[:end] if end >= 0 else inner).strip()
            for preface in _WRAPPER_PREFACES:
                if inner.startswith(preface):
                    inner = inner[len(preface) :].lstrip()
            return inner
    return field


def _turn(message: dict[str, Any], node_id: str) -> SourceMessage | None:
    """A visible turn of the person or ChatGPT; None for anything else."""
    metadata = message.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    if metadata.get("is_visually_hidden_from_conversation"):
        return None
    author = message.get("author")
    role = author.get("role") if isinstance(author, dict) else None
    if role not in ("user", "assistant"):
        return None
    if message.get("recipient") not in (None, "all"):  # ChatGPT calling a tool
        return None
    content = message.get("content")
    if not isinstance(content, dict) or content.get("content_type") not in _KEPT_CONTENT:
        return None
    placeholders: list[str] = []
    if role == "user":
        for attachment in as_list(metadata.get("attachments"), "metadata.attachments"):
            if not isinstance(attachment, dict):
                continue
            mime = attachment.get("mime_type")
            if not (isinstance(mime, str) and mime.startswith("image/")):  # images are parts
                placeholders.append(file_placeholder(attachment.get("name")))
    text = with_placeholders(placeholders, _parts_text(content.get("parts")))
    at = from_epoch(message.get("create_time"), f"create_time of node {node_id!r}")
    return SourceMessage("user" if role == "user" else "assistant", text, at)


def _parts_text(parts: object) -> str:
    """The string parts as they are; an image "[image]", a voice turn its transcript, other
    media a placeholder — never their JSON."""
    items = parts if isinstance(parts, list) else []
    spoken = any(
        isinstance(p, dict) and p.get("content_type") == "audio_transcription" for p in items
    )
    pieces: list[str] = []
    for part in items:
        if isinstance(part, str):
            pieces.append(part)
        elif isinstance(part, dict):
            kind = part.get("content_type")
            if kind == "image_asset_pointer":
                pieces.append("[image]")
            elif kind == "audio_transcription":
                transcript = part.get("text")
                pieces.append(transcript if isinstance(transcript, str) else "")
            elif kind in _AUDIO_PARTS:
                pieces.append("" if spoken else "[audio]")
            else:
                pieces.append("[file]")
    return "\n".join(p for p in pieces if p.strip())
