"""The async HTTP fetch shell every crawl and archive fetch goes through.

`Fetcher.get(url)` sends one GET and returns a `Response` value, or raises one of the
`FetchError`s below and nothing else. It follows no redirects, refuses private addresses
unless allowed, caps the body on the wire and once decoded, and times out on silence.
The frontier decides what to fetch and when; this package only fetches.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

# Loaded on first use: aiohttp alone costs a command 0.15 s or more at start, and
# modules below the fetcher (`fetch.decoding`, `fetch.errors`) are imported without it.
_WHERE = {
    "Fetcher": "client",
    "FetchSettings": "client",
    "request_url": "client",
    "DNSCache": "dns",
    "Lookup": "dns",
    "system_lookup": "dns",
    "AddressRefused": "errors",
    "BadResponse": "errors",
    "ConnectionFailed": "errors",
    "DNSError": "errors",
    "FetchError": "errors",
    "FetchTimeout": "errors",
    "InvalidRequestURL": "errors",
    "TooLarge": "errors",
    "refusal": "guard",
    "Response": "response",
    "parse_retry_after": "response",
}

if TYPE_CHECKING:
    from thresher.fetch.client import Fetcher, FetchSettings, request_url
    from thresher.fetch.dns import DNSCache, Lookup, system_lookup
    from thresher.fetch.errors import (
        AddressRefused,
        BadResponse,
        ConnectionFailed,
        DNSError,
        FetchError,
        FetchTimeout,
        InvalidRequestURL,
        TooLarge,
    )
    from thresher.fetch.guard import refusal
    from thresher.fetch.response import Response, parse_retry_after


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = [
    "AddressRefused",
    "BadResponse",
    "ConnectionFailed",
    "DNSCache",
    "DNSError",
    "FetchError",
    "FetchSettings",
    "FetchTimeout",
    "Fetcher",
    "InvalidRequestURL",
    "Lookup",
    "Response",
    "TooLarge",
    "parse_retry_after",
    "refusal",
    "request_url",
    "system_lookup",
]
