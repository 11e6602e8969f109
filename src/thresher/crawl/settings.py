"""What one crawl is asked to do: seeds, scope, limits and manners, in one frozen object.

`thresher crawl` flags and the `web` source type's options both end up here, so the
engine reads its settings in one place. Defaults are polite (a second between fetches
to a host, one connection per host, private addresses refused); a benchmark or a test
turns them down explicitly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..config import Config
from ..errors import SourceError
from ..frontier import Politeness, Scope

__all__ = ["MAX_CONCURRENCY", "MAX_SHARDS", "CrawlSettings"]

MAX_SHARDS = 256
# Fetches in flight, in all: each may hold up to max_body bytes twice (wire, decoded).
MAX_CONCURRENCY = 1024
# The settings (`thresher.config`) a crawl shares with every other fetch, defaults
# included: one place says what they are.
_CONFIG = Config()


@dataclass(frozen=True)
class CrawlSettings:
    """One crawl's settings. Times in seconds, sizes in bytes; ``None`` means no limit."""

    seeds: tuple[str, ...]
    scope: str = "host"
    max_pages: int | None = None
    max_depth: int | None = None
    max_per_host: int | None = None
    delay: float = _CONFIG.delay
    concurrency: int = 16
    host_connections: int = 1
    user_agent: str = _CONFIG.user_agent
    allow_private: bool = False
    # Fetch what pages embed (images, stylesheets, scripts, fonts …), in scope or not,
    # and read the seed hosts' sitemaps (robots.txt Sitemap: lines and /sitemap.xml).
    requisites: bool = True
    sitemaps: bool = True
    timeout: float = _CONFIG.http_timeout
    # Silences a fetch allows (the settings of the same names), set from the config.
    stall_timeout: float = _CONFIG.stall_timeout
    read_timeout: float = _CONFIG.read_timeout
    max_body: int = 50 * 2**20
    max_links_per_page: int = _CONFIG.max_links_per_page
    warc_max_size: int = 1_000_000_000
    # How often finished pages and the WARC position are committed together: the work a
    # kill -9 can cost, against one fsync and one transaction per interval.
    # Pages are parsed and written to WARC in the crawling process (0) or in a child
    # process (1). Inline is the default: measured on 2 cores, the child's per-page
    # hand-over (pickling, the executor's queues) cost more than the parsing it took over.
    parse_processes: int = 0
    # Split the hosts over this many shard jobs, which workers run in parallel (each
    # shard its own process's core when `thresher worker` processes share the store).
    shards: int = 1
    commit_seconds: float = 1.0
    commit_pages: int = 1000

    def __post_init__(self) -> None:
        if not self.seeds:
            raise SourceError("a crawl needs at least one seed URL")
        for name in ("concurrency", "host_connections"):
            if not 1 <= getattr(self, name) <= MAX_CONCURRENCY:
                raise SourceError(f"{name} must be from 1 to {MAX_CONCURRENCY}")
        if self.max_links_per_page < 1:
            raise SourceError("max_links_per_page must be 1 or more")
        if not 1 <= self.shards <= MAX_SHARDS:
            raise SourceError(f"shards must be from 1 to {MAX_SHARDS}")
        if not 0 <= self.delay < math.inf:
            raise SourceError(f"the delay must be a finite number of seconds, not {self.delay}")
        for name in ("timeout", "stall_timeout", "read_timeout"):
            if not 0 < getattr(self, name) < math.inf:
                raise SourceError(f"{name} must be a positive number of seconds")
        self.make_scope()  # a bad regex is a usage error now, not in the middle of a crawl

    def make_scope(self) -> Scope:
        return Scope.from_rule(self.scope, self.seeds, self.max_depth)

    def politeness(self) -> Politeness:
        # Hosts on one IP address share half the per-host delay: several virtual hosts of
        # one server are not fetched all at once, yet a host is not slowed by its peers.
        return Politeness(
            delay=self.delay,
            ip_delay=self.delay / 2,
            max_in_flight=self.host_connections,
            max_per_host=self.max_per_host,
        )

    @classmethod
    def from_source(cls, url: str, options: Mapping[str, Any]) -> CrawlSettings:
        """Settings of a `web` source: its URL is the first seed, `seeds` adds more."""
        extra = tuple(str(options.get("seeds") or "").split())
        fields: dict[str, Any] = {
            k: v for k, v in options.items() if k in cls.__dataclass_fields__ and v is not None
        }
        fields.pop("seeds", None)
        return cls(seeds=(url, *extra), **fields)
