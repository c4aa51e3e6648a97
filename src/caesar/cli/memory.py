"""CLI commands for episodes' neighbours: `semantic-recall`, `proactive run|list`.

Registered on the main app by cli/main.py (`register(app)`); shares its error translation
(cli/common.py).
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from caesar.cli.common import console, friendly, person, services
from caesar.memory.scope import Scope

proactive_app = typer.Typer(
    help="Turns caesar starts itself (the proactive tables of the config).", no_args_is_help=True
)


@friendly
def semantic_recall_command(
    query: str,
    top_k: Annotated[int, typer.Option(help="How many chunks.", min=1, max=50)] = 5,
) -> None:
    """Search past replies by meaning (the semantic index; cosine only)."""
    built = services()
    hits = built.semantic.recall(query, top_k, scope=Scope(person(built)))
    if not hits:
        console.print("nothing indexed matches (is the semantic.index worker enabled?)")
        return
    table = Table("score", "chat", "when (UTC)", "text")
    for h in hits:
        table.add_row(
            f"{h.score:.3f}", f"#{h.audit_log_id}", h.created_at.strftime("%Y-%m-%d %H:%M"), h.text
        )
    console.print(table)


@proactive_app.command("run")
@friendly
def proactive_run(name: str) -> None:
    """Run the proactive turn NAME now (audited as proactive.completed)."""
    from caesar.proactive import run_proactive

    built = services()
    result = run_proactive(built, name, scope=Scope(person(built)))
    console.print(result.reply, highlight=False, markup=False)
    console.print(f"[dim]audit #{result.audit_id}; recalled {len(result.recalled)} episodes[/dim]")


@proactive_app.command("list")
@friendly
def proactive_list() -> None:
    """Configured proactive runs, their last run and when they are next due."""
    from caesar.proactive import ProactiveScheduler, schedule_text

    built = services()
    scheduler = built.workers[ProactiveScheduler.name]
    assert isinstance(scheduler, ProactiveScheduler)
    rows = scheduler.schedule()
    if not rows:
        console.print(
            "no proactive runs configured (add [[proactive]] tables to the config)", markup=False
        )
        return
    table = Table("name", "schedule", "last run (UTC)", "next due (UTC)", "prompt")
    for spec, last, due in rows:
        last_text = last.strftime("%Y-%m-%d %H:%M") if last else "never"
        table.add_row(
            spec.name, schedule_text(spec), last_text, due.strftime("%Y-%m-%d %H:%M"), spec.prompt
        )
    console.print(table)


def register(app: typer.Typer) -> None:
    app.command("semantic-recall")(semantic_recall_command)
    app.add_typer(proactive_app, name="proactive")
