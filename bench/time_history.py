"""The histories the time probes ask about (bench/time_probes.py): real LongMemEval chat sessions
placed on local dates and times the bench chooses, relative to a fixed `now` in the operator's
zone — the evidence of single-session, multi-session and knowledge-update questions that name
no time, and other sessions as filler; chats on 3 random days of every week, forced days and a
few older ones, one in eight just after midnight. Seeded: the same history every run.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

import recall_quality as rq
from benchlib import lme_date, longmemeval_items

# A question that names a time cannot keep its meaning once its sessions move ("previous",
# "earlier", "now" name none: they stay).
TIME_WORDS = re.compile(
    r"\b(ago|last|past|recent\w*|yesterday|today|tonight|tomorrow|week\w*|month\w*|year\w*|"
    r"days?|since|morning|evening|january|february|march|april|may|june|july|august|"
    r"september|october|november|december|monday|tuesday|wednesday|thursday|friday|saturday|"
    r"sunday|spring|summer|autumn|fall|winter|weekend)\b",
    re.I,
)


@dataclass(frozen=True)
class Session:
    key: str  # LongMemEval session id
    lme_date: datetime  # its date in LongMemEval (orders a knowledge update's two chats)
    messages: list[dict[str, str]]


@dataclass(frozen=True)
class Question:
    qid: str
    qtype: str
    text: str
    evidence: tuple[str, ...]  # session ids, oldest first (LongMemEval's dates)


@dataclass
class Pool:
    sessions: dict[str, Session]
    topic: list[Question]  # one evidence session each
    gather: list[Question]  # several
    update: list[Question]  # two: the older and the newer statement
    filler: list[str]  # sessions that are no question's evidence


@dataclass(frozen=True)
class Placed:
    key: str
    when: datetime  # aware, the operator's zone
    messages: list[dict[str, str]]

    def utc(self) -> datetime:
        """What the importer is given: naive UTC."""
        return self.when.astimezone(UTC).replace(tzinfo=None)


def _stable(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def load_pool(topics: int = 30, gathers: int = 10, updates: int = 6) -> Pool:
    """LongMemEval's dev questions and sessions (longmemeval_s and longmemeval_s_more)."""
    sessions: dict[str, Session] = {}
    questions: list[Question] = []
    answers: set[str] = set()
    for item in longmemeval_items():
        for sid, when, turns in zip(
            item["haystack_session_ids"],
            item["haystack_dates"],
            item["haystack_sessions"],
            strict=True,
        ):
            chat = rq.importable(turns)
            if chat is not None and sid not in sessions:
                sessions[sid] = Session(sid, lme_date(when), chat)
        answers |= set(item["answer_session_ids"])
        evidence = sorted(
            set(item["answer_session_ids"]),
            key=lambda s: (sessions[s].lme_date, s) if s in sessions else (datetime.max, s),
        )
        questions.append(
            Question(item["question_id"], item["question_type"], item["question"], tuple(evidence))
        )
    usable = [
        q
        for q in questions
        if not TIME_WORDS.search(q.text) and all(s in sessions for s in q.evidence)
    ]
    used: set[str] = set()

    def take(candidates: list[Question], count: int) -> list[Question]:
        out = []
        for q in candidates:
            if len(out) < count and not used & set(q.evidence):
                out.append(q)
                used.update(q.evidence)
        return out

    by_type: dict[str, list[Question]] = {}
    for q in usable:
        if q.qtype.startswith("single-session") and len(q.evidence) == 1:
            by_type.setdefault(q.qtype, []).append(q)
    # round-robin over the single-session types, each in a stable order
    rounds = [sorted(g, key=lambda q: _stable(q.qid)) for _, g in sorted(by_type.items())]
    longest = max(map(len, rounds), default=0)
    interleaved = [g[i] for i in range(longest) for g in rounds if i < len(g)]
    topic = take(interleaved, topics)
    gather = take(
        sorted(
            (q for q in usable if q.qtype == "multi-session" and len(q.evidence) >= 2),
            key=lambda q: (-len(q.evidence), _stable(q.qid)),
        ),
        gathers,
    )
    update = take(
        sorted(
            (q for q in usable if q.qtype == "knowledge-update" and len(q.evidence) == 2),
            key=lambda q: _stable(q.qid),
        ),
        updates,
    )
    filler = sorted((s for s in sessions if s not in answers), key=_stable)
    return Pool(sessions, topic, gather, update, filler)


def _random_time(rng: random.Random, latest: time | None) -> time:
    if rng.random() < 1 / 8:
        candidate = time(0, rng.randrange(5, 56))
    else:
        candidate = time(rng.randrange(8, 23), rng.randrange(60))
    if latest is not None and candidate >= latest:
        candidate = time(latest.hour // 2, latest.minute)
    return candidate


def schedule(
    now: datetime,
    dense_days: int,
    forced: dict[int, list[time | None]],
    dates: list[date],
    seed: int,
) -> list[datetime]:
    """Local start times of the history's chats, oldest first. `forced`: days back → the times
    of that day's chats (None: at random); such a day has only these. `dates`: one chat each,
    at a random time, besides whatever else that day holds."""
    rng = random.Random(seed)
    today = now.date()
    zone = now.tzinfo
    latest_today = (now - timedelta(minutes=15)).time()
    days: dict[date, list[time | None]] = {}
    monday = today - timedelta(days=today.weekday())
    while monday > today - timedelta(days=dense_days + 7):
        for offset in sorted(rng.sample(range(7), 3)):
            d = monday + timedelta(days=offset)
            if today - timedelta(days=dense_days) <= d <= today:
                days[d] = [None]
        monday -= timedelta(days=7)
    for back, times in forced.items():
        days[today - timedelta(days=back)] = list(times)
    out = []
    for d, times in days.items():
        for t in times:
            out.append(
                datetime.combine(d, t or _random_time(rng, _latest(d, today, latest_today)), zone)
            )
    for d in dates:
        out.append(datetime.combine(d, _random_time(rng, _latest(d, today, latest_today)), zone))
    return sorted(out)


def _latest(d: date, today: date, latest_today: time) -> time | None:
    return latest_today if d == today else None


def place(
    pool: Pool, slots: list[datetime], seed: int, with_questions: bool = True
) -> list[Placed]:
    """One session per slot: the questions' evidence (if `with_questions`), then filler, shuffled
    over the slots — a knowledge update's older statement always before its newer one."""
    rng = random.Random(seed)
    keys: list[str] = []
    if with_questions:
        for q in (*pool.topic, *pool.gather, *pool.update):
            keys.extend(q.evidence)
    if len(keys) > len(slots):
        raise SystemExit(f"{len(keys)} evidence sessions for {len(slots)} slots")
    keys += pool.filler[: len(slots) - len(keys)]
    rng.shuffle(keys)
    position = {k: i for i, k in enumerate(keys)}
    for q in pool.update if with_questions else []:
        old, new = q.evidence
        if position[old] > position[new]:
            keys[position[old]], keys[position[new]] = new, old
            position[old], position[new] = position[new], position[old]
    return [Placed(k, when, pool.sessions[k].messages) for k, when in zip(keys, slots, strict=True)]


def haystack(name: str, placed: list[Placed]) -> rq.Haystack:
    sessions = [rq.Conversation(p.key, p.utc(), p.messages) for p in placed]
    return rq.Haystack("time", name, sessions, [])
