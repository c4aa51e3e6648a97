"""Does what a person says about themselves reach a later request it bears on? (issue #46)

One statement said once in its own chat among 60 real unrelated conversations, then a request
it bears on in a new chat: is the statement's mark in the full prompt and in the embedded
model's small one? The sets are bench/data/standing_probes.json. Method: bench/README.md.

    .venv/bin/python bench/standing_probe.py [--sets A B] [--crowd] [--json]
    .venv/bin/python bench/standing_probe.py --preference   # LongMemEval's preference questions
"""

from __future__ import annotations

import json
import random
import shutil
import sys
import tempfile
from dataclasses import dataclass
from datetime import datetime, timedelta
from json import dump as write_json  # `json` is the --json flag below
from pathlib import Path
from typing import Annotated, Any

import benchlib
import recall_quality as rq
from benchlib import OWNER, lme_date

from caesar.brain import Brain
from caesar.config import Settings
from caesar.db import migrate
from caesar.embeddings import MiniLMEmbedder
from caesar.importer import import_conversations
from caesar.memory.scope import Scope
from caesar.services import Services
from caesar.workers import run_until_caught_up

NOW = datetime(2026, 11, 20, 18, 30)
CACHE = Path(tempfile.gettempdir()) / "caesar-standing-probe" / "vectors.sqlite"
STANDING: dict[str, Any] = {}  # --chars / --statements: the block's budget, else shipped
REPLY = "Thanks for telling me, I'll keep that in mind."


@dataclass(frozen=True)
class Probe:
    told: str  # the person's message, in a chat of its own
    request: str  # later, in a new chat
    mark: str  # what only the statement says (lower case)


def probe_sets() -> dict[str, tuple[Probe, ...]]:
    """The sets, from bench/data/standing_probes.json (each with a line on how it was
    written)."""
    sets = json.loads((benchlib.BENCH_DATA / "standing_probes.json").read_text())
    return {name: tuple(Probe(**p) for p in body["probes"]) for name, body in sets.items()}


def filler(count: int, seed: int = 7) -> list[rq.Conversation]:
    """`count` LongMemEval sessions, no question's evidence, on dates over the last 90 days."""
    rng = random.Random(seed)
    sessions: dict[str, list[dict[str, str]]] = {}
    for item in benchlib.longmemeval_items():
        evidence = set(item["answer_session_ids"])
        for key, turns in zip(item["haystack_session_ids"], item["haystack_sessions"], strict=True):
            if key not in evidence and key not in sessions:
                sessions[key] = [{"role": t["role"], "content": t["content"]} for t in turns]
    keys = rng.sample(sorted(sessions), count)
    out = []
    for key in keys:
        when = NOW - timedelta(days=rng.uniform(1, 90))
        turns = rq.importable(sessions[key])
        if turns is not None:
            out.append(rq.Conversation(key, when, turns))
    return out


def learn(services: Services) -> None:
    for name in ("memory.extract", "memory.summarise", "memory.passages"):
        run_until_caught_up(services.workers[name])


def settings(home: Path, small: bool) -> Any:
    base = rq.bench_settings(home)
    data = base.model_dump(mode="python")
    unused = data["gateway"]["providers"]["unused"]
    unused["prompt"] = "small" if small else "full"
    unused["recall_chars"] = 2500 if small else 6000
    data["gateway"]["providers"]["unused"] = unused
    # resolved from the route when the settings load: the route's, not the base's
    data["memory"]["episodes_recall"].pop("prompt_chars")
    data["memory"]["standing"].pop("max_chars")
    data["memory"]["standing"].update(STANDING)
    return type(base)(**data)


def told_chat(probe: Probe, when: datetime) -> dict[str, Any]:
    messages = [{"role": "user", "content": probe.told}, {"role": "assistant", "content": REPLY}]
    return {"created_at": when.isoformat(), "messages": messages}


def build_base(home: Path, embedder: Any, crowd: tuple[Probe, ...] = ()) -> None:
    """The 60 conversations, learned; `crowd`: statements told before them too, each in a chat
    of its own over the last 90 days (a person who has said many things)."""
    services = Services.build(settings(home, False))
    services.embedder.set(embedder)
    migrate.upgrade(services.db)
    chats = [{"created_at": c.created_at.isoformat(), "messages": c.messages} for c in filler(60)]
    rng = random.Random(11)
    chats += [told_chat(p, NOW - timedelta(days=rng.uniform(1, 90))) for p in crowd]
    import_conversations(services, chats, scope=Scope(OWNER))
    learn(services)
    services.close()


def run_probe(base: Path, probe: Probe, index: int, embedder: Any) -> dict[str, Any]:
    rng = random.Random(index)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        shutil.copy(base / "caesar.db", home / "caesar.db")
        told_at = NOW - timedelta(days=rng.uniform(6, 45))
        out: dict[str, Any] = {"told": probe.told, "request": probe.request, "mark": probe.mark}
        for small in (False, True):
            services = Services.build(settings(home, small))
            services.embedder.set(embedder)
            if not small:
                import_conversations(services, [told_chat(probe, told_at)], scope=Scope(OWNER))
                learn(services)
                out["learned"] = [
                    m.text
                    for m in services.standing.list(scope=Scope(OWNER))
                    if probe.mark in m.text.lower()
                ]
            ctx = Brain(services).prepare(probe.request, now=NOW, scope=Scope(OWNER))
            prompt = "\n".join(m["content"] for m in ctx.messages).lower()
            prompt = prompt.replace(probe.request.lower(), "")
            out["small" if small else "full"] = probe.mark in prompt
            services.close()
        return out


def standing_probe(
    sets: list[str] = ["A", "B"],  # noqa: B006 - read, never changed
    json: bool = False,
    verbose: bool = False,
    crowd: Annotated[
        bool, "also tell every statement of another set first (B for A, A for the rest: ~40 more)"
    ] = False,
    preference: Annotated[
        bool, "LongMemEval's single-session-preference questions instead of the probe sets"
    ] = False,
    chars: Annotated[int | None, "[memory.standing] max_chars"] = None,
    statements: Annotated[int | None, "[memory.standing] max_statements"] = None,
) -> None:
    if chars is not None:
        STANDING["max_chars"] = chars
    if statements is not None:
        STANDING["max_statements"] = statements
    embedder = rq.CachedEmbedder(MiniLMEmbedder(Settings()), CACHE)
    results: dict[str, list[dict[str, Any]]] = {}
    if preference:
        rows = preference_run(embedder)
        shown_all = sum(r["all_evidence_shown"] for r in rows)
        stated = sum(r["evidence_statement_in_prompt"] for r in rows)
        learned = sum(bool(r["evidence_statements"]) for r in rows)
        print(
            f"single-session-preference: {len(rows)} questions; every evidence session shown "
            f"{shown_all}; a statement learned from the evidence session {learned}; one in "
            f"the prompt {stated}"
        )
        return
    by_name = probe_sets()
    for name in sets:
        with tempfile.TemporaryDirectory() as tmp:
            base = Path(tmp)
            told_first = by_name["B" if name == "A" else "A"] if crowd else ()
            build_base(base, embedder, told_first)
            probes = by_name[name]
            results[name] = [run_probe(base, p, i, embedder) for i, p in enumerate(probes)]
    for name, rows in results.items():
        full = sum(r["full"] for r in rows)
        small = sum(r["small"] for r in rows)
        learned = sum(bool(r["learned"]) for r in rows)
        print(
            f"set {name}: {len(rows)} probes; learned {learned}; in the full prompt {full} "
            f"({full / len(rows):.3f}); in the small prompt {small} ({small / len(rows):.3f})"
        )
        for r in rows:
            if verbose or not (r["full"] and r["small"]):
                print(
                    f"  full={int(r['full'])} small={int(r['small'])} learned={r['learned'][:1]} "
                    f"| {r['told']} -> {r['request']}"
                )
    if json:
        write_json(results, sys.stdout, indent=1)


def preference_questions() -> list[dict[str, Any]]:
    """LongMemEval's single-session-preference questions (../shared/data): the nearest public
    proxy of a chat's preferences reaching a later request (issue #46)."""
    found = benchlib.longmemeval_items()
    return sorted(
        (q for q in found if q["question_type"] == "single-session-preference"),
        key=lambda q: q["question_id"],
    )


def preference_run(embedder: Any) -> list[dict[str, Any]]:
    """Each question's haystack imported and learned (extract, summarise, passages); then the
    question's prompt at its date: every evidence session shown (the past-conversations
    block), and a standing statement said in an evidence session in the prompt."""
    rows = []
    for item in preference_questions():
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp)
            services = Services.build(settings(home, False))
            services.embedder.set(embedder)
            migrate.upgrade(services.db)
            keys, chats = [], []
            for key, turns, when in zip(
                item["haystack_session_ids"],
                item["haystack_sessions"],
                item["haystack_dates"],
                strict=True,
            ):
                clean = rq.importable([{"role": t["role"], "content": t["content"]} for t in turns])
                if clean is not None:
                    keys.append(key)
                    chats.append({"created_at": lme_date(when).isoformat(), "messages": clean})
            report = import_conversations(services, chats, scope=Scope(OWNER))
            session_of_audit = dict(zip(report.audit_ids, keys, strict=False))
            learn(services)
            evidence = set(item["answer_session_ids"])
            ctx = Brain(services).prepare(
                item["question"], now=lme_date(item["question_date"]), scope=Scope(OWNER)
            )
            seen = {session_of_audit.get(e.audit_log_id, "") for e in ctx.recalled}
            said = {
                m.id: session_of_audit.get(m.source_audit_id or 0, "")
                for m in services.standing.list(scope=Scope(OWNER))
            }
            standing = [said.get(i, "") for i in ctx.standing_ids]
            rows.append(
                {
                    "qid": item["question_id"],
                    "all_evidence_shown": evidence <= seen,
                    "evidence_statement_in_prompt": any(k in evidence for k in standing),
                    "evidence_statements": sum(1 for k in said.values() if k in evidence),
                }
            )
            print("  ", rows[-1], flush=True)
            services.close()
    return rows


if __name__ == "__main__":
    benchlib.cli(standing_probe)
