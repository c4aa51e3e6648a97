"""Memory: facts, episodes, the semantic index, and the pure formulas that rank them.

One package per concept, the machinery beneath; modules import downward, never in a circle
(tests/test_layout.py):

- `context/`   what goes into a turn's prompt, and why (the facts and past-conversations
               blocks, the system prompt).
- `facts/`     what caesar knows about the operator: the store, and the `memory.extract` worker.
- `episodes/`  past conversations: recall, the `memory.summarise` worker, re-embedding and the
               `memory.passages` worker.
- `search/`    the machinery: vector index, keyword index, conversation windows, hybrid ranking,
               the semantic index over raw replies. Imports nothing from the packages above.
- `importance.py`  the decay and importance formulas (pure), used by facts, episodes and search.
- `transcript.py`  a chat's turns and how they are framed for an LLM, read by every worker.
"""
