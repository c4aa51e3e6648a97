"""Request dependencies: the services, and the bearer-token check every route but /healthz uses."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status

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


def require_token(request: Request) -> None:
    services = get_services(request)
    if not token_matches(services, bearer(request)):
        raise HTTPException(
            status_code=status.HTTP_401_UNAUTHORIZED,
            detail="missing or wrong API token: send 'Authorization: Bearer <api_token>'",
            headers={"WWW-Authenticate": "Bearer"},
        )


Authenticated = Depends(require_token)
