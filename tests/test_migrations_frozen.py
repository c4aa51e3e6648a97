"""The migrations carry their own code (STYLE.md: a migration that imports today's module changes
meaning when the module does), and where what they wrote must still be what live code reads,
the frozen copies and live code agree.

Two halves:
- enforcement, read from the source with `ast`: no migration imports `caesar.memory` (lazy
  imports inside functions count; `if TYPE_CHECKING:` bodies do not), nor anything of caesar's
  but its frozen copies and the exception tree; and loading them all loads no `caesar.memory`;
- agreement: the hash 0006 keyed chats by is the one live turns are matched by; the 3-turn
  windows 0005, 0006, 0015 and 0017 derive are the ones retention derives again to delete them;
  the tables, keys and schema 0007, 0009, 0015 and 0017 made are the ones live code makes for
  new people and installs late, and reads.

When an agreement test fails, live code changed something data already depends on: write a
migration that rebuilds what the old version wrote (with its own frozen copy), and point the
test at that copy — never edit an old migration's copy to follow live code.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from caesar.db import Database, migrate
from caesar.db.migrations import _frozen_pgvector, _frozen_sqlite, _frozen_turns
from caesar.memory import conversations, passages, transcript
from caesar.memory.engine import person_tables, pg_words, pgvector_migration
from caesar.memory.engine import sqlite as live_sqlite

MIGRATIONS = Path(migrate.__file__).parent / "migrations"
# What migrations run: each revision, and the frozen copies they share.
CARRIED = sorted([*(MIGRATIONS / "versions").glob("*.py"), *MIGRATIONS.glob("_frozen_*.py")])
# Of caesar's, only these: the frozen copies, and the exception tree a migration's refusal is
# raised from (each boundary translates CaesarError).
ALLOWED = ("caesar.db.migrations._frozen_", "caesar.errors")


# -- enforcement --------------------------------------------------------------------------------
def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _imported(path: Path) -> list[tuple[int, str]]:
    """(line, dotted name) of every import that can run, at any depth, `if TYPE_CHECKING:`
    bodies left out; `from a import b` gives `a.b`, which names either a module or a name in
    one. `importlib.import_module("…")` and `__import__("…")` with a literal count too."""
    found: list[tuple[int, str]] = []
    pending: list[ast.AST] = [ast.parse(path.read_text(encoding="utf-8"), filename=str(path))]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            pending.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            # a relative import cannot run in a revision file (no package): named as written
            base = "." * node.level + (node.module or "")
            found += [(node.lineno, f"{base}.{alias.name}".lstrip(".")) for alias in node.names]
        elif isinstance(node, ast.Call) and node.args:
            func, first = node.func, node.args[0]
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("import_module", "__import__") and isinstance(first, ast.Constant):
                found.append((node.lineno, str(first.value)))
        pending.extend(ast.iter_child_nodes(node))
    return sorted(found)


def _is_memory(name: str) -> bool:
    return name == "caesar.memory" or name.startswith("caesar.memory.")


def test_the_checker_sees_lazy_aliased_and_dynamic_imports(tmp_path: Path):
    source = tmp_path / "9999_example.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "from caesar import memory\n"
        "if TYPE_CHECKING:\n"
        "    from caesar.memory.passages import windows\n"
        "def upgrade():\n"
        "    import caesar.memory.engine.sqlite as s\n"
        "    importlib.import_module('caesar.memory.conversations')\n"
    )
    memory = [name for _, name in _imported(source) if _is_memory(name)]
    assert memory == [
        "caesar.memory",
        "caesar.memory.engine.sqlite",
        "caesar.memory.conversations",
    ]


@pytest.mark.parametrize("path", CARRIED, ids=lambda p: p.name)
def test_no_migration_imports_caesar_memory(path: Path):
    reached = [f"{path.name}:{line} {name}" for line, name in _imported(path) if _is_memory(name)]
    assert not reached, (
        f"{reached}: a migration must carry the code it runs. Copy what it needs, as it is "
        "now, into the migration or a module of src/caesar/db/migrations/_frozen_*.py, and "
        "hold it equal to live code in this file where the two must agree"
    )


@pytest.mark.parametrize("path", CARRIED, ids=lambda p: p.name)
def test_migrations_import_nothing_of_caesar_but_frozen_copies_and_the_errors(path: Path):
    reached = [
        f"{path.name}:{line} {name}"
        for line, name in _imported(path)
        if name.split(".")[0] == "caesar" and not name.startswith(ALLOWED)
    ]
    assert not reached, f"{reached}: copy it into the migration (see the module doc)"


def test_loading_every_migration_loads_no_caesar_memory():
    """Transitively too: a module a migration imports may itself import caesar.memory."""
    script = (
        "import importlib.util, json, sys\n"
        f"for n, path in enumerate({[str(p) for p in CARRIED]!r}):\n"
        "    spec = importlib.util.spec_from_file_location(f'migration_{n}', path)\n"
        "    spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('caesar'))))\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    loaded = json.loads(run.stdout)
    assert "caesar.db.migrations._frozen_turns" in loaded  # the script did load them
    assert [m for m in loaded if _is_memory(m)] == []


# -- agreement: turns, windows, the conversation hash ------------------------------------------
ROLES = ["user", "assistant", "system", "tool", "", "User", "developer"]
SAMPLES = [
    "",
    "   ",
    "\t\n  \u00a0\u2003\u3000",  # tab, newline, no-break, em and ideographic spaces
    "Hello, world",
    "  leading and   inner \n\n spaces\t",
    "I'm allergic to peanuts 🥜, so I check labels.",
    "東京で会いましょう。明日は？",
    "مرحبا بالعالم",
    "e\u0301te\u0301 — café, naïve, Ørsted",
    "zero\u200bwidth and \ufeffBOM",
    'quotes "double" and \\ backslash and </user> tags',
    "x" * 50_000,
    " ".join(["word"] * 20_000),
]
contents = st.one_of(
    st.sampled_from(SAMPLES),
    st.text(max_size=200),
    st.text(alphabet=" \t\n\u00a0\u2003\u3000\u200bab🥜東é", max_size=40),
)
messages = st.fixed_dictionaries(
    {"role": st.sampled_from(ROLES), "content": contents},
)
# Chat payloads as the audit log holds them, odd ones included: messages that are not
# objects, without content or role, contents that are not text, replies missing or not text.
raw_messages = st.one_of(
    messages,
    st.fixed_dictionaries({"role": st.sampled_from(ROLES)}),
    st.fixed_dictionaries({"content": contents}),
    st.fixed_dictionaries(
        {"role": st.sampled_from(ROLES), "content": st.one_of(st.integers(), st.none())}
    ),
    st.sampled_from(["a string", 7, None, ["a", "list"]]),
)
payloads = st.fixed_dictionaries(
    {"messages": st.lists(raw_messages, max_size=80)},
    optional={"reply": st.one_of(contents, st.none(), st.integers()), "temporary": st.booleans()},
)
MANY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _chat(n: int, content: str = "turn {i}: what did we say about the lake?") -> list[Any]:
    return [
        {"role": ("user", "assistant")[i % 2], "content": content.format(i=i)} for i in range(n)
    ]


FIXED_TURNS = [
    [],
    [{"role": "system", "content": "You are caesar."}],
    _chat(1),
    _chat(3),
    _chat(34),  # just past 32 windows of 3: the stride widens
    _chat(1_000),
    [{"role": r, "content": c} for r in ROLES for c in SAMPLES],
]


@pytest.mark.parametrize("turns", FIXED_TURNS, ids=lambda t: f"{len(t)}-turns")
def test_turns_key_agrees_with_live_code_on_real_looking_chats(turns: list[Any]):
    # as 0006 calls it: on a history, and on the whole turn with its reply
    assert _frozen_turns.turns_key(turns) == conversations.turns_key(turns)
    replied = [*turns, {"role": "assistant", "content": "Sure — 好的 🥜"}]
    assert _frozen_turns.turns_key(replied) == conversations.turns_key(replied)


@MANY
@given(st.lists(st.one_of(messages, st.fixed_dictionaries({"role": st.sampled_from(ROLES)}))))
def test_turns_key_agrees_with_live_code(turns: list[Any]):
    assert _frozen_turns.turns_key(turns) == conversations.turns_key(turns)


@MANY
@given(payloads)
def test_conversation_turns_and_windows_agree_with_live_code(payload: dict[str, Any]):
    turns = _frozen_turns.conversation_turns(payload)
    assert turns == transcript.conversation_turns(payload)
    assert _frozen_turns.window_turns(turns) == passages.window_turns(turns)
    assert _frozen_turns.windows(turns) == passages.windows(turns)


ODD_PAYLOADS = [
    {},
    {"messages": []},
    {"messages": _chat(4), "reply": ""},
    {"messages": _chat(4), "reply": None},
    {"messages": _chat(4), "reply": 7},
    {"messages": _chat(4)},
    {"reply": "only a reply"},
    {"messages": ["text", 3, None, {"role": "user"}, {"content": "no role"}], "reply": "ok"},
    {"messages": [{"role": "user", "content": 42}, {"role": "assistant", "content": None}]},
    {"messages": [{"role": "system", "content": "recalled"}, {"role": "tool", "content": "{}"}]},
    {"messages": _chat(2), "reply": "  \n ", "temporary": True},
]


@pytest.mark.parametrize("payload", ODD_PAYLOADS)
def test_conversation_turns_agree_with_live_code_on_odd_payloads(payload: dict[str, Any]):
    turns = _frozen_turns.conversation_turns(payload)
    assert turns == transcript.conversation_turns(payload)
    assert _frozen_turns.windows(turns) == passages.windows(turns)


@pytest.mark.parametrize("turns", FIXED_TURNS, ids=lambda t: f"{len(t)}-turns")
def test_windows_agree_with_live_code_on_real_looking_chats(turns: list[Any]):
    payload = {"messages": turns, "reply": "And that was the lake."}
    frozen = _frozen_turns.windows(_frozen_turns.conversation_turns(payload))
    assert frozen == passages.windows(transcript.conversation_turns(payload))


def test_window_spans_agree_with_live_code():
    assert (_frozen_turns.WINDOW_TURNS, _frozen_turns.MAX_WINDOWS) == (
        passages.WINDOW_TURNS,
        passages.MAX_WINDOWS,
    )
    for n in range(0, 1_200):
        assert _frozen_turns.window_spans(n) == passages.window_spans(n), n
    for size in range(1, 6):
        for cap in range(1, 40):
            for n in range(0, 150):
                frozen = _frozen_turns.window_spans(n, size, cap)
                assert frozen == passages.window_spans(n, size, cap), (n, size, cap)


# -- agreement: SQLite's tables and the windows' rows ------------------------------------------
PEOPLE = [1, 2, 17, 4_096, 10**6]


def test_sqlite_tables_and_keys_agree_with_live_code():
    assert _frozen_sqlite.SQLITE_TOKENIZE == person_tables.SQLITE_TOKENIZE
    assert _frozen_sqlite.PERSON_SHIFT == person_tables.PERSON_SHIFT
    assert _frozen_sqlite.EPISODE_MASK == person_tables.EPISODE_MASK
    assert _frozen_sqlite.WINDOW_SLOTS == live_sqlite.WINDOW_SLOTS
    assert _frozen_turns.MAX_WINDOWS <= _frozen_sqlite.WINDOW_SLOTS
    assert _frozen_sqlite.CONVERSATION_TEXT == person_tables.CONVERSATION_TEXT
    for person in PEOPLE:
        # 0017 made these for the people there were; live code makes them for each new one
        live = person_tables.PersonTables(person)
        assert _frozen_sqlite.person_index_ddl(person) == live.ddl()
        assert _frozen_sqlite.fts_table(person) == live.fts
        assert _frozen_sqlite.window_table(person) == live.windows
        assert _frozen_sqlite.person_keys(person) == live.rowids()
        assert _frozen_sqlite.fts_key(person, 12_345) == live.rowid(12_345)
    texts = ["one two three", "two three four", "東京 🥜"]
    for episode_id in (1, 2, 63, 64, 10_000):
        assert _frozen_sqlite.rowids(episode_id) == live_sqlite.rowids(episode_id)
        frozen_rows = _frozen_sqlite.sqlite_rows(episode_id, texts)
        assert frozen_rows == live_sqlite.sqlite_rows(episode_id, texts)


def _statements(run: Any) -> list[str]:
    """The statements `run(connection)` sends to a real (in-memory) SQLite."""
    engine = sa.create_engine("sqlite://")
    sent: list[str] = []
    sa.event.listen(engine, "before_cursor_execute", lambda _c, _cur, sql, *_: sent.append(sql))
    with engine.begin() as connection:
        run(connection)
    engine.dispose()
    return sent


@pytest.mark.parametrize("person", PEOPLE)
def test_dropping_a_persons_tables_agrees_with_live_code(person: int):
    frozen = _statements(lambda c: _frozen_sqlite.drop_person_index(c, person))
    assert frozen == _statements(person_tables.PersonTables(person).drop)


@pytest.fixture
def chats_db(tmp_path: Path) -> Iterator[tuple[Database, list[int]]]:
    """A SQLite database at head with episodes of real-looking chats: (it, their ids)."""
    db = Database(f"sqlite:///{tmp_path / 'caesar.db'}")
    migrate.upgrade(db)
    chats: list[dict[str, Any]] = [
        {"messages": _chat(5), "reply": "The lake was cold."},
        {"messages": [{"role": "system", "content": "memory"}, *_chat(40)], "reply": "ok"},
        {"messages": [{"role": "user", "content": s} for s in SAMPLES[:11]], "reply": "好的"},
        {"messages": [{"role": "user", "content": "   "}], "reply": ""},
        {"messages": [], "reply": "only a reply"},
        {"messages": [{"role": "user", "content": 42}, {"role": "tool"}], "reply": None},
    ]
    with db.engine.begin() as c:
        for n, chat in enumerate(chats, start=1):
            c.execute(
                sa.text(
                    "INSERT INTO audit_log (id, event_type, created_at, payload, person_id) "
                    "VALUES (:n, 'chat.completed', '2026-12-07 12:00:00', :p, 1)"
                ),
                {"n": n, "p": json.dumps(chat)},
            )
            c.execute(
                sa.text(
                    "INSERT INTO episode_summaries (id, audit_log_id, summary, embedding, model, "
                    "created_at, person_id) VALUES (:e, :n, 'a chat', '[0.6, 0.8]', 'm', "
                    "'2026-12-07 12:00:00', 1)"
                ),
                {"e": 100 + n, "n": n},
            )
    yield db, [100 + n for n in range(1, len(chats) + 1)]
    db.dispose()


def test_chat_windows_read_from_the_database_agree_with_live_code(chats_db):
    db, ids = chats_db
    asked = [*ids, 999]  # one episode that is not there
    with db.read() as session:
        frozen = sorted(_frozen_sqlite.chat_windows(session, asked))
        live = sorted(live_sqlite.chat_windows(session, asked))
        assert _frozen_sqlite.chat_windows(session, []) == live_sqlite.chat_windows(session, [])
    assert [i for i, _ in frozen] == ids
    assert frozen == live
    assert sum(len(w) for _, w in frozen) > 32  # the long chat's windows among them


# -- agreement: PostgreSQL's schema and words --------------------------------------------------
def _migration(name: str) -> ModuleType:
    path = next((MIGRATIONS / "versions").glob(f"{name}_*.py"))
    spec = importlib.util.spec_from_file_location(f"caesar_migration_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_pgvector_schema_agrees_with_live_code():
    """Live code installs it where migration 0007 could not (no extension then), and on an
    install of people runs 0009's part too: either way the same schema."""
    assert _frozen_pgvector.SCHEMA == pgvector_migration.SCHEMA
    assert _frozen_pgvector.PERSON_SCHEMA == pgvector_migration.PERSON_SCHEMA
    assert _frozen_pgvector.PERSON_SCHEMA_DOWN == pgvector_migration.PERSON_SCHEMA_DOWN
    # db/migrate.py leaves the index 0007 made out of the schema comparison by live code's name
    assert _frozen_pgvector.RECALLS_INDEX == pgvector_migration.RECALLS_INDEX
    assert _frozen_pgvector.MIN_VERSION == pgvector_migration.MIN_VERSION


def test_the_full_text_words_of_0015_agree_with_live_code():
    """Live code reindexes under the configuration and into the state table 0015 made, writes
    the document 0015's trigger writes, and maps the tokens 0015 mapped."""
    words = _migration("0015")
    assert (words.CONFIG, words.STATE) == (pg_words.WORDS, pg_words.STATE)
    assert words._WORDS == pg_words.WORD_TOKENS
    for config in (words.CONFIG, "english"):
        for summary in ("NEW.summary", "e.summary"):
            assert words._document(config, summary) == pg_words.document(config, summary)
