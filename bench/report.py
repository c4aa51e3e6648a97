"""Renders docs/performance.md from bench/out/results/perf_*.json (see run_all.py)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import benchlib

DOC = benchlib.ROOT / "docs" / "performance.md"


def _get(data: dict[str, Any], *path: str | int) -> Any:
    node: Any = data
    for key in path:
        if (
            isinstance(node, dict)
            and key in node
            or isinstance(node, list)
            and isinstance(key, int)
            and key < len(node)
        ):
            node = node[key]
        else:
            return None
    return node


def _ms(value: Any, digits: int = 2) -> str:
    return "—" if value is None else f"{value:,.{digits}f} ms"


def _verdict(value: Any, target: float) -> str:
    if value is None:
        return "not measured"
    return "✅ met" if value <= target else "❌ over"


def _size(results: dict[str, Any], episodes: int) -> dict[str, Any] | None:
    for row in _get(results, "perf_recall", "sizes") or []:
        if row.get("episodes") == episodes:
            return row  # type: ignore[no-any-return]
    return None


def figures(results: dict[str, Any]) -> list[tuple[str, str, str, str, str, str]]:
    """(measure, target, caesar wall p50, caesar CPU p50, baseline, verdict on wall)."""
    rows = []
    targets = {10_000: None, 100_000: 3.0, 1_000_000: 30.0}
    for episodes, target in targets.items():
        row = _size(results, episodes)
        if row is None:
            continue
        base = row["baseline_ms_p50"]
        extrapolated = row.get("baseline_extrapolated_from")
        base_text = f"{base:,.0f} ms (ADR-literal{', from ' + format(extrapolated, ',') + ' rows, extrapolated' if extrapolated else ''}) → **{row['speedup']:,}×** (CPU {row['speedup_cpu']:,}×)"
        rows.append(
            (
                f"recall search alone, {episodes:,} episodes (recall@5 vs exact: {row['recall_at_5']})",
                "—"
                if target is None
                else f"≤ {target:g} ms" + (", ≥ 100× baseline" if episodes == 100_000 else ""),
                _ms(row["search_hits_ms"]["p50"]),
                _ms(row["search_hits_cpu_ms"]["p50"]),
                base_text,
                "—" if target is None else _verdict(row["search_hits_ms"]["p50"], target),
            )
        )
    emb = results.get("perf_query_embedding")
    if emb:
        rows.append(
            (
                "query embedding (MiniLM, one short message)",
                "≤ 5 ms",
                _ms(emb["onnx_ms"]["p50"]),
                _ms(emb["onnx_cpu_ms"]["p50"]),
                f"{_ms(emb['torch_ms']['p50'])} (sentence-transformers, torch, 1 thread) → **{emb['speedup']}×**",
                _verdict(emb["onnx_ms"]["p50"], 5.0),
            )
        )
    turn = results.get("perf_turn")
    if turn:
        big, small = turn["large"], turn["small"]
        rows.append(
            (
                f"memory work per chat turn, {big['episodes']:,} episodes + 1k facts",
                "≤ 15 ms",
                _ms(big["memory_work_ms"]["p50"]),
                _ms(big["memory_work_cpu_ms"]["p50"]),
                f"at 1 episode: {_ms(small['memory_work_ms']['p50'])} (CPU {_ms(small['memory_work_cpu_ms']['p50'])})",
                _verdict(big["memory_work_ms"]["p50"], 15.0),
            )
        )
        rows.append(
            (
                "chat-turn latency added by 100k episodes vs 1",
                "≤ +15 ms",
                f"{turn['added_latency_ms_p50']:+.2f} ms",
                f"{turn['added_cpu_ms_p50']:+.2f} ms",
                "turn p50 at 1 episode minus at 100k",
                _verdict(turn["added_latency_ms_p50"], 15.0),
            )
        )
    serve = results.get("perf_serve")
    if serve:
        rows.append(
            (
                f"`caesar serve` ready, {serve['episodes']:,} episodes: /healthz · first recall",
                "≤ 5 s",
                f"{serve['healthz_s_median']:.2f} s · {serve['first_recall_s_median']:.2f} s",
                (
                    f"{serve.get('healthz_cpu_s_median', float('nan')):.2f} s · "
                    f"{serve.get('first_recall_cpu_s_median', float('nan')):.2f} s (process)"
                ),
                f"median of {len(serve['runs'])} starts",
                _verdict(serve["first_recall_s_median"], 5.0),
            )
        )
    summ = _get(results, "perf_summarise", "runs")
    if summ:
        first = summ[0]
        others = "; ".join(
            f"batch {r['batch_size']}: {_ms(r['overhead_ms_per_chat'])}" for r in summ[1:]
        )
        rows.append(
            (
                f"summarise worker overhead per chat (batch {first['batch_size']}, instant LLM)",
                "≤ 20 ms",
                _ms(first["overhead_ms_per_chat"]),
                _ms(first["overhead_cpu_ms_per_chat"]),
                others,
                _verdict(first["overhead_ms_per_chat"], 20.0),
            )
        )
    real = results.get("perf_realistic")
    if real:
        rec = real["recall"]
        rows.append(
            (
                f"recall search, LongMemEval history ({rec['episodes']:,} real episodes)",
                "—",
                _ms(rec["search_ms"]["p50"]),
                _ms(rec["search_cpu_ms"]["p50"]),
                f"{rec['mean_recalled']:.1f} episodes recalled per question",
                "—",
            )
        )
        ivf = real["ivf_real"]
        rows.append(
            (
                f"IVF stage on {ivf['vectors']:,} real MiniLM vectors: recall@5 vs exact",
                "≥ 0.99",
                f"{ivf['recall_at_5']}",
                "—",
                f"≥ 0.45 set: {ivf['recall_above_threshold']} (nlist {ivf['nlist']}, nprobe {ivf['nprobe']})",
                "✅ met" if ivf["recall_at_5"] >= 0.99 else "❌ under",
            )
        )
    return rows


def breakdown(results: dict[str, Any]) -> list[str]:
    """Where a turn's memory work goes (p50 of each part timed alone, CPU)."""
    turn = results.get("perf_turn")
    if not turn:
        return []
    big, small = turn["large"], turn["small"]
    names = {
        "facts_list_all": "facts: `FactsStore.list_all(limit=30)` (1k facts)",
        "query_embedding": "query embedding (MiniLM, ONNX)",
        "recall_search": "recall search (index + rows + ranking)",
        "prepare": "`Brain.prepare` whole (the three above + prompt)",
    }
    lines = [
        "## Where a turn's memory work goes",
        "",
        f"Each part timed alone, p50 CPU (wall in brackets); {big['episodes']:,} episodes vs 1.",
        "",
        f"| part | {big['episodes']:,} episodes | 1 episode |",
        "|---|---|---|",
    ]
    for key, label in names.items():
        lines.append(
            f"| {label} | {big['parts_cpu_p50_ms'][key]:.2f} ms ({big['parts_p50_ms'][key]:.2f}) "
            f"| {small['parts_cpu_p50_ms'][key]:.2f} ms ({small['parts_p50_ms'][key]:.2f}) |"
        )
    record_big = big["memory_work_cpu_ms"]["p50"] - big["parts_cpu_p50_ms"]["prepare"]
    parts = big["parts_cpu_p50_ms"]
    record_small = small["memory_work_cpu_ms"]["p50"] - small["parts_cpu_p50_ms"]["prepare"]
    lines.append(
        f"| the turn's write transaction (chat.completed, {big['recalled_per_turn']:.1f} recalled rows + counters; "
        f"turn − prepare) | {record_big:.2f} ms | {record_small:.2f} ms |"
    )
    notes = [
        (
            f"The recall search is {parts['recall_search']:.1f} ms of the "
            f"{big['memory_work_cpu_ms']['p50']:.1f} ms; the rest is spent outside it and is what "
            "keeps a turn above 15 ms here when it is:"
        ),
        (
            f"- the query embedding, {parts['query_embedding']:.1f} ms CPU: all-MiniLM-L6-v2 on "
            "ONNX Runtime, one thread, ~15 tokens (~320 MFLOP). That is what one core of this VM "
            "gives even when the machine is idle (5.7 ms measured at load 0.4); a graph fused by "
            "onnxruntime's transformer optimizer, flushing denormals, and the torch reference all "
            "measured the same or slower; two intra-op threads brought it to ~5.0 ms wall for "
            "~10 ms CPU, a bad trade on a 2-core server that also runs the workers (the issue's "
            "2.6 ms is not reachable on this core);"
        ),
        (
            f"- the facts block, {parts['facts_list_all']:.1f} ms CPU for 1k facts "
            "(memory/facts.py: the facts rows; edit counts are cached behind an indexed check);"
        ),
        (
            f"- the write transaction, ~{record_big:.1f} ms CPU: the chat row, then the "
            "recalled rows in one INSERT (`Audit.append_many`) and one counter UPDATE."
        ),
    ]
    hybrid = _get(results, "perf_turn", "large_hybrid")
    if hybrid:
        notes.append(
            f'With the default hybrid recall (fusion = "hybrid": keyword relevance from the '
            f"full-text index as well) the same turn costs "
            f"{hybrid['memory_work_ms']['p50']:.1f} ms p50 at {hybrid['episodes']:,} episodes. "
            "Document frequencies come from an fts5vocab table and very common words are left "
            "out of the MATCH, so the keyword query itself is ~2 ms p50 here; queries made only "
            "of very common words stay slow (ranking is kept exact for them), and the rest of "
            "the gap to dense (candidate rows, fusion) is not profiled yet. The targets above "
            'are met by the ADR\'s dense recall (fusion = "dense").'
        )
    lines += ["", *notes, ""]
    return lines


def startup(results: dict[str, Any]) -> list[str]:
    """Index load and IVF build per size: what a start (or a model change) costs."""
    sizes = _get(results, "perf_recall", "sizes") or []
    if not sizes:
        return []
    lines = [
        "## Loading the index",
        "",
        "| episodes | index load (rows → matrix) | 8-bit sealing + IVF build (background) | IVF rows |",
        "|---|---|---|---|",
    ]
    for row in sizes:
        lines.append(
            f"| {row['episodes']:,} | {row['index_load_s']:.2f} s | {row.get('ivf_build_s', 0):.2f} s "
            f"| {row.get('ivf_rows', 0):,} |"
        )
    lines += [
        "",
        "A search never waits for the background part: rows not sealed yet are scanned as float32,",
        "and until the IVF is built the 8-bit blocks are scanned in full (exact). Memory at 1M:",
        "the float32 matrix 1.5 GB, the IVF's own copy 1.5 GB, the 8-bit blocks 0.4 GB. Loading",
        "reads every row's JSON embedding too, because `embedding_f32` is stored after it in the",
        "row (SQLite reads a row's overflow pages in order); a migration putting the float32 copy",
        "in its own table (or before the JSON column) would cut the load — not done here, the",
        "schema belongs to the migrations.",
        "",
    ]
    return lines


def _loads(results: dict[str, Any]) -> str:
    seen = []
    for name in (
        "perf_query_embedding",
        "perf_recall",
        "perf_turn",
        "perf_serve",
        "perf_summarise",
    ):
        data = results.get(name) or {}
        load = (
            data.get("load_avg")
            or _get(data, "sizes", 0, "load_avg")
            or _get(data, "large", "load_avg")
        )
        load = load or _get(data, "runs", 0, "load_avg")
        if load:
            seen.append(f"{name.removeprefix('perf_')}: {load}")
    return "; ".join(seen) or "?"


def write(results: dict[str, Any], timings: dict[str, float] | None = None) -> Path:
    machine = _get(results, "perf_recall", "machine") or benchlib.machine()
    lines = [
        "# Performance",
        "",
        "What memory costs a chat turn, measured by `make bench` (bench/run_all.py) on the machine",
        "below, each figure next to its baseline from the same run. Written by bench/report.py —",
        f"do not edit by hand. Last run: {time.strftime('%Y-%m-%d %H:%M')}.",
        "",
        "| measure | target | caesar p50 (wall) | caesar p50 (CPU) | baseline, same run → ratio | |",
        "|---|---|---|---|---|---|",
    ]
    for row in figures(results):
        lines.append("| " + " | ".join(row) + " |")
    lines += [
        "",
        "**Wall and CPU.** Wall time is what a caller waits; CPU time is what the call itself",
        "costs on its thread (`time.thread_time`). On a quiet machine they are the same for this",
        "work (search, embedding and SQLite all run on the calling thread); on a busy one wall time",
        "adds the wait for a core. The 1-minute load averages during the runs were:",
        f"{_loads(results)} — on 2 cores, so wall figures above 1 core's worth of load are inflated.",
        "",
        "## Machine",
        "",
        "| | |",
        "|---|---|",
    ]
    for key in (
        "nproc",
        "cpu",
        "ram",
        "python",
        "numpy",
        "onnxruntime",
        "faiss",
        "sqlalchemy",
        "torch",
        "blas",
        "OPENBLAS_CORETYPE",
        "platform",
    ):
        if key in machine:
            lines.append(f"| {key} | {machine[key]} |")
    lines += [""]
    lines += breakdown(results)
    lines += startup(results)
    lines += METHOD.splitlines()
    if timings:
        lines += [
            "",
            "Duration of each step in the last run: "
            + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items())
            + ".",
        ]
    DOC.parent.mkdir(parents=True, exist_ok=True)
    DOC.write_text("\n".join(lines) + "\n")
    return DOC


METHOD = """## How recall stays fast

`memory/vectors.py` keeps the current model's vectors in one contiguous float32 matrix, loaded
once from the float32 copy of each embedding (the JSON column stays the record) and refreshed by
id on every search. A search:

1. cuts the matrix to the rows young enough for `max_age_days` (rows arrive in id order and
   `created_at` mostly grows with it: a binary search over its running maximum);
2. proposes candidates: below 50k rows in that window, every sealed block of 4096+ rows is
   scanned as 8-bit codes (faiss `QT_8bit_uniform`, SIMD) and the newest rows as float32, with a
   proven bound on what a block left out (|cosine − approximate| ≤ |q| × the block's largest
   quantisation error), so the result is exactly brute force's; from 50k rows on, an IVF
   (`memory/ann.py`, ~4·√n clusters, an eighth of them scanned; built in a background thread, the
   8-bit scan serves meanwhile) proposes them — the one approximate step, measured above as
   recall@5 against exact search;
3. re-scores every candidate exactly from the float32 matrix, applies the threshold (raw
   cosine) and the age filter, ranks by the ADR score `cosine × freshness × recall_weight`, and
   asks a source for more while a row it left out could still pass the threshold and outrank
   the K-th result.

An IVF was measured against the alternatives on this machine: exact float32 scans are
memory-bound (~7–12 ms per 100k rows quiet, 3–5× that on a busy machine; numpy's 2-thread BLAS
is worst there, so scans use faiss's single-threaded kernel); 8-bit codes halve that but no
more (the decode is compute-bound); an IVF scanning an eighth of its clusters costs ~0.2–0.4 ms
at 100k. On the synthetic histories, whose non-topic rows are uniformly random (no
neighbourhood structure at all, the worst case for any clustering index), recall is reported
per size above; on real MiniLM vectors it is reported in its own row.

## How to reproduce

```
make bench                               # = .venv/bin/python bench/run_all.py
.venv/bin/python bench/run_all.py --quick  # 10k and 100k only, fewer repetitions
.venv/bin/python bench/bench_recall.py --sizes 100000   # one figure at a time
```

- Synthetic histories (bench/history.py): N `chat.completed` audit rows and their
  `episode_summaries` rows written into a real, migrated SQLite database through the models'
  tables (SQLAlchemy core `executemany`, 10k rows per transaction; the FTS triggers run as for
  live rows). Vectors are random unit vectors (components rounded to 4 decimals, so the JSON
  record stays compact) plus 32 planted topics — ~0.5% of rows, cosine 0.74–0.90 to a centre
  that is the real MiniLM embedding of a topic sentence, so a chat message on the topic recalls
  them. `created_at` is spread over 120 days (mostly in id order, an hour of jitter). Cached in
  bench/out/history/ by size, schema revision and recipe; rebuilt after 7 days. The 1M history
  takes ~9–15 min and ~5.5 GB on disk.
- The baseline is ADR-0034 taken literally: load every summary's JSON embedding, a Python loop
  computing cosine × freshness × recall_weight, filter, sort, top K. At 1M it runs on the first
  50k rows and is scaled linearly (it is one pass).
- Memory work per turn runs `Brain.turn` against an in-process provider registered in the
  gateway that answers at once and times itself; memory work = turn − provider time. The
  summarise figure does the same with `memory.summarise`.
- `caesar serve` is spawned with workers off on the cached 100k database.
- OPENBLAS_CORETYPE is whatever the environment sets (see the table); nothing here changes it.
"""
