"""The MCP server (caesar/mcp_server.py) over streamable HTTP, at `/mcp` on `caesar serve`.

Behind the same bearer token and failed-token limit as the API (`deps.check_token`): the SDK's
own app only ever sees requests that passed. Without an API token caesar listens on loopback
only, and the SDK's DNS-rebinding protection (Host and Origin must be loopback) stays on, so a
web page the operator visits cannot reach it through the browser; with a token, the token is
the protection.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from caesar.api.auth_limit import AuthLocked
from caesar.api.deps import bearer, check_token

PATH = "/mcp"
WAIT_S = 60.0  # the first request waits this long for the server to load
log = logging.getLogger(__name__)


class Mount:
    """The `/mcp` route (`route`) and what serves it: the SDK's streamable-HTTP app, made
    afresh each time the app starts (`running`), since a session manager runs only once and
    an app may be started more than once (tests do).

    The server is built (`build`, which imports the MCP SDK: ~1.5 s of pydantic models, which
    hold the GIL) in a thread on the first /mcp request, not at start: a start's own loads
    are not slowed by it, and a server no MCP client uses never pays for it. That first
    request waits for it."""

    def __init__(self, build: Callable[[], Any], settings: Any) -> None:
        self.build = build
        self.server: Any = None
        self.token_set = settings.api_token is not None
        self.host = settings.host
        self.inner: ASGIApp | None = None
        self.loaded: anyio.Event | None = None
        self._tasks: anyio.abc.TaskGroup | None = None
        self.route = Route(PATH, endpoint=self)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        self.loaded = None
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            try:
                yield
            finally:
                self._tasks = None
                tasks.cancel_scope.cancel()

    async def _started(self) -> None:
        """Build and run the server on the first request (of this start of the app), and
        wait until it serves (or failed: then `inner` stays None)."""
        if self.loaded is None:
            if self._tasks is None:  # the app was not started (no lifespan)
                return
            self.loaded = anyio.Event()
            self._tasks.start_soon(self._serve, self.loaded)
        with anyio.move_on_after(WAIT_S):
            await self.loaded.wait()

    async def _serve(self, loaded: anyio.Event) -> None:
        try:
            inner = await anyio.to_thread.run_sync(self._app)
            async with self.server.session_manager.run():
                self.inner = inner
                loaded.set()
                log.info("MCP server ready at %s", PATH)
                await anyio.sleep_forever()
        except Exception:
            log.exception("the MCP server failed to start; /mcp answers 503")
        finally:
            self.inner = None
            loaded.set()

    def _app(self) -> ASGIApp:
        from mcp.server.transport_security import TransportSecuritySettings

        if self.server is None:
            self.server = self.build()
        security = None
        if self.token_set:
            security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
        app: ASGIApp = self.server.streamable_http_app(
            streamable_http_path=PATH, transport_security=security, host=self.host
        )
        return app

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
        await self._started()
        if self.inner is None:
            await JSONResponse(
                {"error": {"type": "unavailable", "message": "the MCP server is not running"}},
                status_code=503,
            )(scope, receive, send)
            return
        await self.inner(scope, receive, send)
