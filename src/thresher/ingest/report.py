"""Bulk ingest read back out: one record per result for a downstream importer, and the
counts behind `thresher ingest stats`.

Why one record per result and not per request: a URL is fetched once however many
sources name it (see `thresher.ingest.requests`), so the result is the unit an importer
acts on, and each record lists every request it answers, so that each source's ids
(DOI, PMCID, its own id) reach the importer with the file they lead to.

Why one streamed statement: a store holds millions of results. They are read in key
order as (result, request) rows and the rows of one result, which come together, are
grouped here, so a result costs no query of its own and this module holds only the
result being grouped. The store streams too: SQLite steps its cursor, PostgreSQL
fetches from a server-side cursor a batch at a time.

Why counts come from GROUP BY: the store counts millions of rows in one pass without
sending them over; Python only reshapes the few grouped rows into the report.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from itertools import groupby
from typing import Any

from ..clock import iso
from ..store import Row, Tx

__all__ = ["PENDING", "ingest_stats", "iter_results"]

# The key, in `ingest_stats()["by_source"]`, of requests whose URL has no result yet.
PENDING = "pending"


def _key(row: Row) -> tuple[str, str]:
    return row["ingest_type"], row["base_url"]


def _json_or_none(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _file_meta(row: Row) -> dict[str, Any] | None:
    """The `file_meta` of an `ingest_report_results` row; None when the result names
    no file or the file was never recorded."""
    if row["file_sha1"] is None:
        return None
    offset = row["file_warc_offset"]
    return {
        "sha1": row["file_sha1"],
        "sha256": row["file_sha256"],
        "md5": row["file_md5"],
        "size": int(row["file_size"]),
        "mimetype": row["file_mimetype"],
        "warc_file": row["file_warc_file"],
        "warc_offset": None if offset is None else int(offset),
    }


def _request(row: Row) -> dict[str, Any]:
    """The request of an `ingest_report_results` row, as an importer reads it."""
    return {
        "link_source": row["link_source"],
        "link_source_id": row["link_source_id"],
        "release_stage": row["release_stage"],
        "ext_ids": _json_or_none(row["ext_ids"]),
        "request": _json_or_none(row["request"]),
    }


def _result_json(first: Row, requests: list[dict[str, Any]]) -> dict[str, Any]:
    status = first["terminal_status"]
    return {
        "ingest_type": first["ingest_type"],
        "base_url": first["base_url"],
        "hit": bool(first["hit"]),
        "status": first["status"],
        "terminal_url": first["terminal_url"],
        "terminal_status": None if status is None else int(status),
        "terminal_sha1": first["terminal_sha1"],
        "hops": json.loads(first["hops"]),
        "error": first["error"],
        "attempts": int(first["attempts"]),
        "updated": iso(first["updated"]),
        "file_meta": _file_meta(first),
        "requests": requests,
    }


def iter_results(
    tx: Tx,
    *,
    status: Sequence[str] = (),
    link_source: str | None = None,
    ingest_type: str | None = None,
) -> Iterator[dict[str, Any]]:
    """Every ingest result, ordered by (ingest_type, base_url) in the store's collation,
    as a JSON-ready dict with its file's metadata and all requests naming its URL
    (ordered as loaded).

    `status` keeps results with one of these statuses (empty: all); `link_source`
    keeps results that source asked for, still listing every source's requests;
    `ingest_type` keeps one type. Rows are read as they are yielded: stop iterating
    and nothing more is read."""
    rows = tx.stream(
        "ingest_report_results",
        statuses=json.dumps(list(status)),
        link_source=link_source,
        ingest_type=ingest_type,
    )
    for _, group in groupby(rows, key=_key):
        first = next(group)
        requests = [_request(r) for r in (first, *group) if r["request_id"] is not None]
        yield _result_json(first, requests)


def ingest_stats(tx: Tx) -> dict[str, Any]:
    """Counts of requests, distinct URLs, results and hits; results by status; requests
    by source (all, `PENDING` ones without a result, and per status of their URL's
    result); requests, results and hits by ingest type.

    Statuses are listed most frequent first; sources and types by name."""
    totals = tx.one("ingest_report_totals") or {}
    by_status = {r["status"]: int(r["results"]) for r in tx.all("ingest_report_by_status")}
    by_source: dict[str, dict[str, int]] = {}
    for r in tx.all("ingest_report_by_source"):
        counts = by_source.setdefault(r["link_source"], {"requests": 0, PENDING: 0})
        n = int(r["requests"])
        counts["requests"] += n
        counts[PENDING if r["status"] is None else r["status"]] = n
    by_type = {
        r["ingest_type"]: {
            "requests": int(r["requests"]),
            "results": int(r["results"]),
            "hits": int(r["hits"]),
        }
        for r in tx.all("ingest_report_by_type")
    }
    return {
        "requests": int(totals.get("requests") or 0),
        "urls": int(totals.get("urls") or 0),
        "results": int(totals.get("results") or 0),
        "hits": int(totals.get("hits") or 0),
        "by_status": by_status,
        "by_source": by_source,
        "by_type": by_type,
    }
