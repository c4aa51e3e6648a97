"""What every `caesar` subcommand shares: the Typer apps, the consoles, the error translation
at the edge (`friendly`) and the services a command runs on."""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import wraps
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from caesar.config import Settings, load_settings
from caesar.errors import CaesarError

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


@app.callback()
def _root(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log more.")] = False,
) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
