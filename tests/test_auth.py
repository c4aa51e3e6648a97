"""The bearer token guards every route but the explicitly public ones; secrets (the token, the
provider keys) never reach an audit payload, an HTTP answer or a log line."""

from __future__ import annotations

import hmac
import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import OWNER, PROVIDER_KEY, TEST_TOKEN
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from starlette.routing import Mount, Route

from caesar import audit
from caesar.api import create_app
from caesar.memory.scope import Scope

AUTH = {"Authorization": f"Bearer {TEST_TOKEN}"}
# Public on purpose: liveness, the page where the operator types the token, and the
# dashboard's stylesheet. The API description (/openapi.json) needs the token too.
PUBLIC_PATHS = {"/healthz", "/dashboard/login"}
PUBLIC_PREFIXES = ("/dashboard/static/", "/static/")
LOGIN_PATH = "/dashboard/login"


@pytest.fixture
def guarded(make_services) -> Iterator[TestClient]:
    # The token check alone: the walk below presents a wrong token on every route, which the
    # failed-token limit would lock out after 10. The limit is tested in test_auth_limit.py.
    services = make_services(api_token=TEST_TOKEN, auth_failures={"max_failures": 0})
    with TestClient(create_app(services.settings, services, run_workers=False)) as client:
        yield client


def _concrete(path: str) -> str:
    """A request path for a route template: `{audit_id:int}` or `{key}` → 1 (valid for both)."""
    return re.sub(r"\{[^}]+\}", "1", path)


def _routes(app: Any) -> Iterator[Any]:
    """Every route, with included routers flattened (FastAPI ≥ 0.16x keeps them lazily)."""
    try:
        from fastapi.routing import iter_route_contexts
    except ImportError:  # older FastAPI: app.routes is already flat
        yield from app.routes
        return
    yield from iter_route_contexts(app.routes)


def _endpoints(app: Any) -> list[tuple[str, str]]:
    found = []
    for route in _routes(app):
        original = getattr(route, "original_route", route)
        if isinstance(original, Mount):
            continue  # static file mounts
        if not isinstance(original, APIRoute | Route):
            continue
        path = route.path
        if path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES):
            continue
        for method in sorted(route.methods or {"GET"}):
            if method not in ("HEAD", "OPTIONS"):
                found.append((method, path))
    return found


def _refused(response: Any) -> bool:
    """401, or (for dashboard pages, redirects followed) the login page."""
    return response.status_code == 401 or (
        response.url.path == LOGIN_PATH and response.history  # redirected there
    )


def test_every_route_but_the_public_ones_needs_the_token(guarded):
    endpoints = _endpoints(guarded.app)
    paths = {path for _, path in endpoints}
    assert {"/v1/chat", "/v1/chat/completions", "/v1/audit"} <= paths  # the walk found them
    for method, template in endpoints:
        path = _concrete(template)
        body = {"json": {}} if method in ("POST", "PUT", "PATCH") else {}
        anonymous = guarded.request(method, path, follow_redirects=True, **body)
        assert _refused(anonymous), (method, template, anonymous.status_code, anonymous.text[:200])
        wrong = guarded.request(
            method, path, headers={"Authorization": "Bearer not-the-token-0000000"}, **body
        )
        assert wrong.status_code in (401, 303), (method, template, wrong.status_code)
        allowed = guarded.request(method, path, headers=AUTH, follow_redirects=False, **body)
        assert allowed.status_code != 401, (method, template, allowed.text[:200])
        if method == "GET":  # (a POST may end on the login page on purpose: log out)
            assert LOGIN_PATH not in allowed.headers.get("location", ""), (method, template)


def test_public_routes_need_no_token(guarded):
    assert guarded.get("/healthz").json()["status"] == "ok"


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": TEST_TOKEN},  # no scheme
        {"Authorization": f"Basic {TEST_TOKEN}"},
        {"Authorization": "Bearer "},
        {"Authorization": f"Bearer {TEST_TOKEN}x"},
        {"Authorization": f"Bearer {TEST_TOKEN[:-1]}"},
        {"X-Api-Key": TEST_TOKEN},
    ],
)
def test_anything_but_the_exact_bearer_token_is_refused(guarded, headers):
    response = guarded.post("/v1/chat", json={"message": "hi"}, headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert "Authorization: Bearer" in response.text


def test_bearer_scheme_is_case_insensitive(guarded):
    response = guarded.get("/v1/audit", headers={"Authorization": f"bearer {TEST_TOKEN}"})
    assert response.status_code == 200


def test_without_a_token_configured_loopback_is_open(client):
    assert client.get("/v1/audit").status_code == 200


def test_token_is_compared_in_constant_time(guarded, monkeypatch):
    seen: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: Any, b: Any) -> bool:
        seen.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    assert (
        guarded.get(
            "/v1/audit", headers={"Authorization": "Bearer guess-0123456789abcd"}
        ).status_code
        == 401
    )
    assert guarded.get("/v1/audit", headers=AUTH).status_code == 200
    assert (b"guess-0123456789abcd", TEST_TOKEN.encode()) in seen
    assert (TEST_TOKEN.encode(), TEST_TOKEN.encode()) in seen


# -- secrets ----------------------------------------------------------------------------------
SECRETS = (TEST_TOKEN, PROVIDER_KEY)


def _all_payloads(services: Any) -> str:
    with services.db.read() as session:
        rows = audit.list_events(Scope(OWNER, session), limit=10_000)
        return json.dumps([r.payload for r in rows])


def _assert_no_secret(text: str, where: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{secret[:6]}… leaked into {where}"


def test_secrets_never_reach_audit_answers_or_logs(make_services, llm, caplog):
    caplog.set_level(logging.DEBUG)  # the SDKs and httpx2 log requests at DEBUG
    services = make_services(api_token=TEST_TOKEN)
    echo = f"Incorrect API key provided: {PROVIDER_KEY}"
    answers: list[str] = []
    with TestClient(create_app(services.settings, services, run_workers=False)) as c:
        # a normal turn, in which the operator pastes the token and the model repeats the key
        # (the reply itself goes back to the operator as it is; only its audit copy is cut)
        llm.replies.append(f"your key is {PROVIDER_KEY}")
        ok = c.post("/v1/chat", json={"message": f"remember {TEST_TOKEN}"}, headers=AUTH)
        assert ok.status_code == 200
        # providers that fail while echoing the secrets, on both protocols
        for route in ("local:m", "claude:m"):
            services.settings.gateway.routes["chat"] = route
            services.gateway._providers.clear()
            llm.fail_next("status", status=401, message=echo)
            answers.append(c.post("/v1/chat", json={"message": "hi"}, headers=AUTH).text)
            llm.fail_next("stream_error", message=echo)
            answers.append(
                c.post(
                    "/v1/chat/completions",
                    json={"messages": [{"role": "user", "content": "hi"}], "stream": True},
                    headers=AUTH,
                ).text
            )
            llm.fail_next("status", status=500, message=echo)
            answers.append(
                c.post(
                    "/v1/chat/completions",
                    json={"messages": [{"role": "user", "content": "hi"}]},
                    headers=AUTH,
                ).text
            )
        answers.append(c.get("/v1/audit", headers=AUTH).text)
    assert len([r for r in llm.requests if r["fault"]]) == 6  # every failure really happened
    payloads = _all_payloads(services)
    assert payloads.count("[redacted]") >= 8  # the turn, and each failure's message
    _assert_no_secret(payloads, "an audit payload")
    for answer in answers:
        _assert_no_secret(answer, "an HTTP answer")
    _assert_no_secret(caplog.text, "the log")
    for record in caplog.records:
        _assert_no_secret(record.getMessage(), f"log record {record.name}")


def test_audit_redacts_secret_keys_but_keeps_token_counts():
    log = audit.Audit([PROVIDER_KEY])
    payload = log.redact(
        {
            "api_key": "abc",
            "headers": {"Authorization": "Bearer xyz", "x-api-key": "k"},
            "access_token": "t",
            "password": "p",
            "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
            "max_tokens": 100,
            "note": f"key={PROVIDER_KEY}!",
            "list": [PROVIDER_KEY, 1],
        }
    )
    assert payload["api_key"] == payload["access_token"] == payload["password"] == "[redacted]"
    assert payload["headers"] == {"Authorization": "[redacted]", "x-api-key": "[redacted]"}
    assert payload["usage"] == {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
    assert payload["max_tokens"] == 100
    assert payload["note"] == "key=[redacted]!"
    assert payload["list"] == ["[redacted]", 1]
