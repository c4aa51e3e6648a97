"""Where a reader sees which span of time a message named and which conversations it brought
(issue "Memory by time", item 6): the turn's audit rows, the dashboard's turn view and
timeline, the preview API and `caesar recall`. Real SQLite, the real embedder, the real Brain;
the operator lives in Berlin."""

from __future__ import annotations

import json
import re
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import anyio
import pytest
from conftest import OWNER
from fastapi.testclient import TestClient
from mcp import Client
from memory_helpers import add_episode, days_ago, events, write_config
from typer.testing import CliRunner

from caesar import audit
from caesar.api import create_app
from caesar.cli.main import app as cli_app
from caesar.db.models import AuditLog
from caesar.mcp_server import build
from caesar.memory.scope import Scope
from caesar.named_time import describe, span_local
from caesar.workers import run_until_caught_up

BERLIN = ZoneInfo("Europe/Berlin")
XSS = "<script>alert(1)</script>"
# Wednesday 2 December 2026, 11:30 in Berlin: "yesterday" is Tuesday 1 December there, from
# 23:00 UTC on the 30th to 23:00 UTC on the 1st.
NOW = datetime(2026, 12, 2, 10, 30)
SOURDOUGH = "The operator asked how often to feed a sourdough starter kept in the fridge."
DINNER = "We planned a birthday dinner for the operator's mother at an Italian place."
FIG = "The operator asked how to repot a fiddle-leaf fig without shocking it."


def _noon_in_berlin(day: date) -> datetime:
    """Noon on `day` in Berlin, as caesar stores times: naive UTC."""
    return datetime.combine(day, time(12), BERLIN).astimezone(UTC).replace(tzinfo=None)


def _shown(day: date) -> str:
    return f"{day:%a} {day.day} {day:%b %Y}"


def _text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", "", html).split())


@pytest.fixture
def berlin(make_services) -> Any:
    return make_services(timezone="Europe/Berlin")


@pytest.fixture
def client(berlin) -> Any:
    with TestClient(create_app(berlin.settings, berlin, run_workers=False)) as c:
        yield c


def _turn_row(services: Any, audit_id: int) -> dict[str, Any]:
    with services.db.read() as session:
        row = session.get(AuditLog, audit_id)
        assert row is not None
        return dict(row.payload)


# -- the spans on the operator's clock (pure) ----------------------------------------------------
@pytest.mark.parametrize(
    ("start", "end", "shown"),
    [
        # a whole local day: 23:00 UTC to 23:00 UTC in Berlin's winter
        (datetime(2026, 11, 30, 23), datetime(2026, 12, 1, 23), "Tue 1 Dec 2026"),
        # whole days within a month, across months, across years
        (datetime(2026, 11, 22, 23), datetime(2026, 11, 29, 23), "Mon 23 – Sun 29 Nov 2026"),
        (datetime(2026, 11, 29, 23), datetime(2026, 12, 6, 23), "Mon 30 Nov – Sun 6 Dec 2026"),
        (datetime(2025, 12, 28, 23), datetime(2026, 1, 4, 23), "Mon 29 Dec 2025 – Sun 4 Jan 2026"),
        # a summer month: Berlin is UTC+2 then
        (datetime(2026, 7, 31, 22), datetime(2026, 8, 31, 22), "Sat 1 – Mon 31 Aug 2026"),
        # part of a day, and a span that ends now: with the hours
        (datetime(2026, 12, 2, 4), datetime(2026, 12, 2, 10, 30), "Wed 2 Dec 2026, 05:00–11:30"),
        (
            datetime(2026, 12, 1, 17),
            datetime(2026, 12, 2, 5),
            "Tue 1 Dec 2026 18:00 – Wed 2 Dec 2026 06:00",
        ),
    ],
)
def test_a_span_is_shown_in_local_dates(start, end, shown):
    assert span_local(start, end, BERLIN) == shown


def test_what_a_message_asked_is_described_in_a_line_each():
    asked = {
        "spans": [
            {"said": "yesterday", "local": "Tue 1 Dec 2026"},
            {"said": "or the day before", "local": "Mon 30 Nov 2026"},
        ],
        "recent": False,
        "time_only": True,
        "gathers": True,
        "zone": "Europe/Berlin",
    }
    assert describe(asked) == [
        "named: yesterday → Tue 1 Dec 2026, or the day before → Mon 30 Nov 2026 "
        "(local, Europe/Berlin)",
        "time only: the span's conversations, newest first",
        "gathers: every matching conversation, compactly",
    ]
    assert describe({"spans": [], "recent": True}) == [
        "recently: the newer conversations preferred"
    ]
    # an old or hand-made record: whatever it lacks is left out, nothing raises
    assert describe({"spans": ["junk", {"from": "2026-12-01T00:00:00"}]}) == [
        "named:  → 2026-12-01T00:00:00"
    ]
    assert describe({}) == []


# -- a turn: its audit rows and the dashboard ---------------------------------------------------
def test_a_turn_naming_yesterday_records_the_span_and_the_dashboard_shows_it(berlin, client, llm):
    yesterday = datetime.now(BERLIN).date() - timedelta(days=1)
    _, held = add_episode(berlin, DINNER, _noon_in_berlin(yesterday))
    add_episode(berlin, FIG, _noon_in_berlin(yesterday - timedelta(days=4)))

    llm.replies.append("You planned your mother's birthday dinner.")
    turn = client.post("/v1/chat", json={"message": "What did we talk about yesterday?"})
    assert turn.status_code == 200, turn.text
    assert turn.json()["recalled"] == [held]
    memory = _turn_row(berlin, turn.json()["audit_id"])["memory"]
    midnight = datetime.combine(yesterday, time(0), BERLIN).astimezone(UTC).replace(tzinfo=None)
    assert memory["asked"] == {
        "spans": [
            {
                "said": "yesterday",
                "from": midnight.isoformat(),
                "to": (midnight + timedelta(days=1)).isoformat(),
                "local": _shown(yesterday),
            }
        ],
        "recent": False,
        "time_only": True,
        "gathers": False,
        "zone": "Europe/Berlin",
    }
    assert memory["episodes_in_span"] == [held]
    [recalled] = events(berlin, audit.EPISODE_RECALLED)
    assert recalled.payload["dated"] is True and recalled.subject_id == held

    page = _text(client.get(f"/dashboard/audit/{turn.json()['audit_id']}").text)
    assert f"The message named: yesterday ({_shown(yesterday)}) on the Europe/Berlin clock." in page
    assert "The past conversation below was held then." in page
    assert "It asked about that time alone" in page
    assert f"chat #{held} relevance" in page
    assert "held in the span the message named: yesterday" in page
    # the timeline says it in the turn's memory line
    timeline = _text(client.get("/dashboard/audit").text)
    assert f"1 past conversation · named: yesterday ({_shown(yesterday)})" in timeline

    # a message naming no time: nothing of it in the row, nothing on the page
    llm.replies.append("Paris.")
    plain = client.post("/v1/chat", json={"message": "What's the capital of France?"})
    memory = _turn_row(berlin, plain.json()["audit_id"])["memory"]
    assert "asked" not in memory and "episodes_in_span" not in memory
    page = _text(client.get(f"/dashboard/audit/{plain.json()['audit_id']}").text)
    assert "The message named" not in page and "held in the span" not in page


def test_a_gathering_turn_is_recorded_as_one_and_the_turn_view_says_so(berlin, client, llm):
    for back in (3, 9, 20):
        add_episode(berlin, SOURDOUGH.replace("fridge", f"fridge, take {back}"), days_ago(back))
    llm.replies.append("Three times.")
    turn = client.post(
        "/v1/chat", json={"message": "How many times did I ask about my sourdough starter?"}
    )
    assert turn.status_code == 200, turn.text
    memory = _turn_row(berlin, turn.json()["audit_id"])["memory"]
    assert memory["asked"] == {
        "spans": [],
        "recent": False,
        "time_only": False,
        "gathers": True,
        "zone": "Europe/Berlin",
    }
    assert "episodes_in_span" not in memory  # no span named: none to be in
    page = _text(client.get(f"/dashboard/audit/{turn.json()['audit_id']}").text)
    assert "It gathers across conversations" in page
    assert "The message named" not in page


def test_the_turn_view_escapes_what_a_row_says_was_named(berlin, client):
    # A row written by hand (an import, an old or tampered row): its words are data.
    held = datetime(2026, 12, 1, 12, 0)
    with berlin.db.write() as session:
        turn = berlin.audit.append(
            Scope(OWNER, session),
            audit.CHAT_COMPLETED,
            {
                "messages": [{"role": "user", "content": "what about yesterday?"}],
                "reply": "…",
                "memory": {
                    "facts_injected": 0,
                    "episodes_recalled": [7, 8],
                    "asked": {
                        "spans": [
                            {
                                "said": XSS,
                                "from": "2026-11-30T23:00:00",
                                "to": "2026-12-01T23:00:00",
                                "local": XSS,
                            }
                        ],
                        "time_only": True,
                        "zone": XSS,
                    },
                    "episodes_in_span": [7],
                },
            },
        )
        for chat, when in ((7, held), (8, held - timedelta(days=9))):
            berlin.audit.append(
                Scope(OWNER, session),
                audit.EPISODE_RECALLED,
                {
                    "turn_audit_id": turn.id,
                    "audit_log_id": chat,
                    "episode_id": chat,
                    "created_at": when.isoformat(),
                    "relevance": 0.5,
                    "score": 0.5,
                    "dated": chat == 7,
                    "summary": f"summary {chat}",
                    "excerpts": [],
                },
            )
    for url in (f"/dashboard/audit/{turn.id}", "/dashboard/audit"):
        html = client.get(url).text
        assert XSS not in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    page = _text(client.get(f"/dashboard/audit/{turn.id}").text)
    assert "held in the span the message named: &lt;script&gt;" in page
    assert "1 of the 2 past conversations below was held then." in page
    assert page.count("held in the span the message named") == 1  # not chat #8


# -- the preview API ----------------------------------------------------------------------------
def test_the_recall_preview_says_which_span_the_query_named(berlin, client):
    _, in_span = add_episode(berlin, SOURDOUGH, datetime(2026, 12, 1, 12, 0))
    _, before = add_episode(
        berlin, SOURDOUGH.replace("fridge", "cold fridge"), datetime(2026, 11, 20, 12)
    )
    add_episode(berlin, FIG, datetime(2026, 12, 1, 8, 0))

    body = {
        "query": "What did we say about my sourdough starter yesterday?",
        "now": NOW.isoformat(),
    }
    response = client.post("/v1/memory/recall", json=body)
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["asked"] == {
        "spans": [
            {
                "said": "yesterday",
                "from": "2026-11-30T23:00:00",
                "to": "2026-12-01T23:00:00",
                "local": "Tue 1 Dec 2026",
            }
        ],
        "recent": False,
        "time_only": False,
        "gathers": False,
        "zone": "Europe/Berlin",
    }
    by_chat = {e["audit_log_id"]: e for e in data["episodes"]}
    # the topic ranks within the span; the same topic a fortnight before may follow it
    assert data["episodes"][0]["audit_log_id"] == in_span
    assert by_chat[in_span]["in_span"] is True and by_chat[in_span]["dated"] is True
    if before in by_chat:
        assert by_chat[before]["in_span"] is False
    # the fields clients already read are all still there
    assert {"episode_id", "cosine", "relevance", "score", "excerpts", "summary"} <= set(
        data["episodes"][0]
    )

    plain = client.post(
        "/v1/memory/recall", json={"query": "sourdough starter", "now": NOW.isoformat()}
    ).json()
    assert plain["asked"]["spans"] == [] and not plain["asked"]["time_only"]
    assert plain["episodes"] and not any(e["in_span"] for e in plain["episodes"])


# -- caesar recall ------------------------------------------------------------------------------
def test_caesar_recall_prints_the_named_span_and_marks_the_rows_in_it(
    make_settings, make_services, tmp_path, monkeypatch
):
    settings = make_settings(timezone="Europe/Berlin")
    services = make_services(settings=settings)
    monkeypatch.setenv("CAESAR_CONFIG", str(write_config(tmp_path / "caesar.toml", settings)))
    monkeypatch.setenv("CAESAR_TIMEZONE", "Europe/Berlin")
    monkeypatch.setenv("COLUMNS", "300")  # a wide terminal: one table row per line
    from caesar.cli import common

    # the console was made at import, maybe by another test at 80 columns
    monkeypatch.setattr(common.console, "width", 300)
    _, dinner = add_episode(services, DINNER, datetime(2026, 12, 1, 18, 0))
    _, fig = add_episode(services, FIG, datetime(2026, 12, 1, 8, 0))
    markup = "The operator asked what [bold]this[/bold] does in a Rich string."
    _, marked = add_episode(services, markup, datetime(2026, 12, 1, 9, 0))
    _, sourdough = add_episode(services, SOURDOUGH, datetime(2026, 11, 20, 12, 0))
    runner = CliRunner()

    result = runner.invoke(
        cli_app, ["recall", "What did we talk about yesterday?", "--now", NOW.isoformat()]
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[:2] == [
        "named: yesterday → Tue 1 Dec 2026 (local, Europe/Berlin)",
        "time only: the span's conversations, newest first",
    ]
    rows = {chat: line for line in lines for chat in (dinner, fig) if f"#{chat} " in line}
    assert set(rows) == {dinner, fig}
    assert all(re.search(r"Tue 1 Dec 2026, yesterday\s*│\s*yesterday\s*│", rows[c]) for c in rows)
    assert f"#{sourdough} " not in result.output  # held outside the span
    [row] = [line for line in lines if f"#{marked} " in line]
    assert "[bold]this[/bold]" in row  # a summary's words, not Rich markup

    # a topic and a time, every match shown: the one held outside the span is not marked
    topic = runner.invoke(
        cli_app,
        ["recall", "What did I ask about my sourdough starter yesterday?", "--no-threshold"]
        + ["--now", NOW.isoformat()],
    )
    assert topic.exit_code == 0, topic.output
    [row] = [line for line in topic.output.splitlines() if f"#{sourdough} " in line]
    assert re.search(r"Fri 20 Nov 2026, 12 days ago\s*│\s*│", row)

    gathers = runner.invoke(
        cli_app,
        [
            "recall",
            "How many times did I ask about my sourdough starter?",
            "--now",
            NOW.isoformat(),
        ],
    )
    assert gathers.exit_code == 0, gathers.output
    assert gathers.output.splitlines()[0] == "gathers: every matching conversation, compactly"
    assert "named:" not in gathers.output and "in span" not in gathers.output
    assert f"#{sourdough} " in gathers.output


def test_caesar_recall_fits_80_columns_with_every_field_behind_wide_and_json(
    make_settings, make_services, tmp_path, monkeypatch
):
    """Issue #25: readable at 80 columns (no header cut to "cos…"), the scores' columns with
    --wide, every field as JSON with --json."""
    settings = make_settings(timezone="Europe/Berlin")
    services = make_services(settings=settings)
    monkeypatch.setenv("CAESAR_CONFIG", str(write_config(tmp_path / "caesar.toml", settings)))
    from caesar.cli import common

    monkeypatch.setattr(common.console, "width", 80)
    _, dinner = add_episode(services, DINNER, datetime(2026, 12, 1, 18, 0))
    runner = CliRunner()
    asked = ["recall", "What did we talk about yesterday?", "--now", NOW.isoformat()]

    narrow = runner.invoke(cli_app, asked)
    assert narrow.exit_code == 0, narrow.output
    assert max(len(line) for line in narrow.output.splitlines()) <= 80
    [header] = [line for line in narrow.output.splitlines() if "when" in line and "chat" in line]
    assert re.findall(r"\w[\w ]*\w", header) == ["when", "in span", "chat", "score", "summary"]
    assert "cosine" not in narrow.output and f"#{dinner}" in narrow.output

    monkeypatch.setattr(common.console, "width", 300)
    wide = runner.invoke(cli_app, [*asked, "--wide"])
    assert wide.exit_code == 0, wide.output
    assert all(h in wide.output for h in ("cosine", "keyword", "relevance", "freshness"))

    as_json = runner.invoke(cli_app, [*asked, "--json"])
    assert as_json.exit_code == 0, as_json.output
    printed = json.loads(as_json.output)
    assert [e["audit_log_id"] for e in printed["episodes"]] == [dinner]
    assert {"cosine", "relevance", "score"} <= set(printed["episodes"][0])
    assert printed["asked"]["spans"]


def test_conversations_list_fits_80_columns(make_services, monkeypatch):
    services = make_services()
    monkeypatch.setenv("CAESAR_HOME", str(services.settings.home))
    from caesar.cli import common

    monkeypatch.setattr(common.console, "width", 80)
    _, dinner = add_episode(services, DINNER + " " + FIG, datetime(2026, 12, 1, 18, 0))
    runner = CliRunner()
    narrow = runner.invoke(cli_app, ["conversations", "list"])
    assert narrow.exit_code == 0, narrow.output
    assert max(len(line) for line in narrow.output.splitlines()) <= 80
    assert "key" not in narrow.output.splitlines()[1] and "turns" in narrow.output
    monkeypatch.setattr(common.console, "width", 300)
    wide = runner.invoke(cli_app, ["conversations", "list", "--wide"])
    assert "started (UTC)" in wide.output
    [listed] = json.loads(runner.invoke(cli_app, ["conversations", "list", "--json"]).output)
    assert listed["turns"] >= 1 and listed["started_at"].startswith("2026-12-01")


# -- MCP ----------------------------------------------------------------------------------------
def test_the_mcp_recall_tool_says_which_span_the_text_named(berlin):
    yesterday = datetime.now(BERLIN).date() - timedelta(days=1)
    _, held = add_episode(berlin, DINNER, _noon_in_berlin(yesterday))

    async def ask() -> dict[str, Any]:
        async with Client(
            build(berlin, transport="stdio", scope=Scope(OWNER)), read_timeout_seconds=30
        ) as client:
            result = await client.call_tool("recall", {"text": "What did we talk about yesterday?"})
            assert not result.is_error, result.content
            return json.loads(result.content[0].text)  # type: ignore[no-any-return]

    found = anyio.run(ask)
    [span] = found["asked"]["spans"]
    assert (span["said"], span["local"]) == ("yesterday", _shown(yesterday))
    assert found["asked"]["time_only"] and found["asked"]["zone"] == "Europe/Berlin"
    assert [(e["audit_log_id"], e["in_span"]) for e in found["episodes"]] == [(held, True)]


# -- a conversation the summariser has not reached yet ---------------------------------------------
SISTER = "My sister Ana visits next week; which museum should we see on the rainy day?"


def test_what_did_we_talk_about_today_brings_a_chat_not_summarised_yet(make_services, llm):
    # The summariser waits for a conversation to go quiet (5 minutes): a chat from a minute
    # ago has no episode, yet it is what "today" holds. Asked in a new conversation, it comes
    # by its turns, its line says it is not summarised yet, and nothing counts it as an
    # episode's recall; asked within that conversation, it is the history, not a memory.
    services = make_services(
        timezone="Europe/Berlin", memory={"episodes_summarise": {"enabled": True}}
    )
    with TestClient(create_app(services.settings, services, run_workers=False)) as client:
        llm.replies.append("The Natural History Museum has a lot to see indoors.")
        first = client.post("/v1/chat", json={"message": SISTER})
        assert first.status_code == 200, first.text
        chat_id = first.json()["audit_id"]
        llm.replies.append("Your sister's visit and a museum for the rainy day.")
        today = client.post("/v1/chat", json={"message": "What did we talk about today?"})
        assert today.json()["recalled"] == [chat_id]
        system = llm.requests[-1]["json"]["messages"][0]["content"]
        # its line says so; its turns follow, from the first
        assert "today: (not summarised yet)\n  operator: My sister Ana visits next week" in system
        assert "caesar: The Natural History Museum has a lot to see indoors." in system
        memory = _turn_row(services, today.json()["audit_id"])["memory"]
        assert memory["episodes_in_span"] == [chat_id]
        [row] = events(services, audit.EPISODE_RECALLED)
        assert row.subject_id == chat_id
        assert row.payload["pending"] is True and row.payload["episode_id"] == 0
        page = _text(client.get(f"/dashboard/audit/{today.json()['audit_id']}").text)
        assert (
            f"chat #{chat_id} not summarised yet: brought by its date alone · held in the span "
            "the message named: today" in page
        )
        events_page = _text(client.get(f"/dashboard/audit/{row.id}").text)
        assert f"none yet (not summarised), the conversation of chat #{chat_id}" in events_page

        # the preview: both chats of today (that question's own too), each with its turns
        found = client.post("/v1/memory/recall", json={"query": "What did we talk about today?"})
        shown = {e["audit_log_id"]: e for e in found.json()["episodes"]}
        assert set(shown) == {chat_id, today.json()["audit_id"]}
        assert all(e["pending"] and e["episode_id"] == 0 for e in shown.values())
        said = [t["text"] for x in shown[chat_id]["excerpts"] for t in x["turns"]]
        assert said[0] == SISTER

        # within the conversation itself: it is the history already
        llm.replies.append("Just this.")
        history = [
            {"role": "user", "content": SISTER},
            {
                "role": "assistant",
                "content": "The Natural History Museum has a lot to see indoors.",
            },
        ]
        own = client.post(
            "/v1/chat", json={"message": "What did we talk about today?", "history": history}
        )
        assert own.status_code == 200, own.text
        assert chat_id not in own.json()["recalled"]

        # a temporary chat is never remembered, not even before the summariser skips it
        llm.replies.append("Noted, and forgotten.")
        secret = client.post(
            "/v1/chat", json={"message": "My PIN is 4821, keep it quiet.", "temporary": True}
        )
        llm.replies.append("Your sister's visit.")
        again = client.post("/v1/chat", json={"message": "What did we talk about today?"})
        assert secret.json()["audit_id"] not in again.json()["recalled"]
        assert "4821" not in llm.requests[-1]["json"]["messages"][0]["content"]

        # "yesterday" holds none of it
        llm.replies.append("Nothing I remember.")
        other = client.post("/v1/chat", json={"message": "What did we talk about yesterday?"})
        assert other.json()["recalled"] == []

        # once summarised, the episode comes instead, counted as recalled
        worker = services.workers["memory.summarise"]
        said = iter(f"The operator planned a museum day, part {k}." for k in range(100))
        llm.reply = lambda request, protocol: next(said)
        assert run_until_caught_up(worker) >= 4
        before = max(r.id for r in events(services, audit.EPISODE_RECALLED))
        llm.replies.append("Your sister's museum day.")
        later = client.post("/v1/chat", json={"message": "What did we talk about today?"})
        recalled = [r for r in events(services, audit.EPISODE_RECALLED) if r.id > before]
        assert own.json()["audit_id"] in later.json()["recalled"]  # the conversation's tip
        assert recalled and not any(r.payload["pending"] for r in recalled)
        assert all(r.payload["episode_id"] > 0 for r in recalled)
