"""The address guard and the DNS cache: which addresses are refused, how long answers
are kept (with a FakeClock), and that concurrent requests share one lookup."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Sequence

import pytest

from thresher.clock import FakeClock
from thresher.fetch import (
    AddressRefused,
    DNSCache,
    DNSError,
    Fetcher,
    FetchSettings,
    FetchTimeout,
    refusal,
    system_lookup,
)
from thresher.fetch.dns import GuardedResolver
from thresher.fetch.guard import GuardRefusal, guarded_socket, ip_literal


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("127.255.0.9", "loopback"),
        ("::1", "loopback"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("fe80::1%2", "link-local"),
        ("224.0.0.1", "multicast"),
        ("239.1.2.3", "multicast"),
        ("ff02::1", "multicast"),
        ("10.0.0.1", "private"),
        ("172.16.5.4", "private"),
        ("192.168.1.1", "private"),
        ("fd00::2", "private"),
        ("192.0.2.7", "private"),  # documentation ranges count as private in ipaddress
        ("240.0.0.1", "private"),
        ("100.64.0.1", "not globally routable"),
        # IANA special-purpose blocks ipaddress lets through (on some Python versions).
        ("192.88.99.1", "reserved (deprecated 6to4 relay anycast)"),
        ("192.0.0.8", "reserved (IETF protocol assignments)"),
        ("192.0.0.200", "reserved (IETF protocol assignments)"),
        ("3fff::1", "reserved (documentation)"),
        ("3fff:fff:ffff::1", "reserved (documentation)"),
        ("fec0::1", "reserved (outside 2000::/3, the global unicast space)"),
        ("5f00::1", "reserved"),
        ("100::1", "private"),
        ("64:ff9b:1::a00:1", "reserved"),
        ("4000::1", "reserved"),
        ("2002:c058:6301::", "reserved (deprecated 6to4 relay anycast) (IPv4 192.88.99.1 inside)"),
        ("::ffff:127.0.0.1", "loopback (IPv4 127.0.0.1 inside)"),
        ("::ffff:10.0.0.1", "private (IPv4 10.0.0.1 inside)"),
        ("2002:7f00:1::", "loopback (IPv4 127.0.0.1 inside)"),
        ("64:ff9b::a9fe:a9fe", "link-local (IPv4 169.254.169.254 inside)"),
        ("example.com", "not an IP address"),
    ],
)
def test_special_addresses_are_refused(address: str, kind: str) -> None:
    assert refusal(address) == kind


@pytest.mark.parametrize(
    "address",
    [
        "93.184.216.34",
        "8.8.8.8",
        "2606:4700::1111",
        "::ffff:93.184.216.34",
        "64:ff9b::808:808",
        "192.0.0.9",  # PCP anycast: globally reachable
        "192.31.196.1",  # AS112: globally reachable
        "2620:4f:8000::1",  # AS112 direct delegation
        "3ff0::1",  # below 3fff::/20: ordinary global unicast
        "2002:808:808::1",  # 6to4 of a public address
    ],
)
def test_public_addresses_are_allowed(address: str) -> None:
    assert refusal(address) is None


def test_ip_literals_are_recognised() -> None:
    assert ip_literal("[::1]") == "::1"
    assert ip_literal("127.0.0.1") == "127.0.0.1"
    assert ip_literal("example.com") is None
    assert ip_literal("cafe.beef") is None  # hex digits, but a name by the URL Standard


@pytest.mark.parametrize(
    "host", ["127.1", "0x7f.1", "2130706433", "0x7f000001", "0177.0.0.1", "127.0.0.0x1"]
)
def test_ipv4_addresses_in_every_url_standard_form_are_ip_literals(host: str) -> None:
    """As a browser reads them, so the guard does not take them for names."""
    assert ip_literal(host) == "127.0.0.1"


def test_an_ipv4_address_in_another_form_is_refused_without_a_lookup() -> None:
    lookups = Lookups({})
    cache = DNSCache(lookup=lookups)
    for host in ("0x7f.1", "2130706433", "0xa.0.0.1", "0251.0376.0251.0376"):
        with pytest.raises(AddressRefused, match=r"is (loopback|private|link-local)"):
            cache.cached(host)
    assert lookups.asked == []


def test_the_socket_factory_refuses_before_connecting() -> None:
    with pytest.raises(GuardRefusal, match=r"10\.0\.0\.1 is private"):
        guarded_socket((socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.1", 80)))
    sock = guarded_socket((socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", 80)))
    sock.close()


class Lookups:
    """A lookup function with fixed answers that records what it was asked."""

    def __init__(self, answers: dict[str, list[str]], delay: float = 0.0) -> None:
        self.answers = dict(answers)
        self.delay = delay
        self.asked: list[str] = []

    async def __call__(self, host: str) -> Sequence[str]:
        self.asked.append(host)
        if self.delay:
            await asyncio.sleep(self.delay)
        if host not in self.answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return self.answers[host]


PUBLIC = {"a.test": ["93.184.216.34"], "b.test": ["8.8.8.8"]}


def test_answers_are_kept_for_the_ttl() -> None:
    clock = FakeClock()
    lookups = Lookups(PUBLIC)
    cache = DNSCache(ttl=300, lookup=lookups, clock=clock)

    async def body() -> None:
        assert cache.cached("a.test") is None
        assert await cache.resolve("a.test") == ["93.184.216.34"]
        assert cache.cached("A.TEST") == ["93.184.216.34"]
        clock.advance(299.9)
        assert await cache.resolve("a.test") == ["93.184.216.34"]
        assert lookups.asked == ["a.test"]
        clock.advance(0.1)
        assert cache.cached("a.test") is None
        lookups.answers["a.test"] = ["8.8.4.4"]  # the host moved
        assert await cache.resolve("a.test") == ["8.8.4.4"]
        assert lookups.asked == ["a.test", "a.test"] and cache.lookups == 2

    asyncio.run(body())


def test_concurrent_requests_share_one_lookup() -> None:
    lookups = Lookups(PUBLIC, delay=0.05)
    cache = DNSCache(lookup=lookups)

    async def body() -> None:
        answers = await asyncio.gather(*(cache.resolve("a.test") for _ in range(32)))
        assert answers == [["93.184.216.34"]] * 32
        assert lookups.asked == ["a.test"]

    asyncio.run(body())


def test_a_waiter_giving_up_does_not_cancel_the_lookup_for_the_others() -> None:
    lookups = Lookups(PUBLIC, delay=0.1)
    cache = DNSCache(lookup=lookups)

    async def body() -> None:
        impatient = asyncio.ensure_future(cache.resolve("a.test"))
        patient = asyncio.ensure_future(cache.resolve("a.test"))
        await asyncio.sleep(0.01)
        impatient.cancel()
        assert await patient == ["93.184.216.34"]
        assert lookups.asked == ["a.test"]

    asyncio.run(body())


def test_refused_addresses_are_dropped_and_a_name_with_none_left_is_refused() -> None:
    mixed = ["10.0.0.1", "93.184.216.34", "::1", "2606:4700::1111", "127.0.0.1"]
    lookups = Lookups({"mixed.test": mixed, "inside.test": ["10.0.0.1", "::1"]})
    cache = DNSCache(lookup=lookups)

    async def body() -> None:
        assert await cache.resolve("mixed.test") == ["93.184.216.34", "2606:4700::1111"]
        for _ in range(2):  # the refusal is an answer, and cached
            with pytest.raises(AddressRefused) as caught:
                await cache.resolve("inside.test")
        assert str(caught.value) == (
            "GET inside.test: inside.test resolves only to refused addresses: "
            "10.0.0.1 (private), ::1 (loopback) (allow_private is off)"
        )
        assert lookups.asked == ["mixed.test", "inside.test"]

    asyncio.run(body())


def test_allow_private_keeps_every_address() -> None:
    mixed = ["10.0.0.1", "93.184.216.34", "::1"]
    cache = DNSCache(allow_private=True, lookup=Lookups({"mixed.test": mixed}))
    assert asyncio.run(cache.resolve("mixed.test")) == mixed
    assert cache.cached("127.0.0.1") == ["127.0.0.1"]


def test_failures_are_not_cached() -> None:
    lookups = Lookups({})
    cache = DNSCache(lookup=lookups)

    async def body() -> None:
        with pytest.raises(DNSError, match="Name or service not known"):
            await cache.resolve("late.test")
        lookups.answers["late.test"] = ["8.8.8.8"]
        assert await cache.resolve("late.test") == ["8.8.8.8"]

    asyncio.run(body())


def test_an_empty_answer_is_a_dns_error() -> None:
    cache = DNSCache(lookup=Lookups({"empty.test": []}))
    with pytest.raises(DNSError, match="no addresses"):
        asyncio.run(cache.resolve("empty.test"))


def test_ip_literals_are_returned_as_they_are_and_still_guarded() -> None:
    lookups = Lookups({})
    cache = DNSCache(lookup=lookups)
    assert cache.cached("93.184.216.34") == ["93.184.216.34"]
    assert asyncio.run(cache.resolve("2606:4700::1111")) == ["2606:4700::1111"]
    with pytest.raises(AddressRefused, match=r"169\.254\.169\.254 is link-local"):
        cache.cached("169.254.169.254")
    assert lookups.asked == []


def test_the_cache_stays_bounded() -> None:
    clock = FakeClock()
    answers = {f"h{i}.test": ["8.8.8.8"] for i in range(10)}
    cache = DNSCache(ttl=10, lookup=Lookups(answers), clock=clock, max_entries=4)

    async def body() -> None:
        for i in range(4):
            await cache.resolve(f"h{i}.test")
        clock.advance(11)  # all four stale: they go first
        await cache.resolve("h4.test")
        assert [h for h in answers if cache.cached(h)] == ["h4.test"]
        for i in range(5, 10):
            await cache.resolve(f"h{i}.test")
        live = [h for h in answers if cache.cached(h)]
        assert len(live) <= 4 and "h9.test" in live

    asyncio.run(body())


def test_the_aiohttp_resolver_answers_from_the_cache() -> None:
    lookups = Lookups({"dual.test": ["93.184.216.34", "2606:4700::1111"]})
    resolver = GuardedResolver(DNSCache(lookup=lookups))

    async def body() -> None:
        both = await resolver.resolve("dual.test", 443, socket.AF_UNSPEC)
        assert [(r["host"], r["port"], r["family"]) for r in both] == [
            ("93.184.216.34", 443, socket.AF_INET),
            ("2606:4700::1111", 443, socket.AF_INET6),
        ]
        v6 = await resolver.resolve("dual.test", 80, socket.AF_INET6)
        assert [r["host"] for r in v6] == ["2606:4700::1111"]
        assert lookups.asked == ["dual.test"]
        await resolver.close()

    asyncio.run(body())


def test_the_system_lookup_reads_hosts_and_numbers_without_the_network() -> None:
    async def body() -> None:
        assert await system_lookup("127.0.0.1") == ["127.0.0.1"]
        assert await system_lookup("127.1") == ["127.0.0.1"]
        local = await system_lookup("localhost")
        assert local and all(refusal(a) == "loopback" for a in local)

    asyncio.run(body())


def test_fetcher_resolve_strips_brackets_and_bounds_the_lookup_time() -> None:
    async def never(host: str) -> Sequence[str]:
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    async def body() -> None:
        fetcher = Fetcher(FetchSettings(connect_timeout=0.1), lookup=never)
        assert await fetcher.resolve("[2606:4700::1111]") == ["2606:4700::1111"]
        with pytest.raises(FetchTimeout, match=r"resolving slow\.test took over 0\.1 s"):
            await fetcher.resolve("slow.test")

    asyncio.run(body())
