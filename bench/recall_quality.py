"""Recall quality on public conversation-memory data (issue #6): does the right past
conversation come back?

Usage: .venv/bin/python bench/recall_quality.py [--dataset all|locomo|longmemeval] [--limit N]
       [--prompt-chars 2500,6000,12000] [--no-docs] [--dump FILE] [--postgres]
       (`make bench-quality`; CAESAR_SRC=/path/to/src runs another checkout's caesar)

Every LoCoMo conversation and LongMemEval question through caesar's own pipeline, ranked and
asked of `Brain.prepare`; the full run rewrites the results blocks of docs/recall-quality.md,
which says what the numbers mean. Method: bench/README.md.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sqlite3
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

import benchlib
import numpy as np
import prompt_quality
import shown
from benchlib import DATA, OUT, OWNER, ROOT, lme_date  # benchlib: the caesar under test on the path
from prompt_quality import present, toks
from rank_bm25 import BM25Okapi
from recall_report import DOC, curve_section, parse_budgets, report, shown_section, write_doc
from sqlalchemy import select

import caesar
from caesar import config
from caesar.brain import Brain
from caesar.config import ProviderSettings, Settings
from caesar.db import migrate
from caesar.db.models import EpisodeSummary
from caesar.embeddings import Embedder, cut_short
from caesar.importer import import_conversations
from caesar.memory.recall.hits import RecallParams
from caesar.memory.scope import Scope
from caesar.services import Services
from caesar.workers import run_until_caught_up

SAID_SHARE: float | None = None  # --said-share
LOCOMO_A = frozenset({"conv-26", "conv-30", "conv-41"})  # --half A; B: conv-42, conv-43
RANK_DEPTH = 50  # preview top_k when ranking: every session of a LoCoMo conversation, ~all of LME
KS = (1, 3, 5)


# -- data -----------------------------------------------------------------------------------
@dataclass
class Conversation:
    key: str
    created_at: datetime
    messages: list[dict[str, str]]


@dataclass
class Question:
    qid: str
    text: str
    category: str
    evidence: frozenset[str]
    now: datetime
    answer: str = ""


@dataclass
class Haystack:
    dataset: str
    name: str
    sessions: list[Conversation]
    questions: list[Question]
    skipped: int = 0  # questions without usable evidence
    # False: asked for the evidence-shown measure only (longmemeval_s_more/), not ranked
    ranked: bool = True


def importable(turns: list[dict[str, str]]) -> list[dict[str, str]] | None:
    """A chat ends with the assistant's reply (the import format requires it). Trailing user
    turns are moved into the last user turn before the reply — nothing is dropped or invented;
    a session with no user turn before an assistant one cannot be a chat (None)."""
    turns = [t for t in turns if t["content"].strip()]
    tail: list[str] = []
    while turns and turns[-1]["role"] == "user":
        tail.insert(0, turns.pop()["content"])
    users = [i for i, t in enumerate(turns[:-1]) if t["role"] == "user"]
    if not turns or not users:
        return None
    if tail:
        last = users[-1]
        turns[last] = {"role": "user", "content": "\n".join([turns[last]["content"], *tail])}
    return turns


def locomo_evidence(items: Sequence[str]) -> set[int]:
    """Session numbers cited, read leniently ("D8:6; D9:17", "D:11:26"; a bare "D" cites none)."""
    return {int(s) for item in items for s, _turn in re.findall(r"D:?(\d+):(\d+)", str(item))}


def load_locomo(path: Path) -> list[Haystack]:
    out = []
    for sample in json.loads(path.read_text()):
        conv = sample["conversation"]
        user = conv["speaker_a"]
        sessions: dict[int, Conversation] = {}
        for key, turns in conv.items():
            match = re.fullmatch(r"session_(\d+)", key)
            if not match or not turns:  # conv-26 has dates of sessions with no content
                continue
            messages = []
            for t in turns:
                text = t.get("text", "")
                if t.get("blip_caption"):  # the photo a speaker shared, as LoCoMo describes it
                    text = f"{text} [shares a photo: {t['blip_caption']}]".strip()
                messages.append(
                    {"role": "user" if t["speaker"] == user else "assistant", "content": text}
                )
            when = datetime.strptime(conv[f"{key}_date_time"].strip(), "%I:%M %p on %d %B, %Y")
            sessions[int(match.group(1))] = Conversation(f"S{match.group(1)}", when, messages)
        now = max(s.created_at for s in sessions.values()) + timedelta(days=1)
        questions, skipped = [], 0
        for i, qa in enumerate(sample["qa"]):
            if qa["category"] == 5:  # adversarial: the answer is not in the history
                continue
            cited = {f"S{n}" for n in locomo_evidence(qa.get("evidence") or []) if n in sessions}
            if not cited:
                skipped += 1
                continue
            category = f"cat{qa['category']}"
            questions.append(
                Question(
                    f"{sample['sample_id']}#{i}",
                    qa["question"],
                    category,
                    frozenset(cited),
                    now,
                    str(qa.get("answer", "")),
                )
            )
        out.append(
            Haystack("locomo", sample["sample_id"], list(sessions.values()), questions, skipped)
        )
    return out


def load_longmemeval(folder: str, ranked: bool = True) -> list[Haystack]:
    out = []
    for item in benchlib.longmemeval_items([folder]):
        sessions = [
            Conversation(sid, lme_date(date), turns)
            for sid, date, turns in zip(
                item["haystack_session_ids"],
                item["haystack_dates"],
                item["haystack_sessions"],
                strict=True,
            )
        ]
        now = lme_date(item["question_date"])
        question = Question(
            item["question_id"],
            item["question"],
            item["question_type"],
            frozenset(item["answer_session_ids"]),
            now,
            str(item.get("answer", "")),
        )
        out.append(
            Haystack("longmemeval", item["question_id"], sessions, [question], ranked=ranked)
        )
    return out


# -- embeddings cached by content hash ------------------------------------------------------
class CachedEmbedder:
    """The real embedder behind an on-disk cache keyed by sha256(model id, text). Thread-safe:
    a turn embeds its message on a thread of caesar's own (embeddings.embed_soon)."""

    def __init__(self, inner: Embedder, path: Path) -> None:
        self.inner = inner
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vector BLOB)")
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    def _key(self, text: str) -> str:
        return hashlib.sha256(f"{self.model_id}\0{text}".encode()).hexdigest()

    def cut_short(self, texts: Sequence[str]) -> list[bool]:
        return cut_short(self.inner, texts)

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        with self._lock:
            return self._embed_batch(texts)

    def _embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        keys = [self._key(t) for t in texts]
        found: dict[str, np.ndarray] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for key, blob in self._db.execute(
                f"SELECT key, vector FROM vectors WHERE key IN ({marks})", chunk
            ):
                found[key] = np.frombuffer(blob, dtype="<f4")
        missing = [i for i, k in enumerate(keys) if k not in found]
        if missing:
            vectors = self.inner.embed_batch([texts[i] for i in missing])
            for i, vector in zip(missing, vectors, strict=True):
                found[keys[i]] = np.asarray(vector, dtype=np.float32)
            self._db.executemany(
                "INSERT OR REPLACE INTO vectors VALUES (?, ?)",
                [(keys[i], found[keys[i]].astype("<f4").tobytes()) for i in missing],
            )
            self._db.commit()
        self.hits += len(keys) - len(missing)
        self.misses += len(missing)
        return np.vstack([found[k] for k in keys]) if keys else np.zeros((0, 0), np.float32)


def cached_embedder(threads: int | None = None) -> CachedEmbedder:
    """MiniLM from the benches' model cache (on `threads` threads if given) behind the cache."""
    from caesar.embeddings import MiniLMEmbedder

    options: dict[str, Any] = {"cache_dir": OUT / "models"}
    if threads is not None:
        options["threads"] = threads
    real = MiniLMEmbedder(Settings(home=OUT, embedder=options))
    return CachedEmbedder(real, OUT / "embedding-cache.sqlite")


# -- one haystack through caesar's pipeline -------------------------------------------------
# (A caesar from before the budget followed the route has no recall_chars: CAESAR_SRC runs.)
EMBEDDED_BUDGET = {"recall_chars": 2500} if "recall_chars" in ProviderSettings.model_fields else {}


def bench_settings(
    home: Path,
    prompt_chars: int | None = None,
    timezone: str | None = None,
    database_url: str | None = None,
) -> Settings:
    """Shipped defaults but for the routes and the summariser's batch, and what the caller
    names: the past-conversations budget, the operator's time zone (when this caesar has the
    setting), the database (default: SQLite in `home`)."""
    recall: dict[str, Any] = {} if prompt_chars is None else {"prompt_chars": prompt_chars}
    if SAID_SHARE is not None:
        recall["said_share"] = SAID_SHARE
    elif prompt_chars is not None and hasattr(config, "SAID_SHARE_BY_KIND"):
        # the share of the route that gets this budget: the embedded model's at its 2,500
        kind = "gguf" if prompt_chars <= config.RECALL_CHARS_BY_KIND["gguf"] else "openai"
        recall["said_share"] = config.SAID_SHARE_BY_KIND[kind]
    zone: dict[str, Any] = {}
    if timezone is not None and "timezone" in Settings.model_fields:
        zone["timezone"] = timezone
    if database_url is not None:
        zone["database_url"] = database_url
    return Settings(
        home=home,
        gateway={
            "providers": {
                "offline": {"kind": "offline"},
                # Nothing chats here; the chat route must still name a provider that could.
                # Its budget is the shipped default route's (the embedded model, kind gguf):
                # an openai provider would otherwise get 6,000 (config.RECALL_CHARS_BY_KIND).
                "unused": {
                    "kind": "openai",
                    "base_url": "http://127.0.0.1:9/v1",
                    "api_key": "unused",
                    **EMBEDDED_BUDGET,
                },
            },
            "routes": {
                "chat": "unused:none",
                "memory_extract": "offline:patterns",
                "memory_summarise": "offline:textrank",
            },
        },
        memory={
            "episodes_summarise": {"enabled": True, "batch_size": 64},
            "episodes_recall": recall,
        },
        **zone,
    )


def budget_of(settings: Settings) -> int:
    return int(settings.memory.episodes_recall.prompt_chars)


@dataclass
class Built:
    services: Services
    session_of_episode: dict[int, str]  # episode id → session key
    # episode id → every session key imported as its chat (identical sessions share one)
    sessions_of_episode: dict[int, list[str]]
    sessions_text: dict[str, str]  # session key → raw text (for the BM25 baseline)
    rejected: int  # sessions the importer refused (not a chat)
    windows: prompt_quality.WindowBM25  # the answer-in-prompt baseline
    # --postgres: every episode's id and stored vector, for an exact top 5 beside pgvector's
    exact: tuple[np.ndarray, np.ndarray] | None = None


def build(
    haystack: Haystack, embedder: Embedder, home: Path, settings: Settings | None = None
) -> Built:
    services = Services.build(settings or bench_settings(home))
    services.embedder.set(embedder)
    migrate.upgrade(services.db)
    chats = [(s.key, importable(s.messages), s.created_at) for s in haystack.sessions]
    valid = [(key, turns, when) for key, turns, when in chats if turns is not None]
    report = import_conversations(
        services,
        [{"created_at": when.isoformat(), "messages": turns} for _, turns, when in valid],
        scope=Scope(OWNER),
    )
    bad_lines = {e.line for e in report.errors}
    accepted = [v for i, v in enumerate(valid, start=1) if i not in bad_lines]
    sessions_of_audit: dict[int, list[str]] = defaultdict(list)
    for (key, _turns, _when), audit_id in zip(accepted, report.audit_ids, strict=True):
        sessions_of_audit[audit_id].append(key)  # duplicate sessions share one chat row
    run_until_caught_up(services.workers["memory.summarise"])
    if "memory.extract" in services.workers:  # its dated memories (issue #45), as `serve` would
        run_until_caught_up(services.workers["memory.extract"])
    run_until_caught_up(services.workers["memory.passages"])
    # PostgreSQL with pgvector (--postgres): the vectors copied where it searches them and its
    # index built, as `caesar serve` does at start (SQLite: nothing to do)
    migrate_vectors = getattr(services.episodes, "migrate_vectors", None)
    status = migrate_vectors() if migrate_vectors is not None else None
    if status is not None:
        print(f"  episode search: {status.describe()}", flush=True)
    with services.db.read() as session:
        rows = session.execute(
            select(EpisodeSummary.id, EpisodeSummary.audit_log_id).where(
                EpisodeSummary.summary != ""
            )
        ).all()
    session_of_episode = {r.id: sessions_of_audit[r.audit_log_id][0] for r in rows}
    texts = {key: "\n".join(t["content"] for t in turns) for key, turns, _ in accepted}
    exact = stored_vectors(services) if status is not None and status.ready else None
    return Built(
        services,
        session_of_episode,
        {r.id: sessions_of_audit[r.audit_log_id] for r in rows},
        texts,
        len(haystack.sessions) - len(accepted),
        prompt_quality.WindowBM25([turns for _, turns, _ in accepted]),
        exact,
    )


def stored_vectors(services: Services) -> tuple[np.ndarray, np.ndarray]:
    """(ids, unit vectors) of the current model's episodes, as stored: the exact search."""
    with services.db.read() as session:
        rows = session.execute(
            select(EpisodeSummary.id, EpisodeSummary.embedding_f32).where(
                EpisodeSummary.summary != "",
                EpisodeSummary.model == services.embedder.get().model_id,
            )
        ).all()
    ids = np.array([r.id for r in rows], dtype=np.int64)
    matrix = np.stack([np.frombuffer(r.embedding_f32, dtype="<f4") for r in rows])
    return ids, matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def hnsw_overlap(built: Built, q: Question, notes: dict[str, Any], ds: str) -> None:
    """--postgres: pgvector's top 5 for the question against an exact top 5 over the same
    vectors — as it searches (the planner may scan a small history's rows instead of the
    HNSW index) and with the index forced (`enable_seqscan` off)."""
    if built.exact is None:
        return
    from sqlalchemy import text

    ids, matrix = built.exact
    memory = built.services.episodes
    vector = memory.embed_query(q.text)
    cosine = matrix @ vector
    exact = set(ids[np.lexsort((-ids, -cosine))][:5].tolist())
    database = memory.backend.database  # type: ignore[attr-defined]
    for how in ("as searched", "index forced"):
        with memory.db.read() as session:
            if how == "index forced":
                session.execute(text("SET LOCAL enable_seqscan = off"))
            got = set(database.search(Scope(OWNER, session), vector, limit=5).ids.tolist())
        notes["hnsw"][(ds, how)].append(len(got & exact) / max(1, min(5, len(ids))))


# -- rankers: question → session keys, best first --------------------------------------------
Ranker = Callable[[Built, Question], list[str]]


def recall_ranker(**overrides: Any) -> Ranker:
    """EpisodeMemory.preview with these overrides: the POST /v1/memory/recall path."""

    def rank(built: Built, q: Question) -> list[str]:
        hits = built.services.episodes.preview(
            q.text, q.now, max_age_days=None, **overrides, scope=Scope(OWNER)
        )
        return [built.session_of_episode[h.episode_id] for h in hits]

    return rank


@dataclass(frozen=True)
class _HybridParams:
    top_k: int
    similarity_threshold: float | None
    max_age_days: float | None
    halflife_days: float
    recall_weight_scale: float
    fusion: str
    keyword_weight: float
    ranking: str
    comparable_within: float
    date_weight: float
    said_pool: bool = False


def hybrid_ranker(**overrides: Any) -> Ranker:
    """caesar.memory.hybrid.hybrid_search with the configured recall settings and overrides:
    what EpisodeMemory.preview does once it fuses (and the RRF comparison, which it never will)."""
    from caesar.memory.recall.hybrid import hybrid_search

    def rank(built: Built, q: Question) -> list[str]:
        memory = built.services.episodes
        values = {
            **memory.settings.model_dump(
                include=set(_HybridParams.__dataclass_fields__) - {"max_age_days"}
            ),
            "max_age_days": None,
            **overrides,
        }
        with memory.db.read() as session:
            hits = hybrid_search(
                Scope(OWNER, session, memory.backend),
                q.text,
                memory.embed_query(q.text),
                q.now,
                _HybridParams(**values),
            )
        return [built.session_of_episode[h.episode_id] for h in hits]

    return rank


_WORD = re.compile(r"\w+")


def bm25_ranker(built: Built, q: Question) -> list[str]:
    keys = list(built.sessions_text)
    corpus = [_WORD.findall(built.sessions_text[k].lower()) for k in keys]
    scores = BM25Okapi(corpus).get_scores(_WORD.findall(q.text.lower()))
    return [keys[i] for i in np.argsort(-scores, kind="stable")[:RANK_DEPTH]]


RANKED = {"top_k": RANK_DEPTH, "similarity_threshold": None}
NO_DECAY = {"halflife_days": math.inf, "comparable_within": 0.0}


def systems() -> dict[str, tuple[Ranker, Ranker | None]]:
    """name → (ranking with the threshold off, default auto-recall or None)."""
    integrated = "fusion" in RecallParams.__dataclass_fields__
    dense = {"fusion": "dense", "ranking": "adr"}
    # Until EpisodeMemory.search fuses, its preview *is* the ADR's dense ranking, and the
    # hybrid rows come from hybrid.hybrid_search with the same settings.
    adr = (
        recall_ranker
        if integrated
        else (lambda **o: recall_ranker(**{k: v for k, v in o.items() if k != "fusion"}))
    )
    caesar = recall_ranker if integrated else hybrid_ranker
    return {
        "ADR-literal (dense × decay)": (adr(**RANKED, **dense), adr(**dense)),
        "BM25, raw session text": (bm25_ranker, None),
        "RRF of dense and keyword ranks": (hybrid_ranker(**RANKED, fusion="rrf"), None),
        "caesar hybrid (defaults)": (caesar(**RANKED), caesar()),
        "caesar hybrid, ADR decay (ranking = adr)": (
            caesar(**RANKED, ranking="adr"),
            caesar(ranking="adr"),
        ),
        "ADR-literal, decay off": (adr(**RANKED, **dense, **NO_DECAY), None),
        "caesar hybrid, decay off": (caesar(**RANKED, **NO_DECAY), caesar(**NO_DECAY)),
    }


# -- scoring --------------------------------------------------------------------------------
@dataclass
class Tally:
    n: int = 0
    at_k: dict[int, int] = field(default_factory=lambda: dict.fromkeys(KS, 0))
    rr: float = 0.0
    auto: int = 0
    auto_n: int = 0
    offtopic: int = 0  # auto-recall surfaced something for a question about another history
    offtopic_n: int = 0
    newest_first: int = 0  # knowledge updates: the newest evidence session ranked first
    newest_n: int = 0

    def add(self, ranked: list[str], evidence: frozenset[str], auto: list[str] | None) -> None:
        self.n += 1
        first = next((i for i, key in enumerate(ranked, start=1) if key in evidence), None)
        for k in KS:
            self.at_k[k] += first is not None and first <= k
        self.rr += 1.0 / first if first else 0.0
        if auto is not None:
            self.auto_n += 1
            self.auto += any(key in evidence for key in auto)

    def row(self) -> list[str]:
        cells = [f"{self.at_k[k] / self.n:.3f}" for k in KS] + [f"{self.rr / self.n:.3f}"]
        cells.append(f"{self.auto / self.auto_n:.3f}" if self.auto_n else "–")
        cells.append(f"{self.offtopic / self.offtopic_n:.3f}" if self.offtopic_n else "–")
        cells.append(f"{self.newest_first / self.newest_n:.3f}" if self.newest_n else "–")
        return cells


# --dump: every question's first-budget prompt and what it showed, one JSON line each
DUMP: Path | None = None
# --postgres: a fresh database on one PostgreSQL with pgvector for each history (None: SQLite)
NEW_DATABASE: Callable[[], str] | None = None


def candidate_sessions(built: Built, q: Question, asked: Any) -> list[str]:
    """The sessions of the episodes recall ranked for `q` (best first), before the block
    chose among them: where an evidence session fell when it was not shown."""
    services = built.services
    params = RecallParams.from_settings(services.settings.memory.episodes_recall)
    vector = services.episodes.embed_query(q.text)
    ranked = services.episodes.search(
        vector, q.now, params, query_text=q.text, asked=asked, scope=Scope(OWNER)
    )
    return shown.shown_sessions(ranked, built.sessions_of_episode)


def run(
    haystacks: list[Haystack], embedder: Embedder, budgets: Sequence[int | None] = (None,)
) -> tuple[dict[tuple[str, str, str], Tally], dict[str, Any]]:
    """`budgets`: the `prompt_chars` of each evidence-shown tally (None: shipped); the first is
    also the budget of the ranked systems' prompts."""
    tallies: dict[tuple[str, str, str], Tally] = defaultdict(Tally)
    notes: dict[str, Any] = defaultdict(int)
    notes["prompt"] = defaultdict(prompt_quality.PromptTally)
    notes["shown"] = defaultdict(shown.ShownTally)
    notes["hnsw"] = defaultdict(list)
    named = systems()
    started = time.monotonic()
    # Off-topic probes: the questions of the dataset's previous history, asked of this one
    # (LongMemEval: the last file's question; LoCoMo: every question about the last pair)
    previous: dict[str, list[Question]] = {}
    for number, haystack in enumerate(haystacks, start=1):
        with tempfile.TemporaryDirectory(prefix="caesar-recall-") as home:
            url = NEW_DATABASE() if NEW_DATABASE is not None else None
            settings = bench_settings(Path(home), budgets[0], database_url=url)
            built = build(haystack, embedder, Path(home), settings)
            # the same database, seen through the other budgets' settings
            others = [
                Services.build(bench_settings(Path(home), b, database_url=url)) for b in budgets[1:]
            ]
            for other in others:
                other.embedder.set(embedder)
            try:
                ask(built, others, haystack, named, tallies, notes, previous)
            finally:
                built.services.close()
                for other in others:
                    other.close()
        print(
            f"[{time.monotonic() - started:6.0f}s] {number}/{len(haystacks)} {haystack.dataset} "
            f"{haystack.name}: {len(haystack.sessions)} sessions, {len(haystack.questions)} questions",
            flush=True,
        )
    notes["seconds"] = round(time.monotonic() - started)
    return tallies, notes


def ask(
    built: Built,
    others: list[Services],
    haystack: Haystack,
    named: dict[str, tuple[Ranker, Ranker | None]],
    tallies: dict[tuple[str, str, str], Tally],
    notes: dict[str, Any],
    previous: dict[str, list[Question]],
) -> None:
    """Every question of one history: ranked (unless `haystack.ranked` is off), its prompt at
    each budget, and the off-topic probes."""
    ds = haystack.dataset
    dates = {s.key: s.created_at for s in haystack.sessions}
    if haystack.ranked:
        notes[f"{ds}:rejected"] += built.rejected
        notes[f"{ds}:skipped"] += haystack.skipped
        notes[f"{ds}:episodes"] += len(built.session_of_episode)
    notes[f"{ds}:shown_histories"] += 1
    notes[f"{ds}:shown_skipped"] += haystack.skipped
    for q in haystack.questions:
        hnsw_overlap(built, q, notes, ds)
        evidence_text = "\n".join(built.sessions_text.get(k, "") for k in q.evidence)
        answerable = bool(present(q.answer, set(toks(evidence_text))))
        contexts = [
            Brain(s).prepare(q.text, now=q.now, scope=Scope(OWNER))
            for s in (built.services, *others)
        ]
        if DUMP is not None:
            prompt = contexts[0].messages[0]["content"]
            seen = shown.shown_sessions(contexts[0].recalled, built.sessions_of_episode)
            record = {
                "dataset": ds,
                "qid": q.qid,
                "category": q.category,
                "question": q.text,
                "answer": q.answer,
                "answerable": answerable,
                "answered": bool(answerable and present(q.answer, set(toks(prompt)))),
                "evidence": sorted(q.evidence),
                "shown": seen,
                "all_shown": q.evidence <= set(seen),
                "candidates": candidate_sessions(built, q, contexts[0].asked),
                "layout": contexts[0].asked.layout,
                "spans": len(contexts[0].asked.time.spans),
                "prompt": prompt,
                "windows": {
                    ",".join(built.sessions_of_episode.get(e.episode_id, [])): [
                        round(float(x), 4) for x in (e.windows or ())
                    ]
                    for e in contexts[0].recalled
                },
            }
            with DUMP.open("a") as f:
                f.write(json.dumps(record, default=str) + "\n")
        for services, ctx in zip((built.services, *others), contexts, strict=True):
            shown.score(
                notes["shown"],
                ds,
                budget_of(services.settings),
                q.category,
                q.evidence,
                ctx,
                built.sessions_of_episode,
                q.answer if answerable else None,
                dates,
            )
        if not haystack.ranked:
            continue
        newest = (
            max(q.evidence, key=lambda k: dates[k])
            if q.category == "knowledge-update" and len(q.evidence) > 1
            else None
        )
        for name, (ranked, auto) in named.items():
            got = ranked(built, q)
            surfaced = auto(built, q) if auto else None
            for category in (q.category, "all"):
                tally = tallies[(ds, name, category)]
                tally.add(got, q.evidence, surfaced)
                if newest is not None:
                    tally.newest_n += 1
                    tally.newest_first += bool(got) and got[0] == newest
        if answerable:
            made = prompt_quality.prompts(
                built.services, built.windows, q.text, q.now, ctx=contexts[0]
            )
            prompt_quality.score(notes["prompt"], ds, q.category, q.answer, made)
        else:
            notes[f"{ds}:unanswerable"] += 1
    if not haystack.ranked:
        return
    asked = haystack.questions[0].now  # an off-topic message arrives at this history's time
    for probe in (replace(p, now=asked) for p in previous.get(ds, [])):
        for name, (_, auto) in named.items():
            if auto:
                tally = tallies[(ds, name, "all")]
                tally.offtopic_n += 1
                tally.offtopic += bool(auto(built, probe))
        # the real turn: does an off-topic message inject anything?
        ctx = Brain(built.services).prepare(probe.text, now=probe.now, scope=Scope(OWNER))
        notes[f"{ds}:offtopic_turns"] += 1
        notes[f"{ds}:offtopic_injected"] += bool(ctx.recalled)
    previous[ds] = haystack.questions


def recall_quality(
    dataset: Literal["all", "locomo", "longmemeval"] = "all",
    limit: Annotated[int | None, "at most N haystacks per dataset"] = None,
    prompt_chars: Annotated[
        str | None,
        "memory.episodes_recall.prompt_chars for the evidence-shown measure, e.g. 6000 or "
        "2500,6000,12000 (a curve; the first is also the ranked systems' budget)",
    ] = None,
    no_docs: Annotated[bool, "do not rewrite docs/recall-quality.md"] = False,
    dump: Annotated[
        str | None, "write every question's prompt and what it showed (JSON lines)"
    ] = None,
    postgres: Annotated[
        bool, "on PostgreSQL with pgvector (the test suite's; a partial run: docs not rewritten)"
    ] = False,
    said_share: Annotated[
        float | None, "memory.episodes_recall.said_share (default: the shipped one)"
    ] = None,
    half: Annotated[
        str | None, "only one dev half, A or B (a partial run: the docs are not rewritten)"
    ] = None,
    sample: Annotated[
        int | None, "only the first N histories left (a partial run: docs not rewritten)"
    ] = None,
    types: Annotated[
        str | None,
        "only LongMemEval questions of these types, e.g. multi-session,temporal-reasoning "
        "(a partial run: the docs are not rewritten)",
    ] = None,
) -> None:
    if said_share is not None:
        global SAID_SHARE
        SAID_SHARE = said_share
    if dump:
        global DUMP
        DUMP = Path(dump)
        DUMP.unlink(missing_ok=True)
    stack = ExitStack()
    if postgres:
        global NEW_DATABASE
        sys.path.insert(0, str(ROOT / "tests"))
        from pg import create_database, start_postgres

        server = stack.enter_context(start_postgres(Path(tempfile.mkdtemp(prefix="caesar-pg-"))))
        NEW_DATABASE = lambda: create_database(server, with_vector=True)  # noqa: E731
    budgets = parse_budgets(prompt_chars)
    resolved = [budget_of(bench_settings(OUT, b)) for b in budgets]

    haystacks: list[Haystack] = []
    if dataset in ("all", "locomo"):
        haystacks += load_locomo(DATA / "locomo" / "locomo_dev.json")[:limit]
    if dataset in ("all", "longmemeval"):
        haystacks += load_longmemeval("longmemeval_s")[:limit]
        haystacks += load_longmemeval("longmemeval_s_more", ranked=False)[:limit]
    if half:
        # the dev halves (docs/memories.md): LoCoMo conv-26, 30, 41 (A) against conv-42, 43
        # (B); LongMemEval's questions of both folders sorted by id, every other one
        lme = sorted((h for h in haystacks if h.dataset == "longmemeval"), key=lambda h: h.name)
        in_half = {h.name for h in lme[(half == "B") :: 2]}
        haystacks = [
            h
            for h in haystacks
            if (h.name in in_half)
            or (h.dataset == "locomo" and (h.name in LOCOMO_A) == (half == "A"))
        ]
    if types:
        wanted = set(types.split(","))
        haystacks = [
            h for h in haystacks if h.dataset != "longmemeval" or h.questions[0].category in wanted
        ]
    if sample:
        haystacks = haystacks[:sample]
    print(f"caesar from {Path(caesar.__file__).parent}", flush=True)
    # A bulk job alone on the machine: every core on the embeddings the cache lacks.
    embedder = cached_embedder(threads=min(os.cpu_count() or 1, 64))  # the setting's bound
    with stack:  # the PostgreSQL, if --postgres started one
        tallies, notes = run(haystacks, embedder, budgets)
    datasets = list(dict.fromkeys(h.dataset for h in haystacks))
    text = report(tallies, notes, datasets, resolved)
    print(f"\nembeddings: {embedder.hits} cached, {embedder.misses} computed\n")
    for (ds, how), overlaps in sorted(notes["hnsw"].items()):
        print(
            f"pgvector top 5 against exact, {ds}, {how}: overlap {np.mean(overlaps):.4f} "
            f"({len(overlaps)} questions, {sum(o < 1 for o in overlaps)} with a difference)"
        )
    print(text)
    curve = curve_section(notes, resolved) if len(resolved) > 1 else ""
    if curve:
        for budget in resolved[1:]:
            for ds in datasets:
                print(f"\n**{ds}**\n\n" + shown_section(notes, ds, budget))
        print("\n" + curve)
    whole = limit is None and not types and not no_docs and not postgres and not half and not sample
    if dataset == "all" and whole:
        if curve:
            write_doc(curve, "budget-curve")
        if resolved[0] == budget_of(bench_settings(OUT)):  # the first budget is the shipped one
            write_doc(text)
        print(f"\nwrote {DOC.relative_to(ROOT)}")


if __name__ == "__main__":
    benchlib.cli(recall_quality)
