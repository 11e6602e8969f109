"""robots.txt, as decisions: may this URL be fetched now, and how slowly.

`RobotsCache` does no I/O. It is told what fetching a site's robots.txt gave
(`on_robots`) and answers `allowed(url, now)`: ``True``/``False``, or ``None`` when the
rules are not known (never fetched, or expired) and the caller must fetch `robots_url(url)`
first. Rules are kept per site, that is per (scheme, host, port), as RFC 9309 §2.3 asks,
parsed by `thresher.frontier.robotstxt` and compiled once per site for the crawler's
product token (the first word of its User-Agent: ``thresher`` for Thresher's).

What a fetch outcome means (RFC 9309 §2.3.1):

- 2xx: the body is the rules (its first 500 KiB, `robots_body`: the caller fetches no
  more than that and stores no more);
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

from thresher.frontier.canonical import DEFAULT_PORTS, plain_site
from thresher.frontier.errors import InvalidURL
from thresher.frontier.robotstxt import (
    MAX_ROBOTS_BYTES,
    URL_PARTS,
    Rules,
    parse_robots,
    path_octets,
    product_token,
    robots_body,
)
from thresher.weburl import resolve

__all__ = [
    "MAX_ROBOTS_BYTES",
    "RobotsCache",
    "Site",
    "product_token",
    "robots_body",
    "robots_url",
    "site_of",
]

Site = tuple[str, str, int]
"""(scheme, host, port): the unit robots.txt applies to."""

# How many "scheme://authority" spellings are remembered with their site.
_SPELLINGS = 50_000


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


_ALLOW_ALL = Rules(())


@dataclass(frozen=True, slots=True)
class _Known:
    rules: Rules | None  # None: disallow all
    expires: float
    sitemaps: tuple[str, ...] = ()
    unreachable: str | None = None  # why rules are None: what fetching robots.txt gave


class _Slot:
    """One site's place in the cache, shared by every spelling of its scheme and
    authority, so that a decision costs one dict lookup to find the site's rules."""

    __slots__ = ("known", "site")

    def __init__(self, site: Site) -> None:
        self.site = site
        self.known: _Known | None = None


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
        self.token = product_token(user_agent)
        """The product token groups are chosen by (RFC 9309 §2.2.1)."""
        self.ttl = ttl
        self.unreachable_retry = unreachable_retry
        self._sites: dict[Site, _Slot] = {}
        self._spellings: dict[str, _Slot] = {}  # "scheme://authority" as written
        self._known = 0

    def __len__(self) -> int:
        """How many sites have known rules (expired ones included until next asked)."""
        return self._known

    def on_robots(self, url: str, status: int | None, body: bytes | str | None, now: float) -> None:
        """Record what fetching robots.txt for `url`'s site gave (`status=None`: no answer)."""
        slot = self._slot(url)[0]
        if status is not None and 200 <= status < 300:
            parsed = parse_robots(body or b"")
            robots = robots_url(url)
            # Resolved as links are (the URL Standard), to be fetched as they are: the
            # http(s) ones, each once.
            resolved = (resolve(s, robots) for s in parsed.sitemaps)
            sitemaps = tuple(dict.fromkeys(s for s in resolved if s is not None))
            known = _Known(parsed.rules_for(self.token), now + self.ttl, sitemaps)
        elif status is not None and 300 <= status < 500 and status != 429:
            known = _Known(_ALLOW_ALL, now + self.ttl)
        else:
            answer = "no answer" if status is None else f"HTTP {status}"
            reason = f"robots.txt unreachable ({answer}): the site waits until it answers"
            known = _Known(None, now + self.unreachable_retry, unreachable=reason)
        if slot.known is None:
            self._known += 1
        slot.known = known

    def _slot(self, url: str) -> tuple[_Slot, str | None]:
        """`url`'s site's slot, and its path and query (None: `url` is of no usual shape)."""
        m = URL_PARTS.match(url)
        if m is None:
            site = site_of(url)
            return self._sites.get(site) or self._sites.setdefault(site, _Slot(site)), None
        spelling = m.group(1)
        slot = self._spellings.get(spelling)
        if slot is None:
            site = site_of(url)
            slot = self._sites.get(site)
            if slot is None:
                slot = self._sites[site] = _Slot(site)
            if len(self._spellings) >= _SPELLINGS:
                self._spellings.clear()
            self._spellings[spelling] = slot
        return slot, m.group(2)

    def _current(self, slot: _Slot, now: float) -> _Known | None:
        known = slot.known
        if known is not None and now >= known.expires:
            slot.known = None
            self._known -= 1
            return None
        return known

    def allowed(self, url: str, now: float) -> bool | None:
        """May `url` be fetched? ``None``: the rules are not known, fetch robots.txt first.
        `url` is matched as it is fetched: its path and query, percent-escapes decoded."""
        # The hot path (every URL, twice), so `_slot` and `_current` are inlined.
        m = URL_PARTS.match(url)
        slot = self._spellings.get(m.group(1)) if m is not None else None
        if slot is None:
            slot = self._slot(url)[0]
        known = slot.known
        if known is None:
            return None
        if now >= known.expires:
            self._current(slot, now)  # forgets them
            return None
        rules = known.rules
        if rules is None:
            return False
        if rules.allows_all:
            return True
        if m is not None:
            return rules.allowed_path(path_octets(m.group(2)))
        parts = urlsplit(url)
        return rules.allowed_path(
            path_octets(parts.path + ("?" + parts.query if "?" in url else ""))
        )

    def refusal(self, url: str, now: float) -> str | None:
        """Why `url` is not allowed, when it is not for want of its site's robots.txt
        (429, 5xx, no answer): the reason a crawl records with the URL. None when its
        rules disallow it, allow it, or are not known."""
        known = self._current(self._slot(url)[0], now)
        return None if known is None else known.unreachable

    def crawl_delay(self, url: str, now: float) -> float | None:
        """The site's Crawl-delay for our user agent, if its rules are known and set one."""
        known = self._current(self._slot(url)[0], now)
        return None if known is None or known.rules is None else known.rules.crawl_delay

    def sitemaps(self, url: str, now: float) -> tuple[str, ...] | None:
        """The ``Sitemap:`` URLs of `url`'s site's robots.txt, absolute (resolved against
        the robots.txt URL by the URL Standard, as links are: `thresher.weburl`), http(s)
        ones only, each once, in file order; ``()`` when it names none or was not a 2xx;
        ``None`` when the rules are not known (fetch robots.txt first)."""
        known = self._current(self._slot(url)[0], now)
        return None if known is None else known.sitemaps

    def expires(self, url: str) -> float | None:
        """When the rules known for `url`'s site expire, or ``None`` if none are known."""
        known = self._slot(url)[0].known
        return None if known is None else known.expires
