"""`caesar people`: who caesar remembers for (issue #23, docs/household.md).

`add` and `rotate` print a person's token once; caesar keeps only its hash. With `--json`
their last line is `{"name": …, "token": …}` for scripts. The owner (created by `caesar db
upgrade`) is the one whose token is `api_token`; they can be renamed, not removed.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from caesar.cli.common import AsJson, Column, Wide, console, err, friendly, listing, services

if TYPE_CHECKING:
    from caesar.container import Container

people_app = typer.Typer(
    help="The people caesar remembers for: add, list, rename, rotate, link, remove "
    "(docs/household.md).",
    no_args_is_help=True,
)


def _api_token(built: Container) -> str | None:
    token = built.settings.api_token
    return token.get_secret_value() if token is not None else None


def _say_token(name: str, token: str, *, as_json: bool, verb: str) -> None:
    """The token, once. The notice goes to stderr, so with --json stdout is the JSON alone."""
    notice = (
        f"{verb} {name}. Their token is below: it is shown this once, caesar keeps only its "
        f"hash. Lost, it is replaced with `caesar people rotate {json.dumps(name)}`."
    )
    if as_json:
        err.print(notice, highlight=False, markup=False, soft_wrap=True)
        typer.echo(json.dumps({"name": name, "token": token}, ensure_ascii=False))
        return
    console.print(notice, highlight=False, markup=False, soft_wrap=True)
    typer.echo(token)


JsonToken = Annotated[
    bool, typer.Option("--json", help='Last line: {"name": …, "token": …} for scripts.')
]


@people_app.command("add")
@friendly
def add_command(name: str, as_json: JsonToken = False) -> None:
    """Add a person, and print their token once."""
    from caesar import people

    built = services()
    with built.db.write() as session:
        person, token = people.add(session, built.audit, name)
        added, added_id = person.name, person.id
    from caesar.memory.engine import upkeep

    upkeep.person_added(built.db, added_id)  # their own search indexes (docs/household.md)
    _say_token(added, token, as_json=as_json, verb="Added")


@people_app.command("list")
@friendly
def list_command(wide: Wide = False, as_json: AsJson = False) -> None:
    """Everyone, the owner first; never a token, only whether there is one."""
    from caesar import people

    built = services()
    with built.db.read() as session:
        everyone = people.everyone(session, _api_token(built))
    listing(everyone, PEOPLE_COLUMNS, wide=wide, as_json=as_json)


def _token_text(p: Any) -> str:
    if p.is_owner:
        return "api_token" if p.has_token else "none (no api_token set)"
    return "yes" if p.has_token else "none"


PEOPLE_COLUMNS = (
    Column("id", lambda p: str(p.id), wide=True),
    Column("name", lambda p: p.name, prose=True),
    Column("owner", lambda p: "owner" if p.is_owner else ""),
    Column("token", _token_text),
    Column("added (UTC)", lambda p: p.created_at.strftime("%Y-%m-%d %H:%M")),
    Column("front-end id", lambda p: p.frontend_id or "", wide=True),
)


@people_app.command("rename")
@friendly
def rename_command(old: str, new: str) -> None:
    """Rename a person (the owner too); their token stays."""
    from caesar import people

    built = services()
    with built.db.write() as session:
        person = people.rename(session, built.audit, old, new)
        renamed = person.name
    console.print(f"renamed to {renamed}", highlight=False, markup=False)


@people_app.command(
    "rotate",
    help="Give a person a new token, printed once; the old one stops working.\n\n"
    "The owner's token is the api_token setting: change it there.",
)
@friendly
def rotate_command(name: str, as_json: JsonToken = False) -> None:
    from caesar import people

    built = services()
    with built.db.write() as session:
        person, token = people.rotate(session, built.audit, name)
        rotated = person.name
    _say_token(rotated, token, as_json=as_json, verb="New token for")


@people_app.command(
    "link",
    help="Make NAME the person a trusted front-end's user header names (its user id, e.g. "
    'Open WebUI\'s X-OpenWebUI-User-Id): docs/household.md, "Open WebUI for a household".',
)
@friendly
def link_command(name: str, frontend_id: str) -> None:
    from caesar import people

    built = services()
    with built.db.write() as session:
        linked = people.link(session, built.audit, name, frontend_id)
    said = f"{linked.name} is now the front-end's user {linked.frontend_id}"
    if linked.taken_from:
        said += (
            f" (taken from {linked.taken_from!r}, who had no memory; they have no front-end "
            f"id now: `caesar people remove {linked.taken_from!r}` removes them)"
        )
    console.print(said, highlight=False, markup=False)


# One line per paragraph: Typer keeps a docstring's line breaks.
REMOVE_HELP = (
    "Remove a person, their token and everything of theirs (asks first, unless --yes); not "
    "the owner.\n\n"
    "Their conversations are forgotten as `caesar forget` forgets one (episodes, facts, "
    "vectors and full-text entries with them), then their own facts and audit rows go. "
    "It cannot be undone."
)


@people_app.command("remove", help=REMOVE_HELP)
@friendly
def remove_command(
    name: str,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
) -> None:
    from caesar import people
    from caesar.memory.person_removal import remove_person

    built = services()
    with built.db.read() as session:
        person = people.named(session, name)
        shown, is_owner = person.name, person.is_owner
    if not is_owner and not yes:
        question = (
            f"Remove {shown}, their token and everything of theirs (conversations, episodes, "
            "facts)? This cannot be undone."
        )
        if not typer.confirm(question, default=False):
            raise typer.Exit(1)
    gone = remove_person(built, shown)
    console.print(
        f"removed {gone.name}: {gone.conversations} conversation(s), {gone.episodes} "
        f"episode(s), {gone.facts} fact(s) forgotten",
        highlight=False,
        markup=False,
    )


def register(app: typer.Typer) -> None:
    app.add_typer(people_app, name="people")
