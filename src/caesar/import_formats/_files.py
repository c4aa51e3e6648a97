"""Reading an export file whole: a .zip (its `conversations.json`, or the split
`conversations-000.json`, … of large ChatGPT exports) or a bare JSON file. Anything that stops
it being read is a FileBroken saying which file and where."""

from __future__ import annotations

import json
import re
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from caesar.import_formats.source import FORMATS, FileBroken

# A caesar JSONL line longer than this is not one the importer takes anyway.
FIRST_LINE_LIMIT = 4_000_000
_CONVERSATIONS_NAME = re.compile(r"conversations(-[0-9]+)?\.json")


@dataclass(frozen=True)
class Part:
    where: str  # for messages: "export.zip (conversations.json)", or the path
    data: Any  # its JSON


@dataclass(frozen=True)
class Loaded:
    path: str
    parts: list[Part]
    neighbours: frozenset[str]  # names beside conversations.json in a zip ("users.json", …)


def say(where: str, label: str | None, problem: str) -> str:
    """`where`: `problem`, said of the format being read, or (detecting) with the formats
    caesar knows."""
    if label:
        return f"{where}: cannot be read as {with_article(label)}: {problem}"
    return f"{where}: {problem} (caesar imports: {', '.join(FORMATS)})"


def with_article(label: str) -> str:
    """The label as a phrase: "a ChatGPT export", "an Open WebUI chat export"."""
    return f"{'an' if label[:1].lower() in 'aeiou' else 'a'} {label}"


def is_zip(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            head = handle.read(4)
    except OSError as exc:
        raise FileBroken(f"{path}: cannot be read ({exc.strerror or exc})") from None
    return head in (b"PK\x03\x04", b"PK\x05\x06") or path.suffix.lower() == ".zip"


def load(path: Path, label: str | None) -> Loaded:
    """The JSON of `path`; `label` (the format being read, "ChatGPT export") names it in
    errors, None while its format is still unknown."""
    if is_zip(path):
        return _load_zip(path, label)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise FileBroken(say(str(path), label, f"cannot be read ({exc.strerror or exc})")) from None
    return Loaded(str(path), [Part(str(path), parse(raw, str(path), label))], frozenset())


def parse(raw: bytes, where: str, label: str | None) -> Any:
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FileBroken(say(where, label, f"not UTF-8 text (byte {exc.start})")) from None
    if not text.strip():
        raise FileBroken(say(where, label, "the file is empty"))
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        problem = f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        raise FileBroken(say(where, label, problem)) from None
    except RecursionError:
        raise FileBroken(say(where, label, "JSON nested too deeply to read")) from None


def first_line(path: Path) -> str | None:
    """The first non-blank line (at most FIRST_LINE_LIMIT characters, the file's head only);
    None when there is none or it is not UTF-8."""
    try:
        with path.open(encoding="utf-8-sig") as handle:
            while line := handle.readline(FIRST_LINE_LIMIT):
                if line.strip():
                    return line
    except UnicodeDecodeError:
        return None
    return None


def _load_zip(path: Path, label: str | None) -> Loaded:
    broken = "not a readable .zip (truncated or corrupt"
    try:
        with zipfile.ZipFile(path) as archive:
            names = [info.filename for info in archive.infolist() if not info.is_dir()]
            members, folder = _conversation_members(names)
            if not members:
                held = ", ".join(sorted(PurePosixPath(n).name for n in names)[:6]) or "nothing"
                problem = f"a .zip with no conversations.json in it (it holds {held})"
                raise FileBroken(say(str(path), label, problem))
            raws = [(name, archive.read(name)) for name in members]
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError) as exc:
        raise FileBroken(say(str(path), label, f"{broken}: {exc})")) from None
    except RuntimeError as exc:  # an encrypted member
        raise FileBroken(say(str(path), label, f"not a readable .zip ({exc})")) from None
    neighbours = frozenset(
        PurePosixPath(n).name for n in names if PurePosixPath(n).parent.as_posix() == folder
    )
    parts = [Part(f"{path} ({name})", parse(raw, f"{path} ({name})", label)) for name, raw in raws]
    return Loaded(str(path), parts, neighbours)


def _conversation_members(names: list[str]) -> tuple[list[str], str]:
    """The conversations file(s) nearest the zip's root, and their folder ("." at the root):
    conversations.json, else conversations-000.json, conversations-001.json, …"""
    found = [
        n
        for n in names
        if _is_conversations_name(PurePosixPath(n).name) and "__MACOSX" not in n.split("/")
    ]
    if not found:
        return [], "."
    depth = min(len(PurePosixPath(n).parts) for n in found)
    folder = min(
        PurePosixPath(n).parent.as_posix() for n in found if len(PurePosixPath(n).parts) == depth
    )
    here = sorted(n for n in found if PurePosixPath(n).parent.as_posix() == folder)
    whole = [n for n in here if PurePosixPath(n).name == "conversations.json"]
    return whole or here, folder


def _is_conversations_name(name: str) -> bool:
    return _CONVERSATIONS_NAME.fullmatch(name) is not None
