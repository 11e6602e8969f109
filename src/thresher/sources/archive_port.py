"""What a kind may ask of its job: `JobPort`, the `thresher.archives.kinds.Port` every
archive job hands its kind.

Kinds do no I/O of their own: every request goes through `JobPort`, that is through
the process's polite fetcher (robots.txt, one request at a time per host, the delay,
private addresses refused unless `allow_private`) or, for news servers, the process's
`NewsHosts` (one connection per host, the delay between batches of commands, the same
guard), and the store is written only by the port and the jobs (`archive_jobs`).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import urlsplit

from ..archives.kinds import Got, PageMissing
from ..archives.kinds.base import NewsReader
from ..archives.mbox import RawMessage
from ..errors import PermanentError, TransientError
from ..fetch import Response
from ..fetch.news import NewsHosts
from ..fetch.news_address import NewsSettings, news_url
from ..jobs import JobContext
from ..jobs.queue import hold
from ..redact import remember_secret
from ..store import Tx
from .archive_messages import parse_messages, store_rows
from .http import RETRY_STATUSES, get_following

__all__ = ["JobPort"]


def _got(url: str, resp: Response, wire: int) -> Got:
    """What the kind sees of `resp` (header names lowered, the first of each kept);
    TransientError for a status to try again later."""
    if resp.status in RETRY_STATUSES:
        raise TransientError(f"{url}: HTTP {resp.status}", resp.retry_after)
    lowered: dict[str, str] = {}
    for key, value in resp.headers:
        lowered.setdefault(key.lower(), value)
    return Got(resp.status, lowered, resp.content, wire, resp.retry_after, resp.url)


class JobPort:
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
        rows = await parse_messages(self.ctx, source, unit, list(messages), now)

        def write(tx: Tx) -> None:
            hold(tx, job, owner)
            row = tx.one("get_archive_month", source=source, month=unit)
            stored = store_rows(tx, source, unit, rows, int(row["stored"]) if row else 0)
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
