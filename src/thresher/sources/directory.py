"""The source directory: what to harvest, by name, with its type and options."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..errors import SourceError, UnknownSource
from ..store import Row, Tx
from .types import detect_type, get_type

__all__ = [
    "Source",
    "add_source",
    "get_source",
    "list_sources",
    "remove_source",
    "update_source",
]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$")


@dataclass(frozen=True)
class Source:
    name: str
    type: str
    url: str
    options: dict[str, Any]
    created: float
    updated: float

    @classmethod
    def from_row(cls, row: Row) -> Source:
        return cls(
            name=row["name"],
            type=row["type"],
            url=row["url"],
            options=json.loads(row["options"]),
            created=float(row["created"]),
            updated=float(row["updated"]),
        )


def add_source(
    tx: Tx, name: str, url: str, type_name: str | None, raw_options: dict[str, str], now: float
) -> Source:
    if not _NAME.match(name):
        raise SourceError(
            f"bad source name {name!r}: use letters, digits and . _ @ - (at most 128)"
        )
    stype = get_type(type_name) if type_name else detect_type(url)
    url, options = stype.validate(url, raw_options)
    if not tx.execute(
        "insert_source",
        name=name,
        type=stype.name,
        url=url,
        options=json.dumps(options, sort_keys=True),
        now=now,
    ):
        raise SourceError(f"a source named {name!r} exists already (remove it first)")
    return get_source(tx, name)


def update_source(tx: Tx, name: str, url: str, raw_options: dict[str, str], now: float) -> Source:
    """Give source `name` a new URL and options (its type and its history stay)."""
    stype = get_type(get_source(tx, name).type)
    url, options = stype.validate(url, raw_options)
    tx.execute(
        "update_source", name=name, url=url, options=json.dumps(options, sort_keys=True), now=now
    )
    return get_source(tx, name)


def get_source(tx: Tx, name: str) -> Source:
    row = tx.one("get_source", name=name)
    if row is None:
        raise UnknownSource(name)
    return Source.from_row(row)


def list_sources(tx: Tx) -> list[Source]:
    return [Source.from_row(r) for r in tx.all("list_sources")]


def remove_source(tx: Tx, name: str, now: float) -> None:
    """Forget a source. What it harvested stays; a run it left open is cancelled, so
    its queued jobs are not left pending for ever."""
    if not tx.execute("delete_source", name=name):
        raise UnknownSource(name)
    tx.execute("cancel_source_runs", name=name, now=now)
    tx.execute("cancel_source_jobs", name=name, now=now)
