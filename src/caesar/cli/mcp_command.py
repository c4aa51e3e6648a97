"""`caesar mcp`: caesar's memory as an MCP server over stdio, for desktop clients (Claude
Desktop, Claude Code, Cursor) that launch it themselves (docs/mcp.md).

stdout is the protocol: nothing else may print there (logs go to stderr). The enabled memory
workers run in this process too, unless `--no-workers` (for when a `caesar serve` next to it
runs them already: two would be safe — every worker write is exactly-once — but would waste
work), so a conversation saved through it is learned from without a server.
"""

from __future__ import annotations

from typing import Annotated

import typer

from caesar.cli.common import friendly, person, services
from caesar.memory.scope import Scope


@friendly
def mcp_command(
    workers: Annotated[
        bool, typer.Option(help="Run the enabled memory workers in this process.")
    ] = True,
) -> None:
    """Serve caesar's memory over MCP on stdin/stdout (for Claude Desktop, Claude Code, …)."""
    from caesar.mcp_server import build
    from caesar.workers import WorkerRunner

    built = services()
    who = person(built)  # `caesar --person NAME mcp`: their memory, over stdio
    runner = WorkerRunner(built.enabled_workers()) if workers else None
    if runner:
        runner.start()
    try:
        build(built, transport="stdio", scope=Scope(who)).run("stdio")
    finally:
        if runner:
            runner.stop()
        built.close()


def register(app: typer.Typer) -> None:
    app.command("mcp")(mcp_command)
