"""The async HTTP fetch shell every crawl and archive fetch goes through.

`Fetcher.get(url)` sends one GET and returns a `Response` value, or raises one of the
`FetchError`s below and nothing else. It follows no redirects, refuses private addresses
unless allowed, caps the body on the wire and once decoded, and times out on silence.
The frontier decides what to fetch and when; this package only fetches.
"""

from __future__ import annotations

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
