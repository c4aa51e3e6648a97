"""The memory workers of `caesar serve` in a process of their own, at a lower CPU priority
(issue #16).

In-process, the workers' threads share the server's interpreter and cores with chat turns:
while they summarise and embed a backlog, turns slow several-fold (bench/bench_busy.py). As a
child process niced by `workers_nice`, they have their own interpreter (no GIL shared with
the server), and the kernel gives a chat turn the core whenever both want it, so the backlog
advances on whatever the turns leave. Every worker write is exactly-once across processes
(workers.py), and the server's in-process indexes pick up what the child writes (new rows on
their next refresh, replaced or forgotten ones found missing on search), so nothing else
changes.

The child is `caesar worker` with the server's environment (the same settings). If it dies,
the server logs it and starts another after a pause that doubles up to a minute; it is stopped
with the server, and on Linux it is told to exit if the server dies without stopping it.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
MAX_BACKOFF_SECONDS = 60.0
COMMAND = [sys.executable, "-c", "from caesar.cli.main import main; main()", "worker"]


def _child_setup(nice: int) -> Callable[[], None]:
    def setup() -> None:  # runs in the child, between fork and exec
        os.nice(nice)
        try:  # exit with the server, even if it is killed
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        except (OSError, AttributeError):  # not Linux: stopped by `stop` only
            pass

    return setup


class WorkerProcess:
    def __init__(
        self, nice: int, command: list[str] | None = None, env: dict[str, str] | None = None
    ) -> None:
        """`env`: the child's environment (default: this process's, so the same settings)."""
        self.nice = nice
        self.command = command or COMMAND
        self.env = env
        self._proc: subprocess.Popen[bytes] | None = None
        self._stopping = threading.Event()
        self._spawned = threading.Event()
        self._thread = threading.Thread(target=self._supervise, name="worker-process", daemon=True)
        self.restarts = 0

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self) -> WorkerProcess:
        """Spawn the child (from the supervising thread, which lives as long as this does:
        the child's "exit with the server" signal fires when the thread that spawned it
        ends, not the process), and return once it runs."""
        if self._stopping.is_set():  # the server stopped before it was warm
            return self
        self._thread.start()
        self._spawned.wait()
        return self

    def _spawn(self) -> None:
        self._proc = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            self.command,
            preexec_fn=_child_setup(self.nice),
            stdin=subprocess.DEVNULL,
            env=self.env,
        )
        log.info("memory workers: process %d, nice %+d", self._proc.pid, self.nice)

    def _supervise(self) -> None:
        try:
            self._spawn()
        finally:
            self._spawned.set()
        backoff = 1.0
        while not self._stopping.is_set():
            assert self._proc is not None
            code = self._proc.wait()
            if self._stopping.is_set():
                return
            log.warning(
                "memory worker process %d exited with %s; starting another in %.0f s",
                self._proc.pid,
                code,
                backoff,
            )
            if self._stopping.wait(backoff):
                return
            backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)
            self.restarts += 1
            self._spawn()

    def stop(self, timeout: float = 10.0) -> None:
        self._stopping.set()
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)
