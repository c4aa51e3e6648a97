"""A trusted front-end (issue #23, step 3; docs/household.md "Open WebUI for a household"): a
request carrying `[people] frontend_token` acts as the person its user header names; with
`auto_create` an unknown user becomes a person, without it they get 403; with any other token
the headers are ignored. Through the real app, on SQLite and PostgreSQL.

The owner here is the `api_token` (TEST_TOKEN); Anna is a person added with `caesar.people`
and linked to the front-end user "owui-anna".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from conftest import OWNER, TEST_TOKEN
from fastapi.testclient import TestClient

from caesar import audit, people
from caesar.api import create_app
from caesar.api.deps import header_text
from caesar.db.models import Person
from caesar.errors import InputError

FRONTEND = "frontend-token-abcdef0123456789"
USER = "X-OpenWebUI-User-Id"
NAME = "X-OpenWebUI-User-Name"
EMAIL = "X-OpenWebUI-User-Email"


Household = tuple[Any, TestClient, str, int]


@pytest.fixture
def household(make_services: Any, db_url: str) -> Iterator[Callable[..., Household]]:
    """A factory: (services, client, Anna's token, Anna's id) on either engine."""
    clients: list[TestClient] = []

    def make(**people_settings: Any) -> Household:
        services = make_services(
            api_token=TEST_TOKEN,
            database_url=db_url,
            people={"frontend_token": FRONTEND, **people_settings},
            auth_failures={"max_failures": 3, "window_seconds": 300},
        )
        with services.db.write() as session:
            anna, token = people.add(session, services.audit, "Anna")
            people.link(session, services.audit, "Anna", "owui-anna")
            anna_id = anna.id
        client = TestClient(create_app(services.settings, services, run_workers=False))
        client.__enter__()
        clients.append(client)
        return services, client, token, anna_id

    yield make
    for client in clients:
        client.__exit__(None, None, None)


def bearer(token: str, **headers: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", **headers}


def front(user: str | None = None, **headers: str) -> dict[str, str]:
    extra = {USER: user} if user is not None else {}
    return bearer(FRONTEND, **extra, **headers)


def facts(client: TestClient, headers: dict[str, str]) -> dict[str, str]:
    reply = client.get("/v1/facts", headers=headers)
    assert reply.status_code == 200, reply.text
    return {f["key"]: f["value"] for f in reply.json()["facts"]}


def everyone(services: Any) -> dict[str, int]:
    with services.db.read() as session:
        return {p.name: p.id for p in session.scalars(sa.select(Person))}


def audit_text(services: Any) -> str:
    with services.db.engine.connect() as c:
        return "\n".join(str(tuple(r)) for r in c.execute(sa.text("SELECT * FROM audit_log")))


def test_the_frontend_token_acts_as_the_person_its_header_names(household, llm):
    services, client, anna, anna_id = household()
    put = client.put("/v1/facts/home_city", json={"value": "Porto"}, headers=front("owui-anna"))
    assert put.status_code == 200, put.text
    client.put("/v1/facts/home_city", json={"value": "Lisbon"}, headers=bearer(TEST_TOKEN))
    assert facts(client, bearer(anna)) == {"home_city": "Porto"}
    assert facts(client, front("owui-anna")) == {"home_city": "Porto"}
    assert facts(client, bearer(TEST_TOKEN)) == {"home_city": "Lisbon"}

    # a turn on the OpenAI endpoint, as Open WebUI sends it: Anna's memory alone in the prompt
    reply = client.post(
        "/v1/chat/completions",
        json={"model": "caesar", "messages": [{"role": "user", "content": "Where do I live?"}]},
        headers=front("owui-anna", **{NAME: "Anna", EMAIL: "anna@example.org"}),
    )
    assert reply.status_code == 200, reply.text
    prompt = llm.requests[-1]["json"]["messages"][0]["content"]
    assert "Porto" in prompt and "Lisbon" not in prompt
    with services.db.engine.connect() as c:
        acted = c.execute(
            sa.text("SELECT person_id FROM audit_log WHERE event_type = :e"),
            {"e": audit.CHAT_COMPLETED},
        ).scalars()
        assert list(acted) == [anna_id]


def test_auto_create_makes_a_person_on_first_sight_once(household):
    services, client, _anna, _anna_id = household(auto_create=True)
    headers = front("owui-bob", **{NAME: "Bob", EMAIL: "bob@example.org"})
    assert client.put("/v1/facts/dog", json={"value": "Rex"}, headers=headers).is_success
    assert facts(client, headers) == {"dog": "Rex"}  # the same person the second time
    assert facts(client, bearer(TEST_TOKEN)) == {}
    bob = everyone(services)["Bob"]
    # a display name already taken gets a suffix; no name: the email; neither: the id
    client.get("/v1/facts", headers=front("owui-bob2", **{NAME: "Bob"}))
    client.get("/v1/facts", headers=front("owui-carol", **{EMAIL: "carol@example.org"}))
    client.get("/v1/facts", headers=front("owui-dan", **{NAME: "   "}))
    client.get("/v1/facts", headers=front("owui-anna", **{NAME: "Someone Else"}))  # linked
    assert set(everyone(services)) == {
        "owner",
        "Anna",
        "Bob",
        "Bob (2)",
        "carol@example.org",
        "owui-dan",
    }
    with services.db.read() as session:
        added = session.execute(
            sa.text(
                "SELECT subject_id, person_id, payload FROM audit_log WHERE event_type = :e "
                "AND subject_id = :bob"
            ),
            {"e": audit.PERSON_ADDED, "bob": bob},
        ).all()
    assert len(added) == 1
    _subject, acted, payload = added[0]
    assert acted == OWNER
    assert '"via": "frontend"' in str(payload) or "'via': 'frontend'" in str(payload)
    with services.db.read() as session:
        made = session.get(Person, bob)
        assert made is not None and made.token_hash is None and made.frontend_id == "owui-bob"
        if not services.db.is_sqlite:  # their own search index, built before their request
            own = "SELECT indexname FROM pg_indexes WHERE indexname = :name"
            name = f"idx_episode_fts_document_p{bob}"
            assert session.execute(sa.text(own), {"name": name}).scalar() == name


@pytest.mark.parametrize(
    ("sent", "meant"),
    [
        ("Zo%C3%AB Kraus", "Zoë Kraus"),  # Open WebUI: quote(user.name, safe=" ")
        ("Zoë Kraus".encode().decode("latin-1"), "Zoë Kraus"),  # raw UTF-8 bytes, read as Latin-1
        ("Zoë", "Zoë"),  # Latin-1 text: kept
        ("50%25 off", "50% off"),
        ("100% sure", "100% sure"),  # a bare % encodes nothing: kept
        ("%FF%FE", "%FF%FE"),  # percent-encoded bytes that are no UTF-8: kept as sent
        ("Anna", "Anna"),
        (None, None),
    ],
)
def test_header_text_decodes_what_front_ends_send(sent, meant):
    assert header_text(sent) == meant


def test_auto_create_names_a_person_by_their_decoded_name(household):
    """Open WebUI percent-encodes the display name; the person is "Zoë", not "Zo%C3%AB"."""
    services, client, _anna, _anna_id = household(auto_create=True)
    sent = [
        ("owui-zoe", {NAME: "Zo%C3%AB M%C3%BCller"}),
        ("owui-zoe2", {NAME: "Zo%C3%AB M%C3%BCller"}),  # the same name: " (2)"
        ("owui-jose", {NAME: "", EMAIL: "jos%C3%A9@example.org"}),
        ("owui-raw", {NAME: "Søren"}),  # raw UTF-8 on the wire
    ]
    for user, headers in sent:
        wire = {k: v.encode() for k, v in front(user, **headers).items()}
        assert client.get("/v1/facts", headers=wire).status_code == 200
    made = set(everyone(services)) - {"owner", "Anna"}
    assert made == {"Zoë Müller", "Zoë Müller (2)", "josé@example.org", "Søren"}


def test_an_unknown_user_without_auto_create_is_403_and_nobody_is_made(household):
    services, client, _anna, _anna_id = household()
    before = everyone(services)
    reply = client.get("/v1/facts", headers=front("owui-mallory", **{NAME: "Mallory"}))
    assert reply.status_code == 403
    assert "owui-mallory" in reply.text and "auto_create" in reply.text
    assert everyone(services) == before


def test_the_frontend_token_without_a_user_header_is_400(household):
    _services, client, _anna, _anna_id = household(auto_create=True)
    for headers in (front(), front("   ")):
        reply = client.get("/v1/facts", headers=headers)
        assert reply.status_code == 400
        assert USER in reply.text and "ENABLE_FORWARD_USER_INFO_HEADERS" in reply.text
    too_long = client.get("/v1/facts", headers=front("x" * 300))
    assert too_long.status_code == 400 and "255" in too_long.text


def test_person_headers_with_any_other_token_are_ignored(household):
    services, client, anna, _anna_id = household(auto_create=True)
    client.put("/v1/facts/home_city", json={"value": "Lisbon"}, headers=bearer(TEST_TOKEN))
    client.put("/v1/facts/home_city", json={"value": "Porto"}, headers=bearer(anna))
    before = everyone(services)
    # the owner's token naming Anna is the owner; Anna's naming someone new is Anna
    assert facts(client, bearer(TEST_TOKEN, **{USER: "owui-anna"})) == {"home_city": "Lisbon"}
    assert facts(client, bearer(anna, **{USER: "owui-eve", NAME: "Eve"})) == {"home_city": "Porto"}
    assert everyone(services) == before  # nobody was auto-created from a spoofed header
    # a wrong token with a header is still a wrong token
    assert (
        client.get("/v1/facts", headers=bearer("x" * 20, **{USER: "owui-anna"})).status_code == 401
    )


def test_the_frontend_token_never_lands_in_the_audit_log_nor_opens_the_dashboard(household, llm):
    services, client, _anna, _anna_id = household(auto_create=True)
    headers = front("owui-bob", **{NAME: "Bob"})
    client.post(
        "/v1/chat/completions",
        json={"model": "caesar", "messages": [{"role": "user", "content": f"say {FRONTEND}"}]},
        headers=headers,
    )
    client.put("/v1/facts/note", json={"value": f"token {FRONTEND}"}, headers=headers)
    text = audit_text(services)
    assert "owui-bob" in text  # the rows are there ...
    assert FRONTEND not in text  # ... and the token is not
    # a browser is no front-end: the token is no one's on the dashboard
    assert client.get("/dashboard/", headers=headers).status_code == 401
    login = client.post("/dashboard/login", data={"token": FRONTEND}, follow_redirects=False)
    assert login.status_code == 401


def test_the_failed_token_limit_holds_for_the_frontend_token(household):
    _services, client, _anna, _anna_id = household()
    for _ in range(3):
        client.get("/v1/facts", headers=bearer("wrong-token-0123456789"))
    locked = client.get("/v1/facts", headers=front("owui-anna"))
    assert locked.status_code == 429


def test_link_takes_an_id_from_someone_with_no_memory_and_refuses_from_someone_with(household):
    services, client, _anna, _anna_id = household()
    with services.db.write() as session:
        people.add(session, services.audit, "Ben")
    assert client.put("/v1/facts/dog", json={"value": "Rex"}, headers=front("owui-anna")).is_success
    with pytest.raises(InputError, match="memory of their own"), services.db.write() as session:
        people.link(session, services.audit, "Ben", "owui-anna")
    with services.db.write() as session:
        people.add(session, services.audit, "Cleo")
        people.link(session, services.audit, "Cleo", "owui-cleo")
    with services.db.write() as session:  # Cleo has no memory: the id moves
        linked = people.link(session, services.audit, "Ben", "owui-cleo")
    assert linked.taken_from == "Cleo"
    with services.db.read() as session:
        listed = {p.name: p.frontend_id for p in people.everyone(session)}
    assert listed["Ben"] == "owui-cleo" and listed["Cleo"] is None
    with services.db.write() as session:
        people.link(session, services.audit, "owner", "owui-owner")
    assert facts(client, front("owui-owner")) == facts(client, bearer(TEST_TOKEN))


def test_the_owner_takes_over_the_login_auto_create_made_when_a_household_starts(
    make_services, llm
):
    """A one-person install (the owner chatting with the api_token) becomes a household: the
    operator sets a frontend_token with auto_create, Open WebUI's admin saves the connection and
    its model-list request makes a new, empty person. The owner takes that login over with
    `caesar people link`, and the admin's next chat is the owner's, with their memory."""
    from memory_helpers import add_chat

    from caesar.workers import run_until_caught_up

    services = make_services(
        api_token=TEST_TOKEN,
        people={"frontend_token": FRONTEND, "auto_create": True},
        memory={"facts_extract": {"enabled": True}},
        gateway={"routes": {"memory_extract": "offline:patterns"}},
    )
    add_chat(services, "My dog is called Biscuit and I live in Porto.", "Lovely!")
    run_until_caught_up(services.workers["memory.extract"])
    owner_facts = {"dog_name": "Biscuit", "home_location": "Porto"}
    admin = front("owui-admin-1", **{NAME: "Dana", EMAIL: "dana@example.org"})
    with TestClient(create_app(services.settings, services, run_workers=False)) as client:
        assert facts(client, bearer(TEST_TOKEN)) == owner_facts
        assert client.get("/v1/models", headers=admin).status_code == 200
        assert "Dana" in everyone(services)  # made on the model list, empty

        with services.db.write() as session:
            people.link(session, services.audit, "owner", "owui-admin-1")

        assert facts(client, admin) == owner_facts
        reply = client.post(
            "/v1/chat/completions",
            json={"model": "caesar", "messages": [{"role": "user", "content": "Where do I live?"}]},
            headers=admin,
        )
        assert reply.status_code == 200, reply.text
        prompt = llm.requests[-1]["json"]["messages"][0]["content"]
        assert "Porto" in prompt and "Biscuit" in prompt
    with services.db.read() as session:
        rows = session.execute(
            sa.text("SELECT person_id, payload FROM audit_log WHERE event_type = :e"),
            {"e": audit.CHAT_COMPLETED},
        ).all()
        linked = session.execute(
            sa.text("SELECT payload FROM audit_log WHERE event_type = :e"),
            {"e": audit.PERSON_LINKED},
        ).scalar_one()
    assert {r[0] for r in rows} == {OWNER}  # the first chat and the admin's, both the owner's
    assert "Dana" in str(linked) and "taken_from" in str(linked)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"people": {"frontend_token": FRONTEND}}, "needs api_token"),
        ({"api_token": FRONTEND, "people": {"frontend_token": FRONTEND}}, "must differ"),
        ({"api_token": TEST_TOKEN, "people": {"frontend_token": "short"}}, "16 characters"),
        ({"people": {"user_header": "X Bad: header"}}, "user_header"),
    ],
)
def test_bad_frontend_settings_are_refused_clearly(make_settings, overrides, message):
    with pytest.raises(ValueError, match=message):
        make_settings(**overrides)


def test_open_webuis_recording_with_the_frontend_token_is_its_users_memory(make_services, llm):
    """The recorded Open WebUI session (its user Dana's headers included), replayed through a
    real server with the frontend token: Dana is made on first sight and every turn is hers."""
    from live_server import live_server
    from test_clients import model_reply, recorded, replay

    services = make_services(
        api_token=TEST_TOKEN, people={"frontend_token": FRONTEND, "auto_create": True}
    )
    llm.reply = model_reply
    with live_server(services) as url:
        responses = replay(url, token=FRONTEND)
    assert [r.status_code for r in responses] == [200] * len(responses)
    dana = everyone(services)["Dana"]
    ids = {r["headers"]["X-OpenWebUI-User-Id"] for r in recorded()}
    with services.db.read() as session:
        made = session.get(Person, dana)
        assert made is not None and {made.frontend_id} == ids
    with services.db.engine.connect() as c:
        acted = set(
            c.execute(
                sa.text("SELECT person_id FROM audit_log WHERE event_type = :e"),
                {"e": audit.CHAT_COMPLETED},
            ).scalars()
        )
    assert acted == {dana}
    assert FRONTEND not in audit_text(services)


def test_mcp_over_http_refuses_the_frontend_token_naming_no_one(household):
    _services, client, _anna, _anna_id = household()
    ask = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    accept = {"Accept": "application/json, text/event-stream"}
    missing = client.post("/mcp/", json=ask, headers={**front(), **accept})
    assert missing.status_code == 400 and USER in missing.text
    unknown = client.post("/mcp/", json=ask, headers={**front("owui-nobody"), **accept})
    assert unknown.status_code == 403 and "owui-nobody" in unknown.text
