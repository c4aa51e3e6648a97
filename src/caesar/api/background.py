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

# Header: the client says the request is not the operator speaking.
TEMPORARY_HEADER = "x-caesar-temporary"
TRUE = ("1", "true", "yes")


class Task(NamedTuple):
    kind: str  # "title", "tags", … or "task" (a marker matched, the kind unknown)
    max_tokens: int | None  # the reply limit for that kind, over the client's own


# Open WebUI 0.12's task prompts, by the words that tell them apart (the first match wins),
# and a reply limit each. The lengths are what a JSON answer of that kind needs with room to
# spare: a title of 3–5 words, 1–3 tags, 3–5 one-line follow-ups.
KINDS: tuple[tuple[str, tuple[str, ...], int], ...] = (
    ("title", ("title",), 48),
    ("tags", ("tags",), 64),
    ("follow_ups", ("follow-up", "follow up", "messages this user might"), 200),
    ("queries", ("search quer", "queries"), 128),
    ("autocomplete", ("autocomplet",), 64),
    ("emoji", ("emoji",), 16),
    ("image_prompt", ("image generation",), 200),
)
# The first characters of a task prompt that name its kind.
KIND_WINDOW = 160


def background_task(
    last_user_message: str, temporary_header: str | None, markers: Sequence[str]
) -> Task | None:
    """The background task this request is, or None when it is the operator speaking."""
    said = last_user_message.lstrip()
    for marker in markers:
        if said.startswith(marker):
            opening = said[len(marker) : len(marker) + KIND_WINDOW].lower()
            for kind, words, limit in KINDS:
                if any(w in opening for w in words):
                    return Task(kind, limit)
            return Task("task", None)
    if (temporary_header or "").strip().lower() in TRUE:
        return Task("temporary", None)
    return None
