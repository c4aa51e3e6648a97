"""`caesar db backup` and `caesar export`: an operator can always leave with their data."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from caesar.cli.common import console, friendly, person, services
from caesar.config import load_settings
from caesar.db.backup import backup_sqlite, pg_dump_command, pg_restore_command
from caesar.db.engine import Database
from caesar.export import Export, ExportCounts, check_target, export_to_path, write_jsonl
from caesar.memory.scope import Scope

# Progress goes to stderr so `caesar export > data.jsonl` stays pure JSONL.
_progress_console = Console(stderr=True)
_TICK = 500  # redraw the bar every N records, not every line


@friendly
def db_backup(
    path: Annotated[Path, typer.Argument(help="Where to write the copy (must not exist yet).")],
) -> None:
    """Copy the database to PATH while caesar runs (SQLite online backup; PostgreSQL: pg_dump)."""
    db = Database(load_settings().sqlalchemy_url)
    try:
        if not db.copies_itself:
            console.print(
                "caesar does not copy a PostgreSQL database itself: use pg_dump, which takes a "
                "consistent snapshot while caesar keeps running:\n"
                f"  {pg_dump_command(db, path)}\n"
                "The password is not shown: pg_dump reads it from PGPASSWORD or ~/.pgpass.\n"
                f"Restore with: {pg_restore_command(db, path)}",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
            # Non-zero: nothing was written, and a script must not believe otherwise.
            raise typer.Exit(1)
        result = backup_sqlite(db, path)
    finally:
        db.dispose()
    console.print(
        f"backed up to {result.path} ({result.bytes / 1e6:.1f} MB): {result.audit_rows} audit rows, "
        f"{result.episodes} episodes, {result.facts} facts; integrity check ok",
        highlight=False,
        markup=False,
    )


def _bar() -> Progress:
    return Progress(
        TextColumn("exporting"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=_progress_console,
        transient=False,
    )


@friendly
def export(
    out: Annotated[str, typer.Option("--out", "-o", help="File to write, or - for stdout.")] = "-",
    with_embeddings: Annotated[
        bool, typer.Option("--with-embeddings", help="Include episode embedding vectors.")
    ] = False,
) -> None:
    """Every fact, memory, episode and audit row of yours (`--person`; default the owner) as
    JSONL (one object per line, each with a "type")."""
    if out != "-":
        check_target(Path(out))
    built = services()
    who = person(built)
    try:
        with _bar() as progress:
            task = progress.add_task("export", total=None)
            ticks = 0

            def started(counts: ExportCounts) -> None:
                progress.update(task, total=counts.total)

            def advanced(kind: str) -> None:
                nonlocal ticks
                if kind == "export":
                    return
                ticks += 1
                if ticks % _TICK == 0:
                    progress.update(task, completed=ticks)

            if out == "-":
                with Export(
                    built.db, scope=Scope(who), with_embeddings=with_embeddings
                ) as snapshot:
                    started(snapshot.counts)
                    written = write_jsonl(snapshot.records(), sys.stdout, advanced)
                    sys.stdout.flush()
            else:
                written = export_to_path(
                    built.db,
                    Path(out),
                    scope=Scope(who),
                    with_embeddings=with_embeddings,
                    on_start=started,
                    on_record=advanced,
                )
            progress.update(task, completed=ticks)
    finally:
        built.close()
    summary = ", ".join(
        f"{written.get(kind, 0)} {label}"
        for kind, label in (
            ("fact", "facts"),
            ("memory", "memories"),
            ("episode", "episodes"),
            ("audit", "audit rows"),
        )
    )
    where = "stdout" if out == "-" else out
    _progress_console.print(f"exported {summary} to {where}", highlight=False, markup=False)


def register(app: typer.Typer, db_app: typer.Typer) -> None:
    db_app.command("backup")(db_backup)
    app.command("export")(export)
