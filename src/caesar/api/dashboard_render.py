"""How every dashboard page is answered: the Jinja2 templates, the security headers, failures
as HTML pages, redirects.

Autoescape is on for every template and no template uses `|safe`; a strict
Content-Security-Policy backs the escaping up: no scripts at all, except the chat page's own
`static/chat.js` (`SCRIPTED_HEADERS`), which inserts text only as text. Each page module makes
its router with `route_class=HtmlErrors`; `dashboard.py` gathers them under `/dashboard`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import jinja2
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse, Response
from fastapi.routing import APIRoute
from fastapi.templating import Jinja2Templates

from caesar.api.auth_limit import AuthLocked
from caesar.api.dashboard_session import (
    COOKIE_PATH,
    SESSION_MAX_AGE,
    Denied,
    LoginRequired,
    Viewer,
)
from caesar.api.deps import SESSION_COOKIE
from caesar.clock import utcnow
from caesar.errors import CaesarError, InputError, NotFound, ProviderError
from caesar.memory.render import relative_time
from caesar.named_time import named_spans

HERE = Path(__file__).resolve().parent
PAGE_SIZE = 50
# The largest id SQLite can store: a bigger one is a 422 page, not an OverflowError (a 500).
MAX_ID = 2**63 - 1

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
# The chat page: its one script, from this server, which may fetch from this server only.
SCRIPTED_HEADERS = {
    **SECURITY_HEADERS,
    "Content-Security-Policy": SECURITY_HEADERS["Content-Security-Policy"]
    + "; script-src 'self'; connect-src 'self'",
}
# The pages a form sent from elsewhere may name to come back to (`back`): the chat page.
_BACK = re.compile(r"/dashboard/chat(/[1-9][0-9]{0,18})?")


def operator_said(payload: Any) -> str:
    """A chat row's message from the operator: the last user turn it sent. Pure."""
    messages = payload.get("messages") if isinstance(payload, dict) else None
    for message in reversed(messages if isinstance(messages, list) else []):
        if isinstance(message, dict) and message.get("role") == "user":
            return str(message.get("content", ""))
    return ""


def counted(number: Any, noun: str) -> str:
    """'1 conversation', '2 conversations', '0 facts'. Pure."""
    return f"{number} {noun}{'' if number == 1 else 's'}"


def spans_named(asked: Any) -> list[tuple[str, str]]:
    """(said, local dates) of each span a turn's `memory.asked` record names; [] for none (or
    for a row without one). Pure."""
    return named_spans(asked) if isinstance(asked, Mapping) else []


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,  # every template, whatever its name
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["ago"] = lambda then, now: relative_time(then, now)
    env.filters["iso"] = lambda moment: moment.strftime("%Y-%m-%d %H:%M:%S UTC")
    env.filters["said"] = operator_said
    env.filters["counted"] = counted
    env.filters["spans_named"] = spans_named
    return env


templates = Jinja2Templates(env=_env())


class HtmlErrors(APIRoute):
    """Dashboard failures answer as HTML pages (or a redirect to log in), not the JSON errors
    the API routes give; the app-wide handlers stay untouched."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def guarded(request: Request) -> Response:
            try:
                return await handler(request)
            except LoginRequired:
                if request.method == "GET":
                    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                    return redirect(f"/dashboard/login?next={quote(here)}")
                return problem(request, 401, "log in first")
            except Denied as exc:
                return problem(request, exc.status, exc.message)
            except AuthLocked as locked:  # too many wrong bearer tokens from this address
                response = problem(request, 429, locked.message)
                response.headers["Retry-After"] = str(locked.retry_after)
                return response
            except NotFound as exc:
                return problem(request, 404, str(exc))
            except InputError as exc:
                return problem(request, 400, str(exc))
            except ProviderError as exc:  # a chat turn the model did not answer (audited)
                return problem(request, exc.http_status, f"The model did not answer: {exc}")
            except CaesarError as exc:  # not ready (the embedder still loading), misconfigured
                return problem(request, 503, str(exc))
            except RequestValidationError as exc:
                where = "; ".join(
                    f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}"
                    for e in exc.errors()
                )
                return problem(request, 422, f"invalid request: {where}"[:500])

        return guarded


def set_session(response: Response, request: Request, cookie: str) -> None:
    response.set_cookie(
        SESSION_COOKIE,
        cookie,
        max_age=SESSION_MAX_AGE,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def page(
    request: Request,
    viewer: Viewer | None,
    name: str,
    context: dict[str, Any],
    status: int = 200,
    headers: Mapping[str, str] = SECURITY_HEADERS,
) -> Response:
    response = templates.TemplateResponse(
        request,
        name,
        {"viewer": viewer, "now": utcnow(), **context},
        status_code=status,
        headers=dict(headers),
    )
    if viewer is not None and viewer.new_cookie is not None:
        set_session(response, request, viewer.new_cookie)
    return response


def problem(request: Request, status: int, message: str) -> Response:
    return page(request, None, "error.html", {"status": status, "message": message}, status)


def redirect(location: str) -> Response:
    return RedirectResponse(location, status_code=303, headers=SECURITY_HEADERS)


def back_to(target: str, default: str) -> str:
    """Where a form returns: `target` when it is a page forms may name (`back`), else
    `default`. Never another host, never anything but those paths. Pure."""
    return target if _BACK.fullmatch(target) else default


def url(path: str, **params: object) -> str:
    """`path?…` with the parameters that are set, in the order given."""
    query = urlencode({k: v for k, v in params.items() if v not in (None, "")})
    return f"{path}?{query}" if query else path
