"""Which requests are a client's background work, not the operator speaking (issue #26).

Open WebUI sends, besides each of the operator's turns, a title, a tags and a follow-ups
request (and, with its features on, search queries and autocompletion): each a single user
message that opens with `### Task:`, under the chat's own `X-OpenWebUI-Chat-Id`. Learned as
chats, they were 9 of 11 episodes in a two-chat trial, and recalled into later turns.

A background request is answered without memory in its prompt (a title generator must not see
the operator's past) and with a short reply limit for the kinds known here; it is never stored
as a turn, summarised, extracted, indexed or counted as a recall. Its audit row says which kind
it was, and holds none of its text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from caesar.gateway.client_tasks import kind_of, limit_of

# Header: the client says the request is not the operator speaking.
TEMPORARY_HEADER = "x-caesar-temporary"
TRUE = ("1", "true", "yes")


class Task(NamedTuple):
    kind: str  # "title", "tags", … or "task" (a marker matched, the kind unknown)
    max_tokens: int | None  # the reply limit for that kind, over the client's own


def background_task(
    last_user_message: str, temporary_header: str | None, markers: Sequence[str]
) -> Task | None:
    """The background task this request is, or None when it is the operator speaking."""
    said = last_user_message.lstrip()
    for marker in markers:
        if said.startswith(marker):
            kind = kind_of(said, marker)
            return Task(kind, limit_of(kind))
    if (temporary_header or "").strip().lower() in TRUE:
        return Task("temporary", None)
    return None
