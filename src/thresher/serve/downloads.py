"""Harvested bytes out: mbox of a month or a thread, raw messages, attachments, WARC
records and files, an archived page's payload as text.

Why none of it is ever rendered by the browser as a page: harvested content is the
outside world's HTML and script. Downloads go as `Content-Disposition: attachment`
with a binary type; what is shown inline (a raw message, a payload) goes as
`text/plain` with `X-Content-Type-Options: nosniff` and `Content-Security-Policy:
sandbox`, so even a browser that would guess HTML runs it in an opaque origin without
script.

Why an mbox is sent a batch at a time, each read in a transaction of its own: the
month's (or thread's) message ids are read first, then each batch (`BATCH` messages,
`BATCH_BYTES` at most, as export batches them) is read in a short read transaction,
written into a spool (in memory up to 8 MiB, on disk beyond) and sent. The first bytes
leave after one batch, not after the whole month; memory is bounded; and a slow client
never holds a transaction, or one of the server's few store connections, open while it
downloads. The bytes are `thresher export`'s: the same order and writer, messages cut
short in the index written whole from their files (a message deleted between two
batches is left out, as export leaves it out).
"""

from __future__ import annotations

import re
import tempfile
from functools import partial
from typing import IO, Any, BinaryIO, cast

from aiohttp import web

from ..archives import export
from ..sources.archives import ARCHIVE_TYPE_NAMES
from ..sources.ingest import ingest_warc_dir
from ..sources.web import warc_dir
from ..store import Tx
from . import archive_data, data, message_data, web_data
from .context import CSP_SANDBOX, Context
from .mail import attachment
from .warcread import RecordError, read_record

__all__ = ["add_download_routes", "month_mbox", "thread_mbox"]

_SPOOL = 8 * 2**20
_CHUNK = 1 << 16
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def _filename(name: str) -> str:
    return _SAFE_NAME.sub("_", name).strip("._") or "download"


def _headers(filename: str | None = None) -> dict[str, str]:
    headers = {"Content-Security-Policy": CSP_SANDBOX, "X-Content-Type-Options": "nosniff"}
    if filename is not None:
        headers["Content-Disposition"] = f'attachment; filename="{_filename(filename)}"'
    return headers


async def _send_mbox(
    ctx: Context, request: web.Request, batches: list[list[int]], filename: str
) -> web.StreamResponse:
    """The messages of `batches` as mboxrd, streamed a batch (and a transaction) at a
    time; a message cut short in the index is written whole from its file, as export
    writes it. Each batch is written into a spool on the store thread (file reads and
    all), in memory up to 8 MiB and on disk beyond, then sent from it."""

    def write(batch: list[int], tx: Tx) -> IO[bytes]:
        spool = tempfile.SpooledTemporaryFile(_SPOOL)  # noqa: SIM115 (closed by the caller)
        try:
            export.write_mboxrd(export.messages_by_id(tx, batch), cast(BinaryIO, spool), ctx.home)
        except BaseException:
            spool.close()
            raise
        return spool

    resp = web.StreamResponse(headers={**_headers(filename), "Content-Type": "application/mbox"})
    await resp.prepare(request)
    for batch in batches:
        with await ctx.read(partial(write, batch)) as spool:
            spool.seek(0)
            while chunk := spool.read(_CHUNK):
                await resp.write(chunk)
    await resp.write_eof()
    return resp


async def month_mbox(
    ctx: Context, request: web.Request, name: str, month: str
) -> web.StreamResponse:
    """The month's messages as mboxrd, exactly as `thresher export --month` writes them."""

    def batches(tx: Tx) -> list[list[int]]:
        data.named_source(tx, name, ARCHIVE_TYPE_NAMES)
        archive_data.check_month(month)
        export.check_month(month)
        return list(export.message_batches(tx, name, month))

    return await _send_mbox(ctx, request, await ctx.read(batches), f"{name}-{month}.mbox")


async def thread_mbox(
    ctx: Context, request: web.Request, name: str, message: int
) -> web.StreamResponse:
    """The thread's messages as mboxrd, in reading order (the same writer as export)."""
    ids = await ctx.read(
        lambda tx: message_data.thread_ids(message_data.thread_page(tx, name, message))
    )
    batches = [ids[i : i + export.BATCH] for i in range(0, len(ids), export.BATCH)]
    return await _send_mbox(ctx, request, batches, f"{name}-thread-{message}.mbox")


def add_download_routes(app: web.Application, ctx: Context) -> None:
    async def raw_message(request: web.Request) -> web.Response:
        name, message = request.match_info["name"], data.number(request.match_info["id"])
        _m, raw = await ctx.read(lambda tx: message_data.message_json(tx, name, message))
        if request.query.get("download"):
            return web.Response(
                body=raw, headers={**_headers(f"{name}-{message}.eml"),
                                   "Content-Type": "message/rfc822"},
            )  # fmt: skip
        # Shown as text: 8-bit mail in another charset shows as replacement characters
        # rather than as a guess; the download is byte for byte.
        text = raw.decode("utf-8", "replace")
        return web.Response(
            text=text, content_type="text/plain", charset="utf-8", headers=_headers()
        )

    async def part(request: web.Request) -> web.Response:
        name, message = request.match_info["name"], data.number(request.match_info["id"])
        index = data.number(request.match_info["part"])
        _m, raw = await ctx.read(lambda tx: message_data.message_json(tx, name, message))
        found = attachment(raw, index)
        if found is None:
            raise data.NotFound(f"message {message} has no part {index}")
        filename, payload = found
        return web.Response(
            body=payload,
            headers={**_headers(filename or f"{name}-{message}-part{index}.bin"),
                     "Content-Type": "application/octet-stream"},
        )  # fmt: skip

    async def record(request: web.Request) -> web.Response:
        name, key = request.match_info["name"], data.number(request.match_info["hash"])
        rec = await _record(ctx, name, key)
        filename = f"{name}-{key & 0xFFFFFFFFFFFFFFFF:016x}.warc" + (".gz" if rec.gzip else "")
        ctype = "application/gzip" if rec.gzip else "application/warc"
        return web.Response(body=rec.raw, headers={**_headers(filename), "Content-Type": ctype})

    async def payload(request: web.Request) -> web.Response:
        name, key = request.match_info["name"], data.number(request.match_info["hash"])
        rec = await _record(ctx, name, key)
        head = (
            f"WARC-Type: {rec.warc_type}\nWARC-Target-URI: {rec.target_uri}\n"
            f"WARC-Date: {rec.date}\nHTTP status: {rec.http_status}\n"
            f"Content-Type: {rec.content_type}\n"
        )
        if rec.refers_to:
            head += f"Revisit of: {rec.refers_to} (no payload in this record)\n"
        text = head + "\n" + rec.payload.decode("utf-8", "replace")
        return web.Response(
            text=text, content_type="text/plain", charset="utf-8", headers=_headers()
        )

    async def warc_file(request: web.Request) -> web.FileResponse:
        name, filename = request.match_info["name"], request.match_info["file"]
        # Only a file the folder lists, by that exact name: no path ever comes from the URL.
        listed = {f["name"] for f in web_data.warc_files(ctx.home, name)}
        if filename not in listed:
            raise data.NotFound(f"no WARC file {filename!r} in {name!r}")
        folder = ingest_warc_dir(ctx.home) if name == "ingest" else warc_dir(ctx.home, name)
        return web.FileResponse(
            folder / filename,
            headers={**_headers(filename), "Content-Type": "application/octet-stream"},
        )

    app.router.add_get("/lists/{name}/message/{id}/raw", raw_message)
    app.router.add_get("/lists/{name}/message/{id}/part/{part}", part)
    app.router.add_get("/crawls/{name}/capture/{hash}/record.warc.gz", record)
    app.router.add_get("/crawls/{name}/capture/{hash}/payload", payload)
    app.router.add_get("/crawls/{name}/warc/{file}", warc_file)


async def _record(ctx: Context, name: str, key: int) -> Any:
    row = await ctx.read(lambda tx: web_data.capture(tx, name, key))
    if not row["warc_file"] or row["warc_offset"] is None:
        raise data.NotFound(f"{row['url']} has no WARC record")
    path = warc_dir(ctx.home, name) / str(row["warc_file"])
    try:
        return read_record(path, int(row["warc_offset"]))
    except RecordError as exc:
        raise data.NotFound(str(exc)) from None
