"""The dashboard over HTTP (TestClient): login, cookie flags, CSRF, escaping, pages; and the
facts layer's "done when" story end to end."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from conftest import OWNER, TEST_TOKEN
from fastapi.testclient import TestClient
from memory_helpers import add_chat, days_ago, link_summarised
from sqlalchemy import select, update

from caesar import audit
from caesar.api import create_app
from caesar.api.dashboard_audit import references
from caesar.api.dashboard_facts import parse_ids
from caesar.clock import utcnow
from caesar.db.models import AuditLog, Conversation, EpisodeSummary
from caesar.errors import InputError
from caesar.memory import conversations
from caesar.memory.episodes.rows import episode_row
from caesar.memory.scope import Scope
from caesar.workers import run_until_caught_up

XSS = "<script>alert(1)</script>"


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
    assert services.facts.get("dog_name", scope=Scope(OWNER)).value == "Biscuit"


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
    # another browser on the same app (no second lifespan: the app's runs once)
    other = TestClient(c.app)
    _login(other)
    theirs = _csrf(other.get("/dashboard/facts").text)
    assert theirs != token
    assert c.post("/dashboard/facts", data={**form, "csrf": theirs}).status_code == 403
    assert services.facts.list_all(scope=Scope(OWNER)) == []
    assert c.post("/dashboard/facts/dog_name/delete", data={}).status_code == 403

    ok = c.post("/dashboard/facts", data={**form, "csrf": token}, follow_redirects=False)
    assert ok.status_code == 303 and ok.headers["location"] == "/dashboard/facts?saved=dog_name"
    assert services.facts.get("dog_name", scope=Scope(OWNER)).value == "Biscuit"
    deleted = c.post(
        "/dashboard/facts/dog_name/delete", data={"csrf": token}, follow_redirects=False
    )
    assert deleted.status_code == 303
    assert services.facts.list_all(scope=Scope(OWNER)) == []


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
    assert services.facts.list_all(scope=Scope(OWNER)) == []
    ok = client.post("/dashboard/facts", data={"key": "a", "value": "b", "csrf": _csrf(page.text)})
    assert ok.status_code == 200 and _row_keys(ok.text) == ["a"]


# -- pages --------------------------------------------------------------------------------------
def test_stored_values_are_rendered_escaped(secured):
    services, c = secured
    services.facts.set_by_operator("dog_name", XSS, scope=Scope(OWNER))
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
    assert services.facts.list_all(scope=Scope(OWNER)) == []
    missing = client.post("/dashboard/facts/nope/delete", data={"csrf": token})
    assert missing.status_code == 404 and "no fact with key" in missing.text


def test_facts_table_is_sorted_by_importance_and_links_to_the_source(client, services):
    chat_id = add_chat(services, "My dog's name is Biscuit.", "Nice")
    with services.db.write() as session:
        services.facts.upsert_extracted(
            Scope(OWNER, session),
            key="dog_name",
            value="Biscuit",
            confidence=0.6,
            source_audit_id=chat_id,
            said_at=session.get(AuditLog, chat_id).created_at,
        )
        services.facts.upsert_extracted(
            Scope(OWNER, session),
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


def _event_ids(html: str) -> list[int]:
    return [int(i) for i in re.findall(r'<li class="event" id="event-(\d+)"', html)]


def _gist(html: str, audit_id: int) -> str:
    """The rendered words of one timeline row (its <dl class="gist">), tags stripped."""
    match = re.search(rf'id="event-{audit_id}".*?<dl class="gist">(.*?)</dl>', html, re.S)
    assert match, f"no row #{audit_id}"
    return " ".join(re.sub(r"<[^>]+>", " ", match.group(1)).split())


def test_audit_timeline_filter_paging_and_source_links(client, services):
    chat_id = add_chat(services, "My dog's name is Biscuit.", "Nice")
    with services.db.write() as session:
        services.audit.append(
            Scope(OWNER, session),
            audit.FACT_EXTRACTED,
            {"key": "dog_name", "source_audit_id": chat_id},
            subject_id=chat_id,
            subject_key="dog_name",
        )
        for i in range(5):
            services.audit.append(
                Scope(OWNER, session), audit.FACT_USER_EDITED, {"key": f"k{i}"}, subject_key=f"k{i}"
            )

    html = client.get("/dashboard/audit").text
    ids = _event_ids(html)
    assert ids == sorted(ids, reverse=True) and len(ids) == 7  # newest first
    assert (
        '<option value="memory.fact.extracted">' in html
        and '<option value="chat.completed">' in html
    )
    assert 'class="newer"' not in html and 'class="older"' not in html  # one page holds all

    only = client.get("/dashboard/audit", params={"event_type": audit.FACT_EXTRACTED}).text
    assert re.findall(r'data-type="([^"]+)"', only) == [audit.FACT_EXTRACTED]
    assert (
        f'<a href="/dashboard/audit/{chat_id}" class="ref-link">#{chat_id} chat.completed</a>'
        in only
    )

    page1 = client.get("/dashboard/audit", params={"limit": 3}).text
    assert _event_ids(page1) == ids[:3] and 'class="newer"' not in page1
    older = re.search(r'href="([^"]*before_id=(\d+)&amp;limit=3)" class="older"', page1)
    assert older and int(older.group(2)) == ids[2]
    page2 = client.get(older.group(1).replace("&amp;", "&")).text
    assert _event_ids(page2) == ids[3:6]
    page3 = client.get(_link(page2, "older")).text
    assert _event_ids(page3) == ids[6:] and 'class="older"' not in page3
    # and back up, page by page, to the newest
    back = client.get(_link(page3, "newer")).text
    assert _event_ids(back) == ids[3:6]
    top = client.get(_link(back, "newer")).text
    assert _event_ids(top) == ids[:3] and 'class="newer"' not in top
    assert _event_ids(client.get(_link(page3, "newest")).text) == ids[:3]

    detail = client.get(f"/dashboard/audit/{chat_id}").text
    assert "My dog&#39;s name is Biscuit." in detail  # the full payload
    assert "memory.fact.extracted" in detail  # what came of this chat
    assert client.get("/dashboard/audit/999999").status_code == 404
    assert client.get("/dashboard/audit", params={"before_id": "x"}).status_code == 422
    both = client.get("/dashboard/audit", params={"before_id": 5, "after_id": 2})
    assert both.status_code == 400 and "not both" in both.text


def _link(html: str, cls: str) -> str:
    match = re.search(rf'<a href="([^"]+)" class="{cls}"', html)
    assert match, f"no {cls} link"
    return match.group(1).replace("&amp;", "&")


def test_timeline_rows_read_as_words_by_event_type(client, services, llm):
    llm.replies.append("Biscuit is a fine name for a beagle.")
    turn = client.post("/v1/chat", json={"message": "My dog is called Biscuit."}).json()
    llm.fail_next("status", status=503)
    assert client.post("/v1/chat", json={"message": "Are you there?"}).status_code == 503
    services.facts.set_by_operator("home_city", "Lisbon", scope=Scope(OWNER))
    services.facts.set_by_operator("home_city", "Porto", scope=Scope(OWNER))
    services.facts.delete("home_city", scope=Scope(OWNER))
    with services.db.write() as session:
        chat = turn["audit_id"]
        services.audit.append(
            Scope(OWNER, session),
            audit.EPISODE_SUMMARISED,
            {"audit_log_id": chat, "summary": "The operator named the dog Biscuit.", "model": "m"},
            subject_id=chat,
        )
        services.audit.append(
            Scope(OWNER, session),
            audit.EPISODE_RECALLED,
            {
                "episode_id": 7,
                "audit_log_id": chat,
                "score": 0.61234,
                "relevance": 0.7,
                "dated": True,
                "recall_count": 2,
                "summary": "The operator named the dog Biscuit.",
                "excerpts": [],
                "turn_audit_id": chat,
            },
            subject_id=chat,
        )
        services.audit.append(
            Scope(OWNER, session),
            audit.EXTRACT_FAILED,
            {"audit_log_id": chat, "error": "not JSON: 'Sure!'", "raw": "Sure!"},
            subject_id=chat,
        )
        services.audit.append(
            Scope(OWNER, session), audit.RETENTION_SWEPT, {"audit_rows": 4, "episodes": 1}
        )
    html = client.get("/dashboard/audit").text
    rows = {
        t: int(i)
        for i, t in re.findall(r'<li class="event" id="event-(\d+)" data-type="([^"]+)"', html)
    }
    assert _gist(html, turn["audit_id"]).startswith(
        "operator My dog is called Biscuit. caesar Biscuit is a fine name for a beagle. "
        "memory 0 facts · 0 past conversations model local:test-model"
    )
    failed = _gist(html, rows[audit.CHAT_FAILED])
    assert failed.startswith("operator Are you there? error ProviderUnavailable (503):")
    edits = [
        int(i) for i in re.findall(r'id="event-(\d+)" data-type="memory.fact.user_edited"', html)
    ]
    assert _gist(html, edits[0]) == "fact home_city = Lisbon → Porto"
    assert '<del class="old">Lisbon</del> → <span class="value">Porto</span>' in html
    assert _gist(html, edits[1]) == "fact home_city = Lisbon"
    assert _gist(html, rows[audit.FACT_USER_DELETED]) == "deleted home_city = Porto"
    assert _gist(html, rows[audit.EPISODE_SUMMARISED]) == (
        "summary The operator named the dog Biscuit."
    )
    assert _gist(html, rows[audit.EPISODE_RECALLED]) == (
        f"episode #7, the conversation of chat #{turn['audit_id']} "
        "score score 0.612 · relevance 0.700 · held in a span the message named · recalled 2× "
        "before "
        "summary The operator named the dog Biscuit."
    )
    assert _gist(html, rows[audit.EXTRACT_FAILED]) == (
        f"audit log id {turn['audit_id']} error not JSON: &#39;Sure!&#39;"
    )
    assert _gist(html, rows[audit.RETENTION_SWEPT]) == "audit rows 4 episodes 1"
    # the JSON is one click away, not the page
    assert html.count('<details class="raw">') == len(rows) + 1  # two user_edited rows


def test_timeline_search_over_payloads(client, services):
    first = add_chat(services, "I moved to Lisbon, café on the corner", "Nice")
    add_chat(services, "What's the weather?", "Sunny")
    services.facts.set_by_operator("home_city", "Lisbon", scope=Scope(OWNER))
    services.facts.set_by_operator("note", '100% "quoted"', scope=Scope(OWNER))

    def found(**params: object) -> list[str]:
        html = client.get("/dashboard/audit", params=params).text
        return re.findall(r'data-type="([^"]+)"', html)

    assert found(q="lisbon") == [audit.FACT_USER_EDITED, audit.CHAT_COMPLETED]
    assert found(q="lisbon", event_type=audit.CHAT_COMPLETED) == [audit.CHAT_COMPLETED]
    assert found(q="café") == [audit.CHAT_COMPLETED]  # non-ASCII, stored \u-escaped
    assert found(q='"quoted"') == [audit.FACT_USER_EDITED]  # quotes, stored escaped
    assert found(q="0%") == [audit.FACT_USER_EDITED] and found(q="%%") == []
    assert found(q="home_city") == [audit.FACT_USER_EDITED]  # the subject key too
    assert found(q="nowhere") == []
    page = client.get("/dashboard/audit", params={"q": "lisbon", "limit": 1}).text
    older = _link(page, "older")
    assert "q=lisbon" in older and "limit=1" in older
    assert re.findall(r'id="event-(\d+)"', client.get(older).text) == [str(first)]
    assert 'value="lisbon"' in page  # the search box keeps what was typed
    empty = client.get("/dashboard/audit", params={"q": "<b>nowhere</b>"}).text
    assert "containing “&lt;b&gt;nowhere&lt;/b&gt;”" in empty


PAST_CHAT = [
    {"role": "user", "content": "I keep waking up at 3am."},
    {"role": "assistant", "content": "How warm is your bedroom at night?"},
    {"role": "user", "content": "Around 72°F."},
]
PAST_REPLY = "Try lowering the thermostat to 65°F and track your sleep for a week."
PAST_SUMMARY = "The operator sleeps badly; caesar suggested lowering the bedroom thermostat."


def _add_episode_row(
    services: Any,
    summary: str,
    when: datetime,
    payload: dict[str, Any] | None = None,
    vector: Any = None,
    model: str = "m",
    recalls: int = 0,
) -> int:
    """A finished conversation and its episode, linked as the summariser links them: the id of
    its chat row."""
    payload = payload or {"messages": [{"role": "user", "content": f"(chat: {summary})"}]}
    with services.db.write() as session:
        chat_id = conversations.add_finished(Scope(OWNER, session), services.audit, payload, when)
        row = episode_row(
            audit_log_id=chat_id,
            summary=summary,
            vector=vector,
            model=model,
            created_at=when,
            recall_count=recalls,
            scope=Scope(OWNER),
        )
        link_summarised(session, row)
        session.add(row)
    return chat_id


def add_past_conversation(services: Any, days: float = 3) -> int:
    """A summarised conversation with its windows indexed, as the workers leave one: the id of
    its chat row."""
    when = utcnow() - timedelta(days=days)
    payload = {"messages": PAST_CHAT, "reply": PAST_REPLY}
    embedder = services.embedder.get()
    vector = embedder.embed_batch([PAST_SUMMARY])[0]
    chat_id = _add_episode_row(services, PAST_SUMMARY, when, payload, vector, embedder.model_id)
    run_until_caught_up(services.workers["memory.passages"])
    return chat_id


def test_a_turn_shows_the_facts_and_excerpts_in_its_prompt(client, services, llm):
    for key, value in [("dog_name", "Biscuit"), ("home_city", "Lisbon"), ("employer", "ACME")]:
        services.facts.set_by_operator(key, value, scope=Scope(OWNER))
    past = add_past_conversation(services)
    llm.replies.append("Did the cooler room help?")
    turn = client.post("/v1/chat", json={"message": "I tried the thermostat thing you suggested"})
    assert turn.status_code == 200, turn.text
    assert turn.json()["recalled"] == [past]
    turn_id = turn.json()["audit_id"]
    services.facts.delete("home_city", scope=Scope(OWNER))
    services.facts.set_by_operator("dog_name", "Biscuit the beagle", scope=Scope(OWNER))

    html = client.get(f"/dashboard/audit/{turn_id}").text
    facts = re.findall(
        r'<tr class="prompt-fact" data-key="([^"]+)">.*?<td class="value[^"]*">(.*?)</td>',
        html,
        re.S,
    )
    shown = {key: " ".join(re.sub(r"<[^>]+>", " ", value).split()) for key, value in facts}
    assert shown == {
        "employer": "ACME",
        "home_city": "(deleted since)",
        "dog_name": "Biscuit the beagle (updated since)",
    }
    # the episode, with the excerpt of it that was in the prompt, as who-said-what lines
    assert f'<a href="/dashboard/audit/{past}">chat #{past}</a>' in html
    assert f'<p class="summary">{PAST_SUMMARY}</p>' in html
    excerpt = re.search(r'<blockquote class="excerpt"[^>]*>(.*?)</blockquote>', html, re.S)
    assert excerpt and f"<p><b>caesar:</b> {PAST_REPLY}</p>" in excerpt.group(1)
    assert "held in the span the message named" not in html
    # a message naming the day that conversation was held: the turn view says why it came
    with services.db.read() as session:
        held = session.scalar(
            select(EpisodeSummary.created_at).where(EpisodeSummary.audit_log_id == past)
        )
    llm.replies.append("That was about your sleep.")
    day = f"{held:%B} {held.day}, {held.year}"
    dated = client.post("/v1/chat", json={"message": f"What did we say about sleep on {day}?"})
    assert dated.json()["recalled"] == [past]
    dated_html = client.get(f"/dashboard/audit/{dated.json()['audit_id']}").text
    assert f"held in the span the message named: {day}" in dated_html
    # and the turn itself, as a transcript
    assert '<p class="turn turn-user"><b>operator:</b> I tried the thermostat thing' in html
    assert '<p class="turn turn-assistant"><b>caesar:</b> Did the cooler room help?</p>' in html

    # the episode's own chat row is the whole conversation it summarises
    source = client.get(f"/dashboard/audit/{past}").text
    lines = re.findall(r'<p class="turn turn-\w+"><b>(\w+):</b> (.*?)</p>', source)
    assert lines == [
        ("operator", "I keep waking up at 3am."),
        ("caesar", "How warm is your bedroom at night?"),
        ("operator", "Around 72°F."),
        ("caesar", PAST_REPLY),
    ]


def test_an_older_turn_shows_only_how_many_facts_it_had(client, services):
    with services.db.write() as session:
        old = services.audit.append(
            Scope(OWNER, session),
            audit.CHAT_COMPLETED,
            {
                "messages": [{"role": "user", "content": "hi"}],
                "reply": "hello",
                "memory": {"facts_injected": 3, "episodes_recalled": []},
            },
        )
    html = client.get(f"/dashboard/audit/{old.id}").text
    assert "3 facts injected; this turn predates the record of which." in html
    assert 'class="prompt-fact"' not in html


def _episode_rows(html: str) -> list[str]:
    return [
        " ".join(re.sub(r"<[^>]+>", " ", cell).split())
        for cell in re.findall(r'<td class="summary">(.*?)</td>', html, re.S)
    ]


def test_episodes_page_lists_searches_and_pages_both_ways(client, services):
    chats = [
        _add_episode_row(services, f"Talk {i} about Lisbon", days_ago(10 - i)) for i in range(5)
    ]
    _add_episode_row(services, "About Porto, and <b>bold</b>", days_ago(1), recalls=2)
    _add_episode_row(services, "", days_ago(0))  # trivial: never listed
    with services.db.write() as session:
        session.execute(
            update(EpisodeSummary)
            .where(EpisodeSummary.audit_log_id == chats[0])
            .values(recall_count=4, last_recalled_at=utcnow() - timedelta(days=2))
        )
    assert '<a href="/dashboard/episodes">Episodes</a>' in client.get("/dashboard/facts").text

    html = client.get("/dashboard/episodes").text
    assert _episode_rows(html) == [
        "About Porto, and &lt;b&gt;bold&lt;/b&gt;",
        *[f"Talk {i} about Lisbon" for i in reversed(range(5))],
    ]
    assert "<b>bold</b>" not in html
    rows = re.findall(r'<tr class="episode".*?</tr>', html, re.S)
    for row, chat_id in zip(rows[1:], reversed(chats), strict=True):
        assert f'<a href="/dashboard/audit/{chat_id}" class="conversation">' in row
    oldest = rows[-1]
    assert '<td class="recalls">4</td>' in oldest
    assert re.search(r'<td class="last-recalled"><time [^>]*>2 days ago</time>', oldest)
    assert '<td class="last-recalled">never</td>' in rows[1]
    ten_days_ago = utcnow() - timedelta(days=10)
    assert f'<td class="date">{ten_days_ago:%Y-%m-%d}' in oldest and "last week" in oldest

    found = client.get("/dashboard/episodes", params={"q": "LISBON", "limit": 2}).text
    assert _episode_rows(found) == ["Talk 4 about Lisbon", "Talk 3 about Lisbon"]
    assert 'class="newer"' not in found and 'value="LISBON"' in found
    second = client.get(_link(found, "older")).text
    assert _episode_rows(second) == ["Talk 2 about Lisbon", "Talk 1 about Lisbon"]
    third = client.get(_link(second, "older")).text
    assert _episode_rows(third) == ["Talk 0 about Lisbon"] and 'class="older"' not in third
    back = client.get(_link(third, "newer")).text
    assert _episode_rows(back) == _episode_rows(second)
    assert _episode_rows(client.get(_link(back, "newer")).text) == _episode_rows(found)
    assert "q=LISBON" in _link(third, "newest")

    none = client.get("/dashboard/episodes", params={"q": "Madrid"}).text
    assert "No conversation's summary contains “Madrid”." in none
    bad = client.get("/dashboard/episodes", params={"before": "yesterday"})
    assert bad.status_code == 400 and "not an episode cursor" in bad.text


def test_forget_on_the_episodes_page_needs_csrf_and_removes_the_conversation(secured):
    services, c = secured
    _login(c)
    kept = _add_episode_row(services, "Talked about Porto", days_ago(2))
    gone = _add_episode_row(services, "Talked about Lisbon", days_ago(1))
    with services.db.read() as session:
        conversation = session.get(AuditLog, gone).subject_id
    page = c.get("/dashboard/episodes", params={"q": "talked"}).text
    assert _episode_rows(page) == ["Talked about Lisbon", "Talked about Porto"]
    form = re.search(
        r'<form method="post" action="/dashboard/episodes/forget">(.*?)</form>', page, re.S
    )
    assert form and f'name="conversation_id" value="{conversation}"' in form.group(1)
    assert 'name="q" value="talked"' in form.group(1)

    # what a page on another site could send: no token, or a wrong one
    for csrf in (None, "0" * 64):
        data = {"conversation_id": str(conversation), **({"csrf": csrf} if csrf else {})}
        assert c.post("/dashboard/episodes/forget", data=data).status_code == 403
    assert len(_episode_rows(c.get("/dashboard/episodes").text)) == 2

    data = {"conversation_id": str(conversation), "q": "talked", "csrf": _csrf(page)}
    done = c.post("/dashboard/episodes/forget", data=data, follow_redirects=False)
    assert done.status_code == 303
    location = done.headers["location"]
    assert location.startswith("/dashboard/episodes?q=talked&forgot=")
    after = c.get(location).text
    assert _episode_rows(after) == ["Talked about Porto"]
    notice = re.search(r'<p class="notice forgotten" role="status">(.*?)</p>', after, re.S)
    assert notice
    said = " ".join(re.sub(r"<[^>]+>", " ", notice.group(1)).split())
    forgotten_id = int(location.rsplit("=", 1)[1])
    assert said == (
        "Forgot 1 conversation: 1 chat row, 1 episode, 0 facts learned from it and 0 audit "
        f"rows about it ( #{forgotten_id} memory.forgotten )."
    )
    assert c.get(f"/dashboard/audit/{gone}").status_code == 404
    assert c.get(f"/dashboard/audit/{kept}").status_code == 200
    timeline = c.get("/dashboard/audit", params={"event_type": audit.MEMORY_FORGOTTEN}).text
    assert _gist(timeline, forgotten_id).startswith(
        f"forgot 1 conversation(s) (#{conversation}): 1 chat rows, 1 episodes, 0 chunks, "
        "0 facts, 0 rows about them asked 1 by id"
    )
    assert "Talked about Lisbon" not in timeline

    # a conversation that is not there (forgotten twice, say) is a 404 page, not a 500
    again = c.post("/dashboard/episodes/forget", data=data)
    assert again.status_code == 404 and f"no conversation with id {conversation}" in again.text
    # another row's id in ?forgot= says nothing
    assert 'class="notice' not in c.get(f"/dashboard/episodes?forgot={kept}").text


# -- a deleted fact's conversations ----------------------------------------------------------------
@pytest.fixture
def learning(make_services) -> Iterator[tuple[Any, TestClient]]:
    """Logged in, with the memory workers on their offline routes (no LLM)."""
    services = make_services(
        api_token=TEST_TOKEN,
        gateway={
            "routes": {"memory_extract": "offline:patterns", "memory_summarise": "offline:textrank"}
        },
        memory={"episodes_summarise": {"enabled": True}, "facts_extract": {"enabled": True}},
    )
    with TestClient(create_app(services.settings, services, run_workers=False)) as c:
        _login(c)
        yield services, c


def _tell(c: TestClient, message: str) -> tuple[int, int]:
    """One new conversation saying `message`: (its chat row's id, its conversation's id)."""
    response = c.post(
        "/v1/chat", json={"message": message}, headers={"Authorization": f"Bearer {TEST_TOKEN}"}
    )
    assert response.status_code == 200, response.text
    chat_id = response.json()["audit_id"]
    with c.app.state.services.db.read() as session:
        return chat_id, session.get(AuditLog, chat_id).subject_id


def _notices(html: str) -> list[str]:
    return [
        " ".join(re.sub(r"<[^>]+>", " ", p).split())
        for p in re.findall(r'<p class="notice[^"]*" role="status">(.*?)</p>', html, re.S)
    ]


def _offer(html: str) -> str | None:
    """The conversation ids the page offers to forget, as the form would post them."""
    form = re.search(
        r'<form method="post" action="/dashboard/facts/forget-sources".*?</form>', html, re.S
    )
    if form is None:
        return None
    match = re.search(r'name="conversation_ids" value="([^"]*)"', form.group(0))
    assert match and 'name="csrf"' in form.group(0)
    return match.group(1)


def _delete(c: TestClient, key: str) -> str:
    page = c.get("/dashboard/facts").text
    done = c.post(
        f"/dashboard/facts/{key}/delete", data={"csrf": _csrf(page)}, follow_redirects=False
    )
    assert done.status_code == 303
    return done.headers["location"]


def test_deleting_a_fact_offers_to_forget_its_conversations(learning, llm):
    services, c = learning
    llm.reply = lambda body, protocol: "Noted."
    first, told = _tell(c, "My dog's name is Biscuit and I work at ACME.")
    _second, renamed = _tell(c, "My dog's name is Rex.")
    _third, other = _tell(c, "I live in Porto.")
    assert run_until_caught_up(services.workers["memory.extract"]) == 3
    assert run_until_caught_up(services.workers["memory.summarise"]) == 3
    assert services.facts.get("dog_name", scope=Scope(OWNER)).value == "Rex"

    location = _delete(c, "dog_name")
    assert location == f"/dashboard/facts?deleted=dog_name&learned_from={told}%2C{renamed}"
    page = c.get(location).text
    assert _notices(page) == [
        "Deleted dog_name. It was learned from 2 conversations, which still say it: recall "
        "can bring it back."
    ]
    assert _offer(page) == f"{told},{renamed}"
    assert ">Forget those conversations too</button>" in page
    assert "dog_name" not in _row_keys(page)

    # like every form here, it needs the session's CSRF token
    ids = {"conversation_ids": f"{told},{renamed}"}
    assert c.post("/dashboard/facts/forget-sources", data=ids).status_code == 403
    with services.db.read() as session:
        assert session.get(Conversation, told) is not None

    done = c.post(
        "/dashboard/facts/forget-sources",
        data={**ids, "csrf": _csrf(page)},
        follow_redirects=False,
    )
    assert done.status_code == 303
    location = done.headers["location"]
    assert re.fullmatch(r"/dashboard/facts\?forgot=\d+", location), location
    forgotten_id = int(location.rsplit("=", 1)[1])
    after = c.get(location).text
    (said,) = _notices(after)
    # "My dog's name is Rex." / "Noted." is a trivial chat: its empty episode row goes with it
    # and is counted nowhere, as the episodes list never showed it (issue #49)
    assert said.startswith(
        "Forgot 2 conversations: 2 chat rows, 1 episode, 1 fact learned from them and "
    )
    assert said.endswith(f"audit rows about them ( #{forgotten_id} memory.forgotten ).")
    assert f'<a href="/dashboard/audit/{forgotten_id}">' in after
    assert _offer(after) is None
    # employer was learned in the first conversation too, and went with it
    assert _row_keys(after) == ["home_location"]

    with services.db.read() as session:
        row = session.get(AuditLog, forgotten_id)
        assert row.event_type == audit.MEMORY_FORGOTTEN
        assert row.payload["conversation_ids"] == [told, renamed]
        assert session.get(Conversation, told) is None
        assert session.get(Conversation, renamed) is None
        assert session.get(Conversation, other) is not None
        chats = session.scalars(
            select(AuditLog.subject_id).where(AuditLog.event_type == audit.CHAT_COMPLETED)
        ).all()
        assert chats == [other]
        summaries = session.scalars(select(EpisodeSummary.conversation_id)).all()
        assert summaries == [other]
    assert c.get(f"/dashboard/audit/{first}").status_code == 404

    # the same form again (another tab, the back button): a clear page, nothing forgotten
    again = c.post("/dashboard/facts/forget-sources", data={**ids, "csrf": _csrf(page)})
    assert again.status_code == 404
    assert (
        f"Nothing was forgotten: conversations #{told}, #{renamed} are gone already "
        "(forgotten before, or swept by retention)."
    ) in again.text
    assert _row_keys(again.text) == ["home_location"]  # the facts page, with the error on it
    # and the offer's page, reloaded, offers nothing: they are gone
    reloaded = c.get(f"/dashboard/facts?deleted=dog_name&learned_from={told},{renamed}").text
    assert _notices(reloaded) == ["Deleted dog_name."] and _offer(reloaded) is None


def test_a_fact_with_no_source_conversation_offers_nothing(learning):
    services, c = learning
    services.facts.set_by_operator("dog_name", "Biscuit", scope=Scope(OWNER))
    location = _delete(c, "Dog Name")
    assert location == "/dashboard/facts?deleted=dog_name"
    page = c.get(location).text
    assert _notices(page) == ["Deleted dog_name."]
    assert _offer(page) is None and "forget-sources" not in page


def test_forgetting_a_facts_conversations_with_bad_or_stale_ids(learning, llm):
    services, c = learning
    llm.reply = lambda body, protocol: "Noted."
    _chat, told = _tell(c, "My dog's name is Biscuit.")
    _chat, kept = _tell(c, "I live in Porto.")
    token = _csrf(c.get("/dashboard/facts").text)
    missing = kept + 1000

    for ids, message in [
        ("", "conversation_ids: say which conversations to forget"),
        ("3,x", "conversation_ids: &#39;x&#39; is not a conversation id"),
        ("0", "conversation_ids: &#39;0&#39; is not a conversation id"),
        ("²", "conversation_ids: &#39;²&#39; is not a conversation id"),
        (str(2**63), f"conversation_ids: &#39;{2**63}&#39; is not a conversation id"),
        (",".join(map(str, range(1, 102))), "conversation_ids: at most 100 conversation ids"),
    ]:
        bad = c.post(
            "/dashboard/facts/forget-sources", data={"conversation_ids": ids, "csrf": token}
        )
        assert bad.status_code == 400 and message in bad.text, ids
    gone = c.post(
        "/dashboard/facts/forget-sources", data={"conversation_ids": str(missing), "csrf": token}
    )
    assert gone.status_code == 404
    assert f"Nothing was forgotten: conversation #{missing} is gone already" in gone.text
    with services.db.read() as session:
        assert session.get(Conversation, told) is not None  # nothing went

    # some gone, some there: those there go, and the page says the rest were gone already
    done = c.post(
        "/dashboard/facts/forget-sources",
        data={"conversation_ids": f"{told}, {missing},{told}", "csrf": token},
        follow_redirects=False,
    )
    assert done.status_code == 303 and done.headers["location"].endswith("&gone=1")
    notices = _notices(c.get(done.headers["location"]).text)
    assert notices[0].startswith("Forgot 1 conversation: 1 chat row, 0 episodes, 0 facts")
    assert notices[1:] == ["1 of them was gone already."]
    with services.db.read() as session:
        assert session.get(Conversation, told) is None
        assert session.get(Conversation, kept) is not None

    # the offer's own query string, tampered with
    bad = c.get("/dashboard/facts", params={"deleted": "dog_name", "learned_from": "1;2"})
    assert (
        bad.status_code == 400
        and "learned_from: &#39;1;2&#39; is not a conversation id" in bad.text
    )
    # more than the page carries: it says how many, and what its button forgets
    many = c.get(
        "/dashboard/facts", params={"deleted": "home", "learned_from": str(kept), "more": 120}
    ).text
    assert _notices(many)[0].startswith("Deleted home. It was learned from 121 conversations,")
    assert _offer(many) == str(kept) and "This forgets the latest 1;" in many


def test_conversation_ids_are_parsed_strictly():
    assert parse_ids("", "f") == [] and parse_ids(" , ", "f") == []
    assert parse_ids("7, 3,7,0003", "f") == [3, 7]
    assert parse_ids(str(2**63 - 1), "f") == [2**63 - 1]
    for bad in ("-1", "0", "1.5", "١", "1e3", str(2**63)):
        with pytest.raises(InputError, match="is not a conversation id"):
            parse_ids(bad, "f")
    with pytest.raises(InputError, match="at most 100"):
        parse_ids(",".join(["1"] * 101), "f")


def test_references_point_at_source_chats():
    row = AuditLog(
        id=10,
        event_type=audit.CHAT_COMPLETED,
        subject_id=2,  # its conversation's id: no audit row
        payload={"memory": {"episodes_recalled": [3, 4, True, "5"]}},
        person_id=OWNER,
    )
    assert references(row) == [("recalled", 3), ("recalled", 4)]
    recalled = AuditLog(
        id=11,
        event_type=audit.EPISODE_RECALLED,
        subject_id=3,
        payload={"turn_audit_id": 10},
        person_id=OWNER,
    )
    assert references(recalled) == [("subject", 3), ("turn", 10)]
    extracted = AuditLog(
        id=12,
        event_type=audit.FACT_EXTRACTED,
        subject_id=3,
        payload={"source_audit_id": 3},
        person_id=OWNER,
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


def test_a_conversations_row_counts_its_turns_as_the_chat_page_does(client, services, llm):
    """Two exchanges are "turns 2" (issue #49: the row of a 2-turn chat said "turns 4")."""
    llm.replies += ["Hello Dana!", "Biscuit."]
    first = [{"role": "user", "content": "Hi, I'm Dana and my dog is Biscuit."}]
    one = client.post("/v1/chat/completions", json={"model": "caesar", "messages": first})
    second = [
        {"role": "system", "content": "You are helpful."},
        *first,
        {"role": "assistant", "content": "Hello Dana!"},
        {"role": "user", "content": "What is my dog called?"},
    ]
    reply = client.post("/v1/chat/completions", json={"model": "caesar", "messages": second})
    audit_id = int(reply.json()["id"].rsplit("-", 1)[1])
    html = client.get("/dashboard/audit").text
    assert "turns 2," in _gist(html, audit_id)
    first_id = int(one.json()["id"].rsplit("-", 1)[1])
    assert "turns" not in _gist(html, first_id)  # one exchange: no count
