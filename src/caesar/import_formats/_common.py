"""What the formats share: reading one conversation at a time (a failure becomes a `Broken`,
the rest go on), dates, placeholders for what is not text, and merging turns."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from caesar.clock import to_naive_utc
from caesar.import_formats.source import Broken, Source, SourceMessage


class Unreadable(Exception):
    """One conversation cannot be read (the message says why): it is reported as a `Broken`."""


ReadOne = Callable[[dict[str, Any], str], Source]


def each_conversation(
    items: list[Any], prefix: str, id_fields: tuple[str, ...], read_one: ReadOne
) -> Iterator[Source | Broken]:
    """`read_one(conversation, key)` for every item; one that cannot be read is yielded as a
    Broken under its key ("<prefix>:<id>" from the first of `id_fields` it has, or "#<n>"
    counted from 1 when it has none)."""
    for n, item in enumerate(items, start=1):
        found = [item.get(f) for f in id_fields] if isinstance(item, dict) else []
        ident = next((i for i in found if isinstance(i, str) and i.strip()), None)
        key = f"{prefix}:{ident}" if ident is not None else f"#{n}"
        if not isinstance(item, dict):
            yield Broken(key, f"conversation #{n} is {describe(item)}, not a JSON object")
            continue
        if ident is None:
            # Without its own id a second import could not tell it was already imported.
            names = " or ".join(repr(f) for f in id_fields)
            yield Broken(key, f"conversation #{n} has no {names}")
            continue
        try:
            yield read_one(item, key)
        except Unreadable as exc:
            yield Broken(key, str(exc))
        except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as exc:
            # A shape no check above foresaw (hostile or newer exports): reported, not fatal.
            yield Broken(key, f"unexpected shape ({type(exc).__name__}: {exc})")


def describe(value: object) -> str:
    """What a JSON value is, for messages: "a JSON array", "a JSON object with keys 'a', 'b'"."""
    if isinstance(value, dict):
        keys = ", ".join(repr(k) for k in list(value)[:8])
        more = ", …" if len(value) > 8 else ""
        return f"a JSON object with keys {keys}{more}" if value else "an empty JSON object"
    if isinstance(value, list):
        return "a JSON array" if value else "an empty JSON array"
    if isinstance(value, str):
        return "a JSON string"
    if isinstance(value, bool):
        return "a JSON boolean"
    if isinstance(value, int | float):
        return "a JSON number"
    return "null" if value is None else type(value).__name__


def as_object(value: object, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Unreadable(f"{what} is {describe(value)}, not a JSON object")
    return value


def as_list(value: object, what: str) -> list[Any]:
    """A JSON array; null counts as an empty one."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise Unreadable(f"{what} is {describe(value)}, not a JSON array")
    return value


def text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def from_epoch(value: object, what: str) -> datetime | None:
    """Seconds since 1970 (int or float) as naive UTC; None stays None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Unreadable(f"{what} {value!r} is not a time in seconds")
    try:
        if not math.isfinite(value):
            raise ValueError(value)
        return to_naive_utc(datetime.fromtimestamp(value, UTC))
    except (OverflowError, OSError, ValueError):
        raise Unreadable(f"{what} {value!r} is not a time caesar can hold") from None


def from_iso(value: object, what: str) -> datetime | None:
    """An ISO-8601 time as naive UTC (one without a zone is taken as UTC); None, "" → None."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise Unreadable(f"{what} {value!r} is not an ISO-8601 time")
    try:
        return to_naive_utc(datetime.fromisoformat(value))
    except ValueError:
        raise Unreadable(f"{what} {value!r} is not an ISO-8601 time") from None


def first_time(*candidates: datetime | None) -> datetime | None:
    return next((t for t in candidates if t is not None), None)


def file_placeholder(name: object) -> str:
    """What stands for an attached file the export holds no text of: "[file: notes.txt]"."""
    if isinstance(name, str) and name.strip():
        return f"[file: {name.strip()}]"
    return "[file]"


def with_placeholders(placeholders: list[str], text: str) -> str:
    """The placeholders of a message's attachments (each once), then its text."""
    unique = list(dict.fromkeys(placeholders))
    return "\n".join([*unique, text] if text else unique)


def merged(messages: Iterable[SourceMessage]) -> list[SourceMessage]:
    """Consecutive turns of one role as one turn (blank line between), dated at the first;
    turns with no text left out."""
    out: list[SourceMessage] = []
    for message in messages:
        content = message.content.strip()
        if not content:
            continue
        if out and out[-1].role == message.role:
            last = out[-1]
            out[-1] = SourceMessage(last.role, f"{last.content}\n\n{content}", last.at)
        else:
            out.append(SourceMessage(message.role, content, message.at))
    return out
