"""`caesar import FILE`: another assistant's history export, or caesar's JSONL, into memory,
then "learning N of M" while the memory workers read it (issue 48).

The file's conversations are written first (a progress bar with a rate); an import stopped
there and run again writes the rest. Then, unless `--no-learn`, the memory workers run here,
niced, until every imported conversation is summarised, extracted and searchable; a running
`caesar serve` shares the work (each row is learned exactly once, whichever process takes it)
and finishes it if this command is stopped.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from caesar.cli.common import console, err, friendly, person, services
from caesar.memory.scope import Scope

if TYPE_CHECKING:
    from caesar.container import Container
    from caesar.importer import ImportReport

MAX_ERRORS_SHOWN = 50
POLL_SECONDS = 0.5
# No conversation learned for this long: a worker is failing (its worker.crashed rows say
# why); stop waiting, the server's workers retry.
STALL_SECONDS = 600.0
LEARNING_WORKERS = ("memory.extract", "memory.summarise", "memory.passages", "semantic.index")


class _Rate(ProgressColumn):
    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:,.0f}/s" if speed else "", style="progress.data.speed")


def _columns(label: str) -> tuple[ProgressColumn, ...]:
    return (
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        _Rate(),
        TimeElapsedColumn(),
    )


@friendly
def import_command(
    file: Annotated[
        Path,
        typer.Argument(
            help="A ChatGPT export (.zip or conversations.json), a Claude export (.zip or "
            "conversations.json), an Open WebUI chat export (.json), or caesar's JSONL.",
            exists=True,
            dir_okay=False,
        ),
    ],
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format",
            metavar="NAME",
            help="chatgpt, claude, openwebui or caesar (default: found from the file).",
        ),
    ] = None,
    who: Annotated[
        str | None,
        typer.Option("--person", metavar="NAME", help="Whose memory (default: the owner)."),
    ] = None,
    learn: Annotated[
        bool,
        typer.Option(
            "--learn/--no-learn",
            help="Run the memory workers here until the import is learned (default), or leave "
            "it to `caesar serve`'s.",
        ),
    ] = True,
) -> None:
    """Import past conversations (ChatGPT, Claude, Open WebUI, caesar JSONL), dated when they
    happened, then learn from them."""
    from caesar import import_learning
    from caesar.importer import LABELS, import_path

    built = services()
    scope = Scope(built.person_id(who) if who is not None else person(built))
    with Progress(
        *_columns("importing {task.description}"), console=console, transient=True
    ) as bar:
        task = bar.add_task("", total=None)
        report = import_path(
            built,
            file,
            scope=scope,
            fmt=fmt,
            on_format=lambda name: bar.update(task, description=LABELS[name]),
            on_total=lambda n: bar.update(task, total=n),
            on_progress=lambda n: bar.advance(task, n),
        )
    for problem in report.errors[:MAX_ERRORS_SHOWN]:
        err.print(f"line {problem.line}: {problem.error}", highlight=False, markup=False)
    for broken in report.broken[:MAX_ERRORS_SHOWN]:
        err.print(f"conversation {broken.key}: {broken.reason}", highlight=False, markup=False)
    if report.failed > MAX_ERRORS_SHOWN:
        err.print(f"… and {report.failed - MAX_ERRORS_SHOWN} more skipped", highlight=False)
    console.print(_summary(report, LABELS[report.format]), highlight=False, markup=False)
    if report.older_than_ttl:  # only counted when a TTL is set
        ttl = built.settings.retention.ttl_days
        console.print(
            f"[yellow]note:[/yellow] {report.older_than_ttl} are older than retention.ttl_days "
            f"({ttl}); the next retention sweep deletes them unless you raise the TTL or remove "
            "it (no TTL: nothing is deleted by age)",
            highlight=False,
        )
    if report.found == 0:
        err.print(
            f"[red]error:[/red] nothing to import in {file.name}: no conversation with anything "
            "said in it",
            highlight=False,
        )
        raise typer.Exit(1)
    import_learning.record(built, scope, report, file.name)
    if learn:
        _learn(built, scope, min(report.audit_ids), max(report.audit_ids))
    else:
        console.print(
            "the memory workers of `caesar serve` (or `caesar worker`) learn from them next",
            highlight=False,
        )
    if report.failed:
        raise typer.Exit(1)


def _summary(report: ImportReport, label: str) -> str:
    unit = "invalid lines" if report.format == "caesar" else "could not be read"
    skipped = (
        f"{report.failed} {unit} skipped"
        if report.format == "caesar"
        else f"{report.failed} skipped ({unit})"
    )
    parts = [
        f"imported {report.imported} conversations ({label})",
        f"{report.duplicates} already there",
        skipped,
    ]
    if report.empty:
        parts.append(f"{report.empty} empty")
    return "; ".join(parts)


def _learn(built: Container, scope: Scope, first_id: int, last_id: int) -> None:
    """Run the enabled memory workers here until the import's rows are learned."""
    from caesar import import_learning
    from caesar.workers import WorkerRunner

    state = import_learning.progress(built, scope, first_id, last_id)
    if state.finished:
        console.print(f"all {state.total} learned", highlight=False)
        return
    chosen = [built.workers[n] for n in LEARNING_WORKERS if n in built.workers]
    # niced threads: a chat turn on the same host gets the core first
    runner = WorkerRunner([w for w in chosen if w.enabled], catch_up_every=POLL_SECONDS, nice=10)
    runner.start()
    last_change, seen = time.monotonic(), state.done
    try:
        with Progress(*_columns("learning"), console=console, transient=True) as bar:
            task = bar.add_task("", total=state.total, completed=state.done)
            while not state.finished:
                time.sleep(POLL_SECONDS)
                state = import_learning.progress(built, scope, first_id, last_id)
                bar.update(task, completed=state.done, total=state.total)
                if state.done != seen:
                    last_change, seen = time.monotonic(), state.done
                elif time.monotonic() - last_change > STALL_SECONDS:
                    break
    except KeyboardInterrupt:
        runner.stop()
        console.print(
            f"stopped at learning {state.done} of {state.total}; `caesar serve` (or "
            "`caesar worker`) learns the rest",
            highlight=False,
        )
        raise typer.Exit(130) from None
    runner.stop()
    if state.finished:
        console.print(f"learned {state.total} conversations", highlight=False)
    else:
        err.print(
            f"learning {state.done} of {state.total}: no progress for {STALL_SECONDS:.0f} s; "
            "the dashboard's audit page shows a worker.crashed row if one is failing; the "
            "server's workers retry",
            highlight=False,
        )
        raise typer.Exit(1)


@friendly
def imports_command(
    who: Annotated[
        str | None,
        typer.Option("--person", metavar="NAME", help="Whose imports (default: the owner)."),
    ] = None,
) -> None:
    """Recent imports, and how far the memory workers have learned each."""
    from rich.table import Table

    from caesar import import_learning
    from caesar.importer import LABELS

    built = services()
    scope = Scope(built.person_id(who) if who is not None else person(built))
    records = import_learning.recent(built, scope)
    if not records:
        console.print("no imports yet (`caesar import FILE`)", highlight=False)
        return
    table = Table("when (UTC)", "file", "format", "imported", "there", "skipped", "learning")
    for r in records:
        state = import_learning.progress(built, scope, r.first_id, r.last_id)
        table.add_row(
            r.at.strftime("%Y-%m-%d %H:%M"),
            r.file,
            LABELS.get(r.format, r.format),
            str(r.imported),
            str(r.duplicates),
            str(r.skipped),
            state.text(),
        )
    console.print(table)


def register(app: typer.Typer) -> None:
    app.command("import")(import_command)
    app.command("imports")(imports_command)
