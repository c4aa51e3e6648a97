"""`caesar db backup` and `caesar export`: an operator can always leave with their data."""

from __future__ import annotations
