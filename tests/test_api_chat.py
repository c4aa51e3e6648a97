"""POST /v1/chat and GET /v1/audit through FastAPI's test client, on real parts: the brain,
the openai/anthropic SDKs against the local wire server, a migrated SQLite file."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from caesar.api import create_app

ONE_MIB = 1024 * 1024


def audit_events(client: TestClient, **params: Any) -> list[dict[str, Any]]:
    response = client.get("/v1/audit", params=params)
    assert response.status_code == 200, response.text
    return response.json()["events"]  # type: ignore[no-any-return]


def client_for(services: Any) -> TestClient:
    return TestClient(create_app(services.settings, services, run_workers=False))


# -- the happy path ---------------------------------------------------------------------------
def test_chat_returns_reply_and_audit_id(client, llm):
    llm.replies.append("Biscuit is a fine name")
    response = client.post("/v1/chat", json={"message": "my dog is called Biscuit"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["reply"] == "Biscuit is a fine name"
    [event] = audit_events(client, event_type="chat.completed")
    assert event["id"] == body["audit_id"]


def test_chat_completed_payload(client, llm):
    llm.replies.append("four words of reply")
    history = [
        {"role": "user", "content": "earlier question"},
        {"role": "assistant", "content": "earlier answer"},
    ]
    audit_id = client.post("/v1/chat", json={"message": "now this", "history": history}).json()[
        "audit_id"
    ]
    [event] = audit_events(client, event_type="chat.completed")
    payload = event["payload"]
    assert event["id"] == audit_id
    assert payload["messages"] == [*history, {"role": "user", "content": "now this"}]
    assert payload["reply"] == "four words of reply"
    assert payload["provider"] == "local" and payload["model"] == "test-model"
    usage = payload["usage"]
    assert usage["completion_tokens"] == 4  # numbers, not redacted as if they were secrets
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert isinstance(payload["latency_ms"], float | int) and payload["latency_ms"] >= 0
    assert event["created_at"].startswith("20")


def test_history_reaches_the_provider_in_order(client, llm):
    history = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "second"},
    ]
    client.post("/v1/chat", json={"message": "third", "history": history})
    sent = llm.requests[-1]["json"]["messages"]
    assert sent[0]["role"] == "system"
    assert [(m["role"], m["content"]) for m in sent[1:]] == [
        ("user", "first"),
        ("assistant", "second"),
        ("user", "third"),
    ]


def test_chat_through_anthropic(make_services, llm):
    services = make_services(gateway={"routes": {"chat": "claude:claude-test"}})
    llm.replies.append("from claude")
    with client_for(services) as c:
        body = c.post("/v1/chat", json={"message": "hi"}).json()
        assert body["reply"] == "from claude"
        [event] = audit_events(c, event_type="chat.completed")
    assert event["payload"]["provider"] == "claude"
    assert event["payload"]["model"] == "claude-test"
    assert llm.requests[-1]["path"] == "/v1/messages"
    assert llm.requests[-1]["json"]["system"]  # caesar's system prompt went in `system`


# -- provider failures ------------------------------------------------------------------------
FAILURES = [
    (("status",), {"status": 500}, 503, "ProviderUnavailable"),
    (("status",), {"status": 429, "retry_after_ms": 1}, 503, "ProviderUnavailable"),
    (("status",), {"status": 400}, 502, "ProviderError"),
    (("delay",), {"seconds": 5}, 504, "ProviderTimeout"),
    (("malformed",), {}, 502, "ProviderBadResponse"),
    (("disconnect",), {}, 503, "ProviderUnavailable"),
]


@pytest.mark.parametrize("route", ["local:test-model", "claude:claude-test"])
@pytest.mark.parametrize(("fault", "options", "status", "error_type"), FAILURES)
def test_provider_failure_is_audited_and_answered(
    make_services, llm, route, fault, options, status, error_type, caplog
):
    services = make_services(
        gateway={
            "routes": {"chat": route},
            "providers": {"local": {"timeout_seconds": 0.3}, "claude": {"timeout_seconds": 0.3}},
        }
    )
    provider = route.split(":")[0]
    llm.fail_next(*fault, **options)
    with client_for(services) as c:
        response = c.post("/v1/chat", json={"message": "will this work?"})
        assert response.status_code == status, response.text
        error = response.json()["error"]
        assert error["type"] == "provider_error" and error["provider"] == provider
        assert provider in error["message"]
        assert audit_events(c, event_type="chat.completed") == []
        [failed] = audit_events(c, event_type="chat.failed")
    payload = failed["payload"]
    assert payload["provider"] == provider
    # and the server's log says so (issue #15: a 503 or 504 left nothing there)
    logged = [r.getMessage() for r in caplog.records if r.name == "caesar.brain"]
    assert any(m.startswith("chat.failed after") and provider in m for m in logged), logged
    assert payload["error_type"] == error_type and payload["status"] == status
    assert payload["messages"] == [{"role": "user", "content": "will this work?"}]
    assert payload["error"]


# -- bad requests -----------------------------------------------------------------------------
BAD_BODIES = [
    ({}, "message: Field required"),
    ({"message": ""}, "message"),
    ({"message": "   \n\t"}, "empty or whitespace"),
    ({"message": 5}, "message: Input should be a valid string"),
    ({"message": None}, "message: Input should be a valid string"),
    ({"message": ["hi"]}, "message: Input should be a valid string"),
    (["hi"], "body: Input should be a valid dictionary"),
    ("hi", "body: Input should be a valid dictionary"),
    ({"message": "hi", "history": "earlier"}, "history: Input should be a valid list"),
    ({"message": "hi", "history": [["user", "x"]]}, "history.0: Input should be a valid dict"),
    ({"message": "hi", "history": [{"role": "user"}]}, "history.0.content: Field required"),
    ({"message": "hi", "history": [{"role": "system", "content": "x"}]}, "history.0.role"),
    ({"message": "hi", "history": [{"role": "user", "content": 3}]}, "history.0.content"),
    ({"message": "hi", "extra": 1}, "extra: Extra inputs are not permitted"),
]


@pytest.mark.parametrize(("body", "expected"), BAD_BODIES)
def test_bad_request_is_4xx_with_a_clear_message(client, llm, body, expected):
    response = client.post("/v1/chat", json=body)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request"
    assert expected in error["message"]
    assert llm.requests == []  # nothing reached the provider
    assert audit_events(client) == []  # nor the audit log


@pytest.mark.parametrize("raw", [b"{not json", b'{"message": "hi"', b"\xff\xfe"])
def test_invalid_json(client, llm, raw):
    response = client.post("/v1/chat", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 422, response.text
    assert "invalid JSON" in response.json()["error"]["message"]
    assert llm.requests == []


def test_body_over_the_limit_with_content_length(client, llm):
    body = json.dumps({"message": "x" * (ONE_MIB + 10)}).encode()
    response = client.post("/v1/chat", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 413
    error = response.json()["error"]
    assert error["type"] == "request_too_large"
    assert "1048576 byte limit" in error["message"] and "max_request_bytes" in error["message"]
    assert llm.requests == [] and audit_events(client) == []


def test_body_over_the_limit_without_content_length(client, llm):
    def chunks():  # a generator body goes out chunked: no Content-Length to check up front
        yield b'{"message": "'
        for _ in range(20):
            yield b"x" * 65536
        yield b'"}'

    response = client.post(
        "/v1/chat", content=chunks(), headers={"content-type": "application/json"}
    )
    assert response.status_code == 413, response.text
    assert response.json()["error"]["type"] == "request_too_large"
    assert llm.requests == [] and audit_events(client) == []


def test_chunked_body_under_the_limit_is_served(client, llm):
    def chunks():
        yield b'{"message": '
        yield b'"chunked hello"}'

    response = client.post(
        "/v1/chat", content=chunks(), headers={"content-type": "application/json"}
    )
    assert response.status_code == 200, response.text
    assert response.json()["reply"] == "ok: chunked hello"


def test_body_just_under_the_limit_is_served(client, llm):
    turn = {"role": "user", "content": "y" * 18000}
    history = [turn, {"role": "assistant", "content": "ok"}] * 50
    body = json.dumps({"message": "hi", "history": history}).encode()
    assert ONE_MIB * 0.8 < len(body) < ONE_MIB
    response = client.post("/v1/chat", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 200, response.text


def test_limit_follows_the_setting(make_services):
    services = make_services(max_request_bytes=2048)
    with client_for(services) as c:
        assert c.post("/v1/chat", json={"message": "x" * 3000}).status_code == 413
        assert c.post("/v1/chat", json={"message": "x" * 1000}).status_code == 200


def test_nul_in_a_message_is_stored(client, llm):
    # PostgreSQL's JSONB refuses \u0000; the audit log stores U+FFFD in its place.
    response = client.post("/v1/chat", json={"message": "a\x00b"})
    assert response.status_code == 200, response.text
    [event] = audit_events(client, event_type="chat.completed")
    assert event["payload"]["messages"][-1]["content"] == "a\ufffdb"


# -- GET /v1/audit ----------------------------------------------------------------------------
def test_audit_filters(client, llm):
    ids = [client.post("/v1/chat", json={"message": f"m{i}"}).json()["audit_id"] for i in range(4)]
    llm.fail_next("status", status=500)
    assert client.post("/v1/chat", json={"message": "boom"}).status_code == 503

    everything = audit_events(client)
    assert [e["id"] for e in everything] == sorted(e["id"] for e in everything)  # newest last
    assert {e["event_type"] for e in everything} >= {"chat.completed", "chat.failed"}
    for event in everything:
        assert set(event) == {"id", "event_type", "created_at", "payload"}

    completed = audit_events(client, event_type="chat.completed")
    assert [e["id"] for e in completed] == ids
    assert [
        e["id"] for e in audit_events(client, event_type="chat.completed", after_id=ids[1])
    ] == ids[2:]
    assert [e["id"] for e in audit_events(client, event_type="chat.completed", limit=2)] == ids[:2]
    assert [e["id"] for e in audit_events(client, after_id=ids[0], limit=1)] == [ids[1]]
    assert audit_events(client, event_type="no.such.type") == []
    assert audit_events(client, after_id=everything[-1]["id"]) == []


@pytest.mark.parametrize(
    "params",
    [{"limit": 0}, {"limit": 5000}, {"after_id": -1}, {"after_id": "x"}, {"limit": "many"}],
)
def test_audit_rejects_bad_parameters(client, params):
    response = client.get("/v1/audit", params=params)
    assert response.status_code == 422
    assert response.json()["error"]["type"] == "invalid_request"
