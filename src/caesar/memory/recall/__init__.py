"""Recall: what of the past a message brings into the prompt, and why. One package, one entry:
`pipeline.recall(memory, scope, message)` → `hits.Recalled` (`pipeline.preview` for the
read-only preview). Beneath it the engines (memory/engine/), reached through the scope's
search backend; above it the brain, the API, the CLI and the MCP tools.

- `pipeline.py`: the entry; the steps in order (read the message, search, add the span's
  unsummarised conversations, choose excerpts, lay out the block); the dense fusion mode.
- `question.py`, `when.py`, `dates.py`: what a message says of time and of gathering.
- `hybrid.py` (with `keywords.py`, `common_words.py`): candidates from the engine fused with
  keyword relevance, then ranked; `importance.py` (memory/) for decay.
- `excerpts.py`: which verbatim turns of each recalled conversation fit the budget, and the
  block; `plain.py`: the small model's sentences.
- `hits.py`: what recall hands back (`RecalledEpisode`, `Excerpt`, `Recalled`, `TurnMemory`).
- `episodes.py`: `EpisodeMemory`, the per-process state a recall needs (embedder, settings,
  time zone, the engine's backend) and the record of what a turn recalled.

Recall reads; it writes nothing but, after a turn, the recall counters (`record_recalls`).
"""
