"""The mail archive types — one per archive kind — and the jobs every kind shares.

Each kind of `thresher.archives.kinds.BUILTIN` becomes a source type here. A run is a
tree of jobs (see docs/mail.md), the same for every kind:

- the root job (`<type>.run`) asks the kind for the archive's units (`list_units`: its
  index, its counts) and compares each with what the store recorded: complete units
  are skipped, units whose count matches are confirmed without a request, and every
  other unit gets a unit job;
- a unit job (`archive.month`) asks the kind to read the unit from its stop sign on
  (`harvest`: conditionally, only its new tail, only its new pages), stores the new
  messages and, in the same transaction, the unit's new state: counts, validators, the
  stop sign, complete or open. A kind reading a big unit stores it in parts as it goes
  (`Port.checkpoint`), each part with the stop sign just past it;
- the commit job (`archive.commit`) runs after every unit job and records the totals.

Kinds do no I/O of their own: every request goes through `_JobPort`, that is through
the process's polite fetcher (robots.txt, one request at a time per host, the delay,
private addresses refused unless `allow_private`) or, for news servers, the process's
`NewsHosts` (one connection per host, the delay between batches of commands, the same
guard), and the store is written here only.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import urlsplit

from ..archives.harvest import Decision, decide
from ..archives.kinds import ARCHIVE_TYPE_NAMES, BUILTIN, ArchiveKind, Got, PageMissing
from ..archives.kinds.base import NewsReader
from ..archives.mbox import RawMessage
from ..archives.months import ALL, DEFAULT_GRACE_DAYS, is_closed, valid_month
from ..archives.rows import parse_rows, whole_message_path
from ..archives.units import Known, Unit, files_by_date
from ..errors import PermanentError, TransientError
from ..fetch import Response
from ..fetch.news import NewsHosts
from ..fetch.news_address import NewsSettings, news_url
from ..jobs import JobContext, JobSpec, Outcome, register
from ..jobs.queue import hold
from ..redact import remember_secret
from ..store import Tx
from ..store.cdxj import fsync_directory
from .http import RETRY_STATUSES, get_following
from .types import Option, SourceType, register_type

__all__ = ["ARCHIVE_TYPES", "ARCHIVE_TYPE_NAMES", "register_kind"]

_EVENTS_KEPT = 20  # keys listed in one 'missing' event

_COMMON = {
    "grace_days": Option(
        float, DEFAULT_GRACE_DAYS, "Days after a month ends before it can be complete."
    ),
    "allow_private": Option(bool, False, "Also fetch private, loopback and link-local addresses."),
    "delay": Option(float, None, "Seconds between requests to one host [config delay]."),
    "max_bytes": Option(
        int, 2**30, "Largest month file (publicinbox: git pack) fetched; larger is an error."
    ),
}


_KINDS: dict[str, ArchiveKind] = {}


def register_kind(kind: ArchiveKind) -> SourceType:
    """Make `kind` a source type, with its root job (`<name>.run`); the unit and the
    commit jobs are the same for every kind."""
    if kind.name in _KINDS:
        raise ValueError(f"two archive kinds named {kind.name!r}")
    _KINDS[kind.name] = kind
    ARCHIVE_TYPE_NAMES.add(kind.name)
    register(f"{kind.name}.run")(partial(_run, kind=kind))
    return register_type(
        SourceType(
            name=kind.name,
            root_kind=f"{kind.name}.run",
            doc=kind.doc,
            check_url=kind.check_url,
            detect=kind.detect,
            options={
                **_COMMON,
                "max_bytes": replace(_COMMON["max_bytes"], default=kind.max_bytes),
                **{
                    name: Option(o.kind, o.default, o.doc, o.secret)
                    for name, o in kind.options.items()
                },
            },
            check_options=kind.check_options,
        )
    )


# --- what a kind may ask of its job --------------------------------------------------------


def _got(url: str, resp: Response, wire: int) -> Got:
    """What the kind sees of `resp` (header names lowered, the first of each kept);
    TransientError for a status to try again later."""
    if resp.status in RETRY_STATUSES:
        raise TransientError(f"{url}: HTTP {resp.status}", resp.retry_after)
    lowered: dict[str, str] = {}
    for key, value in resp.headers:
        lowered.setdefault(key.lower(), value)
    return Got(resp.status, lowered, resp.content, wire, resp.retry_after, resp.url)


class _JobPort:
    """`thresher.archives.kinds.Port` for one job: fetches through the polite fetcher,
    reads the store, stores checkpoints; index pages fetched anew are kept in `saved`
    for the job to store with its outcome."""

    def __init__(self, ctx: JobContext) -> None:
        self.ctx = ctx
        self.source = ctx.job.source or ""
        self.saved: list[dict[str, Any]] = []

    @property
    def now(self) -> float:
        return self.ctx.clock.now()

    @property
    def max_message_bytes(self) -> int:
        return self.ctx.config.max_message_bytes

    async def get(
        self, url: str, headers: Mapping[str, str] | None = None, max_bytes: int | None = None
    ) -> Got:
        if urlsplit(url).scheme not in ("http", "https"):
            return _read_local(url, headers or {})  # never a status to try again
        resp = await get_following(self.ctx, url, dict(headers or {}), max_bytes)
        return _got(url, resp, len(resp.body))

    async def post(
        self,
        url: str,
        data: bytes,
        headers: Mapping[str, str] | None = None,
        max_bytes: int | None = None,
        into: BinaryIO | None = None,
    ) -> Got:
        opts = self.ctx.job.payload.get("options") or {}
        fetcher = await self.ctx.fetcher(
            allow_private=bool(opts.get("allow_private", False)), delay=opts.get("delay")
        )
        resp = await fetcher.post(url, data, headers, max_body=max_bytes, sink=into)
        return _got(url, resp, resp.streamed if into is not None else len(resp.body))

    def mirror_dir(self, name: str) -> Path:
        folder = self.ctx.config.home / "git" / self.source / name
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    async def listing(self, url: str) -> bytes:
        kept = await self.ctx.store.run(
            lambda tx: tx.one("get_archive_index", source=self.source, url=url), False
        )
        headers = {}
        if kept is not None:
            if kept["etag"]:
                headers["If-None-Match"] = kept["etag"]
            if kept["last_modified"]:
                headers["If-Modified-Since"] = kept["last_modified"]
        got = await self.get(url, headers)
        if got.status == 304 and kept is not None:
            return bytes(kept["body"])
        if got.status in (404, 410):
            raise PageMissing(f"{url}: HTTP {got.status}")
        got.check(url)
        if got.status != 200:
            raise PermanentError(f"{url}: HTTP {got.status}")
        etag, last_modified = got.headers.get("etag"), got.headers.get("last-modified")
        if etag or last_modified:
            self.saved.append(
                dict(
                    source=self.source,
                    url=url,
                    etag=etag,
                    last_modified=last_modified,
                    body=got.content,
                    now=self.now,
                )
            )
        return got.content

    async def stored_keys(self, keys: Sequence[str]) -> set[str]:
        source = self.source

        def read(tx: Tx) -> set[str]:
            found = tx.all("stored_keys_among", source=source, keys=json.dumps(list(keys)))
            return {r["key"] for r in found}

        return await self.ctx.store.run(read, False)

    async def checkpoint(
        self,
        unit: str,
        url: str,
        messages: Sequence[RawMessage],
        stop_offset: int,
        tail_sha256: str | None = None,
    ) -> None:
        source, job, owner = self.source, self.ctx.job, self.ctx.owner
        now = self.now
        rows = await _parse(self.ctx, source, unit, list(messages), now)

        def write(tx: Tx) -> None:
            hold(tx, job, owner)
            row = tx.one("get_archive_month", source=source, month=unit)
            stored = _store_rows(tx, source, unit, rows, int(row["stored"]) if row else 0)
            stop_key = rows[-1]["key"] if rows else (row["stop_key"] if row else None)
            tx.execute(
                "checkpoint_archive_month",
                source=source,
                month=unit,
                url=url,
                stored=stored,
                stop_offset=stop_offset,
                stop_key=stop_key,
                tail_sha256=tail_sha256,
                now=now,
            )

        await self.ctx.store.run(write)

    def news(self, url: str) -> AbstractAsyncContextManager[NewsReader]:
        return self._news(url)

    @asynccontextmanager
    async def _news(self, url: str) -> AsyncIterator[NewsReader]:
        address, _, _ = news_url(url)
        opts = self.ctx.job.payload.get("options") or {}
        config = self.ctx.config
        password = opts.get("password") or None
        if password:
            remember_secret(password)  # masked in every log line from now on
        settings = NewsSettings(
            connect_timeout=config.stall_timeout,
            read_timeout=config.read_timeout,
            command_timeout=config.http_timeout,
            delay=config.delay if opts.get("delay") is None else float(opts["delay"]),
            batch=int(opts.get("batch") or 100),
            allow_private=bool(opts.get("allow_private")),
            user=opts.get("user") or None,
            password=password,
            max_defer=config.defer_max,
        )
        ctx = self.ctx

        async def make() -> NewsHosts:
            return NewsHosts(ctx.clock, ctx.leases)

        hosts = await ctx.shared("nntp-hosts", make)
        async with hosts.session(address, settings) as session:
            yield session


def _read_local(path: str, headers: Mapping[str, str]) -> Got:
    """A local mbox file answered like a static web server would (validators, ranges)."""
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            etag = f'"{st.st_size:x}-{st.st_mtime_ns:x}"'
            meta = {"etag": etag}
            if headers.get("If-None-Match") == etag:
                return Got(304, meta, b"", 0)
            start = headers.get("Range", "")
            if start.startswith("bytes=") and start.endswith("-"):
                offset = int(start[6:-1])
                if offset >= st.st_size:
                    return Got(416, meta, b"", 0)
                f.seek(offset)
                data = f.read()
                meta["content-range"] = f"bytes {offset}-{offset + len(data) - 1}/{st.st_size}"
                return Got(206, meta, data, len(data))
            data = f.read()
    except FileNotFoundError:
        # Said as it is: "HTTP 404" sent people looking for a web server.
        raise PermanentError(f"{path}: no such file") from None
    except OSError as exc:
        raise PermanentError(f"{path}: {exc.strerror or exc}") from None
    return Got(200, meta, data, len(data))


async def _parse(
    ctx: JobContext, source: str, unit: str, messages: list[RawMessage], now: float
) -> list[dict[str, Any]]:
    """The rows of `messages`, each message longer than the `max_message_bytes` setting
    written whole to its file first (in a thread: it can be hundreds of megabytes) and
    stored in the index from its start (see `thresher.archives.rows`). Empties
    `messages` then, which lets go of the month file the wholes were views of."""
    home, cap = ctx.config.home, ctx.config.max_message_bytes
    if any(m.whole is not None or len(m.raw) > cap for m in messages):
        spilled = await asyncio.to_thread(_spill, home, messages, cap)
        messages.clear()
        messages = spilled
    return await parse_rows(source, unit, messages, now)


def _spill(home: Path, messages: Sequence[RawMessage], cap: int) -> list[RawMessage]:
    """`messages`, those longer than `cap` bytes cut to their first `cap` once their
    whole bytes are in HOME/messages/ (synced: the row that names the file is committed
    after it, so a crash can leave a file without its row, never a row without its
    file; the next run writes the same file again)."""
    kept: list[RawMessage] = []
    for m in messages:
        whole = m.whole if m.whole is not None else m.raw if len(m.raw) > cap else None
        if whole is None:
            kept.append(m)
            continue
        sha256 = hashlib.sha256(whole).hexdigest()
        path = home / whole_message_path(sha256)
        if not (path.exists() and path.stat().st_size == len(whole)):
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".part-{uuid.uuid4().hex}")
            try:
                with open(tmp, "xb") as out:
                    out.write(whole)
                    out.flush()
                    os.fsync(out.fileno())
                os.replace(tmp, path)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
            fsync_directory(path.parent)
        kept.append(RawMessage(m.offset, m.raw[:cap], m.envelope, None, len(whole), sha256))
    return kept


def _store_rows(
    tx: Tx, source: str, unit: str, rows: Sequence[Mapping[str, Any]], previous: int
) -> int:
    """Insert `rows` (a capture already stored adds nothing) and index them for search;
    the unit's stored messages after it. A month's are the messages filed under it, a
    plain mbox's every message of the source; a unit of another kind (a git epoch, a
    range of articles) files its messages by date, and counts what it added itself."""
    added = 0
    if files_by_date(unit) and unit != ALL and rows:
        pairs = sorted({(r["key"], r["norm_sha256"]) for r in rows})
        held = _one(tx, "count_pairs_among", source=source, pairs=json.dumps(pairs))
        added = len(pairs) - held
    if rows:
        after = _one(tx, "last_message_id")
        tx.execute_many("insert_message", rows)
        tx.execute("index_new_messages", after=after)
        for month in sorted({r["month"] for r in rows}):
            tx.execute("flag_conflicts", source=source, month=month)
    if unit == ALL:
        return _one(tx, "count_source_messages", source=source)
    if valid_month(unit):
        return _one(tx, "count_month_messages", source=source, month=unit)
    return previous + added


# --- the root job: what the archive lists, and what to do about each unit ---------------


def _vanished(listed: Sequence[Unit], known: Mapping[str, Known]) -> list[Unit]:
    """Units an archive that counts no longer lists, although mail was harvested there
    (Pony Mail leaves out months without mail): listed again with a count of zero, so
    the unit is checked and what it lost is recorded."""
    if not listed or listed[0].expected is None:
        return []
    model = listed[0]
    present = {m.month for m in listed}
    return [
        Unit(k.month, (k.url,), 0, grows=model.grows, mboxrd=model.mboxrd)
        for k in known.values()
        if k.month not in present and k.counted > 0
    ]


async def _run(ctx: JobContext, kind: ArchiveKind) -> Outcome:
    source = ctx.job.source or ""
    opts = dict(ctx.job.payload["options"])
    grace = float(opts.get("grace_days", DEFAULT_GRACE_DAYS))
    rows = await ctx.store.run(lambda tx: tx.all("archive_months", source=source), False)
    known = {r["month"]: Known.from_row(r) for r in rows}
    now = ctx.clock.now()
    port = _JobPort(ctx)
    found = await kind.list_units(port, ctx.job.payload["url"], known, grace)
    listed, total = found.units, found.total
    listed += _vanished(listed, known)
    children: list[JobSpec] = []
    confirmed: list[dict[str, Any]] = []
    skipped = 0
    for unit in listed:
        k = known.get(unit.month)
        if unit.month in found.changed:
            decision: Decision = "fetch"
        else:
            decision = decide(unit, k, unit.month in found.vouched)
        if decision == "skip":
            skipped += 1
        elif decision == "confirm":
            closed = is_closed(unit.month, now, grace)
            confirmed.append(
                dict(
                    source=source,
                    month=unit.month,
                    now=now,
                    expected=unit.expected if unit.expected is not None else (k and k.expected),
                    state="complete" if closed else "open",
                    completed_at=now if closed else None,
                )
            )
        else:
            payload = {**unit.payload(), "kind": kind.name, "options": opts}
            # Newest first: the units most likely to have new mail are stored soonest.
            children.append(JobSpec("archive.month", unit.month, payload, priority=1))
    children.sort(key=lambda spec: spec.name, reverse=True)

    def write(tx: Tx) -> None:
        tx.execute_many("check_archive_month", confirmed)
        tx.execute_many("save_archive_index", port.saved)

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
        commit=JobSpec("archive.commit", "commit", {"total": total, "kind": kind.name}),
    )


ARCHIVE_TYPES = tuple(register_kind(kind) for kind in BUILTIN)


# --- the unit job ------------------------------------------------------------------------


@register("archive.month")
async def _unit(ctx: JobContext) -> Outcome:
    p = ctx.job.payload
    # A payload written before kinds were adapters names none: every kind then read a file.
    kind = _KINDS[str(p.get("kind") or "mbox")]
    unit = Unit.from_payload(p)
    source, name = ctx.job.source or "", unit.month
    opts = p["options"]
    grace = float(opts.get("grace_days", DEFAULT_GRACE_DAYS))
    max_bytes = int(opts.get("max_bytes") or kind.max_bytes)
    row = await ctx.store.run(
        lambda tx: tx.one("get_archive_month", source=source, month=name), False
    )
    known = Known.from_row(row) if row else None
    port = _JobPort(ctx)
    got = await kind.harvest(port, unit, known, max_bytes)
    events = list(got.events)
    now = ctx.clock.now()
    rows = await _parse(ctx, source, name, got.messages, now)
    expected = got.expected if got.expected is not None else unit.expected
    closed = is_closed(name, now, grace) if got.closed is None else got.closed
    # An archive whose count never matches its file (it counts differently) leaves the
    # unit open here; the next run confirms it, count unchanged, without a request.
    matches = expected is None or expected == got.counted
    if expected is not None and expected != got.counted:
        events.append(
            ("count_mismatch", f"the archive counts {expected}, its file holds {got.counted}")
        )
    complete = closed and matches
    file_keys = {(r["key"], r["norm_sha256"]) for r in rows} if got.full else None

    def write(tx: Tx) -> None:
        # As the job's checkpoints, if any, left it.
        now_row = tx.one("get_archive_month", source=source, month=name)
        previous = int(now_row["stored"]) if now_row else 0
        stored = _store_rows(tx, source, name, rows, previous)
        stop_key = rows[-1]["key"] if rows else (now_row["stop_key"] if now_row else None)
        missing = int(now_row["missing"]) if now_row else 0
        gone: list[tuple[Any, str]] = []
        if file_keys is not None and known is not None and known.harvested:
            if name == ALL:
                in_store = tx.all("source_message_keys", source=source)
            else:
                in_store = tx.all("month_message_keys", source=source, month=name)
            gone = sorted({(r["key"], r["norm_sha256"]) for r in in_store} - file_keys)
            missing = len(gone)
        elif file_keys is not None:
            missing = 0
        elif got.positions is not None and (name == ALL or valid_month(name)):
            if name == ALL:
                in_store = tx.all("source_message_positions", source=source)
            else:
                in_store = tx.all("month_message_positions", source=source, month=name)
            gone = sorted(
                (r["key"], str(r["position"]))
                for r in in_store
                if int(r["position"]) not in got.positions
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
            month=name,
            url=got.url,
            state="complete" if complete else "open",
            expected=expected,
            counted=got.counted,
            stored=stored,
            missing=missing,
            etag=got.etag,
            last_modified=got.last_modified,
            length=got.length,
            stop_offset=got.stop_offset,
            stop_key=stop_key,
            tail_sha256=got.tail_sha256,
            bytes=got.wire,
            now=now,
            completed_at=now if complete else None,
        )
        for event, detail in events:
            tx.execute(
                "insert_archive_event",
                source=source,
                month=name,
                now=now,
                kind=event,
                detail=detail,
            )
        tx.execute_many("save_archive_index", port.saved)

    return Outcome(
        result={
            "month": name,
            "status": got.status,
            "bytes": got.wire,
            "parsed": len(rows),
            "counted": got.counted,
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
