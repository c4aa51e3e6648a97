"""Storage: the engine (SQLite pragmas, write transactions), the models, the migrations."""

from caesar.db.engine import Database

__all__ = ["Database"]
