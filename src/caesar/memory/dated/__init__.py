"""Dated memories: the things said and done, one sentence each (issue #45)."""
