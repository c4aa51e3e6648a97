"""What a starting server is still loading, for `/healthz` (issue #15: "ready" said ready at
2.5 s while the embedder, the index and the chat model were still loading, and the first chat
took 8–12 s).

`caesar serve` marks each part pending before its warm-up thread loads it; `/healthz` answers
503 "warming" with what is left until every part is done. An app built without a warm-up (the
tests, an embedding app) has nothing pending and is ready at once. A part whose loading failed
is done — the failure is logged, and the first request that needs it reports it.
"""

from __future__ import annotations

import threading


class Readiness:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[str] = []

    def pending(self, *parts: str) -> None:
        with self._lock:
            self._pending.extend(p for p in parts if p not in self._pending)

    def done(self, part: str) -> None:
        with self._lock:
            if part in self._pending:
                self._pending.remove(part)

    def waiting(self) -> list[str]:
        """The parts still loading, in the order they were marked."""
        with self._lock:
            return list(self._pending)
