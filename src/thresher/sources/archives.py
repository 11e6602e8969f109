"""The mail archive types: pipermail, modmbox, ponymail, hyperkitty and mbox.

A run is a tree of jobs (see docs/mail.md):

- the root job (`<type>.run`) reads what the archive says about itself (its index, its
  counts) and compares it with what the store recorded for each month: complete months
  are skipped, months whose count matches are confirmed without a request, and every
  other month gets a month job;
- a month job (`archive.month`) fetches the month's file conditionally, or only its new
  tail, stores the new messages and, in the same transaction, the month's new state:
  counts, validators, the stop sign, complete or open;
- the commit job (`archive.commit`) runs after every month job and records the totals.

Every request goes through the process's polite fetcher (robots.txt, one request at a
time per host, the delay, private addresses refused unless `allow_private`).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from urllib.request import url2pathname

from ..archives.harvest import Decision, Known, absorb, decide, request_headers
from ..archives.kinds import (
    Month,
    hyperkitty_emails_url,
    hyperkitty_export_url,
    hyperkitty_list_url,
    hyperkitty_parts,
    mbox_month,
    parse_hyperkitty_emails,
    parse_hyperkitty_list,
    parse_modmbox_index,
    parse_pipermail_index,
    parse_ponymail_stats,
    pipermail_index_url,
    ponymail_mbox_url,
    ponymail_parts,
    ponymail_stats_url,
)
from ..archives.months import ALL, DEFAULT_GRACE_DAYS, is_closed
from ..archives.rows import parse_rows
from ..errors import PermanentError, SourceError, TransientError
from ..jobs import JobContext, JobSpec, Outcome, register
from ..store import Tx
from .http import RETRY_STATUSES, get_following
from .types import Option, SourceType, register_type

__all__ = ["ARCHIVE_TYPES", "ARCHIVE_TYPE_NAMES"]

_EVENTS_KEPT = 20  # keys listed in one 'missing' event
# Messages per page when HyperKitty's `emails` listing is walked (HyperKitty sets no
# cap; it costs about 0.8 KiB of JSON and a few queries a message): the first page is
# twice the messages looked for, within these bounds, and each next page twice the last.
HYPERKITTY_PAGES = (20, 500)


def _http_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SourceError(f"an archive URL must be http(s) with a host, not {url!r}")
    return url


def _check_ponymail(url: str) -> str:
    ponymail_parts(_http_url(url))
    return url


def _check_hyperkitty(url: str) -> str:
    hyperkitty_parts(_http_url(url))
    return url


def _check_mbox(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme in ("http", "https"):
        return _http_url(url)
    if parts.scheme == "file":
        return str(Path(url2pathname(parts.path)).resolve())
    if parts.scheme and len(parts.scheme) > 1:
        raise SourceError(f"unsupported URL scheme {parts.scheme!r} in {url!r}")
    return str(Path(url).resolve())


def _path(url: str) -> str:
    return urlsplit(url).path.lower()


def _detect_hyperkitty(url: str) -> bool:
    try:
        hyperkitty_parts(url)
    except SourceError:
        return False
    return "/hyperkitty/" in _path(url) or "/archives/" in _path(url) or "/api/list/" in _path(url)


def _detect_ponymail(url: str) -> bool:
    parts = urlsplit(url)
    return (
        parts.path.endswith(("/list.html", "/list")) and "@" in parts.query
    ) or parts.path.endswith(("/api/stats.lua", "/api/mbox.lua"))


def _detect_mbox(url: str) -> bool:
    return _path(url).endswith((".mbox", ".mbox.gz", ".mbx", ".mbx.gz"))


_COMMON = {
    "grace_days": Option(
        float, DEFAULT_GRACE_DAYS, "Days after a month ends before it can be complete."
    ),
    "allow_private": Option(bool, False, "Also fetch private, loopback and link-local addresses."),
    "delay": Option(float, None, "Seconds between requests to one host [config delay]."),
    "max_bytes": Option(int, 2**30, "Largest month file fetched; larger is an error."),
}


def _type(name: str, doc: str, check: Any, detect: Any) -> SourceType:
    return register_type(
        SourceType(
            name=name,
            root_kind=f"{name}.run",
            doc=doc,
            check_url=check,
            detect=detect,
            options=dict(_COMMON),
        )
    )


ARCHIVE_TYPES = (
    _type(
        "pipermail",
        "A Mailman 2 (pipermail) list archive: its index page URL.",
        lambda url: pipermail_index_url(_http_url(url)),
        lambda url: "/pipermail/" in _path(url),
    ),
    _type(
        "modmbox",
        "An Apache mod_mbox list archive: its index page URL.",
        lambda url: pipermail_index_url(_http_url(url)),
        lambda url: "/mod_mbox/" in _path(url),
    ),
    _type(
        "ponymail",
        "An Apache Pony Mail list: its page (list.html?list@domain) or stats.lua URL.",
        _check_ponymail,
        _detect_ponymail,
    ),
    _type(
        "hyperkitty",
        "A Mailman 3 HyperKitty list: its page (…/list/list@domain/) or REST URL.",
        _check_hyperkitty,
        _detect_hyperkitty,
    ),
    _type(
        "mbox",
        "One mbox file, plain or gzipped: a URL or a local path.",
        _check_mbox,
        _detect_mbox,
    ),
)

ARCHIVE_TYPE_NAMES = frozenset(t.name for t in ARCHIVE_TYPES)


# --- fetching ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Got:
    status: int
    headers: Mapping[str, str]  # lower-case names
    content: bytes  # decoded payload
    wire: int  # bytes transferred
    retry_after: float | None = None


async def _get(
    ctx: JobContext, url: str, headers: dict[str, str], max_bytes: int | None = None
) -> _Got:
    if urlsplit(url).scheme not in ("http", "https"):
        return _read_local(url, headers)
    resp = await get_following(ctx, url, headers, max_bytes)
    lowered: dict[str, str] = {}
    for key, value in resp.headers:
        lowered.setdefault(key.lower(), value)
    return _Got(resp.status, lowered, resp.content, len(resp.body), resp.retry_after)


def _read_local(path: str, headers: Mapping[str, str]) -> _Got:
    """A local mbox file answered like a static web server would (validators, ranges)."""
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            etag = f'"{st.st_size:x}-{st.st_mtime_ns:x}"'
            meta = {"etag": etag}
            if headers.get("If-None-Match") == etag:
                return _Got(304, meta, b"", 0)
            start = headers.get("Range", "")
            if start.startswith("bytes=") and start.endswith("-"):
                offset = int(start[6:-1])
                if offset >= st.st_size:
                    return _Got(416, meta, b"", 0)
                f.seek(offset)
                data = f.read()
                meta["content-range"] = f"bytes {offset}-{offset + len(data) - 1}/{st.st_size}"
                return _Got(206, meta, data, len(data))
            data = f.read()
    except FileNotFoundError:
        return _Got(404, {}, b"", 0)
    except OSError as exc:
        raise PermanentError(f"{path}: {exc.strerror or exc}") from None
    return _Got(200, meta, data, len(data))


def _check_status(url: str, got: _Got) -> None:
    if got.status in RETRY_STATUSES:
        raise TransientError(f"{url}: HTTP {got.status}", got.retry_after)
    if got.status >= 400 and got.status != 416:
        raise PermanentError(f"{url}: HTTP {got.status}")


async def _listing(ctx: JobContext, url: str, saved: list[dict[str, Any]]) -> bytes:
    """An archive's listing page (index, counts). It is asked for conditionally against
    the copy kept from the last run, if the server gave validators: an unchanged index
    costs a 304 and is read from the store. A new copy is appended to `saved`, for the
    root job to store with its outcome."""
    source = ctx.job.source or ""
    kept = await ctx.store.run(
        lambda tx: tx.one("get_archive_index", source=source, url=url), False
    )
    headers = {}
    if kept is not None:
        if kept["etag"]:
            headers["If-None-Match"] = kept["etag"]
        if kept["last_modified"]:
            headers["If-Modified-Since"] = kept["last_modified"]
    got = await _get(ctx, url, headers)
    if got.status == 304 and kept is not None:
        return bytes(kept["body"])
    _check_status(url, got)
    if got.status != 200:
        raise PermanentError(f"{url}: HTTP {got.status}")
    etag, last_modified = got.headers.get("etag"), got.headers.get("last-modified")
    if etag or last_modified:
        saved.append(
            dict(
                source=source,
                url=url,
                etag=etag,
                last_modified=last_modified,
                body=got.content,
                now=ctx.clock.now(),
            )
        )
    return got.content


# --- the root job: what the archive lists, and what to do about each month -------------


@dataclass(frozen=True)
class _Listed:
    """What the root job learnt from the archive: its months now; the total it counts
    (HyperKitty); the months its numbers vouch for, unchanged since the last harvest,
    which are confirmed without a request; and the months known to hold messages the
    store does not, which are fetched whatever their counts say."""

    months: list[Month]
    total: int | None = None
    vouched: frozenset[str] = frozenset()
    changed: frozenset[str] = frozenset()


async def _list_months(
    ctx: JobContext,
    kind: str,
    url: str,
    known: Mapping[str, Known],
    now: float,
    grace: float,
    saved: list[dict[str, Any]],
) -> _Listed:
    """The months the archive lists now."""

    async def page(address: str) -> bytes:
        return await _listing(ctx, address, saved)

    if kind == "pipermail":

        def plain_first(month: str) -> bool:
            k = known.get(month)
            if k is not None and k.harvested:
                return k.url.endswith(".txt")
            return not is_closed(month, now, grace)

        return _Listed(parse_pipermail_index(await page(url), url, prefer_plain=plain_first))
    if kind == "modmbox":
        return _Listed(parse_modmbox_index(await page(url), url))
    if kind == "ponymail":
        root, name, domain = ponymail_parts(url)
        counts = parse_ponymail_stats(await page(ponymail_stats_url(root, name, domain)))
        return _Listed(
            [
                Month(m, (ponymail_mbox_url(root, name, domain, m),), n, grows=False, mboxrd=True)
                for m, n in sorted(counts.items())
            ]
        )
    if kind == "hyperkitty":
        return await _hyperkitty_months(ctx, url, known, saved)
    return _Listed([mbox_month(url)])


async def _hyperkitty_months(
    ctx: JobContext, url: str, known: Mapping[str, Known], saved: list[dict[str, Any]]
) -> _Listed:
    """HyperKitty's months, from what the archive holds (see docs/mail.md).

    Its total costs one request: when it equals the messages the months held at their
    last harvest, every month is vouched for and nothing is fetched. Otherwise its
    `emails` listing is walked, newest archived first, until as many messages as are
    missing were found that the store does not hold: their months are fetched. The
    first run, or a total that went down, walks the whole listing and counts every
    month, so a list created today with years of imported mail, mail filed under 2001
    for want of a Date, and mail dated 2031 are all found; each month is then also
    compared by its count, like Pony Mail's, so a month that lost mail is checked."""
    root, address = hyperkitty_parts(url)
    parse_hyperkitty_list(await _listing(ctx, hyperkitty_list_url(root, address), saved), address)
    counted = await _listing(ctx, hyperkitty_emails_url(root, address, 1), saved)
    total = parse_hyperkitty_emails(counted).count
    held = sum(k.counted for k in known.values())

    def month(name: str, expected: int | None) -> Month:
        return Month(
            name,
            (hyperkitty_export_url(root, address, name),),
            expected,
            grows=False,
            # Exports quote `From ` lines the mboxo way: `>From ` is kept as served.
            mboxrd=False,
        )

    if total == held:
        return _Listed([month(m, None) for m in sorted(known)], total, frozenset(known))
    per_month, new, whole = await _walk_hyperkitty(ctx, root, address, total - held)
    changed = frozenset(new)
    if whole:
        names = sorted(set(per_month) | set(known))
        return _Listed([month(m, per_month[m]) for m in names], total, changed=changed)
    names = sorted(set(known) | changed)
    return _Listed([month(m, None) for m in names], total, frozenset(known) - changed, changed)


async def _walk_hyperkitty(
    ctx: JobContext, root: str, address: str, wanted: int
) -> tuple[Counter[str], Counter[str], bool]:
    """Walk the `emails` listing a page at a time: messages per month, the messages per
    month the store does not hold, and whether the listing was read to its end. Stops
    early once `wanted` (> 0) such messages were found. A message listed twice (the
    listing moved by a new arrival while it was walked) is counted once."""
    source = ctx.job.source or ""
    per_month: Counter[str] = Counter()
    new: Counter[str] = Counter()
    seen: set[str] = set()
    offset = 0
    smallest, largest = HYPERKITTY_PAGES
    size = largest if wanted <= 0 else max(smallest, min(largest, 2 * wanted))
    while True:
        url = hyperkitty_emails_url(root, address, size, offset)
        size = min(largest, 2 * size)
        got = await _get(ctx, url, {})
        _check_status(url, got)
        page = parse_hyperkitty_emails(got.content)
        fresh = [(key, month) for key, month in page.emails if key is None or key not in seen]
        seen.update(key for key, _ in fresh if key is not None)
        stored = await ctx.store.run(
            partial(_stored_keys, source=source, keys=[k for k, _ in fresh if k is not None]),
            False,
        )
        for key, month in fresh:
            per_month[month] += 1
            if key is not None and key not in stored:
                new[month] += 1
        offset += len(page.emails)
        if not page.emails or offset >= page.count:
            return per_month, new, True
        if 0 < wanted <= new.total():
            return per_month, new, False


def _stored_keys(tx: Tx, source: str, keys: list[str]) -> set[str]:
    return {r["key"] for r in tx.all("stored_keys_among", source=source, keys=json.dumps(keys))}


def _vanished(listed: Sequence[Month], known: Mapping[str, Known]) -> list[Month]:
    """Months an archive that counts no longer lists, although mail was harvested there
    (Pony Mail leaves out months without mail): listed again with a count of zero, so
    the month is checked and what it lost is recorded."""
    if not listed or listed[0].expected is None:
        return []
    model = listed[0]
    present = {m.month for m in listed}
    return [
        Month(k.month, (k.url,), 0, grows=model.grows, mboxrd=model.mboxrd)
        for k in known.values()
        if k.month not in present and k.counted > 0
    ]


async def _run(ctx: JobContext, kind: str) -> Outcome:
    source = ctx.job.source or ""
    opts = dict(ctx.job.payload["options"])
    grace = float(opts.get("grace_days", DEFAULT_GRACE_DAYS))
    now = ctx.clock.now()
    rows = await ctx.store.run(lambda tx: tx.all("archive_months", source=source), False)
    known = {r["month"]: Known.from_row(r) for r in rows}
    saved: list[dict[str, Any]] = []
    found = await _list_months(ctx, kind, ctx.job.payload["url"], known, now, grace, saved)
    listed, total = found.months, found.total
    listed += _vanished(listed, known)
    children: list[JobSpec] = []
    confirmed: list[dict[str, Any]] = []
    skipped = 0
    for month in listed:
        k = known.get(month.month)
        if month.month in found.changed:
            decision: Decision = "fetch"
        else:
            decision = decide(month, k, month.month in found.vouched)
        if decision == "skip":
            skipped += 1
        elif decision == "confirm":
            closed = is_closed(month.month, now, grace)
            confirmed.append(
                dict(
                    source=source,
                    month=month.month,
                    now=now,
                    expected=month.expected if month.expected is not None else (k and k.expected),
                    state="complete" if closed else "open",
                    completed_at=now if closed else None,
                )
            )
        else:
            payload = {**asdict(month), "options": opts}
            # Newest first: the months most likely to have new mail are stored soonest.
            children.append(JobSpec("archive.month", month.month, payload, priority=1))
    children.sort(key=lambda spec: spec.name, reverse=True)

    def write(tx: Tx) -> None:
        tx.execute_many("check_archive_month", confirmed)
        tx.execute_many("save_archive_index", saved)

    return Outcome(
        result={
            "months": len(listed),
            "fetch": len(children),
            "confirmed": len(confirmed),
            "complete": skipped,
            "total": total,
        },
        write=write,
        children=tuple(children),
        commit=JobSpec("archive.commit", "commit", {"total": total, "kind": kind}),
    )


for _kind in ("pipermail", "modmbox", "ponymail", "hyperkitty", "mbox"):
    register(f"{_kind}.run")(partial(_run, kind=_kind))


# --- the month job ---------------------------------------------------------------------


async def _fetch_month(
    ctx: JobContext,
    urls: Sequence[str],
    known: Known | None,
    grows: bool,
    max_bytes: int,
    *,
    empty_ok: bool = False,
) -> tuple[str, _Got, int | None]:
    """The month's file from the first of `urls` the archive has (a 404 moves on). For
    a month the archive now counts as empty, a 404 is its empty file."""
    for i, url in enumerate(urls):
        headers, start = request_headers(known, url, grows)
        got = await _get(ctx, url, headers, max_bytes)
        if got.status == 404 and i + 1 < len(urls):
            continue
        if got.status == 404 and empty_ok:
            return url, _Got(200, {}, b"", got.wire), None
        _check_status(url, got)
        return url, got, start
    raise PermanentError(f"no file for the month among {list(urls)}")


@register("archive.month")
async def _month(ctx: JobContext) -> Outcome:
    p = ctx.job.payload
    source, unit = ctx.job.source or "", str(p["month"])
    opts = p["options"]
    grace = float(opts.get("grace_days", DEFAULT_GRACE_DAYS))
    max_bytes = int(opts.get("max_bytes") or 2**30)
    row = await ctx.store.run(
        lambda tx: tx.one("get_archive_month", source=source, month=unit), False
    )
    known = Known.from_row(row) if row else None
    url, got, start = await _fetch_month(
        ctx, p["urls"], known, bool(p["grows"]), max_bytes, empty_ok=p.get("expected") == 0
    )
    wire = got.wire
    absorbed = absorb(
        known, got.status, got.headers, got.content, start, mboxrd=p["mboxrd"], max_size=max_bytes
    )
    events = list(absorbed.events)
    if absorbed.need_full:
        got = await _get(ctx, url, {}, max_bytes)
        _check_status(url, got)
        wire += got.wire
        absorbed = absorb(
            known,
            got.status,
            got.headers,
            got.content,
            None,
            mboxrd=p["mboxrd"],
            max_size=max_bytes,
        )
        events += absorbed.events
    now = ctx.clock.now()
    rows = await parse_rows(source, unit, absorbed.messages, now)
    expected = p.get("expected")
    closed = is_closed(unit, now, grace)
    # An archive whose count never matches its file (it counts differently) leaves the
    # month open here; the next run confirms it, count unchanged, without a request.
    matches = expected is None or expected == absorbed.counted
    if expected is not None and expected != absorbed.counted:
        events.append(
            ("count_mismatch", f"the archive counts {expected}, its file holds {absorbed.counted}")
        )
    complete = closed and matches
    stop_key = rows[-1]["key"] if rows else (known.stop_key if known else None)
    file_keys = {(r["key"], r["norm_sha256"]) for r in rows} if absorbed.full else None

    def write(tx: Tx) -> None:
        if rows:
            after = _one(tx, "last_message_id")
            tx.execute_many("insert_message", rows)
            tx.execute("index_new_messages", after=after)
            for month in sorted({r["month"] for r in rows}):
                tx.execute("flag_conflicts", source=source, month=month)
        if unit == ALL:
            keys_query, scope = "source_message_keys", {"source": source}
            stored = _one(tx, "count_source_messages", source=source)
        else:
            keys_query, scope = "month_message_keys", {"source": source, "month": unit}
            stored = _one(tx, "count_month_messages", source=source, month=unit)
        missing = 0
        if file_keys is not None and known is not None and known.harvested:
            gone = sorted(
                {(r["key"], r["norm_sha256"]) for r in tx.all(keys_query, **scope)} - file_keys
            )
            missing = len(gone)
            if gone:
                shown = ", ".join(k for k, _ in gone[:_EVENTS_KEPT])
                events.append(
                    ("missing", f"{missing} stored messages no longer in the archive: {shown}")
                )
        tx.execute(
            "save_archive_month",
            source=source,
            month=unit,
            url=url,
            state="complete" if complete else "open",
            expected=expected,
            counted=absorbed.counted,
            stored=stored,
            missing=missing if file_keys is not None else (row["missing"] if row else 0),
            etag=absorbed.etag,
            last_modified=absorbed.last_modified,
            length=absorbed.length,
            stop_offset=absorbed.stop_offset,
            stop_key=stop_key,
            tail_sha256=absorbed.tail_sha256,
            bytes=wire,
            now=now,
            completed_at=now if complete else None,
        )
        for kind, detail in events:
            tx.execute(
                "insert_archive_event", source=source, month=unit, now=now, kind=kind, detail=detail
            )

    return Outcome(
        result={
            "month": unit,
            "status": got.status,
            "bytes": wire,
            "parsed": len(rows),
            "counted": absorbed.counted,
            "complete": complete,
            "events": [k for k, _ in events],
        },
        write=write,
    )


def _one(tx: Tx, query: str, **params: Any) -> int:
    row = tx.one(query, **params)
    return int(row["n"]) if row else 0


# --- the commit job --------------------------------------------------------------------


@register("archive.commit")
async def _commit(ctx: JobContext) -> Outcome:
    source = ctx.job.source or ""
    total = ctx.job.payload.get("total")
    now = ctx.clock.now()

    def summarize(tx: Tx) -> dict[str, Any]:
        summary = tx.one("archive_summary", source=source) or {}
        return {k: int(v) for k, v in summary.items()} | {
            "messages": _one(tx, "count_source_messages", source=source)
        }

    summary = await ctx.store.run(summarize, False)
    # HyperKitty gives one total: what the months held at their last harvest must add up
    # to it. Short of it, the run is incomplete; the next run walks the archive's listing
    # to find where the rest is.
    mismatch = total is not None and summary["counted"] != total
    shortfall = None if total is None else max(0, int(total) - summary["counted"])
    run_id = ctx.job.source_run_id

    def write(tx: Tx) -> None:
        if mismatch:
            tx.execute(
                "insert_archive_event",
                source=source,
                month=ALL,
                now=now,
                kind="total_mismatch",
                detail=json.dumps({"archive_total": total, "months_sum": summary["counted"]}),
            )
        if shortfall is not None and run_id is not None:
            tx.execute("set_run_shortfall", id=run_id, shortfall=shortfall)

    return Outcome(result=summary | {"total": total, "shortfall": shortfall}, write=write)
