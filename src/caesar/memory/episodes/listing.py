"""Episodes as the operator browses them: newest first, searched by summary, a page at a time.

    page = list_episodes(session, search="lisbon", limit=20)
    older = list_episodes(session, before=page.older, limit=20)    # the next page down
    newer = list_episodes(session, after=older.newer, limit=20)    # and back up

Pages are keyset-paginated on (created_at, id), newest first, so a page stays put while new
episodes arrive or old ones are forgotten: a cursor is a position in that order, not an
offset, and the episode it came from need not exist any more. `Cursor.encode()` /
`Cursor.decode()` turn one into a URL-safe string and back. Episodes with an empty summary (a
trivial or temporary chat) are never listed. The dashboard's episodes page uses this, and an
HTTP API can too.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, exists, or_, select
from sqlalchemy.sql.elements import ColumnElement

from caesar.db.models import EpisodeSummary
from caesar.errors import InputError
from caesar.memory.scope import Scope

MAX_LIMIT = 500
_SEPARATOR = "_"  # never in an ISO timestamp


@dataclass(frozen=True)
class Cursor:
    """A position in the newest-first order: an episode's (created_at, id)."""

    created_at: datetime
    id: int

    def encode(self) -> str:
        return f"{self.created_at.isoformat()}{_SEPARATOR}{self.id}"

    @classmethod
    def decode(cls, text: str) -> Cursor:
        """The inverse of `encode`; InputError for anything else."""
        moment, _sep, raw_id = text.rpartition(_SEPARATOR)
        try:
            return cls(datetime.fromisoformat(moment), int(raw_id))
        except ValueError:
            raise InputError(f"not an episode cursor: {text[:100]!r}") from None


@dataclass(frozen=True)
class EpisodeItem:
    id: int
    audit_log_id: int  # the chat row the episode summarises
    summary: str
    created_at: datetime  # when the conversation happened
    recall_count: int
    last_recalled_at: datetime | None
    # what `caesar.memory.forget` takes; None for an episode not linked to one
    conversation_id: int | None

    @property
    def cursor(self) -> Cursor:
        return Cursor(self.created_at, self.id)


@dataclass(frozen=True)
class EpisodePage:
    items: list[EpisodeItem]  # newest first
    has_newer: bool
    has_older: bool

    @property
    def newer(self) -> Cursor | None:
        """`after=` for the page above this one, if there is one."""
        return self.items[0].cursor if self.has_newer and self.items else None

    @property
    def older(self) -> Cursor | None:
        """`before=` for the page below this one, if there is one."""
        return self.items[-1].cursor if self.has_older and self.items else None


_COLUMNS = (
    EpisodeSummary.id,
    EpisodeSummary.audit_log_id,
    EpisodeSummary.summary,
    EpisodeSummary.created_at,
    EpisodeSummary.recall_count,
    EpisodeSummary.last_recalled_at,
    EpisodeSummary.conversation_id,
)


def _older_than(c: Cursor) -> ColumnElement[bool]:
    return or_(
        EpisodeSummary.created_at < c.created_at,
        and_(EpisodeSummary.created_at == c.created_at, EpisodeSummary.id < c.id),
    )


def _newer_than(c: Cursor) -> ColumnElement[bool]:
    return or_(
        EpisodeSummary.created_at > c.created_at,
        and_(EpisodeSummary.created_at == c.created_at, EpisodeSummary.id > c.id),
    )


def like_pattern(text: str) -> str:
    """`%text%` for a LIKE … ESCAPE '\\', with the text's own wildcards taken literally."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def list_episodes(
    scope: Scope,
    *,
    search: str | None = None,
    before: Cursor | None = None,
    after: Cursor | None = None,
    limit: int = 50,
) -> EpisodePage:
    """One page of `person`'s episodes, newest first.

    - `search`: only summaries containing it, case-insensitively (a plain substring; `%` and
      `_` mean themselves). Blank means no filter.
    - `before`: the page just older than this cursor (`page.older`); `after`: the page just
      newer (`page.newer`). At most one of them; neither gives the newest page.
    - `limit`: 1 … 500 episodes per page.

    `has_newer` / `has_older` say whether anything (matching `search`) lies beyond either end.
    """
    session, person = scope.session, scope.person
    if before is not None and after is not None:
        raise InputError("give before or after, not both")
    if not 1 <= limit <= MAX_LIMIT:
        raise InputError(f"limit must be between 1 and {MAX_LIMIT}, not {limit}")
    matching: list[ColumnElement[bool]] = [
        EpisodeSummary.summary != "",
        EpisodeSummary.person_id == person,
    ]
    if search and search.strip():
        pattern = like_pattern(search.strip())
        matching.append(EpisodeSummary.summary.ilike(pattern, escape="\\"))

    def beyond(condition: ColumnElement[bool]) -> bool:
        return bool(session.scalar(select(exists().where(*matching, condition))))

    newest_first = (EpisodeSummary.created_at.desc(), EpisodeSummary.id.desc())
    if after is None:
        query = select(*_COLUMNS).where(*matching).order_by(*newest_first)
        if before is not None:
            query = query.where(_older_than(before))
        rows = session.execute(query.limit(limit + 1)).all()
        has_older = len(rows) > limit
        rows = rows[:limit]
        has_newer = before is not None and beyond(
            _newer_than(Cursor(rows[0].created_at, rows[0].id)) if rows else _newer_than(before)
        )
    else:
        query = (
            select(*_COLUMNS)
            .where(*matching, _newer_than(after))
            .order_by(EpisodeSummary.created_at, EpisodeSummary.id)
        )
        rows = session.execute(query.limit(limit + 1)).all()
        has_newer = len(rows) > limit
        rows = rows[:limit][::-1]
        has_older = beyond(
            _older_than(Cursor(rows[-1].created_at, rows[-1].id)) if rows else _older_than(after)
        )
    items = [EpisodeItem(*row) for row in rows]
    return EpisodePage(items=items, has_newer=has_newer, has_older=has_older)
