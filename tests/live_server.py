"""A real uvicorn server around caesar's app, in a background thread, for tests that need a
real HTTP client (the openai SDK, httpx, a browser) rather than FastAPI's TestClient.

    from live_server import live_server

    def test_x(services):
        with live_server(services) as base_url:      # "http://127.0.0.1:<port>"
            ...

The socket is bound here (port 0) and handed to uvicorn, so there is no race for a free port.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from caesar.api import create_app

START_TIMEOUT_SECONDS = 20.0


@contextmanager
def live_server(services: Any, *, run_workers: bool = False, settings: Any = None) -> Iterator[str]:
    """Serve `create_app(settings, services)` on a free loopback port; yield its base URL."""
    settings = settings or services.settings
    app = create_app(settings, services, run_workers=run_workers)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name=f"uvicorn:{port}", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while not server.started:
        if not thread.is_alive():
            sock.close()
            raise RuntimeError("uvicorn exited during start-up; see the captured log")
        if time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"uvicorn did not start within {START_TIMEOUT_SECONDS} s")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
