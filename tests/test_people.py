"""People (issue #23, step 1 of the household): the table and its owner on a fresh and on an
upgraded database, tokens kept only as hashes, `caesar people …`, `by_token`, and audit rows
that never hold a token. Every test runs on SQLite and on PostgreSQL."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from conftest import OWNER, TEST_TOKEN
from typer.testing import CliRunner

from caesar import audit, people
from caesar.cli.main import app
from caesar.clock import utcnow
from caesar.db import Database, migrate
from caesar.errors import InputError, NotFound
from caesar.memory.scope import Scope

LOG = audit.Audit([TEST_TOKEN])
PERSON_EVENTS = (
    audit.PERSON_ADDED,
    audit.PERSON_RENAMED,
    audit.PERSON_ROTATED,
    audit.PERSON_REMOVED,
)


def everything_stored(db: Database) -> str:
    """Every row of every table, as text."""
    with db.engine.connect() as connection:
        names = sa.inspect(connection).get_table_names()
        return "\n".join(
            str(tuple(row))
            for name in names
            for row in connection.execute(sa.text(f'SELECT * FROM "{name}"'))
        )


def person_rows(db: Database) -> list[Any]:
    with db.read() as session:
        return [
            r
            for t in PERSON_EVENTS
            for r in audit.list_events(Scope(OWNER, session), event_type=t, limit=1000)
        ]


def stored_hashes(db: Database) -> dict[str, str | None]:
    with db.engine.connect() as connection:
        rows = connection.execute(sa.text("SELECT name, token_hash FROM people")).all()
    return {str(name): digest for name, digest in rows}


# -- the migration ----------------------------------------------------------------------------
def test_a_fresh_database_has_its_owner_and_no_one_else(migrated_db):
    with migrated_db.read() as session:
        [owner] = people.everyone(session)
        assert people.owner(session).id == owner.id
    assert owner.name == people.OWNER_NAME and owner.is_owner and not owner.has_token
    assert owner.id == OWNER  # what the other tests act as (conftest.OWNER)
    assert stored_hashes(migrated_db) == {people.OWNER_NAME: None}


@pytest.fixture
def at_0007(db_url: str) -> Iterator[Database]:
    db = Database(db_url)
    migrate.upgrade(db, "0007")
    yield db
    db.dispose()


def _counts(db: Database) -> dict[str, list[int]]:
    with db.engine.connect() as connection:
        return {
            table: list(
                connection.execute(sa.text(f"SELECT id FROM {table} ORDER BY id")).scalars()
            )
            for table in ("audit_log", "conversations", "facts")
        }


def test_an_upgrade_keeps_every_row_and_creates_the_owner(at_0007):
    # written as revision 0007's schema had them (today's stores write a person's rows)
    when = utcnow()
    with at_0007.engine.begin() as c:
        for n in range(1, 5):
            c.execute(
                sa.text(
                    "INSERT INTO audit_log (id, event_type, created_at, payload) "
                    "VALUES (:n, 'chat.completed', :t, :p)"
                ),
                {"n": n, "t": when, "p": json.dumps({"reply": f"chat {n}"})},
            )
        for n in range(1, 4):
            c.execute(
                sa.text(
                    "INSERT INTO conversations (id, key, started_at, last_turn_at, touched_at, "
                    "tip_audit_id) VALUES (:n, :k, :t, :t, :t, :n)"
                ),
                {"n": n, "k": f"chat-{n}", "t": when},
            )
        c.execute(
            sa.text(
                "INSERT INTO facts (key, value, confidence, source_audit_id, created_at, "
                "updated_at) VALUES ('dog_name', 'Biscuit', 1.0, 4, :t, :t)"
            ),
            {"t": when},
        )
    before = _counts(at_0007)
    assert len(before["audit_log"]) == 4 and len(before["conversations"]) == 3
    assert "people" not in sa.inspect(at_0007.engine).get_table_names()

    migrate.upgrade(at_0007, "0008")

    assert _counts(at_0007) == before
    with at_0007.engine.connect() as c:  # as of 0008: no ORM, whose model is head's
        owners = c.execute(sa.text("SELECT name, is_owner FROM people")).all()
    assert [(name, bool(is_owner)) for name, is_owner in owners] == [(people.OWNER_NAME, True)]
    migrate.downgrade(at_0007, "0007")  # and back: the people go, the memory stays
    assert _counts(at_0007) == before
    assert "people" not in sa.inspect(at_0007.engine).get_table_names()


# -- the store --------------------------------------------------------------------------------
def test_add_keeps_only_the_hash_of_the_token_it_returns_once(migrated_db):
    with migrated_db.write() as session:
        person, token = people.add(session, LOG, "  Anna   Lee ")
        assert person.name == "Anna Lee" and not person.is_owner
    assert len(token) >= 40
    assert stored_hashes(migrated_db)["Anna Lee"] == hashlib.sha256(token.encode()).hexdigest()
    stored = everything_stored(migrated_db)
    assert token not in stored
    rows = person_rows(migrated_db)
    assert [(r.event_type, r.payload, r.subject_key) for r in rows] == [
        (audit.PERSON_ADDED, {"person_id": person.id, "name": "Anna Lee"}, "Anna Lee")
    ]


def test_by_token_knows_the_owner_a_person_and_no_one_else(migrated_db):
    with migrated_db.write() as session:
        anna, token = people.add(session, LOG, "Anna")
    with migrated_db.read() as session:
        owner = people.by_token(session, TEST_TOKEN, TEST_TOKEN)
        assert owner is not None and owner.is_owner and owner.name == people.OWNER_NAME
        found = people.by_token(session, token, TEST_TOKEN)
        assert found is not None and found.id == anna.id
        assert people.by_token(session, token, None) is not None  # no api_token: still Anna's
        assert people.by_token(session, TEST_TOKEN, None) is None  # no api_token, no owner
        assert people.by_token(session, TEST_TOKEN + "x", TEST_TOKEN) is None
        assert people.by_token(session, token[:-1], TEST_TOKEN) is None
        assert people.by_token(session, "", TEST_TOKEN) is None
        assert people.by_token(session, "", None) is None
        # a token's hash is not a token
        assert people.by_token(session, people.hash_token(token), TEST_TOKEN) is None


def test_rotate_replaces_the_token_and_refuses_the_owner(migrated_db):
    with migrated_db.write() as session:
        _anna, old = people.add(session, LOG, "Anna")
    with migrated_db.write() as session:
        _anna, new = people.rotate(session, LOG, "Anna")
    assert new != old
    with migrated_db.read() as session:
        assert people.by_token(session, old, TEST_TOKEN) is None
        found = people.by_token(session, new, TEST_TOKEN)
        assert found is not None and found.name == "Anna"
    with pytest.raises(InputError, match="owner.*api_token"), migrated_db.write() as session:
        people.rotate(session, LOG, people.OWNER_NAME)


def test_rename_refuses_a_taken_name_and_keeps_the_token(migrated_db):
    with migrated_db.write() as session:
        _anna, token = people.add(session, LOG, "Anna")
        people.add(session, LOG, "Bob")
    with pytest.raises(InputError, match="already a person named 'Bob'"):
        with migrated_db.write() as session:
            people.rename(session, LOG, "Anna", "Bob")
    with pytest.raises(InputError, match="already called"), migrated_db.write() as session:
        people.rename(session, LOG, "Anna", " Anna ")
    with pytest.raises(NotFound, match="no person named 'Zoe'.*Anna, Bob"):
        with migrated_db.write() as session:
            people.rename(session, LOG, "Zoe", "Zed")
    with migrated_db.write() as session:
        people.rename(session, LOG, "Anna", "Anna K")
        people.rename(session, LOG, people.OWNER_NAME, "Maria")  # the owner may be renamed
    with migrated_db.read() as session:
        assert [p.name for p in people.everyone(session)] == ["Maria", "Anna K", "Bob"]
        found = people.by_token(session, token, None)
        assert found is not None and found.name == "Anna K"
        assert people.owner(session).name == "Maria"


def test_add_refuses_a_taken_or_unusable_name(migrated_db):
    with migrated_db.write() as session:
        people.add(session, LOG, "Anna")
    for name, why in [
        ("Anna", "already a person named"),
        (people.OWNER_NAME, "already a person named"),
        ("   ", "must not be empty"),
        ("An\x00na", "control characters"),
        ("x" * 101, "at most 100"),
    ]:
        with pytest.raises(InputError, match=why), migrated_db.write() as session:
            people.add(session, LOG, name)
    with migrated_db.read() as session:
        assert [p.name for p in people.everyone(session)] == [people.OWNER_NAME, "Anna"]


def test_remove_takes_the_person_and_their_token_never_the_owner(migrated_db):
    with migrated_db.write() as session:
        _anna, token = people.add(session, LOG, "Anna")
    with pytest.raises(InputError, match="owner and cannot be removed"):
        with migrated_db.write() as session:
            people.remove(session, LOG, people.OWNER_NAME)
    with migrated_db.write() as session:
        gone = people.remove(session, LOG, "Anna")
    assert gone.name == "Anna"
    with migrated_db.read() as session:
        assert people.by_token(session, token, None) is None
        assert [p.name for p in people.everyone(session)] == [people.OWNER_NAME]


def test_audit_rows_say_who_and_what_never_a_token(migrated_db):
    with migrated_db.write() as session:
        anna, first = people.add(session, LOG, "Anna")
    with migrated_db.write() as session:
        people.rename(session, LOG, "Anna", "Anna K")
    with migrated_db.write() as session:
        _anna, second = people.rotate(session, LOG, "Anna K")
    hashes = [people.hash_token(t) for t in (first, second)]
    with migrated_db.write() as session:
        people.remove(session, LOG, "Anna K")
    rows = sorted(person_rows(migrated_db), key=lambda r: r.id)
    assert [(r.event_type, r.subject_id, r.payload) for r in rows] == [
        (audit.PERSON_ADDED, anna.id, {"person_id": anna.id, "name": "Anna"}),
        (audit.PERSON_RENAMED, anna.id, {"person_id": anna.id, "from": "Anna", "to": "Anna K"}),
        (audit.PERSON_ROTATED, anna.id, {"person_id": anna.id, "name": "Anna K"}),
        (audit.PERSON_REMOVED, anna.id, {"person_id": anna.id, "name": "Anna K"}),
    ]
    stored = everything_stored(migrated_db)
    assert not [s for s in (first, second, *hashes) if s in stored]


# -- `caesar people` --------------------------------------------------------------------------
@pytest.fixture
def cli(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Database]:
    """`caesar` on an upgraded database of either engine, with an api_token; the database, to
    look at."""
    monkeypatch.setenv("CAESAR_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CAESAR_DATABASE_URL", db_url)
    monkeypatch.setenv("CAESAR_API_TOKEN", TEST_TOKEN)
    result = run("db", "upgrade")
    assert result.exit_code == 0, result.output
    db = Database(db_url)
    yield db
    db.dispose()


def run(*args: str, input: str | None = None) -> Any:
    return CliRunner().invoke(app, list(args), input=input)


def _token_of(result: Any) -> dict[str, str]:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def test_cli_add_prints_the_token_once_and_json_last(cli):
    plain = run("people", "add", "Anna")
    assert plain.exit_code == 0, plain.output
    token = plain.stdout.strip().splitlines()[-1]
    assert plain.output.count(token) == 1 and "shown this once" in plain.output
    added = _token_of(run("people", "add", "Bob Smith", "--json"))
    assert added["name"] == "Bob Smith" and len(added["token"]) >= 40
    with cli.read() as session:
        for name, secret in (("Anna", token), ("Bob Smith", added["token"])):
            found = people.by_token(session, secret, TEST_TOKEN)
            assert found is not None and found.name == name
    listed = run("people", "list", "--wide")
    assert listed.exit_code == 0, listed.output
    assert "Bob Smith" in listed.output and "api_token" in listed.output
    as_json = run("people", "list", "--json")
    assert [(p["name"], p["is_owner"], p["has_token"]) for p in json.loads(as_json.stdout)] == [
        (people.OWNER_NAME, True, True),
        ("Anna", False, True),
        ("Bob Smith", False, True),
    ]
    for shown in (listed.output, as_json.output):
        assert token not in shown and added["token"] not in shown
        assert people.hash_token(token) not in shown
    assert token not in everything_stored(cli) and added["token"] not in everything_stored(cli)


def test_cli_rename_and_its_collision(cli):
    assert run("people", "add", "Anna").exit_code == 0
    assert run("people", "add", "Bob").exit_code == 0
    taken = run("people", "rename", "Anna", "Bob")
    assert taken.exit_code == 1 and "already a person named 'Bob'" in taken.output
    renamed = run("people", "rename", "Anna", "Anna K")
    assert renamed.exit_code == 0 and "renamed to Anna K" in renamed.output
    missing = run("people", "rename", "Zoe", "Zed")
    assert missing.exit_code == 1 and "no person named 'Zoe'" in missing.output


def test_cli_rotate_invalidates_the_old_token(cli):
    old = _token_of(run("people", "add", "Anna", "--json"))["token"]
    new = _token_of(run("people", "rotate", "Anna", "--json"))["token"]
    assert new != old
    with cli.read() as session:
        assert people.by_token(session, old, TEST_TOKEN) is None
        assert people.by_token(session, new, TEST_TOKEN) is not None
    owner = run("people", "rotate", people.OWNER_NAME)
    assert owner.exit_code == 1 and "api_token" in owner.output


def _own_indexes(db: Database) -> set[str]:
    """PostgreSQL: the people's own partial indexes (docs/household.md)."""
    sql = "SELECT indexname FROM pg_indexes WHERE indexname ~ '^idx_episode_.*_p[0-9]+$'"
    with db.read() as session:
        return set(session.execute(sa.text(sql)).scalars())


def test_cli_remove_asks_first_and_never_removes_the_owner(cli):
    token = _token_of(run("people", "add", "Anna", "--json"))["token"]
    if not cli.is_sqlite:  # built by `people add`, dropped by `people remove`
        with cli.read() as session:
            anna = people.named(session, "Anna").id
        assert _own_indexes(cli) == {f"idx_episode_fts_document_p{anna}"}
    declined = run("people", "remove", "Anna", input="n\n")
    assert declined.exit_code == 1 and "Remove Anna" in declined.output
    assert "Anna" in stored_hashes(cli)
    accepted = run("people", "remove", "Anna", input="y\n")
    assert accepted.exit_code == 0 and "removed Anna" in accepted.output
    assert "Anna" not in stored_hashes(cli)
    with cli.read() as session:
        assert people.by_token(session, token, TEST_TOKEN) is None
    if not cli.is_sqlite:
        assert _own_indexes(cli) == set()

    assert run("people", "add", "Bob").exit_code == 0
    unasked = run("people", "remove", "Bob", "--yes")
    assert unasked.exit_code == 0 and "Remove Bob" not in unasked.output
    owner = run("people", "remove", people.OWNER_NAME, "--yes")
    assert owner.exit_code == 1 and "is the owner and cannot be removed" in owner.output
    asked = run("people", "remove", people.OWNER_NAME)  # refused before any question
    assert asked.exit_code == 1 and "[y/N]" not in asked.output
    assert list(stored_hashes(cli)) == [people.OWNER_NAME]
    help_text = run("people", "remove", "--help").output
    assert "everything of theirs" in " ".join(help_text.split())


def test_cli_audit_rows_hold_no_token(cli):
    token = _token_of(run("people", "add", "Anna", "--json"))["token"]
    rotated = _token_of(run("people", "rotate", "Anna", "--json"))["token"]
    assert run("people", "remove", "Anna", "--yes").exit_code == 0
    rows = person_rows(cli)
    assert sorted(r.event_type for r in rows) == sorted(
        [audit.PERSON_ADDED, audit.PERSON_ROTATED, audit.PERSON_REMOVED]
    )
    logged = json.dumps([[r.payload, r.subject_key] for r in rows])
    for secret in (token, rotated, people.hash_token(token), people.hash_token(rotated)):
        assert secret not in logged
