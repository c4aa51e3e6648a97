"""Proactive runs: same pipeline as a chat (facts, recall, audit), a scheduler, and the CLI."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from conftest import OWNER
from memory_helpers import add_episode, days_ago, events, write_config
from typer.testing import CliRunner

from caesar import audit
from caesar.cli.main import app as cli_app
from caesar.clock import utcnow
from caesar.config import ProactiveSettings
from caesar.errors import NotFound, ProviderError
from caesar.memory.scope import Scope
from caesar.proactive import (
    PROACTIVE_STARTED,
    ProactiveScheduler,
    next_run,
    run_proactive,
    schedule_text,
)

SLEEP = "We discussed the operator's trouble sleeping; caesar suggested lowering the bedroom thermostat to 65°F."
RUNS = [
    {
        "name": "sleep-check",
        "prompt": "Ask how the thermostat change for sleeping worked out.",
        "interval_seconds": 3600,
    },
    {
        "name": "morning",
        "prompt": "Good morning: anything to keep in mind today?",
        "cron": "0 7 * * *",
    },
]


@pytest.fixture
def svc(make_services):
    return make_services(proactive=RUNS)


# -- schedule (pure) --------------------------------------------------------------------------
def test_next_run_for_intervals_and_cron():
    hourly = ProactiveSettings(name="h", prompt="p", interval_seconds=3600)
    morning = ProactiveSettings(name="m", prompt="p", cron="0 7 * * *")
    started = datetime(2026, 5, 21, 15, 0)
    assert next_run(hourly, None, started) == started  # never ran: due at once
    assert next_run(hourly, datetime(2026, 5, 21, 14, 30), started) == datetime(2026, 5, 21, 15, 30)
    # never ran: the first 07:00 after start, not "now" at 15:00
    assert next_run(morning, None, started) == datetime(2026, 5, 22, 7, 0)
    assert next_run(morning, datetime(2026, 5, 20, 7, 0), started) == datetime(
        2026, 5, 21, 7, 0
    )  # missed: once


def test_schedule_text():
    assert (
        schedule_text(ProactiveSettings(name="m", prompt="p", cron="0 7 * * *"))
        == "cron 0 7 * * * (UTC)"
    )
    assert (
        schedule_text(ProactiveSettings(name="h", prompt="p", interval_seconds=3600))
        == "every 3600 s"
    )


def test_settings_need_exactly_one_schedule():
    with pytest.raises(ValueError, match="exactly one"):
        ProactiveSettings(name="x", prompt="p")
    with pytest.raises(ValueError, match="invalid cron"):
        ProactiveSettings(name="x", prompt="p", cron="every day")


# -- a run ------------------------------------------------------------------------------------
def test_run_goes_through_facts_and_recall_and_is_audited(svc, llm):
    svc.facts.set_by_operator("bedroom_temperature", "72°F before the change", scope=Scope(OWNER))
    _, monday_chat = add_episode(svc, SLEEP, days_ago(3))
    llm.replies.append("How did the cooler bedroom work out?")
    result = run_proactive(svc, "sleep-check", scope=Scope(OWNER))
    assert result.reply == "How did the cooler bedroom work out?"
    system = llm.requests[-1]["json"]["messages"][0]["content"]
    assert "bedroom_temperature: 72°F" in system
    assert f", 3 days ago: {SLEEP}" in system
    assert llm.requests[-1]["json"]["messages"][-1]["content"] == RUNS[0]["prompt"]
    [row] = events(svc, audit.PROACTIVE_COMPLETED)
    assert row.id == result.audit_id and row.subject_key == "sleep-check"
    assert row.payload["proactive"] == "sleep-check" and row.payload["memory"][
        "episodes_recalled"
    ] == [monday_chat]
    [recalled] = events(svc, audit.EPISODE_RECALLED)
    assert recalled.payload["turn_audit_id"] == row.id
    # a proactive turn is not a chat: the memory workers do not learn from it as one
    assert [e.id for e in events(svc, audit.CHAT_COMPLETED)] == [monday_chat]


def test_provider_failure_is_audited_as_proactive_failed(svc, llm):
    llm.fail_next("status", status=500)
    with pytest.raises(ProviderError):
        run_proactive(svc, "morning", scope=Scope(OWNER))
    [failed] = events(svc, audit.PROACTIVE_FAILED)
    assert failed.subject_key == "morning" and failed.payload["proactive"] == "morning"


def test_unknown_name(svc):
    with pytest.raises(NotFound, match="sleep-check, morning"):
        run_proactive(svc, "evening", scope=Scope(OWNER))


# -- scheduler --------------------------------------------------------------------------------
def test_scheduler_runs_due_ones_once_per_slot(svc, llm):
    # The hour under test must not cross the 07:00 cron slot (started between 06:00 and 07:00
    # UTC it did, and both runs fired). Only forward: rows the run writes at wall-clock time
    # must not look newer than the scheduler's clock.
    start = utcnow()
    clock = {"now": start + timedelta(hours=2) if start.hour == 6 else start}
    scheduler = ProactiveScheduler(svc, clock=lambda: clock["now"])
    assert scheduler.enabled and scheduler.interval_seconds == 30.0
    llm.reply = lambda body, protocol: "checking in"
    assert scheduler.step() == 1  # the hourly run; the 07:00 one waits for its first slot
    assert scheduler.step() == 0
    clock["now"] += timedelta(minutes=30)
    assert scheduler.step() == 0
    clock["now"] += timedelta(minutes=31)
    assert scheduler.step() == 1
    names = [e.subject_key for e in events(svc, audit.PROACTIVE_COMPLETED)]
    assert names == ["sleep-check", "sleep-check"]
    assert [e.subject_key for e in events(svc, PROACTIVE_STARTED)] == ["sleep-check", "sleep-check"]


def test_two_schedulers_do_not_double_fire(svc, make_services, llm):
    other = make_services(settings=svc.settings)
    now = utcnow()
    a = ProactiveScheduler(svc, clock=lambda: now)
    b = ProactiveScheduler(other, clock=lambda: now)
    assert a.schedule()[0][2] <= now and b.schedule()[0][2] <= now  # both see it due
    assert a.step() + b.step() == 1
    assert len(events(svc, audit.PROACTIVE_COMPLETED)) == 1


def test_failed_run_waits_for_its_next_slot(svc, llm):
    now = utcnow()
    scheduler = ProactiveScheduler(svc, clock=lambda: now)
    llm.fail_next("status", status=503)
    assert scheduler.step() == 1  # attempted, failed, audited
    assert scheduler.step() == 0  # no hot retry loop
    assert len(events(svc, audit.PROACTIVE_FAILED)) == 1


def test_no_runs_configured_means_disabled(make_services):
    assert not make_services().workers["proactive"].enabled


# -- CLI --------------------------------------------------------------------------------------
def test_cli_run_and_list(svc, llm, tmp_path, monkeypatch):
    monkeypatch.setenv("CAESAR_CONFIG", str(write_config(tmp_path / "caesar.toml", svc.settings)))
    runner = CliRunner()
    llm.replies.append("Good morning! Nothing urgent.")
    result = runner.invoke(cli_app, ["proactive", "run", "morning"])
    assert result.exit_code == 0, result.output
    assert "Good morning! Nothing urgent." in result.output
    listing = runner.invoke(cli_app, ["proactive", "list"])
    assert listing.exit_code == 0, listing.output
    assert (
        "sleep-check" in listing.output
        and "morning" in listing.output
        and "never" in listing.output
    )
    unknown = runner.invoke(cli_app, ["proactive", "run", "evening"])
    assert unknown.exit_code == 1 and "no proactive run named 'evening'" in unknown.output
