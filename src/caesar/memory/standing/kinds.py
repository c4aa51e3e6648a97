"""What a standing statement can be: its kinds and slots. Pure data (issue #46).

A *standing statement* is something the person says about how things are for them that holds
until they say otherwise: "I keep a gluten-free diet", "always use metric units", "my daughter
is seven". It is a memory of a standing kind, in the one `memories` table that dated memories
share (docs/standing.md).

Four kinds:
- `instruction`: how caesar should answer (units, length, language, format, how to address them);
  every prompt carries them;
- `constraint`: what limits what suits them (diet, allergies, health, budget, schedule, fears);
- `preference`: what they like or dislike;
- `profile`: who they are (family, pets, home, work, what they use, what they are working on).

A *slot* says what a statement is about and what it bears on. `bears_on` are plain words for
the requests it matters to: they are embedded with the statement, so that "suggest a dinner
recipe" finds "I keep a gluten-free diet" (food) although the two share no word. `single`:
one value holds at a time, so a newer statement replaces the older (where they live, the units
they want); the others hold many (allergies, pets, likes).
"""

from __future__ import annotations

from dataclasses import dataclass

from caesar.errors import InputError

INSTRUCTION = "instruction"
CONSTRAINT = "constraint"
PREFERENCE = "preference"
PROFILE = "profile"
KINDS = (INSTRUCTION, CONSTRAINT, PREFERENCE, PROFILE)


@dataclass(frozen=True)
class Slot:
    name: str
    kind: str
    bears_on: str
    single: bool = False


_SLOTS = (
    # how to answer
    Slot("units", INSTRUCTION, "measurements, distances, weights, temperatures, recipes", True),
    Slot("length", INSTRUCTION, "answers, replies, explanations", True),
    Slot("language", INSTRUCTION, "answers, replies, language", True),
    Slot("address", INSTRUCTION, "name, greeting", True),
    Slot("format", INSTRUCTION, "answers, replies, formatting, lists, code"),
    Slot("answers", INSTRUCTION, "answers, replies, advice"),
    # what limits what suits them
    Slot("diet", CONSTRAINT, "food, meals, recipes, cooking, restaurants, snacks, groceries"),
    Slot("allergy", CONSTRAINT, "food, meals, snacks, restaurants, medicine, pets, plants"),
    Slot("health", CONSTRAINT, "health, medicine, exercise, sport, food, travel, sleep"),
    Slot("drink", CONSTRAINT, "drinks, alcohol, bars, parties, restaurants, coffee"),
    Slot("budget", CONSTRAINT, "money, prices, shopping, buying, costs, travel", True),
    Slot("schedule", CONSTRAINT, "time, schedule, plans, sleep, work hours, appointments"),
    Slot("fear", CONSTRAINT, "travel, activities, trips, animals, plans"),
    # what they like
    Slot("likes", PREFERENCE, "recommendations, gifts, activities, hobbies, suggestions"),
    Slot("dislikes", PREFERENCE, "recommendations, gifts, activities, food, suggestions"),
    # who they are
    Slot("name", PROFILE, "name", True),
    Slot("family", PROFILE, "family, children, partner, gifts, home, plans"),
    Slot("pet", PROFILE, "pets, animals, vet, home"),
    Slot("home", PROFILE, "home, where they live, local places, weather, travel", True),
    Slot("work", PROFILE, "work, job, career, colleagues, schedule"),
    Slot("uses", PROFILE, "devices, phone, computer, software, tools, apps, technology"),
    Slot("goal", PROFILE, "goals, plans, learning, training, progress"),
)
SLOTS: dict[str, Slot] = {slot.name: slot for slot in _SLOTS}


def slot_of(name: str) -> Slot:
    """The slot called `name`; an unknown name (an LLM's own) is a general one of its kind's
    fallback: a preference the person likes."""
    return SLOTS.get(name, SLOTS["likes"])


def bearing_text(slot: str, text: str) -> str:
    """What a statement's vector is made from: the words of what it bears on, then its own."""
    return f"{slot_of(slot).bears_on}: {text}"


# The slot a statement the person writes by hand goes under when they name none
DEFAULT_SLOT = {
    INSTRUCTION: "answers",
    CONSTRAINT: "health",
    PREFERENCE: "likes",
    PROFILE: "goal",
}
MAX_NAME = 40  # a kind's or a slot's name, as an error message quotes it


def check_kind(kind: str | None) -> str | None:
    """`kind` if it is one (or None); else an InputError naming the kinds there are."""
    if kind is not None and kind not in KINDS:
        raise InputError(f"unknown kind {kind[:MAX_NAME]!r}: use one of {', '.join(KINDS)}")
    return kind


def check_slot(kind: str, slot: str | None) -> str:
    """The slot a statement of `kind` goes under: `slot`, which must be one, or the default."""
    if slot is None or not slot.strip():
        return DEFAULT_SLOT[kind]
    if slot not in SLOTS:
        raise InputError(f"unknown slot {slot[:MAX_NAME]!r}: use one of {', '.join(SLOTS)}")
    return slot
