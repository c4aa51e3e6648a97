"""The one shape every export is read into: a `Source` per conversation, or a `Broken` naming
one that could not be read; `FileBroken` when the file as a whole cannot be."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from caesar.errors import InputError

FORMATS: tuple[str, ...] = ("chatgpt", "claude", "openwebui", "caesar")


@dataclass(frozen=True)
class SourceMessage:
    role: Literal["user", "assistant"]
    content: str
    at: datetime | None = None  # naive UTC; None when the export gives no time for it


@dataclass(frozen=True)
class Source:
    """One conversation of an export: `key` is the format's own id ("chatgpt:<id>"), unique
    within the format, what a second import dedupes by."""

    key: str
    title: str | None
    created_at: datetime  # naive UTC: the conversation's start
    messages: list[SourceMessage] = field(default_factory=list)


@dataclass(frozen=True)
class Broken:
    """A conversation in a file that parsed, which could not be read: skipped, named. `key` is
    the format's key for it, or "#<n>" (its 1-based position in the file) when it has no id."""

    key: str
    reason: str


class FileBroken(InputError):
    """The file as a whole cannot be read in its format (nothing is imported)."""
