"""The MCP server (caesar/mcp_server.py) over streamable HTTP, at `/mcp` on `caesar serve`.

Behind the same bearer token and failed-token limit as the API (`deps.check_token`): the SDK's
own app only ever sees requests that passed. Without an API token caesar listens on loopback
only, and the SDK's DNS-rebinding protection (Host and Origin must be loopback) stays on, so a
web page the operator visits cannot reach it through the browser; with a token, the token is
the protection.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from caesar.api.auth_limit import AuthLocked
from caesar.api.deps import bearer, check_token

PATH = "/mcp"


class Mount:
    """The `/mcp` route (`route`) and what serves it: the SDK's streamable-HTTP app, made
    afresh each time the app starts (`running`), since a session manager runs only once and
    an app may be started more than once (tests do)."""

    def __init__(self, server: MCPServer, settings: Any) -> None:
        self.server = server
        self.security = None
        if settings.api_token is not None:
            self.security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
        self.host = settings.host
        self.inner: ASGIApp | None = None
        self.route = Route(PATH, endpoint=self)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        self.inner = self.server.streamable_http_app(
            streamable_http_path=PATH, transport_security=self.security, host=self.host
        )
        try:
            async with self.server.session_manager.run():
                yield
        finally:
            self.inner = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The API's token check, then the SDK's app."""
        request = Request(scope)
        try:
            # A wrong token may lock the address out and audit it: a database write, so off
            # the event loop.
            ok = await run_in_threadpool(check_token, request, bearer(request), via="mcp")
        except AuthLocked as locked:
            refusal = JSONResponse(
                {"error": {"type": "rate_limited", "message": locked.message}},
                status_code=429,
                headers={"Retry-After": str(locked.retry_after)},
            )
            await refusal(scope, receive, send)
            return
        if not ok:
            refusal = JSONResponse(
                {
                    "error": {
                        "type": "unauthorized",
                        "message": "missing or wrong API token: send 'Authorization: Bearer "
                        "<api_token>'",
                    }
                },
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
            await refusal(scope, receive, send)
            return
        if self.inner is None:
            await JSONResponse({"error": {"type": "unavailable"}}, status_code=503)(
                scope, receive, send
            )
            return
        await self.inner(scope, receive, send)
