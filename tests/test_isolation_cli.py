"""The isolation matrix on the command line (issue #23): `caesar --person B …` for every command
that reads or changes a person's memory, export and import included, in the world of
test_isolation.py (A is the owner, B has overlapping fact keys and a near-identical chat).

The table is the test, as for the routes: `CLI_MATRIX` has one check per command of the
`caesar` command tree and `NOT_A_PERSONS` names, with the reason, the commands that are no
person's surface (the server, the database, the people themselves); a command in neither fails
the test, and so does an entry for a command that is gone. Each check runs the real command
in-process as B and fails on any of A's words in what it prints; afterwards A's export is what
it was before B started (nothing of A's changed), on SQLite and PostgreSQL.

`caesar --person B mcp` (stdio) is the MCP table of test_isolation.py, run over both transports.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
import pytest
import typer.main
from conftest import OWNER
from memory_helpers import write_config
from test_isolation import A_WORDS, World, built_world
from typer.testing import CliRunner

from caesar.cli.main import app as cli_app
from caesar.config import ProactiveSettings
from caesar.memory.scope import Scope

B_IMPORTS = "My dog Rex and I went sailing off Husavik to watch humpback whales."
# A and B both import this one (the same words, the same time): B's copy is B's, not "already
# there" because A has it.
BOTH_IMPORT = {
    "created_at": "2026-03-01T09:00:00Z",
    "messages": [
        {"role": "user", "content": "I planted tulip bulbs along the garden fence today."},
        {"role": "assistant", "content": "They will flower in spring."},
    ],
}


class Cli:
    """`caesar …` in this process, on the world's database (through a config file, as a user
    runs it)."""

    def __init__(self, world: World, workdir: Path) -> None:
        self.world = world
        self.workdir = workdir  # where the commands' input files go

    def run(self, *args: str) -> Any:
        return CliRunner().invoke(cli_app, list(args))

    def as_b(self, *args: str, ok: bool = True) -> str:
        """`caesar --person B ARGS`: what it printed (stdout and stderr), none of A's words."""
        result = self.run("--person", "B", *args)
        said = result.output
        leaked = [w for w in A_WORDS if w in said]
        assert not leaked, (args, leaked, said)
        assert (result.exit_code == 0) is ok, (args, result.exit_code, said, result.exception)
        return str(said)

    def a_export(self) -> list[dict[str, Any]]:
        """A's export, without the header (its time and counts): what "A's memory" is."""
        result = self.run("export")
        assert result.exit_code == 0, result.output
        records = [json.loads(line) for line in result.stdout.splitlines() if line]
        assert records[0]["type"] == "export"
        return records[1:]


@pytest.fixture
def cli(
    make_services: Any, db_url: str, llm: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Cli]:
    with built_world(make_services, db_url, llm) as world:
        # a proactive run, for `caesar proactive run` as B
        checkin = ProactiveSettings(
            name="checkin", prompt="Where did I fly with my dog?", interval_seconds=3600
        )
        settings = world.services.settings.model_copy(update={"proactive": [checkin]})
        monkeypatch.setenv("CAESAR_CONFIG", str(write_config(tmp_path / "caesar.toml", settings)))
        yield Cli(world, tmp_path)


# -- the checks, one per command (run in this order: the ones that change B's memory last) ----
def chat(c: Cli) -> None:
    c.as_b("chat", "-m", "Where did I fly with my dog?")
    _prompt_holds_nothing_of_a(c)


def proactive_run(c: Cli) -> None:
    c.as_b("proactive", "run", "checkin")
    _prompt_holds_nothing_of_a(c)


def proactive_list(c: Cli) -> None:
    assert "checkin" in c.as_b("proactive", "list")


def recall(c: Cli) -> None:
    said = c.as_b("recall", "flying with my dog to the spice market", "--no-threshold", "--json")
    found = json.loads(said)["episodes"]
    assert found and all(e["episode_id"] != c.world.a_episode for e in found)


def semantic_recall(c: Cli) -> None:
    c.as_b("semantic-recall", "spice market in Zanzibar")


def facts_list(c: Cli) -> None:
    facts = json.loads(c.as_b("facts", "list", "--json"))
    assert {f["key"]: f["value"] for f in facts}["dog_name"] == "Rex"


def facts_history(c: Cli) -> None:
    assert "Rex" in c.as_b("facts", "history", "dog_name")
    said = c.as_b("facts", "history", "trip", ok=False)  # A's key alone: not found for B
    assert "no fact with key 'trip'" in said


def memories_list(c: Cli) -> None:
    listed = json.loads(c.as_b("memories", "list", "--history", "--json"))
    assert all(m["id"] != c.world.a_memory for m in listed)


def memories_said(c: Cli) -> None:
    # A's chat gave dated memories (issue #45); B's listing has their own, none of A's
    owner = c.world.services.owner_id()
    assert any("Zanzibar" in m.text for m in c.world.services.dated.list(scope=Scope(owner)))
    listed = json.loads(c.as_b("memories", "said", "--json"))
    assert listed and any("Reykjavik" in m["text"] for m in listed)
    assert not any(word in m["text"] for m in listed for word in A_WORDS)


def memories_search(c: Cli) -> None:
    assert json.loads(c.as_b("memories", "search", "Marmaduke", "--json")) == []
    assert json.loads(c.as_b("memories", "search", "Zanzibar", "--said", "--json")) == []
    mine = json.loads(c.as_b("memories", "search", "Reykjavik", "--said", "--json"))
    assert mine and all("Reykjavik" in m["text"] for m in mine)


def _a_said(c: Cli) -> int:
    """One of A's dated memories (issue #45): what A's chat said of Zanzibar."""
    owner = c.world.services.owner_id()
    return next(
        m.id for m in c.world.services.dated.list(scope=Scope(owner)) if "Zanzibar" in m.text
    )


def memories_add(c: Cli) -> None:
    assert "added #" in c.as_b("memories", "add", "My dog Rex eats anything", "--kind", "profile")


def memories_edit(c: Cli) -> None:
    for memory in (c.world.a_memory, _a_said(c)):
        said = c.as_b("memories", "edit", str(memory), "Rex eats fish", ok=False)
        assert "no memory with id" in said


def memories_forget(c: Cli) -> None:
    for memory in (c.world.a_memory, _a_said(c)):
        said = c.as_b("memories", "forget", str(memory), ok=False)
        assert "no memory with id" in said


def conversations_list(c: Cli) -> None:
    listed = json.loads(c.as_b("conversations", "list", "--json", "--matching", "spring"))
    assert listed and all(conv["id"] != c.world.a_conversation for conv in listed)


def conversations_show(c: Cli) -> None:
    said = c.as_b("conversations", "show", str(c.world.a_conversation), ok=False)
    assert "no conversation" in said


def export(c: Cli) -> None:
    records = [json.loads(line) for line in c.as_b("export").splitlines() if line.startswith("{")]
    assert "Reykjavik" in json.dumps(records)  # B's own, so the check above checked something
    assert all(r.get("id") != c.world.a_chat for r in records if r["type"] == "audit")


def import_(c: Cli) -> None:
    mine = c.workdir / "b.jsonl"
    said = [{"role": "user", "content": B_IMPORTS}, {"role": "assistant", "content": "Lovely."}]
    lines = [{"created_at": "2026-04-01T10:00:00Z", "messages": said}, BOTH_IMPORT]
    mine.write_text("".join(json.dumps(line) + "\n" for line in lines))
    said_back = c.as_b("import", str(mine), "--no-learn")
    assert "imported 2 conversations (caesar JSONL); 0 already there" in said_back


def imports(c: Cli) -> None:
    listed = c.as_b("imports")
    assert "b.jsonl" in listed and "a.jsonl" not in listed  # A imported a.jsonl first


def facts_set(c: Cli) -> None:
    c.as_b("facts", "set", "trip", "Reykjavik")  # A's key, as B: B's own fact


def facts_delete(c: Cli) -> None:
    assert "deleted" in c.as_b("facts", "delete", "dog_name")  # B's Rex; A's stays


def forget(c: Cli) -> None:
    said = c.as_b("forget", str(c.world.a_conversation), "--yes", ok=False)
    assert "no conversation" in said
    # "my dog" is in A's chat too: B's forget reaches B's conversations alone
    mine = json.loads(c.as_b("conversations", "list", "--json", "--matching", "my dog"))
    assert len(mine) >= 2 and all(conv["id"] != c.world.a_conversation for conv in mine)
    forgot = c.as_b("forget", "--matching", "my dog", "--yes")
    assert f"forgot {len(mine)} conversation(s)" in forgot
    assert json.loads(c.as_b("conversations", "list", "--json")) != []  # the tulips are left


CLI_MATRIX: dict[tuple[str, ...], Callable[[Cli], None]] = {
    ("chat",): chat,
    ("proactive", "run"): proactive_run,
    ("proactive", "list"): proactive_list,
    ("recall",): recall,
    ("semantic-recall",): semantic_recall,
    ("facts", "list"): facts_list,
    ("facts", "history"): facts_history,
    ("memories", "list"): memories_list,
    ("memories", "search"): memories_search,
    ("memories", "said"): memories_said,
    ("conversations", "list"): conversations_list,
    ("conversations", "show"): conversations_show,
    ("export",): export,
    ("import",): import_,
    ("imports",): imports,
    ("facts", "set"): facts_set,
    ("facts", "delete"): facts_delete,
    ("memories", "add"): memories_add,
    ("memories", "edit"): memories_edit,
    ("memories", "forget"): memories_forget,
    ("forget",): forget,
}
# No person's surface: what each does and why `--person` has nothing to scope there.
NOT_A_PERSONS: dict[tuple[str, ...], str] = {
    ("serve",): "the server: its routes are test_isolation.py's MATRIX",
    ("mcp",): "stdio MCP as a person: test_isolation.py's MCP table runs over it",
    ("worker",): "learns from everyone's chats, each into its person's memory "
    "(test_person_scope.py::test_a_worker_learns_from_a_persons_chat_into_their_memory)",
    ("episodes", "retry-failed"): "re-summarises failed chats of everyone, into their own "
    "person's memory; prints counts",
    ("episodes", "reembed"): "re-embeds every episode for a new model; prints counts",
    ("db", "upgrade"): "the schema",
    ("db", "vectors"): "moves every vector into pgvector; prints counts",
    ("db", "words"): "indexes everyone's full text again under FTS5's words; prints counts",
    ("db", "backup"): "a copy of the whole database file: the host's, like the file itself",
    ("models", "prepare"): "the embedder's files",
    ("people", "add"): "the people themselves (test_people.py)",
    ("people", "list"): "the people themselves (test_people.py)",
    ("people", "rename"): "the people themselves (test_people.py)",
    ("people", "rotate"): "the people themselves (test_people.py)",
    ("people", "link"): "the people themselves (test_frontend_token.py)",
    ("people", "remove"): "the people themselves (test_person_scope.py, removing a person)",
}


def _commands(group: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every leaf command of the `caesar` tree, as the words that run it."""
    for name in group.list_commands(click.Context(group)):
        command = group.get_command(click.Context(group), name)
        if hasattr(command, "list_commands"):
            yield from _commands(command, (*prefix, name))
        else:
            yield (*prefix, name)


def _prompt_holds_nothing_of_a(c: Cli) -> None:
    sent = str(c.world.llm.requests[-1]["json"])
    assert not [word for word in A_WORDS if word in sent], sent


def test_every_command_as_the_other_person_leaks_nothing_and_changes_nothing_of_theirs(cli):
    commands = set(_commands(typer.main.get_command(cli_app)))
    assert not set(CLI_MATRIX) & set(NOT_A_PERSONS)
    known = set(CLI_MATRIX) | set(NOT_A_PERSONS)
    assert commands == known, {
        "commands the matrix lacks": sorted(commands - known),
        "entries for commands that are gone": sorted(known - commands),
    }
    a_before = cli.a_export()
    # A has the tulips too, imported first: B's import of the same must not count as "there"
    a_file = cli.workdir / "a.jsonl"
    a_file.write_text(json.dumps(BOTH_IMPORT) + "\n")
    assert "imported 1 conversations" in cli.run("import", str(a_file), "--no-learn").output
    a_with_tulips = cli.a_export()
    assert len(a_with_tulips) > len(a_before)

    for check in CLI_MATRIX.values():
        check(cli)

    assert cli.a_export() == a_with_tulips
    found = cli.world.services.episodes.preview("Zanzibar spice market", scope=Scope(OWNER))
    assert [e.episode_id for e in found][:1] == [cli.world.a_episode]
