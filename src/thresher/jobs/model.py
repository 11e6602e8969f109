"""Jobs as values: what a job is, what a handler asks for, and what it returns.

States: pending → leased → done | pending (retry, or lease expired) | failed.
A job that spawns children gets a commit job (`waits_for` = the job), `waiting` until
every child is done, then pending; it is a child of the job's own parent, so an
ancestor's commit waits, through it, for the whole subtree.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ..store import Row, Tx

__all__ = ["JOIN_KIND", "Job", "JobSpec", "JobState", "Outcome", "Writer"]

# The commit kind used when a handler spawns children without naming one: it does
# nothing but wait, so that commits further up wait for the whole subtree.
JOIN_KIND = "join"


class JobState(StrEnum):
    PENDING = "pending"
    WAITING = "waiting"
    LEASED = "leased"
    DONE = "done"
    FAILED = "failed"


@dataclass(frozen=True)
class Job:
    id: int
    kind: str
    key: str
    parent_id: int | None
    waits_for: int | None
    source: str | None
    source_run_id: int | None
    payload: Mapping[str, Any]
    state: JobState
    attempts: int
    max_attempts: int
    lease_owner: str | None
    lease_expires: float | None
    not_before: float
    last_error: str | None
    result: Any

    @classmethod
    def from_row(cls, row: Row) -> Job:
        return cls(
            id=int(row["id"]),
            kind=row["kind"],
            key=row["key"],
            parent_id=row["parent_id"],
            waits_for=row["waits_for"],
            source=row["source"],
            source_run_id=row["source_run_id"],
            payload=json.loads(row["payload"]),
            state=JobState(row["state"]),
            attempts=int(row["attempts"]),
            max_attempts=int(row["max_attempts"]),
            lease_owner=row["lease_owner"],
            lease_expires=row["lease_expires"],
            not_before=float(row["not_before"]),
            last_error=row["last_error"],
            result=json.loads(row["result"]) if row["result"] is not None else None,
        )

    @property
    def is_commit(self) -> bool:
        return self.waits_for is not None


@dataclass(frozen=True)
class JobSpec:
    """A job to create. `name` is unique among its siblings; the key is derived from it."""

    kind: str
    name: str
    payload: Mapping[str, Any] = field(default_factory=dict)
    priority: int = 0
    max_attempts: int | None = None


Writer = Callable[[Tx], None]


@dataclass(frozen=True)
class Outcome:
    """What a handler returns. All of it is committed in one transaction with the job's
    `done` state, or none of it is: `write` stores the results, `children` are spawned,
    `commit` (or a plain join) runs after all children are done."""

    result: Any = None
    write: Writer | None = None
    children: tuple[JobSpec, ...] = ()
    commit: JobSpec | None = None
