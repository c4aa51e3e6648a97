"""A client's background tasks (a chat's title, its tags, follow-up suggestions), read and,
with no LLM worth asking, answered (issue #49).

Open WebUI asks the chat model for each chat's title, tags and follow-ups: one user message
that opens with `### Task:`, names what it wants in its first lines and carries the chat in
`<chat_history>` ("USER: …" / "ASSISTANT: …" lines). The embedded 135M model answers most of
them with the template's own placeholder ("Your concise title here", `["tag1","tag2"]`) and
takes 1–22 s of the CPU the chat needs. With the embedded model on the chat route, the
`chat_background` route is `offline`, and this answers in the JSON the client reads:

- **title**: the chat's key phrase (YAKE, over what the person said; what caesar replied only
  when they said too little), 2–4 words, capitalised;
- **tags**: up to three of its key phrases, or `["General"]` when there are none;
- **follow_ups**: what the person might ask next about the key phrases of the last exchange,
  none when it gives nothing to go on;
- **queries**: the key phrases, as search queries; **autocomplete**: nothing (`""`); **emoji**:
  a speech balloon.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

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
# The first characters of a task prompt, after its marker, that name its kind.
KIND_WINDOW = 160
MAX_MARKER = 50  # clients.background_markers' longest
# What can be answered here; anything else goes to a model
ANSWERED = frozenset({"title", "tags", "follow_ups", "queries", "autocomplete", "emoji"})

_HISTORY = re.compile(r"<chat_history>\s*(.*?)\s*(?:</chat_history>|\Z)", re.DOTALL)
_SPEAKER = re.compile(r"^(USER|ASSISTANT):[ \t]?", re.MULTILINE)
# What people open with that names no subject
_GREETING = re.compile(
    r"^(?:hi|hello|hey|hiya|good (?:morning|afternoon|evening)|thanks|thank you)\b[!,.]*\s*",
    re.IGNORECASE,
)
MAX_TITLE_WORDS = 4
MAX_TAGS = 3
MAX_FOLLOW_UPS = 3


def kind_of(prompt: str, marker: str = "") -> str:
    """The kind of task a prompt is ("task": unknown), by the words after its `marker` (not
    known: the first MAX_MARKER + KIND_WINDOW characters)."""
    said = prompt.lstrip()
    opening = (said[len(marker) :] if marker else said)[
        : KIND_WINDOW + (0 if marker else MAX_MARKER)
    ]
    opening = opening.lower()
    for kind, words, _limit in KINDS:
        if any(w in opening for w in words):
            return kind
    return "task"


def limit_of(kind: str) -> int | None:
    return next((limit for name, _words, limit in KINDS if name == kind), None)


def chat_history(prompt: str) -> list[tuple[str, str]]:
    """The (role, text) turns of the prompt's `<chat_history>`, in order."""
    found = _HISTORY.search(prompt)
    if found is None:
        return []
    body = found.group(1)
    marks = list(_SPEAKER.finditer(body))
    turns = []
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(body)
        text = body[mark.end() : end].strip()
        if text:
            turns.append(("user" if mark.group(1) == "USER" else "assistant", text))
    return turns


# Words that name no subject, beyond YAKE's and sumy's stop words: how people ask and name
_NO_SUBJECT = frozenset(
    """called named call name suggest suggestion suggestions recommend recommendation
    recommendations help tips tip ideas idea question questions please thanks thank hi hello
    hey good great nice lot lots thing things way ways kind sort bit today tomorrow yesterday
    tonight week weekend month year day time times""".split()
)


@functools.lru_cache(maxsize=4)
def _extractor(words: int) -> Any:
    import yake

    from caesar.gateway.textrank import stop_words

    own = Path(yake.__file__).parent / "core" / "StopwordsList" / "stopwords_en.txt"
    listed = {w.strip().lower() for w in own.read_text("utf-8", "ignore").splitlines()}
    stop = listed | stop_words() | _NO_SUBJECT
    return yake.KeywordExtractor(lan="en", n=words, dedupLim=0.7, top=10, stopwords=stop)


def warm() -> None:
    """The extractors built (yake's import, ~1 s): a title should not wait for them."""
    for words in (2, 3):
        _extractor(words)


def key_phrases(text: str, words: int = 3) -> list[str]:
    """The text's key phrases, best first (YAKE: no model, no corpus), as written."""
    text = text.strip()
    if not text:
        return []
    found = _extractor(words).extract_keywords(text)
    return [phrase for phrase, _score in found if any(c.isalpha() for c in phrase)]


def _subject_text(turns: list[tuple[str, str]], last: bool = False) -> str:
    """What the chat is about: what the person said (only the last exchange with `last`), and
    caesar's replies too when the person said too little to tell."""
    if last:
        tail: list[tuple[str, str]] = []
        for role, text in reversed(turns):
            tail.insert(0, (role, text))
            if role == "user":
                break
        turns = tail
    said = " ".join(_GREETING.sub("", text) for role, text in turns if role == "user")
    if len(said.split()) >= 4:
        return said
    return " ".join([said, *(text for role, text in turns if role == "assistant")])


_SMALL = frozenset("a an and as at but by for in of on or the to vs with".split())


def _capitalised(phrase: str) -> str:
    """Title case that keeps what is written capitalised ("iPhone", "NASA") and the small words
    small."""
    words = phrase.split()
    return " ".join(
        w
        if w[:1].isupper() or any(c.isupper() for c in w[1:]) or (i and w.lower() in _SMALL)
        else w[:1].upper() + w[1:]
        for i, w in enumerate(words)
    )


def title(turns: list[tuple[str, str]]) -> str:
    phrases = key_phrases(_subject_text(turns))
    if not phrases:
        return "New Chat"
    words = phrases[0].split()
    if len(words) < 2 and len(phrases) > 1:  # "Biscuit" alone says little: add the next one
        second = phrases[1]
        if second.lower() not in phrases[0].lower():
            words = [*words, "and", *second.split()]
    return _capitalised(" ".join(words[: MAX_TITLE_WORDS + 1]))


def tags(turns: list[tuple[str, str]]) -> list[str]:
    phrases = key_phrases(_subject_text(turns), words=2)
    chosen: list[str] = []
    for phrase in phrases:
        if any(phrase.lower() in c.lower() or c.lower() in phrase.lower() for c in chosen):
            continue
        chosen.append(_capitalised(phrase))
        if len(chosen) == MAX_TAGS:
            break
    return chosen or ["General"]


def follow_ups(turns: list[tuple[str, str]]) -> list[str]:
    """What the person might ask next: more about the last exchange's key phrases. None when
    caesar has not answered yet or the exchange names nothing."""
    if not turns or turns[-1][0] != "assistant":
        return []
    said = _subject_text(turns, last=True)
    phrases = key_phrases(said, words=2)[:MAX_FOLLOW_UPS]
    return [f"Tell me more about {_as_said(p, said)}." for p in phrases]


def _as_said(phrase: str, text: str) -> str:
    """ "my dog" where the person wrote "my dog", else the phrase."""
    mine = re.search(rf"\b(my|our) {re.escape(phrase)}\b", text, re.IGNORECASE)
    return f"{mine.group(1).lower()} {phrase}" if mine else phrase


def answer(prompt: str) -> str:
    """The JSON a client reads for this task, made without a model."""
    kind = kind_of(prompt)
    turns = chat_history(prompt)
    if kind == "title":
        return json.dumps({"title": title(turns)}, ensure_ascii=False)
    if kind == "tags":
        return json.dumps({"tags": tags(turns)}, ensure_ascii=False)
    if kind == "follow_ups":
        return json.dumps({"follow_ups": follow_ups(turns)}, ensure_ascii=False)
    if kind == "queries":
        queries = key_phrases(_subject_text(turns, last=True))[:MAX_TAGS]
        return json.dumps({"queries": queries}, ensure_ascii=False)
    if kind == "autocomplete":
        return json.dumps({"text": ""})
    if kind == "emoji":
        return "💬"
    raise ValueError(f"no offline answer for a client task of kind {kind!r}")
