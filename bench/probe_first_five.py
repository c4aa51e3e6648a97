"""The first five minutes (issue #25): does the embedded model answer what it was told? A new
user's first chats against a real `caesar serve` on a fresh home and the shipped defaults: things
told in chats of their own (bench/data/first_five.json), learned by `caesar worker --once`, then
asked, each in a new chat. Targets: >= 80 % right, none cut, none switched. Method:
bench/README.md.

    git archive a0e98cf src | tar -x -C /tmp/before    # a `--before` caesar, e.g.
    .venv/bin/python bench/probe_first_five.py [--runs 3] [--before /tmp/before/src] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import benchlib
import httpx
import procs

REPLY_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Item:
    """One thing told in its own chat, and the question that asks for it (none: told only)."""

    told: str
    question: str | None = None
    answer: str = ""
    also: tuple[str, ...] = ()  # other spellings of the answer


def _sets() -> dict[str, tuple[Item, ...]]:
    """The probe sets, from bench/data/first_five.json (each with a line on what it is)."""
    sets = json.loads((benchlib.BENCH_DATA / "first_five.json").read_text())["sets"]
    return {
        name: tuple(Item(**{**i, "also": tuple(i.get("also", ()))}) for i in body["items"])
        for name, body in sets.items()
    }


SETS = _sets()
PROBE = SETS["probe"]

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
    """The shipped settings but two: the serve runs no workers of its own, and a chat is
    summarised at once; this checkout's caesar (or --before's) first on the path."""
    config = "run_workers = false\n\n[memory.episodes_summarise]\nquiet_seconds = 0\n"
    return procs.caesar_env(home, config, src=src)


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
    procs.caesar(env, "worker", "--once", "memory.extract", "memory.summarise", "memory.passages")


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
        server = procs.Server(env, log=Path(tmp) / "serve.log", upgrade=True, timeout=300)
        try:
            with httpx.Client(base_url=server.url, timeout=REPLY_TIMEOUT_S) as client:
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
            server.stop()
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
