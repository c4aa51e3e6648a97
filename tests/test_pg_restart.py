"""PostgreSQL restarting under a running server (issue #24, item 5): while it is down, every
request gets a clear 503 that says nothing was saved (the chat endpoints included, before
the model is called), `/healthz` says the database is unreachable, and once it is back the
same server serves again, with every answered turn recorded once; a worker waits it out
with one log line and learns the chat once it is back. A real PostgreSQL, shut down and
started again on its data and port (bench/load.py --restart-at does it under load)."""

from __future__ import annotations

import json
import time

from fastapi.testclient import TestClient
from memory_helpers import events
from pg import create_database, start_postgres
from sqlalchemy import select

from caesar import audit, workers
from caesar.api import create_app
from caesar.api.app import DATABASE_RETRY_AFTER
from caesar.db.models import EpisodeSummary


def test_a_postgresql_restart_gives_clear_503s_then_recovers_with_no_chat_lost(
    tmp_path, make_services, llm, caplog
):
    with start_postgres(tmp_path / "pg") as server:
        services = make_services(database_url=create_database(server, with_vector=True))
        app = create_app(services.settings, services, run_workers=False)
        with TestClient(app, raise_server_exceptions=False) as client:
            llm.replies.append("Noted: the boiler.")
            before = client.post("/v1/chat", json={"message": "The boiler is making noises."})
            assert before.status_code == 200, before.text

            server.pause()
            asked = len(llm.requests)
            down = client.post("/v1/chat", json={"message": "Should I call a plumber?"})
            assert down.status_code == 503, down.text
            assert down.json()["error"]["type"] == "database_unavailable"
            assert "nothing of this request was saved" in down.json()["error"]["message"]
            assert down.headers["retry-after"] == str(DATABASE_RETRY_AFTER)
            body = {"model": "caesar", "messages": [{"role": "user", "content": "Hello?"}]}
            openai = client.post("/v1/chat/completions", json=body)
            assert openai.status_code == 503, openai.text
            streamed = client.post("/v1/chat/completions", json={**body, "stream": True})
            assert streamed.status_code == 503, streamed.text
            assert len(llm.requests) == asked  # the model was not asked: no reply is lost
            assert client.get("/v1/facts").status_code == 503
            health = client.get("/healthz")
            assert health.status_code == 503
            assert health.json()["database"] == "unreachable"
            assert "database unreachable" in caplog.text  # the server's log says why

            server.resume()
            assert client.get("/healthz").status_code == 200
            llm.replies.append("Yes, call one.")
            after = client.post("/v1/chat", json={"message": "Should I call a plumber?"})
            assert after.status_code == 200, after.text
            assert after.json()["reply"] == "Yes, call one."

        said = [
            r.payload["messages"][-1]["content"] for r in events(services, audit.CHAT_COMPLETED)
        ]
        assert said == ["The boiler is making noises.", "Should I call a plumber?"]
        assert not events(services, audit.CHAT_FAILED)


def test_postgresql_going_down_while_the_model_answers_is_a_clear_error_not_a_silent_loss(
    tmp_path, make_services, llm
):
    # The reply is generated, then the turn cannot be written. Not streamed: a 503, as above.
    # Streamed: the reply has reached the client already, and the stream ends with an error
    # event that says it was not saved.
    with start_postgres(tmp_path / "pg") as server:
        services = make_services(database_url=create_database(server, with_vector=True))
        app = create_app(services.settings, services, run_workers=False)

        def answer_then_go_down(request, protocol):
            server.pause()
            return "Bleed the radiators."

        with TestClient(app, raise_server_exceptions=False) as client:
            llm.reply = answer_then_go_down
            turn = client.post("/v1/chat", json={"message": "The radiators are cold at the top."})
            assert turn.status_code == 503, turn.text
            assert turn.json()["error"]["type"] == "database_unavailable"
            server.resume()
            body = {
                "model": "caesar",
                "stream": True,
                "messages": [{"role": "user", "content": "The radiators are cold at the top."}],
            }
            streamed = client.post("/v1/chat/completions", json=body)
            assert streamed.status_code == 200
            frames = [
                json.loads(line[len("data: ") :])
                for line in streamed.text.splitlines()
                if line.startswith("data: {")
            ]
            said = "".join(
                f["choices"][0]["delta"].get("content") or "" for f in frames if "choices" in f
            )
            assert said == "Bleed the radiators."
            assert '"type": "database_unavailable"' in streamed.text
            assert "this reply was not saved" in streamed.text
            assert streamed.text.rstrip().endswith("data: [DONE]")
            server.resume()
            llm.reply = lambda request, protocol: "Bleed them."
            again = client.post("/v1/chat", json={"message": "The radiators are cold at the top."})
            assert again.status_code == 200, again.text
        assert len(events(services, audit.CHAT_COMPLETED)) == 1


def test_a_worker_waits_out_a_postgresql_restart_and_then_learns_the_chat(
    tmp_path, make_services, llm, caplog, monkeypatch
):
    # Its batch rolls back whole while PostgreSQL is down: one log line says so (not a crash
    # with its traceback every interval), no crash row, and once it is back the chat is
    # learned as if nothing had happened.
    monkeypatch.setattr(workers, "OUTAGE_RETRY_SECONDS", 0.2)
    with start_postgres(tmp_path / "pg") as server:
        services = make_services(
            database_url=create_database(server, with_vector=True),
            memory={"episodes_summarise": {"enabled": True, "quiet_seconds": 0}},
        )
        worker = services.workers["memory.summarise"]
        monkeypatch.setattr(type(worker), "interval_seconds", property(lambda self: 0.05))
        app = create_app(services.settings, services, run_workers=False)
        with TestClient(app) as client:
            llm.replies.append("Bleed the radiators.")
            turn = client.post("/v1/chat", json={"message": "The radiators are cold at the top."})
            assert turn.status_code == 200, turn.text
        llm.reply = lambda request, protocol: "The operator's radiators were cold at the top."
        server.pause()
        runner = workers.WorkerRunner([worker])
        runner.start()
        try:
            deadline = time.monotonic() + 10
            while caplog.text.count("database unavailable") < 1 and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(1.0)  # several more tries while it is down
            server.resume()
            while not episodes(services) and time.monotonic() < deadline + 10:
                time.sleep(0.05)
        finally:
            runner.stop()
        said = [r.getMessage() for r in caplog.records if "memory.summarise" in r.getMessage()]
        assert sum("database unavailable" in m for m in said) == 1, said
        assert any("database reachable again" in m for m in said), said
        assert "Traceback" not in caplog.text
        assert episodes(services) == ["The operator's radiators were cold at the top."]
        assert not events(services, audit.WORKER_CRASHED)


def episodes(services) -> list[str]:
    with services.db.read() as session:
        return list(session.scalars(select(EpisodeSummary.summary)))
