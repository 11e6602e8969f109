"""Storage: one small protocol, two backends (embedded SQLite, shared PostgreSQL)."""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from ..redact import redact_url
from .base import Row, Store, Tx

__all__ = ["Row", "Store", "Tx", "open_store"]


def open_store(url: str, readonly: bool = False) -> Store:
    """Open (and migrate) the store at `sqlite:///path` or `postgresql://…`.

    `readonly`: never write, not even a migration (for `thresher serve`, which runs
    beside workers); the store must exist and its schema be current, else StoreError."""
    if url.startswith("sqlite:///"):
        from .sqlite import SQLiteStore

        return SQLiteStore(Path(url.removeprefix("sqlite:///")), readonly=readonly)
    if url.startswith(("postgresql://", "postgres://")):
        from .postgres import PostgresStore

        return PostgresStore(url, readonly=readonly)
    raise ConfigError(
        f"unsupported store URL {redact_url(url)!r}: use sqlite:///PATH or postgresql://…"
    )
