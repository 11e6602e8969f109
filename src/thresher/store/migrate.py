"""Numbered schema migrations, applied when a store is opened.

`migrations/<backend>/NNNN_name.sql` files run in order, each in its own transaction
together with the row that records it in `schema_migrations`, so a crash mid-way leaves
the schema at the previous version, never half-way. Two processes opening a new store
at once are serialised (SQLite: the write lock; PostgreSQL: an advisory lock).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

from ..errors import StoreError

__all__ = ["Migration", "migrations", "pending"]

_FILE = re.compile(r"^(\d{4})_(\w+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def migrations(backend: str) -> list[Migration]:
    root = resources.files("thresher.store").joinpath("migrations", backend)
    found = []
    for entry in root.iterdir():
        match = _FILE.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text("utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise RuntimeError(f"{backend} migrations are not numbered 1..n: {versions}")
    return found


def pending(backend: str, current: int, where: str) -> list[Migration]:
    """The migrations a store at version `current` still needs; refuse a newer store."""
    known = migrations(backend)
    if current > len(known):
        raise StoreError(
            f"{where} has schema version {current}, newer than this Thresher knows"
            f" ({len(known)}): upgrade Thresher"
        )
    return known[current:]
