"""Request body size limit, enforced before the body is parsed (pure ASGI middleware)."""

from __future__ import annotations

import json
from typing import Any

Scope = dict[str, Any]


class BodySizeLimit:
    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def _reject(self, send: Any) -> None:
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
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    too_big = int(value) > self.max_bytes
                except ValueError:
                    too_big = False
                if too_big:
                    await self._reject(send)
                    return
        received = 0

        async def limited_receive() -> Any:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    # Handled by the app's exception handler (see app.py), which answers 413.
                    raise RequestTooLarge(self.max_bytes)
            return message

        await self.app(scope, limited_receive, send)


class RequestTooLarge(Exception):
    def __init__(self, max_bytes: int) -> None:
        super().__init__(f"request body over the {max_bytes} byte limit (setting max_request_bytes)")
