"""`create_app(settings)`: the FastAPI application, its error translation and its lifecycle."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from caesar import __version__
from caesar.api.auth_limit import AuthFailureLimiter
from caesar.api.deps import Authenticated
from caesar.api.limits import BodySizeLimit, RequestTooLarge
from caesar.brain import Brain
from caesar.config import Settings
from caesar.db.engine import UNAVAILABLE, outage
from caesar.errors import CaesarError, ConfigError, InputError, NotFound, ProviderError
from caesar.memory.scope import Scope
from caesar.services import Services
from caesar.workers import WorkerRunner

log = logging.getLogger(__name__)

# Seconds a client is told to wait when the database is unreachable: a PostgreSQL restart
# takes a few.
DATABASE_RETRY_AFTER = 2


def _error(
    status: int, kind: str, message: str, headers: dict[str, str] | None = None, **extra: Any
) -> JSONResponse:
    body = {"error": {"type": kind, "message": message, **extra}}
    return JSONResponse(body, status_code=status, headers=headers)


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ProviderError)
    async def _provider(_: Request, exc: ProviderError) -> JSONResponse:
        return _error(exc.http_status, "provider_error", str(exc), provider=exc.provider)

    @app.exception_handler(InputError)
    async def _input(_: Request, exc: InputError) -> JSONResponse:
        return _error(400, "invalid_request", str(exc))

    @app.exception_handler(NotFound)
    async def _not_found(_: Request, exc: NotFound) -> JSONResponse:
        return _error(404, "not_found", str(exc))

    @app.exception_handler(ConfigError)
    async def _config(_: Request, exc: ConfigError) -> JSONResponse:
        return _error(503, "not_configured", str(exc))

    @app.exception_handler(CaesarError)
    async def _caesar(_: Request, exc: CaesarError) -> JSONResponse:
        return _error(503, "unavailable", str(exc))

    async def _database(_: Request, exc: Exception) -> JSONResponse:
        # PostgreSQL restarting or unreachable, SQLite busy past its timeout: every statement
        # of the request ran in a transaction that rolled back, so nothing of it was kept and
        # the client can send it again (a chat turn fails before it is answered, or is not
        # recorded and so not answered either: never a reply without its row).
        log.warning("database unavailable: %s", outage(exc))  # type: ignore[arg-type]
        return _error(
            503,
            "database_unavailable",
            "The database is unavailable; nothing of this request was saved. Try again in a "
            "moment.",
            headers={"Retry-After": str(DATABASE_RETRY_AFTER)},
        )

    for unavailable in UNAVAILABLE:
        app.add_exception_handler(unavailable, _database)

    @app.exception_handler(RequestTooLarge)
    async def _too_large(_: Request, exc: RequestTooLarge) -> JSONResponse:
        return _error(413, "request_too_large", str(exc))

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = []
        for err in exc.errors():
            if err.get("type") == "json_invalid":  # loc is ("body", <character offset>)
                why = (err.get("ctx") or {}).get("error", "")
                problems.append(f"body: invalid JSON at character {err['loc'][-1]}: {why}")
                continue
            where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
            problems.append(f"{where}: {err.get('msg')}")
        return _error(422, "invalid_request", "; ".join(problems)[:2000], details=problems[:20])


def create_app(
    settings: Settings, services: Services | None = None, *, run_workers: bool | None = None
) -> FastAPI:
    """Build the app. Pass `services` to share a database/embedder (tests); `run_workers`
    overrides `settings.run_workers`."""
    services = services or Services.build(settings)
    brain = Brain(services)
    start_workers = settings.run_workers if run_workers is None else run_workers

    mcp = None
    if settings.mcp.enabled:
        from caesar.api.mcp_http import Mount

        def build_mcp(person: int) -> Any:
            from caesar.mcp_server import build

            scope = Scope(person, engine=services.episodes.backend)
            return build(services, transport="http", scope=scope)

        mcp = Mount(build_mcp, settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runner = WorkerRunner(services.enabled_workers()) if start_workers else None
        if runner:
            runner.start()
        app.state.runner = runner
        try:
            async with AsyncExitStack() as stack:
                if mcp is not None:  # the streamable-HTTP sessions live as long as the app
                    await stack.enter_async_context(mcp.running())
                yield
        finally:
            app.state.import_jobs.stop()  # a running dashboard import ends, its file deleted
            if runner:
                runner.stop()

    # The API description is served behind the token like everything but /healthz; the
    # interactive docs pages are off (they load their scripts from a CDN).
    app = FastAPI(
        title="caesar",
        version=__version__,
        lifespan=lifespan,
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )
    app.state.services = services
    app.state.brain = brain
    # One per app, so failures counted by the API and the dashboard login add up.
    app.state.auth_limiter = AuthFailureLimiter.for_settings(settings)
    _install_error_handlers(app)

    from caesar.api import (
        dashboard,
        dashboard_import,
        routes_chat,
        routes_conversations,
        routes_episodes,
        routes_memory,
        routes_said,
        routes_standing,
    )

    # The dashboard's running imports, one registry per app: stopped with the app.
    app.state.import_jobs = dashboard_import.ImportJobs()

    @app.get("/healthz", tags=["health"], response_model=None)
    def healthz() -> Any:
        """Ready, or 503 "warming" with what is still loading, or 503 "unavailable" while the
        database cannot be reached; the only route that needs no token."""
        waiting = services.readiness.waiting()
        if waiting:
            body = {"status": "warming", "waiting": waiting, "version": __version__}
            return JSONResponse(body, status_code=503)
        if not services.db.reachable():
            # a load balancer sends the turn elsewhere, or the client waits (no detail here:
            # the route needs no token; the server's log has the error)
            body = {"status": "unavailable", "database": "unreachable", "version": __version__}
            return JSONResponse(body, status_code=503)
        return {"status": "ok", "version": __version__}

    @app.get("/openapi.json", include_in_schema=False, dependencies=[Authenticated])
    def openapi() -> dict[str, Any]:
        return app.openapi()

    app.include_router(routes_chat.router)
    app.include_router(routes_memory.router)
    app.include_router(routes_standing.router)
    app.include_router(routes_said.router)
    app.include_router(routes_episodes.router)
    app.include_router(routes_conversations.router)
    app.include_router(dashboard.router)
    if mcp is not None:
        app.router.routes.append(mcp.route)
    app.add_middleware(
        BodySizeLimit, max_bytes=settings.max_request_bytes, streamed=dashboard.STREAMED
    )
    return app
