"""One spelling per URL, so that "never fetched twice" means what a person means by it.

`canonicalize` is `w3lib.url.canonicalize_url` followed by a few rules of our own. The
result is a fixed point: canonicalising a canonical URL returns it unchanged (a property
test checks this), which is what lets the sieve compare hashes of canonical forms.

From w3lib:

- percent-encoding is normalised: unreserved characters are decoded (``%7E`` → ``~``),
  everything else is encoded in UTF-8 with uppercase hex (``ä`` → ``%C3%A4``, space → ``%20``);
- dot segments are removed (``/a/./b/../c`` → ``/a/c``); an empty path becomes ``/``;
- query arguments are sorted by name then value (w3lib's order; blank values kept);
- the host is IDNA-encoded (``bücher.de`` → ``xn--bcher-kva.de``) and lowercased;
- the fragment is dropped (it never reaches the server).

Ours, on top:

- only ``http`` and ``https`` are accepted; anything else raises `InvalidURL`, as does a
  URL without a host, with a port that is not a number in 0-65535, or with a host that
  no DNS name or address can be: one left with characters outside ASCII after IDNA
  (w3lib keeps a host it cannot encode as it was), whitespace, control characters or
  the URL standard's forbidden host code points (``<``, ``>``, ``^``, ``|``, ``%`` …);
- the scheme is lowercased (``HTTP:`` → ``http:``);
- the default port is dropped (``:80`` for http, ``:443`` for https);
- one trailing dot of the host is dropped (``example.com.`` → ``example.com``): DNS
  resolves both to the same name, and servers serve the same site for both;
- surrounding whitespace is stripped; user info (``user:pw@``) is kept as w3lib keeps it.

`url_hash` is the 64-bit BLAKE2b digest of the canonical URL as an unsigned integer.
64 bits is what BUbiNG keeps per URL: the chance that two of a billion URLs collide (and
one is wrongly taken as already seen) is about 3 in 100, and for a hundred million URLs
about 3 in 10 000 — acceptable for a crawler, and 8 bytes per URL instead of ~80.
"""

from __future__ import annotations

import hashlib
import re
from urllib.parse import urlsplit, urlunsplit

from w3lib.url import canonicalize_url

from thresher.frontier.errors import InvalidURL

__all__ = ["DEFAULT_PORTS", "canonicalize", "host_of", "plain_site", "url_hash"]

DEFAULT_PORTS: dict[str, int] = {"http": 80, "https": 443}

# WHATWG URL's forbidden host code points (those urlsplit would not have split on).
_FORBIDDEN_IN_HOST = frozenset("#/<>?@\\^|%[]")


def _split_host(url: str, netloc: str) -> tuple[str, str, int | None]:
    """(user info with its '@', lowercase host without brackets, port or None)."""
    userinfo, at, hostport = netloc.rpartition("@")
    parts = urlsplit("//" + hostport)
    try:
        port = parts.port
    except ValueError as exc:
        raise InvalidURL(url, f"bad port ({exc})") from None
    host = (parts.hostname or "").rstrip(".")
    return userinfo + at, host, port


# A URL in canonical form already, as `thresher.parse.extract_links` hands over most links:
# a host of lowercase ASCII labels, no default port, no user info, query or fragment, and a
# path of characters w3lib keeps as they are, without escapes or dot segments. Such a URL is
# its own canonical form (a property test compares it with the full rules), and skipping
# w3lib for it takes 0.6 µs instead of 6 per link: every shard canonicalises every link it finds.
_CANONICAL_RE = re.compile(
    r"(https?)://(?:[a-z0-9-]{1,63}\.)*[a-z0-9-]{1,63}(?::([1-9][0-9]{0,4}))?"
    r"/[A-Za-z0-9\-_~!$&'()*+,=:@/.]*"  # not ";": w3lib splits path parameters off
)


def canonicalize(url: str) -> str:
    """The canonical form of an http(s) URL (rules in the module docstring)."""
    m = _CANONICAL_RE.fullmatch(url)
    if m is not None and "/." not in url:
        port = m.group(2)
        if port is None or (int(port) <= 65535 and int(port) != DEFAULT_PORTS[m.group(1)]):
            return url
    return _canonicalize(url)


def _canonicalize(url: str) -> str:
    text = url.strip()
    try:
        first = urlsplit(text)
    except ValueError as exc:
        raise InvalidURL(url, str(exc)) from None
    scheme = first.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise InvalidURL(url, f"scheme {first.scheme or '(none)'!r} is not http or https")
    try:
        canon = canonicalize_url(text)
        parts = urlsplit(canon)
    except (ValueError, UnicodeError) as exc:
        raise InvalidURL(url, str(exc)) from None
    userinfo, host, port = _split_host(url, parts.netloc)
    if not host:
        raise InvalidURL(url, "no host")
    if not host.isascii() or any(
        c in _FORBIDDEN_IN_HOST or c.isspace() or not c.isprintable() for c in host.replace(":", "")
    ):
        raise InvalidURL(url, f"no such host can exist: {host!r}")
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    netloc = userinfo + host
    if port is not None and port != DEFAULT_PORTS[scheme]:
        netloc += f":{port}"
    return urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))


# Scheme, host and port of a URL whose host urlsplit would return as it is: lowercase
# http(s), a host of lowercase letters, digits, dots and dashes, then a port, a path, a
# query, a fragment or the end. A crawl's hosts look like this (canonical URLs do); the
# match costs 0.3 µs, urlsplit and its hostname property 2.8 (for a URL not in
# urlsplit's small cache, as most are in a crawl).
_PLAIN_SITE_RE = re.compile(r"(https?)://([a-z0-9.-]+)(?::([0-9]{1,5}))?(?=[/?#]|\Z)")


def plain_site(url: str) -> re.Match[str] | None:
    """The match of scheme (1), host (2) and port (3, or None) when `url` starts with
    them written plainly, as `urlsplit` would find them; None for any other URL."""
    return _PLAIN_SITE_RE.match(url)


def host_of(url: str) -> str:
    """The lowercase host of a canonical URL: the unit of politeness."""
    m = _PLAIN_SITE_RE.match(url)
    if m is not None:
        return m.group(2)
    return urlsplit(url).hostname or ""


def url_hash(url: str) -> int:
    """64-bit hash of `url` as given (pass a canonical URL), an unsigned integer."""
    digest = hashlib.blake2b(url.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big")
