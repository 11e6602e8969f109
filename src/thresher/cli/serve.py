"""`thresher serve`: the dashboard and archive browser, over the store, read-only."""

from __future__ import annotations

import sys

import click

from .. import runtime
from ..errors import UsageError
from ..redact import redact_url as redact
from .app import App, setup_logging
from .commands import examples, summary

__all__ = ["serve_command"]


@click.command(
    "serve",
    short_help=summary("serve"),
    epilog=examples(
        "thresher serve",
        'thresher serve --host 0.0.0.0 --port 8800 --token "$(openssl rand -hex 16)"',
    ),
)
@click.option(
    "--host", default="127.0.0.1", show_default=True,
    help="Address to listen on. Anything but loopback requires a token.",
)  # fmt: skip
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8800, show_default=True,
    help="Port to listen on (0: any free port).",
)  # fmt: skip
@click.option(
    "--token", envvar="THRESHER_SERVE_TOKEN", metavar="T",
    help="Require this token (?token=T once, or 'Authorization: Bearer T')."
    " [env THRESHER_SERVE_TOKEN]",
)  # fmt: skip
@click.pass_obj
def serve_command(app: App, host: str, port: int, token: str | None) -> None:
    """Serve a web dashboard and archive browser of the store: sources, jobs and
    workers live, each list's months, the mail itself, crawls, ingest; the same as
    JSON under /api and Prometheus metrics at /metrics.

    It only reads (it can run beside 'thresher worker'), and binds to 127.0.0.1
    unless told otherwise; bound elsewhere it requires --token."""
    from ..serve.auth import is_loopback

    if not is_loopback(host) and not token:
        raise UsageError(
            f"--host {host} is reachable from other machines: give --token T"
            " (or THRESHER_SERVE_TOKEN) so that only you can look"
        )
    config = app.config
    setup_logging(app.verbose, None)
    # Imported here: aiohttp's server and Jinja2 cost every other command start-up time.
    from ..serve.app import serve_forever
    from ..store import open_store

    # Opened once here so that a missing or outdated store is a one-line error (exit 3)
    # before anything listens.
    store = open_store(config.store_url, readonly=True)
    try:
        info = {
            "backend": store.backend,
            "url": redact(store.url),
            "schema_version": store.schema_version(),
        }
    finally:
        store.close()

    def started(url: str) -> None:
        click.echo(f"serving {url} (read-only: {info['url']})")
        if token:
            click.echo(
                f"a token is required: open {url}?token=YOUR_TOKEN once,"
                " or send 'Authorization: Bearer YOUR_TOKEN'"
            )
        elif not is_loopback(host):
            click.echo("warning: listening beyond this machine", err=True)
        click.echo("stop with Ctrl-C")
        sys.stdout.flush()

    try:
        runtime.run(
            serve_forever(
                config.store_url,
                config.home,
                config.lease_seconds,
                host,
                port,
                token,
                info,
                started,
            )
        )
    except OSError as exc:
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
