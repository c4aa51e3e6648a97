"""The chat turn end to end on real parts: API → brain → openai SDK → local wire server → audit."""

from __future__ import annotations

from conftest import TEST_TOKEN


def test_chat_turn_is_audited(client, llm):
    llm.replies.append("Hello from the model")
    response = client.post("/v1/chat", json={"message": "hi there"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["reply"] == "Hello from the model"
    events = client.get("/v1/audit", params={"event_type": "chat.completed"}).json()["events"]
    assert [e["id"] for e in events] == [body["audit_id"]]
    payload = events[0]["payload"]
    assert payload["reply"] == "Hello from the model"
    assert payload["messages"][-1] == {"role": "user", "content": "hi there"}
    assert payload["provider"] == "local" and payload["model"] == "test-model"
    sent = llm.requests[-1]["json"]["messages"]
    assert sent[0]["role"] == "system" and sent[-1]["content"] == "hi there"


def test_token_required_when_configured(make_services, tmp_path):
    from fastapi.testclient import TestClient

    from caesar.api import create_app

    services = make_services(api_token=TEST_TOKEN)
    with TestClient(create_app(services.settings, services, run_workers=False)) as c:
        assert c.get("/healthz").status_code == 200
        assert c.get("/v1/audit").status_code == 401
        ok = c.get("/v1/audit", headers={"Authorization": f"Bearer {TEST_TOKEN}"})
        assert ok.status_code == 200
