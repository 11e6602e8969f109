"""What a crawl run did: its summary (`CrawlSummary`, the JSON `thresher crawl --json`
prints), and its errors counted by reason."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..fetch import FetchError
from ..store import Row
from .ledger import COUNTERS

__all__ = ["TOO_MANY_REDIRECTS", "CrawlSummary", "error_reasons", "error_text"]

TOO_MANY_REDIRECTS = "too many redirects"
# Error reasons, the start of each error recorded ("timeout: GET …"), or HTTP statuses.
_REASONS = frozenset({cls.kind for cls in FetchError.__subclasses__()} | {TOO_MANY_REDIRECTS})


def error_text(exc: BaseException) -> str:
    """What a crawl records of an error: its reason, then its message."""
    return f"{getattr(exc, 'kind', 'error')}: {exc}"


def error_reasons(rows: Iterable[Row]) -> dict[str, int]:
    """How many of a run's errors (`crawl_run_errors` rows) there are of each reason:
    "HTTP 404", "timeout", …, most first."""
    counts: dict[str, int] = defaultdict(int)
    for row in rows:
        head, sep, _ = str(row["error"] or "").partition(": ")
        if sep and head in _REASONS:
            counts[head] += 1
        elif row["status"] is not None:
            counts[f"HTTP {row['status']}"] += 1
        else:
            counts["other"] += 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


@dataclass(frozen=True)
class CrawlSummary:
    source: str
    run: int
    pages: int
    errors: int
    bytes: int
    redirects: int
    not_modified: int
    duplicates: int
    robots_excluded: int
    requisites: int
    sitemaps: int
    links_dropped: int
    queued: int
    hosts: int
    seconds: float
    warc_files: tuple[str, ...]
    shards: int = 1
    error_reasons: tuple[tuple[str, int], ...] = ()

    @classmethod
    def from_row(
        cls,
        row: Row,
        seconds: float,
        warc_files: Iterable[str],
        shards: int = 1,
        errors: Iterable[Row] = (),
    ) -> CrawlSummary:
        """The summary of the run whose `crawl_runs` row is `row`; `errors`: its
        `crawl_run_errors` rows."""
        counts = {k: int(row[k]) for k in (*COUNTERS, "queued", "hosts")}
        return cls(
            source=str(row["source"]),
            run=int(row["run_id"]),
            seconds=seconds,
            warc_files=tuple(warc_files),
            shards=shards,
            error_reasons=tuple(error_reasons(errors).items()),
            **counts,
        )

    def as_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["warc_files"] = list(self.warc_files)
        d["error_reasons"] = dict(self.error_reasons)
        d["pages_per_second"] = round(self.pages / self.seconds, 1) if self.seconds else 0.0
        return d
