"""Exactly-once, checked: the scripted memory replies, the backlog, and the invariants that
test_crash_safety.py, test_concurrency.py and test_data_safety.py assert (plain SQL over the
real database; crashkit's driver also runs them after every kill).

Chat n says "chat n: …". The fake LLM summarises it (or calls it trivial when n % 5 == 0) and
extracts three facts `chat<n>_colour|city|pet` from it (none when n % 7 == 0); every reply
carries a global attempt number, so a chat applied twice would show up as a changed value.
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from typing import Any

from conftest import OWNER

from caesar.memory.scope import Scope

FACT_ATTRS = ("colour", "city", "pet")
_CHAT_N = re.compile(r"chat (\d+):")


# -- what the scripted LLM answers -------------------------------------------------------------
def chat_number(text: str) -> int | None:
    match = _CHAT_N.search(text)
    return int(match.group(1)) if match else None


def expected_fact_keys(n: int) -> set[str]:
    """Every 7th chat teaches nothing; the others teach three facts, all or nothing."""
    return set() if n % 7 == 0 else {f"chat{n}_{attr}" for attr in FACT_ATTRS}


class MemoryReplies:
    """`llm.reply` for the memory tasks. Each reply carries a global attempt number, so a chat
    applied twice would show up as a `memory.fact.updated` row (a different value)."""

    def __init__(self) -> None:
        self.attempts = 0
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any], protocol: str) -> str:
        with self._lock:
            self.attempts += 1
            attempt = self.attempts
        messages = body.get("messages") or []
        system = str(messages[0].get("content", "")) if messages else ""
        n = chat_number(str(messages[-1].get("content", ""))) if messages else None
        from caesar.memory.episodes.summarise import SUMMARISE_SYSTEM
        from caesar.memory.facts.extract import EXTRACT_SYSTEM

        if system.startswith(EXTRACT_SYSTEM[:40]):
            keys = sorted(expected_fact_keys(n)) if n is not None else []
            facts = [{"key": k, "value": f"{k}-try{attempt}", "confidence": 0.8} for k in keys]
            return json.dumps({"facts": facts})
        if not system.startswith(SUMMARISE_SYSTEM[:40]):
            return f"Here is something about item {n}."  # a chat turn
        if n is None or n % 5 == 0:
            return ""  # trivial: the summariser writes an empty row + summarise_skipped
        return f"The operator and caesar talked about item {n} (attempt {attempt})."


def chat_payload(n: int) -> dict[str, Any]:
    return {
        "messages": [{"role": "user", "content": f"chat {n}: tell me something about item {n}"}],
        "reply": f"Here is something about item {n}.",
        "provider": "local",
        "model": "test-model",
    }


def backfill(services: Any, count: int, start: int = 0) -> list[int]:
    """`count` chat.completed rows in ONE transaction (a backlog, as after an import)."""
    from caesar.clock import utcnow
    from caesar.memory import conversations

    with services.db.write() as session:
        return [
            conversations.add_finished(
                Scope(OWNER, session), services.audit, chat_payload(n), utcnow()
            )
            for n in range(start, start + count)
        ]


# -- invariants --------------------------------------------------------------------------------
def _events(session: Any, event_type: str) -> Counter[int]:
    from sqlalchemy import select

    from caesar.db.models import AuditLog

    return Counter(
        session.scalars(select(AuditLog.subject_id).where(AuditLog.event_type == event_type))
    )


def _chats(session: Any) -> dict[int, int]:
    """audit id -> chat number, for every chat.completed row."""
    from sqlalchemy import select

    from caesar import audit
    from caesar.db.models import AuditLog

    rows = session.execute(
        select(AuditLog.id, AuditLog.payload).where(AuditLog.event_type == audit.CHAT_COMPLETED)
    )
    out = {}
    for audit_id, payload in rows:
        n = chat_number(str(payload["messages"][-1]["content"]))
        out[audit_id] = n if n is not None else -1
    return out


def check_summarise(db: Any) -> tuple[list[str], dict[str, int]]:
    """Every conversation summarised up to its tip has exactly one episode, written from that
    tip, and that tip exactly one outcome row (`summarised` with text, or `summarise_skipped`
    and an empty episode); a conversation whose last attempt failed has one `summarise_failed`
    row for its tip and no episode; one still waiting has no outcome. Returns (violations,
    tallies)."""
    from sqlalchemy import select

    from caesar import audit
    from caesar.db.models import Conversation, EpisodeSummary

    problems: list[str] = []
    with db.read() as session:
        chats = _chats(session)
        c = Conversation
        conversations = session.execute(
            select(c.id, c.tip_audit_id, c.summarised_audit_id, c.failed_audit_id)
        ).all()
        episodes = Counter(session.scalars(select(EpisodeSummary.conversation_id)))
        written_from = dict(
            session.execute(
                select(EpisodeSummary.conversation_id, EpisodeSummary.audit_log_id)
            ).all()
        )
        texts = dict(
            session.execute(select(EpisodeSummary.audit_log_id, EpisodeSummary.summary)).all()
        )
        summarised = _events(session, audit.EPISODE_SUMMARISED)
        skipped = _events(session, audit.EPISODE_SUMMARISE_SKIPPED)
        failed = _events(session, audit.EPISODE_SUMMARISE_FAILED)
    tally = Counter[str](dict.fromkeys(("summarised", "skipped", "failed", "pending"), 0))
    for conversation, tip, done, failed_at in conversations:
        outcomes = (episodes[conversation], summarised[tip], skipped[tip], failed[tip])
        if done == tip:
            if written_from.get(conversation) != tip:
                problems.append(f"conversation #{conversation}: episode not from its tip {tip}")
            elif outcomes == (1, 1, 0, 0) and texts[tip]:
                tally["summarised"] += 1
            elif outcomes == (1, 0, 1, 0) and not texts[tip]:
                tally["skipped"] += 1
            else:
                problems.append(
                    f"chat #{tip}: (episodes, summarised, skipped, failed) = {outcomes}"
                )
        elif failed_at == tip:
            if outcomes == (0, 0, 0, 1):
                tally["failed"] += 1
            else:
                problems.append(f"failed chat #{tip}: outcomes {outcomes}")
        elif any(outcomes):
            problems.append(f"waiting chat #{tip} has outcomes {outcomes}")
        else:
            tally["pending"] += 1
    stray = set(texts) - set(chats)
    if stray:
        problems.append(f"episodes for rows that are not chats: {sorted(stray)[:5]}")
    return problems[:20], dict(tally)


def check_extract(db: Any) -> tuple[list[str], dict[str, int]]:
    """No half-applied batch: every fact's source chat is at or below the cursor; each chat at or
    below it has all of its facts (each with exactly one `memory.fact.extracted` row) or exactly
    one `memory.extract_failed` row and none; no fact was ever written twice."""
    from sqlalchemy import select

    from caesar import audit
    from caesar.db.models import AuditLog, Fact, MemoryExtractCursor

    problems: list[str] = []
    with db.read() as session:
        cursor = session.scalar(select(MemoryExtractCursor.last_audit_id)) or 0
        chats = _chats(session)
        facts = session.execute(select(Fact.key, Fact.source_audit_id)).all()
        extracted = Counter(
            session.scalars(
                select(AuditLog.subject_key).where(AuditLog.event_type == audit.FACT_EXTRACTED)
            )
        )
        updated = list(
            session.scalars(
                select(AuditLog.subject_key).where(AuditLog.event_type == audit.FACT_UPDATED)
            )
        )
        failed = _events(session, audit.EXTRACT_FAILED)
    by_chat: dict[int, set[str]] = {}
    for key, source in facts:
        if source is None or source > cursor:
            problems.append(f"fact {key} comes from chat #{source}, past the cursor {cursor}")
        by_chat.setdefault(source, set()).add(key)
    if updated:
        problems.append(f"facts written twice (memory.fact.updated): {updated[:5]}")
    twice = [k for k, c in extracted.items() if c != 1]
    if twice:
        problems.append(f"facts with more than one memory.fact.extracted row: {twice[:5]}")
    tally = Counter[str](dict.fromkeys(("learned", "nothing", "failed", "pending"), 0))
    for chat, n in sorted(chats.items()):
        have, want = by_chat.get(chat, set()), expected_fact_keys(n)
        if chat > cursor:
            if have or failed[chat]:
                problems.append(f"chat #{chat} past the cursor {cursor} has facts/failures")
            else:
                tally["pending"] += 1
        elif failed[chat] == 1 and not have:
            tally["failed"] += 1
        elif failed[chat] == 0 and have == want:
            tally["learned" if want else "nothing"] += 1
            missing = [k for k in want if extracted[k] != 1]
            if missing:
                problems.append(f"chat #{chat}: facts without their audit row: {missing}")
        else:
            problems.append(
                f"chat #{chat}: facts {sorted(have)} (want {sorted(want)}), failed {failed[chat]}"
            )
    tally["cursor"] = cursor
    tally["facts"] = len(facts)
    return problems[:20], dict(tally)


CHECKS = {"memory.summarise": check_summarise, "memory.extract": check_extract}
