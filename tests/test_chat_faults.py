"""Provider faults as the operator sees them (issue 7 §3; the gateway's own retry and
translation tests live with the gateway). Whatever the provider does — refuse the connection,
time out, answer 5xx or 429, send broken JSON, hang up mid-answer — a chat answers 502/503/504
naming the provider, a `chat.failed` row records it, and the server stays healthy: /healthz
and the very next chat are fine. A failing memory task never blocks a chat.
"""

from __future__ import annotations

import json
import socket
import time

import pytest
from conftest import OWNER, TEST_TOKEN
from fastapi.testclient import TestClient

from caesar import audit
from caesar.api import create_app
from caesar.memory.scope import Scope

AUTH = {"Authorization": f"Bearer {TEST_TOKEN}"}

# (fault kind, its arguments, the status a chat answers)
FAULTS = [
    ("status", {"status": 500}, 503),
    ("status", {"status": 503}, 503),
    ("status", {"status": 429, "retry_after": 0}, 503),
    ("malformed", {}, 502),
    ("truncated", {}, 502),
    ("disconnect", {}, 503),
    ("delay", {"seconds": 3.0}, 504),  # the provider timeout is 0.5 s here
]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens once the socket is closed


@pytest.fixture
def chat_client(make_services, llm):
    def make(route: str = "local", **overrides):
        services = make_services(
            api_token=TEST_TOKEN,
            gateway={
                "providers": {
                    "local": {"timeout_seconds": 0.5},
                    "claude": {"timeout_seconds": 0.5},
                },
                "routes": {"chat": f"{route}:test-model"},
            },
            **overrides,
        )
        return services, TestClient(
            create_app(services.settings, services, run_workers=False), headers=AUTH
        )

    return make


def _failed_rows(services) -> list:
    with services.db.read() as session:
        return list(audit.list_events(Scope(OWNER, session), event_type=audit.CHAT_FAILED))


@pytest.mark.parametrize("route", ["local", "claude"])
@pytest.mark.parametrize(("kind", "args", "status"), FAULTS, ids=[f"{f[0]}-{f[2]}" for f in FAULTS])
def test_provider_fault_answers_5xx_naming_the_provider(
    chat_client, llm, route, kind, args, status
):
    services, client = chat_client(route)
    with client:
        llm.fail_next(kind, **args)
        response = client.post("/v1/chat", json={"message": "hello through a bad provider"})
        assert response.status_code == status, response.text
        error = response.json()["error"]
        assert error["type"] == "provider_error" and error["provider"] == route
        assert route in error["message"]

        rows = _failed_rows(services)
        assert len(rows) == 1
        assert rows[0].payload["provider"] == route and rows[0].payload["status"] == status
        assert rows[0].payload["messages"][-1]["content"] == "hello through a bad provider"

        assert client.get("/healthz").status_code == 200
        again = client.post("/v1/chat", json={"message": "and now?"})
        assert again.status_code == 200, again.text


def test_connection_refused_is_503_and_audited(make_services, llm):
    services = make_services(
        api_token=TEST_TOKEN,
        gateway={
            "providers": {
                "down": {
                    "kind": "openai",
                    "base_url": f"http://127.0.0.1:{_closed_port()}/v1",
                    "max_retries": 0,
                    "timeout_seconds": 2,
                }
            },
            "routes": {"chat": "down:test-model"},
        },
    )
    with TestClient(
        create_app(services.settings, services, run_workers=False), headers=AUTH
    ) as client:
        response = client.post("/v1/chat", json={"message": "anyone there?"})
        assert response.status_code == 503
        assert response.json()["error"]["provider"] == "down"
        assert [r.payload["provider"] for r in _failed_rows(services)] == ["down"]
        assert client.get("/healthz").status_code == 200


@pytest.mark.parametrize("kind", ["broken_stream", "stream_error"])
def test_stream_broken_mid_answer_is_reported_in_band_and_audited(chat_client, llm, kind):
    services, client = chat_client()
    llm.replies.append("one two three four five six seven eight")
    llm.fail_next(kind)
    with client:
        response = client.post(
            "/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "stream please"}], "stream": True},
        )
        assert response.status_code == 200  # the stream had started when the provider broke
        events = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
        assert events[-1] == "[DONE]"
        errors = [json.loads(e)["error"] for e in events[:-1] if "error" in json.loads(e)]
        assert len(errors) == 1 and "local" in errors[0]["message"]
        assert len(_failed_rows(services)) == 1
        assert client.get("/healthz").status_code == 200
        assert client.post("/v1/chat", json={"message": "still there?"}).status_code == 200


def test_stream_refused_before_the_first_chunk_is_a_proper_503(chat_client, llm):
    services, client = chat_client()
    llm.fail_next("status", status=500)
    with client:
        response = client.post(
            "/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "stream please"}], "stream": True},
        )
        assert response.status_code == 503
        assert response.json()["error"]["provider"] == "local"
        assert len(_failed_rows(services)) == 1


def test_failing_memory_tasks_never_block_chat(make_services, llm):
    """Summarising and extracting go to a provider that refuses every connection, with both
    workers running inside the server: every chat still answers, and the memory failures are
    audited as their own rows (not as crashes)."""
    dead = {
        "kind": "openai",
        "base_url": f"http://127.0.0.1:{_closed_port()}/v1",
        "max_retries": 0,
        "timeout_seconds": 2,
    }
    services = make_services(
        api_token=TEST_TOKEN,
        gateway={
            "providers": {"dead": dead},
            "routes": {"memory_summarise": "dead:m", "memory_extract": "dead:m"},
        },
        memory={
            "episodes_summarise": {"enabled": True, "interval_seconds": 0.05, "quiet_seconds": 0},
            "facts_extract": {"enabled": True, "interval_seconds": 0.05},
        },
    )
    with TestClient(
        create_app(services.settings, services, run_workers=True), headers=AUTH
    ) as client:
        answers = [
            client.post("/v1/chat", json={"message": f"chat number {i} about my garden"})
            for i in range(12)
        ]
        assert [a.status_code for a in answers] == [200] * 12
        deadline = time.monotonic() + 60
        while True:
            with services.db.read() as session:
                summarise_failed = audit.list_events(
                    Scope(OWNER, session), event_type=audit.EPISODE_SUMMARISE_FAILED
                )
                extract_failed = audit.list_events(
                    Scope(OWNER, session), event_type=audit.EXTRACT_FAILED
                )
            if len(summarise_failed) == 12 and len(extract_failed) == 12:
                break
            assert time.monotonic() < deadline, (len(summarise_failed), len(extract_failed))
            time.sleep(0.05)
        assert client.post("/v1/chat", json={"message": "and one more"}).status_code == 200
    chats = {a.json()["audit_id"] for a in answers}
    assert {r.subject_id for r in summarise_failed} == chats
    assert {r.subject_id for r in extract_failed} == chats
    assert all("dead" in r.payload["error"] for r in summarise_failed)
    with services.db.read() as session:
        assert audit.list_events(Scope(OWNER, session), event_type=audit.WORKER_CRASHED) == []
