"""The jobs every archive kind shares.

A run is a tree of jobs (see docs/mail.md), the same for every kind:

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

`thresher.sources.archives.register_kind` registers each kind's root job (`root_job`, with
the kind) and adds the kind to `KINDS`, where a unit job finds it by name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..archives.harvest import Decision, decide
from ..archives.kinds import ArchiveKind
from ..archives.months import ALL, DEFAULT_GRACE_DAYS, is_closed, valid_month
from ..archives.units import Known, Unit
from ..jobs import JobContext, JobSpec, Outcome, register
from ..store import Tx
from .archive_messages import count_of, parse_messages, store_rows
from .archive_port import JobPort

__all__ = ["KINDS", "root_job"]

_EVENTS_KEPT = 20  # keys listed in one 'missing' event

# By name: a unit job's payload names its kind.
KINDS: dict[str, ArchiveKind] = {}


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


async def root_job(ctx: JobContext, kind: ArchiveKind) -> Outcome:
    source = ctx.job.source or ""
    opts = dict(ctx.job.payload["options"])
    grace = float(opts.get("grace_days", DEFAULT_GRACE_DAYS))
    rows = await ctx.store.run(lambda tx: tx.all("archive_months", source=source), False)
    known = {r["month"]: Known.from_row(r) for r in rows}
    now = ctx.clock.now()
    port = JobPort(ctx)
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


# --- the unit job ------------------------------------------------------------------------


@register("archive.month")
async def _unit(ctx: JobContext) -> Outcome:
    p = ctx.job.payload
    # A payload written before kinds were adapters names none: every kind then read a file.
    kind = KINDS[str(p.get("kind") or "mbox")]
    unit = Unit.from_payload(p)
    source, name = ctx.job.source or "", unit.month
    opts = p["options"]
    grace = float(opts.get("grace_days", DEFAULT_GRACE_DAYS))
    max_bytes = int(opts.get("max_bytes") or kind.max_bytes)
    row = await ctx.store.run(
        lambda tx: tx.one("get_archive_month", source=source, month=name), False
    )
    known = Known.from_row(row) if row else None
    port = JobPort(ctx)
    got = await kind.harvest(port, unit, known, max_bytes)
    events = list(got.events)
    now = ctx.clock.now()
    rows = await parse_messages(ctx, source, name, got.messages, now)
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
        stored = store_rows(tx, source, name, rows, previous)
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


# --- the commit job --------------------------------------------------------------------


@register("archive.commit")
async def _commit(ctx: JobContext) -> Outcome:
    source = ctx.job.source or ""
    total = ctx.job.payload.get("total")
    now = ctx.clock.now()

    def summarize(tx: Tx) -> dict[str, Any]:
        summary = tx.one("archive_summary", source=source) or {}
        return {k: int(v) for k, v in summary.items()} | {
            "messages": count_of(tx, "count_source_messages", source=source)
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
