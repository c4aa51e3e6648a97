"""Failed-token limit: an address that presents a wrong API token too often is locked out.

Without it, a client could guess the operator's token (16 characters at the least) at whatever
speed the server answers. Each *wrong* token presented (bearer header, dashboard login form)
counts against the client's address in a moving window (`limits`, in memory, one limiter per
app); missing credentials and successes never count. Once `max_failures` failures sit in the
window the address is refused with 429 and `Retry-After` — the right token included, or the
limit would not stop guessing — until the oldest failure leaves the window.

An address that crosses the limit gets one `auth.limited` audit row, and at most one per window
however long it keeps trying, so a flood cannot fill the audit log. The address is
`request.client.host`, which uvicorn (run with its defaults) takes from X-Forwarded-For only
for connections from the same machine, right-most untrusted entry first: a local proxy that
appends or overwrites the header gives each client its own limit; a remote proxy's clients
share one (docs/configuration.md).
"""

from __future__ import annotations

import ipaddress
import logging
import math
import threading
import time
from typing import Any

from fastapi import Request
from limits import RateLimitItemPerSecond
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter
from sqlalchemy.exc import SQLAlchemyError

from caesar import audit
from caesar.config import AuthFailureSettings, Settings
from caesar.memory.scope import Scope
from caesar.services import Services

log = logging.getLogger(__name__)

UNKNOWN_ADDRESS = "unknown"  # an ASGI server on a Unix socket may report no client at all


class AuthLocked(Exception):
    """The client's address has failed too often; answer 429 with `Retry-After`."""

    def __init__(self, retry_after: int, failures: int, window_seconds: int) -> None:
        self.retry_after = retry_after
        self.failures = failures
        self.window_seconds = window_seconds
        super().__init__(lockout_message(retry_after, failures, window_seconds))

    @property
    def message(self) -> str:
        return str(self)


def lockout_message(retry_after: int, failures: int, window_seconds: int) -> str:
    return (
        f"too many wrong API tokens from this address ({failures} within {window_seconds} s): "
        f"try again in {retry_after} s"
    )


def retry_after_seconds(reset_at: float, now: float) -> int:
    """Whole seconds until `reset_at`, at least 1 (a Retry-After of 0 invites a retry storm)."""
    return max(1, math.ceil(reset_at - now))


class AuthFailureLimiter:
    """Per-address count of failed token attempts. Thread-safe: sync routes and dependencies
    run in FastAPI's threadpool, and deciding "this failure is the one that locks" must happen
    once per lock-out, so every check-and-record runs under one lock (each is microseconds)."""

    def __init__(self, settings: AuthFailureSettings) -> None:
        self.max_failures = settings.max_failures
        self.window_seconds = settings.window_seconds
        self._failures = RateLimitItemPerSecond(settings.max_failures, settings.window_seconds)
        # One audit row per address per window, however often it re-locks as failures age out.
        # Its own namespace: `limits` keys a counter by namespace, amount and window, so with
        # max_failures = 1 the two items would otherwise share one counter.
        self._reported = RateLimitItemPerSecond(1, settings.window_seconds, namespace="REPORTED")
        self._limiter = MovingWindowRateLimiter(MemoryStorage())
        self._lock = threading.Lock()

    @classmethod
    def for_settings(cls, settings: Settings) -> AuthFailureLimiter | None:
        """None when there is nothing to limit: no token (loopback-only mode) or the limit off."""
        if settings.api_token is None or settings.auth_failures.max_failures == 0:
            return None
        return cls(settings.auth_failures)

    def _locked(self, address: str) -> AuthLocked:
        reset_at, _remaining = self._limiter.get_window_stats(self._failures, address)
        wait = retry_after_seconds(reset_at, time.time())
        return AuthLocked(wait, self.max_failures, self.window_seconds)

    def check(self, address: str) -> None:
        """Raise AuthLocked if `address` is locked out; call before comparing the token."""
        with self._lock:
            if not self._limiter.test(self._failures, address):
                raise self._locked(address)

    def record_failure(self, address: str) -> tuple[AuthLocked | None, bool]:
        """Count one wrong token. Returns (the lock-out this failure caused or None, whether
        it should be audited: the first lock-out of this address within the window)."""
        with self._lock:
            if not self._limiter.hit(self._failures, address):
                return self._locked(address), False  # a race: another request locked it first
            if self._limiter.test(self._failures, address):
                return None, False
            return self._locked(address), self._limiter.hit(self._reported, address)


def client_address(request: Request) -> str:
    return limit_key(request.client.host) if request.client else UNKNOWN_ADDRESS


def limit_key(host: str) -> str:
    """What failures are counted by: the IPv4 address, or the IPv6 /64 network — one IPv6
    client usually holds a whole /64 and could otherwise guess from a new address each time.
    Anything else (a Unix socket's name) as it is. Pure."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if not isinstance(address, ipaddress.IPv6Address):
        return host
    if address.ipv4_mapped is not None:  # an IPv4 client on a dual-stack socket
        return str(address.ipv4_mapped)
    return str(ipaddress.ip_network(f"{address}/64", strict=False))


def limiter_of(request: Request) -> AuthFailureLimiter | None:
    return request.app.state.auth_limiter  # type: ignore[no-any-return]


def lockout_payload(address: str, locked: AuthLocked, via: str) -> dict[str, Any]:
    """What the audit row says: never the presented token, only where the guesses came from."""
    return {
        "address": address,
        "failures": locked.failures,
        "window_seconds": locked.window_seconds,
        "retry_after_seconds": locked.retry_after,
        "via": via,
    }


def audit_lockout(services: Services, address: str, locked: AuthLocked, via: str) -> None:
    """One `auth.limited` row. The lock holds whether or not the row is written, so a database
    failure here is logged and the client still gets its 429 (not a 500)."""
    payload = lockout_payload(address, locked, via)
    try:
        with services.db.write() as session:
            # the server's own row: the guesser is nobody's person
            services.audit.append(
                Scope(services.owner_id(), session),
                audit.AUTH_LIMITED,
                payload,
                subject_key=address,
            )
    except SQLAlchemyError:
        log.exception("could not write the auth.limited audit row for %s", payload)
    log.warning("locked out %s after %d wrong API tokens (%s)", address, locked.failures, via)
