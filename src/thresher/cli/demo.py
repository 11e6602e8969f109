"""`thresher demo`: a small generated site on 127.0.0.1, harvested as source `demo`.

The first run fetches every page; a second run sends conditional GETs and downloads no
body at all. It exercises the whole path (source, run, jobs, fetch, store) on loopback.
"""

from __future__ import annotations

import asyncio
import hashlib
import sys
import time
from collections import Counter
from pathlib import Path

import click
from aiohttp import web
from rich.console import Console

from ..errors import SourceError, UsageError
from ..sources import add_source, get_source
from ..store import Tx
from .app import App, setup_logging
from .run import run_plan

__all__ = ["demo_command"]


def build_site(root: Path, pages: int) -> None:
    """Deterministic pages: the same every time, so the second run finds nothing new."""
    root.mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(pages):
        words = hashlib.sha256(str(i).encode()).hexdigest()
        body = f"<html><head><title>Page {i}</title></head><body><h1>Page {i}</h1>"
        body += f"<p>{words * 20}</p></body></html>\n"
        _write_if_changed(root / f"page-{i}.html", body)
        lines.append(f"page-{i}.html")
    _write_if_changed(root / "index.txt", "\n".join(lines) + "\n")


def _write_if_changed(path: Path, text: str) -> None:
    # Rewriting would move the file's mtime, and with it Last-Modified and the ETag.
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


async def _serve(root: Path, port: int, seen: Counter[int]) -> web.AppRunner:
    async def count(request: web.Request, response: web.StreamResponse) -> None:
        # Counted as sent: a static file's 304 is decided only while it is prepared.
        seen[response.status] += 1

    base = f"http://127.0.0.1:{port}"
    listing = (root / "index.txt").read_text().split()

    async def urls(request: web.Request) -> web.Response:
        return web.Response(text="\n".join(f"{base}/{name}" for name in listing) + "\n")

    application = web.Application()
    application.on_response_prepare.append(count)
    application.router.add_get("/urls.txt", urls)
    application.router.add_static("/", root)
    runner = web.AppRunner(application, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", port).start()
    except OSError as exc:
        await runner.cleanup()
        raise UsageError(
            f"cannot serve the demo on 127.0.0.1:{port} ({exc.strerror}): try --port"
        ) from None
    return runner


@click.command("demo")
@click.option(
    "--port", type=int, default=8765, show_default=True, help="Loopback port to serve on."
)
@click.option("--pages", type=int, default=500, show_default=True, help="Pages in the demo site.")
@click.pass_obj
def demo_command(app: App, port: int, pages: int) -> None:
    """Serve a generated site on 127.0.0.1 and harvest it as source 'demo'.

    Run it twice: the second run revalidates every page (HTTP 304) and downloads no body."""
    config = app.config
    root = config.home / "demo-site"
    build_site(root, pages)
    url = f"http://127.0.0.1:{port}/urls.txt"
    with app.store() as store, store.transaction() as tx:
        _ensure_source(tx, url)
    console = Console(stderr=True) if sys.stderr.isatty() else None
    setup_logging(app.verbose, console)
    seen: Counter[int] = Counter()

    async def main() -> None:
        runner = await _serve(root, port, seen)
        try:
            reports = await run_plan(config, ("demo",), None, console)
        finally:
            await runner.cleanup()
        for report in reports:
            for s in report.sources:
                click.echo(
                    f"{s.source}: {s.outcome} ({s.counts})" + (f"; {s.error}" if s.error else "")
                )

    started = time.time()
    asyncio.run(main())
    with app.store() as store, store.transaction(write=False) as tx:
        docs = tx.one("count_documents", source="demo")
    click.echo(
        f"server sent {seen[200]} bodies (200) and {seen[304]} not-modified answers (304);"
        f" {docs['n'] if docs else 0} documents stored in {config.home};"
        f" took {time.time() - started:.1f} s"
    )
    click.echo("next: 'thresher status', or run 'thresher demo' again")


# The demo site runs on loopback, which sources may not fetch unless they say so, and it
# is ours: no need to wait between requests.
DEMO_OPTIONS = {"allow_private": "true", "delay": "0"}


def _ensure_source(tx: Tx, url: str) -> None:
    try:
        source = get_source(tx, "demo")
    except UsageError:
        add_source(tx, "demo", url, "urls", DEMO_OPTIONS, time.time())
        return
    if source.url != url:
        raise SourceError(
            f"source 'demo' harvests {source.url}, not {url}: use the same --port,"
            " or 'thresher source remove demo'"
        )
