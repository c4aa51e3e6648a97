"""The first five minutes (issue #25): does the embedded model answer what it was told?

A new user's first chats, against a real `caesar serve` on a fresh home with the shipped
defaults (chat on the embedded SmolLM2, facts and episodes learned offline): 20 things told
in separate chats (a name, pets, family, work, places, likes, plans, and a city that changes),
then the workers learn them (`caesar worker --once`, as the serve's own workers would a minute
later), then 20 questions, each in a new chat, sent as a client sends them (POST
/v1/chat/completions, no conversation id).

A reply is right when its first two sentences name the value told (all its words, case and
punctuation aside; "14th" counts as "14"). Also counted: replies cut at `max_tokens` (finish_reason "length",
the loops a tiny model falls into) and replies not in English (more stop words of another
language than of English, by sumy's lists). Targets: >= 80 % right, none cut, none switched.

The only settings changed from the shipped ones: the serve runs no workers of its own (they
run once, between the telling and the asking, so every run learns the same things), and a
chat is summarised at once rather than after 5 quiet minutes. `--before SRC` first runs the
caesar in SRC, e.g. an export of the commit before issue #25's change (see docs/recall-quality.md):

    git archive a0e98cf src | tar -x -C /tmp/before
    .venv/bin/python bench/probe_first_five.py [--runs 3] [--before /tmp/before/src] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import benchlib
import httpx

CAESAR = str(Path(sys.executable).with_name("caesar"))
START_TIMEOUT_S = 300.0
REPLY_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Item:
    """One thing told in its own chat, and the question that asks for it (none: told only)."""

    told: str
    question: str | None = None
    answer: str = ""
    also: tuple[str, ...] = ()  # other spellings of the answer


PROBE = (
    Item("Hi! My name is Dana. I'm setting up this assistant today.", "What is my name?", "Dana"),
    Item(
        "My dog is called Biscuit. He is a beagle and loves long walks.",
        "What is my dog called?",
        "Biscuit",
    ),
    Item(
        "My cat is named Miso, she sleeps on my keyboard all day.",
        "What is my cat's name?",
        "Miso",
    ),
    Item("I live in Lisbon, near the river."),  # the city that changes (below)
    Item("I work as a nurse on the night shift.", "What is my job?", "nurse"),
    Item("I work at St Mary's Hospital.", "Which hospital do I work at?", "St Mary's"),
    Item(
        "My sister's name is Maya and she lives in Toronto.",
        "What is my sister's name?",
        "Maya",
    ),
    Item("My brother is called Tom. We talk every Sunday.", "What is my brother called?", "Tom"),
    Item("My son's name is Leo, he just turned six.", "What is my son's name?", "Leo"),
    Item("My partner's name is Sam.", "What is my partner's name?", "Sam"),
    Item("My favourite food is ramen.", "What is my favourite food?", "ramen"),
    Item("My favourite colour is green.", "What is my favourite colour?", "green"),
    Item("My favourite band is Radiohead.", "What is my favourite band?", "Radiohead"),
    Item(
        "I'm allergic to peanuts, so I always check labels.",
        "What am I allergic to?",
        "peanuts",
        ("peanut",),
    ),
    Item("My birthday is on 14 March.", "When is my birthday?", "14 March"),
    Item(
        "I play the cello in a community orchestra.",
        "Which instrument do I play?",
        "cello",
    ),
    Item("I'm planning a trip to Japan in May.", "Where am I travelling in May?", "Japan"),
    Item(
        "Next Saturday I'm running a half marathon.",
        "What race am I running next Saturday?",
        "half marathon",
    ),
    Item(
        "I love hiking in the mountains at weekends.",
        "What do I like to do at weekends?",
        "hiking",
        ("hike",),
    ),
    Item("I moved last month! Now I live in Porto.", "Which city do I live in?", "Porto"),
    Item("", "What breed is my dog?", "beagle"),  # asked of the dog's chat, not a fact
)

# The same telling with every value changed: the prompt was tuned on PROBE, so this is the
# nearest thing to held-out data.
SWAPPED = (
    Item("Hi! My name is Priya. I'm setting up this assistant today.", "What is my name?", "Priya"),
    Item(
        "My dog is called Pepper. He is a collie and loves long walks.",
        "What is my dog called?",
        "Pepper",
    ),
    Item(
        "My cat is named Mochi, she sleeps on my keyboard all day.",
        "What is my cat's name?",
        "Mochi",
    ),
    Item("I live in Bergen, near the harbour."),
    Item("I work as an electrician for the city.", "What is my job?", "electrician"),
    Item("I work at Harbour Electric.", "Which company do I work at?", "Harbour Electric"),
    Item(
        "My sister's name is Ines and she lives in Madrid.",
        "What is my sister's name?",
        "Ines",
    ),
    Item(
        "My brother is called Felix. We talk every Sunday.", "What is my brother called?", "Felix"
    ),
    Item("My son's name is Arlo, he just turned six.", "What is my son's name?", "Arlo"),
    Item("My partner's name is Jordan.", "What is my partner's name?", "Jordan"),
    Item("My favourite food is paella.", "What is my favourite food?", "paella"),
    Item("My favourite colour is purple.", "What is my favourite colour?", "purple"),
    Item("My favourite band is Coldplay.", "What is my favourite band?", "Coldplay"),
    Item(
        "I'm allergic to shellfish, so I always check labels.",
        "What am I allergic to?",
        "shellfish",
    ),
    Item("My birthday is on 2 October.", "When is my birthday?", "2 October"),
    Item("I play the violin in a community orchestra.", "Which instrument do I play?", "violin"),
    Item("I'm planning a trip to Peru in June.", "Where am I travelling in June?", "Peru"),
    Item("Next Sunday I'm running a 10k race.", "What race am I running next Sunday?", "10k"),
    Item(
        "I love swimming in the lake at weekends.",
        "What do I like to do at weekends?",
        "swimming",
        ("swim",),
    ),
    Item("I moved last month! Now I live in Oslo.", "Which city do I live in?", "Oslo"),
    Item("", "What breed is my dog?", "collie"),
)

# How a newcomer actually talks: several things in one message (the issue's own first chat),
# as two people, each in a home of their own.
NEWCOMER = (
    Item(
        "Hi! My name is Dana and my dog is called Biscuit. I have been struggling with sleep "
        "lately."
    ),
    Item("I live in Lisbon and I work as a nurse."),
    Item("My sister is called Maya. My favourite food is ramen."),
    Item("I'm planning a trip to Japan in May with my partner Sam."),
    Item("I play the cello, and my cat Miso hates it."),
    Item("", "What is my name?", "Dana"),
    Item("", "What is my dog called?", "Biscuit"),
    Item("", "Which city do I live in?", "Lisbon"),
    Item("", "What is my job?", "nurse"),
    Item("", "What is my sister's name?", "Maya"),
    Item("", "What is my favourite food?", "ramen"),
    Item("", "Where am I travelling in May?", "Japan"),
    Item("", "What is my partner's name?", "Sam"),
    Item("", "Which instrument do I play?", "cello"),
    Item("", "What is my cat's name?", "Miso"),
)
NEWCOMER2 = (
    Item("Hello, I'm Omar. I live in Leeds with my wife Fatima and our cat Pixel."),
    Item("I teach maths at a secondary school. I love biryani."),
    Item("My brother Karim is visiting next week."),
    Item("", "What is my name?", "Omar"),
    Item("", "Which city do I live in?", "Leeds"),
    Item("", "What is my wife's name?", "Fatima"),
    Item("", "What is my cat called?", "Pixel"),
    Item("", "What subject do I teach?", "maths", ("math", "mathematics")),
    Item("", "What food do I love?", "biryani"),
    Item("", "What is my brother's name?", "Karim"),
)
SETS = {"probe": PROBE, "swapped": SWAPPED, "newcomer": NEWCOMER, "newcomer2": NEWCOMER2}

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_ORDINAL = re.compile(r"^(\d+)(?:st|nd|rd|th)$")
# Stop words that say nothing of a value ("St Mary's": "st", "mary").
_NOISE = frozenset({"s", "the", "a", "an", "my", "your"})


def words(text: str) -> list[str]:
    out = []
    for word in _WORD.findall(text.lower()):
        ordinal = _ORDINAL.match(word)
        out.append(ordinal.group(1) if ordinal else word)
    return out


def lead(reply: str, sentences: int = 2) -> str:
    """The reply's first sentences: an answer is what it says first, not a name that turns up
    somewhere in a long ramble."""
    return " ".join(_SENTENCE.split(reply.strip(), maxsplit=sentences)[:sentences])


def names(reply: str, answer: str, also: tuple[str, ...] = ()) -> bool:
    """Whether `reply` names the answer (or one of its other spellings) in its first two
    sentences: every word of it."""
    said = set(words(lead(reply)))
    return any({w for w in words(value) if w not in _NOISE} <= said for value in (answer, *also))


def _stop_words() -> dict[str, frozenset[str]]:
    from sumy.utils import get_stop_words

    languages = ("english", "french", "german", "spanish", "italian", "portuguese", "czech")
    return {lang: frozenset(get_stop_words(lang)) for lang in languages}


STOP_WORDS: dict[str, frozenset[str]] = {}


def language(reply: str) -> str:
    """The language whose stop words the reply uses most ("english" on a tie or none). Only
    "english" or not is relied on: sumy's lists are uneven (its Spanish one lacks "y", "mi")."""
    if not STOP_WORDS:
        STOP_WORDS.update(_stop_words())
    said = words(reply)
    counts = {lang: sum(w in stop for w in said) for lang, stop in STOP_WORDS.items()}
    best = max(counts, key=lambda lang: counts[lang])
    # short words are in several lists ("a", "in", "me"): two at least, and more than English's
    return best if counts[best] > counts["english"] and counts[best] >= 2 else "english"


def environment(home: Path, src: Path) -> dict[str, str]:
    config = home / "caesar.toml"
    config.write_text("run_workers = false\n\n[memory.episodes_summarise]\nquiet_seconds = 0\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAESAR_")}
    env.update(
        CAESAR_HOME=str(home),
        CAESAR_CONFIG=str(config),
        HF_HUB_OFFLINE="1",
        # this checkout's caesar (or --before's), whatever the venv's editable install is
        PYTHONPATH=str(src),
    )
    return env


def start(env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    subprocess.run([CAESAR, "db", "upgrade"], env=env, check=True, capture_output=True)
    port = benchlib.free_port()
    log = open(Path(env["CAESAR_HOME"]) / "serve.log", "wb")  # noqa: SIM115 - the server's
    process = subprocess.Popen(
        [CAESAR, "serve", "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"caesar serve exited during start-up; see {log.name}")
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return process, url
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    process.kill()
    raise RuntimeError("caesar serve did not answer /healthz in time")


def say(client: httpx.Client, message: str) -> dict[str, Any]:
    """One message in a new chat: the reply, why it ended, its tokens and time."""
    started = time.perf_counter()
    response = client.post(
        "/v1/chat/completions",
        json={"model": "caesar", "messages": [{"role": "user", "content": message}]},
    )
    if response.status_code != 200:  # e.g. 504: the model's reply outran the provider timeout
        return {"reply": "", "finish": f"error {response.status_code}", "tokens": 0, "ms": 0}
    body = response.json()
    choice = body["choices"][0]
    return {
        "reply": choice["message"]["content"] or "",
        "finish": choice["finish_reason"],
        "tokens": body["usage"]["completion_tokens"],
        "ms": round(benchlib.ms(time.perf_counter() - started)),
    }


def learn(env: dict[str, str]) -> None:
    workers = ["memory.extract", "memory.summarise", "memory.passages"]
    done = subprocess.run(
        [CAESAR, "worker", "--once", *workers], env=env, capture_output=True, text=True
    )
    if done.returncode:
        raise RuntimeError(f"caesar worker --once: {done.stderr.strip()}")


def facts(home: Path) -> dict[str, str]:
    """What the workers learned (key → value), read from the home's SQLite file."""
    with sqlite3.connect(home / "caesar.db") as db:
        return dict(db.execute("SELECT key, value FROM facts ORDER BY key").fetchall())


def run_once(
    src: Path, verbose: bool, keep: Path | None = None, probe: tuple[Item, ...] = PROBE
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="caesar-first-five-") as tmp:
        if keep is not None:  # the home is kept there, for a look at what was learned
            tmp = str(keep)
            keep.mkdir(parents=True)
        env = environment(Path(tmp), src)
        process, url = start(env)
        try:
            with httpx.Client(base_url=url, timeout=REPLY_TIMEOUT_S) as client:
                told = [say(client, item.told) for item in probe if item.told]
                learn(env)
                learned = facts(Path(tmp))
                asked = []
                for item in probe:
                    if item.question is None:
                        continue
                    reply = say(client, item.question)
                    reply.update(
                        question=item.question,
                        answer=item.answer,
                        right=names(reply["reply"], item.answer, item.also),
                        language=language(reply["reply"]),
                    )
                    asked.append(reply)
                    if verbose:
                        print(row(reply), flush=True)
        finally:
            process.terminate()
            process.wait(timeout=30)
            # the last run's server log, for a reply that failed
            benchlib.OUT.mkdir(parents=True, exist_ok=True)
            (benchlib.OUT / "first_five_serve.log").write_bytes(
                (Path(tmp) / "serve.log").read_bytes()
            )
    return {"told": told, "asked": asked, "facts": learned, **totals(asked, told)}


def totals(asked: list[dict[str, Any]], told: list[dict[str, Any]]) -> dict[str, Any]:
    replies = asked + told
    return {
        "right": sum(r["right"] for r in asked),
        "questions": len(asked),
        "cut": sum(r["finish"] == "length" for r in asked),
        "switched": sum(r["language"] != "english" for r in asked),
        "failed": sum(r["finish"].startswith("error") for r in asked),
        "told_cut": sum(r["finish"] == "length" for r in told),
        "told_switched": sum(language(r["reply"]) != "english" for r in told),
        "tokens_median": statistics.median(r["tokens"] for r in replies),
        "seconds_median": round(statistics.median(r["ms"] for r in replies) / 1000, 2),
    }


def row(reply: dict[str, Any]) -> str:
    flags = [] if reply["right"] else ["WRONG"]
    if reply["finish"] == "length":
        flags.append("CUT")
    if reply["finish"].startswith("error"):
        flags.append(reply["finish"].upper())
    if reply["language"] != "english":
        flags.append(reply["language"].upper())
    said = " ".join(reply["reply"].split())
    said = said if len(said) <= 70 else said[:69] + "…"
    return f"{reply['question']:<38} {reply['answer']:<14} {' '.join(flags) or 'ok':<10} {said}"


def summary(name: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    rights = [r["right"] for r in runs]
    n = runs[0]["questions"]
    return {
        "label": name,
        "runs": runs,
        "right": rights,
        "questions": n,
        "right_share_median": round(statistics.median(rights) / n, 3),
        "cut": [r["cut"] for r in runs],
        "failed": [r["failed"] for r in runs],
        "switched": [r["switched"] for r in runs],
        "told_cut": [r["told_cut"] for r in runs],
        "told_switched": [r["told_switched"] for r in runs],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh homes, one after another")
    parser.add_argument(
        "--before", type=Path, help="first run the caesar in this src folder (labelled before)"
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--quiet", action="store_true", help="no per-question rows")
    parser.add_argument("--keep", type=Path, help="keep the (last) run's home in this new folder")
    parser.add_argument(
        "--sets",
        nargs="+",
        choices=sorted(SETS),
        default=["probe"],
        help="which probes: the dev probe, it with every value swapped, newcomers' first chats",
    )
    args = parser.parse_args()
    sources = {"shipped": benchlib.ROOT / "src"}
    if args.before:
        sources = {"before": args.before.resolve(), **sources}
    labels = [f"{source} {name}" for source in sources for name in args.sets]
    results: dict[str, Any] = {
        "load_before": benchlib.load_avg(),
        "probe": {name: len(SETS[name]) for name in args.sets},
        "sources": {label: str(src) for label, src in sources.items()},
    }
    for label in labels:
        source, name = label.split()
        runs = []
        for i in range(args.runs):
            if not args.quiet:
                print(f"-- {label}, run {i + 1} of {args.runs}", flush=True)
            last = label == labels[-1] and i == args.runs - 1
            keep = args.keep if last else None
            run = run_once(sources[source], not args.quiet, keep, SETS[name])
            runs.append(run)
            print(
                f"{label} run {i + 1}: {run['right']} of {run['questions']} right, "
                f"{run['cut']} cut at max_tokens, {run['switched']} not in English, "
                f"{run['failed']} failed "
                f"(told: {run['told_cut']} cut, {run['told_switched']} not in English); "
                f"median reply {run['tokens_median']} tokens, {run['seconds_median']} s",
                flush=True,
            )
        results[label] = summary(label, runs)
    results["load_after"] = benchlib.load_avg()
    for label in labels:
        s = results[label]
        print(
            f"{label}: right {'/'.join(map(str, s['right']))} of {s['questions']} "
            f"(median {s['right_share_median']:.0%}); cut {s['cut']}, not English {s['switched']}"
        )
    path = benchlib.write_result("first_five", results)
    print(f"written to {path}")
    if args.json:
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
