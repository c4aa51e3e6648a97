"""Facts: what caesar knows about the operator.

`store.py` keeps them and ranks them by importance at read time (the formulas are in
memory/importance.py); `extract.py` is the `memory.extract` worker that learns them from
finished chats.
"""
