"""Workbench and politeness: timing decisions, driven by a plain float `now`."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thresher.frontier import Fetch, Hop, Politeness, Workbench, canonicalize, url_hash

T0 = 1_000.0


def take(wb: Workbench, now: float) -> Fetch:
    decision = wb.next_fetch(now)
    assert isinstance(decision, Fetch), decision
    return decision


def test_empty_workbench_has_nothing() -> None:
    wb = Workbench()
    assert wb.next_fetch(T0) is None
    stats = wb.stats(T0)
    assert (stats.queued, stats.hosts, stats.parked, stats.in_flight) == (0, 0, 0, 0)


def test_fifo_per_host_and_delay_between_fetches() -> None:
    wb = Workbench(Politeness(delay=2.0))
    for path in ("a", "b", "c"):
        wb.add(f"http://example.com/{path}", 1, T0)
    first = take(wb, T0)
    assert (first.url, first.host, first.depth, first.attempt) == (
        "http://example.com/a",
        "example.com",
        1,
        1,
    )
    assert wb.next_fetch(T0) == math.inf  # only behind the fetch in flight
    wb.on_done(first, T0 + 0.5, 200)
    assert wb.next_fetch(T0 + 0.5) == T0 + 2.5  # delay counted from the end of the fetch
    assert wb.next_fetch(T0 + 2.4) == T0 + 2.5
    assert take(wb, T0 + 2.5).url == "http://example.com/b"


def test_a_url_is_fetched_as_given_and_keeps_its_key() -> None:
    """The URL to fetch and its key (the hash of its canonical form) travel together:
    handed out, tried again after a failure, put back unmade."""
    url = "http://example.com/list?sort=asc&page=2"
    key = url_hash(canonicalize(url))
    wb = Workbench(Politeness(delay=0.0, ip_delay=0.0))
    wb.add(url, 0, T0, key)
    wb.add("http://example.com/plain", 0, T0)  # a canonical URL is its own key
    first = take(wb, T0)
    assert (first.url, first.key) == (url, key) and key != url_hash(url)
    wb.on_done(first, T0, 503)
    later = T0 + 3600  # past the backoff
    again = take(wb, later)
    assert (again.url, again.key, again.attempt) == (url, key, 2)
    wb.on_cancel(again)
    again = take(wb, later)
    assert (again.url, again.key) == (url, key)
    wb.on_done(again, later, 200)
    plain = take(wb, later)
    assert plain.key == url_hash("http://example.com/plain")


def test_a_requisite_jumps_its_hosts_queue_with_its_key_and_hop() -> None:
    """An embed goes to the head of its host's queue, its fetch URL, key and hop kept
    together through a retry and a hand-back, as a link's are."""
    url = "http://example.com/img/a.png?z=1&a=2"
    key = url_hash(canonicalize(url))
    wb = Workbench(Politeness(delay=0.0, ip_delay=0.0))
    wb.add("http://example.com/next.html", 1, T0)
    wb.add(url, 0, T0, key, Hop.EMBED)
    wb.add("http://example.com/map.xml", 0, T0, hop=Hop.SITEMAP)  # a tail, like a link
    first = take(wb, T0)
    assert (first.url, first.key, first.hop, first.depth) == (url, key, Hop.EMBED, 0)
    wb.on_done(first, T0, 503)
    again = take(wb, T0 + 3600)
    assert (again.url, again.key, again.hop, again.attempt) == (url, key, Hop.EMBED, 2)
    wb.on_cancel(again)
    again = take(wb, T0 + 3600)
    assert (again.url, again.key, again.hop) == (url, key, Hop.EMBED)
    wb.on_done(again, T0 + 3600, 200)
    rest = take(wb, T0 + 3600)
    assert (rest.url, rest.hop) == ("http://example.com/next.html", Hop.LINK)
    wb.on_done(rest, T0 + 3600, 200)
    last = take(wb, T0 + 3600)
    assert (last.url, last.key, last.hop) == (
        "http://example.com/map.xml",
        url_hash("http://example.com/map.xml"),
        Hop.SITEMAP,
    )


def test_one_connection_per_host_by_default() -> None:
    wb = Workbench(Politeness(delay=0.0, ip_delay=0.0))
    wb.add("http://example.com/a", 0, T0)
    wb.add("http://example.com/b", 0, T0)
    wb.add("http://other.org/a", 0, T0)
    hosts = {take(wb, T0).host, take(wb, T0).host}
    assert hosts == {"example.com", "other.org"}
    assert wb.next_fetch(T0) == math.inf
    assert wb.stats(T0).in_flight == 2


def test_more_connections_when_allowed() -> None:
    wb = Workbench(Politeness(delay=0.0, max_in_flight=2))
    wb.add("http://example.com/a", 0, T0)
    wb.add("http://example.com/b", 0, T0)
    assert take(wb, T0).url == "http://example.com/a"
    assert take(wb, T0).url == "http://example.com/b"


def test_larger_crawl_delay_wins() -> None:
    wb = Workbench(Politeness(delay=1.0))
    wb.set_crawl_delay("example.com", 10.0)
    wb.add("http://example.com/a", 0, T0)
    wb.add("http://example.com/b", 0, T0)
    wb.on_done(take(wb, T0), T0, 200)
    assert wb.next_fetch(T0) == T0 + 10.0


def test_smaller_crawl_delay_does_not_speed_us_up() -> None:
    wb = Workbench(Politeness(delay=3.0))
    wb.set_crawl_delay("example.com", 0.5)
    wb.add("http://example.com/a", 0, T0)
    wb.add("http://example.com/b", 0, T0)
    wb.on_done(take(wb, T0), T0, 200)
    assert wb.next_fetch(T0) == T0 + 3.0


def test_hosts_on_one_ip_share_the_ip_delay() -> None:
    wb = Workbench(Politeness(delay=0.0, ip_delay=5.0))
    wb.on_resolved("a.example", "192.0.2.1")
    wb.on_resolved("b.example", "192.0.2.1")
    wb.add("http://a.example/", 0, T0)
    wb.add("http://b.example/", 0, T0)
    wb.add("http://c.example/", 0, T0)  # another server: not held back
    first = take(wb, T0)
    assert take(wb, T0).host == "c.example"
    assert wb.next_fetch(T0) == T0 + 5.0
    wb.on_done(first, T0 + 1.0, 200)
    assert wb.next_fetch(T0 + 1.0) == T0 + 6.0  # and from the end of the fetch
    second = take(wb, T0 + 6.0)
    assert {first.host, second.host} == {"a.example", "b.example"}


def test_ip_learnt_from_on_done() -> None:
    wb = Workbench(Politeness(delay=0.0, ip_delay=4.0))
    wb.add("http://a.example/", 0, T0)
    wb.on_resolved("b.example", "192.0.2.9")
    wb.add("http://b.example/", 0, T0)
    first = take(wb, T0)
    assert first.host == "a.example"
    wb.on_done(first, T0 + 1, 200, ip="192.0.2.9")
    state = wb.host("a.example")
    assert state is not None and state.ip == "192.0.2.9"
    assert wb.next_fetch(T0 + 1) == T0 + 5.0


@pytest.mark.parametrize("status", [429, 503])
def test_retry_after_backs_the_host_off(status: int) -> None:
    wb = Workbench(Politeness(delay=1.0))
    wb.add("http://example.com/a", 0, T0)
    wb.add("http://example.com/b", 0, T0)
    first = take(wb, T0)
    wb.on_done(first, T0, status, retry_after=120.0)
    assert wb.next_fetch(T0) == T0 + 120.0
    again = take(wb, T0 + 120.0)
    assert (again.url, again.attempt) == ("http://example.com/a", 2)  # retried first


def test_slow_down_without_retry_after_uses_backoff() -> None:
    wb = Workbench(Politeness(delay=1.0, backoff=30.0))
    wb.add("http://example.com/a", 0, T0)
    wb.on_done(take(wb, T0), T0, 503)
    assert wb.next_fetch(T0) == T0 + 30.0


def test_repeated_failures_park_the_host_then_it_comes_back() -> None:
    policy = Politeness(delay=1.0, park_after=3, park_base=100.0, park_max=1000.0, max_attempts=1)
    wb = Workbench(policy)
    for name in "abcde":
        wb.add(f"http://example.com/{name}", 0, T0)
    now = T0
    for _ in range(2):
        fetch = take(wb, now)
        wb.on_done(fetch, now, None)  # a failure below the threshold: just the delay
        assert wb.next_fetch(now) == now + 1.0
        now += 1.0
    fetch = take(wb, now)
    wb.on_done(fetch, now, 500)  # third consecutive failure: parked 100 s
    assert wb.stats(now).parked == 1
    assert wb.next_fetch(now) == now + 100.0
    now += 100.0
    fetch = take(wb, now)
    wb.on_done(fetch, now, None)  # fourth: parked twice as long
    assert wb.next_fetch(now) == now + 200.0
    now += 200.0
    assert wb.stats(now).parked == 0
    fetch = take(wb, now)
    wb.on_done(fetch, now, 200)  # a success clears the count
    state = wb.host("example.com")
    assert state is not None and state.failures == 0
    assert wb.next_fetch(now) is None


def test_retries_of_one_url_do_not_park_its_host() -> None:
    policy = Politeness(delay=1.0, park_after=3, park_base=100.0, max_attempts=5)
    wb = Workbench(policy)
    wb.add("http://example.com/a", 0, T0)
    wb.add("http://example.com/b", 0, T0)
    now = T0
    for _ in range(5):  # one bad URL, tried five times
        wb.on_done(take(wb, now), now, 500)
        now += 1.0
    assert wb.stats(now).parked == 0
    assert take(wb, now).url == "http://example.com/b"


def test_parking_is_capped() -> None:
    wb = Workbench(Politeness(park_after=1, park_base=100.0, park_max=150.0, max_attempts=1))
    for name in "abcd":
        wb.add(f"http://example.com/{name}", 0, T0)
    now = T0
    for expected in (100.0, 150.0, 150.0):
        wb.on_done(take(wb, now), now, None)
        assert wb.next_fetch(now) == now + expected
        now += expected


def test_failed_url_is_dropped_after_max_attempts() -> None:
    wb = Workbench(Politeness(delay=0.0, max_attempts=2, park_after=10))
    wb.add("http://example.com/a", 0, T0)
    wb.on_done(take(wb, T0), T0, None)
    second = take(wb, T0)
    assert second.attempt == 2
    wb.on_done(second, T0, None)
    assert wb.next_fetch(T0) is None
    assert wb.stats(T0).dropped == 1


def test_4xx_is_not_a_host_failure() -> None:
    wb = Workbench(Politeness(delay=0.0, park_after=1))
    wb.add("http://example.com/a", 0, T0)
    wb.add("http://example.com/b", 0, T0)
    wb.on_done(take(wb, T0), T0, 404)
    assert take(wb, T0).url == "http://example.com/b"
    assert wb.stats(T0).parked == 0


def test_max_per_host() -> None:
    wb = Workbench(Politeness(max_per_host=2))
    assert wb.add("http://example.com/a", 0, T0)
    assert wb.add("http://example.com/b", 0, T0)
    assert not wb.add("http://example.com/c", 0, T0)
    assert wb.add("http://other.org/a", 0, T0)
    stats = wb.stats(T0)
    assert (stats.queued, stats.hosts, stats.capped) == (3, 2, 1)


def test_on_done_twice_is_refused() -> None:
    wb = Workbench()
    wb.add("http://example.com/a", 0, T0)
    fetch = take(wb, T0)
    wb.on_done(fetch, T0, 200)
    with pytest.raises(ValueError, match="not in flight"):
        wb.on_done(fetch, T0, 200)
    with pytest.raises(ValueError, match="not in flight"):
        wb.on_done(Fetch("http://never.example/", "never.example", 0), T0, 200)


def test_bad_policies_are_refused() -> None:
    with pytest.raises(ValueError):
        Politeness(delay=-1)
    with pytest.raises(ValueError):
        Politeness(max_in_flight=0)
    with pytest.raises(ValueError):
        Politeness(max_per_host=-1)


# -- a random crawl, checked against the rules ------------------------------------------

HOSTS = ["a.example", "b.example", "c.example", "d.example"]
IPS = {"a.example": "192.0.2.1", "b.example": "192.0.2.1", "c.example": "192.0.2.2"}
STATUSES = st.sampled_from([200, 200, 200, 404, 500, 503, 429, None])


@settings(max_examples=150, deadline=None)
@given(
    urls=st.lists(st.tuples(st.sampled_from(HOSTS), st.integers(0, 30)), max_size=40, unique=True),
    outcomes=st.lists(
        st.tuples(
            STATUSES,
            st.one_of(st.none(), st.floats(0, 50)),
            st.floats(0, 3),
            # 0: fetched; 1: handed back unmade (on_cancel); 2: held by another worker
            # until `duration` from now (on_held).
            st.sampled_from([0, 0, 0, 1, 2]),
        ),
        max_size=200,
    ),
    delay=st.floats(0, 5),
    ip_delay=st.floats(0, 5),
    crawl_delay=st.floats(0, 8),
)
def test_random_crawl_respects_politeness(
    urls: list[tuple[str, int]],
    outcomes: list[tuple[int | None, float | None, float, int]],
    delay: float,
    ip_delay: float,
    crawl_delay: float,
) -> None:
    policy = Politeness(delay=delay, ip_delay=ip_delay, max_attempts=3, park_base=20.0)
    wb = Workbench(policy)
    wb.set_crawl_delay("a.example", crawl_delay)
    for host, ip in IPS.items():
        wb.on_resolved(host, ip)
    for host, n in urls:
        assert wb.add(f"http://{host}/{n}", 0, T0)
    now = T0
    starts: dict[str, list[float]] = {}
    ends: dict[str, float] = {}
    ip_last: dict[str, float] = {}
    in_flight: list[tuple[Fetch, float | None]] = []  # with the IP's last request before
    held_until: dict[str, float] = {}
    attempts: dict[str, int] = {}
    finished: set[str] = set()
    steps = iter(outcomes)
    for _ in range(2000):
        decision = wb.next_fetch(now)
        if isinstance(decision, Fetch):
            host = decision.host
            assert all(f.host != host for f, _ in in_flight), "two connections to one host"
            host_delay = max(delay, crawl_delay if host == "a.example" else 0.0)
            if host in ends:
                assert now >= ends[host] + host_delay - 1e-9
            assert now >= held_until.get(host, now) - 1e-9, "fetched while held elsewhere"
            host_ip = IPS.get(host)
            before = None if host_ip is None else ip_last.get(host_ip)
            if before is not None:
                assert now >= before + ip_delay - 1e-9
            if host_ip is not None:
                ip_last[host_ip] = now
            assert decision.url not in finished
            attempts[decision.url] = attempts.get(decision.url, 0) + 1
            assert decision.attempt == attempts[decision.url] <= policy.max_attempts
            starts.setdefault(host, []).append(now)
            in_flight.append((decision, before))
            continue
        if in_flight:
            fetch, ip_before = in_flight.pop(0)
            status, retry_after, duration, handed_back = next(steps, (200, None, 1.0, 0))
            if handed_back:  # no request was made: undo what the model recorded
                attempts[fetch.url] -= 1
                starts[fetch.host].pop()
                fetch_ip = IPS.get(fetch.host)
                if fetch_ip is not None:
                    if ip_before is None:
                        ip_last.pop(fetch_ip, None)
                    else:
                        ip_last[fetch_ip] = ip_before
                if handed_back == 1:
                    wb.on_cancel(fetch)
                else:
                    held_until[fetch.host] = now + duration
                    wb.on_held(fetch, now + duration)
                continue
            now += duration
            wb.on_done(fetch, now, status, retry_after=retry_after)
            ends[fetch.host] = now
            done_ip = IPS.get(fetch.host)
            if done_ip is not None:
                ip_last[done_ip] = now
            if status in (429, 503):
                wait = retry_after if retry_after is not None else policy.backoff
                state = wb.host(fetch.host)
                assert state is not None and state.next_allowed >= now + wait - 1e-9
            succeeded = status is not None and status < 500 and status != 429
            if succeeded or attempts[fetch.url] >= policy.max_attempts:
                finished.add(fetch.url)
            continue
        if decision is None:
            break
        assert decision != math.inf
        assert decision > now
        now = decision
    else:
        pytest.fail("the crawl did not finish")
    assert finished == {f"http://{h}/{n}" for h, n in urls}
    assert wb.stats(now).queued == 0


def test_on_done_says_whether_the_url_was_queued_again() -> None:
    wb = Workbench(Politeness(delay=0.0, max_attempts=2, park_after=10))
    wb.add("http://example.com/a", 0, T0)
    assert wb.on_done(take(wb, T0), T0, 503, retry_after=0) is True
    assert wb.on_done(take(wb, T0), T0, 503, retry_after=0) is False  # the last attempt
    wb.add("http://example.com/b", 0, T0)
    assert wb.on_done(take(wb, T0), T0, 200) is False


def test_a_final_failure_is_not_retried() -> None:
    wb = Workbench(Politeness(delay=0.0, max_attempts=5, park_after=10))
    wb.add("http://example.com/a", 0, T0)
    assert wb.on_done(take(wb, T0), T0, None, final=True) is False
    assert wb.next_fetch(T0) is None
    assert wb.stats(T0).dropped == 1


def test_a_cancelled_fetch_goes_back_to_the_head_of_its_queue() -> None:
    wb = Workbench(Politeness(delay=0.0))
    wb.add("http://example.com/a", 0, T0)
    wb.add("http://example.com/b", 0, T0)
    first = take(wb, T0)
    wb.on_cancel(first)
    assert wb.stats(T0).in_flight == 0
    again = take(wb, T0)
    assert (again.url, again.attempt) == (first.url, first.attempt)
    wb.on_cancel(again)
    with pytest.raises(ValueError, match="not in flight"):
        wb.on_cancel(again)


def test_a_resumed_workbench_holds_every_host_back_until_not_before() -> None:
    wb = Workbench(Politeness(delay=2.0, ip_delay=1.0), not_before=102.0)
    wb.add("http://a.example/1", 0, 100.0)
    wb.on_resolved("b.example", "10.0.0.1")
    wb.add("http://b.example/1", 0, 100.0)
    # Nothing before not_before, though neither host was fetched in this session.
    assert wb.next_fetch(100.0) == 102.0
    first = take(wb, 102.0)
    second = take(wb, 102.0)
    assert {first.url, second.url} == {"http://a.example/1", "http://b.example/1"}


def test_a_fetch_beside_the_workbench_spaces_the_hosts_next_fetch() -> None:
    wb = Workbench(Politeness(delay=2.0, ip_delay=0.0))
    wb.add("http://a.example/1", 0, 10.0)
    wb.on_side_fetch("a.example", 10.5)  # its robots.txt, fetched by the crawler itself
    assert wb.next_fetch(10.5) == 12.5
    assert take(wb, 12.5).url == "http://a.example/1"


def test_a_host_held_elsewhere_waits_and_keeps_its_order() -> None:
    wb = Workbench(Politeness(delay=1.0, ip_delay=0.0))
    wb.add("http://a.example/1", 0, 10.0)
    wb.add("http://a.example/2", 0, 10.0)
    wb.add("http://b.example/1", 0, 10.0)
    first = take(wb, 10.0)
    other = take(wb, 10.0)
    assert {first.host, other.host} == {"a.example", "b.example"}
    held = first if first.host == "a.example" else other
    wb.on_held(held, until=15.0)  # another worker's turn on a.example until 15
    assert wb.stats(10.0).in_flight == 1 and wb.stats(10.0).queued == 2
    assert wb.next_fetch(14.9) == 15.0
    again = take(wb, 15.0)
    assert (again.url, again.attempt) == ("http://a.example/1", 1)


def test_turns_say_when_a_host_and_its_address_are_free() -> None:
    wb = Workbench(Politeness(delay=2.0, ip_delay=0.5))
    wb.on_resolved("a.example", "10.0.0.1")
    wb.add("http://a.example/1", 0, 10.0)
    fetch = take(wb, 10.0)
    wb.on_done(fetch, 11.0, 200)
    assert wb.turns("a.example") == (13.0, "10.0.0.1", 11.5)
    wb.add("http://c.example/1", 0, 11.0)
    assert wb.turns("c.example") == (0.0, None, 0.0)
    assert wb.turns("unknown.example") == (0.0, None, 0.0)


def test_a_fetch_handed_back_costs_its_host_no_delay() -> None:
    """A fetch cancelled (robots.txt not known yet) or held elsewhere was never made: the
    host waits only for what held it, not a delay of its own on top."""
    wb = Workbench(Politeness(delay=5.0, ip_delay=0.0))
    wb.add("http://a.example/1", 0, 10.0)
    wb.on_held(take(wb, 10.0), until=10.05)  # another worker's fetch ends in 50 ms
    assert wb.next_fetch(10.0) == 10.05
    wb.on_cancel(take(wb, 10.05))
    fetch = take(wb, 10.05)  # at once: the cancelled fetch cost nothing
    wb.on_done(fetch, 11.0, 200)
    assert wb.next_fetch(11.0) is None and wb.turns("a.example")[0] == 16.0


def test_a_fetch_handed_back_after_another_ended_keeps_that_ones_delay() -> None:
    wb = Workbench(Politeness(delay=5.0, ip_delay=0.0, max_in_flight=2))
    wb.add("http://a.example/1", 0, 10.0)
    wb.add("http://a.example/2", 0, 10.0)
    first, second = take(wb, 10.0), wb.next_fetch(10.0)
    assert isinstance(second, float)  # one connection's delay still applies to starts
    wb.on_done(first, 10.5, 200)
    again = take(wb, 15.5)
    other = wb.host("a.example")
    assert other is not None and other.in_flight == 1
    wb.on_side_fetch("a.example", 16.0)  # robots.txt fetched meanwhile: the clock moved
    wb.on_cancel(again)
    assert wb.turns("a.example")[0] == 21.0  # the side fetch's delay stands


def test_a_withdrawn_fetch_leaves_the_workbench_and_gives_back_its_place() -> None:
    """`on_withdraw`: the URL is not queued again (the crawl parks it until its site's
    robots.txt is known again), the host's next fetch may start at once, and its place
    under max_per_host is free for the URL when it comes back."""
    wb = Workbench(Politeness(delay=5.0, max_per_host=2))
    assert wb.add("http://a.example/1", 0, 0.0) and wb.add("http://a.example/2", 0, 0.0)
    assert not wb.add("http://a.example/3", 0, 0.0)  # capped
    first = take(wb, 0.0)
    wb.on_withdraw(first)
    second = take(wb, 0.0)  # no delay charged for the fetch that was not made
    assert second.url == "http://a.example/2"
    wb.on_done(second, 1.0, 200)
    assert wb.next_fetch(1.0) is None  # the withdrawn URL is not back
    assert wb.add(first.url, 0, 1.0)  # its place was given back
    with pytest.raises(ValueError):
        wb.on_withdraw(first)
