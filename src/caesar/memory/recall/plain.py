"""A turn's memory for a small model, in plain sentences (issue #25). Pure functions.

The embedded 135M model (SmolLM2) answered 5–9 of 20 questions about what it had been told
from the prompt larger models get: it read `dog_name: Biscuit` among fifteen such lines and
the summaries of past chats (with caesar's own, often invented, replies) and answered "Your
dog's name is Dana." Measured on bench/probe_first_five.py at dda303d, what it answers best from:

- each fact as a sentence ("The user's dog is called Biscuit."), the facts that match the
  message first (the model takes the first that looks right);
- of the past conversations, only what the operator said, a sentence a line, dated ("Today
  the user said: "…""), ranked with the facts by the message (48 of 57 on the probe and three
  held-out-like sets, against 35 with whole messages before the facts);
- all of it in the operator's turn, just before the question, under a short system prompt
  (in the system prompt it answered fewer right on the probe).

Which prompt a turn gets is decided by the chat route's provider (`ProviderSettings.prompt`,
by kind: `gguf` → "small", the others → "full", today's prompt, unchanged).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, tzinfo

from caesar.memory.recall.hits import RecalledEpisode
from caesar.memory.render import FactLine, fence, local, one_line, relative_time
from caesar.memory.transcript import MEMORY_CLOSE, MEMORY_OPEN

SMALL_SYSTEM_PROMPT = (
    "You are caesar, a helpful assistant. The user is talking to you. Answer the user's "
    "question in one short sentence, using what you know about the user."
)
HEADER = "What you know about the user:"
WHO = "The user"

# Keys the offline extractor writes (gateway/offline.py) and the LLM one is shown
# (facts/extract.py), as sentences; any other key reads "The user's <key words> is <value>."
_SENTENCES = {
    "name": "{who} is called {value}.",
    "preferred_name": "{who} likes to be called {value}.",
    "home_location": "{who} lives in {value}.",
    "home_city": "{who} lives in {value}.",
    "employer": "{who} works at {value}.",
    "allergy": "{who} is allergic to {value}.",
    "home_country": "{who} is from {value}.",
    "plays": "{who} plays {value}.",
    "teaches": "{who} teaches {value}.",
    "loves": "{who} loves {value}.",
    "plans": "{who} is planning {value}.",
}


def fact_sentence(key: str, value: str) -> str:
    """'dog_name', 'Biscuit' → "The user's dog is called Biscuit." (one line)."""
    key, value = one_line(key), one_line(value).rstrip(".")
    if key == "occupation":  # "nurse on the night shift": the article the pattern took off
        article = "" if value.lower().startswith(("a ", "an ", "the ")) else "a "
        if article and value[:1].lower() in "aeiou":
            article = "an "
        return f"{WHO} works as {article}{value}."
    template = _SENTENCES.get(key)
    if template is not None:
        return template.format(who=WHO, value=value)
    words = " ".join(key.replace("_", " ").split())
    if key.endswith("_name") and words != "name":
        return f"{WHO}'s {words[: -len(' name')]} is called {value}."
    return f"{WHO}'s {words} is {value}."


def fact_sentences(facts: Sequence[FactLine], *, max_facts: int, max_chars: int) -> list[str]:
    """The facts as sentences, most important first (the caller's order), cut as the full
    facts block is: at most `max_facts`, and stopping at the first that would take the lines
    past `max_chars`, so the ones dropped are the least important."""
    lines: list[str] = []
    used = 0
    for fact in facts[:max_facts]:
        line = fact_sentence(fact.key, fact.value)
        if used + len(line) + 1 > max_chars:
            break
        lines.append(line)
        used += len(line) + 1
    return lines


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def said_lines(recalled: Sequence[RecalledEpisode], now: datetime, zone: tzinfo) -> list[str]:
    """What the operator said in the excerpts of the recalled conversations, a sentence a line,
    each dated: 'Yesterday the user said: "I play the cello."'. One sentence a line, so that the
    one that answers can be put first ("I play the cello, and my cat Miso hates it" told in one
    message). caesar's own replies are left out: a small model repeats them as facts, and they
    are often invented. Then the operator's dated memories shown of it, as they read."""
    lines: list[str] = []
    for episode in recalled:
        when = relative_time(local(episode.created_at, zone), local(now, zone)).capitalize()
        for excerpt in episode.excerpts:
            for role, text in excerpt.turns:
                if role != "user":
                    continue
                for sentence in _SENTENCE_END.split(one_line(text)):
                    line = f'{when} the user said: "{sentence.strip()}"'
                    if sentence.strip() and line not in lines:
                        lines.append(line)
        # the dated memories of it in the prompt (memory/recall/said.py): the operator's own
        for memory in episode.said:
            if memory.speaker == "person":
                text = memory.text.replace("The person", WHO).replace("the person", "the user")
                lines.append(f"{when}: {text}")
    return lines


def memory_block(lines: Sequence[str]) -> str:
    """The lines under their header, fenced as every injected memory is; "" for none."""
    if not lines:
        return ""
    return "\n".join([HEADER, MEMORY_OPEN, *(fence(line) for line in lines), MEMORY_CLOSE])


def with_memory(block: str, message: str) -> str:
    """The operator's turn as the small model reads it: what it knows, then the message."""
    return f"{block}\n\n{message}" if block else message
