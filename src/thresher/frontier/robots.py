"""robots.txt, as decisions: may this URL be fetched now, and how slowly.

`RobotsCache` does no I/O. It is told what fetching a site's robots.txt gave
(`on_robots`) and answers `allowed(url, now)`: ``True``/``False``, or ``None`` when the
rules are not known (never fetched, or expired) and the caller must fetch `robots_url(url)`
first. Rules are kept per site, that is per (scheme, host, port), as RFC 9309 §2.3 asks,
and parsed by protego, which implements the RFC's matching (longest match wins, ``*`` and
``$`` patterns, allow wins a tie).

What a fetch outcome means (RFC 9309 §2.3.1):

- 2xx: the body (first 500 KiB, the RFC's minimum, decoded as UTF-8) is the rules;
- 3xx: the caller follows redirects itself, up to five (§2.3.1.2); a 3xx that reaches
  `on_robots` means it gave up, which the RFC lets us treat as "unavailable": allow all;
- 4xx ("unavailable"): no rules, allow all. Except 429 Too Many Requests: the RFC
  does not single it out, but it is the server asking us to go away for now, so, as
  Google does, we take it as "unreachable";
- 429, 5xx, or no answer (`status=None`: DNS failure, refused, timeout) ("unreachable"):
  disallow all for `unreachable_retry` seconds, then the rules are unknown again so the
  caller asks once more. The RFC allows assuming allow-all after 30 days unreachable; we
  do not (a site that is down for a month has nothing to crawl anyway).

Known rules expire after `ttl` seconds (RFC 9309 §2.4: "SHOULD NOT use a cached version
for more than 24 hours"), and are then unknown again.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from protego import Protego

from thresher.frontier.canonical import DEFAULT_PORTS, plain_site
from thresher.frontier.errors import InvalidURL

__all__ = ["MAX_ROBOTS_BYTES", "RobotsCache", "Site", "robots_url", "site_of"]

MAX_ROBOTS_BYTES = 500 * 1024

Site = tuple[str, str, int]
"""(scheme, host, port): the unit robots.txt applies to."""


def site_of(url: str) -> Site:
    """The (scheme, lowercase host, port) that `url`'s robots.txt covers."""
    m = plain_site(url)
    if m is not None:
        scheme, host, port = m.groups()
        if port is None:
            return scheme, host, DEFAULT_PORTS[scheme]
        if int(port) <= 65535:  # else urlsplit's error, below
            return scheme, host, int(port) or DEFAULT_PORTS[scheme]
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        raise InvalidURL(url, "robots.txt applies only to http(s) URLs with a host")
    return scheme, parts.hostname, parts.port or DEFAULT_PORTS[scheme]


def robots_url(url: str) -> str:
    """The robots.txt URL for `url`'s site."""
    scheme, host, port = site_of(url)
    if ":" in host:
        host = f"[{host}]"
    suffix = "" if port == DEFAULT_PORTS[scheme] else f":{port}"
    return f"{scheme}://{host}{suffix}/robots.txt"


@dataclass(frozen=True)
class _Rules:
    parser: Protego | None  # None: no rules (allow all or disallow all)
    allow_all: bool
    expires: float


class RobotsCache:
    """robots.txt rules per site, fed by fetch outcomes, expiring with time."""

    def __init__(
        self,
        user_agent: str = "thresher",
        *,
        ttl: float = 24 * 3600.0,
        unreachable_retry: float = 3600.0,
    ) -> None:
        self.user_agent = user_agent
        self.ttl = ttl
        self.unreachable_retry = unreachable_retry
        self._rules: dict[Site, _Rules] = {}

    def __len__(self) -> int:
        return len(self._rules)

    def on_robots(self, url: str, status: int | None, body: bytes | str | None, now: float) -> None:
        """Record what fetching robots.txt for `url`'s site gave (`status=None`: no answer)."""
        site = site_of(url)
        if status is not None and 200 <= status < 300:
            if isinstance(body, bytes):
                text = body[:MAX_ROBOTS_BYTES].decode("utf-8", errors="replace")
            else:
                text = (body or "")[:MAX_ROBOTS_BYTES]
            rules = _Rules(Protego.parse(text), allow_all=False, expires=now + self.ttl)
        elif status is not None and 300 <= status < 500 and status != 429:
            rules = _Rules(None, allow_all=True, expires=now + self.ttl)
        else:
            rules = _Rules(None, allow_all=False, expires=now + self.unreachable_retry)
        self._rules[site] = rules

    def _current(self, url: str, now: float) -> _Rules | None:
        site = site_of(url)
        rules = self._rules.get(site)
        if rules is not None and now >= rules.expires:
            del self._rules[site]
            return None
        return rules

    def allowed(self, url: str, now: float) -> bool | None:
        """May `url` be fetched? ``None``: the rules are not known, fetch robots.txt first."""
        rules = self._current(url, now)
        if rules is None:
            return None
        if rules.parser is None:
            return rules.allow_all
        return bool(rules.parser.can_fetch(url, self.user_agent))

    def crawl_delay(self, url: str, now: float) -> float | None:
        """The site's Crawl-delay for our user agent, if its rules are known and set one."""
        rules = self._current(url, now)
        if rules is None or rules.parser is None:
            return None
        delay = rules.parser.crawl_delay(self.user_agent)
        return None if delay is None else float(delay)

    def expires(self, url: str) -> float | None:
        """When the rules known for `url`'s site expire, or ``None`` if none are known."""
        rules = self._rules.get(site_of(url))
        return None if rules is None else rules.expires
