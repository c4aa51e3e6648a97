"""`caesar import FILE.jsonl`: valid lines become dated chat.completed rows; bad lines are
reported by number and skipped whole; a re-import adds nothing."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from conftest import OWNER
from memory_helpers import events, write_config
from typer.testing import CliRunner

from caesar import audit
from caesar.cli.main import app as cli_app
from caesar.clock import utcnow
from caesar.errors import InputError
from caesar.importer import import_conversations, import_file, parse_line
from caesar.memory.scope import Scope

GOOD = {
    "created_at": "2026-05-18T20:15:00+02:00",
    "messages": [
        {"role": "user", "content": "I keep waking up at 3am."},
        {"role": "assistant", "content": "How warm is the bedroom?"},
        {"role": "user", "content": "72°F."},
        {"role": "assistant", "content": "Try 65°F for a week."},
    ],
}


def _line(**changes):
    return json.dumps({**GOOD, **changes}, ensure_ascii=False)


def _write(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_valid_line_becomes_a_dated_chat(services, tmp_path):
    report = import_file(services, _write(tmp_path / "a.jsonl", [_line()]), scope=Scope(OWNER))
    assert (report.imported, report.duplicates, report.errors) == (1, 0, [])
    [row] = events(services, audit.CHAT_COMPLETED)
    assert report.audit_ids == [row.id]
    assert row.created_at == datetime(2026, 5, 18, 18, 15)  # UTC, naive
    assert row.payload["messages"] == GOOD["messages"][:-1]
    assert row.payload["reply"] == "Try 65°F for a week."
    assert row.payload["imported"] is True
    assert row.subject_key == row.payload["content_hash"] and row.subject_key.startswith(
        "import:sha256:"
    )


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "expected a JSON object"),
        (_line(created_at=None), "created_at"),
        (_line(created_at=1716000000), "ISO-8601"),
        (_line(created_at="last tuesday"), "created_at"),
        (_line(created_at=(utcnow() + timedelta(days=2)).isoformat()), "in the future"),
        (_line(messages=[]), "messages"),
        (
            _line(
                messages=[{"role": "user", "content": "hi"}, {"role": "user", "content": "anyone?"}]
            ),
            "assistant",
        ),
        (
            _line(
                messages=[
                    {"role": "assistant", "content": "hi"},
                    {"role": "assistant", "content": "hello"},
                ]
            ),
            "user message",
        ),
        (
            _line(
                messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "  "}]
            ),
            "non-empty assistant",
        ),
        (
            _line(
                messages=[{"role": "tool", "content": "x"}, {"role": "assistant", "content": "y"}]
            ),
            "role",
        ),
        (
            _line(messages=[{"role": "user", "content": 5}, {"role": "assistant", "content": "y"}]),
            "content",
        ),
    ],
)
def test_invalid_lines_are_explained(line, expected):
    with pytest.raises(InputError, match=expected):
        parse_line(line)


def test_broken_lines_are_reported_by_number_and_skipped_whole(services, tmp_path):
    path = tmp_path / "mixed.jsonl"
    lines = [
        _line(),
        "{broken",
        "",
        _line(created_at="2026-04-01T10:00:00Z"),
        _line(messages=[{"role": "user", "content": "half"}]),  # too short: nothing of it stored
    ]
    _write(path, lines)
    with path.open("ab") as handle:
        handle.write(b'{"created_at": "2026-04-02T10:00:00Z", "messages": "\xff\xfe"}\n')
    report = import_file(services, path, batch_size=1, scope=Scope(OWNER))
    assert report.imported == 2
    assert [e.line for e in report.errors] == [2, 5, 6]
    assert "not UTF-8" in report.errors[2].error
    assert len(events(services, audit.CHAT_COMPLETED)) == 2
    assert [r.created_at.date().isoformat() for r in events(services, audit.CHAT_COMPLETED)] == [
        "2026-05-18",
        "2026-04-01",
    ]


def test_reimport_and_in_file_duplicates_add_nothing(services, tmp_path):
    same_but_reformatted = json.dumps(
        {"messages": GOOD["messages"], "created_at": "2026-05-18T18:15:00Z", "extra": 1}
    )
    path = _write(
        tmp_path / "dup.jsonl",
        [_line(), same_but_reformatted, _line(created_at="2026-05-19T08:00:00Z")],
    )
    first = import_file(services, path, batch_size=2, scope=Scope(OWNER))
    assert (first.imported, first.duplicates) == (2, 1)
    assert first.audit_ids[0] == first.audit_ids[1]
    again = import_file(services, path, scope=Scope(OWNER))
    assert (again.imported, again.duplicates) == (0, 3)
    assert again.audit_ids == first.audit_ids
    assert len(events(services, audit.CHAT_COMPLETED)) == 2


def test_import_conversations_for_benchmarks(services):
    report = import_conversations(
        services,
        [
            {"created_at": datetime(2026, 1, 2, 3, 4), "messages": GOOD["messages"]},
            {"created_at": "bad", "messages": GOOD["messages"]},
        ],
        scope=Scope(OWNER),
    )
    assert report.imported == 1 and [e.line for e in report.errors] == [2]
    assert events(services, audit.CHAT_COMPLETED)[0].created_at == datetime(2026, 1, 2, 3, 4)


def _old_and_new(path):
    old = (utcnow() - timedelta(days=400)).isoformat()
    return _write(path, [_line(created_at=old), _line(created_at=utcnow().isoformat())])


def test_old_conversations_are_counted_against_the_ttl(make_services, tmp_path):
    services = make_services(retention={"ttl_days": 90})
    report = import_file(services, _old_and_new(tmp_path / "old.jsonl"), scope=Scope(OWNER))
    assert (report.imported, report.older_than_ttl) == (2, 1)


def test_with_no_ttl_no_conversation_is_too_old(services, tmp_path):
    assert services.settings.retention.ttl_days is None  # the default: nothing expires
    report = import_file(services, _old_and_new(tmp_path / "old.jsonl"), scope=Scope(OWNER))
    assert (report.imported, report.older_than_ttl) == (2, 0)


@pytest.mark.parametrize("ttl_days", [None, 90])
def test_cli_import_warns_of_the_sweep_only_with_a_ttl(
    ttl_days, make_services, tmp_path, monkeypatch
):
    services = make_services(retention={"ttl_days": ttl_days})
    monkeypatch.setenv(
        "CAESAR_CONFIG", str(write_config(tmp_path / "caesar.toml", services.settings))
    )
    result = CliRunner().invoke(
        cli_app, ["import", str(_old_and_new(tmp_path / "old.jsonl")), "--no-learn"]
    )
    assert result.exit_code == 0, result.output
    note = "1 are older than retention.ttl_days (90); the next retention sweep deletes them"
    assert (note in " ".join(result.output.split())) == (ttl_days is not None)


def test_cli_import_reports_lines_and_progress(services, tmp_path, monkeypatch):
    monkeypatch.setenv(
        "CAESAR_CONFIG", str(write_config(tmp_path / "caesar.toml", services.settings))
    )
    path = _write(
        tmp_path / "in.jsonl", [_line(), "oops", _line(created_at="2026-04-01T10:00:00Z")]
    )
    result = CliRunner().invoke(cli_app, ["import", str(path), "--no-learn"])
    # the rest is imported, but a line skipped is not a success
    assert result.exit_code == 1, result.output
    assert "line 2: not JSON" in result.output
    assert (
        "imported 2 conversations (caesar JSONL); 0 already there; 1 invalid lines skipped"
        in " ".join(result.output.split())
    )
    assert len(events(services, audit.CHAT_COMPLETED)) == 2
    missing = CliRunner().invoke(cli_app, ["import", str(tmp_path / "nope.jsonl")])
    assert missing.exit_code != 0


def test_nul_is_stored_and_hashed_as_the_audit_log_stores_it(services, tmp_path):
    messages = [{"role": "user", "content": "a\x00b"}, {"role": "assistant", "content": "ok"}]
    line = json.dumps({"created_at": "2026-01-01T00:00:00Z", "messages": messages})
    path = _write(tmp_path / "nul.jsonl", [line])
    assert import_file(services, path, scope=Scope(OWNER)).imported == 1
    [row] = events(services, audit.CHAT_COMPLETED)
    assert row.payload["messages"][0]["content"] == "a\ufffdb"
    assert import_file(services, path, scope=Scope(OWNER)).duplicates == 1


def test_a_batch_is_written_whole_on_either_engine(make_services, db_url, tmp_path):
    """The importer writes a batch of conversations in three statements (their conversations,
    rows and tips): each row is its own conversation's tip, in the file's order, dated, one
    turn each; a repeat in the same batch is the first's row."""
    from sqlalchemy import select

    from caesar.db.models import AuditLog, Conversation
    from caesar.importer import import_path

    svc = make_services(database_url=db_url)
    lines = [
        _line(
            created_at=f"2026-05-{day:02d}T20:15:00+00:00",
            messages=GOOD["messages"][:1]
            + [{"role": "assistant", "content": f"Answer of day {day}."}],
        )
        for day in (3, 1, 2)
    ]
    path = _write(tmp_path / "h.jsonl", [*lines, lines[0]])
    report = import_path(svc, path, scope=Scope(OWNER), batch_size=10)
    assert (report.imported, report.duplicates) == (3, 1)
    assert report.audit_ids[0] == report.audit_ids[3] and len(set(report.audit_ids)) == 3
    with svc.db.read() as session:
        rows = session.execute(
            select(AuditLog.id, AuditLog.created_at, Conversation.turns, Conversation.last_turn_at)
            .join(Conversation, Conversation.tip_audit_id == AuditLog.id)
            .order_by(AuditLog.id)
        ).all()
    assert [r.id for r in rows] == report.audit_ids[:3]  # ids grow in the file's order
    assert [r.created_at.day for r in rows] == [3, 1, 2]
    assert all(r.turns == 1 and r.last_turn_at == r.created_at for r in rows)
