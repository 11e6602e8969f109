"""One HTTP exchange, as a value: what was sent, what came back, and how to read it.

A `Response` holds everything later stages need without going back to aiohttp: the
bytes as transferred (for WARC records and content hashes), the decoded content (for
parsing), the request head as sent (for WARC request records), the peer address (for
per-IP politeness) and timings. It is frozen: a response is a fact about the past.

Header values are decoded as ISO-8859-1, which maps every byte to one character and
back: nothing is lost, nothing fails to decode, and `http_head()` gives back the bytes
that were received. (HTTP header values are opaque bytes beyond ASCII; the one value we
interpret that often carries UTF-8, Location, is re-decoded as UTF-8 where that works.)
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from urllib.parse import urljoin

from ..weburl import join

__all__ = ["Response", "parse_retry_after"]


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from `now` for a Retry-After value (RFC 9110 §10.2.3): a number of
    seconds, or an HTTP-date. Never negative; None when absent or not understood."""
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        return None  # "-0000" or no zone: not an HTTP-date, whose zone is always GMT
    return max(0.0, when.timestamp() - now)


@dataclass(frozen=True, slots=True)
class Response:
    """One GET and its answer, body read in full."""

    url: str
    """The URL requested (no redirects are followed)."""
    status: int
    reason: str
    version: str
    """"1.1" or "1.0"."""
    headers: tuple[tuple[str, str], ...]
    """As received: in order, duplicates kept, names as the server spelled them."""
    body: bytes
    """The payload exactly as transferred (still content-encoded; chunking undone)."""
    content: bytes
    """The decoded payload; the same object as `body` when there is no Content-Encoding."""
    decode_error: str | None
    """Why the Content-Encoding could not be undone (then `content` is b"", or `body`
    for an unknown encoding); None when it could."""
    ip: str | None
    """The peer's IP address, as connected to."""
    request_head: bytes
    """The request as sent: request line, headers, CRLF CRLF."""
    started: float
    """time.time() when the request was sent."""
    elapsed: float
    """Seconds from sending the request to having the whole body."""
    truncated: bool = False
    """`body`, or `content` once decoded, is only the first bytes of a longer one: the
    request asked for no more (`Fetcher.get(truncate=…)`), and the rest was not read."""

    def header(self, name: str) -> str | None:
        """The first value of header `name` (any case), or None."""
        name = name.lower()
        for key, value in self.headers:
            if key.lower() == name:
                return value
        return None

    def header_all(self, name: str) -> list[str]:
        """Every value of header `name` (any case), in order."""
        name = name.lower()
        return [value for key, value in self.headers if key.lower() == name]

    def http_head(self) -> bytes:
        """The status line and headers as received, ending in CRLF CRLF, except that a
        `Transfer-Encoding` header is left out: `body` has the chunking already undone,
        and a WARC reader must not try to undo it again."""
        lines = [f"HTTP/{self.version} {self.status} {self.reason}".rstrip()]
        lines.extend(
            f"{key}: {value}" for key, value in self.headers if key.lower() != "transfer-encoding"
        )
        lines.append("\r\n")
        return "\r\n".join(lines).encode("latin-1")

    @property
    def location(self) -> str | None:
        """The redirect target of a 3xx answer with a Location header (else None),
        resolved against the URL asked for as a browser resolves it, without its
        fragment (`thresher.weburl.join`). A target the URL Standard fails is joined as
        written (`urljoin`), for the error its fetch will give to name it."""
        if not 300 <= self.status < 400:
            return None
        target = self.header("Location")
        if target is None:
            return None
        target = target.strip()
        if not target:
            return None
        with contextlib.suppress(UnicodeError):  # not UTF-8: keep the bytes as they came
            target = target.encode("latin-1").decode("utf-8")
        resolved = join(target, self.url)
        if resolved is not None:
            return resolved
        try:
            return urljoin(self.url, target)
        except ValueError:  # urljoin fails some too ("http://[::1/")
            return target

    @property
    def retry_after(self) -> float | None:
        """Seconds the server asked us to wait (Retry-After), counted from now."""
        return parse_retry_after(self.header("Retry-After"), time.time())
