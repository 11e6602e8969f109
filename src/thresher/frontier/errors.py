"""Errors of the crawl frontier.

Two kinds, because the frontier is fed from two places. A URL met while crawling that
cannot be fetched (not http(s), no host, a bad port) is a fact about that URL: retrying
will not help, so it is a `PermanentError` and the caller drops the URL. A scope rule the
user wrote that does not compile is the user's to fix, so it is a `UsageError` (exit 2).
Both share `FrontierError` so a caller can catch everything the frontier raises at once.
"""

from __future__ import annotations

from thresher.errors import PermanentError, ThresherError, UsageError

__all__ = ["FrontierError", "InvalidScope", "InvalidURL"]


class FrontierError(ThresherError):
    """Base of every error the frontier raises."""


class InvalidURL(FrontierError, PermanentError):
    """The URL cannot be crawled: not http(s), no host, or malformed."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"cannot crawl {url!r}: {reason}")
        self.url = url
        self.reason = reason


class InvalidScope(FrontierError, UsageError):
    """A scope rule cannot be used as written (unknown kind, bad regular expression)."""
