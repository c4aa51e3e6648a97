"""Episodes: past conversations, summarised, embedded and recalled.

`recall.py` decides which past conversations a message brings back, and why (ranking in
memory/recall/hybrid.py, decay in memory/importance.py); `summarise.py` is the
`memory.summarise` worker that writes an episode per finished chat; `reembed.py` embeds the
conversations' windows (the `memory.passages` worker) and re-embeds episodes of another model.
"""
