"""Time in one place: naive UTC everywhere, so SQLite and PostgreSQL agree.

What the operator means by "yesterday" or "this morning" is read on their own clock: the zone
of the `timezone` setting, or the host's (`operator_zone`), applied to a stored naive-UTC time
by `local_now`. Nothing local is ever stored.
"""

from __future__ import annotations

import difflib
import logging
import warnings
from datetime import UTC, datetime, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

log = logging.getLogger(__name__)


def utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def to_naive_utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        return value
    return value.astimezone(UTC).replace(tzinfo=None)


def local_now(now_utc_naive: datetime, zone: tzinfo) -> datetime:
    """The aware time in `zone` for a naive-UTC time (as caesar stores them); an aware one is
    converted as it is."""
    return to_naive_utc(now_utc_naive).replace(tzinfo=UTC).astimezone(zone)


def check_zone_name(name: str) -> None:
    """Raise ValueError naming `name`, with the closest IANA zone, unless it is one."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        pass
    else:
        return
    close = difflib.get_close_matches(name, sorted(available_timezones()), n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ValueError(
        f"timezone {name!r} is not an IANA time zone name such as 'Europe/Berlin'{hint}; "
        "leave it unset for the host's zone"
    )


def operator_zone(name: str | None) -> tzinfo:
    """The operator's zone: ZoneInfo(`name`), or, for None, the host's zone (via tzlocal:
    $TZ, /etc/localtime, the registry on Windows; read once per process). A host whose zone
    cannot be read gets UTC; either way a warning names the setting that fixes it."""
    if name is not None:
        return ZoneInfo(name)
    import tzlocal

    fix = "set `timezone` (e.g. CAESAR_TIMEZONE=Europe/Berlin) to the operator's zone"
    # tzlocal reports a guess (no configuration: UTC; a name that disagrees with the clock) as
    # a Python warning: make it a log line that says what to do.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            zone: tzinfo = tzlocal.get_localzone()
        except Exception as exc:  # e.g. TZ=PST8PDT, which tzlocal cannot name
            log.warning("cannot read the host's time zone (%s); using UTC — %s", exc, fix)
            return UTC
    for warning in caught:
        log.warning("host time zone: %s — %s", warning.message, fix)
    return zone
