"""The `caesar` command through Typer's runner, configured the way an operator does it: a TOML
file named by CAESAR_CONFIG, CAESAR_HOME for the SQLite file, the provider being the local
wire server."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from conftest import MODEL_CACHE, OWNER, PROVIDER_KEY
from typer.testing import CliRunner

from caesar import audit
from caesar.cli.main import app
from caesar.db import Database
from caesar.memory.scope import Scope


def _toml(llm: Any, chat_route: str = "local:test-model") -> str:
    return f"""
[gateway.providers.local]
kind = "openai"
base_url = "{llm.base_url}"
api_key = "{PROVIDER_KEY}"
max_retries = 0
timeout_seconds = 5

[gateway.providers.offline]
kind = "offline"

[gateway.routes]
chat = "{chat_route}"
memory_extract = "local:test-model"
memory_summarise = "local:test-model"

[embedder]
cache_dir = "{MODEL_CACHE}"

# on by default; off here, so the tests below show a named worker runs anyway
[memory.episodes_summarise]
enabled = false

[memory.facts_extract]
enabled = false
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, llm: Any) -> Path:
    """CAESAR_HOME and CAESAR_CONFIG set up as an operator would; database not yet upgraded."""
    home = tmp_path / "home"
    config = tmp_path / "caesar.toml"
    config.write_text(_toml(llm))
    monkeypatch.setenv("CAESAR_HOME", str(home))
    monkeypatch.setenv("CAESAR_CONFIG", str(config))
    return home


def run(*args: str, input: str | None = None) -> Any:
    return CliRunner().invoke(app, list(args), input=input)


@pytest.fixture
def upgraded(home: Path) -> Path:
    result = run("db", "upgrade")
    assert result.exit_code == 0, result.output
    return home


def events(home: Path, event_type: str) -> list[Any]:
    db = Database(f"sqlite:///{home / 'caesar.db'}")
    try:
        with db.read() as session:
            return list(audit.list_events(Scope(OWNER, session), event_type=event_type))
    finally:
        db.dispose()


def test_chat_one_shot(upgraded, llm):
    llm.replies.append("Hello from the fake model")
    result = run("chat", "-m", "hello caesar")
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "Hello from the fake model"
    [row] = events(upgraded, audit.CHAT_COMPLETED)
    assert row.payload["reply"] == "Hello from the fake model"
    assert row.payload["messages"] == [{"role": "user", "content": "hello caesar"}]
    assert llm.requests[-1]["api_key"] == PROVIDER_KEY


def test_chat_reply_is_printed_verbatim(upgraded, llm):
    llm.replies.append("[bold]not markup[/bold] and [gateway.routes]")
    result = run("chat", "-m", "hi")
    assert result.output.strip() == "[bold]not markup[/bold] and [gateway.routes]"


def test_chat_one_shot_provider_failure(upgraded, llm):
    llm.fail_next("status", status=500)
    result = run("chat", "-m", "hello")
    assert result.exit_code == 1
    assert "error: provider 'local': server error 500" in result.output
    assert "Traceback" not in result.output
    [row] = events(upgraded, audit.CHAT_FAILED)
    assert row.payload["error_type"] == "ProviderUnavailable"


def test_chat_interactive_keeps_history(upgraded, llm):
    llm.replies.extend(["first answer", "second answer"])
    result = run("chat", input="first question\nsecond question\n\n")
    assert result.exit_code == 0, result.output
    assert "first answer" in result.output and "second answer" in result.output
    sent = llm.requests[-1]["json"]["messages"]
    assert [m["content"] for m in sent[1:]] == ["first question", "first answer", "second question"]


def test_chat_interactive_survives_a_provider_error(upgraded, llm):
    llm.fail_next("status", status=503)
    llm.replies.append("back again")
    result = run("chat", input="one\ntwo\n\n")
    assert result.exit_code == 0, result.output
    assert "server error 503" in result.output and "back again" in result.output


def test_chat_needs_an_upgraded_database(home):
    result = run("chat", "-m", "hi")
    assert result.exit_code == 1
    assert "caesar db upgrade" in result.output


def test_config_error_is_one_clear_line(home, tmp_path, monkeypatch, llm):
    config = tmp_path / "offline-chat.toml"
    config.write_text(_toml(llm, chat_route="offline:none"))
    monkeypatch.setenv("CAESAR_CONFIG", str(config))
    result = run("chat", "-m", "hi")
    assert result.exit_code == 1
    assert "cannot chat" in result.output and "Traceback" not in result.output


def test_error_messages_keep_their_brackets(home, monkeypatch):
    # "[gateway.providers.nosuch]" must not be eaten as Rich markup.
    monkeypatch.setenv("CAESAR_GATEWAY__ROUTES__CHAT", "nosuch:model")
    result = run("chat", "-m", "hi")
    assert result.exit_code == 1
    assert "[gateway.providers.nosuch]" in result.output


def test_worker_once_runs_a_disabled_worker(upgraded, llm, shared_embedder):
    # memory.episodes_summarise.enabled is off in this config; naming the worker runs it anyway.
    llm.replies.append("The operator talked about their dog Biscuit.")
    assert run("chat", "-m", "my dog is called Biscuit and he loves the beach").exit_code == 0
    llm.replies.append("We discussed the operator's dog Biscuit and beach walks.")
    result = run("worker", "--once", "memory.summarise")
    assert result.exit_code == 0, result.output
    assert "memory.summarise: 1 handled" in result.output
    [row] = events(upgraded, audit.EPISODE_SUMMARISED)
    assert "Biscuit" in row.payload["summary"]
    again = run("worker", "--once", "memory.summarise")
    assert "memory.summarise: 0 handled" in again.output  # caught up: nothing twice


def test_unknown_worker(upgraded):
    result = run("worker", "--once", "memory.nope")
    assert result.exit_code == 1
    assert "unknown worker(s) memory.nope" in result.output
    assert "memory.summarise" in result.output  # lists the known ones


def test_serve_refuses_an_unupgraded_database(home):
    result = run("serve", "--port", "1")
    assert result.exit_code == 1
    assert "not at the current schema" in result.output and "caesar db upgrade" in result.output
    assert "listening" not in result.output


def test_serve_upgrade_creates_a_fresh_homes_database_first(home):
    """`make run` is `caesar serve --upgrade`: the migrations in serve's own process (one
    interpreter start fewer), then the usual start (here it stops at the taken port)."""
    import socket

    from caesar.config import load_settings
    from caesar.db import Database, migrate

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run("serve", "--upgrade", "--port", str(port))
    assert result.exit_code == 1
    assert re.search(r"database sqlite:///\S+: empty → \w+", result.output), result.output
    assert f"cannot listen on 127.0.0.1:{port}" in result.output
    assert migrate.is_current(Database(load_settings().sqlalchemy_url))


def test_serve_on_a_taken_port_says_so_and_exits(upgraded):
    """Issue #15: a second server printed "listening", then aborted with rc 134."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run("serve", "--port", str(port))
    assert result.exit_code == 1
    assert f"cannot listen on 127.0.0.1:{port}" in result.output
    assert "listening" not in result.output


def test_startup_summary_names_database_routes_and_workers(upgraded):
    from caesar.cli.main import startup_summary
    from caesar.cli.summary import zone_name
    from caesar.config import load_settings
    from caesar.services import Services

    settings = load_settings()
    built = Services.build(settings)
    try:
        lines = startup_summary(settings, built, run_workers=True)
    finally:
        built.close()
    text = "\n".join(lines)
    assert "database   sqlite:///" in text
    assert "embedder   minilm all-MiniLM-L6-v2" in text
    for task, target in settings.gateway.routes.items():
        assert f"route      {task} → {target}" in text
    # the defaults: no TTL (the sweep is not started), no age window, the host's zone
    assert "workers    " in text and "retention.sweep" not in text
    assert (
        "retention  off — nothing is deleted unless you forget it (retention.ttl_days sets a TTL)"
        in lines
    )
    assert "recall     past conversations of any age (no age window; age is a prior only)" in lines
    host = zone_name(settings.zone)
    assert f"timezone   {host} (the host's; the timezone setting names another)" in lines


def test_startup_summary_says_which_retention_and_window_are_in_force(upgraded, monkeypatch):
    from caesar.cli.main import startup_summary
    from caesar.config import load_settings
    from caesar.services import Services

    monkeypatch.setenv("CAESAR_RETENTION__TTL_DAYS", "30")
    monkeypatch.setenv("CAESAR_MEMORY__EPISODES_RECALL__MAX_AGE_DAYS", "90")
    monkeypatch.setenv("CAESAR_TIMEZONE", "Europe/Berlin")
    settings = load_settings()
    built = Services.build(settings)
    try:
        lines = startup_summary(settings, built, run_workers=True)
        remote = startup_summary(settings, built, run_workers=False)
        off = load_settings(retention={"enabled": False})
        off_lines = startup_summary(off, built, run_workers=True)
    finally:
        built.close()
    [workers] = [line for line in lines if line.startswith("workers")]
    assert "retention.sweep" in workers
    assert (
        "retention  chats and audit rows older than 30 days are deleted, with their summaries "
        "and excerpts (hourly sweep)"
    ) in lines
    assert any(
        line.endswith("(hourly sweep; by `caesar worker`, not this process)") for line in remote
    )
    assert (
        "recall     conversations older than 90 days are not recalled "
        "(memory.episodes_recall.max_age_days)"
    ) in lines
    assert "timezone   Europe/Berlin" in lines
    assert (
        "retention  off (retention.enabled = false) — the 30-day TTL is not applied; nothing is "
        "deleted unless you forget it"
    ) in off_lines


def test_serve_refuses_a_public_host_without_token(upgraded):
    result = run("serve", "--host", "0.0.0.0")
    assert result.exit_code == 1
    assert "api_token" in result.output and "listening" not in result.output


def test_episodes_reembed_fills_in_missing_windows(upgraded):
    from caesar.db.models import EpisodeSummary
    from caesar.memory.episodes.rows import episode_row

    db = Database(f"sqlite:///{upgraded / 'caesar.db'}")
    try:
        with db.write() as session:
            chat = audit.Audit().append(
                Scope(OWNER, session),
                audit.CHAT_COMPLETED,
                {
                    "messages": [{"role": "user", "content": "I adopted a cat"}],
                    "reply": "Congrats!",
                },
            )
            session.add(
                episode_row(
                    audit_log_id=chat.id,
                    summary="The operator adopted a cat.",
                    vector=None,
                    model="older-model",
                    created_at=chat.created_at,
                    scope=Scope(OWNER),
                )
            )
        result = run("episodes", "reembed")
        assert result.exit_code == 0, result.output
        assert (
            "re-embedded 1 episodes with all-MiniLM-L6-v2 (1 were of another model)"
            in result.output
        )
        assert "restart `caesar serve`" in result.output
        with db.read() as session:
            row = session.query(EpisodeSummary).one()
        assert row.model == "all-MiniLM-L6-v2" and row.passage_vectors is not None
        again = run("episodes", "reembed")
        assert "re-embedded 0 episodes" in again.output
    finally:
        db.dispose()


def test_models_prepare_finds_the_export_there(home: Path) -> None:
    """`make install` runs it; the suite's cache is exported already (conftest)."""
    result = run("models", "prepare")
    assert result.exit_code == 0, result.output
    assert str(MODEL_CACHE) in result.output and "already there" in result.output


def test_models_prepare_that_cannot_export_says_why_and_that_caesar_still_serves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("a file where the cache would go")
    monkeypatch.setenv("CAESAR_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CAESAR_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    result = run("models", "prepare")
    assert result.exit_code == 1
    said = " ".join(result.output.split())
    assert "could not export the embedder to ONNX" in said and "still serves" in said


def test_the_export_is_shared_by_every_home_unless_a_home_has_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from caesar.config import Settings

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    shared = tmp_path / "cache" / "caesar" / "models"
    assert Settings(home=tmp_path / "a").model_cache_dir == shared
    assert Settings(home=tmp_path / "b").model_cache_dir == shared
    (tmp_path / "old" / "models").mkdir(parents=True)  # exported there before issue #25
    assert Settings(home=tmp_path / "old").model_cache_dir == tmp_path / "old" / "models"
    chosen = Settings(home=tmp_path / "a", embedder={"cache_dir": tmp_path / "mine"})
    assert chosen.model_cache_dir == tmp_path / "mine"


def test_serve_says_where_to_open_the_chat_page():
    """Issue #25: `make run` prints where the chat page is; an address that listens everywhere
    is opened on loopback, and a token means logging in first."""
    from caesar.cli.summary import where_to_open
    from caesar.config import Settings

    assert where_to_open(Settings(host="127.0.0.1", port=8042)) == [
        "caesar listening on http://127.0.0.1:8042",
        "chat       http://127.0.0.1:8042/dashboard/chat",
    ]
    anywhere = Settings(host="0.0.0.0", port=9000, api_token="t" * 20)
    assert where_to_open(anywhere)[1] == (
        "chat       http://127.0.0.1:9000/dashboard/chat (log in with the API token)"
    )
    assert (
        where_to_open(Settings(host="::1", port=80))[1]
        == "chat       http://[::1]:80/dashboard/chat"
    )


def test_serves_connections_with_nagle_off():
    """`caesar serve` listens on its own socket (bind: a clear error before anything starts).
    asyncio turns Nagle off only where the socket says TCP; uvicorn writes a response's
    headers and body apart, and with Nagle on the body waited for the client's delayed ACK
    (~40 ms a turn that followed the last one closely)."""
    import asyncio
    import socket

    from caesar.cli.main import bind

    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    seen: dict[str, int] = {}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted = writer.get_extra_info("socket")
        seen["nodelay"] = accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, sock=sock)  # as uvicorn serves `sockets`
        async with server:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            await reader.read()
            writer.close()

    asyncio.run(main())
    assert seen["nodelay"] != 0
