"""The dashboard's import page (issue 48) over HTTP: upload a ChatGPT export or caesar's JSONL,
see it imported into the viewer's memory and learned by the workers; CSRF, a broken file, a
file with nothing in it, a file over the limit, a second upload while one runs, and a second
person who sees none of it. Real app, real database, real workers (offline routes)."""

from __future__ import annotations

import json
import re
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import OWNER, TEST_TOKEN
from fastapi.testclient import TestClient
from memory_helpers import LEARNING
from sqlalchemy import select

from caesar import audit, people
from caesar.api import create_app
from caesar.api.dashboard_import import ImportJob, ImportJobs, progress_text
from caesar.api.upload import display_name, file_suffix, size_text
from caesar.clock import utcnow
from caesar.db.models import AuditLog
from caesar.importer import BATCH_SIZE
from caesar.memory.scope import Scope
from caesar.workers import run_until_caught_up

XSS_NAME = "<img src=x onerror=alert(1)>.jsonl"
LEARNING_WORKERS = ("memory.extract", "memory.summarise", "memory.passages")


def chatgpt_export(*conversations: tuple[str, str, list[tuple[str, str]]]) -> bytes:
    """A ChatGPT conversations.json: each (id, title, [(role, text), …]) one conversation, a
    chain of messages under the export's empty root node, a day ago."""
    at = utcnow().timestamp() - 86_400
    out = []
    for conversation_id, title, turns in conversations:
        mapping: dict[str, Any] = {
            "root": {"id": "root", "message": None, "parent": None, "children": ["n0"]}
        }
        for i, (role, text) in enumerate(turns):
            node = f"n{i}"
            mapping[node] = {
                "id": node,
                "message": {
                    "id": f"m-{conversation_id}-{i}",
                    "author": {"role": role},
                    "create_time": at + 60 * i,
                    "content": {"content_type": "text", "parts": [text]},
                    "metadata": {},
                    "recipient": "all",
                },
                "parent": "root" if i == 0 else f"n{i - 1}",
                "children": [f"n{i + 1}"] if i + 1 < len(turns) else [],
            }
        out.append(
            {
                "id": conversation_id,
                "title": title,
                "create_time": at,
                "update_time": at + 60 * len(turns),
                "mapping": mapping,
                "current_node": f"n{len(turns) - 1}",
            }
        )
    return json.dumps(out).encode()


TRIP = chatgpt_export(
    (
        "conv-lisbon",
        "Trip to Lisbon",
        [
            ("user", "My dog's name is Biscuit. I am planning a trip to Lisbon in June."),
            ("assistant", "Lisbon in June is lovely: book the tram tours early."),
        ],
    )
)


def caesar_jsonl(*lines: str) -> bytes:
    return ("\n".join(lines) + "\n").encode()


def jsonl_line(user: str, reply: str) -> str:
    return json.dumps(
        {
            "created_at": "2026-01-10T09:30:00Z",
            "messages": [
                {"role": "user", "content": user},
                {"role": "assistant", "content": reply},
            ],
        }
    )


# -- helpers ------------------------------------------------------------------------------------
def _login(c: TestClient, token: str = TEST_TOKEN) -> None:
    response = c.post("/dashboard/login", data={"token": token}, follow_redirects=False)
    assert response.status_code == 303, response.text


def _csrf(html: str) -> str:
    match = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert match, "no CSRF token in the page"
    return match.group(1)


def _upload(
    c: TestClient, name: str, body: bytes, *, csrf: str | None = "page", fmt: str = ""
) -> Any:
    data = {"format": fmt}
    if csrf == "page":
        data["csrf"] = _csrf(c.get("/dashboard/import").text)
    elif csrf is not None:
        data["csrf"] = csrf
    files = {"file": (name, body, "application/octet-stream")}
    return c.post("/dashboard/import", data=data, files=files, follow_redirects=False)


def _wait(c: TestClient, timeout: float = 30) -> str:
    """The import page once no import of the viewer's runs (it stops reloading itself)."""
    deadline = time.monotonic() + timeout
    while True:
        html = c.get("/dashboard/import").text
        if 'http-equiv="refresh"' not in html:
            return html
        assert time.monotonic() < deadline, "the import did not end"
        time.sleep(0.05)


def _text(html: str, css_class: str) -> str:
    match = re.search(rf'<p class="{css_class}"[^>]*>(.*?)</p>', html, re.S)
    assert match, f"no p.{css_class} in the page"
    return " ".join(re.sub(r"<[^>]+>", " ", match.group(1)).split())


def _learning(html: str) -> list[str]:
    return re.findall(r'<td class="learning">([^<]*)</td>', html)


def _imported_rows(services: Any) -> list[AuditLog]:
    with services.db.read() as session:
        return list(
            session.scalars(
                select(AuditLog)
                .where(
                    AuditLog.event_type == audit.CHAT_COMPLETED,
                    AuditLog.subject_key.startswith("import:"),
                )
                .order_by(AuditLog.id)
            )
        )


def _import_rows(services: Any) -> list[AuditLog]:
    with services.db.read() as session:
        return list(
            session.scalars(select(AuditLog).where(AuditLog.event_type == audit.IMPORT_COMPLETED))
        )


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temporary directory uploads go to, to see that none is left behind."""
    where = tmp_path / "tmp"
    where.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(where))
    return where


@pytest.fixture
def learning(make_services: Any, private_tmp: Path) -> Iterator[tuple[Any, TestClient]]:
    """Logged in as the owner, the memory workers on their offline routes (run by hand)."""
    services = make_services(api_token=TEST_TOKEN, **LEARNING)
    with TestClient(create_app(services.settings, services, run_workers=False)) as c:
        _login(c)
        yield services, c


# -- the story ----------------------------------------------------------------------------------
def test_a_chatgpt_export_is_imported_then_learned(
    learning: tuple[Any, TestClient], private_tmp: Path
) -> None:
    services, c = learning
    page = c.get("/dashboard/import")
    assert page.status_code == 200
    assert '<a href="/dashboard/import">Import</a>' in page.text  # in the nav
    assert 'enctype="multipart/form-data"' in page.text and "No imports yet." in page.text

    sent = _upload(c, "conversations.json", TRIP)
    assert sent.status_code == 303 and sent.headers["location"] == "/dashboard/import"
    html = _wait(c)
    assert _text(html, "notice") == (
        "Imported conversations.json (ChatGPT export): 1 new conversation "
        f"( #{_import_rows(services)[0].id} import.completed )."
    )
    assert re.search(r'imported: <b class="imported">1</b>', html)
    assert re.search(r'already there: <b class="duplicates">0</b>', html)
    assert list(private_tmp.iterdir()) == []  # the upload is gone once imported

    [row] = _imported_rows(services)
    assert row.person_id == OWNER and row.subject_key == "import:chatgpt:conv-lisbon"
    assert row.payload["messages"][0]["content"].startswith("My dog's name is Biscuit.")
    [record] = _import_rows(services)
    assert record.person_id == OWNER
    assert record.payload["file"] == "conversations.json"
    assert (record.payload["first_id"], record.payload["last_id"]) == (row.id, row.id)

    assert _learning(html) == ["learning 0 of 1"]
    assert 'data-learning="1"' in html  # import.js keeps the table fresh until learned
    for name in LEARNING_WORKERS:
        run_until_caught_up(services.workers[name])
    html = c.get("/dashboard/import").text
    assert _learning(html) == ["learned"] and "data-learning" not in html
    assert 'http-equiv="refresh"' not in html

    # the same export again: already there, nothing new
    assert _upload(c, "conversations.json", TRIP).status_code == 303
    html = _wait(c)
    assert re.search(r'imported: <b class="imported">0</b>', html)
    assert re.search(r'already there: <b class="duplicates">1</b>', html)
    assert len(_imported_rows(services)) == 1
    assert _learning(html) == ["learned", "learned"]


def test_caesar_jsonl_with_a_bad_line_names_it_and_escapes_the_file_name(
    learning: tuple[Any, TestClient],
) -> None:
    services, c = learning
    body = caesar_jsonl(
        jsonl_line("I started learning the cello last week.", "Lovely: practise daily."),
        "{not json",
    )
    assert _upload(c, XSS_NAME, body).status_code == 303
    html = _wait(c)
    assert XSS_NAME not in html and "&lt;img src=x onerror=alert(1)&gt;.jsonl" in html
    assert "(caesar JSONL)" in _text(html, "notice")
    assert re.search(r'skipped: <b class="skipped">1</b> \(invalid lines\)', html)
    assert re.search(r"<li><code>line 2</code>: not JSON", html)
    [row] = _imported_rows(services)
    assert row.person_id == OWNER and str(row.subject_key).startswith("import:sha256:")
    # the recent imports table shows the name escaped too
    assert re.search(r'<td class="file">&lt;img src=x onerror=alert\(1\)&gt;.jsonl</td>', html)


def test_the_format_named_in_the_form_is_checked_against_the_file(
    learning: tuple[Any, TestClient],
) -> None:
    services, c = learning
    assert _upload(c, "conversations.json", TRIP, fmt="claude").status_code == 303
    html = _wait(c)
    error = _text(html, "error")
    assert error.startswith("Not imported: conversations.json: ") and "Claude" in error
    assert _imported_rows(services) == [] and _import_rows(services) == []
    bad = _upload(c, "conversations.json", TRIP, fmt="word")
    assert bad.status_code == 400 and "is not one of chatgpt" in bad.text


# -- refused, and nothing written -------------------------------------------------------------
def test_an_upload_without_the_csrf_token_is_refused_and_writes_nothing(
    learning: tuple[Any, TestClient], private_tmp: Path
) -> None:
    services, c = learning
    for csrf in (None, "", "0" * 64):
        refused = _upload(c, "conversations.json", TRIP, csrf=csrf)
        assert refused.status_code == 403, csrf
        assert "CSRF token" in refused.text
    assert list(private_tmp.iterdir()) == []
    # another session's token does not fit this one
    other = TestClient(c.app)
    _login(other)
    theirs = _csrf(other.get("/dashboard/import").text)
    assert _upload(c, "conversations.json", TRIP, csrf=theirs).status_code == 403
    assert _imported_rows(services) == [] and _import_rows(services) == []
    assert "No imports yet." in c.get("/dashboard/import").text
    # a client with the bearer header needs none (a browser never sends it cross-site)
    bearer = {"Authorization": f"Bearer {TEST_TOKEN}"}
    sent = TestClient(c.app).post(
        "/dashboard/import",
        files={"file": ("conversations.json", TRIP, "application/json")},
        headers=bearer,
        follow_redirects=False,
    )
    assert sent.status_code == 303
    _wait(c)
    assert len(_imported_rows(services)) == 1


def test_a_truncated_export_shows_the_error_and_writes_nothing(
    learning: tuple[Any, TestClient], private_tmp: Path
) -> None:
    services, c = learning
    assert _upload(c, "conversations.json", TRIP[: len(TRIP) // 2]).status_code == 303
    html = _wait(c)
    error = _text(html, "error")
    assert error.startswith("Not imported: conversations.json: not valid JSON")
    assert str(private_tmp) not in html  # the server's own path is not shown
    assert "Nothing of it was written to your memory." in html
    assert _imported_rows(services) == [] and _import_rows(services) == []
    assert list(private_tmp.iterdir()) == []


def test_a_file_with_nothing_said_in_it_says_so(learning: tuple[Any, TestClient]) -> None:
    services, c = learning
    silent = chatgpt_export(("conv-empty", "New chat", [("user", ""), ("assistant", "")]))
    assert _upload(c, "conversations.json", silent).status_code == 303
    html = _wait(c)
    assert _text(html, "error") == (
        "Nothing to import in conversations.json (ChatGPT export): no conversation with "
        "anything said in it."
    )
    assert re.search(r'empty: <b class="empty">1</b>', html)
    assert _imported_rows(services) == [] and _import_rows(services) == []


def test_an_upload_over_the_limit_is_refused(make_services: Any, private_tmp: Path) -> None:
    services = make_services(api_token=TEST_TOKEN, max_import_bytes=4096)
    with TestClient(create_app(services.settings, services, run_workers=False)) as c:
        _login(c)
        assert "Up to 4 KB a file." in c.get("/dashboard/import").text
        big = caesar_jsonl(*[jsonl_line("I like tea. " * 20, "Noted.")] * 30)
        assert len(big) > 4096
        refused = _upload(c, "history.jsonl", big)
        assert refused.status_code == 413
        assert "The file is over the 4 KB an upload may be (setting max_import_bytes)." in (
            refused.text
        )
        # without a Content-Length (chunked): counted as it arrives, refused all the same
        token = _csrf(c.get("/dashboard/import").text)
        boundary = "caesar-test-boundary"
        head = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="csrf"\r\n\r\n{token}\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
            'filename="history.jsonl"\r\nContent-Type: application/octet-stream\r\n\r\n'
        ).encode()

        def chunks() -> Iterator[bytes]:
            yield head
            for start in range(0, len(big), 1000):
                yield big[start : start + 1000]
            yield f"\r\n--{boundary}--\r\n".encode()

        streamed = c.post(
            "/dashboard/import",
            content=chunks(),
            headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
        )
        assert streamed.status_code == 413
        assert list(private_tmp.iterdir()) == []
        assert _imported_rows(services) == []
        # a file under the limit goes through the same route
        small = caesar_jsonl(jsonl_line("I like tea.", "Noted."))
        assert _upload(c, "history.jsonl", small).status_code == 303
        _wait(c)
        assert len(_imported_rows(services)) == 1
        # and the rest of the app keeps max_request_bytes (1 MiB by default)
        huge = c.post("/dashboard/facts", data={"key": "k", "value": "v" * (2 << 20)})
        assert huge.status_code == 413


def test_no_file_chosen_and_a_second_upload_while_one_runs(
    learning: tuple[Any, TestClient],
) -> None:
    services, c = learning
    empty = _upload(c, "", b"")
    assert empty.status_code == 400 and "Choose a file to import" in empty.text
    # the app's registry, as the page reads it: an import of the owner's is running
    jobs: ImportJobs = c.app.state.import_jobs  # type: ignore[attr-defined]
    jobs.claim(Scope(OWNER))
    try:
        page = c.get("/dashboard/import").text
        assert "One import at a time" in page and 'name="file"' not in page
        busy = _upload(c, "conversations.json", TRIP, csrf=_csrf(page))
        assert busy.status_code == 409 and "An import is running already" in busy.text
    finally:
        jobs.release(Scope(OWNER))
    assert _imported_rows(services) == []
    assert _upload(c, "conversations.json", TRIP).status_code == 303
    _wait(c)
    assert len(_imported_rows(services)) == 1


def test_another_person_sees_none_of_it_and_imports_into_their_own_memory(
    learning: tuple[Any, TestClient],
) -> None:
    services, c = learning
    with services.db.write() as session:
        anna, token = people.add(session, services.audit, "Anna")
        anna_id = anna.id
    assert _upload(c, "owners-export.json", TRIP).status_code == 303
    owners = _wait(c)
    assert "owners-export.json" in owners

    as_anna = TestClient(c.app)
    _login(as_anna, token)
    theirs = as_anna.get("/dashboard/import").text
    assert "No imports yet." in theirs and "owners-export.json" not in theirs
    assert 'class="notice"' not in theirs  # the owner's result is not hers
    # the same export into her memory: new to her, a duplicate of nothing of the owner's
    assert _upload(as_anna, "my-export.json", TRIP).status_code == 303
    theirs = _wait(as_anna)
    assert re.search(r'imported: <b class="imported">1</b>', theirs)
    assert "my-export.json" in theirs and "owners-export.json" not in theirs
    rows = _imported_rows(services)
    assert sorted(r.person_id for r in rows) == sorted([OWNER, anna_id])
    assert {r.person_id for r in _import_rows(services)} == {OWNER, anna_id}
    owners = c.get("/dashboard/import").text
    assert "my-export.json" not in owners and len(_learning(owners)) == 1


def test_a_server_stopping_mid_import_ends_it_and_deletes_the_upload(
    make_services: Any, private_tmp: Path
) -> None:
    services = make_services(api_token=TEST_TOKEN)
    lines = [jsonl_line(f"Note {i}: I like my tea strong.", "Noted.") for i in range(5000)]
    app = create_app(services.settings, services, run_workers=False)
    with TestClient(app) as c:
        _login(c)
        assert _upload(c, "history.jsonl", caesar_jsonl(*lines)).status_code == 303
        job = app.state.import_jobs.latest(Scope(OWNER))
    # the app's lifespan has ended, and the import with it, at a batch's edge
    assert job.ended and job.error is not None and job.error.startswith("The server stopped.")
    assert list(private_tmp.iterdir()) == []
    assert len(_imported_rows(services)) % BATCH_SIZE == 0 and _import_rows(services) == []


# -- the pure parts -----------------------------------------------------------------------------
def test_progress_reads_as_words() -> None:
    job = ImportJob(OWNER, "conversations.json", 3 << 20, None, utcnow())
    assert progress_text(job) == "reading conversations.json, 3 MB…"
    job.counted, job.total, job.done = True, 2000, 120
    assert progress_text(job) == "importing 120 of 2,000 conversations"
    job.found = "chatgpt"
    assert progress_text(job) == "importing 120 of 2,000 conversations (ChatGPT export)"
    job.found, job.total = "caesar", None
    assert progress_text(job) == "importing 120 lines (caesar JSONL)"


def test_upload_names_are_display_text_only() -> None:
    assert display_name("C:\\Users\\me\\conversations.json") == "conversations.json"
    assert display_name("../../etc/passwd") == "passwd"
    assert display_name("a\x00b\nc.zip") == "abc.zip"
    assert display_name("") == "upload"
    assert len(display_name("x" * 500)) == 200
    assert file_suffix("Export.ZIP") == ".zip" and file_suffix("notes") == ""
    assert file_suffix("a.j$on") == "" and file_suffix("a." + "x" * 20) == ""
    assert size_text(1 << 30) == "1 GB" and size_text(1536) == "1.5 KB"
    assert size_text(4096) == "4 KB" and size_text(100) == "100 bytes"
