"""Recall: what of the past a message brings into the prompt, and why."""
