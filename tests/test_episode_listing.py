"""list_episodes (memory/episodes/listing.py): newest first, search, keyset pages both ways, on
a real SQLite file and a real PostgreSQL."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from conftest import OWNER
from memory_helpers import add_chat

from caesar.db.models import AuditLog, EpisodeSummary
from caesar.errors import InputError
from caesar.memory.episodes.listing import Cursor, EpisodePage, list_episodes
from caesar.memory.episodes.rows import episode_row
from caesar.memory.scope import Scope

T0 = datetime(2025, 3, 1, 12, 0, 0, 250_000)


@pytest.fixture
def services(make_services, db_url):
    return make_services(database_url=db_url)


def _add(services, summary: str, created_at: datetime, recall_count: int = 0) -> int:
    chat_id = add_chat(services, f"(chat: {summary})", "ok", created_at)
    with services.db.write() as session:
        row = episode_row(
            audit_log_id=chat_id,
            summary=summary,
            vector=None,
            model="m",
            created_at=created_at,
            recall_count=recall_count,
            scope=Scope(OWNER),
        )
        row.conversation_id = session.get(AuditLog, chat_id).subject_id
        session.add(row)
        session.flush()
        return row.id


def _page(services, **kwargs) -> EpisodePage:
    with services.db.read() as session:
        return list_episodes(Scope(OWNER, session), **kwargs)


def _summaries(page: EpisodePage) -> list[str]:
    return [e.summary for e in page.items]


@pytest.fixture
def seven(services):
    """Seven episodes an hour apart (e0 oldest), two sharing e3's moment, and one empty."""
    for i in range(7):
        _add(services, f"e{i} talk", T0 + timedelta(hours=i))
    _add(services, "e3b talk", T0 + timedelta(hours=3))  # same created_at as e3, larger id
    _add(services, "", T0 + timedelta(hours=9))  # a trivial chat: never listed
    return services


def test_newest_first_without_empty_summaries(seven):
    page = _page(seven, limit=50)
    assert _summaries(page) == [
        "e6 talk",
        "e5 talk",
        "e4 talk",
        "e3b talk",
        "e3 talk",
        "e2 talk",
        "e1 talk",
        "e0 talk",
    ]
    assert (page.has_newer, page.has_older) == (False, False)
    assert page.newer is None and page.older is None


def test_pages_down_and_back_up_across_equal_timestamps(seven):
    first = _page(seven, limit=3)
    assert _summaries(first) == ["e6 talk", "e5 talk", "e4 talk"]
    assert (first.has_newer, first.has_older) == (False, True)

    second = _page(seven, before=first.older, limit=3)
    assert _summaries(second) == ["e3b talk", "e3 talk", "e2 talk"]
    assert (second.has_newer, second.has_older) == (True, True)

    third = _page(seven, before=second.older, limit=3)
    assert _summaries(third) == ["e1 talk", "e0 talk"]
    assert (third.has_newer, third.has_older) == (True, False)

    back = _page(seven, after=third.newer, limit=3)
    assert _summaries(back) == _summaries(second)
    assert (back.has_newer, back.has_older) == (True, True)
    top = _page(seven, after=back.newer, limit=3)
    assert _summaries(top) == _summaries(first)
    assert (top.has_newer, top.has_older) == (False, True)


def test_search_is_a_case_insensitive_substring_with_literal_wildcards(services):
    _add(services, "Moved to Lisbon in May", T0)
    _add(services, "Talked about lisbon trams", T0 + timedelta(hours=1))
    _add(services, "100% sure about Porto", T0 + timedelta(hours=2))
    _add(services, "dog_name is Biscuit", T0 + timedelta(hours=3))
    assert _summaries(_page(services, search="LISBON")) == [
        "Talked about lisbon trams",
        "Moved to Lisbon in May",
    ]
    assert _summaries(_page(services, search="100%")) == ["100% sure about Porto"]
    assert _summaries(_page(services, search="0%")) == ["100% sure about Porto"]
    assert _summaries(_page(services, search="g_n")) == ["dog_name is Biscuit"]
    assert _summaries(_page(services, search="g%n")) == []
    assert len(_page(services, search="  ").items) == 4  # blank: no filter

    page = _page(services, search="lisbon", limit=1)
    assert _summaries(page) == ["Talked about lisbon trams"] and page.has_older
    older = _page(services, search="lisbon", before=page.older, limit=1)
    assert _summaries(older) == ["Moved to Lisbon in May"]
    assert (older.has_newer, older.has_older) == (True, False)


def test_a_cursor_outlives_its_episode(services):
    ids = [_add(services, f"e{i}", T0 + timedelta(hours=i)) for i in range(4)]
    first = _page(services, limit=2)
    cursor = first.older
    assert cursor == Cursor(T0 + timedelta(hours=2), ids[2])
    assert Cursor.decode(cursor.encode()) == cursor
    with services.db.write() as session:
        session.delete(session.get(EpisodeSummary, ids[2]))
    below = _page(services, before=cursor, limit=2)
    assert _summaries(below) == ["e1", "e0"] and below.has_newer
    above = _page(services, after=Cursor(T0 - timedelta(days=1), 0), limit=10)
    assert _summaries(above) == ["e3", "e1", "e0"]
    assert (above.has_newer, above.has_older) == (False, False)


def test_items_carry_what_the_page_shows(services):
    episode_id = _add(services, "Lisbon", T0, recall_count=3)
    (item,) = _page(services).items
    assert (item.id, item.summary, item.recall_count, item.last_recalled_at) == (
        episode_id,
        "Lisbon",
        3,
        None,
    )
    assert item.created_at == T0 and item.audit_log_id > 0
    with services.db.read() as session:  # the conversation to forget it by
        assert item.conversation_id == session.get(AuditLog, item.audit_log_id).subject_id
    assert item.conversation_id is not None


def test_bad_arguments_are_input_errors(services):
    cursor = Cursor(T0, 1)
    with pytest.raises(InputError, match="not both"):
        _page(services, before=cursor, after=cursor)
    with pytest.raises(InputError, match="limit"):
        _page(services, limit=0)
    for bad in ("", "x", "2025-03-01T12:00:00", "2025-13-01T12:00:00_4", "nope_4"):
        with pytest.raises(InputError, match="not an episode cursor"):
            Cursor.decode(bad)
