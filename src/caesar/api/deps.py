"""Request dependencies: the services, and the bearer-token check every route but /healthz uses.

A token is a person's (issue #23, docs/household.md): `api_token` is the owner's, a token made by
`caesar people add` that person's. `require_token` resolves it once per request, and a route
takes the person as `PersonDep`: every store call it makes is that person's. With no
`api_token` configured (loopback only) a request is the owner's, as it always was.

Every token check goes through `check_person` (the API, the dashboard, MCP over HTTP), which
also enforces the failed-token limit (`auth_limit`): an address that has presented too many
wrong tokens gets 429 until its window frees, whatever it presents meanwhile.

A trusted front-end (`[people] frontend_token`, docs/household.md "Open WebUI for a household")
presents its own token and names its user in a header (Open WebUI's `X-OpenWebUI-User-Id` by
default): the request is that person's (`frontend_person`). Only that token reads the header:
with any other, the token's person acts, whatever the headers say."""

from __future__ import annotations

import hmac
import logging
from collections.abc import Mapping
from typing import Annotated
from urllib.parse import unquote

from fastapi import Depends, HTTPException, Request, status

from caesar import people
from caesar.api.auth_limit import AuthLocked, audit_lockout, client_address, limiter_of
from caesar.brain import Brain
from caesar.errors import InputError
from caesar.memory.engine import upkeep
from caesar.memory.scope import Scope
from caesar.services import Services

log = logging.getLogger("caesar.people")

SESSION_COOKIE = "caesar_session"


def get_services(request: Request) -> Services:
    return request.app.state.services  # type: ignore[no-any-return]


def get_brain(request: Request) -> Brain:
    return request.app.state.brain  # type: ignore[no-any-return]


ServicesDep = Annotated[Services, Depends(get_services)]
BrainDep = Annotated[Brain, Depends(get_brain)]


def token_matches(services: Services, presented: str | None) -> bool:
    """Constant-time comparison; with no token configured (loopback only) everyone matches."""
    expected = services.settings.api_token
    if expected is None:
        return True
    if not presented:
        return False
    return hmac.compare_digest(presented.encode(), expected.get_secret_value().encode())


def bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" else None


class FrontendRefused(Exception):
    """The front-end token was right, but the request names no one it may act as: 400 with no
    user header, 403 for someone unknown without `auto_create`."""

    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message


def is_frontend_token(services: Services, presented: str | None) -> bool:
    expected = services.settings.people.frontend_token
    if expected is None or not presented:
        return False
    return hmac.compare_digest(presented.encode(), expected.get_secret_value().encode())


def header_text(value: str | None) -> str | None:
    """What a front-end's name or email header says. Open WebUI percent-encodes the display
    name (`quote(user.name, safe=" ")`: "Zoë" arrives as "Zo%C3%AB"), and a front-end that sends
    raw UTF-8 arrives as Latin-1 (how HTTP header bytes are read): both become "Zoë". A value
    that is neither (or not valid once decoded) is kept as sent."""
    if value is None:
        return None
    try:
        value = value.encode("latin-1").decode("utf-8")
    except UnicodeError:
        pass  # Latin-1 text, not UTF-8 bytes: already what was meant
    try:
        return unquote(value, errors="strict")
    except UnicodeDecodeError:
        return value  # "%FF" and the like: not an encoding of anything


def frontend_person(services: Services, headers: Mapping[str, str]) -> int:
    """The person the front-end's user header names; made on first sight with `auto_create`.
    Raises FrontendRefused."""
    config = services.settings.people
    user = headers.get(config.user_header, "").strip()
    if not user:
        raise FrontendRefused(
            400,
            f"the front-end token needs the {config.user_header} header naming the user "
            "(Open WebUI: set ENABLE_FORWARD_USER_INFO_HEADERS=true)",
        )
    # The user id is a key, compared as sent; the name and email only name a new person.
    names = [header_text(headers.get(h)) for h in (config.name_header, config.email_header)]
    try:
        with services.db.write() as session:
            found, made = people.frontend_person(
                session, services.audit, user, names, auto_create=config.auto_create
            )
            person = None if found is None else found.id
        if made and person is not None:
            upkeep.person_added(services.db, person)
    except InputError as bad:
        raise FrontendRefused(400, str(bad)) from None
    if person is None:
        raise FrontendRefused(
            403,
            f"the front-end user {user!r} is not a person on this caesar: the owner can set "
            "[people] auto_create = true, or ask the user to be added",
        )
    return person


def person_of(
    services: Services, presented: str | None, headers: Mapping[str, str] | None = None
) -> int | None:
    """The person whose token `presented` is: the owner for `api_token` (or for anything, with
    none configured: loopback only), a person for theirs; None for any other. The front-end
    token is the person `headers` names (`frontend_person`), and no one where `headers` is
    None (the dashboard: a browser is no front-end)."""
    if is_frontend_token(services, presented):
        return None if headers is None else frontend_person(services, headers)
    if presented:
        expected = services.settings.api_token
        if expected is not None and token_matches(services, presented):
            return services.owner_id()
        with services.db.read() as session:
            found = people.by_token(session, presented, None)
        if found is not None:
            return found.id
    return services.owner_id() if services.settings.api_token is None else None


def check_person(
    request: Request, presented: str | None, *, via: str, frontend: bool = True
) -> int | None:
    """The person `presented` is the token of (`person_of`), or None. Raises AuthLocked if
    the client's address is locked out, checked before the comparison so that the right token
    is refused too while locked. A wrong token counts as a failure (and may lock the address,
    raising); an absent one does not: it is no guess. With `frontend` the front-end token
    acts as the person its header names (raising FrontendRefused); without, it is no one's."""
    services = get_services(request)
    headers = request.headers if frontend else None
    limiter = limiter_of(request)
    if limiter is None or services.settings.api_token is None:
        return person_of(services, presented, headers)
    address = client_address(request)
    limiter.check(address)
    person = person_of(services, presented, headers)
    if person is not None:
        return person
    if presented:
        locked, report = limiter.record_failure(address)
        if locked is not None:
            if report:
                audit_lockout(services, address, locked, via)
            raise locked
    return None


def too_many_failures(locked: AuthLocked) -> HTTPException:
    return HTTPException(
        status_code=status.HTTP_429_TOO_MANY_REQUESTS,
        detail=locked.message,
        headers={"Retry-After": str(locked.retry_after)},
    )


def require_token(request: Request) -> int:
    """The person the request's bearer token is (401 for none); FastAPI runs it once per
    request, however many dependencies name it."""
    try:
        person = check_person(request, bearer(request), via="api")
    except AuthLocked as locked:
        raise too_many_failures(locked) from None
    except FrontendRefused as refused:
        raise HTTPException(status_code=refused.status_code, detail=refused.message) from None
    if person is None:
        raise HTTPException(
            status_code=status.HTTP_401_UNAUTHORIZED,
            detail="missing or wrong API token: send 'Authorization: Bearer <your token>'",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return person


Authenticated = Depends(require_token)
# Who is asking: every store call a route makes is this person's.
PersonDep = Annotated[int, Depends(require_token)]


def request_scope(services: ServicesDep, person: PersonDep) -> Scope:
    """The asking person's memory on the server's engine (memory/scope.py): what a route
    hands every store, recall and tool call it makes. Each opens its own transaction."""
    return Scope(person, engine=services.episodes.backend)


# Whose memory a route reads and writes: the asking person's, nobody else's.
ScopeDep = Annotated[Scope, Depends(request_scope)]
