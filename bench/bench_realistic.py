"""A realistic history from ../shared/data: LongMemEval_S sessions through caesar's own pipeline,
and the IVF stage's recall on real MiniLM vectors.

1. Every distinct LongMemEval session (user–assistant chats, dated 2023) is imported with
   caesar's importer as a `chat.completed` row, then `memory.summarise` runs with the offline
   provider (TextRank summaries, real MiniLM embeddings). Cached under bench/out/realistic/.
   Timed: recall search for the 40 questions, each at its own question date.
2. IVF recall@5 on real vectors: all turns of those sessions (first 400 characters each)
   embedded with MiniLM; 90% indexed, 10% used as queries; the IVF stage (memory/search/ann.py, at
   its production settings) against exact search, top 5 by cosine and the ≥ 0.45 set.

    .venv/bin/python bench/bench_realistic.py
"""

from __future__ import annotations

import json
import statistics
import time
from datetime import datetime
from typing import Any

import benchlib
import numpy as np

from caesar.db import migrate
from caesar.importer import import_conversations
from caesar.memory.episodes.recall import RecallParams
from caesar.memory.search import ann
from caesar.minilm import MiniLM
from caesar.services import Services
from caesar.workers import run_until_caught_up

DATA = benchlib.ROOT.parent / "shared" / "data" / "longmemeval_s"
WORK = benchlib.OUT / "realistic"
RECIPE = "1"


def lme_date(text: str) -> datetime:
    return datetime.strptime(text.split(" (")[0] + text.split(")")[1], "%Y/%m/%d %H:%M")


def load_data() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(distinct sessions as importer conversations, questions with their dates)."""
    sessions: dict[str, dict[str, Any]] = {}
    questions = []
    for path in sorted(DATA.glob("*.json")):
        data = json.loads(path.read_text())
        questions.append({"text": data["question"], "date": lme_date(data["question_date"])})
        for sid, date, turns in zip(
            data["haystack_session_ids"],
            data["haystack_dates"],
            data["haystack_sessions"],
            strict=True,
        ):
            if sid in sessions or len(turns) < 2 or turns[-1]["role"] != "assistant":
                continue
            sessions[sid] = {
                "created_at": lme_date(date).isoformat(),
                "messages": [{"role": t["role"], "content": t["content"]} for t in turns],
            }
    return list(sessions.values()), questions


def build_history(sessions: list[dict[str, Any]]) -> tuple[Services, dict[str, Any]]:
    path = WORK / f"longmemeval-rev{migrate.head_revision()}-r{RECIPE}.db"
    settings = benchlib.bench_settings(
        WORK / "home",
        f"sqlite:///{path}",
        retention={"enabled": False},  # 2023 conversations: kept, not swept
        memory={"episodes_summarise": {"enabled": True, "batch_size": 16}},
        gateway={
            "providers": {
                "offline": {"kind": "offline"},
                "local": {"kind": "openai", "base_url": "http://127.0.0.1:9/v1"},
            },
            "routes": {
                "chat": "local:none",
                "memory_extract": "offline:textrank",
                "memory_summarise": "offline:textrank",
            },
        },
    )
    WORK.mkdir(parents=True, exist_ok=True)
    fresh = not path.exists()
    services = Services.build(settings)
    info: dict[str, Any] = {"cached": not fresh}
    if fresh:
        migrate.upgrade(services.db)
        started = time.perf_counter()
        report = import_conversations(services, sessions, person=benchlib.OWNER)
        info["import_s"] = round(time.perf_counter() - started, 1)
        info["imported"] = report.imported
        started = time.perf_counter()
        info["summarised"] = run_until_caught_up(services.workers["memory.summarise"])
        info["summarise_s"] = round(time.perf_counter() - started, 1)
        (WORK / "build.json").write_text(json.dumps(info))
    else:
        info.update(json.loads((WORK / "build.json").read_text()))
    return services, info


def recall_figures(services: Services, questions: list[dict[str, Any]]) -> dict[str, Any]:
    memory = services.episodes
    memory.warm()
    params = RecallParams.from_settings(services.settings.memory.episodes_recall)
    vectors = [memory.embed_query(q["text"]) for q in questions]
    it = iter(range(10**9))

    def one() -> int:
        i = next(it) % len(questions)
        return len(memory.search(vectors[i], questions[i]["date"], params, person=benchlib.OWNER))

    wall, cpu = benchlib.time_calls_cpu(one, 200)
    found = [
        len(memory.search(v, q["date"], params, person=benchlib.OWNER))
        for v, q in zip(vectors, questions, strict=True)
    ]
    return {
        "episodes": len(memory.index()),
        "search_ms": benchlib.summary(wall),
        "search_cpu_ms": benchlib.summary(cpu),
        "mean_recalled": statistics.mean(found),
    }


def turn_vectors(sessions: list[dict[str, Any]]) -> np.ndarray:
    cache = WORK / f"turn-vectors-r{RECIPE}.npy"
    if cache.exists():
        return np.load(cache)
    texts = [m["content"][:400] for s in sessions for m in s["messages"]]
    vectors = MiniLM(benchlib.MODEL_CACHE).embed_batch(texts)
    np.save(cache, vectors)
    return vectors


def ivf_recall(vectors: np.ndarray, threshold: float = 0.45) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    order = rng.permutation(len(vectors))
    queries, base = (
        vectors[order[: len(order) // 10]],
        np.ascontiguousarray(vectors[order[len(order) // 10 :]]),
    )
    ivf = ann.build(base, np.arange(len(base)), len(base))
    top5, passing = [], []
    for q in queries[:500]:
        exact = base @ q
        want = set(np.argsort(-exact)[:5].tolist())
        got, _, _ = ivf.nearest(q, 5, 0)
        top5.append(len(want & set(got.tolist())) / 5)
        above = set(np.flatnonzero(exact >= threshold).tolist())
        if above:
            found, _ = ivf.above(q, threshold, 0)
            passing.append(len(above & set(found.tolist())) / len(above))
    nlist, nprobe = ann.plan(len(base))
    return {
        "vectors": len(base),
        "queries": min(len(queries), 500),
        "nlist": nlist,
        "nprobe": nprobe,
        "recall_at_5": round(statistics.mean(top5), 4),
        "recall_above_threshold": round(statistics.mean(passing), 4) if passing else None,
    }


def main() -> None:
    sessions, questions = load_data()
    services, info = build_history(sessions)
    recall = recall_figures(services, questions)
    services.close()
    real_ivf = ivf_recall(turn_vectors(sessions))
    benchlib.write_result(
        "perf_realistic",
        {
            "history": info,
            "sessions": len(sessions),
            "recall": recall,
            "ivf_real": real_ivf,
            "load_avg": benchlib.load_avg(),
        },
    )
    print(
        f"LongMemEval: {recall['episodes']:,} episodes, recall search p50 {recall['search_ms']['p50']:.2f} ms "
        f"({recall['mean_recalled']:.1f} recalled); IVF on {real_ivf['vectors']:,} real vectors: "
        f"recall@5 {real_ivf['recall_at_5']}, ≥0.45 set {real_ivf['recall_above_threshold']}"
    )


if __name__ == "__main__":
    main()
