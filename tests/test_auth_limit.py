"""The failed-token limit: an address that presents too many wrong API tokens is refused (429,
Retry-After) until its window frees, the right token included; other addresses, successes,
missing credentials and /healthz are untouched; each lock-out is audited once, without the
token."""

from __future__ import annotations

import html
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import OWNER, TEST_TOKEN
from fastapi.testclient import TestClient

from caesar import audit
from caesar.api import create_app
from caesar.api.auth_limit import AuthFailureLimiter, AuthLocked, retry_after_seconds
from caesar.config import AuthFailureSettings, Settings, load_settings
from caesar.errors import ConfigError
from caesar.memory.scope import Scope

AUTH = {"Authorization": f"Bearer {TEST_TOKEN}"}
GUESSES = [f"guess-{i:02d}-0123456789abcdef" for i in range(40)]


def _wrong(i: int) -> dict[str, str]:
    return {"Authorization": f"Bearer {GUESSES[i]}"}


@pytest.fixture
def limited(make_services) -> Iterator[tuple[Any, TestClient]]:
    """A token-protected app that locks an address after 3 wrong tokens in 300 s."""
    services = make_services(
        api_token=TEST_TOKEN, auth_failures={"max_failures": 3, "window_seconds": 300}
    )
    with TestClient(create_app(services.settings, services, run_workers=False)) as c:
        yield services, c


def _limited_rows(services: Any) -> list[Any]:
    with services.db.read() as session:
        return list(audit.list_events(Scope(OWNER, session), event_type=audit.AUTH_LIMITED))


def _lock_out(client: TestClient) -> None:
    """Three wrong tokens from the client's address: locked, the right token included."""
    for i in range(3):
        client.get("/v1/audit", headers=_wrong(i))
    _assert_locked(client.get("/v1/audit", headers=AUTH))


def _assert_locked(response: Any) -> int:
    assert response.status_code == 429, (response.status_code, response.text[:300])
    retry_after = int(response.headers["retry-after"])
    assert 1 <= retry_after <= 300
    return retry_after


# -- the API ----------------------------------------------------------------------------------
def test_wrong_bearer_tokens_lock_the_address_even_for_the_right_token(limited):
    _services, c = limited
    assert c.get("/v1/audit", headers=AUTH).status_code == 200
    for i in range(2):
        assert c.get("/v1/audit", headers=_wrong(i)).status_code == 401
    third = c.get("/v1/audit", headers=_wrong(2))  # the failure that fills the window
    _assert_locked(third)
    detail = third.json()["detail"]
    assert "too many wrong API tokens" in detail and "3 within 300 s" in detail
    assert "try again in" in detail

    right = c.get("/v1/audit", headers=AUTH)  # guessing right now must not be confirmed
    _assert_locked(right)
    assert right.json()["detail"].startswith("too many wrong API tokens")
    _assert_locked(c.post("/v1/chat", json={"message": "hi"}, headers=AUTH))
    _assert_locked(c.get("/v1/audit"))  # no token at all: still no way in
    _assert_locked(c.get("/v1/audit", headers=_wrong(3)))


def test_another_address_is_not_affected(limited):
    _services, c = limited
    _lock_out(c)

    other = TestClient(c.app, client=("10.0.0.2", 123))
    assert other.get("/v1/audit", headers=AUTH).status_code == 200
    assert other.get("/v1/audit", headers=_wrong(0)).status_code == 401  # its own count: 1
    assert other.get("/v1/audit", headers=AUTH).status_code == 200


def test_ipv6_clients_are_limited_per_64_network(limited):
    _services, c = limited
    ipv6 = [TestClient(c.app, client=(f"2001:db8:1:2::{i:x}", 123)) for i in range(1, 5)]
    for i, client in enumerate(ipv6[:3]):  # three guesses, each from a new address
        client.get("/v1/audit", headers=_wrong(i))
    _assert_locked(ipv6[3].get("/v1/audit", headers=AUTH))  # same /64: locked
    elsewhere = TestClient(c.app, client=("2001:db8:1:3::1", 123))
    assert elsewhere.get("/v1/audit", headers=AUTH).status_code == 200


def test_limit_keys():
    from caesar.api.auth_limit import limit_key

    assert limit_key("10.0.0.7") == "10.0.0.7"
    assert limit_key("2001:db8::1") == limit_key("2001:db8::ffff:1") == "2001:db8::/64"
    assert limit_key("::ffff:10.0.0.7") == "10.0.0.7"  # an IPv4 client on a dual-stack socket
    assert limit_key("testclient") == "testclient"


def test_successes_and_missing_credentials_do_not_count(limited):
    _services, c = limited
    for i in range(2):
        assert c.get("/v1/audit", headers=_wrong(i)).status_code == 401
    for _ in range(10):
        assert c.get("/v1/audit", headers=AUTH).status_code == 200
        # no token, or no Bearer scheme, is no guess: a plain 401 that is not counted
        assert c.get("/v1/audit").status_code == 401
        assert c.get("/v1/audit", headers={"Authorization": "Bearer "}).status_code == 401
        assert (
            c.get("/v1/audit", headers={"Authorization": f"Basic {TEST_TOKEN}"}).status_code == 401
        )
    # neither reset nor added to the two failures: the next wrong token is the third
    _assert_locked(c.get("/v1/audit", headers=_wrong(2)))


def test_healthz_is_never_limited(limited):
    _services, c = limited
    _lock_out(c)
    assert c.get("/healthz").json()["status"] == "ok"
    assert c.get("/healthz", headers=_wrong(4)).status_code == 200


def test_the_lock_ends_when_the_window_frees(make_services):
    services = make_services(
        api_token=TEST_TOKEN, auth_failures={"max_failures": 2, "window_seconds": 1}
    )
    with TestClient(create_app(services.settings, services, run_workers=False)) as c:
        assert c.get("/v1/audit", headers=_wrong(0)).status_code == 401
        assert _assert_locked(c.get("/v1/audit", headers=_wrong(1))) == 1
        _assert_locked(c.get("/v1/audit", headers=AUTH))
        time.sleep(1.1)
        assert c.get("/v1/audit", headers=AUTH).status_code == 200


# -- the audit row ----------------------------------------------------------------------------
def test_one_audit_row_per_lock_out_and_no_token_in_it(limited):
    services, c = limited
    for i in range(3):
        c.get("/v1/audit", headers=_wrong(i))
    for i in range(3, 20):  # a flood of guesses while locked
        _assert_locked(c.get("/v1/audit", headers=_wrong(i)))
        _assert_locked(c.post("/dashboard/login", data={"token": GUESSES[i]}))
    _assert_locked(c.get("/v1/audit", headers=AUTH))

    rows = _limited_rows(services)
    assert len(rows) == 1
    row = rows[0]
    assert row.subject_key == "testclient"  # TestClient's default client address
    assert row.payload == {
        "address": "testclient",
        "failures": 3,
        "window_seconds": 300,
        "retry_after_seconds": row.payload["retry_after_seconds"],
        "via": "api",
    }
    assert 1 <= row.payload["retry_after_seconds"] <= 300
    text = json.dumps(row.payload)
    for secret in (TEST_TOKEN, *GUESSES):
        assert secret not in text


def test_each_address_gets_its_own_row(limited):
    services, c = limited
    other = TestClient(c.app, client=("10.0.0.2", 123))
    for i in range(3):
        c.get("/v1/audit", headers=_wrong(i))
        other.post("/dashboard/login", data={"token": GUESSES[i]})
    rows = _limited_rows(services)
    assert sorted((r.payload["address"], r.payload["via"]) for r in rows) == [
        ("10.0.0.2", "dashboard login"),
        ("testclient", "api"),
    ]


def test_concurrent_failures_lock_once():
    """Sync routes run in a threadpool: exactly max_failures failures count, and exactly one
    of them is the lock-out that gets audited."""
    limiter = AuthFailureLimiter(AuthFailureSettings(max_failures=5, window_seconds=300))
    results: list[tuple[AuthLocked | None, bool]] = []
    start = threading.Barrier(16)

    def guess() -> None:
        start.wait()
        for _ in range(4):
            results.append(limiter.record_failure("10.0.0.9"))

    threads = [threading.Thread(target=guess) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 64
    assert sum(1 for locked, _ in results if locked is None) == 4  # failures 1-4 pass as 401
    assert sum(1 for _, report in results if report) == 1
    with pytest.raises(AuthLocked):
        limiter.check("10.0.0.9")
    limiter.check("10.0.0.10")  # another address: not locked, does not raise


def test_a_limit_of_one_failure_locks_and_reports_at_the_first():
    """With max_failures = 1 the failure counter and the report counter have the same amount
    and window: they must still be two counters."""
    limiter = AuthFailureLimiter(AuthFailureSettings(max_failures=1, window_seconds=300))
    locked, report = limiter.record_failure("10.0.0.11")
    assert locked is not None and report
    with pytest.raises(AuthLocked):
        limiter.check("10.0.0.11")


def test_re_locking_within_the_window_is_not_audited_again():
    """Failures spread over the window free one slot at a time; each freed slot lets one more
    guess through, which locks again. That is the same lock-out: no second row until a whole
    window has passed since the first (1 s here; ~1 s of sleeping in all)."""
    limiter = AuthFailureLimiter(AuthFailureSettings(max_failures=2, window_seconds=1))
    assert limiter.record_failure("10.0.0.7") == (None, False)
    time.sleep(0.6)
    locked, report = limiter.record_failure("10.0.0.7")
    assert locked is not None and report  # the first lock-out is reported
    deadline = time.monotonic() + 2
    while True:  # until the first failure leaves the window (~0.4 s)
        try:
            limiter.check("10.0.0.7")
            break
        except AuthLocked:
            assert time.monotonic() < deadline, "the lock never ended"
            time.sleep(0.02)
    locked, report = limiter.record_failure("10.0.0.7")
    assert locked is not None  # one more guess, and it is locked again...
    assert not report  # ...but within a window of the first report: no second audit row


# -- the dashboard ----------------------------------------------------------------------------
def test_dashboard_login_locks_out_and_shows_the_message_escaped(limited):
    services, c = limited
    for i in range(2):
        wrong = c.post("/dashboard/login", data={"token": GUESSES[i]}, follow_redirects=False)
        assert wrong.status_code == 401 and "not the API token" in wrong.text
    target = "/dashboard/<script>alert(1)</script>"
    third = c.post(
        "/dashboard/login", data={"token": GUESSES[2], "next": target}, follow_redirects=False
    )
    _assert_locked(third)
    assert third.headers["content-type"].startswith("text/html")
    assert "<h1>Log in</h1>" in third.text
    assert '<p class="error" role="alert">too many wrong API tokens' in third.text
    assert html.escape(target) in third.text and "<script>" not in third.text
    assert "set-cookie" not in third.headers

    right = c.post("/dashboard/login", data={"token": TEST_TOKEN}, follow_redirects=False)
    _assert_locked(right)
    assert "set-cookie" not in right.headers  # no session for the right token while locked
    page = c.get("/dashboard/login")
    _assert_locked(page)  # the form says so before the operator types the token in vain
    assert "too many wrong API tokens" in page.text
    _assert_locked(c.get("/v1/audit", headers=AUTH))  # one limiter: the API is locked too
    assert [r.payload["via"] for r in _limited_rows(services)] == ["dashboard login"]


def test_wrong_bearer_on_dashboard_pages_counts_too(limited):
    _services, c = limited
    assert c.get("/v1/audit", headers=_wrong(0)).status_code == 401
    assert c.get("/dashboard/facts", headers=_wrong(1)).status_code == 401
    locked = c.get("/dashboard/facts", headers=_wrong(2))
    _assert_locked(locked)
    assert "too many wrong API tokens" in locked.text
    _assert_locked(c.get("/dashboard/facts", headers=AUTH))


def test_a_session_from_before_the_lock_keeps_working(limited):
    """The lock stops token guesses; a signed session cookie is no guess (it cannot be forged
    without the token), so the operator already logged in is not shut out by an attacker
    behind the same address."""
    _services, c = limited
    assert c.post("/dashboard/login", data={"token": TEST_TOKEN}).status_code == 200
    _lock_out(c)
    assert c.get("/dashboard/facts").status_code == 200


# -- off, and nothing to limit ----------------------------------------------------------------
def test_max_failures_zero_turns_the_limit_off(make_services):
    services = make_services(api_token=TEST_TOKEN, auth_failures={"max_failures": 0})
    app = create_app(services.settings, services, run_workers=False)
    assert app.state.auth_limiter is None
    with TestClient(app) as c:
        for i in range(30):
            assert c.get("/v1/audit", headers=_wrong(i)).status_code == 401
        assert c.get("/v1/audit", headers=AUTH).status_code == 200
    assert _limited_rows(services) == []


def test_loopback_only_mode_has_nothing_to_limit(make_services):
    services = make_services()
    app = create_app(services.settings, services, run_workers=False)
    assert app.state.auth_limiter is None
    with TestClient(app) as c:
        for i in range(15):
            assert c.get("/v1/audit", headers=_wrong(i)).status_code == 200


# -- settings and pure parts ------------------------------------------------------------------
def test_defaults_and_environment(tmp_path, monkeypatch):
    defaults = Settings(home=tmp_path).auth_failures
    assert (defaults.max_failures, defaults.window_seconds) == (10, 300)
    monkeypatch.setenv("CAESAR_AUTH_FAILURES__MAX_FAILURES", "5")
    monkeypatch.setenv("CAESAR_AUTH_FAILURES__WINDOW_SECONDS", "60")
    loaded = load_settings(home=tmp_path).auth_failures
    assert (loaded.max_failures, loaded.window_seconds) == (5, 60)


@pytest.mark.parametrize(
    "bad",
    [
        {"max_failures": -1},
        {"window_seconds": 0},
        {"window_seconds": -5},
        {"window_seconds": 1.5},
        {"max_failures": "many"},
    ],
)
def test_invalid_settings_are_refused(tmp_path, bad):
    with pytest.raises(ConfigError, match="auth_failures"):
        load_settings(home=tmp_path, auth_failures=bad)


@pytest.mark.parametrize(
    ("reset_at", "now", "expected"),
    [(100.0, 0.0, 100), (100.0, 99.2, 1), (100.0, 100.0, 1), (100.0, 150.0, 1), (10.5, 0, 11)],
)
def test_retry_after_is_whole_seconds_and_at_least_one(reset_at, now, expected):
    assert retry_after_seconds(reset_at, now) == expected
