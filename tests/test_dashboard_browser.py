"""The dashboard in a real headless Chromium (Debian's package, driven by Playwright), against a
real uvicorn server on a loopback port: log in, see the ranking, edit, watch the fact move up."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import TEST_TOKEN

from caesar.clock import utcnow
from caesar.db.models import Fact

pytestmark = pytest.mark.xdist_group("browser")

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
XSS_VALUE = '<img src=x onerror="window.__xss = 1; alert(1)">'


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def server(make_services) -> Iterator[tuple[str, Any]]:
    import uvicorn

    from caesar.api import create_app

    services = make_services(api_token=TEST_TOKEN)
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
        yield f"http://127.0.0.1:{config.port}", services
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
def page() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/install-browser (make test does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        try:
            yield browser.new_page()
        finally:
            browser.close()


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
                Fact(key=key, value=value, confidence=confidence, created_at=when, updated_at=when)
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
