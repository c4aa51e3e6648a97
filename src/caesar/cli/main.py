"""The `caesar` command. Thin: parse, call the core, print. Errors become one red line + exit 1.

The commands are here and in data.py and memory.py, registered on `app` below; what they share
(the Typer apps, the consoles, `friendly`, `services`) is in common.py, which imports none of
them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from caesar.cli import conversations, data, importing, mcp_command, memory, people, standing
from caesar.cli.common import (
    AsJson,
    Column,
    Wide,
    app,
    console,
    db_app,
    episodes_app,
    err,
    facts_app,
    friendly,
    listing,
    models_app,
    person,
    services,
)
from caesar.cli.summary import startup_summary, where_to_open
from caesar.config import BACKGROUND_TASK, Settings, load_settings
from caesar.errors import CaesarError
from caesar.memory.scope import Scope

if TYPE_CHECKING:
    from caesar.container import Container


# -- db ---------------------------------------------------------------------------------------
@db_app.command("upgrade")
@friendly
def db_upgrade() -> None:
    """Apply the schema migrations (creates the database if needed)."""
    upgrade_database(load_settings())


def upgrade_database(settings: Settings) -> None:
    """`caesar db upgrade`, also run by `caesar serve --upgrade` (`make run`) in its own
    process: one interpreter start fewer on the way to a first chat."""
    from caesar.db import Database, migrate

    db = Database(settings.sqlalchemy_url)
    before = migrate.current_revision(db)
    migrate.upgrade(db)
    after = migrate.current_revision(db)
    url = db.engine.url.render_as_string(hide_password=True)
    console.print(f"database {url}: {before or 'empty'} → {after}", soft_wrap=True, highlight=False)
    from caesar.memory.engine import upkeep

    for notice in upkeep.after_upgrade(db, settings.memory.episodes_recall.vector_search):
        if notice.warning:
            err.print(f"[yellow]warning:[/yellow] {escape(notice.text)}", highlight=False)
        else:
            console.print(notice.text, highlight=False)
    db.engine.dispose()


@db_app.command("words")
@friendly
def db_words(
    batch_size: int = typer.Option(100, min=1, max=100_000, help="Episodes per transaction."),
) -> None:
    """PostgreSQL: index the episodes and windows written before migration 0015 again under
    FTS5's words, then count each person's words (migration 0016), with progress; safe to stop
    and run again (it resumes), and chat goes on meanwhile. `caesar serve` does the same in the
    background once ready."""
    from caesar.db import Database
    from caesar.memory.engine import pg_words, upkeep

    db = Database(load_settings().sqlalchemy_url)
    upkeep.require_postgresql(db, "caesar db words", "SQLite's words are FTS5's already")

    def say(line: str) -> None:
        err.print(line, highlight=False, markup=False, soft_wrap=True)

    status = pg_words.reindex(
        db, progress=pg_words.progress_log(say, every=2.0), batch=batch_size, wait=True
    )
    console.print(f"full text: {status.describe()}", highlight=False, markup=False)
    left = pg_words.count_words(db, progress=pg_words.counting_log(say, every=2.0), wait=True)
    console.print(
        "full text: every person's words counted"
        if not left
        else f"full text: the words of {left:,} people left to count (the reindex first)",
        highlight=False,
        markup=False,
    )
    db.engine.dispose()


@db_app.command("vectors")
@friendly
def db_vectors(
    batch_size: int = typer.Option(
        2_000, min=1, max=100_000, help="Episodes copied per transaction."
    ),
) -> None:
    """PostgreSQL: copy the episodes' vectors into pgvector and build the embedding model's
    HNSW index (and, in a household, each person's own indexes), with progress; safe to stop
    and run again (it resumes), and chat goes on meanwhile. `caesar serve` does the same in
    the background after its warm-up."""
    from caesar.memory.engine import pgvector_migration as migration
    from caesar.memory.engine import upkeep

    built = services()
    upkeep.require_postgresql(built.db, "caesar db vectors", "on SQLite recall needs nothing")
    model = built.embedder.get().model_id
    dimension = built.episodes.embed_query("dimension").shape[-1]

    def say(line: str) -> None:
        err.print(line, highlight=False, markup=False, soft_wrap=True)

    status = migration.migrate(
        built.db,
        model,
        dimension=lambda: int(dimension),
        progress=migration.progress_log(say, every=2.0),
        batch=batch_size,
        wait=True,
    )
    console.print(
        f"episode vectors of {model}: {status.describe()}"
        + ("" if status.ready else " (nothing of this model to index yet)"),
        highlight=False,
        markup=False,
        soft_wrap=True,
    )


# -- models -----------------------------------------------------------------------------------
@models_app.command("prepare")
@friendly
def models_prepare() -> None:
    """Export the embedder to ONNX now, into the cache every home shares (`make install` runs
    this), so that the first `caesar serve` is quick and no serving process imports torch."""
    import time

    from caesar.minilm import MiniLM

    settings = load_settings()
    if settings.embedder.kind != "minilm" or settings.embedder.backend != "onnx":
        console.print("the embedder is not the bundled MiniLM on ONNX: nothing to prepare")
        return
    model = MiniLM(settings.model_cache_dir)
    if not model.onnx_path.exists():
        console.print(f"exporting the embedder to ONNX (once, up to a minute): {model.onnx_path}")
    started = time.perf_counter()
    try:
        exported = model.prepare()
    except Exception as exc:  # torch/onnx missing or broken: say so; serving still works
        err.print(
            f"[red]error:[/red] could not export the embedder to ONNX at {model.onnx_path} "
            f"({type(exc).__name__}: {escape(str(exc))}). caesar still serves: its first "
            'start tries again (slower), or set [embedder] backend = "torch".',
            highlight=False,
        )
        raise typer.Exit(1) from None
    took = f"exported in {time.perf_counter() - started:.1f} s" if exported else "already there"
    console.print(f"embedder ONNX file {model.onnx_path}: {took}", soft_wrap=True, highlight=False)


# -- serve ------------------------------------------------------------------------------------
@app.command()
@friendly
def serve(
    host: Annotated[str | None, typer.Option(help="Bind address (default: settings.host).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default: settings.port).")] = None,
    workers: Annotated[
        bool | None,
        typer.Option(help="Run the enabled workers (default: settings.run_workers)."),
    ] = None,
    upgrade: Annotated[
        bool,
        typer.Option(
            "--upgrade", help="Apply the schema migrations first, as `caesar db upgrade` does."
        ),
    ] = False,
) -> None:
    """Run the HTTP server (and the enabled background workers)."""
    from caesar.worker_process import WorkerProcess

    overrides: dict[str, Any] = {}
    if host:
        overrides["host"] = host
    if port:
        overrides["port"] = port
    settings = load_settings(**overrides)
    if upgrade:
        upgrade_database(settings)
    built = services(settings)
    _refuse_missing_pgvector(settings, built)
    # Bound here, before anything loads: a taken port is one clear line and exit code 1, not
    # "listening" followed by a crash.
    sock = bind(settings.host, settings.port)
    run_workers = settings.run_workers if workers is None else workers
    # In a niced child process by default (worker_process.py), so a backlog does not slow chat;
    # started once the server is warm, so that its start does not slow the server's.
    child = run_workers and settings.workers_process and bool(built.enabled_workers())
    process = WorkerProcess(settings.workers_nice) if child else None
    # Load the embedder, the episode index and the chat model in the background, starting now
    # (the app is built meanwhile); /healthz says "warming" until they are, and the log says
    # what each step did (the one-off ONNX export of the embedder included).
    for name in (
        "caesar.warm",
        "caesar.vectors",
        "caesar.minilm",
        "caesar.gateway.gguf_provider",
        "caesar.api.mcp_http",
    ):
        logging.getLogger(name).setLevel(logging.INFO)
    if settings.semantic.enabled:
        built.readiness.pending(EMBEDDER, EPISODE_INDEX)
    built.readiness.pending(CHAT_MODEL)
    threading.Thread(
        target=_warm, args=(built, process.start if process else None), daemon=True, name="warm"
    ).start()
    import uvicorn

    from caesar.api import create_app

    app_ = create_app(settings, built, run_workers=run_workers and not settings.workers_process)
    for line in startup_summary(settings, built, run_workers):
        console.print(line, highlight=False, markup=False)
    for line in where_to_open(settings):
        console.print(line, highlight=False, markup=False)
    config = uvicorn.Config(app_, log_level="warning")
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        if process:
            process.stop()


def _refuse_missing_pgvector(settings: Any, built: Container) -> None:
    """vector_search = "pgvector" on a database where it cannot be used: one line naming the
    fix, before listening (with "auto" the summary says it, and recall stays in-process)."""
    from caesar.cli.summary import vector_status
    from caesar.errors import ConfigError

    if settings.memory.episodes_recall.vector_search != "pgvector":
        return
    status = vector_status(settings, built)
    if status is not None and not status.usable:
        raise ConfigError(
            f'memory.episodes_recall.vector_search = "pgvector", but {status.problem}'
        )


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port, or a CaesarError naming the fix."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP by name: asyncio turns Nagle off only on sockets whose proto says TCP, and a
    # connection accepted from a proto-0 socket kept it on. uvicorn writes a response's
    # headers and body apart, so the body waited for the client's delayed ACK: +40 ms on a
    # request that followed the last one closely (bench_turn_http: +52 ms at 100k episodes).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise CaesarError(
            f"cannot listen on {host}:{port}: {exc.strerror} (another caesar serve? stop it, or "
            "set port / CAESAR_PORT / --port)"
        ) from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


EMBEDDER, EPISODE_INDEX, CHAT_MODEL = "embedder", "episode index", "chat model"


def _warm(built: Container, when_ready: Callable[[], object] | None = None) -> None:
    """The embedder and the episode index in this thread, the chat model in another: on two
    cores the two loads overlap (the first start's ready time is the longer one, not the sum).
    Then the chat model's client, `when_ready` (serve: start the worker process), and, ready
    and serving, on PostgreSQL it moves the episodes' vectors into pgvector and indexes the
    older full text under FTS5's words if they are not yet; returns when that is done too."""
    model = threading.Thread(target=_warm_chat_model, args=(built,), daemon=True, name="warm-chat")
    model.start()
    if built.settings.semantic.enabled:
        with _warming(built, EMBEDDER, EPISODE_INDEX):
            built.episodes.embed_query("warm up")
            built.readiness.done(EMBEDDER)
            count = built.episodes.warm()
            logging.getLogger("caesar.warm").info("episode index ready: %d episodes", count)
    model.join()
    _connect_chat_model(built)
    if when_ready is not None:
        when_ready()
    if built.settings.semantic.enabled:
        count = built.episodes.warm_said()
        logging.getLogger("caesar.warm").info("dated memories' index ready: %d", count)
        _migrate_vectors(built)
    _catch_up(built)


def _warm_chat_model(built: Container) -> None:
    with _warming(built, CHAT_MODEL):
        provider, _model = built.gateway.route("chat")
        start = getattr(provider, "start", None)  # an in-process model (the gguf kind)
        if start is not None:
            start()
            logging.getLogger("caesar.warm").info("chat model ready: %s", provider.name)


def _connect_chat_model(built: Container) -> None:
    """Ready: now the in-process model's client (the openai SDK's import, ~0.9 s of the GIL,
    kept off the first start's ready time), so that the first chat does not wait for it; and
    the offline answers to a client's titles and tags load their key-phrase extractor (~1 s
    of imports the first title would otherwise wait for)."""
    for task, method in (("chat", "connect"), (BACKGROUND_TASK, "warm")):
        provider, _model = built.gateway.route(task)
        prepare = getattr(provider, method, None)
        if prepare is None:
            continue
        try:
            prepare()
        except Exception:  # the first request reports it, as any provider failure
            logging.getLogger("caesar.warm").exception("%s's %s failed", task, method)


@contextlib.contextmanager
def _warming(built: Container, *parts: str) -> Iterator[None]:
    """Marks `parts` ready when the block ends, failed or not: a failure is logged, and nothing
    waits on a part that will not load (its first use says what is wrong)."""
    try:
        yield
    except Exception:
        logging.getLogger("caesar.warm").exception("warm-up of the %s failed", " and ".join(parts))
    finally:
        for part in parts:
            built.readiness.done(part)


def _migrate_vectors(built: Container) -> None:
    """Ready and serving: move the episodes' vectors where the database searches them (on
    PostgreSQL with pgvector), recall searching the in-process index until they are."""
    from caesar.memory.engine.pgvector_migration import progress_log

    log = logging.getLogger("caesar.vectors")
    try:
        built.episodes.migrate_vectors(progress_log(log.info))
    except CaesarError as exc:
        log.warning("episode vectors not migrated: %s", exc)
    except Exception:
        log.exception(
            "episode vectors: the migration stopped (recall keeps the in-process index); "
            "the next start resumes it, or run `caesar db vectors`"
        )


def _catch_up(built: Container) -> None:
    """Ready and serving: what the database's engine has left to do in the background
    (memory/engine/upkeep.py: PostgreSQL's words and people's own indexes; nothing on SQLite)."""
    from caesar.memory.engine import upkeep

    # beside the current embedding model's index only (loaded by the warm-up), not old ones'
    model = built.episodes.backend.model_id if built.settings.semantic.enabled else None
    upkeep.catch_up(built.db, model)


# -- chat -------------------------------------------------------------------------------------
@app.command()
@friendly
def chat(
    message: Annotated[
        str | None, typer.Option("--message", "-m", help="One message, one reply.")
    ] = None,
) -> None:
    """Chat in the terminal (interactive), or one-shot with -m."""
    from caesar.brain import Brain
    from caesar.gateway.base import Message

    built = services()
    brain = Brain(built)
    who = person(built)
    if message is not None:
        console.print(brain.turn(message, scope=Scope(who)).reply, highlight=False, markup=False)
        return
    history: list[Message] = []
    console.print("[dim]caesar chat — empty line or Ctrl-D to quit[/dim]")
    while True:
        try:
            line = console.input("[bold cyan]you>[/bold cyan] ")
        except (EOFError, KeyboardInterrupt):
            break
        if not line.strip():
            break
        try:
            result = brain.turn(line, history, scope=Scope(who))
        except CaesarError as exc:
            err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
            continue
        console.print("[bold green]caesar>[/bold green] ", end="")
        console.print(result.reply, highlight=False, markup=False)
        history += [
            {"role": "user", "content": line},
            {"role": "assistant", "content": result.reply},
        ]


# -- workers ----------------------------------------------------------------------------------
@app.command()
@friendly
def worker(
    names: Annotated[
        list[str] | None, typer.Argument(help="Workers to run (default: the enabled ones).")
    ] = None,
    once: Annotated[bool, typer.Option("--once", help="Run until caught up, then exit.")] = False,
) -> None:
    """Run background workers: memory.extract, memory.summarise, semantic.index, retention.sweep,
    proactive."""
    from caesar.errors import ConfigError
    from caesar.workers import WorkerRunner, run_until_caught_up

    built = services()
    if names:
        unknown = [n for n in names if n not in built.workers]
        if unknown:
            raise ConfigError(
                f"unknown worker(s) {', '.join(unknown)}; known: {', '.join(built.workers)}"
            )
        chosen = [built.workers[n] for n in names]  # named explicitly: runs even if disabled
    else:
        chosen = built.enabled_workers()
        if not chosen:
            raise ConfigError(
                "no worker is enabled; name one, e.g. `caesar worker --once memory.summarise`"
            )
    if once:
        for w in chosen:
            handled = run_until_caught_up(w)
            console.print(f"{w.name}: {handled} handled")
        return
    console.print(f"running {', '.join(w.name for w in chosen)} (Ctrl-C to stop)")
    runner = WorkerRunner(chosen)
    runner.start()
    # A worker process embeds a few times per conversation; between, its copy of the local
    # embedder goes (serve keeps its own loaded: every turn embeds).
    threading.Thread(
        target=_unload_when_idle, args=(built, runner), daemon=True, name="embedder-idle"
    ).start()
    try:
        runner.wait()
    except KeyboardInterrupt:
        runner.stop()


WORKER_EMBEDDER_IDLE_S = 120.0


def _unload_when_idle(built: Container, runner: Any) -> None:
    while not runner.stopped(WORKER_EMBEDDER_IDLE_S / 4):
        built.embedder.release_if_idle(WORKER_EMBEDDER_IDLE_S)


# -- facts ------------------------------------------------------------------------------------
@facts_app.command("list")
@friendly
def facts_list(wide: Wide = False, as_json: AsJson = False) -> None:
    """Facts, most important first."""
    built = services()
    facts = built.facts.list_all(scope=Scope(person(built)))
    listing(facts, FACT_COLUMNS, wide=wide, as_json=as_json)


FACT_COLUMNS = (
    Column("key", lambda f: f.key),
    Column("value", lambda f: f.value, prose=True),
    Column("confidence", lambda f: f"{f.confidence:.2f}", wide=True),
    Column("importance", lambda f: f"{f.importance:.3f}", wide=True),
    Column("edits", lambda f: str(f.edit_count), wide=True),
    Column("updated (UTC)", lambda f: f.updated_at.strftime("%Y-%m-%d %H:%M")),
)


@facts_app.command("set")
@friendly
def facts_set(key: str, value: str) -> None:
    """Create or edit a fact (confidence 1.0)."""
    built = services()
    fact, audit_id = built.facts.set_by_operator(key, value, scope=Scope(person(built)))
    console.print(f"{fact.key} = {fact.value}  (audit #{audit_id})", highlight=False, markup=False)


@facts_app.command("delete")
@friendly
def facts_delete(key: str) -> None:
    """Delete a fact. The conversations it was learned from still say it: they are named, to
    forget with `caesar forget` (else recall can bring the value back)."""
    from caesar.memory.forget import delete_fact

    built = services()
    out = delete_fact(built, key, scope=Scope(person(built)))
    sources = out["learned_from"]
    console.print(
        f"deleted {out['deleted']}  (audit #{out['audit_id']})", highlight=False, markup=False
    )
    if sources:
        ids = " ".join(map(str, sources))
        console.print(
            f"it was learned from conversation(s) {ids}; `caesar forget {ids}` forgets them too",
            highlight=False,
            markup=False,
        )


@facts_app.command("history")
@friendly
def facts_history(key: str) -> None:
    """Every value KEY held, when, and what replaced it (conflicts included)."""
    table = Table("audit", "when (UTC)", "event", "by", "value", "until (UTC)")
    built = services()
    for c in built.facts.history(key, scope=Scope(person(built))):
        table.add_row(
            f"#{c.audit_id}",
            c.at.strftime("%Y-%m-%d %H:%M"),
            c.event.removeprefix("memory.fact."),
            c.by,
            "(deleted)" if c.value is None else c.value,
            c.until.strftime("%Y-%m-%d %H:%M") if c.until else "",
        )
    console.print(table)


# -- memories: what the person told caesar about themselves (standing.py) ----------------------
standing.register(app)


# -- recall -----------------------------------------------------------------------------------
@app.command()
@friendly
def recall(
    query: str,
    top_k: Annotated[int | None, typer.Option(help="How many.")] = None,
    now: Annotated[datetime | None, typer.Option(help="Pretend it is this time (UTC).")] = None,
    all_ages: Annotated[
        bool,
        typer.Option("--all-ages", help="Ignore max_age_days, if one is set (off by default)."),
    ] = False,
    no_threshold: Annotated[
        bool, typer.Option("--no-threshold", help="Ignore the similarity threshold.")
    ] = False,
    wide: Wide = False,
    as_json: AsJson = False,
) -> None:
    """Preview what auto-recall would surface for QUERY (every score component with --wide),
    and the excerpts of each conversation that would reach the prompt. First, the span of time QUERY
    names on your clock (`timezone`), if any, and whether it gathers across conversations."""
    from caesar.clock import utcnow
    from caesar.memory.recall.pipeline import preview
    from caesar.memory.render import SPEAKERS, time_anchor
    from caesar.named_time import asked_json, describe, span_said

    overrides: dict[str, Any] = {}
    if top_k:
        overrides["top_k"] = top_k
    if all_ages:
        overrides["max_age_days"] = None
    if no_threshold:
        overrides["similarity_threshold"] = None
    moment = now or utcnow()
    built = services()
    settings = built.settings.memory.episodes_recall
    with built.episodes.reading(person(built), moment) as scope:
        episodes = preview(built.episodes, scope, settings, query, **overrides)
    zone = built.episodes.zone
    asked = asked_json(built.episodes.read(query, moment), zone)
    if as_json:
        typer.echo(json.dumps({"asked": asked, "episodes": [e.as_json() for e in episodes]}))
        return
    for line in describe(asked):
        console.print(line, highlight=False, markup=False)
    spans = [Column("in span", lambda e: span_said(asked, e.created_at) or "", wrap=True)]
    columns = [
        Column("when", lambda e: time_anchor(e.created_at, moment, zone), wrap=True),
        *(spans if asked["spans"] else []),
        Column("chat", lambda e: f"#{e.audit_log_id}"),
        *(
            Column(header, text, wide=True)
            for header, text in (
                ("cosine", lambda e: f"{e.cosine:.3f}"),
                ("passage", lambda e: "–" if e.passage is None else f"{e.passage:.3f}"),
                ("keyword", lambda e: f"{e.keyword:.3f}"),
                ("relevance", lambda e: f"{e.relevance:.3f}"),
                ("gated", lambda e: f"{e.gated:.3f}"),
                ("freshness", lambda e: f"{e.freshness:.3f}"),
                ("recalls", lambda e: str(e.recall_count)),
                ("weight", lambda e: f"{e.recall_weight:.3f}"),
            )
        ),
        Column("score", lambda e: f"{e.score:.3f}"),
        Column("summary", lambda e: e.summary, prose=True),
    ]
    if episodes:
        listing(episodes, columns, wide=wide, as_json=False)
    else:
        console.print("nothing would be recalled")
    # What would reach the prompt with each episode: its excerpts, verbatim.
    for e in episodes:
        for excerpt in e.excerpts:
            console.print(
                f"\nchat #{e.audit_log_id}, from turn {excerpt.first_turn + 1} "
                f"(relevance {excerpt.score:.3f}):",
                highlight=False,
                markup=False,
            )
            for role, text in excerpt.turns:
                console.print(
                    f"  {SPEAKERS.get(role, role)}: {text}", highlight=False, markup=False
                )


# -- episodes ---------------------------------------------------------------------------------
@episodes_app.command("retry-failed")
@friendly
def episodes_retry_failed() -> None:
    """Summarise again the chats whose summarising failed."""
    from caesar.memory.episodes.summarise import SummariseWorker, retry_failed

    built = services()
    retried, still = retry_failed(built.workers[SummariseWorker.name])
    console.print(
        f"retried {retried} chats; {retried - still} summarised or skipped, {still} failed again"
    )


@episodes_app.command("reembed")
@friendly
def episodes_reembed(
    batch_size: int = typer.Option(64, min=1, max=1024, help="Episodes per write transaction."),
) -> None:
    """Re-embed episodes of another embedder model, or without conversation windows, from
    their stored summary and chat (no LLM call). Safe to interrupt and run again."""
    from caesar.memory.episodes.reembed import reembed

    built = services()
    embedder = built.embedder.get()

    def show(done: int, total: int) -> None:
        err.print(f"re-embedded {done}/{total}", highlight=False)

    report = reembed(
        built.db, embedder, built.episodes.backend, batch_size=batch_size, progress=show
    )
    console.print(
        f"re-embedded {report.done} episodes with {embedder.model_id} "
        f"({report.model_changed} were of another model)"
    )
    if report.model_changed:
        console.print("restart `caesar serve` so recall loads the re-embedded episodes")


# -- import, semantic-recall, proactive (memory.py); conversations, forget (conversations.py);
# mcp (mcp_command.py); db backup, export (data.py); people (people.py) ----------------------
# Registered after the commands above, so `caesar --help` lists them in this order.
memory.register(app)
importing.register(app)
conversations.register(app)
mcp_command.register(app)
data.register(app, db_app)
people.register(app)


def main() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
