"""The units of an archive: what a run lists (`Unit`) and what the store remembers (`Known`).

An archive is a tree: archive → units → messages. One job harvests one unit, and the
store keeps one `archive_months` row per unit, written in the same transaction as the
unit's messages. For the HTTP kinds a unit is a month (`YYYY-MM`, its messages filed
under it); a plain mbox file is one unit, `all`. A kind whose units are not months
names them its own way — a git epoch, a range of article numbers — and its messages
are filed under the month of their Date (`files_by_date`), as a plain mbox's are.

The stop sign of a unit is `Known.stop_offset`, a position in the archive's own order
of the unit's messages, never a Date: a byte offset for a file, a message number, an
article number. The kind says what it means (`thresher.archives.kinds`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..store import Row
from .months import ALL, valid_month

__all__ = ["Known", "Month", "Unit", "files_by_date"]


@dataclass(frozen=True)
class Unit:
    """One unit of an archive as the archive lists it now.

    `month`: the unit's name (the `archive_months.month` column): a month `YYYY-MM`,
    `all`, or a kind's own name. `urls`: where the unit's messages are, best first
    (pipermail serves `.txt` and `.txt.gz`; a 404 on one moves to the next).
    `expected`: the archive's own count, or None when it gives none (then validators
    decide). `grows`: the unit is only ever appended to, so a later run can read just
    what follows its stop sign. `mboxrd`: body lines `>From ` were escaped the mboxrd
    way and are un-escaped. `params`: what else the kind needs to harvest the unit
    (JSON values: it travels in the unit job's payload)."""

    month: str
    urls: tuple[str, ...]
    expected: int | None = None
    grows: bool = False
    mboxrd: bool = True
    params: Mapping[str, Any] = field(default_factory=dict)

    def payload(self) -> dict[str, Any]:
        return {
            "month": self.month,
            "urls": list(self.urls),
            "expected": self.expected,
            "grows": self.grows,
            "mboxrd": self.mboxrd,
            "params": dict(self.params),
        }

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> Unit:
        return cls(
            str(p["month"]),
            tuple(p["urls"]),
            p.get("expected"),
            bool(p.get("grows", False)),
            bool(p.get("mboxrd", True)),
            dict(p.get("params") or {}),
        )


# The name the five HTTP kinds have always used: their units are months.
Month = Unit


def files_by_date(unit: str) -> bool:
    """Whether a unit's messages are filed under the month of their Date (a plain mbox,
    a git epoch, a range of articles) rather than under the unit itself (a month)."""
    return unit == ALL or not valid_month(unit)


@dataclass(frozen=True)
class Known:
    """What the store holds about a unit from its last harvest."""

    month: str
    url: str
    state: str = "open"
    expected: int | None = None
    counted: int = 0
    stored: int = 0
    etag: str | None = None
    last_modified: str | None = None
    length: int | None = None
    stop_offset: int | None = None
    stop_key: str | None = None
    tail_sha256: str | None = None
    checked_at: float | None = None

    @classmethod
    def from_row(cls, row: Row) -> Known:
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in row.items() if k in names})

    @property
    def harvested(self) -> bool:
        return self.stop_offset is not None
