"""Synthetic histories of N episodes, written straight into a real, migrated SQLite database:
each episode a `chat.completed` row and its summary row (the ADR's JSON embedding, the float32
copy, one window vector and its words) and MEMORIES_PER_EPISODE dated memories, random unit vectors (4 decimals) plus planted topics
(bench/data/topics.json) whose members are near the topic's MiniLM centre, over 120 days.
Cached in bench/out/history/ by size, schema revision and recipe; rebuilt after MAX_AGE_DAYS.

    .venv/bin/python bench/run.py history 10000 100000 1000000
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import benchlib
import numpy as np
from sqlalchemy import create_engine, text

from caesar.clock import utcnow
from caesar.db import Database, migrate
from caesar.db.models import AuditLog, EpisodeSummary, Memory
from caesar.memory import passages
from caesar.memory.engine import window_keywords
from caesar.memory.engine.person_tables import PersonTables
from caesar.memory.transcript import conversation_turns
from caesar.minilm import MODEL_ID, MiniLM

RECIPE = "6"  # bump when the generator changes
# Dated memories a conversation yields (issue #45 asks the turn's cost with ≥ 10 each): near
# their episode's vector, as a conversation's sentences are near its summary.
MEMORIES_PER_EPISODE = 10
DIM = 384
SPREAD_DAYS = 120
# Planted topics (bench/data/topics.json): the centre of each is the real MiniLM embedding of its
# summary, so a chat message on the topic finds the topic's episodes above the threshold.
_DATA = json.loads((benchlib.BENCH_DATA / "topics.json").read_text())
TOPIC_TEXTS = [(t["summary"], t["message"]) for t in _DATA["topics"]]
TOPICS = len(TOPIC_TEXTS)
MAX_AGE_DAYS = 7
CHUNK = 10_000
HISTORY_DIR = benchlib.OUT / "history"

WORDS = _DATA["words"]
OFF_TOPIC = _DATA["off_topic"]  # about nothing planted, in no WORDS


@dataclass(frozen=True)
class History:
    path: Path
    episodes: int
    anchor: datetime  # "now" when it was built: created_at spans anchor - 120 days … anchor
    centres: np.ndarray  # (TOPICS, DIM) topic centres; queries near them have hits

    @property
    def url(self) -> str:
        return f"sqlite:///{self.path}"

    def topic_queries(self, count: int, seed: int = 7) -> np.ndarray:
        """Query vectors near the topic centres (cosine ≈ 0.86 to a centre)."""
        rng = np.random.default_rng(seed)
        picks = self.centres[rng.integers(0, TOPICS, size=count)]
        return unit(picks + rng.standard_normal(picks.shape).astype(np.float32) * 0.03)


def unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def centres() -> np.ndarray:
    cache = HISTORY_DIR / f"topic-centres-r{RECIPE}.npy"
    if cache.exists():
        return np.load(cache)
    HISTORY_DIR.mkdir(parents=True, exist_ok=True)
    centres = unit(MiniLM(benchlib.MODEL_CACHE).embed_batch([t for t, _ in TOPIC_TEXTS]))
    np.save(cache, centres)
    return centres


def topic_messages() -> list[str]:
    """Chat messages on the planted topics (real text: embedded, they find the topics)."""
    return [m for _, m in TOPIC_TEXTS]


def _block(
    rng: np.random.Generator, n: int, planted: np.ndarray, centres: np.ndarray
) -> np.ndarray:
    """n vectors; rows where planted >= 0 are members of that topic (cosine to the centre
    0.74–0.90, as paraphrases), the rest are random. Rounded to 4 decimals (see module doc)."""
    x = rng.standard_normal((n, DIM)).astype(np.float32)
    members = np.flatnonzero(planted >= 0)
    if members.size:
        sigma = rng.uniform(0.025, 0.06, size=(members.size, 1)).astype(np.float32)
        x[members] = centres[planted[members]] + x[members] * sigma
    x = unit(x)
    return np.round(x.astype(np.float64), 4)


class Encoded(str):
    """JSON text made here; the build engine's serializer passes it through unchanged."""


def _serialize(value: object) -> str:
    return value if isinstance(value, Encoded) else json.dumps(value)


def json_rows(vectors: np.ndarray) -> list[Encoded]:
    """JSON arrays of 4-decimal values, vectorised (json.dumps per row would dominate a 1M
    build): each value is 8 bytes `s0.dddd,` with s = '-' or a space (JSON whitespace)."""
    if np.abs(vectors).max() >= 0.99995:
        raise ValueError("a component rounds to ±1: the fixed-width encoding cannot hold it")
    n, d = vectors.shape
    digits = np.rint(np.abs(vectors) * 10_000).astype(np.int64)
    out = np.empty((n, d, 8), dtype=np.uint8)
    out[:, :, 0] = np.where(vectors < 0, ord("-"), ord(" "))
    out[:, :, 1] = ord("0")
    out[:, :, 2] = ord(".")
    for k, div in enumerate((1000, 100, 10, 1)):
        out[:, :, 3 + k] = ord("0") + (digits // div) % 10
    out[:, :, 7] = ord(",")
    out[:, -1, 7] = ord("]")
    flat = out.reshape(n, d * 8)
    return [Encoded("[" + row.tobytes().decode("ascii")) for row in flat]


def episode_rows(
    row_id: int,
    seed: int,
    topic: int,
    created: datetime,
    encoded: Encoded,
    vector: np.ndarray,
    window: np.ndarray,
    recall_count: int,
    person: int,
    adr: bool = False,
) -> tuple[dict[str, object], dict[str, object]]:
    """One synthetic episode: its `chat.completed` row and its summary row (id `row_id`),
    six words picked by `seed`, about planted `topic` (−1: none), with its float32 vector,
    the ADR's JSON record, the one window vector and its two turns' (the window's: only their
    cost to read and compare matters here)."""
    words = " ".join(WORDS[(seed * 7 + k * 13) % len(WORDS)] for k in range(6))
    about = f"{TOPIC_TEXTS[topic][0][:-1]}; " if topic >= 0 else ""
    audit = {
        "id": row_id,
        "event_type": "chat.completed",
        "created_at": created,
        "payload": {
            "messages": [{"role": "user", "content": f"about {about}{words}"}],
            "reply": f"noted: {words}",
            "provider": "bench",
            "model": "synthetic",
        },
        "person_id": person,
    }
    summary = {
        "id": row_id,
        "audit_log_id": row_id,
        "summary": f"We discussed the operator's {about}{words}.",
        "embedding": encoded,
        "embedding_f32": vector.astype("<f4").tobytes(),
        "passage_vectors": passages.pack(window[None, :]),
        "turn_vectors": passages.pack(np.stack([window, window])),
        "model": MODEL_ID,
        "created_at": created,
        "recall_count": recall_count,
        "person_id": person,
        "conversation_id": row_id,
    }
    if adr:  # an install upgraded from the ADR's schema: the summary and its JSON record alone
        for key in ("embedding_f32", "passage_vectors", "turn_vectors", "conversation_id"):
            del summary[key]
    return audit, summary


def memory_rows(
    row_id: int, seed: int, created: datetime, vectors: np.ndarray, person: int
) -> list[dict[str, object]]:
    """An episode's dated memories (kind `said`, memory/dated): one sentence each of its
    words, said by the person at its time, each with one of `vectors`."""
    return [
        {
            "person_id": person,
            "kind": "said",
            "slot": "",
            "text": "The person said "
            + " ".join(WORDS[(seed * 11 + k * 7 + n * 5) % len(WORDS)] for n in range(9))
            + ".",
            "about": "",
            "polarity": 1,
            "confidence": 1.0,
            "speaker": "person",
            "source_audit_id": row_id,
            "said_at": created,
            "created_at": created,
            "updated_at": created,
            "conversation_id": row_id,
            "turn": k,
            "vector": v.astype("<f4").tobytes(),
            "model": MODEL_ID,
        }
        for k, v in enumerate(vectors)
    ]


def _paths(episodes: int, adr: bool = False) -> tuple[Path, Path]:
    rev = migrate.head_revision()
    stem = f"synthetic-{episodes}{'-adr' if adr else ''}-rev{rev}-r{RECIPE}"
    return HISTORY_DIR / f"{stem}.db", HISTORY_DIR / f"{stem}.json"


def load(episodes: int, adr: bool = False) -> History:
    """The cached history of `episodes` episodes, built first if missing or stale. `adr`:
    shaped like an install upgraded from the ADR's schema — each episode its summary and JSON
    embedding, with no float32 copy, windows, turn vectors or dated memories."""
    db_path, meta_path = _paths(episodes, adr)
    if db_path.exists() and meta_path.exists():
        meta = json.loads(meta_path.read_text())
        anchor = datetime.fromisoformat(meta["anchor"])
        if utcnow() - anchor < timedelta(days=MAX_AGE_DAYS):
            return History(db_path, episodes, anchor, centres())
    return build(episodes, adr)


def build(episodes: int, adr: bool = False) -> History:
    db_path, meta_path = _paths(episodes, adr)
    HISTORY_DIR.mkdir(parents=True, exist_ok=True)
    for stale in HISTORY_DIR.glob(f"synthetic-{episodes}-{'adr-' if adr else 'rev'}*"):
        stale.unlink()
    tmp = db_path.with_suffix(".building")
    for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
        leftover.unlink(missing_ok=True)
    started = time.perf_counter()
    anchor = utcnow().replace(microsecond=0)
    db = Database(f"sqlite:///{tmp}")
    migrate.upgrade(db)
    db.dispose()
    engine = create_engine(f"sqlite:///{tmp}", json_serializer=_serialize)
    topic_centres = centres()
    rng = np.random.default_rng(episodes)
    # ~0.5% of episodes belong to a topic, at least 20 per topic.
    per_topic = max(20, episodes // (TOPICS * 200))
    planted = np.full(episodes, -1, dtype=np.int64)
    chosen = rng.choice(episodes, size=min(episodes, per_topic * TOPICS), replace=False)
    planted[chosen] = np.arange(chosen.size) % TOPICS
    # Mostly increasing in id (chats arrive in time order), with some jitter as imports give.
    offsets = np.sort(rng.uniform(0, SPREAD_DAYS * 86_400.0, size=episodes))[::-1]
    offsets += rng.normal(0, 3600.0, size=episodes)
    start_time = anchor - timedelta(days=SPREAD_DAYS)
    recalls = rng.geometric(0.6, size=episodes) - 1  # most 0, a few recalled often
    audit_table, episode_table = AuditLog.__table__, EpisodeSummary.__table__
    with engine.connect() as conn:
        # A throwaway build: no fsync, a big page cache (set on the raw connection, outside
        # the transaction SQLAlchemy would otherwise begin).
        raw = conn.connection.driver_connection
        raw.execute("PRAGMA synchronous=OFF")
        raw.execute("PRAGMA cache_size=-262144")
        for lo in range(0, episodes, CHUNK):
            hi = min(episodes, lo + CHUNK)
            vectors = _block(rng, hi - lo, planted[lo:hi], topic_centres)
            f32 = vectors.astype("<f4")
            # The chat's one window (its message and reply): near its summary, as in real use.
            windows = unit(f32 + rng.standard_normal(f32.shape).astype(np.float32) * 0.03)
            encoded = json_rows(vectors)
            audits, summaries, memories = [], [], []
            said = unit(
                np.repeat(f32, MEMORIES_PER_EPISODE, axis=0)
                + rng.standard_normal((f32.shape[0] * MEMORIES_PER_EPISODE, DIM)).astype(np.float32)
                * 0.04
            )
            for j in range(hi - lo):
                i = lo + j
                created = anchor - timedelta(seconds=float(offsets[i]))
                created = max(created, start_time)
                audit, summary = episode_rows(
                    i + 1,
                    i,
                    int(planted[i]),
                    created,
                    encoded[j],
                    f32[j],
                    windows[j],
                    int(recalls[i]),
                    benchlib.OWNER,
                    adr,
                )
                audits.append(audit)
                summaries.append(summary)
                if not adr:
                    k = j * MEMORIES_PER_EPISODE
                    memories += memory_rows(
                        i + 1, i, created, said[k : k + MEMORIES_PER_EPISODE], benchlib.OWNER
                    )
            # The one window's words, as memory.passages indexes them (window_keywords).
            window_rows = [
                row
                for a in ([] if adr else audits)
                for row in window_keywords.sqlite_rows(
                    a["id"], passages.windows(conversation_turns(a["payload"]))
                )
            ]
            with conn.begin():
                conn.execute(audit_table.insert(), audits)
                conn.execute(episode_table.insert(), summaries)
                if memories:
                    conn.execute(Memory.__table__.insert(), memories)
                if window_rows:
                    conn.execute(
                        text(
                            f"INSERT INTO {PersonTables(benchlib.OWNER).windows} (rowid, body) VALUES (:rowid, :body)"
                        ),
                        window_rows,
                    )
            rate = hi / max(time.perf_counter() - started, 1e-9)
            print(f"\r  building {episodes:,}: {hi:,} rows ({rate:,.0f}/s)", end="", flush=True)
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    engine.dispose()
    tmp.rename(db_path)
    seconds = time.perf_counter() - started
    meta = {
        "anchor": anchor.isoformat(),
        "episodes": episodes,
        "planted": int(chosen.size),
        "build_seconds": round(seconds, 1),
        "bytes": db_path.stat().st_size,
    }
    meta_path.write_text(json.dumps(meta, indent=2))
    print(f"\r  built {episodes:,} episodes in {seconds:.0f}s ({meta['bytes'] / 1e9:.2f} GB)")
    return History(db_path, episodes, anchor, topic_centres)


def build_histories(sizes: list[int]) -> None:
    """Build (or find cached) the synthetic histories of these sizes."""
    for size in sizes or [10_000, 100_000]:
        load(size)
