"""Who is looking at the dashboard: the session cookie, CSRF tokens and the bearer header.

- With an API token configured, a person logs in once with their token (the owner with the API
  token, anyone else with theirs: issue #23); the session cookie is a random session id and
  whose session it is, signed (itsdangerous) with a key derived from the API token by HMAC.
  So no extra secret is needed, and rotating the API token logs every browser out; rotating a
  person's token, or removing them, ends their sessions (`people.session_stamp`).
- With no token (loopback-only mode) the dashboard is open: the first visit gets a session
  signed with a per-process random key, only so that forms can carry a CSRF token. A page on
  another site can still POST to 127.0.0.1, and CSRF is what stops it.
- Every POST form carries `csrf` = HMAC(key, session id): tied to the session, unguessable
  without the key, nothing stored server-side. A request authenticated by the bearer header
  needs no CSRF token: a browser never attaches that header to a cross-site request.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Form, Request
from itsdangerous import BadSignature, URLSafeTimedSerializer

from caesar import people
from caesar.api.deps import SESSION_COOKIE, ServicesDep, bearer, check_person
from caesar.memory.scope import Scope

COOKIE_PATH = "/dashboard"
SESSION_MAX_AGE = 7 * 24 * 3600
_SALT = "caesar.dashboard.session"
_OPEN_KEY_LOCK = threading.Lock()


class LoginRequired(Exception):
    """No valid session and no bearer header, with a token configured."""


class Denied(Exception):
    """A request the dashboard refuses, with the status and the message to show."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def session_key(api_token: str) -> bytes:
    """The signing key, derived from the API token so the dashboard needs no secret of its own."""
    return hmac.new(api_token.encode(), b"caesar dashboard session key v1", hashlib.sha256).digest()


@dataclass(frozen=True)
class SessionCodec:
    key: bytes

    def _serializer(self) -> URLSafeTimedSerializer:
        return URLSafeTimedSerializer(self.key, salt=_SALT)

    def issue(self, person: int | None = None, stamp: str | None = None) -> tuple[str, str]:
        """A new session of `person` (None: the owner's, in open mode): (session id, signed
        cookie value)."""
        sid = secrets.token_urlsafe(18)
        data: dict[str, object] = {"sid": sid}
        if person is not None:
            data.update(p=person, s=stamp)
        return sid, self._serializer().dumps(data)

    def read(self, cookie: str | None) -> Session | None:
        """The session of a valid, unexpired cookie; None for anything else."""
        if not cookie:
            return None
        try:
            data = self._serializer().loads(cookie, max_age=SESSION_MAX_AGE)
        except BadSignature:  # also SignatureExpired: the browser simply logs in again
            return None
        if not isinstance(data, dict):
            return None
        sid, person, stamp = data.get("sid"), data.get("p"), data.get("s")
        if not (isinstance(sid, str) and sid):
            return None
        if person is None:  # a session from before people, or open mode's: the owner's
            return Session(sid, None, "owner")
        if not isinstance(person, int) or not isinstance(stamp, str):
            return None
        return Session(sid, person, stamp)

    def csrf_for(self, sid: str) -> str:
        return hmac.new(self.key, b"csrf:" + sid.encode(), hashlib.sha256).hexdigest()

    def csrf_ok(self, sid: str, presented: str) -> bool:
        return hmac.compare_digest(self.csrf_for(sid).encode(), presented.encode())


@dataclass(frozen=True)
class Session:
    sid: str
    person: int | None  # None: the owner
    stamp: str  # people.session_stamp when it was issued


def codec_for(request: Request) -> SessionCodec:
    token = request.app.state.services.settings.api_token
    if token is not None:
        return SessionCodec(session_key(token.get_secret_value()))
    state = request.app.state
    with _OPEN_KEY_LOCK:
        key = getattr(state, "dashboard_open_key", None)
        if key is None:
            key = state.dashboard_open_key = secrets.token_bytes(32)
    return SessionCodec(key)


@dataclass(frozen=True)
class Viewer:
    """The authenticated person, as far as one request is concerned."""

    person: int  # whose memory the pages show and change
    csrf: str  # what this viewer's forms send back; "" for bearer clients, who need none
    sid: str | None = None
    via_bearer: bool = False
    new_cookie: str | None = None  # open mode's first visit: a session cookie to set
    can_log_out: bool = False


def current_viewer(request: Request, services: ServicesDep) -> Viewer:
    token_set = services.settings.api_token is not None
    presented = bearer(request)
    if token_set and presented is not None:
        # counts toward the failed-token limit; raises AuthLocked (429) when locked out
        person = check_person(request, presented, via="dashboard", frontend=False)
        if person is not None:
            return Viewer(person, csrf="", via_bearer=True)
        raise Denied(401, "wrong API token in the Authorization header")
    codec = codec_for(request)
    found = codec.read(request.cookies.get(SESSION_COOKIE))
    if found is not None:
        person = services.owner_id() if found.person is None else found.person
        with services.db.read() as session:
            current = people.session_stamp(Scope(person, session))
        if current == found.stamp:  # else removed, or their token rotated: log in again
            sid = found.sid
            return Viewer(person, csrf=codec.csrf_for(sid), sid=sid, can_log_out=token_set)
    if token_set:
        raise LoginRequired
    sid, cookie = codec.issue()
    return Viewer(services.owner_id(), csrf=codec.csrf_for(sid), sid=sid, new_cookie=cookie)


ViewerDep = Annotated[Viewer, Depends(current_viewer)]


def checked_viewer(
    request: Request, viewer: ViewerDep, csrf: Annotated[str, Form(max_length=200)] = ""
) -> Viewer:
    """The viewer of a POST form, whose CSRF token must match its session."""
    if viewer.via_bearer:
        return viewer
    if viewer.new_cookie is not None or viewer.sid is None or not csrf:
        raise Denied(403, "missing CSRF token: reload the page and submit the form again")
    if not codec_for(request).csrf_ok(viewer.sid, csrf):
        raise Denied(403, "wrong CSRF token: reload the page and submit the form again")
    return viewer


FormViewerDep = Annotated[Viewer, Depends(checked_viewer)]
