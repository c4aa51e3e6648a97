"""Dated memories found with no LLM: the things said and done in a conversation, one short
self-contained sentence each (issue #45; docs/memories.md). Pure.

Both speakers are read, the person and caesar, a sentence at a time. A sentence is kept when it
says something: not a question, not chit-chat ("thanks!", "that sounds great"), not a bare
reaction, with at least MIN_CONTENT_WORDS words that carry meaning. What is kept is made
self-contained: the speaker's "I"/"my"/"me" become "the person"/"their"/"them" (or
"caesar"/"its"), the verb after them agrees ("I love" → "the person loves"), and the other
speaker's "you"/"your" become theirs ("You could lower the thermostat" said by caesar →
"the person could lower the thermostat", with `speaker` = "caesar"). A time the sentence names
("last Saturday", "in May", "two weeks ago") is resolved on the person's clock from the moment
it was said (recall/when.py) and kept beside it as `refers_start`/`refers_end`.

Pasted text is not the speaker's words: fenced code, quoted lines and the middle of a
document-length message are skipped, as for standing statements (their `own_words`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo

from caesar.memory.recall.when import read_time
from caesar.memory.standing import offline as standing_offline
from caesar.memory.standing.offline import unsafe

PERSON = "person"
CAESAR = "caesar"
MAX_TEXT = 240
MIN_WORDS = 4
MIN_CONTENT_WORDS = 2
# caesar's replies are long and mostly elaboration: its first sentences that say something
MAX_CAESAR_PER_TURN = 3
MAX_PERSON_PER_TURN = 12


@dataclass(frozen=True)
class DatedMemory:
    """One thing said: `text` self-contained, `speaker` person or caesar, `turn` the index of the
    message it came from in the exchange read, `refers_*` the time it names (naive UTC)."""

    speaker: str
    text: str
    turn: int
    refers_start: datetime | None = None
    refers_end: datetime | None = None
    # when its message was said, where that is not the row's time (an import's dated turns)
    said_at: datetime | None = None

    def as_json(self) -> dict[str, object]:
        return {
            "speaker": self.speaker,
            "text": self.text,
            "turn": self.turn,
            "refers_start": self.refers_start.isoformat() if self.refers_start else None,
            "refers_end": self.refers_end.isoformat() if self.refers_end else None,
        }


_URL = re.compile(r"https?://\S+")
_MARKUP = re.compile(r"[*_#`]+")
_LIST_MARK = re.compile(r"^\s*(?:[*•+-]|\d{1,2}[.)])\s+")
# chit-chat and reactions: what a sentence that opens so goes on to say is rarely a memory
_CHITCHAT = re.compile(
    r"^(?:thanks|thank you|thx|cheers|congrat\w*|wow|whoa|yay|haha\w*|lol|omg|aw+|ooh|hi|hey|"
    r"hello|bye|what an? (?:\w+ )?(?:thing|idea|day|time|story|news|way|question|place|view|shot|"
    r"photo|pic|picture|one)\b|how (?:lovely|nice|great|cool|fun|exciting|wonderful|sweet|cute|"
    r"awesome|amazing)\b|good ?night|good morning|see you|take care|good luck|best of luck|no worries|"
    r"no problem|(?:it(?:'s| is|’s) )?(?:good|nice|great|lovely) to (?:see|meet|hear|talk)|you're welcome|of course|sure thing|sounds (?:great|good|fun|amazing|lovely|"
    r"like)|that (?:sounds|is|was|'s|’s) (?:great|awesome|amazing|so|really|wonderful|"
    r"lovely|cool|fun|nice|fantastic|incredible|beautiful)|(?:i'?m|i’m|i am) (?:so |always |"
    r"more than )?(?:glad|happy|sorry|here) (?:to (?:hear|help|assist)|for you)\b|(?:so |really |very )?glad (?:to hear|you|that you)|happy to help|great (?:question|"
    r"idea|job)|i hope (?:you|it|that)|hope (?:you|it|that)|let me know|feel free|"
    r"keep (?:it )?up|you(?:'re| are) (?:welcome|right|so|amazing|awesome))\b",
    re.IGNORECASE,
)
_STOP = frozenset(
    """a an the and or but if then so of to in on at for with from by about as is are was were
    be been being am i me my mine myself you your yours yourself he him his she her hers it its
    we us our ours they them their this that these those do does did doing have has had having
    will would can could should shall may might must not no yes just really very too also what
    which who whom when where why how all any some more most much many such than there here
    out up down over again into onto oh wow yeah yep ok okay hey hi hello thanks thank lol
    haha im i'm it's that's i've i'd i'll don't didn't can't won't isn't wasn't get got go
    going gone like one thing things lot lots way well still even though always never ever
    sure kind sort bit something anything everything nothing let lets let's""".split()
)
_WORD = re.compile(r"[A-Za-z][A-Za-z'’]*|\d+")

# -- the speaker's words, made self-contained ------------------------------------------------
_MODALS = frozenset(
    "can could will would shall should may might must did had was used ought need".split()
)
_ADVERBS = frozenset(
    """also really just never always often usually still finally recently actually already
    even sometimes now then totally definitely only mostly""".split()
)
_IRREGULAR_3RD = {"have": "has", "do": "does", "go": "goes", "am": "is", "be": "is"}
# past tenses that do not end in -ed: left as they are
_PAST = frozenset(
    """went was were had did made took saw got came gave found told felt left kept bought
    brought thought ran met began wrote read ate drank sang swam drove flew won lost sent spent
    built taught caught heard paid said sold sat stood understood wore broke chose spoke forgot
    fell grew knew threw hid rode rose shook slept woke became led lent meant put set cut hit
    let quit shut fed fought held hung lit sought struck swept wept bent bled dug dealt""".split()
)
_NOT_VERB = frozenset("and or but the a an to so if".split())
_LATER = {PERSON: "their", CAESAR: "its"}
# first person → (subject, object, possessive, reflexive) of a third party
_SELF = {
    PERSON: ("the person", "them", "the person's", "themselves"),
    CAESAR: ("caesar", "caesar", "caesar's", "itself"),
}


def _third_person(verb: str) -> str:
    low = verb.lower()
    if low in _IRREGULAR_3RD:
        return _IRREGULAR_3RD[low]
    if low in _MODALS or low in _PAST or low.endswith("ed") or not low.isalpha():
        return verb
    if low.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if len(low) > 2 and low.endswith("y") and low[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


_CONTRACTIONS = [
    (re.compile(r"\bI[’']m\b"), "I am"),
    (re.compile(r"\bI[’']ve\b"), "I have"),
    (re.compile(r"\bI[’']d\b"), "I would"),
    (re.compile(r"\bI[’']ll\b"), "I will"),
    (re.compile(r"\bim\b"), "I am"),
    (re.compile(r"\byou[’']re\b", re.IGNORECASE), "you are"),
    (re.compile(r"\byou[’']ve\b", re.IGNORECASE), "you have"),
    (re.compile(r"\byou[’']ll\b", re.IGNORECASE), "you will"),
    (re.compile(r"\byou[’']d\b", re.IGNORECASE), "you would"),
]
_I_VERB = re.compile(r"\bI\s+((?:(?:" + "|".join(sorted(_ADVERBS)) + r")\s+)*)([A-Za-z]+)")
_YOU_ARE = re.compile(r"\byou (are|were|have)\b", re.IGNORECASE)


def resolve(sentence: str, speaker: str) -> str:
    """`sentence` said by `speaker`, with its first and second person made third."""
    other = CAESAR if speaker == PERSON else PERSON
    subject, obj, possessive, reflexive = _SELF[speaker]
    o_subject, o_obj, o_possessive, o_reflexive = _SELF[other]
    text = sentence
    for pattern, full in _CONTRACTIONS:
        text = pattern.sub(full, text)

    def agree(m: re.Match[str]) -> str:
        adverbs, verb = m.group(1), m.group(2)
        if verb.lower() in _NOT_VERB:
            return f"{subject} {adverbs}{verb}"
        if verb.lower() == "am":
            return f"{subject} {adverbs}is"
        return f"{subject} {adverbs}{_third_person(verb)}"

    text = re.sub(r"\bI\s+don[’']t\b", f"{subject} doesn't", text)
    text = _I_VERB.sub(agree, text)
    text = re.sub(r"\bI\b", subject, text)
    text = _possessives(text, "[Mm]y", subject, possessive, _LATER[speaker])
    text = re.sub(
        r"\b(?:mine|Mine)\b", f"{possessive} own" if speaker == PERSON else possessive, text
    )
    text = re.sub(r"\b(?:myself|Myself)\b", reflexive, text)
    text = re.sub(r"\b(?:me|Me)\b", obj, text)
    # the other speaker, addressed
    o_verb = {"are": "is", "were": "was", "have": "has"}
    text = _YOU_ARE.sub(lambda m: f"{o_subject} {o_verb[m.group(1).lower()]}", text)
    text = _possessives(text, "[Yy]our", o_subject, o_possessive, _LATER[other])
    text = re.sub(r"\b(?:yourself|Yourself)\b", o_reflexive, text)
    text = re.sub(r"\b(?:[Yy]ou)\b(?=\s+\w+(?:s|ed)?\b)", o_subject, text, count=1)
    text = re.sub(r"\b(?:[Yy]ou)\b", o_obj, text)
    return text if text.startswith(CAESAR) else text[:1].upper() + text[1:]


def _possessives(text: str, word: str, subject: str, first: str, later: str) -> str:
    """ "my"/"your": the one it is named ("the person's") until they have been, then "their"."""
    out: list[str] = []
    at = 0
    for m in re.finditer(rf"\b{word}\b", text):
        named = subject in text[: m.start()].lower()
        out.append(text[at : m.start()] + (later if named else first))
        at = m.end()
    return "".join(out) + text[at:]


# -- reading a turn ---------------------------------------------------------------------------
def content_words(text: str) -> list[str]:
    return [w for w in (m.group(0).lower() for m in _WORD.finditer(text)) if w not in _STOP]


# A name the speaker addresses the other by ("Caroline, so glad …", "… great news, Mel!"):
# not what was said, and a word recall would match every such line on.
_ADDRESS_HEAD = re.compile(
    r"^(?:(?i:hey|hi|hello|oh|ah|yeah|yes|wow|woah|whoa|aw+|thanks|thank you|got it|ok|okay|"
    r"congrats|haha|lol|omg|so),?\s+)?[A-Z][a-z]+,\s+"
)
# What a chat says of a picture it shares ("[shares a photo: …]", an import's "[image]"): not
# something said.
_BRACKETED = re.compile(r"\[[^\]]*\]")
_ADDRESS_TAIL = re.compile(r",\s+[A-Z][a-z]+\s*([.!]*)$")


def unaddressed(sentence: str) -> str:
    """The sentence without the name it opens or closes on, addressing the other speaker."""
    sentence = " ".join(_BRACKETED.sub(" ", sentence).split())
    sentence = _ADDRESS_TAIL.sub(r"\1", sentence)
    head = _ADDRESS_HEAD.match(sentence)
    if head and head.group(0).split()[-1].rstrip(",") not in _NOT_NAMES:
        rest = sentence[head.end() :]
        sentence = rest[:1].upper() + rest[1:]
    return sentence


# Capitalised words that open a sentence with a comma and are no name.
_NOT_NAMES = frozenset(
    "Yes No Well So Oh Yeah Ok Okay Also Actually Honestly Anyway Now Then Sure Right Hey Hi "
    "Wow Besides However Still Plus Luckily Sadly Unfortunately Fortunately Basically First "
    "Second Finally Today Yesterday Tomorrow Recently Lately Tonight Later".split()  # noqa: SIM905
)


def worth_keeping(sentence: str) -> bool:
    """Says something: not a question, not chit-chat, enough words that carry meaning; never
    an instruction to drop caesar's rules (standing/offline.py's `unsafe`), which a prompt
    would otherwise quote back."""
    if sentence.endswith("?") or _CHITCHAT.match(sentence) or unsafe(sentence):
        return False
    words = _WORD.findall(sentence)
    return len(words) >= MIN_WORDS and len(content_words(sentence)) >= MIN_CONTENT_WORDS


def _cut(text: str) -> str:
    if len(text) <= MAX_TEXT:
        return text
    return text[:MAX_TEXT].rsplit(" ", 1)[0].rstrip(",;:-") + "…"


def sentences(content: str) -> list[str]:
    """A turn's own words (standing/offline.py's `own_words`, list items kept), cut into
    sentences as the standing statements' are, without links or markdown marks."""
    out = []
    for raw in standing_offline.sentences(standing_offline.own_words(content, lists=True)):
        sentence = _MARKUP.sub("", _LIST_MARK.sub("", _URL.sub("", raw))).strip().strip('"“”')
        if sentence:
            out.append(" ".join(sentence.split()))
    return out


def extract(
    messages: Sequence[Mapping[str, object]],
    said_at: datetime,
    zone: tzinfo = UTC,
    times: Sequence[datetime | None] | None = None,
) -> list[DatedMemory]:
    """The dated memories of an exchange (`role` user/assistant, `content`), said at `said_at`
    (naive UTC) on a clock in `zone`, or at `times[i]` for message i where given (an imported
    conversation's dated turns). Duplicates within the exchange are kept once."""
    out: list[DatedMemory] = []
    seen: set[str] = set()
    for turn, message in enumerate(messages):
        role = message.get("role")
        if role not in ("user", "assistant"):
            continue
        own_time = times[turn] if times is not None and turn < len(times) else None
        at = own_time or said_at
        speaker = PERSON if role == "user" else CAESAR
        limit = MAX_PERSON_PER_TURN if speaker == PERSON else MAX_CAESAR_PER_TURN
        kept = 0
        for sentence in sentences(str(message.get("content") or "")):
            if kept >= limit:
                break
            sentence = unaddressed(sentence)
            if not worth_keeping(sentence):
                continue
            text = _cut(resolve(sentence, speaker))
            key = " ".join(content_words(text))
            if key in seen:
                continue
            seen.add(key)
            kept += 1
            spans = read_time(sentence, at, zone).spans
            start, end = (spans[0].start, spans[0].end) if spans else (None, None)
            out.append(DatedMemory(speaker, text, turn, start, end, own_time))
    return out
