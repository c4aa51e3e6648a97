"""Operator control of facts: FactsStore, GET/PUT/DELETE /v1/facts, and the CLI."""

from __future__ import annotations

import json

import pytest
from conftest import OWNER
from memory_helpers import events

from caesar import audit
from caesar.clock import utcnow
from caesar.errors import InputError, NotFound
from caesar.memory.facts.store import clean_value, normalise_key
from caesar.memory.scope import Scope


# -- keys and values ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ("dog_name", "dog_name"),
        ("Dog Name", "dog_name"),
        (" dog-name ", "dog_name"),
        ("dog's name", "dogs_name"),
        ("Dog_Name_", "dog_name"),
        ("home.city", "home_city"),
        ("a__b", "a_b"),
        ("x1", "x1"),
    ],
)
def test_normalise_key(raw, key):
    assert normalise_key(raw) == key


@pytest.mark.parametrize(
    "raw", ["", "   ", "___", "1st_car", "café", "../etc", "dog;drop", "k" * 101, "<b>"]
)
def test_normalise_key_refuses_rather_than_mangles(raw):
    with pytest.raises(InputError):
        normalise_key(raw)


def test_clean_value():
    assert clean_value("  Biscuit \n the\tbeagle ") == "Biscuit the beagle"
    for bad in ("", "  \n ", "x" * 1001, "nul\x00byte", "bell\x07"):
        with pytest.raises(InputError):
            clean_value(bad)


# -- store --------------------------------------------------------------------------------------
def test_operator_set_and_delete_are_audited(services):
    fact, first = services.facts.set_by_operator("Dog Name", "Biscuit", scope=Scope(OWNER))
    assert (fact.key, fact.value, fact.confidence, fact.source_audit_id) == (
        "dog_name",
        "Biscuit",
        1.0,
        first,
    )
    _fact, second = services.facts.set_by_operator("dog_name", "Rex", scope=Scope(OWNER))
    edited = events(services, audit.FACT_USER_EDITED)
    assert [e.id for e in edited] == [first, second]
    assert edited[1].payload == {"key": "dog_name", "old_value": "Biscuit", "value": "Rex"}
    assert edited[1].subject_key == "dog_name"
    assert services.facts.get("dog_name", scope=Scope(OWNER)).edit_count == 2

    deleted_id = services.facts.delete("dog_name", scope=Scope(OWNER))
    (deleted,) = events(services, audit.FACT_USER_DELETED)
    assert deleted.id == deleted_id and deleted.payload == {"key": "dog_name", "value": "Rex"}
    with pytest.raises(NotFound):
        services.facts.get("dog_name", scope=Scope(OWNER))
    with pytest.raises(NotFound):
        services.facts.delete("dog_name", scope=Scope(OWNER))


# -- HTTP ---------------------------------------------------------------------------------------
def test_api_put_get_delete(client):
    assert client.get("/v1/facts").json() == {"facts": []}

    created = client.put("/v1/facts/dog_name", json={"value": "Biscuit"})
    assert created.status_code == 200, created.text
    body = created.json()
    assert body["fact"]["key"] == "dog_name" and body["fact"]["confidence"] == 1.0
    assert body["fact"]["edit_count"] == 1 and body["fact"]["importance"] == pytest.approx(
        1.5, rel=1e-3
    )

    client.put("/v1/facts/home_city", json={"value": "Lisbon"})
    client.put("/v1/facts/home_city", json={"value": "Porto"})  # a second edit: weight 2.0
    facts = client.get("/v1/facts").json()["facts"]
    assert [f["key"] for f in facts] == ["home_city", "dog_name"]
    assert set(facts[0]) >= {"key", "value", "confidence", "importance", "updated_at", "edit_count"}
    assert facts[0]["value"] == "Porto" and facts[0]["edit_count"] == 2

    gone = client.delete("/v1/facts/home_city")
    assert gone.status_code == 200 and gone.json()["deleted"] == "home_city"
    assert [f["key"] for f in client.get("/v1/facts").json()["facts"]] == ["dog_name"]
    kinds = [e["event_type"] for e in client.get("/v1/audit").json()["events"]]
    assert kinds == [audit.FACT_USER_EDITED] * 3 + [audit.FACT_USER_DELETED]


def test_api_unknown_key_is_404(client):
    response = client.delete("/v1/facts/no_such_fact")
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "not_found"


@pytest.mark.parametrize(
    ("key", "body", "status"),
    [
        ("caf%C3%A9", {"value": "x"}, 400),  # non-ASCII key
        ("1st", {"value": "x"}, 400),
        ("___", {"value": "x"}, 400),
        ("k" * 150, {"value": "x"}, 400),
        ("k" * 300, {"value": "x"}, 422),
        ("dog_name", {"value": "   "}, 400),
        ("dog_name", {"value": ""}, 422),
        ("dog_name", {"value": "x" * 1001}, 422),
        ("dog_name", {"value": 42}, 422),
        ("dog_name", {"value": None}, 422),
        ("dog_name", {}, 422),
        ("dog_name", {"value": "x", "confidence": 0.1}, 422),
        ("dog_name", {"value": "nul\u0000"}, 400),
    ],
)
def test_api_rejects_bad_keys_and_values(client, key, body, status):
    response = client.put(f"/v1/facts/{key}", json=body)
    assert response.status_code == status, response.text
    assert "message" in response.json()["error"]
    assert client.get("/v1/facts").json() == {"facts": []}  # nothing half-written
    assert client.get("/v1/audit").json() == {"events": []}


def test_api_needs_the_token(make_services):
    from conftest import TEST_TOKEN
    from fastapi.testclient import TestClient

    from caesar.api import create_app

    services = make_services(api_token=TEST_TOKEN)
    with TestClient(create_app(services.settings, services, run_workers=False)) as c:
        assert c.get("/v1/facts").status_code == 401
        assert c.put("/v1/facts/dog_name", json={"value": "Biscuit"}).status_code == 401
        assert c.delete("/v1/facts/dog_name").status_code == 401
        auth = {"Authorization": f"Bearer {TEST_TOKEN}"}
        assert (
            c.put("/v1/facts/dog_name", json={"value": "Biscuit"}, headers=auth).status_code == 200
        )


# -- CLI ----------------------------------------------------------------------------------------
def test_cli_facts_set_list_delete(services, monkeypatch):
    from typer.testing import CliRunner

    from caesar.cli.main import app

    monkeypatch.setenv("CAESAR_HOME", str(services.settings.home))
    runner = CliRunner()
    result = runner.invoke(app, ["facts", "set", "Dog Name", "Biscuit"])
    assert result.exit_code == 0, result.output
    assert "dog_name = Biscuit" in result.output
    listing = runner.invoke(app, ["facts", "list"])
    assert listing.exit_code == 0 and "Biscuit" in listing.output
    assert "1.500" not in listing.output  # the operator's importance only with --wide
    wide = runner.invoke(app, ["facts", "list", "--wide"])
    assert wide.exit_code == 0 and "dog_name" in wide.output and "1.500" in wide.output
    as_json = runner.invoke(app, ["facts", "list", "--json"])
    [fact] = json.loads(as_json.output)
    assert (fact["key"], fact["value"], fact["importance"]) == ("dog_name", "Biscuit", 1.5)
    assert runner.invoke(app, ["facts", "delete", "dog_name"]).exit_code == 0
    missing = runner.invoke(app, ["facts", "delete", "dog_name"])
    assert missing.exit_code == 1 and "no fact with key" in missing.output
    assert services.facts.list_all(scope=Scope(OWNER)) == []


def test_operator_edit_racing_a_new_extracted_key_on_postgresql(pg_url):
    """The extractor inserts a key between the operator's read and insert: the unique index
    makes the insert fail, and the edit is retried as an edit instead of becoming a 500."""
    import threading
    import time

    from caesar.audit import Audit
    from caesar.config import FactsImportanceSettings
    from caesar.db import Database, migrate
    from caesar.db.models import Fact
    from caesar.memory.facts.store import FactsStore

    db = Database(pg_url)
    migrate.upgrade(db)
    store = FactsStore(db, FactsImportanceSettings(), Audit())
    result: dict[str, object] = {}
    try:
        with db.write() as other:  # the extractor's transaction, still open
            now = utcnow()
            other.add(
                Fact(
                    key="dog_name",
                    value="Biscuit",
                    confidence=0.6,
                    created_at=now,
                    updated_at=now,
                    person_id=OWNER,
                )
            )
            other.flush()

            def operator() -> None:
                result["set"] = store.set_by_operator("dog_name", "Rex", scope=Scope(OWNER))

            thread = threading.Thread(target=operator)
            thread.start()
            deadline = time.monotonic() + 10
            with db.engine.connect() as probe:  # wait until the operator's insert is blocked
                while not _blocked_on_a_lock(probe):
                    assert time.monotonic() < deadline, "the operator's insert never blocked"
                    time.sleep(0.01)
        thread.join(10)
        fact, _audit_id = result["set"]
        assert (fact.value, fact.confidence) == ("Rex", 1.0)
        (edited,) = [e for e in store.list_all(scope=Scope(OWNER)) if e.key == "dog_name"]
        assert edited.value == "Rex" and edited.edit_count == 1
    finally:
        db.dispose()


def _blocked_on_a_lock(probe) -> bool:
    from sqlalchemy import text

    waiting = probe.execute(
        text("select count(*) from pg_stat_activity where wait_event_type = 'Lock'")
    ).scalar()
    probe.rollback()  # pg_stat_activity is a snapshot per transaction: take a fresh one each time
    return bool(waiting)


def test_api_and_cli_show_a_facts_history(client, services, tmp_path, monkeypatch):
    from memory_helpers import write_config
    from typer.testing import CliRunner

    from caesar.cli.main import app

    client.put("/v1/facts/home_city", json={"value": "Lisbon"})
    client.put("/v1/facts/home_city", json={"value": "Porto"})
    body = client.get("/v1/facts/Home City/history").json()
    assert body["key"] == "home_city"
    values = [(h["by"], h["value"], h["old_value"]) for h in body["history"]]
    assert values == [("operator", "Lisbon", None), ("operator", "Porto", "Lisbon")]
    assert body["history"][0]["until"] == body["history"][1]["at"]
    assert client.get("/v1/facts/never_was/history").status_code == 404
    monkeypatch.setenv("CAESAR_CONFIG", str(write_config(tmp_path / "c.toml", services.settings)))
    result = CliRunner().invoke(app, ["facts", "history", "home_city"])
    assert result.exit_code == 0, result.output
    assert "Lisbon" in result.output and "Porto" in result.output and "user_edited" in result.output
