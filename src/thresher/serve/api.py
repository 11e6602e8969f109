"""The same data as the pages, as JSON under `/api/…`; live changes as Server-Sent
Events (`/api/events`); Prometheus metrics (`/metrics`).

The JSON of a page is what `data` returns for it, so the page and its JSON never
disagree; `/api/status` is `thresher status --json` and `/api/ingest` carries
`thresher ingest stats --json` under `stats`, field for field (see README.md and
docs/serve.md).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from aiohttp import web

from ..store import Tx
from . import archive_data, data, message_data, web_data
from .context import Context
from .metrics import CONTENT_TYPE, collect_metrics
from .pages import dashboard_data, ingest_data, int_param

__all__ = ["ENDPOINTS", "EVENT_POLL", "add_api_routes"]

# How often the event stream looks for changes, and sends a keep-alive comment.
EVENT_POLL = 2.0
_KEEPALIVE = 15.0

ENDPOINTS = (
    ("/api/status", "thresher status --json"),
    ("/api/lists/NAME", "a mail archive: months, grid, events, runs"),
    ("/api/lists/NAME/MONTH?page=N", "a month's threads"),
    ("/api/lists/NAME/thread/ID", "a thread"),
    ("/api/lists/NAME/message/ID", "a message: headers, text, attachments"),
    ("/api/search?q=Q&list=NAME&page=N", "full-text search (thresher search)"),
    ("/api/crawls/NAME?state=S&after=SEQ&hosts_after=HOST", "a crawl"),
    ("/api/ingest?status=S&after_type=T&after_url=U", "ingest stats --json and results"),
    ("/api/sources/NAME/runs?before=ID", "a source's runs"),
    ("/api/events", "Server-Sent Events: 'change' when runs, workers or crawls move"),
    ("/metrics", "Prometheus text format"),
)


def _json(value: Any) -> web.Response:
    return web.Response(
        text=json.dumps(value, indent=1, ensure_ascii=False),
        content_type="application/json",
        charset="utf-8",
    )


def add_api_routes(app: web.Application, ctx: Context) -> None:
    async def index(request: web.Request) -> web.Response:
        return _json({"endpoints": [{"path": p, "what": w} for p, w in ENDPOINTS]})

    async def status(request: web.Request) -> web.Response:
        return _json((await dashboard_data(ctx))["status"])

    async def list_json(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        before = int_param(request, "before") or None
        now = time.time()
        return _json(
            await ctx.read_cached(
                ("list", name, before), lambda tx: archive_data.list_page(tx, name, now, before)
            )
        )

    async def month_json(request: web.Request) -> web.Response:
        name, month = request.match_info["name"], request.match_info["month"]
        page = int_param(request, "page", 1)
        return _json(
            await ctx.read_cached(
                ("month", name, month, page),
                lambda tx: archive_data.month_page(tx, name, month, page),
            )
        )

    async def thread_json(request: web.Request) -> web.Response:
        name, message = request.match_info["name"], data.number(request.match_info["id"])
        return _json(await ctx.read(lambda tx: message_data.thread_page(tx, name, message)))

    async def message_json(request: web.Request) -> web.Response:
        name, message = request.match_info["name"], data.number(request.match_info["id"])
        found, _raw = await ctx.read(lambda tx: message_data.message_json(tx, name, message))
        return _json(found)

    async def search(request: web.Request) -> web.Response:
        query = request.query.get("q", "")
        source = request.query.get("list") or None
        page = int_param(request, "page", 1)
        backend = ctx.store_info["backend"]
        return _json(
            await ctx.read(lambda tx: message_data.search_page(tx, backend, query, source, page))
        )

    async def crawl(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        state = request.query.get("state", "done")
        after = int_param(request, "after")
        hosts_after = request.query.get("hosts_after", "")
        return _json(
            await ctx.read(
                lambda tx: web_data.crawl_page(tx, ctx.home, name, state, after, hosts_after)
            )
        )

    async def ingest(request: web.Request) -> web.Response:
        status_ = request.query.get("status") or None
        after = (request.query.get("after_type", ""), request.query.get("after_url", ""))
        return _json(await ingest_data(ctx, status_, after))

    async def runs(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        before = int_param(request, "before") or None

        def read(tx: Tx) -> list[Any]:
            data.named_source(tx, name)
            return data.source_runs(tx, name, before, limit=data.PAGE)

        return _json(await ctx.read(read))

    async def metrics(request: web.Request) -> web.Response:
        dashboard = await dashboard_data(ctx)
        text = await ctx.read_cached(("metrics",), lambda tx: collect_metrics(tx, dashboard))
        return web.Response(text=text, headers={"Content-Type": CONTENT_TYPE})

    async def events(request: web.Request) -> web.StreamResponse:
        """A `change` event whenever the store's fingerprint moves (new runs, outcomes,
        heartbeats, crawl progress, archive events); a comment now and then keeps
        proxies from closing the stream. EventSource reconnects by itself."""
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"}
        )
        await resp.prepare(request)
        last: dict[str, Any] | None = None
        quiet = 0.0
        try:
            await resp.write(b"retry: 3000\n\n")
            while True:
                now = await ctx.read(lambda tx: tx.one("serve_fingerprint") or {})
                if last is not None and now != last:
                    await resp.write(f"event: change\ndata: {json.dumps(now)}\n\n".encode())
                    quiet = 0.0
                elif quiet >= _KEEPALIVE:
                    await resp.write(b": keep-alive\n\n")
                    quiet = 0.0
                last = now
                await asyncio.sleep(EVENT_POLL)
                quiet += EVENT_POLL
        except ConnectionResetError:
            pass  # the page went away
        return resp

    app.router.add_get("/api", index)
    app.router.add_get("/api/status", status)
    app.router.add_get("/api/lists/{name}", list_json)
    app.router.add_get("/api/lists/{name}/thread/{id}", thread_json)
    app.router.add_get("/api/lists/{name}/message/{id}", message_json)
    app.router.add_get("/api/lists/{name}/{month}", month_json)
    app.router.add_get("/api/search", search)
    app.router.add_get("/api/crawls/{name}", crawl)
    app.router.add_get("/api/ingest", ingest)
    app.router.add_get("/api/sources/{name}/runs", runs)
    app.router.add_get("/api/events", events)
    app.router.add_get("/metrics", metrics)
