"""The dashboard over HTTP (TestClient): login, cookie flags, CSRF, escaping, pages; and the
facts layer's "done when" story end to end."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import TEST_TOKEN
from fastapi.testclient import TestClient
from memory_helpers import add_chat

from caesar import audit
from caesar.api import create_app
from caesar.api.dashboard import references
from caesar.db.models import AuditLog
from caesar.workers import run_until_caught_up

XSS = "<script>alert(1)</script>"


@pytest.fixture
def secured(make_services) -> Iterator[tuple[Any, TestClient]]:
    services = make_services(api_token=TEST_TOKEN)
    with TestClient(create_app(services.settings, services, run_workers=False)) as c:
        yield services, c


def _login(c: TestClient) -> None:
    response = c.post("/dashboard/login", data={"token": TEST_TOKEN}, follow_redirects=False)
    assert response.status_code == 303, response.text


def _csrf(html: str) -> str:
    match = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert match, "no CSRF token in the page"
    return match.group(1)


def _row_keys(html: str) -> list[str]:
    return re.findall(r'<tr class="fact" data-key="([^"]+)"', html)


# -- login --------------------------------------------------------------------------------------
def test_login_with_wrong_then_right_token(secured):
    _services, c = secured
    first = c.get("/dashboard/facts", follow_redirects=False)
    assert first.status_code == 303
    assert first.headers["location"] == "/dashboard/login?next=/dashboard/facts"

    wrong = c.post(
        "/dashboard/login", data={"token": "not-the-token-at-all"}, follow_redirects=False
    )
    assert wrong.status_code == 401 and "not the API token" in wrong.text
    assert "set-cookie" not in wrong.headers

    right = c.post(
        "/dashboard/login",
        data={"token": TEST_TOKEN, "next": "/dashboard/audit"},
        follow_redirects=False,
    )
    assert right.status_code == 303 and right.headers["location"] == "/dashboard/audit"
    cookie = right.headers["set-cookie"]
    assert cookie.startswith("caesar_session=")
    flags = {part.strip().lower() for part in cookie.split(";")[1:]}
    assert {"httponly", "samesite=strict", "path=/dashboard"} <= flags
    assert TEST_TOKEN not in cookie  # the token itself never leaves in the cookie
    assert c.get("/dashboard/facts").status_code == 200
    # the page asked for survives the detour through the login form, query included
    c.cookies.clear()
    asked = c.get(
        "/dashboard/audit", params={"event_type": "chat.completed"}, follow_redirects=False
    )
    target = asked.headers["location"]
    assert target == "/dashboard/login?next=/dashboard/audit%3Fevent_type%3Dchat.completed"
    form = c.get(target).text
    assert 'name="next" value="/dashboard/audit?event_type=chat.completed"' in form


def test_login_refuses_open_redirects(secured):
    _services, c = secured
    for target in ("https://evil.example/", "//evil.example/x", "/v1/facts", "/dashboard\\..\\x"):
        response = c.post(
            "/dashboard/login", data={"token": TEST_TOKEN, "next": target}, follow_redirects=False
        )
        assert response.headers["location"] == "/dashboard/facts", target


def test_tampered_or_foreign_cookies_are_refused(secured, make_services):
    _services, c = secured
    _login(c)
    good = c.cookies.get("caesar_session")
    c.cookies.clear()
    # someone else's session id under this cookie's signature
    forged = base64.urlsafe_b64encode(b'{"sid":"attacker"}').decode().rstrip("=")
    c.cookies.set("caesar_session", forged + good[good.index(".") :], path="/dashboard")
    assert c.get("/dashboard/facts", follow_redirects=False).status_code == 303
    # a session signed under another token (e.g. before rotating it) is no session here
    other = make_services(api_token="another-token-0123456789")
    with TestClient(create_app(other.settings, other, run_workers=False)) as o:
        _ = o.post(
            "/dashboard/login", data={"token": "another-token-0123456789"}, follow_redirects=False
        )
        foreign = o.cookies.get("caesar_session")
    c.cookies.clear()
    c.cookies.set("caesar_session", foreign, path="/dashboard")
    assert c.get("/dashboard/facts", follow_redirects=False).status_code == 303


def test_bearer_header_works_instead_of_the_cookie(secured):
    services, c = secured
    auth = {"Authorization": f"Bearer {TEST_TOKEN}"}
    assert c.get("/dashboard/facts", headers=auth).status_code == 200
    bad = c.get("/dashboard/facts", headers={"Authorization": "Bearer wrong-token-0123456789"})
    assert bad.status_code == 401
    # an API client needs no CSRF token: browsers never send this header cross-site
    saved = c.post(
        "/dashboard/facts",
        data={"key": "dog_name", "value": "Biscuit"},
        headers=auth,
        follow_redirects=False,
    )
    assert saved.status_code == 303
    assert services.facts.get("dog_name").value == "Biscuit"


def test_logout_clears_the_cookie(secured):
    _services, c = secured
    _login(c)
    page = c.get("/dashboard/facts").text
    out = c.post("/dashboard/logout", data={"csrf": _csrf(page)}, follow_redirects=False)
    assert out.status_code == 303 and 'caesar_session=""' in out.headers["set-cookie"]
    assert c.get("/dashboard/facts", follow_redirects=False).status_code == 303


# -- CSRF ---------------------------------------------------------------------------------------
def test_post_forms_need_the_sessions_csrf_token(secured, make_services):
    services, c = secured
    _login(c)
    token = _csrf(c.get("/dashboard/facts").text)
    form = {"key": "dog_name", "value": "Biscuit"}

    assert c.post("/dashboard/facts", data=form).status_code == 403
    assert c.post("/dashboard/facts", data={**form, "csrf": "0" * 64}).status_code == 403
    assert c.post("/dashboard/facts", data={**form, "csrf": "é"}).status_code == 403
    # a token from another session of the same operator does not fit this one
    with TestClient(c.app) as other:
        _login(other)
        theirs = _csrf(other.get("/dashboard/facts").text)
    assert theirs != token
    assert c.post("/dashboard/facts", data={**form, "csrf": theirs}).status_code == 403
    assert services.facts.list_all() == []
    assert c.post("/dashboard/facts/dog_name/delete", data={}).status_code == 403

    ok = c.post("/dashboard/facts", data={**form, "csrf": token}, follow_redirects=False)
    assert ok.status_code == 303 and ok.headers["location"] == "/dashboard/facts?saved=dog_name"
    assert services.facts.get("dog_name").value == "Biscuit"
    deleted = c.post(
        "/dashboard/facts/dog_name/delete", data={"csrf": token}, follow_redirects=False
    )
    assert deleted.status_code == 303
    assert services.facts.list_all() == []


def test_open_mode_needs_no_login_but_still_csrf(client, services):
    login = client.get("/dashboard/login", follow_redirects=False)
    assert login.status_code == 303 and login.headers["location"] == "/dashboard/facts"
    page = client.get("/dashboard/facts")
    assert page.status_code == 200 and "Log out" not in page.text
    assert "httponly" in page.headers["set-cookie"].lower()
    # what a page on another site can do to 127.0.0.1: post a form without our token
    assert client.post("/dashboard/facts", data={"key": "a", "value": "b"}).status_code == 403
    fresh = TestClient(client.app)  # no session cookie at all
    assert (
        fresh.post("/dashboard/facts", data={"key": "a", "value": "b", "csrf": "x"}).status_code
        == 403
    )
    assert services.facts.list_all() == []
    ok = client.post("/dashboard/facts", data={"key": "a", "value": "b", "csrf": _csrf(page.text)})
    assert ok.status_code == 200 and _row_keys(ok.text) == ["a"]


# -- pages --------------------------------------------------------------------------------------
def test_stored_values_are_rendered_escaped(secured):
    services, c = secured
    services.facts.set_by_operator("dog_name", XSS)
    _login(c)
    for path in ("/dashboard/facts", "/dashboard/audit", "/dashboard/audit/1"):
        html = c.get(path).text
        assert XSS not in html, path
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html, path
    page = c.get("/dashboard/facts")
    assert "script-src" not in page.headers["content-security-policy"]  # default-src 'none'
    assert page.headers["x-frame-options"] == "DENY"


def test_bad_form_input_shows_the_form_again(client, services):
    token = _csrf(client.get("/dashboard/facts").text)
    response = client.post("/dashboard/facts", data={"key": "café", "value": XSS, "csrf": token})
    assert response.status_code == 400
    assert "invalid fact key" in response.text
    assert XSS not in response.text and "&lt;script&gt;" in response.text  # the draft, escaped
    assert services.facts.list_all() == []
    missing = client.post("/dashboard/facts/nope/delete", data={"csrf": token})
    assert missing.status_code == 404 and "no fact with key" in missing.text


def test_facts_table_is_sorted_by_importance_and_links_to_the_source(client, services):
    chat_id = add_chat(services, "My dog's name is Biscuit.", "Nice")
    with services.db.write() as session:
        services.facts.upsert_extracted(
            session,
            key="dog_name",
            value="Biscuit",
            confidence=0.6,
            source_audit_id=chat_id,
            said_at=session.get(AuditLog, chat_id).created_at,
        )
        services.facts.upsert_extracted(
            session,
            key="home_city",
            value="Lisbon",
            confidence=0.9,
            source_audit_id=chat_id,
            said_at=session.get(AuditLog, chat_id).created_at,
        )
    html = client.get("/dashboard/facts").text
    assert _row_keys(html) == ["home_city", "dog_name"]
    assert '<th title="freshness × confidence × edit weight">Importance</th>' in html
    assert (
        re.search(r'class="importance">0\.9\d\d<', html)
        and f'href="/dashboard/audit/{chat_id}"' in html
    )


def test_audit_timeline_filter_paging_and_source_links(client, services):
    chat_id = add_chat(services, "My dog's name is Biscuit.", "Nice")
    with services.db.write() as session:
        services.audit.append(
            session,
            audit.FACT_EXTRACTED,
            {"key": "dog_name", "source_audit_id": chat_id},
            subject_id=chat_id,
            subject_key="dog_name",
        )
        for i in range(5):
            services.audit.append(
                session, audit.FACT_USER_EDITED, {"key": f"k{i}"}, subject_key=f"k{i}"
            )

    html = client.get("/dashboard/audit").text
    ids = [int(i) for i in re.findall(r'<li class="event" id="event-(\d+)"', html)]
    assert ids == sorted(ids, reverse=True) and len(ids) == 7  # newest first
    assert (
        '<option value="memory.fact.extracted">' in html
        and '<option value="chat.completed">' in html
    )

    only = client.get("/dashboard/audit", params={"event_type": audit.FACT_EXTRACTED}).text
    assert re.findall(r'data-type="([^"]+)"', only) == [audit.FACT_EXTRACTED]
    assert (
        f'<a href="/dashboard/audit/{chat_id}" class="ref-link">#{chat_id} chat.completed</a>'
        in only
    )

    page1 = client.get("/dashboard/audit", params={"limit": 3}).text
    older = re.search(r'before_id=(\d+)&amp;limit=3" class="older"', page1)
    assert older
    page2 = client.get("/dashboard/audit", params={"limit": 3, "before_id": older.group(1)}).text
    ids2 = [int(i) for i in re.findall(r'id="event-(\d+)"', page2)]
    assert ids2 == [ids[3], ids[4], ids[5]]

    detail = client.get(f"/dashboard/audit/{chat_id}").text
    assert "My dog&#39;s name is Biscuit." in detail  # the full payload
    assert "memory.fact.extracted" in detail  # what came of this chat
    assert client.get("/dashboard/audit/999999").status_code == 404
    assert client.get("/dashboard/audit", params={"before_id": "x"}).status_code == 422


def test_references_point_at_source_chats():
    row = AuditLog(
        id=10,
        event_type=audit.CHAT_COMPLETED,
        payload={"memory": {"episodes_recalled": [3, 4, True, "5"]}},
    )
    assert references(row) == [("recalled", 3), ("recalled", 4)]
    recalled = AuditLog(
        id=11, event_type=audit.EPISODE_RECALLED, subject_id=3, payload={"turn_audit_id": 10}
    )
    assert references(recalled) == [("subject", 3), ("turn", 10)]
    extracted = AuditLog(
        id=12, event_type=audit.FACT_EXTRACTED, subject_id=3, payload={"source_audit_id": 3}
    )
    assert references(extracted) == [("source", 3)]


# -- the "done when" ----------------------------------------------------------------------
def test_done_when_story(make_services, llm):
    """A chat saying "My dog's name is Biscuit" becomes a fact after the extract worker, is in the
    next turn's system prompt and in the dashboard with its importance, and an operator edit
    raises its importance and shows in the audit timeline."""
    services = make_services(gateway={"routes": {"memory_extract": "offline:patterns"}})
    with TestClient(create_app(services.settings, services, run_workers=False)) as c:
        llm.replies.append("What a good name for a dog!")
        first = c.post("/v1/chat", json={"message": "My dog's name is Biscuit."})
        assert first.status_code == 200, first.text
        assert "dog_name" not in llm.requests[-1]["json"]["messages"][0]["content"]

        assert run_until_caught_up(services.workers["memory.extract"]) == 1

        c.post("/v1/chat", json={"message": "What should I feed him?"})
        system = llm.requests[-1]["json"]["messages"][0]
        assert system["role"] == "system" and "- dog_name: Biscuit" in system["content"]

        (fact,) = c.get("/v1/facts").json()["facts"]
        assert (fact["key"], fact["value"], fact["edit_count"]) == ("dog_name", "Biscuit", 0)
        before = fact["importance"]
        assert before == pytest.approx(0.8, rel=1e-3)  # fresh × offline confidence 0.8 × no edits
        page = c.get("/dashboard/facts").text
        assert _row_keys(page) == ["dog_name"] and f'class="importance">{before:.3f}<' in page
        assert f'href="/dashboard/audit/{first.json()["audit_id"]}"' in page

        edited = c.put("/v1/facts/dog_name", json={"value": "Biscuit the beagle"}).json()
        assert edited["fact"]["importance"] > before
        assert edited["fact"]["importance"] == pytest.approx(1.5, rel=1e-3)
        timeline = c.get("/v1/audit", params={"event_type": audit.FACT_USER_EDITED}).json()[
            "events"
        ]
        assert [e["payload"]["old_value"] for e in timeline] == ["Biscuit"]
        assert (
            f'id="event-{edited["audit_id"]}" data-type="memory.fact.user_edited"'
            in c.get("/dashboard/audit").text
        )
