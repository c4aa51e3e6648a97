"""Request dependencies: the services, and the bearer-token check every route but /healthz uses.

Every token check goes through `check_token`, which also enforces the failed-token limit
(`auth_limit`): an address that has presented too many wrong tokens gets 429 until its window
frees, whatever it presents meanwhile."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status

from caesar.api.auth_limit import AuthLocked, audit_lockout, client_address, limiter_of
from caesar.brain import Brain
from caesar.services import Services

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


def check_token(request: Request, presented: str | None, *, via: str) -> bool:
    """Whether `presented` is the API token. Raises AuthLocked if the client's address is locked
    out, checked before the comparison so that the right token is refused too while locked. A
    wrong token counts as a failure (and may lock the address, raising); an absent one does
    not: it is no guess."""
    services = get_services(request)
    limiter = limiter_of(request)
    if limiter is None or services.settings.api_token is None:
        return token_matches(services, presented)
    address = client_address(request)
    limiter.check(address)
    if token_matches(services, presented):
        return True
    if presented:
        locked, report = limiter.record_failure(address)
        if locked is not None:
            if report:
                audit_lockout(services, address, locked, via)
            raise locked
    return False


def too_many_failures(locked: AuthLocked) -> HTTPException:
    return HTTPException(
        status_code=status.HTTP_429_TOO_MANY_REQUESTS,
        detail=locked.message,
        headers={"Retry-After": str(locked.retry_after)},
    )


def require_token(request: Request) -> None:
    try:
        ok = check_token(request, bearer(request), via="api")
    except AuthLocked as locked:
        raise too_many_failures(locked) from None
    if not ok:
        raise HTTPException(
            status_code=status.HTTP_401_UNAUTHORIZED,
            detail="missing or wrong API token: send 'Authorization: Bearer <api_token>'",
            headers={"WWW-Authenticate": "Bearer"},
        )


Authenticated = Depends(require_token)
