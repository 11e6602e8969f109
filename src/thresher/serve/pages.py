"""The HTML pages: each reads its data through `data` and renders one template.

Query parameters are read leniently (a bad page number is page 1), and names in paths
are looked up, never trusted: an unknown list, month or message is a 404 page.
"""

from __future__ import annotations

import time
from typing import Any

from aiohttp import web

from ..archives.export import UNDATED
from ..ingest.report import ingest_stats
from ..sources import list_sources
from ..sources.archives import ARCHIVE_TYPE_NAMES
from . import archive_data, data, message_data, web_data
from .charts import Bar, hbars, month_bars
from .context import Context

__all__ = [
    "MONTH_NAMES",
    "add_page_routes",
    "dashboard_data",
    "ingest_data",
    "int_param",
    "snippet_pieces",
    "warm",
]

MONTH_NAMES = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_JOB_CSS = {"failed": "bar-bad", "done": "bar-ok", "waiting": "bar-open"}


def int_param(request: web.Request, name: str, default: int = 0) -> int:
    try:
        return int(request.query.get(name, default))
    except ValueError:
        return default


def snippet_pieces(snippet: str, matches: list[list[int]]) -> list[tuple[str, bool]]:
    """The snippet cut into (text, is_match) pieces, for <mark> without markup in data."""
    pieces: list[tuple[str, bool]] = []
    at = 0
    for start, end in matches:
        if start < at:
            continue
        pieces.append((snippet[at:start], False))
        pieces.append((snippet[start:end], True))
        at = end
    pieces.append((snippet[at:], False))
    return [p for p in pieces if p[0]]


async def dashboard_data(ctx: Context) -> dict[str, Any]:
    """The dashboard's data (the status and what it adds), remembered per store state."""
    now = time.time()
    return await ctx.read_cached(
        ("dashboard",), lambda tx: data.dashboard(tx, now, ctx.lease_seconds, ctx.store_info)
    )


async def ingest_data(
    ctx: Context, status: str | None, after: tuple[str, str] = ("", "")
) -> dict[str, Any]:
    """The ingest page's data: its counts (`ingest stats`, which read every request and
    result) remembered per store state once for every page of results, the page read
    through its index each time."""
    stats = await ctx.read_cached(("ingest stats",), ingest_stats)
    return await ctx.read(lambda tx: web_data.ingest_page(tx, stats, status, after))


async def warm(ctx: Context) -> None:
    """Read the aggregates the first visitors would wait for (the dashboard, which the
    status, lists, crawls and metrics share, and the ingest counts), so that they wait
    for them only if they come within the first moments."""
    await dashboard_data(ctx)
    await ctx.read_cached(("ingest stats",), ingest_stats)


def add_page_routes(app: web.Application, ctx: Context) -> None:
    async def dashboard(request: web.Request) -> web.Response:
        d = await dashboard_data(ctx)
        jobs = [
            Bar(state, n, _JOB_CSS.get(state, "bar")) for state, n in d["status"]["jobs"].items()
        ]
        return ctx.render(
            "dashboard.html", "dashboard", d=d, jobs_chart=hbars(jobs, "Jobs by state")
        )

    async def lists(request: web.Request) -> web.Response:
        d = await dashboard_data(ctx)
        found = [s for s in d["status"]["sources"] if s["type"] in ARCHIVE_TYPE_NAMES]
        return ctx.render("lists.html", "lists", lists=found, extra=d["extra"])

    async def crawls(request: web.Request) -> web.Response:
        d = await dashboard_data(ctx)
        found = [s for s in d["status"]["sources"] if s["type"] == "web"]
        return ctx.render("crawls.html", "crawls", crawls=found, extra=d["extra"])

    async def list_page(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        before = int_param(request, "before") or None
        now = time.time()
        page = await ctx.read_cached(
            ("list", name, before), lambda tx: archive_data.list_page(tx, name, now, before)
        )
        bars = []
        for m in page["archive"]["months"]:
            short = max(0, (m["expected"] or 0) - m["stored"])
            tip = f"{m['month']}: {m['stored']} stored" + (f", {short} not stored" if short else "")
            bars.append(Bar(m["month"], m["stored"], "bar", short, title=tip))
        if len(bars) == 1 and page["filed"]:  # a plain mbox: its messages by month instead
            bars = [Bar(f["month"], f["messages"]) for f in page["filed"] if f["month"][:1] != "u"]
        events = page["events"]
        return ctx.render(
            "list.html",
            "lists",
            l=page,
            month_names=MONTH_NAMES,
            chart=month_bars(bars, f"Messages per month of {name}"),
            undated=[f for f in page["filed"] if f["month"] == UNDATED],
            events_next=events[-1]["id"] if len(events) == data.PAGE else None,
        )

    async def month_page(request: web.Request) -> web.StreamResponse:
        name, month = request.match_info["name"], request.match_info["month"]
        if month.endswith(".mbox"):
            from .downloads import month_mbox

            return await month_mbox(ctx, request, name, month.removesuffix(".mbox"))
        page_no = int_param(request, "page", 1)
        page = await ctx.read_cached(
            ("month", name, month, page_no),
            lambda tx: archive_data.month_page(tx, name, month, page_no),
        )
        return ctx.render("month.html", "lists", p=page)

    async def thread_page(request: web.Request) -> web.StreamResponse:
        name, ident = request.match_info["name"], request.match_info["id"]
        if ident.endswith(".mbox"):
            from .downloads import thread_mbox

            return await thread_mbox(ctx, request, name, data.number(ident.removesuffix(".mbox")))
        message = data.number(ident)
        page = await ctx.read(lambda tx: message_data.thread_page(tx, name, message))
        return ctx.render("thread.html", "lists", t=page)

    async def message_page(request: web.Request) -> web.Response:
        name, message = request.match_info["name"], data.number(request.match_info["id"])
        m, _raw = await ctx.read(lambda tx: message_data.message_json(tx, name, message))
        return ctx.render("message.html", "lists", m=m, name=name)

    async def search(request: web.Request) -> web.Response:
        query = request.query.get("q", "").strip()
        source = request.query.get("list") or None
        page_no = int_param(request, "page", 1)
        backend = ctx.store_info["backend"]

        def read(tx: Any) -> tuple[dict[str, Any], list[str]]:
            names = [s.name for s in list_sources(tx) if s.type in ARCHIVE_TYPE_NAMES]
            if not query:
                return {"query": "", "list": source, "page": 1, "more": False, "hits": []}, names
            return message_data.search_page(tx, backend, query, source, page_no), names

        found, names = await ctx.read(read)
        for hit in found["hits"]:
            hit["pieces"] = snippet_pieces(hit["snippet"], hit["matches"])
        return ctx.render(
            "search.html", "", s=found, lists=names, per_page=data.PAGE, search_q=query
        )

    async def crawl_page(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        state = request.query.get("state", "done")
        after = int_param(request, "after")
        hosts_after = request.query.get("hosts_after", "")
        page = await ctx.read(
            lambda tx: web_data.crawl_page(tx, ctx.home, name, state, after, hosts_after)
        )
        return ctx.render("crawl.html", "crawls", c=page, states=web_data.CRAWL_STATES)

    async def ingest_page(request: web.Request) -> web.Response:
        status = request.query.get("status") or None
        after = (request.query.get("after_type", ""), request.query.get("after_url", ""))
        page = await ingest_data(ctx, status, after)
        bars = [
            Bar(k, v, "bar-ok" if k == "success" else "bar")
            for k, v in page["stats"]["by_status"].items()
        ]
        return ctx.render(
            "ingest.html", "ingest", i=page, status_chart=hbars(bars, "Ingest results by status")
        )

    async def source_page(request: web.Request) -> web.Response:
        name = request.match_info["name"]

        def read(tx: Any) -> tuple[Any, list[Any]]:
            return data.named_source(tx, name), data.source_runs(tx, name)

        source, runs = await ctx.read(read)
        return ctx.render("source.html", "", s=source, runs=runs)

    app.router.add_get("/", dashboard)
    app.router.add_get("/lists", lists)
    app.router.add_get("/lists/{name}", list_page)
    app.router.add_get("/lists/{name}/thread/{id}", thread_page)
    app.router.add_get("/lists/{name}/message/{id}", message_page)
    app.router.add_get("/lists/{name}/{month}", month_page)
    app.router.add_get("/search", search)
    app.router.add_get("/crawls", crawls)
    app.router.add_get("/crawls/{name}", crawl_page)
    app.router.add_get("/ingest", ingest_page)
    app.router.add_get("/sources/{name}", source_page)
