"""The MCP server (caesar/mcp_server.py) over streamable HTTP, at `/mcp` on `caesar serve`.

Behind the same bearer token and failed-token limit as the API (`deps.check_token`): the SDK's
own app only ever sees requests that passed. Without an API token caesar listens on loopback
only, and the SDK's DNS-rebinding protection (Host and Origin must be loopback) stays on, so a
web page the operator visits cannot reach it through the browser; with a token, the token is
the protection.
"""

from __future__ import annotations

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


class _Guarded:
    """ASGI: the API's token check, then the SDK's app."""

    def __init__(self, inner: ASGIApp) -> None:
        self.inner = inner

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
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
        await self.inner(scope, receive, send)


def route(server: MCPServer, settings: Any) -> Route:
    """The `/mcp` route for the FastAPI app; the caller runs `server.session_manager.run()`
    in the app's lifespan."""
    security = None
    if settings.api_token is not None:
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    inner = server.streamable_http_app(
        streamable_http_path=PATH, transport_security=security, host=settings.host
    )
    return Route(PATH, endpoint=_Guarded(inner))
