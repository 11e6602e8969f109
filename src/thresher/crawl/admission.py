"""Which URLs a crawl fetches, and when they may go to its workbench.

A link found on a page goes through scope and sieve, so that each URL is fetched once; a
page's requisites (what it embeds) are fetched too, in scope or not, and the seed hosts'
sitemaps read (`Hop`): they go through the sieve only; see docs/crawling.md. New hosts
wait behind their site's robots.txt, fetched once per site (by `fetches`, which hands the
answer back here).

In a shard's run only the hosts the shard owns are fetched here; the links to other
hosts go to their owners through the store (see `ledger`). A link to a host without an
owner waits for the next commit, which gives the host one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from ..clock import Clock
from ..frontier import (
    Fetch,
    Hop,
    InvalidURL,
    RobotsCache,
    Scope,
    Sieve,
    Workbench,
    host_of,
    key_of,
    robots_url,
    site_of,
    url_hash,
)
from ..parse.sitemaps import Sitemap
from ..weburl import resolve
from .ledger import Batch, CrawlLedger, Loaded, Pending, Shard, Unowned
from .settings import CrawlSettings

__all__ = ["RECENT_LINKS", "SITEMAP_LINK_DEPTH", "Admission"]

# Links remembered as already sent through scope and sieve (about 100 bytes each).
RECENT_LINKS = 50_000
# The pages a sitemap lists count as one link from a seed (so --max-depth 0 keeps to
# the seeds).
SITEMAP_LINK_DEPTH = 1

# A URL on its way to the workbench: (url, key, depth, hop).
_Entry = tuple[str, int, int, int]


def _site_key(url: str) -> str:
    scheme, host, port = site_of(url)
    return f"{scheme}://{host}:{port}"


class Admission:
    """Sends the URLs a crawl finds through scope, sieve and robots.txt to its workbench,
    recording each new one, or what became of it, in the batch the next commit writes.

    `fetch_robots(site, url)` starts fetching `site`'s robots.txt (for `url`), and says
    whether it did: not while the crawl is stopping."""

    def __init__(
        self,
        settings: CrawlSettings,
        *,
        ledger: CrawlLedger,
        batch: Batch,
        workbench: Workbench,
        robots: RobotsCache,
        clock: Clock,
        shard: Shard | None,
        fetch_robots: Callable[[str, str], bool],
    ) -> None:
        self.settings = settings
        self.ledger = ledger
        self.batch = batch
        self.workbench = workbench
        self.robots = robots
        self.clock = clock
        self.shard = shard
        self._fetch_robots = fetch_robots
        self.scope: Scope = settings.make_scope()
        self.sieve = Sieve()
        self._seq = 0
        # URLs waiting for their site's robots.txt
        self._waiting: dict[str, list[_Entry]] = defaultdict(list)
        self.robots_inflight: set[str] = set()  # sites whose robots.txt is being fetched
        self._refused: dict[str, str] = {}  # site -> why it may not be fetched at all
        self._recent: dict[str, int] = {}  # link -> least depth it was offered at
        self._recent_embeds: set[str] = set()  # requisites offered (scope is no matter)
        # A shard's run: each host's owner, and URLs of hosts that have none yet.
        self._owners: dict[str, int] = {}
        self.unowned: dict[str, list[_Entry]] = defaultdict(list)
        # Seeds are fetched as a browser reads them, like every link; the Sitemap: lines
        # of their sites' robots.txt files are read.
        self._seeds = [url for seed in settings.seeds if (url := resolve(seed)) is not None]
        self._seed_sites = {_site_key(seed) for seed in self._seeds}

    def restore(self, loaded: Loaded) -> None:
        """What the store remembers of the run: every URL it knows, the hosts' owners,
        the robots.txt answers."""
        self.sieve = loaded.sieve
        self._owners = loaded.owners
        self._seq = loaded.seq
        for r in loaded.robots:
            scheme, rest = str(r["site"]).split("://", 1)
            self.robots.on_robots(
                f"{scheme}://{rest}/robots.txt",
                r["status"],
                bytes(r["body"]) if r["body"] is not None else None,
                float(r["fetched_at"]),
            )

    def discover_seeds(self, now: float) -> None:
        """The seeds, and with sitemaps their hosts' /sitemap.xml and the Sitemap: lines
        of their robots.txt files."""
        self.discover(self._seeds, depth=0, now=now)
        if self.settings.sitemaps:
            # Each seed host's /sitemap.xml, and the Sitemap: lines of the robots.txt
            # files known already (a fresh robots.txt gives its own as it comes).
            guesses = [
                robots_url(seed).removesuffix("robots.txt") + "sitemap.xml" for seed in self._seeds
            ]
            self.discover(guesses, 0, now, Hop.SITEMAP)
            for seed in {_site_key(seed): seed for seed in self._seeds}.values():
                self.discover(self.robots.sitemaps(seed, now) or (), 0, now, Hop.SITEMAP)

    # -- scope and sieve ------------------------------------------------------------------

    def discover(
        self, links: list[str] | tuple[str, ...], depth: int, now: float, hop: Hop = Hop.LINK
    ) -> None:
        """Send links found `depth` hops from a seed through scope and sieve; requisites
        and sitemaps (`hop`) through the sieve only. Links are URLs as
        `thresher.weburl.resolve` gives them: each is fetched as it is, and keyed by the
        hash of its canonical form."""
        fresh: list[tuple[str, int]] = []
        if hop is not Hop.LINK:
            offered = self._recent_embeds
            if len(offered) > RECENT_LINKS:
                offered.clear()
            for link in links:
                if link in offered:
                    continue
                offered.add(link)
                try:
                    canon = key_of(link)
                except InvalidURL:
                    continue
                fresh.append((link, url_hash(canon)))
            self._offer(fresh, depth, now, hop)
            return
        # BUbiNG's URL cache: most links on a page were on the last pages too, and once a
        # link went through scope and sieve at some depth, the answer is the same for it
        # at that depth or deeper — so skip canonicalising it again.
        recent = self._recent
        if len(recent) > RECENT_LINKS:
            recent.clear()
        for link in links:
            seen_at = recent.get(link)
            if seen_at is not None and seen_at <= depth:
                continue
            recent[link] = depth
            try:
                canon = key_of(link)
            except InvalidURL:
                continue
            if self.scope.allows_canonical(canon, depth):
                fresh.append((link, url_hash(canon)))
        self._offer(fresh, depth, now, hop)

    def in_scope(self, fetch: Fetch) -> bool:
        """Whether a fetched URL is in the crawl's scope at its depth (by its key)."""
        try:
            return self.scope.allows_canonical(key_of(fetch.url), fetch.depth)
        except InvalidURL:
            return False

    def discover_listed(self, sitemap: Sitemap, now: float) -> None:
        """The pages a sitemap lists: links one hop from the seeds, if in scope, each with
        its lastmod kept (on a known URL too)."""
        fresh: list[tuple[str, int]] = []
        for link, lastmod in sitemap.urls:
            try:
                canon = key_of(link)
            except InvalidURL:
                continue
            if self.scope.allows_canonical(canon, SITEMAP_LINK_DEPTH):
                h = url_hash(canon)
                fresh.append((link, h))
                if lastmod is not None:
                    self.ledger.lastmod(self.batch, h, lastmod)
        self._offer(fresh, SITEMAP_LINK_DEPTH, now, Hop.LINK)

    def _offer(self, fresh: list[tuple[str, int]], depth: int, now: float, hop: Hop) -> None:
        """URLs to fetch and their keys through the sieve: the new ones are recorded, and
        fetched here or sent to their host's shard."""
        shard = self.shard
        for url, h in self.sieve.offer_hashed(fresh):
            self._seq += 1
            host = host_of(url)
            self.ledger.insert(self.batch, url, h, host, depth, self._seq, hop)
            if shard is None:
                self.admit(url, h, depth, now, hop)
                continue
            owner = self._owners.get(host)
            if owner is None:
                self.unowned[host].append((url, h, depth, hop))
            elif owner == shard.index:
                self.admit(url, h, depth, now, hop)
            else:
                self.ledger.send(self.batch, owner, url, h, depth, hop)

    # -- robots.txt and the workbench -----------------------------------------------------

    def admit(self, url: str, h: int, depth: int, now: float, hop: Hop = Hop.LINK) -> None:
        """A new URL to the workbench, if its site's robots.txt allows it (once known)."""
        if self._refused:
            refused = self._refused.get(_site_key(url))
            if refused is not None:
                self.batch.counts["errors"] += hop is not Hop.SITEMAP
                self.ledger.finish(self.batch, h, "error", now=now, error=refused)
                return
        allowed = self.robots.allowed(url, now)
        if allowed is None:
            self.wait_for_robots(url, h, depth, hop)
        elif not allowed:
            self.batch.counts["robots_excluded"] += 1
            error = self.robots.refusal(url, now)
            self.ledger.finish(self.batch, h, "robots", now=now, error=error)
        else:
            host = host_of(url)
            if self.workbench.host(host) is None:
                self.workbench.set_crawl_delay(host, self.robots.crawl_delay(url, now))
            if not self.workbench.add(url, depth, now, h, hop):
                self.ledger.finish(self.batch, h, "capped", now=now)

    def wait_for_robots(self, url: str, h: int, depth: int, hop: int) -> None:
        """`url` waits for its site's robots.txt, fetched once for all that wait."""
        site = _site_key(url)
        self._waiting[site].append((url, h, depth, hop))
        if site not in self.robots_inflight and self._fetch_robots(site, url):
            self.robots_inflight.add(site)

    def waiting_count(self) -> int:
        """How many URLs wait for their site's robots.txt."""
        return sum(len(w) for w in self._waiting.values())

    def refuse(self, site: str, error: str) -> None:
        """`site` may not be fetched at all (its robots.txt could not be, and no retry
        helps): its URLs, those waiting and those to come, are errors."""
        self._refused[site] = error
        self.robots_inflight.discard(site)
        for u, h, depth, hop in self._waiting.pop(site, []):
            self.admit(u, h, depth, self.clock.now(), Hop(hop))

    def on_robots(self, site: str, url: str, status: int | None, body: bytes, now: float) -> None:
        """What fetching `site`'s robots.txt (for `url`) gave: its rules, recorded; a seed
        site's Sitemap: lines are read."""
        self.robots.on_robots(url, status, body, now)
        self.ledger.robots(self.batch, site, status, body, now)
        if (
            self.settings.sitemaps
            and site in self._seed_sites
            and status is not None
            and 200 <= status < 300
        ):
            self.discover(self.robots.sitemaps(url, now) or (), 0, now, Hop.SITEMAP)

    def take_waiting(self, site: str, url: str, now: float) -> list[_Entry]:
        """The URLs that waited for `site`'s robots.txt, their hosts given its
        Crawl-delay; `admit_waiting` admits them."""
        delay = self.robots.crawl_delay(url, now)
        waiting = self._waiting.pop(site, [])
        for name in {host_of(u) for u, _, _, _ in waiting}:
            self.workbench.set_crawl_delay(name, delay)
        return waiting

    def admit_waiting(self, site: str, waiting: list[_Entry], now: float) -> None:
        """`site`'s robots.txt is done with: the URLs that waited for it go on."""
        self.robots_inflight.discard(site)
        for u, h, depth, hop in waiting:
            self.admit(u, h, depth, now, Hop(hop))

    # -- a shard's hosts ------------------------------------------------------------------

    def take_unowned(self) -> dict[str, list[_Entry]]:
        """The URLs of hosts without an owner, for a commit to give the hosts one."""
        unowned, self.unowned = self.unowned, defaultdict(list)
        return unowned

    def put_back_unowned(self, unowned: Unowned) -> None:
        """URLs `take_unowned` gave to a commit that failed: first for the next one."""
        for host, urls in unowned.items():
            self.unowned[host][:0] = urls

    def owned(self, unowned: Unowned, owners: dict[str, int], now: float) -> None:
        """Hosts given owners by a commit: this shard's URLs of its own are fetched (the
        commit sent the others on)."""
        assert self.shard is not None
        self._owners.update(owners)
        for host, urls in unowned.items():
            if owners[host] == self.shard.index:
                for url, h, depth, hop in urls:
                    self.admit(url, h, depth, now, Hop(hop))

    def receive(self, urls: list[Pending], now: float) -> None:
        """URLs another shard found on this shard's hosts (already in `crawl_urls`)."""
        assert self.shard is not None
        known = {p.hash: p for p in urls}
        for url, h in self.sieve.offer_hashed((p.url, p.hash) for p in urls):
            self._owners[host_of(url)] = self.shard.index
            self.admit(url, h, known[h].depth, now, Hop(known[h].hop))
