"""Other assistants' history exports, read into one shape (`caesar import`, issue 48).

A format knows its file by shape (`detect`) and yields each conversation it holds as a
`Source` (the kept branch, user and assistant turns only, each dated) or a `Broken` naming
the conversation's own id and what is wrong with it. A file that cannot be read at all
(truncated, not JSON, not the named format) raises `FileBroken`, naming the file and where.

Formats, one module each: ChatGPT's data export (chatgpt.py), Claude's (claude.py), each a
.zip or its conversations.json; Open WebUI's chat export (openwebui.py). caesar's own JSONL
is only recognised here; importer.py reads it line by line. What each keeps and skips:
docs/import.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from caesar.import_formats import chatgpt, claude, openwebui
from caesar.import_formats._common import describe
from caesar.import_formats._files import Loaded, first_line, is_zip, load, say, with_article
from caesar.import_formats.source import FORMATS, Broken, FileBroken, Source, SourceMessage

__all__ = [
    "FORMATS",
    "LABELS",
    "Broken",
    "FileBroken",
    "Source",
    "SourceMessage",
    "detect",
    "found_and_read",
    "read",
]


class _Format(Protocol):
    NAME: str
    LABEL: str
    MARKER: str

    def is_conversation(self, item: dict[str, Any]) -> bool: ...

    def read(self, items: list[Any]) -> Iterator[Source | Broken]: ...


_READERS: dict[str, _Format] = {
    chatgpt.NAME: chatgpt,
    claude.NAME: claude,
    openwebui.NAME: openwebui,
}
# Each format's name for people ("ChatGPT export"), caesar's JSONL included.
LABELS: dict[str, str] = {name: r.LABEL for name, r in _READERS.items()} | {
    "caesar": "caesar JSONL"
}
# Files an export's zip holds beside conversations.json, to tell an export with no
# conversations by.
_NEIGHBOURS = {
    "chatgpt": frozenset({"user.json", "chat.html", "message_feedback.json"}),
    "claude": frozenset({"users.json", "projects.json"}),
}


def detect(path: Path) -> str:
    """The format of the file by its shape: "chatgpt", "claude", "openwebui", or "caesar"
    (caesar's JSONL, told by its first non-blank line alone). FileBroken naming the file when
    no known format matches, when a .zip is unreadable or holds no conversations.json, or
    when its JSON is malformed (saying at which line and column)."""
    if not is_zip(path):
        line = first_line(path)
        if line is not None and _is_caesar_line(line):
            return "caesar"
    return _detected(load(path, None))


def found_and_read(path: Path) -> tuple[str, Iterator[Source | Broken] | None]:
    """`detect` and `read` with the file parsed once: its format, and its conversations (None
    for caesar's JSONL, which importer.py reads line by line)."""
    if not is_zip(path):
        line = first_line(path)
        if line is not None and _is_caesar_line(line):
            return "caesar", None
    loaded = load(path, None)
    found = _detected(loaded)
    reader = _READERS[found]
    return found, reader.read(_items(loaded, reader.LABEL))


def _detected(loaded: Loaded) -> str:
    items = _items(loaded, None)
    found = _shape(items)
    if found is None and not items:
        found = next((n for n, names in _NEIGHBOURS.items() if names & loaded.neighbours), None)
        if found is None:
            raise FileBroken(say(_where(loaded), None, "holds no conversations to tell it by"))
    if found is None:
        first = next((i for i in items if isinstance(i, dict)), items[0])
        problem = f"its conversations are each {describe(first)}, in no format caesar knows"
        raise FileBroken(say(_where(loaded), None, problem))
    return found


def read(path: Path, fmt: str) -> Iterator[Source | Broken]:
    """Every conversation of `path` read as `fmt` ("chatgpt", "claude", "openwebui"). Raises
    FileBroken before yielding anything when the file is not valid JSON, is a truncated or
    corrupt zip, or is not in `fmt`'s shape at the top level. A conversation that cannot be
    read is yielded as a Broken and the rest go on; one with nothing said in it is a Source
    with no messages."""
    reader = _READERS.get(fmt)
    if reader is None:
        raise ValueError(f"read() takes one of {', '.join(_READERS)}, not {fmt!r}")
    loaded = load(path, reader.LABEL)
    items = _items(loaded, reader.LABEL)
    if items and not any(isinstance(i, dict) and reader.is_conversation(i) for i in items):
        other = _shape(items)
        hint = f" (it looks like {with_article(_READERS[other].LABEL)})" if other else ""
        raise FileBroken(
            f"{_where(loaded)}: not {with_article(reader.LABEL)}: its conversations have no "
            f"{reader.MARKER!r}{hint}"
        )
    return reader.read(items)


def _is_caesar_line(line: str) -> bool:
    try:
        first = json.loads(line)
    except (json.JSONDecodeError, RecursionError):
        return False
    return isinstance(first, dict) and "created_at" in first and "messages" in first


def _items(loaded: Loaded, label: str | None) -> list[Any]:
    """The conversations of every part: a JSON array, an object holding one under
    "conversations", or a single conversation."""
    items: list[Any] = []
    for part in loaded.parts:
        data = part.data
        if isinstance(data, dict) and isinstance(data.get("conversations"), list):
            data = data["conversations"]
        elif isinstance(data, dict) and any(r.is_conversation(data) for r in _READERS.values()):
            data = [data]
        if not isinstance(data, list):
            problem = f"expected a JSON array of conversations, found {describe(part.data)}"
            raise FileBroken(say(part.where, label, problem))
        items.extend(data)
    return items


def _shape(items: list[Any]) -> str | None:
    """The format whose conversations these are, from the first one that shows it."""
    for item in items:
        if isinstance(item, dict):
            for name, reader in _READERS.items():
                if reader.is_conversation(item):
                    return name
    return None


def _where(loaded: Loaded) -> str:
    return loaded.parts[0].where if len(loaded.parts) == 1 else loaded.path
