"""Request body size limit (`max_request_bytes`, 1 MiB by default), enforced before any parsing.

A pure ASGI middleware. A declared `Content-Length` over the limit is refused at once. A body
without one (chunked upload) is read here, up to the limit, and then handed to the app in one
piece: the 413 is answered by the middleware itself. (Raising from inside `receive` instead
would reach FastAPI's body parser, which turns any such error into a vague 400.)

Paths in `streamed` are passed through untouched: their route reads the body as it arrives
and enforces a limit of its own (the dashboard's import upload: `max_import_bytes`,
api/upload.py), where holding it here would hold a whole history export in memory.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Collection, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class RequestTooLarge(Exception):
    def __init__(self, max_bytes: int) -> None:
        super().__init__(
            f"request body over the {max_bytes} byte limit (setting max_request_bytes)"
        )


def declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


class BodySizeLimit:
    def __init__(self, app: Any, max_bytes: int, streamed: Collection[str] = ()) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.streamed = frozenset(streamed)

    async def _reject(self, send: Send) -> None:
        body = json.dumps(
            {
                "error": {
                    "type": "request_too_large",
                    "message": str(RequestTooLarge(self.max_bytes)),
                }
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.streamed:
            await self.app(scope, receive, send)
            return
        declared = declared_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._reject(send)
            return
        parts: list[bytes] = []
        received = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away before its body arrived: nobody to answer
            chunk = message.get("body", b"")
            received += len(chunk)
            if received > self.max_bytes:
                await self._reject(send)
                return
            parts.append(chunk)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            # The whole body once, then the real channel (for disconnects during streaming).
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(parts), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
