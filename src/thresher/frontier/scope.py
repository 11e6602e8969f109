"""Scope: which discovered URLs belong to the crawl at all.

A crawl starts from seeds and follows links; without a scope it would follow them to the
whole web. A rule is one of:

- ``host``: the URL's host is one of the seeds' hosts (``www.example.com`` only);
- ``domain``: the URL's host is a seed's host or below it, with one leading ``www.``
  of the seed dropped (seed ``www.example.com`` admits ``example.com`` and
  ``lists.example.com``). This is not the registered domain: that needs the public
  suffix list, and a seed's host is what the user pointed at;
- ``prefix``: the canonical URL starts with a seed's canonical URL, cut after the last
  ``/`` of its path (seed ``http://x.org/list/index.html`` admits ``http://x.org/list/…``);
- anything else is a regular expression (``regex:`` in front forces one, as in
  ``regex:host``), searched (`re.search`) in the canonical URL.

``max_depth`` bounds the number of links followed from a seed (seeds are depth 0);
``None`` means no bound. Seeds and URLs are compared in canonical form, so
``HTTP://Example.COM:80/`` and ``http://example.com/`` are one.

What the scope rules is a `Hop.LINK`. A URL reached by another kind of hop is judged
otherwise: a page requisite (`Hop.EMBED`, Heritrix's "E" hop: an image, a stylesheet
…) is fetched wherever it is, in scope or not, at its page's depth, but only an embed
that is itself in scope has its links followed; a sitemap (`Hop.SITEMAP`) is fetched
to be read for the URLs it lists, which are links again, judged by the scope.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum

from thresher.frontier.canonical import canonicalize, host_of
from thresher.frontier.errors import InvalidScope, InvalidURL

__all__ = ["Hop", "Scope", "ScopeKind"]


class Hop(IntEnum):
    """How a URL was reached (stored with it, so as numbers)."""

    LINK = 0  # a link, a redirect or a seed: crawled if in scope
    EMBED = 1  # a page requisite: fetched in scope or not, never followed out of it
    SITEMAP = 2  # a sitemap (or a sitemap index), read for its URLs


class ScopeKind(StrEnum):
    HOST = "host"
    DOMAIN = "domain"
    PREFIX = "prefix"
    REGEX = "regex"


@dataclass(frozen=True)
class Scope:
    """A scope rule, ready to test URLs: `allows(url, depth)`."""

    kind: ScopeKind
    patterns: tuple[str, ...]
    max_depth: int | None = None
    _regex: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.kind is ScopeKind.REGEX:
            try:
                regex = re.compile("|".join(f"(?:{p})" for p in self.patterns))
            except re.error as exc:
                raise InvalidScope(f"scope {self.patterns!r} is not a valid regex: {exc}") from None
            object.__setattr__(self, "_regex", regex)

    @classmethod
    def from_rule(cls, rule: str, seeds: Iterable[str], max_depth: int | None = None) -> Scope:
        """The scope `rule` (``host``, ``domain``, ``prefix`` or a regex) around `seeds`."""
        if max_depth is not None and max_depth < 0:
            raise InvalidScope(f"max depth must be >= 0, not {max_depth}")
        try:
            kind = ScopeKind(rule)
        except ValueError:
            kind = ScopeKind.REGEX
        if kind is ScopeKind.REGEX:
            return cls(kind, (rule.removeprefix("regex:"),), max_depth)
        try:
            canon = [canonicalize(seed) for seed in seeds]
        except InvalidURL as exc:
            raise InvalidScope(f"bad seed for scope {rule!r}: {exc}") from None
        if not canon:
            raise InvalidScope(f"scope {rule!r} needs at least one seed")
        if kind is ScopeKind.HOST:
            patterns = {host_of(u) for u in canon}
        elif kind is ScopeKind.DOMAIN:
            patterns = {host_of(u).removeprefix("www.") for u in canon}
        else:
            patterns = {u[: u.rindex("/") + 1] for u in canon}
        return cls(kind, tuple(sorted(patterns)), max_depth)

    def allows(self, url: str, depth: int = 0) -> bool:
        """Is `url`, found `depth` links from a seed, in scope? Invalid URLs are not."""
        if self.max_depth is not None and depth > self.max_depth:
            return False
        try:
            canon = canonicalize(url)
        except InvalidURL:
            return False
        return self.allows_canonical(canon, depth)

    def allows_canonical(self, canon: str, depth: int = 0) -> bool:
        """`allows` for a URL already in canonical form (the crawler's hot path)."""
        if self.max_depth is not None and depth > self.max_depth:
            return False
        if self._regex is not None:
            return self._regex.search(canon) is not None
        if self.kind is ScopeKind.PREFIX:
            return canon.startswith(self.patterns)
        host = host_of(canon)
        if self.kind is ScopeKind.HOST:
            return host in self.patterns
        return any(host == d or host.endswith("." + d) for d in self.patterns)
