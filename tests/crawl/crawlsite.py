"""A small web of loopback hosts to crawl, served from a thread so that crawls in this
process and `thresher crawl` subprocesses alike can use it.

Hosts are distinct loopback addresses (127.0.0.1, 127.0.0.2 …; all of 127/8 is
loopback on Linux) on one port, so per-host and per-IP politeness see several servers.
Every request is logged; pages carry ETags and answer 304 to a matching If-None-Match.
`listen` adds sockets bound elsewhere (say, in other network namespaces) to the same
server and log, each hit saying which way it came in.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import socket
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field

from aiohttp import web

__all__ = ["Hit", "Page", "SiteServer", "build_site"]


@dataclass
class Page:
    body: bytes = b""
    status: int = 200
    content_type: str = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)
    fail_first: int = 0  # answer this many requests 503 (Retry-After: 0) first
    links: tuple[str, ...] = ()  # absolute URLs this page links to (for the expected set)
    follow: bool = True
    hang: float = 0.0  # seconds to stall after the headers (a server that hangs)
    reset: bool = False  # drop the connection halfway through the body


@dataclass(frozen=True)
class Hit:
    url: str
    status: int
    headers: dict[str, str]
    at: float
    via: str = ""  # the label of the `listen` socket it came in through ("": `ips`)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class SiteServer:
    """Serves `pages` (absolute URL → Page) on `hosts` loopback addresses."""

    def __init__(self, hosts: int = 3) -> None:
        self.port = _free_port()
        self.ips = [f"127.0.0.{i + 1}" for i in range(hosts)]
        self.pages: dict[str, Page] = {}
        self.robots: dict[str, str] = {}  # ip -> robots.txt body (absent: 404)
        self.robots_status: dict[str, int] = {}  # ip -> what robots.txt answers instead
        self.hits: deque[Hit] = deque()
        self.latency = 0.0  # seconds each page answer waits (a slower server)
        self.in_flight = 0
        self.most_in_flight = 0  # requests answered at once, at most
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runners: list[web.AppRunner] = []
        self._extra: list[tuple[socket.socket, str]] = []

    def base(self, i: int) -> str:
        return f"http://{self.ips[i]}:{self.port}"

    def listen(self, sock: socket.socket, via: str) -> None:
        """Also serve on `sock`, a bound TCP socket (for instance one made in another
        network namespace, on one of `ips` and `port`); its hits carry `via`. Call
        before entering; the server closes the socket when it stops."""
        if self._thread.is_alive():
            raise RuntimeError("listen() before the server starts")
        self._extra.append((sock, via))

    def __enter__(self) -> SiteServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _start(self) -> None:
        vias = dict.fromkeys(["", *(via for _, via in self._extra)])
        runners = {via: await self._runner(via) for via in vias}
        for ip in self.ips:
            await web.TCPSite(runners[""], ip, self.port).start()
        for sock, via in self._extra:
            await web.SockSite(runners[via], sock).start()

    async def _runner(self, via: str) -> web.AppRunner:
        """An app whose hits are labelled `via`, so each shows which way it came in."""

        async def handle(request: web.Request) -> web.StreamResponse:
            return await self._handle(request, via)

        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        self._runners.append(runner)
        return runner

    async def _stop(self) -> None:
        for runner in self._runners:
            await runner.cleanup()

    async def _handle(self, request: web.Request, via: str = "") -> web.StreamResponse:
        # The request target exactly as it came on the request line: what was asked for.
        url = f"http://{request.host}{request.raw_path}"
        headers = {k.lower(): v for k, v in request.headers.items()}
        page = self.pages.get(url)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            status = await self._answer(request, url, via)
        finally:
            self.in_flight -= 1
        if page is None or not (page.hang or page.reset):
            self.hits.append(Hit(url, status.status, headers, time.monotonic(), via))
        return status

    async def _answer(self, request: web.Request, url: str, via: str) -> web.StreamResponse:
        if request.path == "/robots.txt":
            ip = request.host.split(":")[0]
            if ip in self.robots_status:
                return web.Response(status=self.robots_status[ip], headers={"Retry-After": "0"})
            if ip in self.robots:
                return web.Response(text=self.robots[ip], content_type="text/plain")
            return web.Response(status=404)
        page = self.pages.get(url)
        if self.latency:
            await asyncio.sleep(self.latency)
        if page is None:
            return web.Response(status=404, text="not here")
        if page.fail_first > 0:
            page.fail_first -= 1
            return web.Response(status=503, headers={"Retry-After": "0"})
        etag = '"' + hashlib.sha1(page.body).hexdigest()[:16] + '"'
        if 200 <= page.status < 300 and request.headers.get("If-None-Match") == etag:
            return web.Response(status=304, headers={"ETag": etag})
        headers = dict(page.headers)
        if 200 <= page.status < 300:
            headers["ETag"] = etag
        if page.hang or page.reset:
            # Logged now: the client gives up first, and aiohttp cancels this handler.
            asked = {k.lower(): v for k, v in request.headers.items()}
            hit = Hit(url, page.status, asked, 0.0, via)
            self.hits.append(hit)
            resp = web.StreamResponse(status=page.status, headers=headers)
            resp.content_length = len(page.body)
            await resp.prepare(request)
            await resp.write(page.body[: len(page.body) // 2])
            if page.hang:
                await asyncio.sleep(page.hang)
            if request.transport is not None:
                request.transport.abort()
            return resp
        return web.Response(
            status=page.status,
            body=page.body,
            headers={**headers, "Content-Type": page.content_type},
        )

    # -- what the tests look at -----------------------------------------------------------

    def hit_counts(self, *, include_robots: bool = False) -> Counter[str]:
        return Counter(
            h.url for h in self.hits if include_robots or not h.url.endswith("/robots.txt")
        )

    def reachable(self, seeds: list[str], *, sitemaps: bool = True) -> set[str]:
        """Every URL a crawler should fetch from `seeds` (following links, redirects and
        robots.txt), computed from the site's own model; with `sitemaps`, each seed
        host's /sitemap.xml too (the pages of the site model list none)."""
        seen, todo = set(seeds), list(seeds)
        if sitemaps:
            seen |= {"/".join(seed.split("/", 3)[:3]) + "/sitemap.xml" for seed in seeds}
        while todo:
            url = todo.pop()
            page = self.pages.get(url)
            if page is None or not page.follow:
                continue
            targets = list(page.links)
            if "Location" in page.headers:
                targets.append(page.headers["Location"])
            for link in targets:
                link = link.split("#", 1)[0]
                if not link.startswith("http"):
                    continue
                if link not in seen and not self._disallowed(link):
                    seen.add(link)
                    todo.append(link)
        return seen

    def _disallowed(self, url: str) -> bool:
        ip = url.split("//", 1)[1].split(":", 1)[0]
        body = self.robots.get(ip, "")
        path = "/" + url.split("//", 1)[1].split("/", 1)[1]
        return any(
            line.split(":", 1)[1].strip() and path.startswith(line.split(":", 1)[1].strip())
            for line in body.splitlines()
            if line.lower().startswith("disallow:")
        )


def _html(title: str, links: list[str], extra: str = "") -> bytes:
    anchors = "\n".join(f'<li><a href="{u}">{u.rsplit("/", 1)[-1]}</a></li>' for u in links)
    filler = " ".join(f"word{i}" for i in range(200))
    return (
        f"<!doctype html><html><head><title>{title}</title>{extra}</head>"
        f"<body><h1>{title}</h1><p>{filler}</p><ul>{anchors}</ul></body></html>"
    ).encode()


def build_site(site: SiteServer, pages_per_host: int = 20, seed: int = 7) -> list[str]:
    """Fill `site` with a linked web plus the awkward cases; returns the seeds."""
    rng = random.Random(seed)
    hosts = len(site.ips)
    urls = [[f"{site.base(h)}/p/{i}.html" for i in range(pages_per_host)] for h in range(hosts)]
    for h in range(hosts):
        site.robots[site.ips[h]] = "User-agent: *\nDisallow: /private/\n"
        for i, url in enumerate(urls[h]):
            links = [urls[h][(i + 1) % pages_per_host]]
            links += [rng.choice(urls[rng.randrange(hosts)]) for _ in range(4)]
            if i == 0:
                links.append(urls[(h + 1) % hosts][0])
            site.pages[url] = Page(body=_html(url, links), links=tuple(links))
    b = site.base(0)
    specials = [
        f"{b}/private/secret.html",
        f"{b}/redirect",
        f"{b}/loop-a",
        f"{b}/missing",
        f"{b}/dup-a.html",
        f"{b}/dup-b.html",
        f"{b}/flaky.html",
        f"{b}/nofollow.html",
        f"{b}/p/0.html#fragment",
        "mailto:someone@example.org",
        "javascript:void(0)",
    ]
    home = urls[0][0]
    site.pages[home].links += tuple(specials)
    site.pages[home].body = _html(home, list(site.pages[home].links))
    site.pages[f"{b}/private/secret.html"] = Page(body=_html("secret", []))
    site.pages[f"{b}/redirect"] = Page(status=302, headers={"Location": f"{b}/target.html"})
    site.pages[f"{b}/target.html"] = Page(body=_html("target", []))
    site.pages[f"{b}/loop-a"] = Page(status=301, headers={"Location": f"{b}/loop-b"})
    site.pages[f"{b}/loop-b"] = Page(status=301, headers={"Location": f"{b}/loop-a"})
    same = _html("the same", [])
    site.pages[f"{b}/dup-a.html"] = Page(body=same)
    site.pages[f"{b}/dup-b.html"] = Page(body=same)
    site.pages[f"{b}/flaky.html"] = Page(body=_html("flaky", []), fail_first=1)
    hidden = f"{b}/hidden.html"
    site.pages[f"{b}/nofollow.html"] = Page(
        body=_html("nofollow", [hidden], '<meta name="robots" content="noindex, nofollow">'),
        links=(hidden,),
        follow=False,
    )
    site.pages[hidden] = Page(body=_html("hidden", []))
    return [home]
