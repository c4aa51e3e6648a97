"""The `offline` provider: memory tasks with no LLM at all.

memory_summarise: an extractive TextRank summary (textrank.py, as sumy rates sentences) of the
operator's and caesar's turns, framed in the third person; trivial chats get "" (the ADR's skip
signal).
memory_extract: facts from plain first-person patterns ("my dog's name is Biscuit"), and the
person's standing statements by their shape (memory/standing/offline.py).
chat_background: a client's title, tags and follow-ups, from the chat's key phrases
(client_tasks.py).
It never chats: routing `chat` here is rejected when the settings load.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

from caesar.errors import ProviderError
from caesar.gateway import client_tasks, textrank
from caesar.gateway.base import Completion, Generation, Message, StreamChunk
from caesar.memory.standing.offline import extract_statements
from caesar.memory.transcript import parse_transcript

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"[\w'’°%-]+", re.UNICODE)
_STOP = textrank.stop_words()
# Fewer meaningful words than this in the whole chat: trivial ("what time is it?"). The whole
# chat, not only the operator's turns: "any other options?" answered at length is worth keeping.
MIN_CONTENT_WORDS = 5
MAX_SENTENCE_CHARS = 220


class _Tokenizer:
    """Sentences and words by pattern (NLTK's punkt data cannot be downloaded here)."""

    def to_sentences(self, text: str) -> list[str]:
        return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]

    def to_words(self, sentence: str) -> list[str]:
        return _WORD.findall(sentence)


_TOKENIZER = _Tokenizer()


def _content_words(text: str) -> list[str]:
    return [w for w in _TOKENIZER.to_words(text.lower()) if w not in _STOP and len(w) > 1]


def _best_sentence(texts: list[str]) -> str:
    sentences = [s for t in texts for s in _TOKENIZER.to_sentences(t)]
    sentences = [s for s in sentences if _content_words(s)]
    if not sentences:
        return ""
    if len(sentences) == 1:
        best = sentences[0]
    else:
        best = textrank.best(sentences, _TOKENIZER.to_words, _STOP)
    if len(best) > MAX_SENTENCE_CHARS:
        best = best[: MAX_SENTENCE_CHARS - 1].rstrip() + "…"
    return best


def summarise(turns: list[Message]) -> str:
    said = [t["content"] for t in turns if t["role"] == "user"]
    replied = [t["content"] for t in turns if t["role"] == "assistant"]
    if not said or len(_content_words(" ".join(said + replied))) < MIN_CONTENT_WORDS:
        return ""
    asked = _best_sentence(said)
    parts = [f'The operator said: "{asked}"'] if asked else []
    answer = _best_sentence(replied)
    if answer:
        parts.append(f'caesar replied: "{answer}"')
    return " ".join(parts)


_VALUE = r"([^.!?,;\n]{1,80}?)"
# "I live in Leeds with my wife Fatima": the place ends before the people
_END = r"(?=[.!?,;\n]|$| and | but | with (?:my|our) )"
# A place ends before when: "I moved to Berlin last year"
_END_PLACE = _END[:-1] + r"| last | this | next | in \d| a few | a couple )"
# A name as people write one: capitalised ("my wife Fatima", not "my wife likes…").
_NAME = r"([A-Z][\w'’-]+)"
# "my wife Fatima", "our cat Pixel": the relations and pets a name may follow directly
_KIN = (
    "wife|husband|partner|boyfriend|girlfriend|fiancée|fiancee|fiance|fiancé|brother|sister|"
    "son|daughter|mother|mum|mom|father|dad|grandmother|grandfather|grandma|grandpa|"
    "niece|nephew|dog|cat|puppy|kitten|rabbit|hamster|parrot|horse"
)
# Capitalised words that follow "my sister" without naming her ("my sister Monday", "my dad I")
_NOT_NAMES = frozenset(
    "I Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April "
    "May June July August September October November December The This That And But".split()
)
# "I love it": a pronoun is no value
_PRONOUNS = frozenset("it this that you them him her these those".split())
_PATTERNS: list[tuple[re.Pattern[str], str | None]] = [
    (re.compile(r"\bmy name is " + _VALUE + _END, re.IGNORECASE), "name"),
    (re.compile(r"\bcall me " + _VALUE + _END, re.IGNORECASE), "preferred_name"),
    (re.compile(r"\bi live in " + _VALUE + _END_PLACE, re.IGNORECASE), "home_location"),
    (re.compile(r"\bi work (?:as an?|as) " + _VALUE + _END, re.IGNORECASE), "occupation"),
    (re.compile(r"\bi work (?:at|for) " + _VALUE + _END, re.IGNORECASE), "employer"),
    (re.compile(r"\bi(?:'m| am) allergic to " + _VALUE + _END, re.IGNORECASE), "allergy"),
    (re.compile(r"\bmy birthday is (?:on )?" + _VALUE + _END, re.IGNORECASE), "birthday"),
    # "my dog's name is Biscuit", "my wife's name is Alice"
    (
        re.compile(r"\bmy ([a-z]+(?: [a-z]+)?)'s name is " + _VALUE + _END, re.IGNORECASE),
        "{0}_name",
    ),
    # "my dog is called Biscuit", "my cat is named Miso"
    (
        re.compile(r"\bmy ([a-z]+) is (?:called|named) " + _VALUE + _END, re.IGNORECASE),
        "{0}_name",
    ),
    # "my favourite colour is green"
    (re.compile(r"\bmy favou?rite ([a-z]+) is " + _VALUE + _END, re.IGNORECASE), "favourite_{0}"),
    # "Hello, I'm Omar": a name right after a greeting (not "I'm tired")
    (
        re.compile(
            r"(?i:\b(?:hi|hello|hey)(?: there)?[,!.]* (?:i'm|i’m|i am)) "
            + _NAME
            + r"(?=[.,!;]|$| and | here)"
        ),
        "name",
    ),
    # "my wife Fatima", "our cat Pixel"
    (re.compile(rf"(?i:\b(?:my|our) ({_KIN})) " + _NAME + r"(?![\w'’-])"), "{0}_name"),
    (re.compile(r"\bi play " + _VALUE + _END, re.IGNORECASE), "plays"),
    (re.compile(r"\bi teach " + _VALUE + _END, re.IGNORECASE), "teaches"),
    (re.compile(r"\bi (?:really )?love " + _VALUE + _END, re.IGNORECASE), "loves"),
    (re.compile(r"\bi(?:'m|’m| am) planning " + _VALUE + _END, re.IGNORECASE), "plans"),
    (re.compile(r"\bi(?:'m|’m| am) from " + _VALUE + _END, re.IGNORECASE), "home_country"),
    (
        re.compile(r"\bi(?:'ve| have)? moved to " + _VALUE + _END_PLACE, re.IGNORECASE),
        "home_location",
    ),
]


def _snake(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:60]


def extract_facts(turns: list[Message]) -> list[dict[str, object]]:
    facts: dict[str, dict[str, object]] = {}
    for turn in turns:
        if turn["role"] != "user":
            continue
        for pattern, key_template in _PATTERNS:
            for match in pattern.finditer(turn["content"]):
                groups = match.groups()
                if key_template and "{0}" in key_template:
                    key = _snake(key_template.format(groups[0]))
                    value = groups[1]
                else:
                    key = _snake(key_template or "")
                    value = groups[0]
                value = value.strip().strip("\"'“”")
                if value in _NOT_NAMES or value.lower() in _PRONOUNS:
                    continue
                if key and value:
                    facts[key] = {"key": key, "value": value, "confidence": 0.8}
    return list(facts.values())


class OfflineProvider:
    can_chat = False
    takes: frozenset[str] = frozenset()

    def __init__(self, name: str) -> None:
        self.name = name

    def warm(self) -> None:
        """Load what a client's first title would wait for (serve's warm-up, once ready)."""
        client_tasks.warm()

    def complete(
        self,
        messages: list[Message],
        model: str,
        *,
        task: str,
        json_mode: bool = False,
        generation: Generation | None = None,
    ) -> Completion:
        if task == "chat_background":
            prompt = messages[-1]["content"] if messages else ""
            try:
                text = client_tasks.answer(prompt)
            except ValueError as exc:
                raise ProviderError(self.name, str(exc)) from None
            return Completion(text=text, provider=self.name, model=model)
        turns = parse_transcript(messages[-1]["content"] if messages else "")
        if task == "memory_summarise":
            text = summarise(turns)
        elif task == "memory_extract":
            memories = [s.as_json() for s in extract_statements(turns)]
            text = json.dumps({"facts": extract_facts(turns), "memories": memories})
        else:
            raise ProviderError(self.name, f"the offline provider cannot serve task {task!r}")
        return Completion(text=text, provider=self.name, model=model)

    def stream(
        self,
        messages: list[Message],
        model: str,
        *,
        task: str,
        generation: Generation | None = None,
    ) -> Iterator[StreamChunk]:
        if task != "chat_background":
            raise ProviderError(self.name, "the offline provider cannot chat")
        done = self.complete(messages, model, task=task, generation=generation)
        yield StreamChunk(done.text)
        yield StreamChunk("", usage=done.usage, finish_reason="stop")
