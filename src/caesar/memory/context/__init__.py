"""What goes into a turn's prompt besides recall, and how it is put together.

A brain turn (caesar/brain.py) asks `build.py` for the facts block and the standing statements
that bear on the message, and recall (memory/recall/pipeline.py) for the past-conversations
block; memory/render.py turns it all into text (no I/O):

1. the facts block — the operator's facts, most important first (facts/store.py ranks them by
   importance at read time), cut to `max_facts` facts and `max_chars` characters so the ones
   dropped are always the least important;
2. the past-conversations block — the episodes recall brings back, each as its date and
   summary line, with the verbatim excerpts of it that best match the message, all within one
   budget (`prompt_chars`);
3. the system prompt — base prompt, the note that fenced memory is data and not instructions,
   the blocks, then the operator's own prompt.

Every stored string is fenced between `<memory>` and `</memory>` and cannot close the fence
itself; the extractor (facts/extract.py) cuts any such block that leaked into a turn, so
recalled memory is never learned back as if the operator had said it.
"""
