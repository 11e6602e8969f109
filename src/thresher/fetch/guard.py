"""Which IP addresses a fetch may connect to: the server-side request forgery guard.

A crawler follows links and redirects that strangers wrote. Without a guard, a page
linking to ``http://169.254.169.254/`` (a cloud metadata service), ``http://localhost:5432/``
or a name that resolves to ``10.0.0.1`` makes the crawler fetch from the network it runs
in. So, unless the user allows it, every address is checked before connecting, after name
resolution, on every request (a redirect's target is a new request and is checked again).

The policy is "globally routable unicast only". IPv6 addresses that carry an IPv4 address
(IPv4-mapped ``::ffff:a.b.c.d``, 6to4 ``2002::/16``, the NAT64 well-known prefix
``64:ff9b::/96``) are judged by the IPv4 address inside, since that is where the packets
end up. Besides what Python's `ipaddress` knows (its tables vary between versions), the
blocks of IANA's special-purpose registries that are not globally reachable are refused
by a table of our own, and IPv6 outside ``2000::/3`` (the global unicast space: site-local
``fec0::/10``, SRv6 ``5f00::/16``, discard-only ``100::/64``, the local-use NAT64
``64:ff9b:1::/48`` …) is refused as reserved.

`guarded_socket` is the last line: aiohttp calls it for every socket it opens, with the
exact address about to be connected to, so nothing the resolver or an IP literal let
through by mistake is ever connected to.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
from functools import lru_cache
from typing import Any

from thresher.weburl import ipv4

__all__ = ["GuardRefusal", "guarded_socket", "ip_literal", "refusal"]

_IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")

# IANA special-purpose blocks (iana-ipv4-special-registry, iana-ipv6-special-registry,
# as of 2025) that are not globally reachable and that some Python versions' ipaddress
# lets through; IPv6 outside 2000::/3 is refused apart from these.
_SPECIAL: tuple[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, str], ...] = (
    (ipaddress.IPv4Network("0.0.0.0/8"), "reserved (this network)"),
    (ipaddress.IPv4Network("100.64.0.0/10"), "not globally routable"),
    # 192.0.0.9 and 192.0.0.10 (PCP and TURN anycast) are the block's global exceptions.
    (ipaddress.IPv4Network("192.0.0.0/29"), "reserved (IETF protocol assignments)"),
    (ipaddress.IPv4Network("192.0.0.8/32"), "reserved (IETF protocol assignments)"),
    (ipaddress.IPv4Network("192.0.0.11/32"), "reserved (IETF protocol assignments)"),
    (ipaddress.IPv4Network("192.0.0.12/30"), "reserved (IETF protocol assignments)"),
    (ipaddress.IPv4Network("192.0.0.16/28"), "reserved (IETF protocol assignments)"),
    (ipaddress.IPv4Network("192.0.0.32/27"), "reserved (IETF protocol assignments)"),
    (ipaddress.IPv4Network("192.0.0.64/26"), "reserved (IETF protocol assignments)"),
    (ipaddress.IPv4Network("192.0.0.128/25"), "reserved (IETF protocol assignments)"),
    (ipaddress.IPv4Network("192.0.2.0/24"), "reserved (documentation)"),
    (ipaddress.IPv4Network("192.88.99.0/24"), "reserved (deprecated 6to4 relay anycast)"),
    (ipaddress.IPv4Network("198.18.0.0/15"), "reserved (benchmarking)"),
    (ipaddress.IPv4Network("198.51.100.0/24"), "reserved (documentation)"),
    (ipaddress.IPv4Network("203.0.113.0/24"), "reserved (documentation)"),
    (ipaddress.IPv4Network("240.0.0.0/4"), "reserved"),
    (ipaddress.IPv6Network("2001::/23"), "reserved (IETF protocol assignments)"),
    (ipaddress.IPv6Network("2001:db8::/32"), "reserved (documentation)"),
    (ipaddress.IPv6Network("3fff::/20"), "reserved (documentation)"),
)


@lru_cache(maxsize=8192)
def ip_literal(host: str) -> str | None:
    """`host` as an IP address string if it is one (brackets of IPv6 URLs removed), else
    None. An IPv4 address may be written in any form the URL Standard reads as one
    (``0x7f.1``, ``2130706433``, ``0177.0.0.1``: all ``127.0.0.1``), as a browser would
    connect to it; a URL a crawl found has it as a dotted quad already, but a URL given
    as it is (a `urls` list, an ingest request) may not, and the guard must not take it
    for a name. Cached: it runs on every request, and most hosts repeat."""
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return ipv4(host)


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def _kind(ip: _IPAddress) -> str | None:
    # Most specific first, so the message says "loopback" rather than "private".
    if ip.is_loopback:
        return "loopback"
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_link_local:
        return "link-local"
    if ip.is_multicast:
        return "multicast"
    if ip.is_private:
        return "private"
    if ip.is_reserved:
        return "reserved"
    for network, name in _SPECIAL:
        if ip.version == network.version and ip in network:
            return name
    if isinstance(ip, ipaddress.IPv6Address) and ip not in _GLOBAL_UNICAST:
        return "reserved (outside 2000::/3, the global unicast space)"
    if not ip.is_global:
        return "not globally routable"
    return None


@lru_cache(maxsize=8192)
def refusal(address: str) -> str | None:
    """Why `address` must not be contacted ("loopback", "private", …), or None if it is
    a globally routable unicast address. Something that is not an IP address is refused."""
    try:
        ip: _IPAddress = ipaddress.ip_address(address)
    except ValueError:
        return "not an IP address"
    if isinstance(ip, ipaddress.IPv6Address):
        inner = _embedded_ipv4(ip)
        if inner is not None:
            kind = _kind(inner)
            return None if kind is None else f"{kind} (IPv4 {inner} inside)"
    return _kind(ip)


class GuardRefusal(OSError):
    """Raised by `guarded_socket`. An OSError because aiohttp and aiohappyeyeballs only
    handle OSErrors from a socket factory (anything else escapes half-cleaned-up); the
    fetch client recognises it and reports AddressRefused."""

    def __init__(self, address: str, kind: str) -> None:
        super().__init__(
            errno.EACCES, f"address {address} is {kind}; refused (allow_private is off)"
        )
        self.address = address
        self.kind = kind


def guarded_socket(addr_info: tuple[Any, ...]) -> socket.socket:
    """A socket factory for aiohttp's TCPConnector that refuses forbidden addresses.

    `addr_info` is one getaddrinfo() entry: (family, type, proto, canonname, sockaddr).
    """
    family, type_, proto, _, sockaddr = addr_info
    address = sockaddr[0]
    kind = refusal(address)
    if kind is not None:
        raise GuardRefusal(address, kind)
    return socket.socket(family=family, type=type_, proto=proto)
