"""/healthz says "warming", and what is left, until the embedder, the episode index and the
chat model are loaded (issue #15)."""

from __future__ import annotations

from caesar.cli.main import CHAT_MODEL, EMBEDDER, EPISODE_INDEX, _warm


def test_healthz_is_503_warming_until_every_part_is_loaded(client, services):
    services.readiness.pending(EMBEDDER, EPISODE_INDEX, CHAT_MODEL)
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["status"] == "warming"
    assert response.json()["waiting"] == ["embedder", "episode index", "chat model"]
    services.readiness.done(EMBEDDER)
    assert client.get("/healthz").json()["waiting"] == ["episode index", "chat model"]


def test_the_warm_up_loads_every_part_and_then_healthz_is_ok(client, services):
    services.readiness.pending(EMBEDDER, EPISODE_INDEX, CHAT_MODEL)
    _warm(services)  # the real embedder and index; the chat route is a remote server here
    assert services.readiness.waiting() == []
    response = client.get("/healthz")
    assert response.status_code == 200 and response.json()["status"] == "ok"


def test_an_app_with_nothing_warming_is_ready_at_once(client):
    assert client.get("/healthz").json()["status"] == "ok"
