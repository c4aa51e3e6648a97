"""CLI commands for conversations: `conversations list|show` and `forget` (issue #13).

`forget` is the one service call the API and the dashboard use too (memory/forget.py); it
asks before it deletes, unless `--yes`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import typer

from caesar.cli.common import (
    AsJson,
    Column,
    Wide,
    console,
    friendly,
    listing,
    person,
    services,
)
from caesar.memory.scope import Scope

conversations_app = typer.Typer(
    help="Past conversations: list them, read one (forget them with `caesar forget`).",
    no_args_is_help=True,
)


@conversations_app.command("list")
@friendly
def list_command(
    matching: Annotated[
        str | None, typer.Option(help="Only those with a turn containing this.")
    ] = None,
    before: Annotated[
        datetime | None, typer.Option(help="Only those last active before (UTC).")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=10_000)] = 50,
    wide: Wide = False,
    as_json: AsJson = False,
) -> None:
    """Newest first, with each one's episode summary (or, before it has one, how it opened)."""
    from caesar.memory.forget import listed as listed_

    built = services()
    with built.db.read() as session:
        listed = listed_(
            Scope(person(built), session), before=before, matching=matching, limit=limit
        )
    listing(listed, CONVERSATION_COLUMNS, wide=wide, as_json=as_json)


CONVERSATION_COLUMNS = (
    Column("id", lambda c: str(c.id)),
    Column("key", lambda c: c.key, wide=True),
    Column("started (UTC)", lambda c: c.started_at.strftime("%Y-%m-%d %H:%M"), wide=True),
    Column("last turn (UTC)", lambda c: c.last_turn_at.strftime("%Y-%m-%d %H:%M")),
    Column("turns", lambda c: str(c.turns)),
    Column("summary, or how it opened", lambda c: c.summary or f"“{c.opening}”", prose=True),
)


@conversations_app.command("show")
@friendly
def show_command(conversation_id: int) -> None:
    """A conversation's turns."""
    from caesar.errors import NotFound
    from caesar.memory import conversations

    built = services()
    who = person(built)
    with built.db.read() as session:
        if conversations.key_of(Scope(who, session), conversation_id) is None:
            raise NotFound(f"no conversation with id {conversation_id}")
        turns = conversations.transcript_by_id(Scope(who, session), conversation_id)
    for turn in turns:
        speaker = "operator" if turn["role"] == "user" else "caesar"
        console.print(f"{speaker}: {turn['content']}", highlight=False, markup=False)


@friendly
def forget_command(
    conversation_ids: Annotated[list[int] | None, typer.Argument(help="Conversation ids.")] = None,
    before: Annotated[datetime | None, typer.Option(help="All last active before (UTC).")] = None,
    matching: Annotated[str | None, typer.Option(help="All with a turn containing this.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Count, change nothing.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
) -> None:
    """Forget conversations and everything learned from them: their chats, episodes, facts,
    window and full-text index entries, and audit rows about them. One `memory.forgotten`
    audit row records ids and counts."""
    from caesar.memory.forget import ForgetRequest, forget

    built = services()
    request = ForgetRequest(conversation_ids or (), before, matching, person=person(built))
    planned = forget(built, request, dry_run=True)
    what = (
        f"{len(planned.conversation_ids)} conversation(s): {planned.chat_rows} chat rows, "
        f"{planned.episodes} episodes, {planned.facts} facts, "
        f"{planned.derived_audit_rows} audit rows about them"
    )
    if dry_run or not planned.conversation_ids:
        console.print(f"would forget {what}", highlight=False, markup=False)
        return
    if not yes and not typer.confirm(f"Forget {what}? This cannot be undone.", default=False):
        raise typer.Exit(1)
    done = forget(built, request)
    console.print(
        f"forgot {len(done.conversation_ids)} conversation(s)  (audit #{done.audit_id})",
        highlight=False,
        markup=False,
    )


def register(app: typer.Typer) -> None:
    app.add_typer(conversations_app, name="conversations")
    app.command("forget")(forget_command)
