"""Whose memory a call reads or writes, and through what: the one object handed to stores,
recall, the engines, workers and routes in place of a bare person, session and backend.

A `Scope` is one person's memory, in one session (the caller's transaction: a read or a
write), on one engine (the search backend `memory/engine/backend.py` picked for the
database), at one time. Every query made through it is that person's: nobody else's row is
read, scored or written (docs/household.md).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

if TYPE_CHECKING:
    from caesar.memory.engine.backend import SearchBackend


@dataclass(frozen=True)
class Scope:
    person: int
    # the caller's transaction; None for a scope handed to a store that opens its own (a
    # route's, a tool's: `within` binds one)
    bound: Session | None = None
    # the engine's search backend; None for a caller that reads and writes rows only
    engine: SearchBackend | None = None
    # the time the call acts at (a turn's `now`), where it matters
    now: datetime | None = None

    @property
    def session(self) -> Session:
        """The transaction the scope reads and writes through (a scope made without one, for
        a store that opens its own, has none to give: a bug to ask)."""
        if self.bound is None:
            raise ValueError("this scope was made without a session")
        return self.bound

    @property
    def search(self) -> SearchBackend:
        """The engine, for a call that searches (a scope made without one is a bug)."""
        if self.engine is None:
            raise ValueError("this scope was made without a search engine")
        return self.engine

    def at(self, now: datetime) -> Scope:
        return replace(self, now=now)

    def within(self, session: Session) -> Scope:
        """The same person's memory through another session."""
        return replace(self, bound=session)
