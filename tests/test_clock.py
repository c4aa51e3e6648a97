"""The operator's clock (clock.py): their zone, named or the host's, and a stored naive-UTC
time read on it — with real zones, across daylight-saving changes."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
import tzlocal.unix

from caesar.clock import local_now, operator_zone, utcnow

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


@pytest.mark.parametrize(
    ("utc", "zone", "local", "offset_hours"),
    [
        # Berlin springs forward at 01:00 UTC on 29 March 2026: 02:00–03:00 local never happens
        (datetime(2026, 3, 29, 0, 30), BERLIN, datetime(2026, 3, 29, 1, 30), 1),
        (datetime(2026, 3, 29, 1, 30), BERLIN, datetime(2026, 3, 29, 3, 30), 2),
        # ... and falls back at 01:00 UTC on 25 October: 02:30 local happens twice
        (datetime(2026, 10, 25, 0, 30), BERLIN, datetime(2026, 10, 25, 2, 30), 2),
        (datetime(2026, 10, 25, 1, 30), BERLIN, datetime(2026, 10, 25, 2, 30), 1),
        # New York springs forward at 07:00 UTC on 8 March 2026
        (datetime(2026, 3, 8, 6, 30), NEW_YORK, datetime(2026, 3, 8, 1, 30), -5),
        (datetime(2026, 3, 8, 7, 30), NEW_YORK, datetime(2026, 3, 8, 3, 30), -4),
        # early UTC morning is still the evening before there: "yesterday" is another day
        (datetime(2026, 1, 1, 3, 0), NEW_YORK, datetime(2025, 12, 31, 22, 0), -5),
        (datetime(2026, 1, 1, 3, 0), ZoneInfo("UTC"), datetime(2026, 1, 1, 3, 0), 0),
        (datetime(2026, 1, 1, 3, 0), UTC, datetime(2026, 1, 1, 3, 0), 0),
    ],
)
def test_local_now_reads_naive_utc_on_the_operators_clock(utc, zone, local, offset_hours):
    moment = local_now(utc, zone)
    assert moment.tzinfo is zone
    assert moment.replace(tzinfo=None) == local
    assert moment.utcoffset() == timedelta(hours=offset_hours)
    assert moment.astimezone(UTC).replace(tzinfo=None) == utc  # the same instant


def test_local_now_tells_the_two_fall_back_hours_apart():
    first = local_now(datetime(2026, 10, 25, 0, 30), BERLIN)
    second = local_now(datetime(2026, 10, 25, 1, 30), BERLIN)
    assert (first.fold, second.fold) == (0, 1)
    # Python subtracts two times of one zone by their wall clocks: spans between local times
    # are measured in UTC, never by subtracting them directly.
    assert second - first == timedelta(0)
    assert second.astimezone(UTC) - first.astimezone(UTC) == timedelta(hours=1)


def test_local_now_takes_an_aware_time_as_it_is():
    aware = datetime(2026, 7, 1, 12, 0, tzinfo=NEW_YORK)  # 16:00 UTC
    assert local_now(aware, BERLIN) == aware
    assert local_now(aware, BERLIN).hour == 18


def test_operator_zone_by_name():
    assert operator_zone("Europe/Berlin") == BERLIN
    assert operator_zone("America/New_York") == NEW_YORK
    assert operator_zone("UTC").utcoffset(utcnow()) == timedelta(0)


@pytest.fixture
def host_tz(monkeypatch):
    """Set the host's zone through $TZ, as tzlocal reads it, with tzlocal's cache cleared."""

    def set_tz(value: str) -> None:
        monkeypatch.setenv("TZ", value)
        monkeypatch.setattr(tzlocal.unix, "_cache_tz", None)

    return set_tz


def test_operator_zone_is_the_hosts_when_unset(host_tz):
    host_tz("America/New_York")
    assert operator_zone(None) == NEW_YORK
    host_tz("Europe/Berlin")
    assert operator_zone(None) == BERLIN


def test_an_unreadable_host_zone_falls_back_to_utc_and_says_so(host_tz, caplog):
    host_tz("Nowhere/Atlantis")
    with caplog.at_level(logging.WARNING, logger="caesar.clock"):
        zone = operator_zone(None)
    assert zone is UTC
    [record] = caplog.records
    assert "using UTC" in record.getMessage() and "CAESAR_TIMEZONE" in record.getMessage()
