"""`thresher demo`: a mailing-list archive served on 127.0.0.1, harvested six ways.

The built-in archive (`thresher.archives.demo`) publishes one generated list, a year of
mail with the broken messages real archives hold, as Mailman 2 pipermail, Apache
mod_mbox, Pony Mail, HyperKitty, a plain mbox file and MHonArc. The demo adds a source
per kind (`demo-pipermail` …), runs them all with progress, and prints what each stored
and what the server had to send. Run it again: no month body (no message page) is
downloaded a second time.

The demo server is pure Python and speaks HTTP only: it cannot serve a public-inbox
archive, which is git repositories fetched with git's smart HTTP protocol from
public-inbox's own server (`public-inbox-httpd`, Debian's `public-inbox` package), nor a
newsgroup (NNTP, e.g. `public-inbox-nntpd`). So the demo harvests the kinds of
`DEMO_KINDS`, not every kind Thresher has (`thresher.archives.kinds.KINDS`), and says
why for the others (`NOT_SERVED`).
"""

from __future__ import annotations

import re
import sys
import time
from typing import TYPE_CHECKING

import click
from rich.console import Console

from .. import runtime
from ..archives.kinds import DEMO_KINDS, KINDS
from ..archives.months import month_of, months_from
from ..errors import SourceError, UsageError
from ..redact import redact_url
from ..sources import add_source, get_source
from ..store import Tx
from .app import App, setup_logging
from .commands import examples, summary
from .output import print_table
from .run import run_plan

if TYPE_CHECKING:
    from ..archives.demo import DemoArchive

__all__ = ["DEMO_KINDS", "DEMO_LIST", "NOT_SERVED", "SERVE_HINT", "demo_command"]

# Why the demo leaves out the kinds it does not serve (`ArchiveKind.demo`), as it prints.
NOT_SERVED = {
    "publicinbox": "git over smart HTTP, from public-inbox-httpd (Debian's public-inbox)",
    "nntp": "a news server (NNTP), such as public-inbox-nntpd",
}

DEMO_LIST = "demo@lists.example.org"
_MONTHS = 12
_PER_MONTH = 40

# What a request for a month's file looks like, per kind.
_MONTH_FILE = {
    "pipermail": re.compile(r"/pipermail/[^/]+/\d{4}-\w+\.txt"),
    "modmbox": re.compile(r"/mod_mbox/[^/]+/\d{6}\.mbox"),
    "ponymail": re.compile(r"/api/mbox\.lua"),
    "hyperkitty": re.compile(r"/export/"),
    "mbox": re.compile(r"/mbox/[^/]+\.mbox"),
    # MHonArc has no month file: a month's messages are its message pages.
    "mhonarc": re.compile(r"/mhonarc/[^/]+/\d{4}/\d\d/msg\d+\.html"),
}

# The demo's last line: where to look at what it harvested.
SERVE_HINT = "Browse it: run 'thresher serve', then open http://127.0.0.1:8800/ in a browser"

# The demo archive runs on loopback, which sources may not fetch unless they say so,
# and it is ours: no need to wait between requests.
DEMO_OPTIONS = {"allow_private": "true", "delay": "0"}


def demo_months(now: float) -> list[str]:
    """The last twelve months, the current one included: the archive grows with time."""
    current = month_of(now)
    year, month = divmod(int(current[:4]) * 12 + int(current[5:]) - _MONTHS, 12)
    return months_from(f"{year:04d}-{month + 1:02d}", now)


def build_archive(server: DemoArchive, now: float) -> None:
    """The same messages on every run (fixed seed), so a second run finds nothing new."""
    from ..archives.demo_hostile import hostile_messages
    from ..archives.demo_messages import generate_messages

    months = demo_months(now)
    mail = generate_messages(DEMO_LIST, months, _PER_MONTH, seed=2024)
    # The broken mail real archives hold, in a closed month.
    mail[months[-3]] += [h.raw for h in hostile_messages(DEMO_LIST, months[-3])]
    server.add_list(DEMO_LIST, months[0], mail)


@click.command(
    "demo",
    short_help=summary("demo"),
    epilog=examples("thresher demo", "thresher --home /tmp/demo demo --port 9000"),
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="Loopback port to serve on.",
)
@click.pass_obj
def demo_command(app: App, port: int) -> None:
    """Serve a mailing-list archive on 127.0.0.1 and harvest it as six kinds of archive.

    Run it twice: the second run downloads no month body, only the archive's indexes."""
    config = app.config
    console = Console(stderr=True) if sys.stderr.isatty() else None
    setup_logging(app.verbose, console)
    now = time.time()
    started = time.monotonic()
    # Imported here: the demo server brings aiohttp's web server and the message
    # generator, 35 ms that every other command would pay at start.
    from ..archives.demo import DemoArchive

    server = DemoArchive(port)
    build_archive(server, now)
    try:
        server.start()
    except OSError as exc:
        raise UsageError(
            f"cannot serve the demo on 127.0.0.1:{port} ({exc.strerror or exc}): try --port"
        ) from None
    try:
        with app.store() as store, store.transaction() as tx:
            names = [
                _ensure_source(tx, kind, server.url(kind, DEMO_LIST), now) for kind in DEMO_KINDS
            ]
        reports = runtime.run(run_plan(config, tuple(names), None, console))
    finally:
        server.stop()
    outcomes = {s.source: s for r in reports for s in r.sources}
    with app.store() as store, store.transaction(write=False) as tx:
        header = (
            "source", "outcome", "messages", "months", "complete", "requests", "month bodies", "KiB"
        )  # fmt: skip
        rows = []
        for kind, name in zip(DEMO_KINDS, names, strict=True):
            report = outcomes.get(name)
            stored = tx.one("count_source_messages", source=name)
            summary = tx.one("archive_summary", source=name) or {}
            requests = [r for r in server.requests if _belongs(kind, r.target)]
            bodies = [
                r for r in requests if _MONTH_FILE[kind].search(r.target) and r.status in (200, 206)
            ]
            rows.append((
                name,
                report.outcome if report else "?",
                str(stored["n"] if stored else 0),
                str(summary.get("months", 0)),
                str(summary.get("complete", 0)),
                str(len(requests)),
                str(len(bodies)),
                f"{sum(r.sent for r in requests) / 1024:.0f}",
            ))  # fmt: skip
    print_table(header, rows, width=120)
    interrupted = any(r.interrupted for r in reports)
    where = config.home if config.db is None else redact_url(config.store_url)
    took = time.monotonic() - started
    if interrupted:
        click.echo(
            f"interrupted: what was harvested is stored in {where}; resume with the same"
            " command ('thresher demo')"
        )
        return
    click.echo(
        f"stored in {where}; took {took:.1f} s. Next: run"
        " 'thresher demo' again (no month body is downloaded twice),"
        " 'thresher search release', 'thresher export demo-ponymail --format mbox',"
        " 'thresher status'"
    )
    left_out = "; ".join(f"{k}, {NOT_SERVED[k]}" for k in KINDS if k not in DEMO_KINDS)
    click.echo(f"Not in the demo, each needs its own server: {left_out}")
    click.echo(SERVE_HINT)
    if any(s.outcome != "ok" for s in outcomes.values()):
        raise SourceError("a demo source failed or is incomplete: see 'thresher status'")


def _belongs(kind: str, target: str) -> bool:
    if kind == "pipermail":
        return target.startswith("/pipermail/")
    if kind == "modmbox":
        return target.startswith("/mod_mbox/")
    if kind == "ponymail":
        return target.startswith(("/api/", "/list.html"))
    if kind == "hyperkitty":
        return target.startswith("/hyperkitty/")
    if kind == "mhonarc":
        return target.startswith("/mhonarc/")
    return target.startswith("/mbox/")


def _ensure_source(tx: Tx, kind: str, url: str, now: float) -> str:
    name = f"demo-{kind}"
    try:
        source = get_source(tx, name)
    except UsageError:
        add_source(tx, name, url, kind, DEMO_OPTIONS, now)
        return name
    if source.url != url:
        raise SourceError(
            f"source {name!r} harvests {source.url}, not {url}: use the same --port,"
            f" or 'thresher source remove {name}'"
        )
    return name
