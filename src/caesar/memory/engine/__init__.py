"""The engines behind one door: everything that knows which database it runs on.

`backend.py` is the door: `search_backend` picks, once, the `SearchBackend` of the database's
engine, and nothing outside this package (and db/: engine set-up, migrations) asks which
engine it is. Behind it:

- `sqlite.py` (FTS5 + `person_tables.py`, each person's own full-text tables),
  `postgres.py` with `pg_words.py` (`tsvector`), `pgvector.py` with `pgvector_migration.py`
  (vectors searched in PostgreSQL);
- `vectors.py` (with `vector_math.py`, `quantized.py`, `ann.py`) and `in_process.py`: the
  in-memory vector index, where the database does not search vectors itself;
- `rows.py`: the episode rows recall reads by id or by date; `window_keywords.py`: the
  3-turn windows' words, written and scored; `sql.py`: driver-level statements.
"""
