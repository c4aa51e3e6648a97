"""A file uploaded in a multipart form, streamed to a private temporary file as it arrives,
under a size limit (the dashboard's import page: an export can be hundreds of MB).

Starlette's own form parsing would spool the whole file before the route could look at it, and
the app's `BodySizeLimit` holds a body in memory; so the route reads the request stream itself
(its path is in `BodySizeLimit`'s `streamed`) and hands it here. The file goes into a new
directory of its own (mode 0700, the file 0600) under the system's temporary directory
(`$TMPDIR`); `Upload.discard()` removes both, and a failed upload removes them before raising.

`before_file(fields)` sees the form's fields sent before the file (the CSRF token: browsers
send fields in the form's order) and may raise to refuse the upload before a byte of the file
is written.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, BinaryIO

from fastapi import Request
from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.concurrency import run_in_threadpool

if TYPE_CHECKING:
    from python_multipart.multipart import MultipartCallbacks

MAX_FIELDS = 10
MAX_FIELD_BYTES = 1000
MAX_NAME_CHARS = 200
_SUFFIX = re.compile(r"\.[a-z0-9]{1,10}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class UploadRefused(Exception):
    """An upload not taken, with the status and the message to show; nothing of it is kept."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Upload:
    path: Path  # the file, in a directory of its own
    name: str  # the name the browser gave it: display text only, never a path here
    size: int
    fields: dict[str, str]

    def discard(self) -> None:
        shutil.rmtree(self.path.parent, ignore_errors=True)


def display_name(raw: str) -> str:
    """The file name a browser sent, as text to show: its last path part, without control
    characters, at most MAX_NAME_CHARS. Pure."""
    name = _CONTROL.sub("", raw.replace("\\", "/").rsplit("/", 1)[-1]).strip()
    return name[:MAX_NAME_CHARS] or "upload"


def file_suffix(name: str) -> str:
    """The name's extension (".zip", ".json") when it is a plain one, else "": the temporary
    file keeps it, for readers that go by it. Pure."""
    suffix = PurePosixPath(name).suffix.lower()
    return suffix if _SUFFIX.fullmatch(suffix) else ""


def size_text(size: int) -> str:
    """'1 GB', '2 MB', '1.5 KB': a size in bytes, in binary units. Pure."""
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:,.1f}".removesuffix(".0") + f" {unit}"
    return f"{size} bytes"


@dataclass
class _Part:
    headers: dict[bytes, bytes] = field(default_factory=dict)
    name: str = ""
    data: bytearray = field(default_factory=bytearray)
    is_file: bool = False


class _Receiver:
    """python-multipart's callbacks: small fields kept, the one file's bytes queued to write."""

    def __init__(
        self,
        directory: Path,
        file_field: str,
        before_file: Callable[[dict[str, str]], None],
    ) -> None:
        self.directory = directory
        self.file_field = file_field
        self.before_file = before_file
        self.fields: dict[str, str] = {}
        self.part = _Part()
        self.header_name = b""
        self.header_value = b""
        self.file: BinaryIO | None = None
        self.path: Path | None = None
        self.name = ""
        self.file_ended = False
        self.pending: list[bytes] = []
        self.size = 0

    def callbacks(self) -> MultipartCallbacks:
        return {
            "on_part_begin": self.on_part_begin,
            "on_part_data": self.on_part_data,
            "on_part_end": self.on_part_end,
            "on_header_field": self.on_header_field,
            "on_header_value": self.on_header_value,
            "on_header_end": self.on_header_end,
            "on_headers_finished": self.on_headers_finished,
        }

    def on_part_begin(self) -> None:
        self.part = _Part()

    def on_header_field(self, data: bytes, start: int, end: int) -> None:
        self.header_name += data[start:end]

    def on_header_value(self, data: bytes, start: int, end: int) -> None:
        self.header_value += data[start:end]

    def on_header_end(self) -> None:
        self.part.headers[self.header_name.lower()] = self.header_value
        self.header_name = self.header_value = b""

    def on_headers_finished(self) -> None:
        _disposition, options = parse_options_header(self.part.headers.get(b"content-disposition"))
        self.part.name = options.get(b"name", b"").decode("utf-8", "replace")
        if b"filename" not in options:
            if len(self.fields) >= MAX_FIELDS:
                raise UploadRefused(
                    400, f"At most {MAX_FIELDS} form fields may come with the file."
                )
            return
        if self.part.name != self.file_field or self.file is not None:
            raise UploadRefused(400, f"Send one file, as the form's {self.file_field!r} field.")
        self.before_file(dict(self.fields))
        self.part.is_file = True
        self.name = display_name(options[b"filename"].decode("utf-8", "replace"))
        self.path = self.directory / ("upload" + file_suffix(self.name))
        descriptor = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        self.file = os.fdopen(descriptor, "wb")

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        if self.part.is_file:
            self.pending.append(data[start:end])
            self.size += end - start
        elif len(self.part.data) + end - start > MAX_FIELD_BYTES:
            raise UploadRefused(400, f"The form field {self.part.name[:40]!r} is too long.")
        else:
            self.part.data += data[start:end]

    def on_part_end(self) -> None:
        if self.part.is_file:
            self.file_ended = True
        else:
            self.fields[self.part.name] = self.part.data.decode("utf-8", "replace")


async def receive_upload(
    request: Request,
    *,
    file_field: str,
    max_bytes: int,
    limit_name: str,
    before_file: Callable[[dict[str, str]], None],
) -> Upload:
    """Read `request`'s multipart body: its one file (`file_field`) into a private temporary
    file, the other fields as text. UploadRefused (400, 413) for a body that is not such a
    form, has no file in it, or is over `max_bytes` (named `limit_name` in the message);
    whatever `before_file` raises, as it raised it."""
    content_type, options = parse_options_header(request.headers.get("content-type"))
    boundary = options.get(b"boundary")
    if content_type != b"multipart/form-data" or not boundary:
        raise UploadRefused(400, "Send the file in a multipart/form-data form, as the page does.")
    too_large = UploadRefused(
        413, f"The file is over the {size_text(max_bytes)} an upload may be ({limit_name})."
    )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise too_large  # said before a byte is read
    directory = Path(tempfile.mkdtemp(prefix="caesar-upload-"))  # mode 0700
    receiver = _Receiver(directory, file_field, before_file)
    received = 0
    try:
        parser = MultipartParser(boundary, receiver.callbacks())
        async for chunk in request.stream():
            received += len(chunk)
            if received > max_bytes:
                raise too_large
            parser.write(chunk)
            if receiver.pending:
                assert receiver.file is not None  # pending only once the file part began
                await run_in_threadpool(receiver.file.write, b"".join(receiver.pending))
                receiver.pending.clear()
        parser.finalize()
        if receiver.file is None or receiver.path is None or not receiver.file_ended:
            raise UploadRefused(400, "Choose a file to import.")
        receiver.file.close()
        if receiver.size == 0:  # also the form sent with no file chosen
            raise UploadRefused(400, "Choose a file to import: the one sent is empty.")
        return Upload(receiver.path, receiver.name, receiver.size, receiver.fields)
    except BaseException as exc:  # refused, malformed, disconnected: nothing of it stays
        if receiver.file is not None:
            receiver.file.close()
        shutil.rmtree(directory, ignore_errors=True)
        if isinstance(exc, FormParserError):
            raise UploadRefused(400, f"The multipart form is malformed: {exc}"[:300]) from None
        raise
