"""Numbered schema migrations, applied when a store is opened.

`migrations/<backend>/NNNN_name.sql` files run in order, each in its own transaction
together with the row that records it in `schema_migrations`, so a crash mid-way leaves
the schema at the previous version, never half-way. Two processes opening a new store
at once are serialised (SQLite: the write lock; PostgreSQL: an advisory lock).

A migration that needs Python (say, a digest of stored bytes that SQL cannot compute)
has a line ``-- step: package.module`` in its script: the SQL before it runs, then the
module's ``migrate(tx)`` with a `Tx` over the module's own named queries (``QUERIES``,
in the format of the query files), then the SQL after it, all in the one transaction.
The module is named, not imported here, so the store does not depend on the layers
above it; a step must keep working for as long as its migration exists, so it brings
its own SQL rather than using the current queries.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources

from ..errors import StoreError
from .base import Tx

__all__ = ["Migration", "Step", "check_current", "migrations", "pending"]

_FILE = re.compile(r"^(\d{4})_(\w+)\.sql$")
_STEP = re.compile(r"^--[ \t]*step:[ \t]*([\w.]+)[ \t]*$", re.MULTILINE)


@dataclass(frozen=True)
class Step:
    """A migration's Python step: ``migrate(tx)`` and ``QUERIES`` of `module`."""

    module: str

    def load(self) -> tuple[str, Callable[[Tx], None]]:
        found = importlib.import_module(self.module)
        return found.QUERIES, found.migrate


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    def parts(self) -> list[str | Step]:
        """The script cut at its ``-- step:`` lines: SQL, and the steps between, in
        order; SQL that is only blanks and comments is left out."""
        pieces = _STEP.split(self.sql)
        out: list[str | Step] = []
        for i, piece in enumerate(pieces):
            if i % 2:
                out.append(Step(piece))
            elif _has_sql(piece):
                out.append(piece)
        return out


def _has_sql(text: str) -> bool:
    return any(line.strip() and not line.strip().startswith("--") for line in text.splitlines())


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


def check_current(backend: str, current: int, where: str) -> None:
    """For a store opened read-only, which cannot migrate: refuse one that is behind."""
    todo = pending(backend, current, where)
    if todo:
        raise StoreError(
            f"{where} has schema version {current}, this Thresher needs"
            f" {todo[-1].version}: run any other thresher command on it once to upgrade it"
        )
