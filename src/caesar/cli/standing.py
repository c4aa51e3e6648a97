"""`caesar memories`: what you told caesar about yourself (standing statements, issue #46), to
see and correct: `list`, `search`, `add`, `edit`, `forget`; and `said`, the dated memories of
what was said in your conversations (issue #45, docs/memories.md), which `search --said` finds
and `edit` and `forget` correct by their id as well.

As the facts commands, every one acts as `caesar --person NAME memories …`'s person (default
the owner), and another person's id is not found. Registered on the main app by cli/main.py
(`register(app)`); shares its error translation (cli/common.py).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from caesar.cli.common import AsJson, Column, Wide, console, friendly, listing, person, services
from caesar.memory.scope import Scope
from caesar.memory.standing import kinds

memories_app = typer.Typer(
    help="What you told caesar about yourself (how to answer, diet, family, …): see and correct.",
    no_args_is_help=True,
)

MAX_ID = 2**63 - 1  # the largest id SQLite stores
MemoryId = Annotated[int, typer.Argument(metavar="ID", min=1, max=MAX_ID)]
KindOption = Annotated[
    str | None,
    typer.Option("--kind", metavar="KIND", help=f"Only this kind: {', '.join(kinds.KINDS)}."),
]


def _said(m: Any) -> str:
    return str(m.said_at.strftime("%Y-%m-%d"))


# id, kind, slot and date take ~40 columns; the text the rest (cut to fit, whole with --json)
MEMORY_COLUMNS = (
    Column("id", lambda m: str(m.id)),
    Column("kind", lambda m: m.kind),
    Column("slot", lambda m: m.slot),
    Column("said", _said),
    Column("text", lambda m: m.text, prose=True),
    Column("confidence", lambda m: f"{m.confidence:.2f}", wide=True),
    Column("edits", lambda m: str(m.edit_count), wide=True),
    Column("chat", lambda m: f"#{m.source_audit_id}" if m.source_audit_id else "", wide=True),
)
REPLACED = Column("replaced by", lambda m: f"#{m.superseded_by}" if m.superseded_by else "")


def _show(rows: list[Any], *, wide: bool, as_json: bool, history: bool = False) -> None:
    if not rows and not as_json:
        console.print("nothing yet", highlight=False, markup=False)
        return
    columns = [*MEMORY_COLUMNS[:4], *([REPLACED] if history else []), *MEMORY_COLUMNS[4:]]
    listing(rows, columns, wide=wide, as_json=as_json)


@memories_app.command("list")
@friendly
def memories_list(
    kind: KindOption = None,
    history: Annotated[
        bool, typer.Option("--history", help="The replaced statements too.")
    ] = False,
    wide: Wide = False,
    as_json: AsJson = False,
) -> None:
    """What you told caesar about yourself that holds, newest first."""

    built = services()
    found = built.standing.list(
        scope=Scope(person(built)), kind=kinds.check_kind(kind), history=history
    )
    _show(found, wide=wide, as_json=as_json, history=history)


def _when(moment: Any) -> str:
    return str(moment.strftime("%Y-%m-%d")) if moment else ""


# id, who and date take ~25 columns; the text the rest
SAID_COLUMNS = (
    Column("id", lambda m: str(m.id)),
    Column("who", lambda m: m.speaker),
    Column("said", _said),
    Column("text", lambda m: m.text, prose=True),
    Column("refers to", lambda m: _when(m.refers_start), wide=True),
    Column("conversation", lambda m: str(m.conversation_id or ""), wide=True),
    Column("turn", lambda m: "" if m.turn is None else str(m.turn), wide=True),
    Column("chat", lambda m: f"#{m.source_audit_id}" if m.source_audit_id else "", wide=True),
)


@memories_app.command("said")
@friendly
def memories_said(
    conversation: Annotated[
        int | None,
        typer.Option("--conversation", min=1, max=MAX_ID, help="Only this conversation's."),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=10_000)] = 200,
    wide: Wide = False,
    as_json: AsJson = False,
) -> None:
    """The dated memories of what was said in your conversations, oldest first."""

    built = services()
    found = built.dated.list(scope=Scope(person(built)), conversation_id=conversation, limit=limit)
    if not found and not as_json:
        console.print("nothing yet", highlight=False, markup=False)
        return
    listing(found, SAID_COLUMNS, wide=wide, as_json=as_json)


@memories_app.command("search")
@friendly
def memories_search(
    text: str,
    said: Annotated[
        bool,
        typer.Option("--said", help="The dated memories of your conversations, newest first."),
    ] = False,
    wide: Wide = False,
    as_json: AsJson = False,
) -> None:
    """The statements that hold whose text contains TEXT (any case); with --said, the things
    said in your conversations."""

    built = services()
    scope = Scope(person(built))
    if not said:
        _show(built.standing.search(text, scope=scope), wide=wide, as_json=as_json)
        return
    found = built.dated.search(text, scope=scope)
    if not found and not as_json:
        console.print("nothing found", highlight=False, markup=False)
        return
    listing(found, SAID_COLUMNS, wide=wide, as_json=as_json)


@memories_app.command("add")
@friendly
def memories_add(
    text: str,
    kind: Annotated[
        str,
        typer.Option("--kind", metavar="KIND", help=f"One of {', '.join(kinds.KINDS)}."),
    ],
    slot: Annotated[
        str | None,
        typer.Option(
            "--slot",
            metavar="SLOT",
            help=f"What it is about ({', '.join(kinds.SLOTS)}); default: the kind's general one.",
        ),
    ] = None,
) -> None:
    """Tell caesar something about yourself in your own words (kept with confidence 1)."""

    built = services()
    memory = built.standing.add(built.audit, text, kind=kind, slot=slot, scope=Scope(person(built)))
    console.print(
        f"added #{memory.id} ({memory.kind}, {memory.slot}): {memory.text}",
        highlight=False,
        markup=False,
    )


@memories_app.command("edit")
@friendly
def memories_edit(memory_id: MemoryId, text: str) -> None:
    """Correct statement or said memory ID: its new TEXT, counted as your edit (a said memory
    gets a new id)."""

    built = services()
    scope = Scope(person(built))
    if built.dated.owns(memory_id, scope=scope):
        said = built.dated.edit(built.audit, memory_id, text, scope=scope)
        console.print(
            f"edited said memory #{said.id} (was #{memory_id}): {said.text}",
            highlight=False,
            markup=False,
        )
        return
    memory = built.standing.edit(built.audit, memory_id, text, scope=scope)
    console.print(f"edited #{memory.id}: {memory.text}", highlight=False, markup=False)


@memories_app.command("forget")
@friendly
def memories_forget(memory_id: MemoryId) -> None:
    """Forget statement or said memory ID for good; a statement it had replaced holds again."""
    built = services()
    scope = Scope(person(built))
    if built.dated.owns(memory_id, scope=scope):
        said = built.dated.get(memory_id, scope=scope)
        built.dated.delete(built.audit, memory_id, scope=scope)
        console.print(
            f"forgot said memory #{said.id} ({said.speaker}, {_said(said)})",
            highlight=False,
            markup=False,
        )
        return
    memory = built.standing.get(memory_id, scope=scope)
    built.standing.delete(built.audit, memory_id, scope=scope)
    console.print(
        f"forgot #{memory.id} ({memory.kind}, {memory.slot})", highlight=False, markup=False
    )


def register(app: typer.Typer) -> None:
    app.add_typer(memories_app, name="memories")
