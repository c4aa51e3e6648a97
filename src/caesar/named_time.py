"""Which span of time a message named, as the operator reads it: for the recall preview, `caesar
recall`, a turn's audit row and the dashboard's turn view. Pure.

The spans themselves are read by memory/recall/when.py, in naive UTC. A reader checking why a
conversation came wants them on their own clock: "yesterday → Tue 1 Dec 2026". The JSON
(`asked_json`) keeps the UTC bounds and adds each span's `local` rendering and the zone it was
read in, so an audit row still says what the operator meant after the zone setting changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta, tzinfo
from typing import Any

from caesar.memory.recall.question import Asked
from caesar.memory.render import local

TIME_ONLY = "the span's conversations, newest first"
GATHERS = "every matching conversation, compactly"
RECENT = "the newer conversations preferred"


def zone_name(zone: tzinfo) -> str:
    """'Europe/Berlin' for a ZoneInfo, 'UTC' for UTC."""
    return str(getattr(zone, "key", None) or zone)


def _day(moment: datetime) -> str:
    return f"{moment:%a} {moment.day} {moment:%b %Y}"


def span_local(start: datetime, end: datetime, zone: tzinfo) -> str:
    """[start, end) in naive UTC on the operator's clock: 'Tue 1 Dec 2026' for one whole local
    day, 'Mon 23 – Sun 29 Nov 2026' for whole days, with the hours for anything else ('Wed 2
    Dec 2026, 05:00–11:30'; a span that ends now, or a part of a day)."""
    first, after = local(start, zone), local(end, zone)
    midnight = first.time() == after.time() == datetime.min.time()
    if midnight and after > first:
        last = after - timedelta(days=1)
        if last.date() == first.date():
            return _day(first)
        if (first.year, first.month) == (last.year, last.month):
            return f"{first:%a} {first.day} – {_day(last)}"
        if first.year == last.year:
            return f"{first:%a} {first.day} {first:%b} – {_day(last)}"
        return f"{_day(first)} – {_day(last)}"
    if first.date() == after.date():
        return f"{_day(first)}, {first:%H:%M}–{after:%H:%M}"
    return f"{_day(first)} {first:%H:%M} – {_day(after)} {after:%H:%M}"


def named(asked: Asked) -> bool:
    """Whether the message said anything of time or gathering worth recording."""
    return bool(asked.time.spans) or asked.time.recent or asked.gathers


def asked_json(asked: Asked, zone: tzinfo) -> dict[str, Any]:
    """`Asked.as_json()` with each span's `local` rendering and the `zone` it was read in."""
    data: dict[str, Any] = asked.as_json()
    data["spans"] = [
        {**s.as_json(), "local": span_local(s.start, s.end, zone)} for s in asked.time.spans
    ]
    data["zone"] = zone_name(zone)
    return data


def _spans(data: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    spans = data.get("spans")
    return [s for s in spans if isinstance(s, Mapping)] if isinstance(spans, list) else []


def named_spans(data: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(said, local) of each span in an `asked_json` record (an audit row's: read defensively,
    an old or hand-made row may lack a field)."""
    return [
        (str(s.get("said", "")), str(s.get("local") or s.get("from", ""))) for s in _spans(data)
    ]


def span_said(data: Mapping[str, Any], when: datetime) -> str | None:
    """The words of the first span in an `asked_json` record that holds `when` (naive UTC)."""
    for span in _spans(data):
        try:
            start = datetime.fromisoformat(str(span.get("from")))
            end = datetime.fromisoformat(str(span.get("to")))
        except ValueError:
            continue
        if start <= when < end:
            return str(span.get("said", ""))
    return None


def describe(data: Mapping[str, Any]) -> list[str]:
    """What a message asked of memory besides its topic, one line each, from an `asked_json`
    record: 'named: yesterday → Tue 1 Dec 2026 (local, Europe/Berlin)', 'time only: …',
    'gathers: …', 'recently: …'. Empty when it named nothing."""
    lines = []
    spans = named_spans(data)
    if spans:
        said = ", ".join(f"{words} → {when}" for words, when in spans)
        zone = data.get("zone")
        lines.append(f"named: {said}" + (f" (local, {zone})" if zone else ""))
    if data.get("time_only"):
        lines.append(f"time only: {TIME_ONLY}")
    if data.get("gathers"):
        lines.append(f"gathers: {GATHERS}")
    if data.get("recent"):
        lines.append(f"recently: {RECENT}")
    return lines
