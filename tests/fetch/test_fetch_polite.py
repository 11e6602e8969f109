"""The polite fetcher that job handlers share: robots.txt once per site, one request at a
time per host spaced by the delay, Retry-After honoured — timed with a fake clock, against
a real loopback server."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from aiohttp import web
from fetch_servers import serve

from thresher.clock import FakeClock
from thresher.errors import HostBusy, Interrupted, TransientError
from thresher.fetch import AddressRefused, FetchSettings, InvalidRequestURL
from thresher.fetch.polite import PoliteFetcher, RobotsDisallowed
from thresher.frontier import Politeness

SETTINGS = FetchSettings(allow_private=True)


class Server:
    def __init__(self, robots: str | None = "User-agent: *\nDisallow: /private\n") -> None:
        self.robots = robots
        self.paths: list[str] = []
        self.busy = 0  # answer this many page requests 503 with Retry-After: 100

    async def handle(self, request: web.Request) -> web.Response:
        self.paths.append(request.path)
        if request.path == "/robots.txt":
            if self.robots is None:
                return web.Response(status=404)
            return web.Response(text=self.robots)
        if self.busy:
            self.busy -= 1
            return web.Response(status=503, headers={"Retry-After": "100"})
        return web.Response(text=f"page {request.path}")


def test_requests_to_a_host_are_spaced_by_the_delay() -> None:
    server, clock = Server(), FakeClock()

    async def body() -> list[float]:
        async with serve(server.handle) as base:
            polite = PoliteFetcher(SETTINGS, Politeness(delay=5.0), clock)
            async with polite:
                starts = []
                for i in range(3):
                    resp = await polite.get(f"{base}/p{i}")
                    assert resp.status == 200
                    starts.append(clock.now())
                return starts

    starts = asyncio.run(body())
    # robots.txt is a request too: each page waits 5 s after the request before it.
    assert [round(b - a, 6) for a, b in itertools.pairwise(starts)] == [5.0, 5.0]
    assert server.paths == ["/robots.txt", "/p0", "/p1", "/p2"]


def test_robots_txt_is_asked_once_for_concurrent_requests_and_obeyed() -> None:
    server = Server()

    async def body() -> None:
        polite = PoliteFetcher(SETTINGS, Politeness(delay=0.0), FakeClock())
        async with serve(server.handle) as base, polite:
            pages = await asyncio.gather(*(polite.get(f"{base}/p{i}") for i in range(5)))
            assert [p.status for p in pages] == [200] * 5
            with pytest.raises(RobotsDisallowed, match=r"robots\.txt"):
                await polite.get(f"{base}/private/x")

    asyncio.run(body())
    assert server.paths.count("/robots.txt") == 1
    assert "/private/x" not in server.paths


def test_a_long_retry_after_sends_the_job_back_instead_of_sleeping() -> None:
    server = Server(robots=None)
    server.busy = 1

    async def body() -> None:
        async with serve(server.handle) as base:
            clock = FakeClock()
            polite = PoliteFetcher(SETTINGS, Politeness(delay=0.0), clock, max_wait=30)
            async with polite:
                first = await polite.get(f"{base}/a")
                assert first.status == 503
                with pytest.raises(HostBusy) as caught:
                    await polite.get(f"{base}/b")
                # A host's turn to come, not a failure: the job waits for it, no attempt lost.
                assert isinstance(caught.value, TransientError)
                assert caught.value.retry_after == pytest.approx(100, abs=1)
                assert caught.value.until == pytest.approx(clock.now() + 100, abs=1)

    asyncio.run(body())
    assert "/b" not in server.paths


def test_a_wait_past_max_defer_is_a_plain_transient_error() -> None:
    server = Server(robots=None)
    server.busy = 1

    async def body() -> None:
        async with serve(server.handle) as base:
            polite = PoliteFetcher(
                SETTINGS, Politeness(delay=0.0), FakeClock(), max_wait=30, max_defer=60
            )
            async with polite:
                assert (await polite.get(f"{base}/a")).status == 503
                with pytest.raises(TransientError) as caught:
                    await polite.get(f"{base}/b")
                assert not isinstance(caught.value, HostBusy)

    asyncio.run(body())


def test_a_long_queue_for_one_host_sends_the_later_jobs_back() -> None:
    """Jobs queued behind others for one host would wait past max_wait in the queue:
    they go back to the job table instead of holding a worker's slots."""
    server = Server(robots=None)

    async def body() -> None:
        async with serve(server.handle) as base:
            polite = PoliteFetcher(SETTINGS, Politeness(delay=10.0), FakeClock(), max_wait=30)
            async with polite:
                got = await asyncio.gather(
                    *(polite.get(f"{base}/p{i}") for i in range(8)), return_exceptions=True
                )
        fetched = [g for g in got if not isinstance(g, BaseException)]
        busy = [g for g in got if isinstance(g, HostBusy)]
        # The first, and those whose turn comes within 30 s (10, 20, 30 s on).
        assert len(fetched) == 4 and len(busy) == 4
        assert sorted(round(b.retry_after or 0) for b in busy) == [40, 40, 40, 40]

    asyncio.run(body())


def test_urls_that_cannot_be_fetched_are_refused_before_any_request() -> None:
    async def body() -> None:
        async with PoliteFetcher(SETTINGS, Politeness(), FakeClock()) as polite:
            for url in ("ftp://127.0.0.1/x", "http:///nohost", "mailto:a@b"):
                with pytest.raises(InvalidRequestURL):
                    await polite.get(url)

    asyncio.run(body())


def test_robots_txt_redirecting_forever_counts_as_unavailable() -> None:
    """RFC 9309: past five redirects robots.txt is "unavailable", so all is allowed."""
    paths: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        paths.append(request.path)
        if request.path.startswith("/robots"):
            return web.Response(status=302, headers={"Location": f"/robots{len(paths)}.txt"})
        return web.Response(text="page")

    async def body() -> None:
        polite = PoliteFetcher(SETTINGS, Politeness(delay=0.0), FakeClock())
        async with serve(handle) as base, polite:
            assert (await polite.get(f"{base}/a")).status == 200

    asyncio.run(body())
    assert len([p for p in paths if p.startswith("/robots")]) == 6  # the first and 5 hops


@pytest.mark.parametrize(
    ("failing", "parked"),
    [(["/a", "/a", "/a", "/a"], False), (["/a", "/b", "/a", "/c"], True)],
    ids=["one-url-retried", "three-urls"],
)
def test_retries_of_one_failing_url_do_not_park_its_host(failing: list[str], parked: bool) -> None:
    """A host is parked after failures of three different URLs: a sign the host is in
    trouble. A job retrying the one URL that keeps failing (a listing page that stalls)
    is not, and must not keep every other job of the host waiting for minutes."""

    async def handle(request: web.Request) -> web.Response:
        if request.path == "/ok":
            return web.Response(text="fine")
        return web.Response(status=500, text="broken")

    async def body() -> None:
        async with serve(handle) as base:
            policy = Politeness(delay=0.0, park_after=3, park_base=300)
            polite = PoliteFetcher(SETTINGS, policy, FakeClock(), robots=False, max_wait=30)
            async with polite:
                for path in failing:
                    assert (await polite.get(base + path)).status == 500
                if parked:
                    with pytest.raises(HostBusy, match="parking"):
                        await polite.get(base + "/ok")
                else:
                    assert (await polite.get(base + "/ok")).status == 200

    asyncio.run(body())


def test_a_success_starts_the_count_of_failures_afresh() -> None:
    answers = iter([500, 500, 200, 500, 500, 200])

    async def handle(request: web.Request) -> web.Response:
        return web.Response(status=next(answers))

    async def body() -> None:
        async with serve(handle) as base:
            policy = Politeness(delay=0.0, park_after=3, park_base=300)
            polite = PoliteFetcher(SETTINGS, policy, FakeClock(), robots=False, max_wait=30)
            async with polite:
                got = [(await polite.get(f"{base}/p{i}")).status for i in range(6)]
        assert got == [500, 500, 200, 500, 500, 200]

    asyncio.run(body())


def test_once_stopping_no_get_starts_but_those_in_flight_end() -> None:
    """A Ctrl-C stops fetches from starting at once: a GET waiting for its host's turn,
    or asked for after, is handed back (Interrupted: no attempt counted) without a
    request; one already sent is answered."""
    server, clock, stopping = Server(), FakeClock(), asyncio.Event()
    sent = asyncio.Event()
    answer = asyncio.Event()

    async def handle(request: web.Request) -> web.Response:
        if request.path == "/slow":
            sent.set()
            await answer.wait()
        return await server.handle(request)

    async def body() -> None:
        polite = PoliteFetcher(SETTINGS, Politeness(delay=5.0), clock, stopping=stopping)
        async with serve(handle) as base, polite:
            assert (await polite.get(f"{base}/p0")).status == 200
            in_flight = asyncio.create_task(polite.get(f"{base}/slow"))
            await sent.wait()
            waiting = asyncio.create_task(polite.get(f"{base}/p1"))  # its turn is 5 s off
            await asyncio.sleep(0.05)
            stopping.set()
            answer.set()
            assert (await in_flight).status == 200
            with pytest.raises(Interrupted, match="p1: not started: stopping"):
                await waiting
            with pytest.raises(Interrupted, match="p2: not started: stopping"):
                await polite.get(f"{base}/p2")

    asyncio.run(body())
    assert server.paths == ["/robots.txt", "/p0", "/slow"]


def test_a_post_has_the_manners_of_a_get() -> None:
    """A git fetch's POST: robots.txt obeyed, its turn after the delay, private
    addresses refused unless allowed."""
    server, clock = Server(), FakeClock()

    async def body() -> list[float]:
        async with serve(server.handle) as base:
            polite = PoliteFetcher(SETTINGS, Politeness(delay=5.0), clock)
            async with polite:
                starts = []
                for path in ("/a.git/info/refs", "/a.git/git-upload-pack"):
                    if path.endswith("pack"):
                        resp = await polite.post(base + path, b"0009done\n")
                    else:
                        resp = await polite.get(base + path)
                    assert resp.status == 200
                    starts.append(clock.now())
                with pytest.raises(RobotsDisallowed):
                    await polite.post(base + "/private/git-upload-pack", b"")
            guarded = PoliteFetcher(FetchSettings(), Politeness(delay=0.0), clock)
            async with guarded:
                with pytest.raises(AddressRefused, match="allow_private"):
                    await guarded.post(base + "/a.git/git-upload-pack", b"")
                return starts

    starts = asyncio.run(body())
    assert starts[1] - starts[0] == 5.0
    assert server.paths == ["/robots.txt", "/a.git/info/refs", "/a.git/git-upload-pack"]
