"""One spelling per URL, so that "never fetched twice" means what a person means by it.

A crawl carries two things per URL: the URL to fetch, as the page linked it and a
browser resolves it (`thresher.weburl.resolve`), and its key, the canonical form here,
whose 64-bit hash the sieve keeps. Two spellings of one URL have one key, so they are
fetched once (as the first one met); the key never goes on the wire.

`canonicalize(url)` reads any URL as a browser would (the WHATWG URL Standard, by
ada-url), then applies `key_of`; `key_of` takes a URL as `resolve` gives it (the crawl's
links come resolved) and skips that parse. What the Standard does already: the scheme and
host lowercased, the host through UTS #46 non-transitional IDNA (``faß.example`` →
``xn--fa-hia.example``), IPv4 addresses in any form as dotted quads (``0x7f.1``,
``2130706433`` → ``127.0.0.1``), IPv6 in its shortest form, the default port dropped
(``:80`` for http, ``:443`` for https), empty user info dropped (``http://@host/`` is
``http://host/``, ``http://a:@host/`` is ``http://a@host/``), dot segments resolved
(``%2e`` as a dot), the fragment gone, and what cannot stand in a URL percent-encoded.

On top, `w3lib.url.canonicalize_url`:

- percent-encoding is normalised: unreserved characters are decoded (``%7E`` → ``~``),
  everything else is encoded in UTF-8 with uppercase hex (``|`` stays, ``'`` in a query
  becomes ``%27``);
- query arguments are sorted by name then value, and a name without ``=`` gets one
  (``?b&a=1`` → ``?a=1&b=``; ``?/archives/1`` → ``?%2Farchives%2F1=``; ``?x=1;y=2`` →
  ``?x=1%3By%3D2``: only ``&`` separates arguments);

and ours: one trailing dot of the host is dropped (``example.com.`` → ``example.com``:
DNS resolves both to the same name, and servers serve the same site for both); a host
ending in two (``a..``) or made of dots is kept as it is, as the Standard may fail it
without them (``foo.09..`` is a name, ``foo.09`` an invalid IPv4 address). User info
(``user:pw@``) is kept.

The result is a fixed point: canonicalising a canonical URL returns it unchanged (a
property test checks this), which is what lets the sieve compare hashes of canonical
forms. Only what the Standard fails, or a URL of another scheme than http(s), raises
`InvalidURL`; every link `thresher.parse.extract_links` gives has a key.

`url_hash` is the 64-bit BLAKE2b digest of the canonical URL as an unsigned integer.
64 bits is what BUbiNG keeps per URL: the chance that two of a billion URLs collide (and
one is wrongly taken as already seen) is about 3 in 100, and for a hundred million URLs
about 3 in 10 000 — acceptable for a crawler, and 8 bytes per URL instead of ~80.
"""

from __future__ import annotations

import functools
import hashlib
import re
from urllib.parse import urlsplit

from w3lib.url import canonicalize_url

from thresher.frontier.errors import InvalidURL
from thresher.weburl import resolve

__all__ = ["DEFAULT_PORTS", "canonicalize", "host_of", "key_of", "plain_site", "url_hash"]

DEFAULT_PORTS: dict[str, int] = {"http": 80, "https": 443}

_SCHEME_RE = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")


def _why_not(url: str) -> str:
    """Why the URL Standard gives no http(s) URL for `url`, as far as a glance can tell."""
    text = url.strip()
    scheme = _SCHEME_RE.match(text)
    if scheme is None:
        return "not an absolute URL"
    if scheme.group(1).lower() not in DEFAULT_PORTS:
        return f"scheme {scheme.group(1)!r} is not http or https"
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError for a port outside 0-65535
    except ValueError as exc:
        return str(exc)
    if not parts.hostname:
        return "no host"
    return "not a URL by the WHATWG URL Standard (its host, port or address is invalid)"


# The last URLs' forms: a URL is mostly canonicalised twice in a row, by its caller (an
# ingest walk, a crawl's sieve) and then by the polite fetcher asked for it.
@functools.lru_cache(maxsize=256)
def canonicalize(url: str) -> str:
    """The canonical form of an http(s) URL, read as a browser reads it (rules in the
    module docstring); InvalidURL if a browser would not read it as one."""
    resolved = resolve(url)
    if resolved is None:
        raise InvalidURL(url, _why_not(url))
    return key_of(resolved)


# A URL in canonical form already, as `thresher.parse.extract_links` hands over most links:
# a host of lowercase ASCII labels, no default port, no user info, query or fragment, and a
# path of characters w3lib keeps as they are, without escapes or dot segments. Such a URL is
# its own canonical form (a property test compares it with the full rules), and skipping
# w3lib for it takes 0.6 µs instead of 6 per link: every shard canonicalises every link it finds.
_CANONICAL_RE = re.compile(
    r"(https?)://(?:[a-z0-9-]{1,63}\.)*[a-z0-9-]{1,63}(?::([1-9][0-9]{0,4}))?"
    r"/[A-Za-z0-9\-_~!$&'()*+,=:@/.]*"  # not ";": w3lib splits path parameters off
)


def key_of(url: str) -> str:
    """The canonical form of `url`, an http(s) URL as `thresher.weburl.resolve` gives it
    (for any other text, `canonicalize`)."""
    m = _CANONICAL_RE.fullmatch(url)
    if m is not None and "/." not in url:
        port = m.group(2)
        if port is None or (int(port) <= 65535 and int(port) != DEFAULT_PORTS[m.group(1)]):
            return url
    return _canonicalize(url)


def _canonicalize(url: str) -> str:
    """`key_of` by the full rules."""
    try:
        canon = canonicalize_url(url)
    except (ValueError, UnicodeError) as exc:  # not for a URL resolve gave; to be sure
        raise InvalidURL(url, str(exc)) from None
    scheme, _, rest = canon.partition("://")
    cut = rest.find("/")
    if cut < 0:
        cut = len(rest)
    userinfo, at, hostport = rest[:cut].rpartition("@")
    if hostport.startswith("["):  # an IPv6 address: no name, no dots to drop
        return canon
    host, colon, port = hostport.partition(":")
    if not host.endswith(".") or host.endswith("..") or host == ".":
        return canon
    return f"{scheme}://{userinfo}{at}{host[:-1]}{colon}{port}{rest[cut:]}"


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
