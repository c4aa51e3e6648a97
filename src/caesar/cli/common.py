"""What every `caesar` subcommand shares: the Typer apps, the consoles, the error translation
at the edge (`friendly`) and the services a command runs on."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import wraps
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from caesar.config import Settings, load_settings
from caesar.errors import CaesarError

if TYPE_CHECKING:
    from caesar.container import Container

app = typer.Typer(
    help="caesar: a personal AI assistant server whose memory works.", no_args_is_help=True
)
db_app = typer.Typer(help="Database maintenance.", no_args_is_help=True)
facts_app = typer.Typer(help="What caesar knows about you.", no_args_is_help=True)
episodes_app = typer.Typer(help="Episode summaries (past conversations).", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(facts_app, name="facts")
models_app = typer.Typer(help="The bundled models' files.", no_args_is_help=True)
app.add_typer(episodes_app, name="episodes")
app.add_typer(models_app, name="models")

console = Console()

# The listing commands' two output options (issue #25: readable at 80 columns by default).
Wide = Annotated[bool, typer.Option("--wide", help="Every column (needs a wide terminal).")]
AsJson = Annotated[bool, typer.Option("--json", help="JSON for scripts, every field.")]


@dataclass(frozen=True)
class Column:
    """One column of a listing: its header, the row's text, shown by default or with --wide."""

    header: str
    text: Callable[[Any], str]
    wide: bool = False
    prose: bool = False  # the one that takes what width is left
    wrap: bool = False  # may wrap (a prose column always may)


def listing(rows: Sequence[Any], columns: Sequence[Column], *, wide: bool, as_json: bool) -> None:
    """A table that fits the terminal (the --wide columns only when asked), or with --json
    the rows' own `as_json()` as one JSON array on stdout, unwrapped."""
    if as_json:
        typer.echo(json.dumps([row.as_json() for row in rows], ensure_ascii=False, default=str))
        return
    table = Table()
    shown = [c for c in columns if wide or not c.wide]
    for c in shown:
        table.add_column(c.header, no_wrap=not (c.prose or c.wrap), ratio=1 if c.prose else None)
    for row in rows:
        # escaped: a row's own words, not Rich markup
        table.add_row(*(escape(c.text(row)) for c in shown))
    console.print(table)


err = Console(stderr=True)
F = TypeVar("F", bound=Callable[..., Any])


def friendly(fn: F) -> F:
    """Translate caesar's errors once, at the edge."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except CaesarError as exc:
            # Escaped: messages name settings like [gateway.providers.x], which Rich would
            # otherwise swallow as markup (or crash on, for a "[/…]").
            err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, markup=True)
            raise typer.Exit(1) from None

    return wrapper  # type: ignore[return-value]


def services(settings: Settings | None = None, *, check_schema: bool = True) -> Any:
    from caesar.db import migrate
    from caesar.errors import ConfigError
    from caesar.services import Services

    built = Services.build(settings or load_settings())
    if check_schema and not migrate.is_current(built.db):
        raise ConfigError(
            f"the database at {built.db.engine.url.render_as_string(hide_password=True)} is not "
            "at the current schema: run `caesar db upgrade`"
        )
    return built


# `caesar --person NAME …`: whose memory the command reads and writes (issue #23); None is
# the owner. Set by the root callback on every invocation.
_person: str | None = None


def person(built: Container) -> int:
    """The id of the person the command acts as (`--person`, default the owner); NotFound,
    naming who there is, for a name nobody has."""
    return int(built.person_id(_person))


@app.callback()
def _root(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log more.")] = False,
    who: Annotated[
        str | None,
        typer.Option(
            "--person",
            metavar="NAME",
            help="Whose memory to read and change (default: the owner).",
        ),
    ] = None,
) -> None:
    global _person
    _person = who
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
