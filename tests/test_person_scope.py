"""Each person's memory is their own (issue #23, step 3): a token is a person, the API and the
OpenAI endpoint read and write the memory of the person whose token it is, another person's
object is 404, every audit row records who acted, workers learn from a person's chat into that
person's memory, and `caesar --person NAME` is that person on the command line. On SQLite and
PostgreSQL, through the real app, the real SDK client and the real workers.

The owner here is the `api_token` (TEST_TOKEN); Anna is a person added with `caesar.people`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from conftest import OWNER, TEST_TOKEN, sqlite_fts_tables
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from caesar import people
from caesar.api import create_app
from caesar.cli.main import app as cli_app
from caesar.db import Database
from caesar.memory.engine.postgres import FTS_CONFIG
from caesar.memory.scope import Scope
from caesar.workers import run_until_caught_up
from tests.memory_helpers import learning_household

OWNER_SAYS = "My dog is called Biscuit and I live in Lisbon."
ANNA_SAYS = "My dog is called Rex and I live in Porto."


@pytest.fixture
def household(make_services: Any, db_url: str) -> Iterator[tuple[Any, TestClient, str, int]]:
    """(services, client, Anna's token, Anna's id): a token-guarded app on either engine."""
    services = make_services(
        api_token=TEST_TOKEN,
        database_url=db_url,
        memory={"facts_extract": {"enabled": True}},
    )
    with services.db.write() as session:
        anna, token = people.add(session, services.audit, "Anna")
        anna_id = anna.id
    with TestClient(create_app(services.settings, services, run_workers=False)) as client:
        yield services, client, token, anna_id


def as_(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def chat(client: TestClient, token: str, message: str, **extra: Any) -> dict[str, Any]:
    reply = client.post("/v1/chat", json={"message": message, **extra}, headers=as_(token))
    assert reply.status_code == 200, reply.text
    return reply.json()  # type: ignore[no-any-return]


def rows_by_person(db: Database) -> dict[int, list[str]]:
    with db.engine.connect() as c:
        rows = c.execute(sa.text("SELECT person_id, event_type FROM audit_log ORDER BY id"))
        out: dict[int, list[str]] = {}
        for person, event in rows:
            out.setdefault(int(person), []).append(str(event))
        return out


def test_facts_are_each_persons_own_with_the_same_key(household):
    _services, client, anna, _anna_id = household
    owner = TEST_TOKEN
    assert client.put(
        "/v1/facts/dog_name", json={"value": "Biscuit"}, headers=as_(owner)
    ).is_success
    assert client.put("/v1/facts/dog_name", json={"value": "Rex"}, headers=as_(anna)).is_success

    def facts(token: str) -> dict[str, str]:
        listed = client.get("/v1/facts", headers=as_(token)).json()["facts"]
        return {f["key"]: f["value"] for f in listed}

    assert facts(owner) == {"dog_name": "Biscuit"}
    assert facts(anna) == {"dog_name": "Rex"}
    history = client.get("/v1/facts/dog_name/history", headers=as_(anna)).json()["history"]
    assert [h["value"] for h in history] == ["Rex"]
    assert client.delete("/v1/facts/dog_name", headers=as_(anna)).is_success
    assert facts(anna) == {} and facts(owner) == {"dog_name": "Biscuit"}
    assert client.delete("/v1/facts/dog_name", headers=as_(anna)).status_code == 404


def test_a_turn_sees_its_persons_memory_alone_and_records_who_acted(household, llm):
    services, client, anna, anna_id = household
    client.put("/v1/facts/home_city", json={"value": "Lisbon"}, headers=as_(TEST_TOKEN))
    client.put("/v1/facts/home_city", json={"value": "Porto"}, headers=as_(anna))
    chat(client, anna, "Where do I live?")
    prompt = llm.requests[-1]["json"]["messages"][0]["content"]
    assert "Porto" in prompt and "Lisbon" not in prompt
    chat(client, TEST_TOKEN, "Where do I live?")
    prompt = llm.requests[-1]["json"]["messages"][0]["content"]
    assert "Lisbon" in prompt and "Porto" not in prompt
    by_person = rows_by_person(services.db)
    assert by_person[anna_id].count("chat.completed") == 1
    assert by_person[OWNER].count("chat.completed") == 1
    # the audit listing is the caller's rows
    events = client.get("/v1/audit", headers=as_(anna)).json()["events"]
    assert {e["event_type"] for e in events} == {"memory.fact.user_edited", "chat.completed"}
    assert all("Lisbon" not in str(e["payload"]) for e in events)


def test_another_persons_conversation_is_404_and_their_forget_leaves_it(household):
    _services, client, anna, _anna_id = household
    mine = chat(client, TEST_TOKEN, OWNER_SAYS, conversation_id="kitchen")
    hers = chat(client, anna, ANNA_SAYS, conversation_id="kitchen")  # the same key, hers

    def listed(token: str) -> list[int]:
        found = client.get("/v1/conversations", headers=as_(token)).json()["conversations"]
        return [c["id"] for c in found]

    [my_id], [her_id] = listed(TEST_TOKEN), listed(anna)
    assert my_id != her_id and mine["conversation_id"] == hers["conversation_id"] == "kitchen"
    assert client.get(f"/v1/conversations/{my_id}", headers=as_(anna)).status_code == 404
    assert client.delete(f"/v1/conversations/{my_id}", headers=as_(anna)).status_code == 404
    gone = client.post(
        "/v1/conversations/forget", json={"conversation_ids": [my_id]}, headers=as_(anna)
    )
    assert gone.status_code == 404
    # a forget by filter reaches the caller's conversations alone
    forgot = client.post(
        "/v1/conversations/forget", json={"matching": "my dog"}, headers=as_(anna)
    ).json()
    assert forgot["conversation_ids"] == [her_id]
    assert listed(anna) == [] and listed(TEST_TOKEN) == [my_id]
    turns = client.get(f"/v1/conversations/{my_id}", headers=as_(TEST_TOKEN)).json()["messages"]
    assert turns[0]["content"] == OWNER_SAYS


def test_a_worker_learns_from_a_persons_chat_into_their_memory(household, llm):
    services, client, anna, anna_id = household
    chat(client, anna, ANNA_SAYS)
    llm.replies.append('{"facts": [{"key": "dog_name", "value": "Rex", "confidence": 0.9}]}')
    run_until_caught_up(services.workers["memory.extract"])
    assert services.facts.list_all(scope=Scope(OWNER)) == []
    [fact] = services.facts.list_all(scope=Scope(anna_id))
    assert (fact.key, fact.value) == ("dog_name", "Rex")
    assert client.get("/v1/facts", headers=as_(TEST_TOKEN)).json()["facts"] == []
    assert "memory.fact.extracted" in rows_by_person(services.db)[anna_id]


def test_the_openai_endpoint_is_the_callers_memory(household, llm):
    from openai import OpenAI

    _services, client, anna, _anna_id = household
    client.put("/v1/facts/pet", json={"value": "a cat named Mochi"}, headers=as_(TEST_TOKEN))
    sdk = OpenAI(base_url="http://testserver/v1", api_key=anna, http_client=client)
    sdk.chat.completions.create(
        model="caesar", messages=[{"role": "user", "content": "What pet do I have?"}]
    )
    prompt = llm.requests[-1]["json"]["messages"][0]["content"]
    assert "Mochi" not in prompt
    listed = client.get("/v1/conversations", headers=as_(anna)).json()["conversations"]
    assert len(listed) == 1
    assert client.get("/v1/conversations", headers=as_(TEST_TOKEN)).json()["conversations"] == []


def test_a_wrong_token_is_refused_and_a_persons_token_is_theirs(household):
    _services, client, anna, _anna_id = household
    assert client.get("/v1/facts", headers=as_("not-a-token")).status_code == 401
    assert client.get("/v1/facts", headers=as_(anna)).status_code == 200


def test_the_dashboard_is_the_memory_of_whoever_logged_in(household):
    services, client, anna, _anna_id = household
    client.put("/v1/facts/dog_name", json={"value": "Marmaduke"}, headers=as_(TEST_TOKEN))
    client.put("/v1/facts/dog_name", json={"value": "Rex"}, headers=as_(anna))
    by_bearer = client.get("/dashboard/facts", headers=as_(anna)).text
    assert "Rex" in by_bearer and "Marmaduke" not in by_bearer
    login = client.post("/dashboard/login", data={"token": anna}, follow_redirects=False)
    assert login.status_code == 303
    page = client.get("/dashboard/facts")
    assert page.status_code == 200 and "Rex" in page.text and "Marmaduke" not in page.text
    mine = client.get("/dashboard/audit").text
    assert "Marmaduke" not in mine
    # rotating her token ends her sessions
    with services.db.write() as session:
        people.rotate(session, services.audit, "Anna")
    after = client.get("/dashboard/facts", follow_redirects=False)
    assert after.status_code == 303 and after.headers["location"].startswith("/dashboard/login")


def test_a_removed_persons_token_opens_nothing(household):
    services, client, anna, _anna_id = household
    with services.db.write() as session:
        people.remove(session, services.audit, "Anna")
    assert client.get("/v1/facts", headers=as_(anna)).status_code == 401


# -- the command line: every command as another person is test_isolation_cli.py's matrix; here,
# `--person` itself ------------------------------------------------------------------------------
@pytest.fixture
def cli(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Database]:
    monkeypatch.setenv("CAESAR_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CAESAR_DATABASE_URL", db_url)
    assert run("db", "upgrade").exit_code == 0
    assert run("people", "add", "Anna").exit_code == 0
    db = Database(db_url)
    yield db
    db.dispose()


def run(*args: str) -> Any:
    return CliRunner().invoke(cli_app, list(args))


def test_cli_person_option_reads_and_writes_that_persons_memory(cli):
    assert run("--person", "Anna", "facts", "set", "dog_name", "Rex").exit_code == 0
    assert run("facts", "set", "dog_name", "Biscuit").exit_code == 0
    anna = run("--person", "Anna", "facts", "list", "--json")
    owner = run("facts", "list", "--json")
    assert '"Rex"' in anna.stdout and "Biscuit" not in anna.stdout
    assert '"Biscuit"' in owner.stdout and "Rex" not in owner.stdout
    nobody = run("--person", "Nobody", "facts", "list")
    assert nobody.exit_code == 1 and "no person named 'Nobody'" in nobody.output


# -- removing a person with their memory -------------------------------------------------------
@pytest.fixture
def learning(make_services: Any, db_url: str) -> Iterator[tuple[Any, TestClient, str, int]]:
    """`household` with the offline memory routes: chats become facts, episodes and windows."""
    services, anna_id, token = learning_household(make_services, db_url, "Anna")
    with TestClient(create_app(services.settings, services, run_workers=False)) as client:
        yield services, client, token, anna_id


def _learn(services: Any) -> None:
    for name in ("memory.extract", "memory.summarise", "memory.passages"):
        run_until_caught_up(services.workers[name])


def _keyword_hits(db: Database, word: str) -> int:
    if not db.is_sqlite:
        sql = f"SELECT count(*) FROM episode_fts WHERE document @@ plainto_tsquery('{FTS_CONFIG}', :w)"
        with db.engine.connect() as c:
            return int(c.execute(sa.text(sql), {"w": word}).scalar() or 0)
    with db.engine.connect() as c:
        return sum(
            int(
                c.execute(
                    sa.text(f"SELECT count(*) FROM {t} WHERE {t} MATCH :w"), {"w": word}
                ).scalar()
            )
            for t in sqlite_fts_tables(db)
        )


def test_removing_a_person_forgets_everything_of_theirs_and_nothing_else(learning):
    from caesar.memory.person_removal import remove_person

    services, client, anna, anna_id = learning
    chat(client, TEST_TOKEN, "I went kayaking on the lake with my sister Maya.")
    chat(client, anna, "I went kayaking on the river with my brother Tomas.")
    client.put("/v1/facts/favourite_colour", json={"value": "teal"}, headers=as_(anna))
    _learn(services)
    assert _keyword_hits(services.db, "Tomas") >= 1
    before = rows_by_person(services.db)
    assert before[anna_id] and before[OWNER]
    owner_episodes = services.episodes.preview("kayaking", scope=Scope(OWNER))
    assert owner_episodes

    removed = remove_person(services, "Anna")

    assert removed.conversations == 1 and removed.facts >= 1
    with services.db.engine.connect() as c:
        for table in ("audit_log", "conversations", "facts", "episode_summaries"):
            left = c.execute(
                sa.text(f"SELECT count(*) FROM {table} WHERE person_id = :p"), {"p": anna_id}
            ).scalar()
            assert left == 0, table
    assert _keyword_hits(services.db, "Tomas") == 0  # her full-text rows went with her
    if services.db.is_sqlite:  # and so did her tables
        tables = sqlite_fts_tables(services.db) + sqlite_fts_tables(
            services.db, "episode_window_fts"
        )
        assert not [t for t in tables if t.endswith(f"_p{anna_id}")]
    assert _keyword_hits(services.db, "Maya") >= 1
    assert client.get("/v1/facts", headers=as_(anna)).status_code == 401
    after = services.episodes.preview("kayaking", scope=Scope(OWNER))
    assert [e.episode_id for e in after] == [e.episode_id for e in owner_episodes]
    assert rows_by_person(services.db)[OWNER][: len(before[OWNER])] == before[OWNER]
