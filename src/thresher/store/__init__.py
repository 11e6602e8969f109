"""Storage: one small protocol, two backends (embedded SQLite, shared PostgreSQL)."""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from ..redact import redact_url
from .base import Row, Store, Tx

__all__ = ["Row", "Store", "Tx", "open_store", "read_only_here"]


def open_store(url: str, readonly: bool = False) -> Store:
    """Open (and migrate) the store at `sqlite:///path` or `postgresql://…`.

    `readonly`: never write, not even a migration (for `thresher serve`, which runs
    beside workers); the store must exist and its schema be current, else StoreError."""
    if url.startswith("sqlite:///"):
        from .sqlite import SQLiteStore

        return SQLiteStore(Path(url.removeprefix("sqlite:///")), readonly=readonly)
    if url.startswith(("postgresql://", "postgres://")):
        try:
            import psycopg  # noqa: F401  (only to say what is missing)
        except ImportError:
            raise ConfigError(
                "a PostgreSQL store needs psycopg, which is not installed: run"
                " pip install 'thresher[postgres]'"
            ) from None
        from .postgres import PostgresStore

        return PostgresStore(url, readonly=readonly)
    raise ConfigError(
        f"unsupported store URL {redact_url(url)!r}: use sqlite:///PATH or postgresql://…"
    )


def read_only_here(url: str) -> bool:
    """Whether this process may only read the store at `url`: an SQLite file that
    exists in a file or folder it may not write (a copy on a read-only disk, another
    user's harvest). Reading commands open such a store read-only rather than fail on
    their first write ("attempt to write a readonly database")."""
    if not url.startswith("sqlite:///"):
        return False  # PostgreSQL: a role that may only read opens a current store anyway
    import os

    path = Path(url.removeprefix("sqlite:///"))
    return path.is_file() and not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK))
