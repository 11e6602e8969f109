"""`thresher export NAME`: a list's stored messages as an mboxrd file or JSON lines.

Why a temporary file and a rename: an export is often read by another program (a mail
client, an indexer, a backup) that cannot tell a half-written mbox from a short one. With
``-o FILE`` the messages go to a new file beside FILE that replaces it only once complete
and flushed to disk; an export that fails for any reason leaves FILE as it was.
Standard output has no such guard, by nature.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

import click

from ..archives.export import FORMATS, check_month, export_messages
from ..errors import ThresherError, UsageError
from ..sources import get_source
from .app import App
from .commands import examples, summary

__all__ = ["OutputClosed", "atomic_output", "export_command", "write_output"]


class OutputClosed(ThresherError):
    """The program reading standard output stopped reading (``| head``)."""

    exit_code = 141  # 128 + SIGPIPE, what a shell reports for a writer killed by it


@contextmanager
def atomic_output(path: Path) -> Iterator[BinaryIO]:
    """A binary file that becomes `path` only when the block ends without an error."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        # 0o666 and O_EXCL: the umask applies as for any new file, and nothing is clobbered.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, OSError):
            raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
        raise


def write_output(
    output: Path | None, write: Callable[[BinaryIO], int], what: str
) -> tuple[int, str]:
    """Run `write` on `output` (None or "-": standard output): what it returned (a
    count), and where it went.

    A file is written whole or not at all (`atomic_output`). When the program reading
    standard output goes away (``| head``), say so in one line (`OutputClosed`, naming
    `what`) and keep Python from failing again when it flushes stdout at exit."""
    if output is not None and str(output) != "-":
        with atomic_output(output) as out:
            count = write(out)
        return count, str(output)
    # sys.stdout.buffer, not click.get_binary_stream: click 8.5 types the latter loosely.
    stdout = sys.stdout.buffer
    try:
        count = write(stdout)
        stdout.flush()
    except BrokenPipeError:
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        raise OutputClosed(f"standard output was closed before the {what} ended") from None
    return count, "standard output"


@click.command(
    "export",
    short_help=summary("export"),
    epilog=examples(
        "thresher export demo-ponymail -o demo.mbox",
        "thresher export demo-ponymail --month 2026-12 --format jsonl | head -1",
    ),
)
@click.argument("name")
@click.option(
    "--month",
    metavar="YYYY-MM",
    help="Only this month ('undated': a plain mbox's messages without a usable date).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="mbox",
    show_default=True,
    help="mbox: mboxrd, readable by mail clients; jsonl: one JSON object per message.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write to FILE (replaced only once complete) instead of standard output.",
)
@click.pass_obj
def export_command(app: App, name: str, month: str | None, fmt: str, output: Path | None) -> None:
    """Write the stored messages of list NAME, ordered by month and position in the
    archive, as mboxrd (the default) or JSON lines: one object per message with source,
    month, key, message_id, date, date_raw, date_flag, from_name, from_addr, subject,
    in_reply_to, references, conflict, sha256, parse_error, truncated, raw (the message
    as text, undecodable bytes as U+FFFD) and raw_base64 (its exact bytes). A message
    truncated in the index is written whole, from its file under HOME/messages/."""
    check_month(month)
    with app.store(read=True) as store, store.transaction(write=False) as tx:
        get_source(tx, name)
        count, where = write_output(
            output,
            lambda out: export_messages(tx, name, month, fmt, out, app.config.home),
            "export",
        )
    if app.verbose >= 0:
        scope = f" ({month})" if month else ""
        noun = "message" if count == 1 else "messages"
        click.echo(f"exported {count} {noun} of {name}{scope} to {where}", err=True)
