"""What goes into a turn's prompt, and why.

A brain turn (caesar/brain.py) asks the memory for two things and hands them to `render.py`,
which turns them into text with no I/O:

1. the facts block — the operator's facts, most important first (facts/store.py ranks them by
   importance at read time), cut to `max_facts` facts and `max_chars` characters so the ones
   dropped are always the least important;
2. the past-conversations block — the episodes recall brings back (episodes/recall.py), each
   as "when: summary", when relative to now (`relative_time`);
3. the system prompt — base prompt, the note that fenced memory is data and not instructions,
   the two blocks, then the operator's own prompt.

Every stored string is fenced between `<memory>` and `</memory>` and cannot close the fence
itself; the extractor (facts/extract.py) cuts any such block that leaked into a turn, so
recalled memory is never learned back as if the operator had said it.
"""
