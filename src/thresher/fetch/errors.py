"""The fetch shell's errors: one tree, so a caller catches everything a fetch can do at once.

aiohttp, asyncio and the operating system each raise their own exceptions (and aiohttp's
overlap: a read timeout is a `ClientError`, an `OSError` and a `TimeoutError` at once).
`Fetcher.get` translates all of them at its boundary into these, as httpx does, so a
caller never imports aiohttp to handle a failed fetch.

Every class is a `FetchError`, and also either a `TransientError` (the job system retries
it with backoff) or a `PermanentError` (retrying cannot help: the URL itself is the
problem). Each message is one line that names the URL.
"""

from __future__ import annotations

from typing import Any

from thresher.errors import JobError, PermanentError, TransientError

__all__ = [
    "AddressRefused",
    "BadResponse",
    "ConnectionFailed",
    "DNSError",
    "FetchError",
    "FetchTimeout",
    "InvalidRequestURL",
    "TooLarge",
]

_MAX_REASON = 300


class FetchError(JobError):
    """Base of every error `Fetcher.get` and `Fetcher.resolve` raise."""

    kind = "fetch error"
    """The reason in a word or two, by which a crawl's summary counts its errors."""

    def __init__(self, url: str, reason: str) -> None:
        # aiohttp's parser errors span several lines (with a caret under the bad byte);
        # the CLI and the job table want one line.
        reason = " ".join(reason.split())
        if len(reason) > _MAX_REASON:
            reason = reason[: _MAX_REASON - 1] + "…"
        super().__init__(f"GET {url}: {reason}")
        self.url = url
        self.reason = reason

    def for_url(self, url: str) -> FetchError:
        """The same error about `url` (a lookup error is raised about a host first)."""
        return self if url == self.url else type(self)(url, self.reason)

    def __reduce__(self) -> tuple[Any, ...]:
        # The default rebuilds from self.args (the message), which __init__ does not take.
        return type(self), (self.url, self.reason)


class AddressRefused(FetchError, PermanentError):
    """The host is, or resolves only to, an address we must not contact (private,
    loopback, link-local, multicast, reserved, unspecified) and allow_private is off."""

    kind = "address refused"


class DNSError(FetchError, TransientError):
    """The host name did not resolve (no such name, no answer, resolver failure)."""

    kind = "DNS error"


class FetchTimeout(FetchError, TransientError):
    """Connecting, waiting for the next byte, or the whole exchange took too long."""

    kind = "timeout"


class ConnectionFailed(FetchError, TransientError):
    """The connection was refused, reset, or closed before an answer came (TLS failures
    included)."""

    kind = "connection failed"


class TooLarge(FetchError, PermanentError):
    """The body is larger than max_body on the wire, or than max_decoded once decoded."""

    kind = "too large"


class BadResponse(FetchError, TransientError):
    """The server's answer is not valid HTTP: a malformed status line or header, a bogus
    Content-Length, a body shorter than announced."""

    kind = "bad response"


class InvalidRequestURL(FetchError, PermanentError):
    """The URL (or a header sent with it) cannot be requested: not http(s), no host, a
    bad port, characters that cannot be encoded."""

    kind = "bad URL"
