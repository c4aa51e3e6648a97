"""What a message asks of memory besides its topic: when (memory/recall/when.py), whether it
asks about the time alone, and whether it gathers across conversations. Pure.

Why: "What did we talk about yesterday?" has no topic to match — every word but the time is
about talking — so recall must bring that span's conversations, newest first, with no
similarity threshold. "How many times did I go running?" needs every conversation that
mentions running, each compactly, not two of them in depth: the model must be able to count
them from the prompt. Both change what is recalled (memory/recall/hybrid.py) and how the
block is laid out (memory/recall/excerpts.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from typing import Literal

from caesar.memory.recall.keywords import query_terms
from caesar.memory.recall.when import TimeRead, read_time

# Words about the conversation itself rather than its subject: what is left of "what did we
# talk about …" once the time is read is no topic.
META_WORDS = frozenset(
    """talk talked talking talks discuss discussed discussing discussion discussions chat chats
    chatted chatting say said saying tell told telling remind reminder mention mentioned
    mentioning speak spoke speaking spoken conversation conversations convo topic topics ask
    asked asking us let lets go over went again recap summary summarise summarize overview
    back anything something stuff things thing get got came come up cover covered happen
    happened remember recall previous earlier whatever like kind sort many much times time
    often suggest suggested suggesting suggestion suggestions recommend recommended
    recommendation recommendations advise advised advice gave give""".split()  # noqa: SIM905
)
# A question that gathers across conversations: a count, a list, every occurrence; a sum,
# an average or a difference of things told apart ("the total cost of Lola's vet visit and
# flea medication", "how much older am I than the average age of my team"); which of two
# came first ("who did I meet first, the woman selling jam or the tourist?"). Each part of
# the answer is in its own conversation: depth showed one of them (LongMemEval multi-session
# and temporal questions, docs/recall-by-time.md).
_GATHERS = re.compile(
    r"\bhow\s+(?:many|often)\b(?!\s+\w+\s+ago\b)|\bin\s+total\b|\baltogether\b|\ball\s+(?:the|of\s+the|my|of\s+my)\b"
    r"|\b(?:every|each)\s+time\b|\bwhich\s+\w+(?:\s+\w+)?\s+(?:have|did)\s+i\b"
    r"|\blist\s+(?:all|every|the|my)\b|\bboth\b"
    # ... asked, not said ("on average I sleep six hours", "first tea or coffee"): a question
    # word earlier in the same sentence
    r"|\b(?:what|how|which|who|did)\b[^.!?]*\b(?:"
    r"(?:total|combined|sum|average|minimum|maximum|difference)\b|each\b(?!\s+other\b)"
    r"|first\b[^.!?]*\bor\b|or\b[^.!?]*\bfirst\b)"
    r"|\bhow\s+(?:much|many)\s+(?:\w+\s+)?(?:older|younger|more|less|fewer|longer|shorter"
    r"|bigger|smaller|cheaper|higher|lower|earlier|later)\b"
    # a list asked for: "what types of yoga …", "what are Joanna's hobbies?", "where has
    # Melanie camped?", "what has she painted?"
    r"|\bwhat\s+(?:types|kinds|sorts)\s+of\b"
    r"|\bwhat\s+are\s+(?:the\s+|some\s+)?(?:[\w']+\s+){0,3}?[a-z]+[^s\W]s\b"
    r"|\b(?:what|where)\s+has\s+\w+\s+(?:\w+ed|been|made|done|seen|taken|read|written|eaten"
    r"|bought|met)\b"
)
_WORDS = re.compile(r"[\w'-]+")
_ASKS = frozenset({"what", "which"})
_AUXILIARIES = frozenset({"has", "have", "does", "do", "did", "are", "were"})
# Words ending in s that are no plural ("what exciting news did Maria share?" asks for one
# thing), besides those in -ss, -us and -is (business, bonus, analysis); not "series" or
# "species", which are both ("which TV series does Tim watch?")
_NOT_PLURAL = frozenset(
    "news means lens canvas chaos physics mathematics economics politics "
    "gymnastics athletics diabetes".split()  # noqa: SIM905
)
_GATHER_WORDS = (
    *("how", "total", "altogether", "all", "time", "which", "list", "both", "combined", "sum"),
    *("average", "minimum", "maximum", "difference", "each", "than", "first", "what", "where"),
)
MAX_CHARS = 2000
_CLOCK = re.compile(r"\d+(?:am|pm|h)?")  # "3", "3pm": a time of day is no topic


def _asks_plural(low: str) -> bool:
    """ "which cities has John been to?", "what books have I read?": a plural asked for, its
    answer spread over several conversations — "what"/"which", up to three words, one ending
    in s (not ss, us, is, nor one of _NOT_PLURAL), then an auxiliary."""
    if "what" not in low and "which" not in low:
        return False
    words = _WORDS.findall(low)
    for i, word in enumerate(words):
        if word in _ASKS:
            for k in range(i + 1, min(i + 4, len(words) - 1)):
                w = words[k]
                if (
                    w.endswith("s")
                    and not w.endswith(("ss", "us", "is"))
                    and w not in _NOT_PLURAL
                    and words[k + 1] in _AUXILIARIES
                ):
                    return True
    return False


def _clock(term: str) -> bool:
    return _CLOCK.fullmatch(term) is not None


@dataclass(frozen=True)
class Asked:
    """`time`: the spans named; `time_only`: spans and nothing else to match (their
    conversations come whatever their relevance, newest first); `gathers`: every matching
    conversation, one compact line each; `topic`: the content words left besides the time."""

    time: TimeRead = field(default_factory=TimeRead)
    time_only: bool = False
    gathers: bool = False
    topic: tuple[str, ...] = ()

    @property
    def breadth(self) -> bool:
        """Show many conversations compactly rather than few in depth."""
        return self.time_only or self.gathers

    @property
    def layout(self) -> Literal["depth", "breadth", "timeline"]:
        """How the block is laid out (memory/recall/excerpts.py)."""
        if self.time_only:
            return "timeline"
        return "breadth" if self.gathers else "depth"

    def as_json(self) -> dict[str, object]:
        return {
            "spans": [s.as_json() for s in self.time.spans],
            "recent": self.time.recent,
            "time_only": self.time_only,
            "gathers": self.gathers,
        }


NOTHING = Asked()


def read_question(text: str, now: datetime, zone: tzinfo = UTC) -> Asked:
    head = text[:MAX_CHARS]
    time = read_time(head, now, zone)
    topic: tuple[str, ...] = ()
    if time.spans:
        topic = tuple(t for t in query_terms(time.rest) if t not in META_WORDS and not _clock(t))
    low = head.lower()
    gathers = (
        any(w in low for w in _GATHER_WORDS) and _GATHERS.search(low) is not None
    ) or _asks_plural(low)
    return Asked(time, bool(time.spans) and not topic, gathers, topic)
