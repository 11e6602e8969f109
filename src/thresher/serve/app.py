"""The aiohttp application of `thresher serve`: routes, access control, safe headers,
errors as pages, and the server's life from bind to a clean stop.

Why the headers are set as each response is prepared (on_response_prepare), not by the
middleware after the handler: every response gets them, errors, static files and the
streamed ones (an mbox, the event stream) included, which a streamed response has sent
before the middleware sees it; a route serving harvested bytes sets its own stricter
policy (sandbox), which is left alone.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from ..errors import StoreError, UsageError
from ..store.aio import AsyncStore
from . import data
from .api import add_api_routes
from .auth import COOKIE, Access
from .context import CSP_PAGE, Context
from .downloads import add_download_routes
from .pages import add_page_routes, warm

__all__ = ["make_app", "serve_forever"]

log = logging.getLogger("thresher.serve")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_STATIC_TYPES = {".css": "text/css", ".js": "text/javascript", ".svg": "image/svg+xml"}


def _static_files() -> dict[str, tuple[bytes, str]]:
    """The package's static files, read once (there are three)."""
    root = resources.files("thresher.serve").joinpath("static")
    out = {}
    for entry in root.iterdir():
        suffix = Path(entry.name).suffix
        if suffix in _STATIC_TYPES:
            out[entry.name] = (entry.read_bytes(), _STATIC_TYPES[suffix])
    return out


def _wants_json(request: web.Request) -> bool:
    return request.path.startswith("/api") or request.path == "/metrics"


def _error(ctx: Context, request: web.Request, status: int, message: str) -> web.Response:
    reason = web.Response(status=status).reason
    if _wants_json(request):
        resp = web.json_response({"error": message, "status": status}, status=status)
    else:
        resp = ctx.render("error.html", status=status, code=status, reason=reason, message=message)
    if status == 401:
        resp.headers["WWW-Authenticate"] = 'Bearer realm="thresher"'
    return resp


def _given_token(request: web.Request) -> tuple[str | None, bool]:
    """The token of a request, and whether it came in the query (to be moved to a cookie)."""
    auth = request.headers.get("Authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip(), False
    if "token" in request.query:
        return request.query["token"], True
    return request.cookies.get(COOKIE), False


def make_app(ctx: Context) -> web.Application:
    static = _static_files()

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        resp: web.StreamResponse
        if request.method not in ("GET", "HEAD"):
            resp = _error(ctx, request, 405, "this server only reads: no write actions")
        elif not ctx.access.host_ok(request.headers.get("Host")):
            resp = _error(ctx, request, 403, "this server answers to loopback names only")
        elif ctx.access.required and not ctx.access.token_ok(_given_token(request)[0]):
            resp = _error(ctx, request, 401, "a token is required: add ?token=… once")
        elif ctx.access.required and _given_token(request)[1]:
            # Keep the token in a cookie and drop it from the address bar and history.
            rest = {k: v for k, v in request.query.items() if k != "token"}
            resp = web.HTTPSeeOther(request.path + ("?" + urlencode(rest) if rest else ""))
            resp.set_cookie(
                COOKIE, request.query["token"], httponly=True, samesite="Strict", path="/"
            )
        else:
            try:
                resp = await handler(request)
            except data.NotFound as exc:
                resp = _error(ctx, request, 404, str(exc))
            except UsageError as exc:
                resp = _error(ctx, request, 400, str(exc))
            except StoreError as exc:
                resp = _error(ctx, request, 503, str(exc))
            except web.HTTPException as exc:
                failed = exc.status >= 400
                resp = _error(ctx, request, exc.status, exc.reason) if failed else exc
            except Exception:  # a bug: logged with its traceback, a page for the browser
                log.exception("%s %s", request.method, request.path_qs)
                resp = _error(ctx, request, 500, "internal error: see the server's log")
        return resp

    async def safe_headers(request: web.Request, resp: web.StreamResponse) -> None:
        resp.headers.setdefault("Content-Security-Policy", CSP_PAGE)
        resp.headers["X-Content-Type-Options"] = "nosniff"
        resp.headers["Referrer-Policy"] = "no-referrer"
        resp.headers["X-Frame-Options"] = "DENY"
        resp.headers.setdefault("Cache-Control", "no-store")

    app = web.Application(middlewares=[guard])
    app.on_response_prepare.append(safe_headers)

    async def static_file(request: web.Request) -> web.Response:
        found = static.get(request.match_info["file"])
        if found is None:
            raise data.NotFound(f"no static file {request.match_info['file']!r}")
        body, ctype = found
        return web.Response(
            body=body, headers={"Content-Type": ctype, "Cache-Control": "max-age=3600"}
        )

    async def favicon(request: web.Request) -> web.Response:
        body, ctype = static["favicon.svg"]
        return web.Response(body=body, headers={"Content-Type": ctype})

    app.router.add_get("/static/{file}", static_file)
    app.router.add_get("/favicon.ico", favicon)
    add_page_routes(app, ctx)
    add_download_routes(app, ctx)
    add_api_routes(app, ctx)
    return app


async def serve_forever(
    store_url: str,
    home: Path,
    lease_seconds: float,
    host: str,
    port: int,
    token: str | None,
    store_info: dict[str, Any],
    started: Callable[[str], None],
    connections: int = 2,
) -> None:
    """Serve until SIGINT or SIGTERM; `started` gets the URL once the socket is bound."""
    store = await AsyncStore(store_url, connections, readonly=True).open()
    runner: web.AppRunner | None = None
    warming: asyncio.Task[None] | None = None
    try:
        ctx = Context(store, home, lease_seconds, Access(token), store_info)
        # Compiled now rather than by each page's first request (10-35 ms a template).
        for template in ctx.env.list_templates():
            ctx.env.get_template(template)
        app = make_app(ctx)
        # A short shutdown: the only long requests are event streams, which a browser
        # reopens by itself.
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound = runner.addresses[0]
        shown = f"[{bound[0]}]" if ":" in str(bound[0]) else str(bound[0])
        started(f"http://{shown}:{bound[1]}/")
        warming = asyncio.create_task(warm(ctx))
        warming.add_done_callback(_warmed)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        log.info("stopping")
    finally:
        if warming is not None:
            warming.cancel()
        if runner is not None:
            await runner.cleanup()
        await store.close()


def _warmed(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        # Not fatal: the pages read the same data again when asked, and say what failed.
        log.warning("reading the dashboard and ingest counts at start failed: %s", task.exception())
