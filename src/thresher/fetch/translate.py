"""aiohttp's, asyncio's and the OS's exceptions as the `FetchError`s every caller handles.

`Fetcher` raises nothing else: whatever aiohttp, asyncio or the kernel raised while a URL
was fetched is mapped here, once, at the boundary (as httpx maps httpcore's), so that no
caller deals with aiohttp. An exception that is no failed fetch (a bug) is raised as it is.
"""

from __future__ import annotations

import aiohttp

from thresher.fetch.errors import (
    AddressRefused,
    BadResponse,
    ConnectionFailed,
    DNSError,
    FetchError,
    FetchTimeout,
    InvalidRequestURL,
)
from thresher.fetch.guard import GuardRefusal

__all__ = ["translate"]

# aiohttp reports a connection reset in the middle of a body only in the message of
# its ClientPayloadError (the underlying OSError is not attached).
_RESET_MARKERS = ("ConnectionResetError", "BrokenPipeError", "ConnectionAbortedError")


def translate(exc: Exception, url: str) -> FetchError:
    """The FetchError for whatever aiohttp, asyncio or the OS raised while fetching `url`.
    Order matters: aiohttp's classes inherit from several of these at once."""
    reason = str(exc) or type(exc).__name__
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return DNSError(url, f"cannot resolve host: {exc.os_error}")
    if isinstance(exc, TimeoutError):
        # aiohttp times only the connecting (`Deadlines` keep the rest); the kernel's
        # ETIMEDOUT is a TimeoutError too.
        if isinstance(exc, aiohttp.ConnectionTimeoutError):
            return FetchTimeout(url, "connecting timed out")
        return FetchTimeout(url, f"timed out: {reason}")
    if isinstance(exc, aiohttp.ClientConnectorError):
        refused = _guard_refusal(exc.os_error)
        if refused is not None:
            return AddressRefused(url, refused.strerror or str(refused))
        if isinstance(exc, aiohttp.ClientSSLError):
            return ConnectionFailed(url, f"TLS: {exc.os_error}")
        return ConnectionFailed(url, f"cannot connect: {exc.os_error}")
    if isinstance(exc, aiohttp.ClientPayloadError):
        if any(marker in reason for marker in _RESET_MARKERS):
            return ConnectionFailed(url, f"connection reset while reading the body: {reason}")
        return BadResponse(url, reason)
    if isinstance(exc, aiohttp.ClientResponseError):
        # Without raise_for_status this only comes from the response parser.
        return BadResponse(url, f"malformed response: {exc.message}")
    if isinstance(exc, aiohttp.InvalidURL):
        return InvalidRequestURL(url, f"invalid URL: {reason}")
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return ConnectionFailed(url, "server closed the connection without answering")
    if isinstance(exc, aiohttp.ClientConnectionError | OSError):
        return ConnectionFailed(url, f"connection failed: {reason}")
    if isinstance(exc, aiohttp.ClientError):
        return BadResponse(url, reason)
    if isinstance(exc, ValueError):
        # aiohttp refuses header values with CR/LF or that cannot be encoded.
        return InvalidRequestURL(url, f"invalid request: {reason}")
    raise exc  # a bug, not a failed fetch: let it be seen


def _guard_refusal(error: BaseException | None) -> GuardRefusal | None:
    while error is not None:
        if isinstance(error, GuardRefusal):
            return error
        error = error.__cause__ or error.__context__
    return None
