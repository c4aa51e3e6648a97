"""Crash safety (issue 7 §1): kill -9 a memory worker at random points of a 1,000-chat backfill,
restart it until it catches up, and every chat still has exactly one outcome.

The worker processes are real (forked by tests/crashkit.py's driver, which imports caesar once
so a restart costs milliseconds); a quarter of the kills come from outside after a random delay (they
land anywhere: in the LLM call, the embedding, a transaction), the rest from inside, just
before a random SQL statement (inside the write transaction, after the cursor moved), just
before a COMMIT, or just after one (between two transactions). The invariants are checked after every kill, not only at the end. The provider fails
now and then all through the run, so "failed" outcomes are crash-tested too.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import crashkit
import exactly_once
import pytest
from conftest import PROVIDER_KEY

from caesar.config import Settings

CHATS = 1000
heavy = pytest.mark.xdist_group("reliability-heavy")


def _prepare(tmp_path: Path, database_url: str, llm, make_services, chats: int = CHATS, **extra):
    settings = crashkit.settings_dict(
        tmp_path / "home", database_url, llm.base_url, PROVIDER_KEY, **extra
    )
    services = make_services(settings=Settings(**settings))
    llm.reply = exactly_once.MemoryReplies()
    ids = exactly_once.backfill(services, chats)
    assert len(ids) == chats
    return settings, services, ids


def _crash_config(settings, worker: str, tmp_path: Path, **overrides) -> dict:
    config = {
        "settings": settings,
        "worker": worker,
        "seed": 7,
        "max_kills": 16,
        "max_statements": 120,
        "timer_range": [0.15, 0.6],
        "site_log": str(tmp_path / "kill-sites.txt"),
    }
    config.update(overrides)
    return config


# PostgreSQL runs shorter backfills: the engine-independent part is covered on SQLite, what is
# new there is a client dying mid-transaction on a server that outlives it.
ENGINES = pytest.mark.parametrize(
    ("engine", "chats", "kills"), [("sqlite", CHATS, 16), ("postgresql", 200, 8)]
)


def _database_url(engine: str, tmp_path: Path, request) -> str:
    if engine == "sqlite":
        return f"sqlite:///{tmp_path / 'caesar.db'}"
    return request.getfixturevalue("pg_url")


@heavy
@ENGINES
def test_summarise_exactly_once_through_kill_9(
    engine, chats, kills, tmp_path, llm, make_services, request
):
    settings, services, ids = _prepare(
        tmp_path,
        _database_url(engine, tmp_path, request),
        llm,
        make_services,
        chats,
        memory={"episodes_summarise": {"batch_size": 8}},
    )
    config = _crash_config(
        settings,
        "memory.summarise",
        tmp_path,
        stop_after_kills=True,
        seed=7 if engine == "sqlite" else 17,
        max_kills=kills,
    )
    with crashkit.FlakyProvider(llm) as flaky:
        result = crashkit.driver_result(
            crashkit.start_driver("crash", config, tmp_path), timeout=240
        )
        # The last restart is the real command an operator runs.
        cli = subprocess.run(
            [str(Path(sys.executable).parent / "caesar"), "worker", "--once", "memory.summarise"],
            env=crashkit.settings_env(settings),
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
    assert cli.returncode == 0, cli.stderr
    assert "memory.summarise:" in cli.stdout

    assert result["violations"] == []
    problems, tally = exactly_once.check_summarise(services.db)
    assert problems == []
    assert tally.get("pending", 0) == 0
    assert tally["summarised"] + tally["skipped"] + tally["failed"] == chats
    # Every kind of outcome happened, and the kills really happened where it hurts.
    assert tally["summarised"] > 0 and tally["skipped"] > 0 and tally["failed"] > 0
    assert result["kills"] == config["max_kills"]
    assert result["from_inside"] > 0 and result["by_timer"] > 0
    sites = dict(result["kill_sites"])
    # Kills landed at several different points of the write path (which ones depends on how
    # the timer kills interleave on a busy machine, so no single site is required).
    assert len(sites) >= 2, sites
    print(
        f"\nsummarise ({engine}): {result['kills']} kills survived, {chats} chats checked, {tally}, "
        f"{flaky.injected} provider faults, kill sites {sites}, seconds {result['seconds']}"
    )


@heavy
@ENGINES
def test_extract_no_half_applied_batch_through_kill_9(
    engine, chats, kills, tmp_path, llm, make_services, request
):
    settings, services, ids = _prepare(
        tmp_path,
        _database_url(engine, tmp_path, request),
        llm,
        make_services,
        chats,
        memory={"facts_extract": {"batch_size": 8}},
    )
    config = _crash_config(
        settings, "memory.extract", tmp_path, seed=11 if engine == "sqlite" else 13, max_kills=kills
    )
    with crashkit.FlakyProvider(llm) as flaky:
        result = crashkit.driver_result(
            crashkit.start_driver("crash", config, tmp_path), timeout=240
        )

    assert result["violations"] == []
    problems, tally = exactly_once.check_extract(services.db)
    assert problems == []
    assert tally.get("pending", 0) == 0
    assert tally["learned"] + tally["nothing"] + tally["failed"] == chats
    assert tally["learned"] > 0 and tally["nothing"] > 0 and tally["failed"] > 0
    assert tally["facts"] == 3 * tally["learned"]
    assert result["kills"] == kills
    sites = dict(result["kill_sites"])
    print(
        f"\nextract ({engine}): {result['kills']} kills survived, {chats} chats checked, {tally}, "
        f"{flaky.injected} provider faults, kill sites {sites}, seconds {result['seconds']}"
    )
