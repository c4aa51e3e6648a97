"""The dashboard's chat page over HTTP (TestClient): who may use it, a turn sent with and
without the page's script stored as a normal chat turn, the memory panel beside each reply,
escaping, and the forget and edit forms that return to the page (issue #25)."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import pytest
from conftest import OWNER, TEST_TOKEN
from sqlalchemy import select
from test_dashboard import _csrf, _login  # the dashboard tests' login and CSRF reading

from caesar import audit
from caesar.api.dashboard_render import back_to
from caesar.clock import utcnow
from caesar.db.models import AuditLog, Conversation
from caesar.memory import conversations
from caesar.memory.episodes.rows import episode_row
from caesar.memory.scope import Scope
from caesar.workers import run_until_caught_up

XSS = '<img src=x onerror="alert(1)">'
ESCAPED = "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;"
PAST_CHAT = [
    {"role": "user", "content": "I keep waking up at 3am."},
    {"role": "assistant", "content": "How warm is your bedroom at night?"},
    {"role": "user", "content": "Around 72°F."},
]
PAST_REPLY = "Try lowering the thermostat to 65°F and track your sleep for a week."
PAST_SUMMARY = "The operator sleeps badly; caesar suggested lowering the bedroom thermostat."
STREAM = {"Accept": "text/event-stream"}


def _past_conversation(services: Any, days: float = 3) -> tuple[int, int]:
    """A summarised conversation with its windows indexed, as the workers leave one: (its chat
    row's id, its conversation's id)."""
    when = utcnow() - timedelta(days=days)
    embedder = services.embedder.get()
    with services.db.write() as session:
        chat_id = conversations.add_finished(
            Scope(OWNER, session),
            services.audit,
            {"messages": PAST_CHAT, "reply": PAST_REPLY},
            when,
        )
        conversation_id = session.get(AuditLog, chat_id).subject_id
        row = episode_row(
            audit_log_id=chat_id,
            summary=PAST_SUMMARY,
            vector=embedder.embed_batch([PAST_SUMMARY])[0],
            model=embedder.model_id,
            created_at=when,
            scope=Scope(OWNER),
        )
        row.conversation_id = conversation_id
        session.add(row)
    run_until_caught_up(services.workers["memory.passages"])
    return chat_id, conversation_id


def _events(response: Any) -> list[dict[str, Any]]:
    blocks = [b for b in response.text.split("\n\n") if b.strip()]
    assert all(b.startswith("data: ") for b in blocks), response.text
    return [json.loads(b.removeprefix("data: ")) for b in blocks]


def _text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def _chat_rows(services: Any, event_type: str = audit.CHAT_COMPLETED) -> list[AuditLog]:
    with services.db.read() as session:
        return list(
            session.scalars(
                select(AuditLog).where(AuditLog.event_type == event_type).order_by(AuditLog.id)
            )
        )


# -- who may use it -----------------------------------------------------------------------------
def test_the_chat_page_is_token_protected(secured, llm):
    services, c = secured
    first = c.get("/dashboard/chat", follow_redirects=False)
    assert first.status_code == 303
    assert first.headers["location"] == "/dashboard/login?next=/dashboard/chat"
    assert c.get("/dashboard/chat/1", follow_redirects=False).status_code == 303
    assert c.get("/dashboard/chat/turns/1/memory", follow_redirects=False).status_code == 303
    refused = c.post("/dashboard/chat/send", data={"message": "hi"}, headers=STREAM)
    assert refused.status_code == 401 and "log in first" in refused.text
    wrong = {"Authorization": "Bearer not-the-token-at-all-0000"}
    assert c.post("/dashboard/chat/send", data={"message": "hi"}, headers=wrong).status_code == 401
    assert llm.requests == [] and _chat_rows(services) == []

    # the script is public, as the stylesheet is; nothing else is served from there
    script = c.get("/dashboard/static/chat.js")
    assert script.status_code == 200
    assert script.headers["content-type"].startswith("text/javascript")
    assert c.get("/dashboard/static/..%2Fdashboard.py").status_code == 404
    assert c.get("/dashboard/static/nope.js").status_code == 404

    _login(c)
    page = c.get("/dashboard/chat")
    assert page.status_code == 200
    # the one script, from this server; no inline script, nothing from elsewhere
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'; connect-src 'self'" in policy
    assert "unsafe-inline" not in policy and "http" not in policy
    assert re.findall(r"<script[^>]*>.*?</script>", page.text, re.S) == [
        '<script src="/dashboard/static/chat.js" defer></script>'
    ]
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in page.text
    # other pages stay without scripts
    assert "script-src" not in c.get("/dashboard/facts").headers["content-security-policy"]

    # a bearer client needs no session and no CSRF token
    llm.replies.append("Hello from the bearer.")
    bearer = {"Authorization": f"Bearer {TEST_TOKEN}"}
    c.cookies.clear()
    sent = c.post(
        "/dashboard/chat/send", data={"message": "hi"}, headers=bearer, follow_redirects=False
    )
    assert sent.status_code == 303 and sent.headers["location"].startswith("/dashboard/chat/")


def test_sending_needs_the_sessions_csrf_token(client, services, llm):
    page = client.get("/dashboard/chat").text
    assert client.post("/dashboard/chat/send", data={"message": "hi"}).status_code == 403
    forged = {"message": "hi", "csrf": "0" * 64}
    assert client.post("/dashboard/chat/send", data=forged, headers=STREAM).status_code == 403
    assert llm.requests == [] and _chat_rows(services) == []
    blank = client.post("/dashboard/chat/send", data={"message": "  ", "csrf": _csrf(page)})
    assert blank.status_code == 400 and "say something first" in blank.text
    gone = client.post(
        "/dashboard/chat/send", data={"message": "hi", "conversation_id": 999, "csrf": _csrf(page)}
    )
    assert gone.status_code == 404 and "no conversation #999" in gone.text
    assert client.get("/dashboard/chat/999").status_code == 404
    assert client.get("/dashboard/chat/turns/999/memory").status_code == 404


# -- a turn, with and without the script --------------------------------------------------------
def test_a_turn_without_the_script_is_a_normal_chat_turn(client, services, llm):
    services.facts.set_by_operator("dog_name", "Biscuit", scope=Scope(OWNER))
    page = client.get("/dashboard/chat").text
    assert "None yet." in page and '<label for="message">Message</label>' in page
    llm.replies.append("Your dog is called Biscuit.")
    sent = client.post(
        "/dashboard/chat/send",
        data={"message": "What is my dog called?", "csrf": _csrf(page)},
        follow_redirects=False,
    )
    assert sent.status_code == 303
    conversation_id = int(sent.headers["location"].rsplit("/", 1)[1])

    [row] = _chat_rows(services)
    assert row.subject_id == conversation_id
    assert row.payload["messages"] == [{"role": "user", "content": "What is my dog called?"}]
    assert row.payload["reply"] == "Your dog is called Biscuit."
    assert row.payload["memory"]["fact_keys"] == ["dog_name"]
    assert "Biscuit" in _system(llm)  # the fact went into the prompt
    with services.db.read() as session:
        conversation = session.get(Conversation, conversation_id)
        assert conversation.turns == 1 and conversation.tip_audit_id == row.id

    # the conversation's page: the turns, and beside the reply what was remembered for it
    html = client.get(sent.headers["location"]).text
    assert f"Conversation #{conversation_id}" in html
    said = re.findall(r'<b class="who">(\w+)</b>\s*<p class="text">(.*?)</p>', html, re.S)
    assert said == [
        ("operator", "What is my dog called?"),
        ("caesar", "Your dog is called Biscuit."),
    ]
    panel = re.search(r'<details class="remembered".*?</details>\s*</li>', html, re.S)
    assert panel and f'data-audit-id="{row.id}"' in panel.group(0)
    assert "Remembered for this reply: 1 fact · 0 past conversations" in _text(panel.group(0))
    assert "dog_name = Biscuit #1 by importance" in _text(panel.group(0))
    # the list of conversations names it by how it opened, and marks it as the current one
    listed = re.search(r'<nav class="conversations".*?</nav>', html, re.S).group(0)
    assert f'href="/dashboard/chat/{conversation_id}" aria-current="page">What is my dog' in listed

    # continued: the conversation's own turns are the history the model gets
    llm.replies.append("A beagle, you told me.")
    again = client.post(
        "/dashboard/chat/send",
        data={
            "message": "And what breed?",
            "conversation_id": conversation_id,
            "csrf": _csrf(html),
        },
        follow_redirects=False,
    )
    assert again.headers["location"] == f"/dashboard/chat/{conversation_id}"
    sent_to_model = llm.requests[-1]["json"]["messages"][1:]
    assert [(m["role"], m["content"]) for m in sent_to_model] == [
        ("user", "What is my dog called?"),
        ("assistant", "Your dog is called Biscuit."),
        ("user", "And what breed?"),
    ]
    rows = _chat_rows(services)
    assert [r.subject_id for r in rows] == [conversation_id, conversation_id]
    html = client.get(f"/dashboard/chat/{conversation_id}").text
    assert len(re.findall(r'<details class="remembered"', html)) == 2
    # the API lists it like any other conversation
    assert client.get(f"/v1/conversations/{conversation_id}").status_code == 200


def _system(llm: Any) -> str:
    return str(llm.requests[-1]["json"]["messages"][0]["content"])


def test_a_streamed_turn_and_what_was_remembered_for_it(client, services, llm):
    for key, value in [("dog_name", "Biscuit"), ("home_city", "Lisbon")]:
        services.facts.set_by_operator(key, value, scope=Scope(OWNER))
    past, past_conversation = _past_conversation(services)
    page = client.get("/dashboard/chat").text
    reply = "Did lowering the thermostat help you sleep?"
    llm.replies.append(reply)
    response = client.post(
        "/dashboard/chat/send",
        data={"message": "I tried the thermostat thing you suggested", "csrf": _csrf(page)},
        headers=STREAM,
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = _events(response)
    texts = [e["text"] for e in events if e["type"] == "text"]
    assert len(texts) > 1 and "".join(texts) == reply  # in pieces, as the model sent them
    done = events[-1]
    assert done["type"] == "done" and done["finish_reason"] == "stop"

    turn = _chat_rows(services)[-1]
    assert done["audit_id"] == turn.id and done["conversation_id"] == turn.subject_id
    assert done["url"] == f"/dashboard/chat/{turn.subject_id}"
    assert turn.payload["reply"] == reply
    assert turn.payload["memory"]["episodes_recalled"] == [past]

    panel = client.get(done["memory_url"])
    assert panel.status_code == 200 and "<html" not in panel.text  # a fragment
    html = panel.text
    assert "Remembered for this reply: 2 facts · 1 past conversation" in _text(html)
    facts = re.findall(r'<li class="remembered-fact" data-key="([^"]+)">', html)
    assert sorted(facts) == ["dog_name", "home_city"]
    # each fact with the form that edits it, sent back to this conversation
    edit = re.search(
        r'<form method="post" action="/dashboard/facts" class="edit">.*?</form>', html, re.S
    )
    assert edit and f'name="back" value="/dashboard/chat/{turn.subject_id}"' in edit.group(0)
    assert 'name="csrf" value="' in edit.group(0)
    # the past conversation: why it came (its scores, when it was held), summary and excerpt
    episode = re.search(r'<li class="remembered-episode".*?</li>\s*</ol>', html, re.S).group(0)
    why = _text(re.search(r'<p class="why scores">(.*?)</p>', episode, re.S).group(1))
    assert re.fullmatch(
        r"relevance [01]\.\d{3} \(meaning [01]\.\d{3}(, words [01]\.\d{3})?\) · "
        r"score [01]\.\d{3} \(freshness [01]\.\d\d\) · recalled 0× before",
        why,
    ), why
    assert "3 days before this reply" in _text(episode)
    assert f'<p class="summary">{PAST_SUMMARY}</p>' in episode
    assert f"<p><b>caesar:</b> {PAST_REPLY}</p>" in episode
    assert f'href="/dashboard/chat/{past_conversation}">Open that conversation' in episode
    forget = re.search(
        r'<form method="post" action="/dashboard/episodes/forget">.*?</form>', episode, re.S
    )
    assert forget and f'name="conversation_id" value="{past_conversation}"' in forget.group(0)
    assert f'name="back" value="/dashboard/chat/{turn.subject_id}"' in forget.group(0)

    # the same panel beside the reply when the conversation is read again
    again = client.get(done["url"]).text
    assert PAST_SUMMARY in again and 'class="remembered-fact"' in again


def test_a_message_naming_a_day_shows_the_day_it_named(client, services, llm):
    past, _conversation = _past_conversation(services)
    with services.db.read() as session:
        held = session.get(AuditLog, past).created_at
    day = f"{held:%B} {held.day}, {held.year}"
    page = client.get("/dashboard/chat").text
    llm.replies.append("That was about your sleep.")
    events = _events(
        client.post(
            "/dashboard/chat/send",
            data={"message": f"What did we say about sleep on {day}?", "csrf": _csrf(page)},
            headers=STREAM,
        )
    )
    html = client.get(events[-1]["memory_url"]).text
    assert f"The message named {day} (" in _text(html)
    assert f"Held in the span the message named: {day}" in _text(html)


def test_a_model_that_fails_says_so_and_is_audited(client, services, llm):
    page = client.get("/dashboard/chat").text
    llm.fail_next("status", status=503)
    plain = client.post("/dashboard/chat/send", data={"message": "hello?", "csrf": _csrf(page)})
    assert plain.status_code == 503 and "The model did not answer" in plain.text
    llm.fail_next("stream_error")
    streamed = client.post(
        "/dashboard/chat/send",
        data={"message": "hello again?", "csrf": _csrf(page)},
        headers=STREAM,
    )
    assert streamed.status_code == 200
    events = _events(streamed)
    assert events[-1]["type"] == "error"
    assert events[-1]["message"].startswith("The model did not answer")
    # the conversation the failed turn named, so that sending again continues it
    failed = _chat_rows(services, audit.CHAT_FAILED)
    assert len(failed) == 2 and events[-1]["conversation_id"] == failed[-1].subject_id
    assert _chat_rows(services) == []


# -- escaping -----------------------------------------------------------------------------------
def test_everything_said_and_remembered_is_escaped(client, services, llm):
    services.facts.set_by_operator("note", XSS, scope=Scope(OWNER))
    page = client.get("/dashboard/chat").text
    llm.replies.append(f"You said {XSS}")
    events = _events(
        client.post(
            "/dashboard/chat/send", data={"message": XSS, "csrf": _csrf(page)}, headers=STREAM
        )
    )
    # in the stream it is JSON text, which the script inserts as text
    assert "".join(e["text"] for e in events if e["type"] == "text") == f"You said {XSS}"
    done = events[-1]
    for path in (done["url"], done["memory_url"], "/dashboard/chat"):
        html = client.get(path).text
        assert XSS not in html, path
        assert ESCAPED in html, path


# -- forget and edit from beside a reply --------------------------------------------------------
def test_forget_and_edit_forms_return_to_the_chat_page(client, services, llm):
    services.facts.set_by_operator("dog_name", "Biscuit", scope=Scope(OWNER))
    _past, past_conversation = _past_conversation(services)
    page = client.get("/dashboard/chat").text
    llm.replies.append("Did it help?")
    done = _events(
        client.post(
            "/dashboard/chat/send",
            data={"message": "I tried the thermostat thing you suggested", "csrf": _csrf(page)},
            headers=STREAM,
        )
    )[-1]
    here = done["url"]
    csrf = _csrf(client.get(here).text)

    edited = client.post(
        "/dashboard/facts",
        data={"key": "dog_name", "value": "Biscuit the beagle", "back": here, "csrf": csrf},
        follow_redirects=False,
    )
    assert edited.headers["location"] == f"{here}?saved=dog_name"
    after = client.get(edited.headers["location"]).text
    assert "Saved dog_name." in after and "Biscuit the beagle" in after
    assert services.facts.get("dog_name", scope=Scope(OWNER)).value == "Biscuit the beagle"

    forgot = client.post(
        "/dashboard/episodes/forget",
        data={"conversation_id": past_conversation, "back": here, "csrf": csrf},
        follow_redirects=False,
    )
    location = forgot.headers["location"]
    assert re.fullmatch(rf"{here}\?forgot=\d+", location), location
    after = client.get(location).text
    assert "Forgot 1 conversation: 1 chat row, 1 episode," in _text(after)
    # the reply's panel says the conversation it had recalled is gone
    assert PAST_SUMMARY not in after
    assert "Also in the prompt: 1 past conversation forgotten since." in after

    # forgetting the conversation being read returns to a new chat
    gone = client.post(
        "/dashboard/episodes/forget",
        data={"conversation_id": done["conversation_id"], "back": "/dashboard/chat", "csrf": csrf},
        follow_redirects=False,
    )
    assert re.fullmatch(r"/dashboard/chat\?forgot=\d+", gone.headers["location"])
    assert client.get(here).status_code == 404
    # a `back` elsewhere is ignored: the form's own page
    elsewhere = client.post(
        "/dashboard/facts",
        data={"key": "a", "value": "b", "back": "https://evil.example/", "csrf": csrf},
        follow_redirects=False,
    )
    assert elsewhere.headers["location"] == "/dashboard/facts?saved=a"


@pytest.mark.parametrize(
    "target",
    [
        "https://evil.example/",
        "//evil.example",
        "/dashboard/facts",
        "/dashboard/chat/0",
        "/dashboard/chat/1?x=1",
        "/dashboard/chat/../login",
    ],
)
def test_back_goes_only_to_the_chat_page(target):
    assert back_to(target, "/dashboard/facts") == "/dashboard/facts"
    assert back_to("/dashboard/chat/12", "/x") == "/dashboard/chat/12"
    assert back_to("/dashboard/chat", "/x") == "/dashboard/chat"


def test_an_imported_conversation_reads_without_panels(client, services):
    _past, conversation_id = _past_conversation(services)
    html = client.get(f"/dashboard/chat/{conversation_id}").text
    said = re.findall(r'<p class="text">(.*?)</p>', html, re.S)
    assert said == [t["content"] for t in PAST_CHAT] + [PAST_REPLY]
    assert '<details class="remembered"' not in html
    assert "What caesar remembers of it:" in html and PAST_SUMMARY in html
