"""Crash and concurrency harness for test_crash_safety.py and test_concurrency.py.

Run as a script, it is a *driver* process: it imports caesar once (the slow part) and then
forks real worker processes from itself, so killing and restarting a worker costs
milliseconds instead of a fresh interpreter:

    python tests/crashkit.py crash   CONFIG.json   # kill -9 a worker again and again
    python tests/crashkit.py workers CONFIG.json   # N worker processes until SIGTERM

Imported, it gives the tests plain-JSON settings (they cross a process boundary), the driver
start/result helpers and a provider that keeps failing now and then. After every kill the driver
runs the exactly-once checks of tests/exactly_once.py, not only at the end.
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Self

from exactly_once import CHECKS

ROOT = Path(__file__).resolve().parent.parent
MODEL_CACHE = ROOT / ".caesar-test" / "models"


# -- settings and processes, shared by the tests ------------------------------------------------
def settings_dict(
    home: Path, database_url: str, llm_base_url: str, api_key: str, **extra: Any
) -> dict[str, Any]:
    """Plain-JSON settings (they cross a process boundary): memory tasks and chat go to the
    fake LLM server, the embedder is the real MiniLM from the test cache."""
    provider = {
        "kind": "openai",
        "base_url": llm_base_url,
        "api_key": api_key,
        "max_retries": 0,
        "timeout_seconds": 5,
    }
    settings: dict[str, Any] = {
        "home": str(home),
        "database_url": database_url,
        "gateway": {
            "providers": {"local": provider, "offline": {"kind": "offline"}},
            "routes": {
                "chat": "local:test-model",
                "memory_extract": "local:test-model",
                "memory_summarise": "local:test-model",
            },
        },
        "embedder": {"cache_dir": str(MODEL_CACHE)},
        # on by default; a test that wants them says so (`memory=`)
        "memory": {
            "episodes_summarise": {"enabled": False, "quiet_seconds": 0},
            "facts_extract": {"enabled": False},
        },
    }
    for key, value in extra.items():
        settings[key] = value
    return settings


def settings_env(settings: dict[str, Any]) -> dict[str, str]:
    """The same settings as CAESAR_* variables, for the real `caesar` command."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAESAR_")}
    for key, value in settings.items():
        env[f"CAESAR_{key.upper()}"] = (
            json.dumps(value) if isinstance(value, dict | list) else str(value)
        )
    env["HF_HUB_OFFLINE"] = "1"
    return env


def start_driver(mode: str, config: dict[str, Any], workdir: Path) -> Any:
    import subprocess

    path = workdir / f"{mode}-config.json"
    path.write_text(json.dumps(config))
    return subprocess.Popen(
        [sys.executable, str(Path(__file__)), mode, str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )


def driver_result(proc: Any, timeout: float) -> dict[str, Any]:
    out, err = proc.communicate(timeout=timeout)
    lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise AssertionError(f"driver failed ({proc.returncode}):\n{out[-3000:]}\n{err[-5000:]}")
    return json.loads(lines[-1][len("RESULT ") :])  # type: ignore[no-any-return]


class FlakyProvider:
    """While running, keeps one provider fault queued on the fake LLM server (HTTP 500 or a
    malformed body, alternately), so failures land all through a run."""

    def __init__(self, llm: Any, path: str = "/v1/chat/completions", every: float = 0.1) -> None:
        self.llm, self.path, self.every = llm, path, every
        self.injected = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            if not self.llm.pending_faults:
                if self.injected % 2:
                    self.llm.fail_next("malformed", path=self.path)
                else:
                    self.llm.fail_next("status", status=500, path=self.path)
                self.injected += 1

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


# -- the driver --------------------------------------------------------------------------------
_WARM: dict[str, Any] = {}


def _build_services(config: dict[str, Any]) -> Any:
    from caesar.config import Settings
    from caesar.services import Services

    services = Services.build(Settings(**config["settings"]))
    if "embedder" in _WARM:  # loaded once in the driver, inherited by every forked worker
        services.embedder.set(_WARM["embedder"])
    return services


def _arm_kill(engine: Any, where: str, countdown: int, site_log: Path) -> None:
    """SIGKILL this process at a chosen point of its database work: just before its
    `countdown`-th SQL statement, just before its `countdown`-th COMMIT, or just after it
    (between two transactions: where a worker that split "write outcomes" and "move the
    cursor" into two transactions would lose or repeat a batch)."""
    from sqlalchemy import event
    from sqlalchemy.orm import Session

    left = [countdown]

    def maybe_die(site: str) -> None:
        left[0] -= 1
        if left[0] <= 0:
            with site_log.open("a") as f:
                f.write(" ".join(site.split()[:3])[:60] + "\n")
            os.kill(os.getpid(), signal.SIGKILL)

    if where == "statement":

        @event.listens_for(engine, "before_cursor_execute")
        def _statement(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
            maybe_die(statement)

    elif where == "commit":

        @event.listens_for(engine, "commit")
        def _commit(conn: Any) -> None:
            maybe_die("COMMIT")

    else:

        @event.listens_for(Session, "after_commit")
        def _after_commit(session: Any) -> None:
            maybe_die("after COMMIT")


def _crash_child(config: dict[str, Any], kill_at: tuple[str, int] | None, site_log: Path) -> None:
    from caesar.workers import run_until_caught_up

    services = _build_services(config)
    if kill_at is not None:
        _arm_kill(services.db.engine, *kill_at, site_log)
    run_until_caught_up(services.workers[config["worker"]])
    services.close()


def run_crash(config: dict[str, Any]) -> dict[str, Any]:
    """Fork a worker, SIGKILL it (from here after a random delay, or from inside at a random
    SQL statement), check the invariants, repeat; after `max_kills`, let one run finish."""
    from caesar.db.engine import Database

    rng = random.Random(config["seed"])
    check = CHECKS[config["worker"]]
    site_log = Path(config["site_log"])
    kills = by_timer = from_inside = runs = 0
    violations: list[str] = []
    timing = Counter[str]()
    while True:
        started = time.monotonic()
        final = kills >= config["max_kills"]
        if final and config.get("stop_after_kills"):
            break  # the caller restarts the real `caesar worker` to finish
        kill_at: tuple[str, int] | None = None
        delay = None
        if not final:
            where = rng.choice(["timer", "statement", "commit", "after-commit"])
            if where == "timer":
                delay = rng.uniform(*config["timer_range"])
            elif where == "statement":
                kill_at = (where, rng.randint(1, config["max_statements"]))
            else:
                kill_at = (where, rng.randint(1, 6))
        runs += 1
        pid = os.fork()
        if pid == 0:  # the worker process
            code = 0
            try:
                _crash_child(config, kill_at, site_log)
            except BaseException:  # reported through the exit code
                logging.getLogger("crashkit").exception("worker child failed")
                code = 3
            os._exit(code)
        status = None
        if delay is not None:
            deadline = time.monotonic() + delay
            while status is None and time.monotonic() < deadline:
                done, waited = os.waitpid(pid, os.WNOHANG)
                if done:
                    status = waited
                else:
                    time.sleep(0.005)
            if status is None:
                os.kill(pid, signal.SIGKILL)
        if status is None:
            _, status = os.waitpid(pid, 0)
        killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        if killed:
            kills += 1
            by_timer += delay is not None
            from_inside += kill_at is not None
        elif os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"worker child ended with {os.waitstatus_to_exitcode(status)}")
        timing["final" if final else "killed runs"] += time.monotonic() - started
        started = time.monotonic()
        # Checked after every run, killed or not: the database must always be consistent.
        db = Database(config["settings"]["database_url"])
        try:
            problems, _tally = check(db)
        finally:
            db.dispose()
        violations += [f"after run {runs}: {p}" for p in problems]
        timing["checks"] += time.monotonic() - started
        if not killed:
            break  # run_until_caught_up returned: nothing is left
    return {
        "kills": kills,
        "by_timer": by_timer,
        "from_inside": from_inside,
        "runs": runs,
        "seconds": {k: round(v, 2) for k, v in timing.items()},
        "violations": violations[:20],
        "kill_sites": sorted(Counter(site_log.read_text().splitlines()).items())
        if site_log.exists()
        else [],
    }


class _RaceCounter(logging.Handler):
    """Counts the CursorWorker's "batch taken by another worker" log lines (lost CAS races)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lost = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "taken by another worker" in record.getMessage():
            self.lost += 1


def _workers_child(config: dict[str, Any], out: Path) -> None:
    from caesar.workers import WorkerRunner

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    races = _RaceCounter()
    workers_log = logging.getLogger("caesar.workers")
    workers_log.setLevel(logging.INFO)
    workers_log.addHandler(races)
    services = _build_services(config)
    runner = WorkerRunner([services.workers[name] for name in config["workers"]])
    runner.start()
    while not stop.wait(0.05):
        pass
    runner.stop()
    services.close()
    out.write_text(json.dumps({"pid": os.getpid(), "lost_races": races.lost}))


def run_workers(config: dict[str, Any]) -> dict[str, Any]:
    """`count` worker processes on one database until this driver gets SIGTERM."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    outdir = Path(config["outdir"])
    pids = []
    for i in range(config["count"]):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                _workers_child(config, outdir / f"worker-{i}.json")
            except BaseException:  # reported through the exit code
                logging.getLogger("crashkit").exception("worker child failed")
                code = 3
            os._exit(code)
        pids.append(pid)
    print("ready", flush=True)
    while not stop.wait(0.05):
        pass
    codes = []
    for pid in pids:
        os.kill(pid, signal.SIGTERM)
    for pid in pids:
        codes.append(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
    stats = [json.loads(p.read_text()) for p in sorted(outdir.glob("worker-*.json"))]
    return {"exit_codes": codes, "workers": stats}


def _warm_up(config: dict[str, Any]) -> None:
    """Import everything once, before forking (the SDKs import lazily, on the first request):
    then a restarted worker starts in milliseconds. Nothing stays connected across the fork."""
    from caesar.errors import CaesarError

    services = _build_services(config)
    try:
        services.gateway.complete([{"role": "user", "content": "warm up"}], task="memory_extract")
    except CaesarError:
        pass  # a fault meant for the workers; the imports happened all the same
    services.embedder.get().embed_batch(["warm up"])
    # ONNX Runtime runs single-threaded here (minilm.py), so the loaded session forks cleanly.
    _WARM["embedder"] = services.embedder.get()
    services.close()


def main() -> None:
    mode, config_path = sys.argv[1], Path(sys.argv[2])
    config = json.loads(config_path.read_text())
    logging.basicConfig(
        level=logging.WARNING, format="%(process)d %(levelname)s %(name)s: %(message)s"
    )
    _warm_up(config)
    result = run_crash(config) if mode == "crash" else run_workers(config)
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    main()
