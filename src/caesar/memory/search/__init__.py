"""The search machinery beneath facts and episodes: it imports nothing from them.

- `vectors.py` (with `vector_math.py`, `quantized.py`, `ann.py`): the in-memory vector index.
- `keywords.py`, `common_words.py`, `window_keywords.py`: full-text relevance in the database.
- `passages.py`: a conversation's 3-turn windows and their packed vectors.
- `hybrid.py`: dense and keyword relevance fused, then freshness × recall weight.
- `semantic.py`: the semantic index over raw replies, for explicit recall.
- `person_tables.py`: each person's own SQLite full-text tables (made with the `Person` model).
"""
