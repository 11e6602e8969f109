"""The storage protocol: a store opens transactions; a transaction runs named queries.

Every backend runs the same named queries (see `queries.py`), so all logic above the
store is written once and both backends go through one test suite.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

__all__ = ["Row", "Store", "Tx"]

Row = dict[str, Any]


class Tx(Protocol):
    """One open transaction. Parameters are named (`:name` in the SQL files)."""

    def execute(self, query: str, **params: Any) -> int:
        """Run a statement; return the number of rows it changed."""
        ...

    def execute_many(self, query: str, rows: Sequence[Mapping[str, Any]]) -> None:
        """Run one statement per parameter set, in one round trip where the driver can."""
        ...

    def one(self, query: str, **params: Any) -> Row | None: ...

    def all(self, query: str, **params: Any) -> list[Row]: ...

    def stream(self, query: str, **params: Any) -> Iterator[Row]: ...


class Store(Protocol):
    backend: str
    url: str

    def transaction(self, write: bool = True) -> AbstractContextManager[Tx]:
        """Commit on normal exit, roll back on an exception."""
        ...

    def schema_version(self) -> int: ...

    def close(self) -> None: ...
