"""What a news server's answers become: OVER's lines as `Overview`s, an article read up
to a size (`ArticleTooLarge` past it), and a failed command as the job system's error.
"""

from __future__ import annotations

import ssl
from typing import NamedTuple

from ..errors import PermanentError, TransientError
from .news_client import load_nntplib

__all__ = [
    "NO_ARTICLE",
    "ArticleSink",
    "ArticleTooLarge",
    "LineSink",
    "Overview",
    "command_error",
    "parse_overview",
]

# The "no such article" family: 423 (number), 430 (message-id), 420 (none current).
NO_ARTICLE = ("420", "423", "430")


class Overview(NamedTuple):
    """One line of OVER: the article's number and its Message-ID (None when empty)."""

    number: int
    message_id: str | None


class ArticleTooLarge(PermanentError):
    """An article larger than the source's max_bytes: skipped, and said so."""

    def __init__(self, number: int, size: int, limit: int) -> None:
        super().__init__(f"article {number} is over {limit} bytes ({size} read)")
        self.number = number


def command_error(where: str, what: str, exc: BaseException) -> Exception:
    """The job system's error for a failed command."""
    nntp = load_nntplib()
    text = str(exc).strip() or type(exc).__name__
    if isinstance(exc, nntp.NNTPTemporaryError):
        code = text[:3]
        if code == "411":
            return PermanentError(f"{where}: {what}: {text} (no such newsgroup)")
        if code == "480":
            return PermanentError(
                f"{where}: {what}: {text} (the server asks for a user name and password:"
                " -o user=… -o password=…)"
            )
        if code == "481":
            return PermanentError(f"{where}: {what}: {text} (the user name or password)")
        if code == "483":
            return PermanentError(f"{where}: {what}: {text} (use nntps://)")
        return TransientError(f"{where}: {what}: {text}")
    if isinstance(exc, nntp.NNTPPermanentError):
        return PermanentError(f"{where}: {what}: {text}")
    if isinstance(exc, TimeoutError):
        return TransientError(f"{where}: {what}: silent for the read timeout")
    if isinstance(exc, ssl.SSLCertVerificationError):
        return PermanentError(f"{where}: {what}: {exc.verify_message or text}")
    if isinstance(exc, EOFError):
        return TransientError(f"{where}: {what}: the server closed the connection")
    if isinstance(exc, OSError):
        return TransientError(f"{where}: {what}: {exc.strerror or text}")
    # A reply that is not NNTP, a reply code out of place: the server, or the path to
    # it, is confused; another attempt, on a new connection, may go better.
    return TransientError(f"{where}: {what}: {type(exc).__name__}: {text}")


class LineSink:
    """A file for nntplib to write an answer's lines to (OVER's, a few hundred bytes
    each)."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []

    def write(self, line: bytes) -> None:
        self.lines.append(line)


class ArticleSink:
    """A file for nntplib to write an article to, up to a size."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self.too_large = False
        self.parts: list[bytes] = []

    def write(self, line: bytes) -> None:
        self.size += len(line)
        if self.too_large:
            return
        if self.size > self.limit:
            self.too_large = True
            self.parts.clear()
            return
        if line.endswith(b"\r\n"):
            line = line[:-2] + b"\n"
        self.parts.append(line)


def parse_overview(lines: list[bytes]) -> list[Overview]:
    """OVER's lines: the number, then (RFC 3977 §8.4) Subject, From, Date, Message-ID,
    References, :bytes, :lines, in that order whatever else follows. A line without a
    number is skipped (a server's garbage cannot stop the harvest)."""
    found = []
    for line in lines:
        fields = line.rstrip(b"\r\n").split(b"\t")
        try:
            number = int(fields[0])
        except ValueError:
            continue
        message_id = fields[4].decode("utf-8", "replace").strip() if len(fields) > 4 else ""
        found.append(Overview(number, message_id or None))
    return found
