"""A realistic history: LongMemEval_S sessions through caesar's own pipeline, recall searched
at the questions' dates; and the IVF stage's recall on real MiniLM vectors (memory/engine/ann.py
against exact search). Method: bench/README.md.
"""

from __future__ import annotations

import json
import statistics
import time
from typing import Any

import benchlib
import numpy as np
from benchlib import OWNER, lme_date

from caesar.db import migrate
from caesar.importer import import_conversations
from caesar.memory.engine import ann
from caesar.memory.recall.hits import RecallParams
from caesar.memory.scope import Scope
from caesar.minilm import MiniLM
from caesar.services import Services
from caesar.workers import run_until_caught_up

WORK = benchlib.OUT / "realistic"
RECIPE = "1"


def load_data() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(distinct sessions as importer conversations, questions with their dates)."""
    sessions: dict[str, dict[str, Any]] = {}
    questions = []
    for data in benchlib.longmemeval_items(["longmemeval_s"]):
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
        report = import_conversations(services, sessions, scope=Scope(OWNER))
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

    def one(pair: tuple[Any, dict[str, Any]]) -> int:
        return len(memory.search(pair[0], pair[1]["date"], params, scope=Scope(OWNER)))

    calls = benchlib.each(one, list(zip(vectors, questions, strict=True)))
    wall, cpu = benchlib.time_calls_cpu(calls, 200)
    found = [
        len(memory.search(v, q["date"], params, scope=Scope(OWNER)))
        for v, q in zip(vectors, questions, strict=True)
    ]
    return {
        "episodes": len(memory.index(OWNER)),
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


def realistic() -> None:
    """LongMemEval's sessions learned by caesar (cached), recall searched at each question's
    date; and the IVF stage's recall@5 on their turns' real MiniLM vectors."""
    sessions, questions = load_data()
    services, info = build_history(sessions)
    recall = recall_figures(services, questions)
    services.close()
    benchlib.write_result(
        "perf_realistic",
        {
            "history": info,
            "sessions": len(sessions),
            "recall": recall,
            "ivf_real": ivf_recall(turn_vectors(sessions)),
            "load_avg": benchlib.load_avg(),
        },
    )
