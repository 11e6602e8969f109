"""Fetching for source handlers: the process's polite fetcher, redirects followed by hand.

Every source type fetches through `get_following`, so each hop of a redirect goes
through robots.txt, the host's turn and delay, and the private-address guard again.
"""

from __future__ import annotations

from ..errors import PermanentError
from ..fetch import Response
from ..frontier import InvalidURL, canonicalize
from ..jobs import JobContext

__all__ = ["MAX_REDIRECTS", "RETRY_STATUSES", "TooManyRedirects", "get_following"]

# Redirects followed in a row before a URL is recorded as a redirect loop.
MAX_REDIRECTS = 10

# Answers a later attempt may well not get: retried with backoff (Retry-After honoured).
RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


class TooManyRedirects(PermanentError):
    """A redirect back to a URL of the same chain, or more than MAX_REDIRECTS in a row."""

    def __init__(self, url: str, last: Response, loop_to: str | None = None) -> None:
        if loop_to is None:
            super().__init__(f"more than {MAX_REDIRECTS} redirects from {url}")
        else:
            super().__init__(f"redirect loop from {url}: back to {loop_to}")
        self.last = last


def _same(url: str) -> str:
    try:
        return canonicalize(url)
    except InvalidURL:
        return url


async def get_following(
    ctx: JobContext, url: str, headers: dict[str, str], max_body: int | None = None
) -> Response:
    """GET through the polite fetcher, following redirects (each hop is guarded and
    polite too); TooManyRedirects carries the last answer."""
    opts = ctx.job.payload.get("options") or ctx.job.payload
    fetcher = await ctx.fetcher(
        allow_private=bool(opts.get("allow_private", False)), delay=opts.get("delay")
    )
    target = url
    seen = {_same(url)}
    for _ in range(MAX_REDIRECTS + 1):
        resp = await fetcher.get(target, headers, max_body=max_body)
        if resp.location is None or resp.status == 304:
            return resp
        target = resp.location
        if _same(target) in seen:  # asking again would only go round once more
            raise TooManyRedirects(url, resp, loop_to=target)
        seen.add(_same(target))
    raise TooManyRedirects(url, resp)
