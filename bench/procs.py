"""The bench harness's processes: `caesar` commands and `caesar serve` as an operator runs them,
the instant provider in a process of its own, and what /proc says about a process.

    .venv/bin/python bench/procs.py   # the instant provider alone (prints its URL)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import benchlib
import httpx

CAESAR = str(Path(sys.executable).with_name("caesar"))
TOKEN = "bench-load-token-0123456789"


def caesar_env(
    home: Path, config: str | None = None, src: Path | None = None, **settings: Any
) -> dict[str, str]:
    """The environment of a caesar process on `home`: no CAESAR_ setting of this shell's,
    `config` as its caesar.toml (in `home`), `src` (default: the caesar under test,
    benchlib.SRC) first on its path, and each of `settings` as CAESAR_<NAME> (JSON unless a
    string)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAESAR_")}
    env.update(CAESAR_HOME=str(home), HF_HUB_OFFLINE="1")
    if config is not None:
        home.mkdir(parents=True, exist_ok=True)
        (home / "caesar.toml").write_text(config)
        env["CAESAR_CONFIG"] = str(home / "caesar.toml")
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(src or benchlib.SRC), env.get("PYTHONPATH")])
    )
    for key, value in settings.items():
        env[f"CAESAR_{key.upper()}"] = value if isinstance(value, str) else json.dumps(value)
    return env


def caesar(env: dict[str, str], *args: str) -> str:
    """A `caesar` command to its end; its output, or an error with its stderr."""
    done = subprocess.run([CAESAR, *args], env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"caesar {' '.join(args)}: {done.stderr.strip()[-2000:]}")
    return done.stdout


class Server:
    """`caesar serve` in a child process, ready when GET /healthz answers 200 (`ready_s` after
    the spawn). Its output goes to `log` (default: nowhere); `upgrade` runs `caesar db upgrade`
    first."""

    def __init__(
        self,
        env: dict[str, str],
        *options: str,
        log: Path | None = None,
        upgrade: bool = False,
        timeout: float = 120.0,
        wait: bool = True,
    ) -> None:
        if upgrade:
            caesar(env, "db", "upgrade")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self._out = log.open("wb") if log is not None else None
        self.started = time.perf_counter()
        self.process = subprocess.Popen(
            [CAESAR, "serve", "--host", "127.0.0.1", "--port", str(self.port), *options],
            env=env,
            stdout=self._out or subprocess.DEVNULL,
            stderr=subprocess.STDOUT if log is not None else subprocess.DEVNULL,
        )
        self.ready_s = self.wait(timeout) if wait else None

    def wait(self, timeout: float = 120.0, poll: float = 0.05) -> float:
        """Seconds from the spawn to the first 200 from /healthz."""
        with httpx.Client(timeout=2.0) as client:
            while time.perf_counter() - self.started < timeout:
                if self.process.poll() is not None:
                    tail = self.log.read_text(errors="replace")[-2000:] if self.log else ""
                    raise RuntimeError(f"caesar serve exited during start-up: {tail}")
                try:
                    if client.get(f"{self.url}/healthz").status_code == 200:
                        return time.perf_counter() - self.started
                except httpx.TransportError:
                    pass
                time.sleep(poll)
        self.stop()
        raise RuntimeError("caesar serve did not answer /healthz in time")

    def stop(self) -> None:
        stop(self.process)
        if self._out is not None:
            self._out.close()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


def stop(process: subprocess.Popen[Any], timeout: float = 30.0) -> None:
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def post(url: str, body: dict[str, Any], timeout: float = 60.0) -> Any:
    """POST `body` as JSON; the answer's JSON (an error unless it is 2xx)."""
    response = httpx.post(url, json=body, timeout=timeout)
    response.raise_for_status()
    return response.json()


def free_port() -> int:
    """A loopback port nobody listens on now, for a `caesar serve` a bench starts."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- the instant provider, in a process of its own ---------------------------------------------
def _reply(body: dict[str, Any], protocol: str) -> str:
    """A fact for the extractor, a summary for the summariser, a short reply for a chat."""
    from caesar.memory.episodes.summarise import SUMMARISE_SYSTEM
    from caesar.memory.facts.extract import EXTRACT_SYSTEM

    messages = body.get("messages") or []
    system = str(messages[0].get("content", "")) if messages else ""
    if system.startswith(EXTRACT_SYSTEM[:40]):
        return json.dumps({"facts": [{"key": "trip_city", "value": "Lisbon", "confidence": 0.7}]})
    if system.startswith(SUMMARISE_SYSTEM[:40]):
        return "The operator planned a trip and caesar suggested what to pack."
    return "Pack light, check the weather, and bring a good book."


@contextmanager
def instant_provider() -> Iterator[str]:
    """The test suite's OpenAI wire server in its own process (so it steals no interpreter
    time from the bench's clients), answering at once; yields its base URL."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})  # for sigwait
    try:
        proc = subprocess.Popen([sys.executable, __file__], stdout=subprocess.PIPE, text=True)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    assert proc.stdout is not None
    try:
        yield proc.stdout.readline().strip()
    finally:
        stop(proc, 15)


def provider_settings(url: str) -> dict[str, Any]:
    """CAESAR_GATEWAY for a caesar whose every task goes to the instant provider at `url`."""
    local = {"kind": "openai", "base_url": url, "api_key": "bench-key-0123456789"}
    return {
        "providers": {"local": {**local, "max_retries": 0, "timeout_seconds": 30}},
        "routes": {t: "local:instant" for t in ("chat", "memory_extract", "memory_summarise")},
    }


# -- /proc -----------------------------------------------------------------------------------
def cpu_seconds(pid: int) -> float:
    """CPU time (user + system, all threads) a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid:
            found.append(int(stat.parent.name))
    return found


def memory_mb(pid: int) -> float:
    """VmRSS of a process, in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def has_torch(pid: int) -> bool:
    return "libtorch" in Path(f"/proc/{pid}/maps").read_text()


if __name__ == "__main__":
    from fakes.llm_server import FakeLLMServer

    with FakeLLMServer(reply=_reply) as llm:
        print(llm.base_url, flush=True)
        signal.sigwait({signal.SIGTERM, signal.SIGINT})
