"""`caesar import` of other assistants' exports (issue 48), end to end: the CLI finds the format,
writes each source conversation as one dated conversation into the right person, dedupes a
second import by the export's own ids, refuses a file it cannot read without writing anything,
names a conversation it skips and exits non-zero, resumes an import stopped halfway, and then
learns from the import ("learning N of M") until a question about it finds it."""

from __future__ import annotations

import json
import time
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import OWNER
from memory_helpers import events, write_config
from sqlalchemy import select
from typer.testing import CliRunner

from caesar import audit, import_learning, people
from caesar.brain import Brain
from caesar.cli.main import app as cli_app
from caesar.db.models import AuditLog, Conversation, Memory
from caesar.import_formats import FileBroken
from caesar.importer import import_path
from caesar.memory.scope import Scope

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def _ts(minutes: float) -> float:
    return (T0 + timedelta(minutes=minutes)).timestamp()


def _node(
    node_id: str, role: str, text: str, minutes: float, parent: str | None, children: list[str]
) -> dict[str, Any]:
    return {
        "id": node_id,
        "message": {
            "id": node_id,
            "author": {"role": role, "name": None, "metadata": {}},
            "create_time": _ts(minutes),
            "content": {"content_type": "text", "parts": [text]},
            "metadata": {},
            "recipient": "all",
        },
        "parent": parent,
        "children": children,
    }


def chatgpt_conversation(
    conv_id: str, turns: list[tuple[str, str]], start: float = 0
) -> dict[str, Any]:
    """A ChatGPT conversation with one branch: (role, text) turns a minute apart."""
    mapping: dict[str, Any] = {
        "root": {"id": "root", "message": None, "parent": None, "children": []}
    }
    parent = "root"
    for n, (role, text) in enumerate(turns):
        node_id = f"{conv_id}-{n}"
        mapping[node_id] = _node(node_id, role, text, start + n, parent, [])
        mapping[parent]["children"].append(node_id)
        parent = node_id
    return {
        "id": conv_id,
        "title": f"chat {conv_id}",
        "create_time": _ts(start),
        "update_time": _ts(start + len(turns)),
        "mapping": mapping,
        "current_node": parent,
    }


THERMOSTAT = chatgpt_conversation(
    "c-thermo",
    [
        ("user", "I keep waking up at 3am and the bedroom is warm."),
        ("assistant", "Try setting the bedroom thermostat to 18 °C for a week."),
        ("user", "I will try the thermostat at 18 degrees."),
        ("assistant", "Good luck, tell me how it goes."),
    ],
)
KAYAK = chatgpt_conversation(
    "c-kayak",
    [
        ("user", "I bought a red sea kayak called Marlin last weekend."),
        ("assistant", "Congratulations on the kayak!"),
    ],
    start=60 * 24 * 3,  # three days later, the next day's turn a day on
)


def _zip(path: Path, conversations: list[dict[str, Any]]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("conversations.json", json.dumps(conversations, ensure_ascii=False))
        archive.writestr("user.json", json.dumps({"id": "user-1"}))
    return path


def _cli(services, tmp_path: Path, *args: str):
    config = write_config(tmp_path / "caesar.toml", services.settings)
    return CliRunner().invoke(cli_app, [*args], env={"CAESAR_CONFIG": str(config)})


def _learning_services(make_services):
    return make_services(
        memory={
            "facts_extract": {"enabled": True},
            "episodes_summarise": {"enabled": True},
        },
        gateway={
            "routes": {"memory_extract": "offline:patterns", "memory_summarise": "offline:textrank"}
        },
    )


def _chats(services, person: int = OWNER) -> list[AuditLog]:
    return [r for r in events(services, audit.CHAT_COMPLETED) if r.person_id == person]


def test_a_chatgpt_export_becomes_dated_conversations(services, tmp_path):
    path = _zip(tmp_path / "export.zip", [THERMOSTAT, KAYAK])
    result = _cli(services, tmp_path, "import", str(path), "--no-learn")
    assert result.exit_code == 0, result.output
    assert "imported 2 conversations (ChatGPT export); 0 already there" in result.output
    rows = sorted(_chats(services), key=lambda r: r.created_at)
    assert [r.subject_key for r in rows] == ["import:chatgpt:c-thermo", "import:chatgpt:c-kayak"]
    thermo = rows[0]
    assert thermo.created_at == T0.replace(tzinfo=None)
    assert [m["content"] for m in thermo.payload["messages"]] == [
        "I keep waking up at 3am and the bedroom is warm.",
        "Try setting the bedroom thermostat to 18 °C for a week.",
        "I will try the thermostat at 18 degrees.",
    ]
    assert thermo.payload["reply"] == "Good luck, tell me how it goes."
    # each turn keeps when it was said
    assert thermo.payload["messages"][2]["at"] == "2026-03-02T09:02:00"
    assert thermo.payload["reply_at"] == "2026-03-02T09:03:00"
    with services.db.read() as session:
        conversation = session.get(Conversation, thermo.subject_id)
        assert (conversation.started_at, conversation.last_turn_at) == (
            datetime(2026, 3, 2, 9, 0),
            datetime(2026, 3, 2, 9, 3),
        )
    [record] = events(services, audit.IMPORT_COMPLETED)
    assert record.payload["format"] == "chatgpt" and record.payload["imported"] == 2
    assert record.payload["file"] == "export.zip"


def test_a_second_import_adds_nothing_and_a_later_export_only_the_new(services, tmp_path):
    first = _zip(tmp_path / "first.zip", [THERMOSTAT])
    assert _cli(services, tmp_path, "import", str(first), "--no-learn").exit_code == 0
    again = _cli(services, tmp_path, "import", str(first), "--no-learn")
    assert again.exit_code == 0, again.output
    assert "imported 0 conversations (ChatGPT export); 1 already there" in again.output
    later = _zip(tmp_path / "later.zip", [THERMOSTAT, KAYAK])
    assert _cli(services, tmp_path, "import", str(later), "--no-learn").exit_code == 0
    assert sorted(r.subject_key for r in _chats(services)) == [
        "import:chatgpt:c-kayak",
        "import:chatgpt:c-thermo",
    ]


def test_an_import_stopped_halfway_finishes_when_run_again(services, tmp_path):
    many = [
        chatgpt_conversation(f"c{n}", [("user", f"note {n}"), ("assistant", "ok")])
        for n in range(7)
    ]
    path = _zip(tmp_path / "many.zip", many)
    seen = 0

    def stop_after_four(n: int) -> None:  # as Ctrl-C would, after four batches of one
        nonlocal seen
        seen += n
        if seen == 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        import_path(services, path, scope=Scope(OWNER), batch_size=1, on_progress=stop_after_four)
    assert len(_chats(services)) == 4
    report = import_path(services, path, scope=Scope(OWNER), batch_size=2)
    assert (report.imported, report.duplicates) == (3, 4)
    assert sorted(r.subject_key for r in _chats(services)) == [
        f"import:chatgpt:c{n}" for n in range(7)
    ]


def test_a_file_that_cannot_be_read_changes_nothing(services, tmp_path):
    text = json.dumps([THERMOSTAT, KAYAK])
    truncated = tmp_path / "conversations.json"
    truncated.write_text(text[: len(text) // 2], encoding="utf-8")
    result = _cli(services, tmp_path, "import", str(truncated))
    assert result.exit_code == 1
    said = " ".join(result.output.split())
    # rich wraps a long path wherever the terminal's width falls
    assert "conversations.json" in "".join(said.split())
    assert "line 1" in said and "column" in said
    broken_zip = tmp_path / "export.zip"
    broken_zip.write_bytes(_zip(tmp_path / "ok.zip", [THERMOSTAT]).read_bytes()[:200])
    result = _cli(services, tmp_path, "import", str(broken_zip))
    assert result.exit_code == 1 and "export.zip" in "".join(result.output.split())
    garbage = tmp_path / "notes.txt"
    garbage.write_text("dear diary\n", encoding="utf-8")
    result = _cli(services, tmp_path, "import", str(garbage))
    assert result.exit_code == 1 and "notes.txt" in "".join(result.output.split())
    assert _chats(services) == [] and events(services, audit.IMPORT_COMPLETED) == []


def test_formats_are_named_or_refused(services, tmp_path):
    path = _zip(tmp_path / "export.zip", [THERMOSTAT])
    unknown = _cli(services, tmp_path, "import", str(path), "--format", "gemini")
    assert unknown.exit_code == 1
    assert "chatgpt, claude, openwebui, caesar" in " ".join(unknown.output.split())
    wrong = _cli(services, tmp_path, "import", str(path), "--format", "claude")
    assert wrong.exit_code == 1 and "ChatGPT" in wrong.output
    assert _chats(services) == []
    right = _cli(services, tmp_path, "import", str(path), "--format", "chatgpt", "--no-learn")
    assert right.exit_code == 0, right.output


def test_an_unreadable_conversation_is_named_and_the_rest_imported(services, tmp_path):
    broken = chatgpt_conversation("c-broken", [("user", "hello"), ("assistant", "hi")])
    broken["current_node"] = "no-such-node"
    path = _zip(tmp_path / "export.zip", [THERMOSTAT, broken, KAYAK])
    result = _cli(services, tmp_path, "import", str(path), "--no-learn")
    assert result.exit_code == 1
    assert "c-broken" in result.output
    assert "imported 2 conversations (ChatGPT export); 0 already there; 1 skipped" in result.output
    assert len(_chats(services)) == 2


def test_a_valid_file_with_nothing_to_import_says_so(services, tmp_path):
    empty = chatgpt_conversation("c-empty", [])
    path = _zip(tmp_path / "export.zip", [empty])
    result = _cli(services, tmp_path, "import", str(path))
    assert result.exit_code == 1
    assert "nothing to import in export.zip" in " ".join(result.output.split())
    assert _chats(services) == []


def test_into_the_person_named(make_services, tmp_path):
    services = make_services()
    with services.db.write() as session:
        people.add(session, services.audit, "sam")
    path = _zip(tmp_path / "export.zip", [KAYAK])
    result = _cli(services, tmp_path, "import", str(path), "--person", "sam", "--no-learn")
    assert result.exit_code == 0, result.output
    [row] = events(services, audit.CHAT_COMPLETED)
    with services.db.read() as session:
        assert row.person_id == people.named(session, "sam").id != OWNER


def test_learned_after_import_and_recalled(make_services, tmp_path):
    services = _learning_services(make_services)
    path = _zip(tmp_path / "export.zip", [THERMOSTAT, KAYAK])
    result = _cli(services, tmp_path, "import", str(path))
    assert result.exit_code == 0, result.output
    assert "learned 2 conversations" in result.output
    [record] = import_learning.recent(services, Scope(OWNER))
    state = import_learning.progress(services, Scope(OWNER), record.first_id, record.last_id)
    assert (state.done, state.total, state.text()) == (2, 2, "learned")
    # the dated memories keep the day each turn was said
    with services.db.read() as session:
        kayak = session.scalars(
            select(Memory).where(Memory.text.contains("kayak called Marlin"))
        ).all()
    assert kayak and all(m.said_at.date() == (T0 + timedelta(days=3)).date() for m in kayak)
    # something said only in the imported history reaches the prompt
    ctx = Brain(services).prepare("What is my kayak called?", scope=Scope(OWNER))
    assert "Marlin" in ctx.messages[0]["content"]
    assert ctx.recalled


def test_learning_counts_only_what_the_workers_have_read(make_services, tmp_path):
    services = _learning_services(make_services)
    path = _zip(tmp_path / "export.zip", [THERMOSTAT, KAYAK])
    assert _cli(services, tmp_path, "import", str(path), "--no-learn").exit_code == 0
    [record] = import_learning.recent(services, Scope(OWNER))
    before = import_learning.progress(services, Scope(OWNER), record.first_id, record.last_id)
    assert (before.done, before.total, before.text()) == (0, 2, "learning 0 of 2")
    from caesar.workers import run_until_caught_up

    run_until_caught_up(services.workers["memory.extract"])
    half = import_learning.progress(services, Scope(OWNER), record.first_id, record.last_id)
    assert half.done == 0  # read for facts, not yet summarised
    for name in ("memory.summarise", "memory.passages"):
        run_until_caught_up(services.workers[name])
    after = import_learning.progress(services, Scope(OWNER), record.first_id, record.last_id)
    assert after.finished and after.done == 2
    # another person sees none of it
    with services.db.write() as session:
        other = people.add(session, services.audit, "kim")[0].id
    assert import_learning.recent(services, Scope(other)) == []
    assert (
        import_learning.progress(services, Scope(other), record.first_id, record.last_id).total == 0
    )


def test_file_broken_is_an_input_error(services, tmp_path):
    path = tmp_path / "c.json"
    path.write_text("[{", encoding="utf-8")
    with pytest.raises(FileBroken):
        import_path(services, path, scope=Scope(OWNER))
    assert _chats(services) == []


def test_custom_instructions_become_what_the_person_said_about_themselves(make_services, tmp_path):
    from test_import_formats import chain, custom_instructions, gm, gpt

    services = _learning_services(make_services)
    told = custom_instructions(
        "I keep a gluten-free diet because of coeliac disease.", "Keep answers short."
    )
    chats = [
        gpt(f"c-{n}", *chain(told, gm("user", said, t=10 + n), gm("assistant", "Sure.", t=20 + n)))
        for n, said in enumerate(["Plan a walk in the hills.", "What is a good book to read?"])
    ]
    path = _zip(tmp_path / "export.zip", chats)
    result = _cli(services, tmp_path, "import", str(path))
    assert result.exit_code == 0, result.output
    # the two chats and the instructions they both carried, once
    assert "imported 3 conversations (ChatGPT export)" in result.output
    with services.db.read() as session:
        standing = session.scalars(select(Memory).where(Memory.kind != "said")).all()
    assert any("gluten-free" in m.text for m in standing), [m.text for m in standing]
    ctx = Brain(services).prepare("Can you suggest a dinner recipe?", scope=Scope(OWNER))
    assert "gluten-free" in ctx.messages[0]["content"]


def test_claude_and_open_webui_exports_land_as_dated_conversations(services, tmp_path):
    from test_import_formats import claude, cm, om, owui

    conversation = claude(
        "k-1",
        [
            cm("h1", "human", "Mi perro se llama Toby 🐶", 1),
            cm("a1", "assistant", "¡Qué nombre tan bonito!", 2, "h1"),
        ],
    )
    path = tmp_path / "claude.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("conversations.json", json.dumps([conversation], ensure_ascii=False))
        archive.writestr("users.json", "[]")
    assert _cli(services, tmp_path, "import", str(path), "--no-learn").exit_code == 0
    webui = owui(
        "w-1",
        {
            "u1": om("u1", "user", "My sister lives in Graz.", 10, None, ["a1"]),
            "a1": om("a1", "assistant", "Graz is lovely.", 20, "u1", []),
        },
        current="a1",
    )
    owui_path = tmp_path / "chat-export.json"
    owui_path.write_text(json.dumps([webui]), encoding="utf-8")
    result = _cli(services, tmp_path, "import", str(owui_path), "--no-learn")
    assert result.exit_code == 0, result.output
    assert "(Open WebUI chat export)" in " ".join(result.output.split())
    rows = {r.subject_key: r for r in _chats(services)}
    assert set(rows) == {"import:claude:k-1", "import:openwebui:w-1"}
    said = rows["import:claude:k-1"]
    assert said.payload["messages"][0]["content"] == "Mi perro se llama Toby 🐶"
    assert said.payload["reply"] == "¡Qué nombre tan bonito!"
    assert said.created_at == datetime(2024, 6, 1, 10, 0)
    assert rows["import:openwebui:w-1"].payload["reply"] == "Graz is lovely."


def test_the_import_learns_in_niced_threads_and_leaves_the_process_as_it_was(
    make_services, tmp_path
):
    import os
    import threading

    from caesar.workers import WorkerRunner

    services = _learning_services(make_services)
    before = os.getpriority(os.PRIO_PROCESS, 0)
    seen: list[int] = []
    extract = services.workers["memory.extract"]

    class Watched(type(extract)):  # the real worker, its thread's priority noted
        def catch_up_step(self) -> int:
            seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
            return super().catch_up_step()

    runner = WorkerRunner([Watched(services)], catch_up_every=0.05, nice=10)
    runner.start()
    deadline = time.monotonic() + 10
    while not seen and time.monotonic() < deadline:
        time.sleep(0.05)
    runner.stop()
    assert seen and seen[0] == min(before + 10, 19)
    assert os.getpriority(os.PRIO_PROCESS, 0) == before
    path = _zip(tmp_path / "export.zip", [KAYAK])
    assert _cli(services, tmp_path, "import", str(path)).exit_code == 0
    assert os.getpriority(os.PRIO_PROCESS, 0) == before  # the CLI's learning too
