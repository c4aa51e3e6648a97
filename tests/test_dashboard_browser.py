"""The dashboard in a real headless Chromium (Debian's package, driven by Playwright), against a
real uvicorn server on a loopback port: log in, see the ranking, edit, watch the fact move up;
read the audit timeline and a turn's memory, browse, search and forget episodes, and forget
the conversations a deleted fact was learned from; chat, watch the reply stream in and what was
remembered for it appear beside it, and correct that memory from there (on a phone, and with
scripts off, too)."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import OWNER, TEST_TOKEN
from sqlalchemy import select

from caesar.clock import utcnow
from caesar.db.models import AuditLog, Fact
from caesar.memory import conversations
from caesar.memory.episodes.rows import episode_row
from caesar.memory.scope import Scope
from caesar.workers import run_until_caught_up

pytestmark = pytest.mark.xdist_group("browser")

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
XSS_VALUE = '<img src=x onerror="window.__xss = 1; alert(1)">'


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def _serving(services: Any) -> Iterator[str]:
    """`services`' app on a real uvicorn server on a free loopback port: its base URL."""
    import uvicorn

    from caesar.api import create_app

    app = create_app(services.settings, services, run_workers=False)
    config = uvicorn.Config(
        app, host="127.0.0.1", port=_free_port(), log_level="warning", lifespan="on"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="uvicorn-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{config.port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
def server(make_services) -> Iterator[tuple[str, Any]]:
    services = make_services(api_token=TEST_TOKEN)
    with _serving(services) as base:
        yield base, services


@pytest.fixture
def learning_server(make_services) -> Iterator[tuple[str, Any]]:
    """As `server`, with the memory workers on their offline routes (no LLM)."""
    services = make_services(
        api_token=TEST_TOKEN,
        gateway={
            "routes": {"memory_extract": "offline:patterns", "memory_summarise": "offline:textrank"}
        },
        memory={"episodes_summarise": {"enabled": True}, "facts_extract": {"enabled": True}},
    )
    with _serving(services) as base:
        yield base, services


@pytest.fixture
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/install-browser (make test does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Any) -> Any:
    return browser.new_page()


def _seed(services: Any) -> None:
    """Three extracted facts of falling importance, and one stored attack."""
    now = utcnow()
    with services.db.write() as session:
        for key, value, confidence, age in [
            ("home_city", "Lisbon", 0.9, 0),  # 0.9
            ("employer", "ACME", 0.8, 60),  # 0.4
            ("dog_name", "Biscuit", 0.6, 120),  # 0.15
            ("note", XSS_VALUE, 0.5, 240),  # 0.03
        ]:
            when = now - timedelta(days=age)
            session.add(
                Fact(
                    key=key,
                    value=value,
                    confidence=confidence,
                    created_at=when,
                    updated_at=when,
                    person_id=OWNER,
                )
            )


def _keys(page: Any) -> list[str]:
    return page.locator("tr.fact").evaluate_all("rows => rows.map(r => r.dataset.key)")


def test_login_rank_edit_and_escaping(server, page):
    base, services = server
    _seed(services)
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))

    page.goto(f"{base}/dashboard/facts")
    assert page.url.startswith(f"{base}/dashboard/login")
    page.fill("input[name=token]", "wrong-token-0123456789")
    page.click("form.login button")
    assert page.locator("p.error").inner_text() == "That is not the API token."
    page.fill("input[name=token]", TEST_TOKEN)
    page.click("form.login button")
    page.wait_for_url(f"{base}/dashboard/facts")
    cookie = next(c for c in page.context.cookies() if c["name"] == "caesar_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert page.evaluate("document.cookie") == ""  # invisible to scripts

    assert _keys(page) == ["home_city", "employer", "dog_name", "note"]
    importance = page.locator("tr.fact td.importance").all_inner_texts()
    assert importance == ["0.900", "0.400", "0.150", "0.031"]

    row = page.locator('tr.fact[data-key="dog_name"]')
    row.locator("summary").click()
    row.locator("form.edit input[name=value]").fill("Biscuit the beagle")
    row.locator("form.edit button").click()
    page.wait_for_url(f"{base}/dashboard/facts?saved=dog_name")

    assert _keys(page) == ["dog_name", "home_city", "employer", "note"]
    top = page.locator("tr.fact").first
    assert top.locator("td.value").inner_text() == "Biscuit the beagle"
    assert top.locator("td.importance").inner_text() == "1.500"  # 1 × 1.0 × (1 + 0.5 × 1)
    assert top.locator("td.edits").inner_text() == "1"

    # the stored attack is shown as text and runs nothing
    note = page.locator('tr.fact[data-key="note"] td.value')
    assert note.inner_text() == XSS_VALUE
    assert note.locator("img").count() == 0
    assert page.evaluate("window.__xss") is None and dialogs == []

    # the edit is in the audit timeline, linked from the fact's source column
    top.locator("a.source").click()
    assert "memory.fact.user_edited" in page.locator("h1").inner_text()
    assert "Biscuit the beagle" in page.locator("pre.payload").inner_text()
    page.goto(f"{base}/dashboard/audit?event_type=memory.fact.user_edited")
    assert page.locator("li.event").count() == 1
    assert page.evaluate("window.__xss") is None and dialogs == []


# -- the operator's view of memory (issue #13) ----------------------------------------------------
# CAESAR_SCREENSHOTS=docs/img pytest tests/test_dashboard_browser.py  → the pictures in
# docs/dashboard.md, from these tests' pages.
SCREENSHOTS = os.environ.get("CAESAR_SCREENSHOTS")
PAST = [
    (
        9,
        "The operator is planning a trip to Lisbon in May and asked about trams; caesar "
        "suggested the 28 tram early in the morning.",
        [
            ("user", "I'm going to Lisbon in May. Are the trams worth it?"),
            ("assistant", "Yes: take the 28 early in the morning, before the crowds."),
        ],
    ),
    (
        6,
        "The operator's beagle Biscuit has been chewing shoes; caesar suggested chew toys "
        "and more walks.",
        [
            ("user", "Biscuit chewed my shoes again."),
            ("assistant", "Beagles chew when bored: try chew toys and a longer walk."),
        ],
    ),
    (
        3,
        "The operator sleeps badly; caesar suggested lowering the bedroom thermostat to "
        "65°F and tracking sleep for a week.",
        [
            ("user", "I keep waking up at 3am."),
            ("assistant", "How warm is your bedroom at night?"),
            ("user", "Around 72°F."),
            ("assistant", "Try lowering the thermostat to 65°F and track your sleep for a week."),
        ],
    ),
]


def _login(page: Any, base: str) -> None:
    page.goto(f"{base}/dashboard/login")
    page.fill("input[name=token]", TEST_TOKEN)
    page.click("form.login button")
    page.wait_for_url(f"{base}/dashboard/facts")


def _shoot(page: Any, name: str, full_page: bool = True) -> None:
    """`full_page=False`: what the screen shows, as it is scrolled."""
    if SCREENSHOTS:
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SCREENSHOTS) / name), full_page=full_page)


def _shoot_whole_page(page: Any, name: str) -> None:
    """The whole page in one screen, so that the chat page's composer, which sticks to the
    bottom of the screen, sits under the conversation as it does once scrolled there."""
    if SCREENSHOTS:
        size = page.viewport_size
        height = page.evaluate("document.documentElement.scrollHeight")
        page.set_viewport_size({"width": size["width"], "height": height})
        _shoot(page, name, full_page=False)
        page.set_viewport_size(size)


def _seed_memory(services: Any) -> list[int]:
    """Facts set by hand and three summarised past conversations, their windows indexed, as
    the workers leave them: the chat row ids of the conversations, oldest first."""
    for key, value in [("home_city", "Porto"), ("dog_name", "Biscuit"), ("employer", "ACME")]:
        services.facts.set_by_operator(key, value, scope=Scope(OWNER))
    embedder = services.embedder.get()
    chats = []
    for days, summary, turns in PAST:
        when = utcnow() - timedelta(days=days)
        payload = {
            "messages": [{"role": r, "content": t} for r, t in turns[:-1]],
            "reply": turns[-1][1],
        }
        with services.db.write() as session:
            chat_id = conversations.add_finished(
                Scope(OWNER, session), services.audit, payload, when
            )
            episode = episode_row(
                audit_log_id=chat_id,
                summary=summary,
                vector=embedder.embed_batch([summary])[0],
                model=embedder.model_id,
                created_at=when,
                scope=Scope(OWNER),
            )
            episode.conversation_id = session.get(AuditLog, chat_id).subject_id
            session.add(episode)
        chats.append(chat_id)
    run_until_caught_up(services.workers["memory.passages"])
    return chats


def _chat(base: str, message: str) -> httpx.Response:
    return httpx.post(
        f"{base}/v1/chat",
        json={"message": message},
        headers={"Authorization": f"Bearer {TEST_TOKEN}"},
        timeout=30,
    )


def _event_ids(page: Any) -> list[int]:
    page.wait_for_load_state()  # after a click on a paging link: the new page, not the old
    ids = page.locator("li.event").evaluate_all("rows => rows.map(r => r.id)")
    return [int(i.removeprefix("event-")) for i in ids]


def test_timeline_reads_as_words_and_pages_both_ways(server, page, llm):
    base, services = server
    _seed_memory(services)
    llm.replies.append("Did the cooler room help you sleep?")
    assert _chat(base, "I tried the thermostat thing you suggested").status_code == 200
    llm.fail_next("status", status=503)
    assert _chat(base, "And what about naps?").status_code == 503
    services.facts.set_by_operator("home_city", "Lisbon", scope=Scope(OWNER))
    page.set_viewport_size({"width": 1280, "height": 900})
    _login(page, base)

    page.goto(f"{base}/dashboard/audit")
    everything = _event_ids(page)
    assert everything == sorted(everything, reverse=True) and len(everything) > 6
    edit = page.locator("li.event").first
    assert edit.get_attribute("data-type") == "memory.fact.user_edited"
    assert edit.locator("dl.gist").inner_text().split() == "fact home_city = Porto → Lisbon".split()
    assert not edit.locator("pre.payload").is_visible()  # the JSON is folded away
    edit.locator("details.raw summary").click()
    assert '"old_value": "Porto"' in edit.locator("pre.payload").inner_text()
    failed = page.locator('li.event[data-type="chat.failed"] dd.failure')
    assert "ProviderUnavailable (503)" in failed.inner_text()
    turn = page.locator('li.event[data-type="chat.completed"]').first
    assert turn.locator("dd.said").inner_text() == "I tried the thermostat thing you suggested"
    assert turn.locator("dd.reply").inner_text() == "Did the cooler room help you sleep?"
    assert turn.locator("dd.memory").inner_text() == "3 facts · 1 past conversation"
    turns = page.locator('li.event[data-type="chat.completed"] dd.turns').all_inner_texts()
    # the thermostat talk: two exchanges, as the chat page counts them (issue #49)
    assert turns == ["2, the whole conversation on its own page"]
    recalled = page.locator('li.event[data-type="memory.episode.recalled"] dd.summary')
    assert recalled.inner_text() == PAST[2][1]
    _shoot(page, "dashboard-audit.png")

    page.select_option("select[name=event_type]", "memory.fact.user_edited")
    page.fill("input[name=q]", "home_city")
    page.click("form.filter button")
    assert page.locator("li.event").count() == 2  # the first edit and today's

    page.goto(f"{base}/dashboard/audit?limit=3")
    assert _event_ids(page) == everything[:3]
    assert page.locator("a.newer").count() == 0
    with page.expect_navigation():
        page.locator("a.older").first.click()
    assert _event_ids(page) == everything[3:6]
    with page.expect_navigation():
        page.locator("a.older").first.click()
    assert _event_ids(page) == everything[6:9]
    with page.expect_navigation():
        page.locator("a.newer").first.click()
    assert _event_ids(page) == everything[3:6]
    with page.expect_navigation():
        page.locator("a.newer").first.click()
    assert _event_ids(page) == everything[:3] and page.locator("a.newer").count() == 0


def test_a_turn_shows_its_facts_and_excerpts(server, page, llm):
    base, services = server
    chats = _seed_memory(services)
    llm.replies.append("Did the cooler room help you sleep?")
    response = _chat(base, "I tried the thermostat thing you suggested")
    assert response.status_code == 200 and response.json()["recalled"] == [chats[2]]
    services.facts.delete("employer", scope=Scope(OWNER))
    page.set_viewport_size({"width": 1280, "height": 900})
    _login(page, base)

    page.goto(f"{base}/dashboard/audit/{response.json()['audit_id']}")
    facts = page.locator("tr.prompt-fact")
    assert facts.evaluate_all("rows => rows.map(r => r.dataset.key)") == [
        "employer",
        "dog_name",
        "home_city",
    ]  # most important first, as they were injected
    values = page.locator("tr.prompt-fact td.value").all_inner_texts()
    assert values == ["(deleted since)", "Biscuit", "Porto"]
    episode = page.locator("li.recalled-episode")
    assert episode.count() == 1
    assert episode.locator("p.summary").inner_text() == PAST[2][1]
    excerpt = episode.locator("blockquote.excerpt").first.inner_text()
    assert "caesar: Try lowering the thermostat to 65°F and track your sleep for a week." in excerpt
    turns = page.locator("div.transcript p").all_inner_texts()
    assert turns == [
        "operator: I tried the thermostat thing you suggested",
        "caesar: Did the cooler room help you sleep?",
    ]
    _shoot(page, "dashboard-turn.png")

    # the episode's link leads to the whole conversation it summarises
    episode.locator("a").first.click()
    lines = page.locator("div.transcript p").all_inner_texts()
    assert lines == [f"{'operator' if r == 'user' else 'caesar'}: {t}" for r, t in PAST[2][2]]


def test_episodes_page_searches_and_pages_both_ways(server, page):
    base, services = server
    _seed_memory(services)
    assert _chat(base, "Any tips for the trams in Lisbon?").status_code == 200
    page.set_viewport_size({"width": 1280, "height": 700})
    _login(page, base)

    page.click("header nav >> text=Episodes")
    page.wait_for_url(f"{base}/dashboard/episodes")
    summaries = page.locator("tr.episode td.summary").all_inner_texts()
    assert summaries == [p[1] for p in reversed(PAST)]
    assert page.locator("tr.episode td.recalls").all_inner_texts() == ["0", "0", "1"]
    last = page.locator("tr.episode td.last-recalled").all_inner_texts()
    assert last == ["never", "never", "today"]
    _shoot(page, "dashboard-episodes.png")

    page.fill("input[name=q]", "OPERATOR")
    page.click("form.filter button")
    assert page.locator("tr.episode").count() == 3
    page.fill("input[name=q]", "biscuit")
    page.click("form.filter button")
    assert page.locator("tr.episode td.summary").all_inner_texts() == [PAST[1][1]]

    page.goto(f"{base}/dashboard/episodes?limit=2")
    assert page.locator("tr.episode td.summary").all_inner_texts() == [PAST[2][1], PAST[1][1]]
    page.locator("a.older").click()
    assert page.locator("tr.episode td.summary").all_inner_texts() == [PAST[0][1]]
    assert page.locator("a.older").count() == 0
    page.locator("a.newer").click()
    assert page.locator("tr.episode td.summary").all_inner_texts() == [PAST[2][1], PAST[1][1]]
    page.locator("tr.episode a.conversation").first.click()
    assert "Try lowering the thermostat" in page.locator("div.transcript").inner_text()


def test_forget_removes_an_episode_for_good(server, page):
    base, services = server
    chats = _seed_memory(services)
    page.set_viewport_size({"width": 1280, "height": 700})
    _login(page, base)

    page.goto(f"{base}/dashboard/episodes")
    row = page.locator("tr.episode").filter(has_text="Biscuit")
    button = row.locator("details.forget button")
    assert not button.is_visible()  # two steps: open "Forget", then confirm
    row.locator("details.forget summary").click()
    button.click()
    page.wait_for_url(f"{base}/dashboard/episodes?forgot=*")
    assert (
        page.locator("p.notice")
        .inner_text()
        .startswith("Forgot 1 conversation: 1 chat row, 1 episode,")
    )
    assert page.locator("tr.episode td.summary").all_inner_texts() == [PAST[2][1], PAST[0][1]]
    page.fill("input[name=q]", "biscuit")
    page.click("form.filter button")
    assert page.locator("tr.episode").count() == 0
    page.goto(f"{base}/dashboard/audit/{chats[1]}")
    assert page.locator("h1").inner_text() == "404"
    # and no later turn can recall it
    response = _chat(base, "Biscuit chewed my shoes again, what should I do?")
    assert response.status_code == 200 and chats[1] not in response.json()["recalled"]


def test_deleting_a_fact_offers_to_forget_its_conversations(learning_server, page, llm):
    base, services = learning_server
    llm.reply = lambda body, protocol: "Noted."
    services.facts.set_by_operator("home_city", "Porto", scope=Scope(OWNER))
    services.facts.set_by_operator("employer", "ACME", scope=Scope(OWNER))
    chats = [
        _chat(base, message).json()["audit_id"]
        for message in (
            "My dog's name is Rex. He is a young beagle who loves long walks on the beach.",
            "My dog's name is Biscuit, not Rex: he chewed my shoes again and needs chew toys.",
            "I'm allergic to peanuts, so keep that in mind when you suggest recipes for dinner.",
        )
    ]
    assert run_until_caught_up(services.workers["memory.extract"]) == 3
    assert run_until_caught_up(services.workers["memory.summarise"]) == 3
    page.set_viewport_size({"width": 1280, "height": 700})
    _login(page, base)

    assert sorted(_keys(page)) == ["allergy", "dog_name", "employer", "home_city"]
    page.locator('tr.fact[data-key="dog_name"] form.delete button').click()
    page.wait_for_url(f"{base}/dashboard/facts?deleted=dog_name&learned_from=*")
    assert page.locator("p.notice").inner_text() == (
        "Deleted dog_name. It was learned from 2 conversations, which still say it: recall "
        "can bring it back."
    )
    assert "dog_name" not in _keys(page)
    _shoot(page, "dashboard-fact-forget.png")

    page.click("form.forget-sources button")
    page.wait_for_url(f"{base}/dashboard/facts?forgot=*")
    notice = page.locator("p.notice.forgotten")
    assert notice.inner_text().startswith(
        "Forgot 2 conversations: 2 chat rows, 2 episodes, 0 facts learned from them"
    )
    assert page.locator("form.forget-sources").count() == 0
    assert sorted(_keys(page)) == ["allergy", "employer", "home_city"]

    page.click("header nav >> text=Episodes")
    page.wait_for_url(f"{base}/dashboard/episodes")
    summaries = page.locator("tr.episode td.summary").all_inner_texts()
    assert len(summaries) == 1 and "peanuts" in summaries[0]
    page.go_back()
    notice.locator("a").click()
    assert "memory.forgotten" in page.locator("h1").inner_text()
    # and no later turn is told the deleted name
    response = _chat(base, "What is my dog called? Rex or Biscuit?")
    assert response.status_code == 200 and set(response.json()["recalled"]) <= {chats[2]}
    system = llm.requests[-1]["json"]["messages"][0]["content"]
    assert "Biscuit" not in system and "Rex" not in system


# -- the chat page (issue #25) --------------------------------------------------------------------
def _send(page: Any, message: str) -> None:
    """Type into the message box and press Enter, as the operator would."""
    box = page.get_by_role("textbox", name="Message")
    box.fill(message)
    box.press("Enter")


def test_chat_streams_the_reply_and_shows_what_was_remembered(server, page, llm):
    base, services = server
    chats = _seed_memory(services)
    thermostat = PAST[2][2][-1][1]
    reply = "Did lowering the thermostat to 65°F help you sleep through the night?"
    llm.replies.append(reply)
    # the reply's first words, then a pause before the rest: it must show while it streams
    llm.fail_next("delay", seconds=1.5, mid_stream=True, chunks=2)
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.set_viewport_size({"width": 1280, "height": 900})
    _login(page, base)

    page.click("header nav >> text=Chat")
    page.wait_for_url(f"{base}/dashboard/chat")
    assert page.locator("h1").inner_text() == "New chat"
    assert page.evaluate("document.activeElement.name") == "message"  # focus is in the box
    # the three imported conversations are listed, newest first
    assert page.locator("nav.conversations li.listed").count() == 3
    _send(page, "I tried the thermostat thing you suggested")

    said = page.locator("ol.chat-log li.msg")
    assert said.first.locator("p.text").inner_text() == "I tried the thermostat thing you suggested"
    answer = page.locator("ol.chat-log li.msg-assistant").last
    # part of the reply while the model is still answering, then all of it
    page.wait_for_function(
        "() => { const r = document.querySelector('li.msg-assistant[aria-busy=true] p.text');"
        " return r && r.textContent.length > 0; }"
    )
    partial = answer.locator("p.text").inner_text()
    assert partial and reply.startswith(partial) and partial != reply
    panel = answer.locator("details.remembered")
    panel.wait_for()
    assert answer.locator("p.text").inner_text() == reply
    assert answer.get_attribute("aria-busy") is None

    # beside the reply: the facts and the past conversation, each with why it came
    assert panel.get_attribute("open") is not None
    assert panel.locator(":scope > summary").inner_text() == (
        "Remembered for this reply: 3 facts · 1 past conversation"
    )
    keys = panel.locator("li.remembered-fact").evaluate_all("rows => rows.map(r => r.dataset.key)")
    assert sorted(keys) == ["dog_name", "employer", "home_city"]
    episode = panel.locator("li.remembered-episode")
    assert episode.count() == 1
    assert episode.locator("p.summary").inner_text() == PAST[2][1]
    assert f"caesar: {thermostat}" in episode.locator("blockquote.excerpt").inner_text()
    assert episode.locator("p.scores").inner_text().startswith("relevance 0.")
    assert "3 days before this reply" in episode.locator("p.held").inner_text()

    # the new conversation is named in the address, the heading and the list
    with services.db.read() as session:
        turn = session.scalars(
            select(AuditLog)
            .where(AuditLog.event_type == "chat.completed")
            .order_by(AuditLog.id.desc())
        ).first()
    assert turn.payload["reply"] == reply and turn.payload["memory"]["episodes_recalled"] == [
        chats[2]
    ]
    conversation_id = turn.subject_id
    page.wait_for_url(f"{base}/dashboard/chat/{conversation_id}")
    assert page.locator("h1").inner_text() == f"Conversation #{conversation_id}"
    current = page.locator("nav.conversations li.current a")
    assert current.inner_text() == "I tried the thermostat thing you suggested"
    assert page.evaluate("document.activeElement.name") == "message"  # ready for the next one
    _shoot_whole_page(page, "dashboard-chat.png")

    # the next message continues the conversation; the earlier panel folds away
    llm.replies.append("Good. Keep the room cool for another week.")
    _send(page, "Yes, I slept better. Should I keep it that way?")
    expect_panels = page.locator("details.remembered")
    page.wait_for_function("() => document.querySelectorAll('details.remembered').length === 2")
    assert expect_panels.first.get_attribute("open") is None
    assert expect_panels.last.get_attribute("open") is not None
    assert page.locator("nav.conversations li.listed").count() == 4  # not a new one
    history = llm.requests[-1]["json"]["messages"]
    assert [m["content"] for m in history[1:]] == [
        "I tried the thermostat thing you suggested",
        reply,
        "Yes, I slept better. Should I keep it that way?",
    ]
    assert page.evaluate("window.__xss") is None and dialogs == []

    # read again later: the same turns, each reply with its own panel
    page.reload()
    assert page.locator("ol.chat-log li.msg").count() == 4
    assert page.locator("details.remembered").count() == 2
    assert page.locator("details.remembered[open]").count() == 1  # the latest


def test_chat_panel_edits_a_fact_and_forgets_a_conversation(server, page, llm):
    base, services = server
    chats = _seed_memory(services)
    llm.replies.append("Did the cooler room help?")
    page.set_viewport_size({"width": 1280, "height": 900})
    _login(page, base)
    page.goto(f"{base}/dashboard/chat")
    _send(page, "I tried the thermostat thing you suggested")
    panel = page.locator("details.remembered").last
    panel.wait_for()
    here = page.url

    # edit a fact from beside the reply, with the keyboard: back on this page, saved
    fact = panel.locator('li.remembered-fact[data-key="dog_name"]')
    fact.locator("details.edit-fact summary").focus()
    page.keyboard.press("Enter")
    field = fact.get_by_label("New value for dog_name")
    field.fill("Biscuit the beagle")
    field.press("Enter")
    page.wait_for_url(f"{here}?saved=dog_name")
    assert page.locator("p.notice").inner_text().startswith("Saved dog_name.")
    value = page.locator('li.remembered-fact[data-key="dog_name"] span.value')
    assert value.inner_text() == "Biscuit the beagle"
    assert services.facts.get("dog_name", scope=Scope(OWNER)).value == "Biscuit the beagle"

    # forget the past conversation it recalled: gone for good, and the panel says so
    episode = page.locator("li.remembered-episode")
    episode.locator("details.forget summary").click()
    episode.locator("details.forget button").click()
    page.wait_for_url(f"{here}?forgot=*")
    assert page.locator("p.notice.forgotten").inner_text().startswith("Forgot 1 conversation")
    assert page.locator("li.remembered-episode").count() == 0
    assert "1 past conversation forgotten since" in page.locator("details.remembered").inner_text()
    page.goto(f"{base}/dashboard/audit/{chats[2]}")
    assert page.locator("h1").inner_text() == "404"

    # and this conversation, from its own page: back to a new chat
    page.goto(here)
    page.locator("section.talk > details.forget summary").click()
    page.locator("section.talk > details.forget button").click()
    page.wait_for_url(f"{base}/dashboard/chat?forgot=*")
    assert page.locator("h1").inner_text() == "New chat"
    assert "I tried the thermostat" not in page.locator("nav.conversations").inner_text()


def test_chat_on_a_phone_and_without_javascript(server, llm, browser):
    base, services = server
    _seed_memory(services)
    llm.replies.append("Yes: take the 28 tram early in the morning, before the crowds.")
    # a phone-sized screen, with scripts off: the form posts, the page comes back
    context = browser.new_context(
        java_script_enabled=False,
        viewport={"width": 390, "height": 844},
        device_scale_factor=2,
        is_mobile=True,
        has_touch=True,
    )
    page = context.new_page()
    _login(page, base)
    page.goto(f"{base}/dashboard/chat")
    page.get_by_role("textbox", name="Message").fill("Any tips for the trams in Lisbon?")
    page.get_by_role("button", name="Send").click()
    page.wait_for_url(f"{base}/dashboard/chat/*")
    texts = page.locator("ol.chat-log p.text").all_inner_texts()
    assert texts == [
        "Any tips for the trams in Lisbon?",
        "Yes: take the 28 tram early in the morning, before the crowds.",
    ]
    panel = page.locator("details.remembered")
    assert "past conversation" in panel.locator(":scope > summary").inner_text()
    assert PAST[0][1] in panel.locator("li.remembered-episode p.summary").all_inner_texts()
    # one column: nothing wider than the screen
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, width
    box = page.get_by_role("textbox", name="Message").bounding_box()
    assert box is not None and box["width"] > 300
    # the screen as the operator sees it, scrolled to the reply
    page.locator("li.msg-assistant").last.evaluate("e => e.scrollIntoView()")
    _shoot(page, "dashboard-chat-phone.png", full_page=False)


# -- the import page (issue 48) -----------------------------------------------------------------
def test_import_an_export_and_watch_it_learned(learning_server, page, tmp_path):
    from test_dashboard_import import chatgpt_export

    base, services = learning_server
    export = tmp_path / "conversations.json"
    export.write_bytes(
        chatgpt_export(
            (
                "conv-lisbon",
                "Trip to Lisbon",
                [
                    ("user", "My dog's name is Biscuit. I am planning a trip to Lisbon in June."),
                    ("assistant", "Lisbon in June is lovely: book the tram tours early."),
                ],
            ),
            (
                "conv-cello",
                "Cello",
                [
                    ("user", "I started learning the cello last week and I practise daily."),
                    ("assistant", "Twenty minutes a day beats two hours on a Sunday."),
                ],
            ),
        )
    )
    page.set_viewport_size({"width": 1280, "height": 800})
    _login(page, base)
    page.click("header nav >> text=Import")
    page.wait_for_url(f"{base}/dashboard/import")
    assert page.locator("p.empty").inner_text() == "No imports yet."

    page.set_input_files("form.import-form input[name=file]", str(export))
    page.click("form.import-form button")
    # the page reloads itself while the import runs, then shows its result
    notice = page.locator("section.import-job p.notice")
    notice.wait_for(timeout=30_000)
    assert notice.inner_text().startswith(
        "Imported conversations.json (ChatGPT export): 2 new conversations"
    )
    assert page.locator("ul.import-result b.imported").inner_text() == "2"
    learning = page.locator("table.imports td.learning")
    assert learning.all_inner_texts() == ["learning 0 of 2"]
    with services.db.read() as session:
        rows = session.scalars(
            select(AuditLog).where(AuditLog.subject_key.startswith("import:chatgpt:"))
        ).all()
    assert sorted(r.person_id for r in rows) == [OWNER, OWNER]
    _shoot(page, "dashboard-import.png")

    # the workers learn them; the page's script puts the fresh table in place, no reload
    for name in ("memory.extract", "memory.summarise", "memory.passages"):
        run_until_caught_up(services.workers[name])
    page.wait_for_function(
        "() => document.querySelector('table.imports td.learning').textContent === 'learned'",
        timeout=15_000,
    )
    assert page.locator("p.learning-hint").count() == 0
    assert notice.is_visible()  # the result stays as it was
