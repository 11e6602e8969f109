"""The shared store on PostgreSQL (psycopg 3).

Connections run in autocommit mode and every unit of work is an explicit transaction,
so no statement ever sits in an implicit, forgotten transaction holding locks.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.rows import dict_row

from ..errors import StoreError, StoreUnavailable
from ..redact import redact_text
from .base import Row
from .migrate import Step, check_current, migrations, pending
from .queries import load_queries, parse_queries

__all__ = ["PostgresStore"]

# Any constant will do; it only has to be the same in every Thresher process.
_MIGRATION_LOCK = 0x7468726573686572
# Rows a streaming cursor fetches from the server at a time.
STREAM_BATCH = 2000


class _PgTx:
    _streams = 0  # names server-side cursors uniquely within the process

    def __init__(self, conn: psycopg.Connection[Row], queries: dict[str, str]) -> None:
        self._conn = conn
        self._queries = queries

    def execute(self, query: str, **params: Any) -> int:
        return self._conn.execute(self._queries[query], params).rowcount

    def execute_many(self, query: str, rows: Sequence[Mapping[str, Any]]) -> None:
        if rows:
            with self._conn.cursor() as cur:
                cur.executemany(self._queries[query], rows)

    def one(self, query: str, **params: Any) -> Row | None:
        return self._conn.execute(self._queries[query], params).fetchone()

    def all(self, query: str, **params: Any) -> list[Row]:
        return self._conn.execute(self._queries[query], params).fetchall()

    def stream(self, query: str, **params: Any) -> Iterator[Row]:
        # A named (server-side) cursor: rows come a batch at a time, so streaming a
        # million results holds one batch, not the whole answer (a plain cursor fetches
        # it all). Other queries may run on the connection while it is open.
        _PgTx._streams += 1
        name = f"thresher_stream_{_PgTx._streams}"
        with self._conn.cursor(name=name, row_factory=dict_row) as cur:
            cur.itersize = STREAM_BATCH
            cur.execute(self._queries[query], params)
            yield from cur


class PostgresStore:
    backend = "postgres"

    def __init__(self, url: str, connect_timeout: int = 10, readonly: bool = False) -> None:
        self.url = url
        self.readonly = readonly
        self._connect_timeout = connect_timeout
        self._conn = self._connect()
        self._queries = load_queries(self.backend)
        try:
            if readonly:
                check_current(self.backend, self.schema_version(), "the PostgreSQL store")
            else:
                self._migrate()
        except BaseException:
            self._conn.close()
            raise

    def _connect(self) -> psycopg.Connection[Row]:
        # Read-only: every transaction of the session is READ ONLY, so the server itself
        # refuses a write, whatever a query says.
        extra: dict[str, Any] = {}
        if self.readonly:
            extra["options"] = "-c default_transaction_read_only=on"
        try:
            return psycopg.connect(
                self.url,
                autocommit=True,
                row_factory=dict_row,
                connect_timeout=self._connect_timeout,
                **extra,
            )
        except psycopg.Error as exc:
            reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
            # libpq quotes parts of a URL it cannot parse, the password's included.
            reason = redact_text(reason, self.url)
            raise StoreUnavailable(f"cannot connect to PostgreSQL store: {reason}") from None

    @contextmanager
    def transaction(self, write: bool = True) -> Iterator[_PgTx]:
        if write and self.readonly:
            raise StoreError("the PostgreSQL store is open read-only")
        if self._conn.broken:
            # The server restarted or the network dropped: a long-running scheduler
            # reconnects instead of failing every run from now on.
            self._conn.close()
            self._conn = self._connect()
        try:
            with self._conn.transaction():
                yield _PgTx(self._conn, self._queries)
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(f"PostgreSQL store: {redact_text(str(exc), self.url)}") from exc

    def schema_version(self) -> int:
        try:
            row = self._conn.execute("SELECT max(version) AS v FROM schema_migrations").fetchone()
        except psycopg.errors.UndefinedTable:
            return 0  # a new, empty database
        return int(row["v"] or 0) if row else 0

    def _migrate(self) -> None:
        # Looked at first without a lock or a CREATE: a role that may only read (for
        # `status`, `search`, exports) opens a store whose schema is current.
        if not pending(self.backend, self.schema_version(), "the PostgreSQL store"):
            return
        target = len(migrations(self.backend))
        try:
            with self._conn.transaction():
                self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
                self._conn.execute(
                    "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY,"
                    " name TEXT NOT NULL, applied DOUBLE PRECISION NOT NULL)"
                )
                for m in pending(self.backend, self.schema_version(), "the PostgreSQL store"):
                    for part in m.parts():
                        if isinstance(part, Step):
                            queries, migrate = part.load()
                            tx = _PgTx(self._conn, parse_queries(queries, part.module, "postgres"))
                            migrate(tx)
                        else:
                            self._conn.execute(part.encode())
                    self._conn.execute(
                        "INSERT INTO schema_migrations VALUES (%s, %s, %s)",
                        (m.version, m.name, time.time()),
                    )
        except (psycopg.errors.InsufficientPrivilege, psycopg.errors.ReadOnlySqlTransaction) as exc:
            reason = str(exc).strip().splitlines()[0]
            raise StoreError(
                f"cannot bring the PostgreSQL store to schema version {target}: {reason};"
                " open it once as a role that may create tables"
            ) from None

    def close(self) -> None:
        self._conn.close()
