"""The MCP server (caesar/mcp_server.py) over streamable HTTP, at `/mcp` on `caesar serve`.

Behind the same bearer tokens and failed-token limit as the API (`deps.check_person`): the SDK's
own app only ever sees requests that passed, and each person's token reaches a server of that
person's memory (issue #23). Without an API token caesar listens on loopback
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
from caesar.api.deps import FrontendRefused, bearer, check_person

PATH = "/mcp"
WAIT_S = 60.0  # the first request waits this long for the server to load
log = logging.getLogger(__name__)


class _Served:
    """One person's MCP server and the SDK app serving it."""

    def __init__(self) -> None:
        self.server: Any = None
        self.inner: ASGIApp | None = None
        self.loaded: anyio.Event | None = None


class Mount:
    """The `/mcp` route (`route`) and what serves it: one MCP server per person (issue #23,
    `mcp_server.build(person=…)`), the one the request's token is (`deps.check_person`), each
    with its own SDK streamable-HTTP app and its own sessions, so a session begun with one
    person's token is unknown to another's. The apps are made afresh each time the app
    starts (`running`), since a session manager runs only once and an app may be started more
    than once (tests do).

    A person's server is built (`build`, which imports the MCP SDK: ~1.5 s of pydantic models,
    which hold the GIL) in a thread on their first /mcp request, not at start: a start's own
    loads are not slowed by it, and a server no MCP client uses never pays for it. That first
    request waits for it."""

    def __init__(self, build: Callable[[int], Any], settings: Any) -> None:
        self.build = build
        self.token_set = settings.api_token is not None
        self.host = settings.host
        self.served: dict[int, _Served] = {}
        self._tasks: anyio.abc.TaskGroup | None = None
        self.route = Route(PATH, endpoint=self)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        for served in self.served.values():
            served.loaded = None
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            try:
                yield
            finally:
                self._tasks = None
                tasks.cancel_scope.cancel()

    async def _started(self, person: int) -> ASGIApp | None:
        """Build and run `person`'s server on their first request (of this start of the app),
        and wait until it serves; None if it failed (or the app was not started)."""
        served = self.served.setdefault(person, _Served())
        if served.loaded is None:
            if self._tasks is None:  # the app was not started (no lifespan)
                return None
            served.loaded = anyio.Event()
            self._tasks.start_soon(self._serve, served, person)
        with anyio.move_on_after(WAIT_S):
            await served.loaded.wait()
        return served.inner

    async def _serve(self, served: _Served, person: int) -> None:
        loaded = served.loaded
        assert loaded is not None
        try:
            inner = await anyio.to_thread.run_sync(self._app, served, person)
            async with served.server.session_manager.run():
                served.inner = inner
                loaded.set()
                log.info("MCP server ready at %s (person %d)", PATH, person)
                await anyio.sleep_forever()
        except Exception:
            log.exception("the MCP server failed to start; /mcp answers 503")
        finally:
            served.inner = None
            loaded.set()

    def _app(self, served: _Served, person: int) -> ASGIApp:
        from mcp.server.transport_security import TransportSecuritySettings

        if served.server is None:
            served.server = self.build(person)
        security = None
        if self.token_set:
            security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
        app: ASGIApp = served.server.streamable_http_app(
            streamable_http_path=PATH, transport_security=security, host=self.host
        )
        return app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The API's token check (whose token it is), then that person's SDK app."""
        request = Request(scope)
        try:
            # A wrong token may lock the address out and audit it: a database write, so off
            # the event loop.
            person = await run_in_threadpool(check_person, request, bearer(request), via="mcp")
        except AuthLocked as locked:
            refusal = JSONResponse(
                {"error": {"type": "rate_limited", "message": locked.message}},
                status_code=429,
                headers={"Retry-After": str(locked.retry_after)},
            )
            await refusal(scope, receive, send)
            return
        except FrontendRefused as refused:
            kind = "forbidden" if refused.status_code == 403 else "bad_request"
            await JSONResponse(
                {"error": {"type": kind, "message": refused.message}},
                status_code=refused.status_code,
            )(scope, receive, send)
            return
        if person is None:
            refusal = JSONResponse(
                {
                    "error": {
                        "type": "unauthorized",
                        "message": "missing or wrong API token: send 'Authorization: Bearer "
                        "<your token>'",
                    }
                },
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
            await refusal(scope, receive, send)
            return
        inner = await self._started(person)
        if inner is None:
            await JSONResponse(
                {"error": {"type": "unavailable", "message": "the MCP server is not running"}},
                status_code=503,
            )(scope, receive, send)
            return
        await inner(scope, receive, send)
