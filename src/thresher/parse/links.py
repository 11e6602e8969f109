"""Outgoing links of an HTML page, as absolute http(s) URLs, fast and without surprises.

This is on the crawler's hot path (a thousand pages a second on two cores, with fetching
and WARC writing), so it costs one Lexbor parse plus a few string operations per link; a
15 KB page with 20 links takes about 250 µs (numbers and how they were measured are in
the package docstring). It never raises on what a server sends: broken markup, binary
garbage and invalid bytes give fewer links, not an exception, and hostile markup (a
million nested ``<div>``s, a tag with a hundred thousand attributes) costs linear time.

What counts as a link, decided as an archiving crawler (Heritrix, BUbiNG) decides:

- ``a[href]``, ``area[href]``, ``link[href]``, ``frame[src]``, ``iframe[src]``, and the
  target of ``<meta http-equiv="refresh" content="0; url=...">`` (a redirect by markup,
  common on archive index pages; Heritrix follows it too);
  ``rel=nofollow`` is *not* honoured: since 2019 even search engines treat it as a hint
  about endorsement, not as a crawl directive, and a harvester that is asked for a
  complete copy must not skip pages because an author did not vouch for them.
  ``<meta name="robots" content="nofollow">`` (or ``none``) is reported in
  `Page.nofollow`; the links are still returned and the caller decides.
- ``link rel=dns-prefetch`` and ``rel=preconnect`` are skipped: they name an origin to
  warm up a connection to, not a resource, and would only queue every CDN's home page.
- The base URL is the first ``base`` element with an ``href`` anywhere in the document
  (the HTML standard's rule, so a ``base`` in the body counts), resolved against the page
  URL, if that gives an http(s) URL; otherwise the page URL.

Each link is resolved as a browser resolves it (`thresher.weburl.resolve`: the WHATWG
URL Standard, by ada-url), and returned as that gives it without the fragment: the URL
a browser would ask the server for, nothing re-ordered or re-encoded. The query is
percent-encoded in the page's encoding, as browsers do (a link ``?q=é`` on a
windows-1252 page asks for ``?q=%E9``). Empty and fragment-only links (the page
itself) and links to any scheme but http(s) (``javascript:``, ``mailto:``, ``data:``,
``tel:``, …) are skipped, as are those the Standard fails (a bad port, a host no IDNA
allows). Plain links, which the Standard would give back as they are or joined to the
base by concatenation, are recognised by a regular expression and skip ada-url's
parse (see `_resolve`). The crawler keys every link by its canonical form
(`thresher.frontier.canonical`) and fetches it as it is here.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

from selectolax.lexbor import LexborCSSSelector, LexborHTMLParser, SelectolaxError

from thresher.parse.charset import decode_text, utf8_encoding
from thresher.parse.defuse import flatten_tags, has_crowded, thin_crowded
from thresher.parse.requisites import ATTRIBUTES as REQUISITE_ATTRIBUTES
from thresher.parse.requisites import Requisites
from thresher.weburl import resolve

__all__ = ["Page", "extract_links", "is_html", "resolver"]


@dataclass(frozen=True)
class Page:
    """What a crawler needs from one HTML page."""

    links: list[str]
    """Absolute http(s) URLs without fragment, in document order, each once."""
    base: str
    """The URL relative links were resolved against."""
    nofollow: bool
    """The page's robots meta tag says nofollow (or none); X-Robots-Tag is the caller's."""
    encoding: str
    """The Python codec the page was read with (see `thresher.parse.charset`)."""
    title: str | None
    """The first title element's text, whitespace collapsed; None if absent or blank."""
    requisites: list[str] = field(default_factory=list)
    """What the page embeds (`thresher.parse.requisites`), resolved, each once; only
    when asked for, and then its stylesheets, icons and preloads are not in `links`."""
    dropped: int = 0
    """Links and requisites past `max_links` (each list's): not read (see `_cut`)."""


_SELECTOR = (
    "a[href],area[href],link,frame[src],iframe[src],base[href],meta[name],meta[http-equiv],title"
)
_HREF_TAGS = frozenset({"a", "area", "link"})
_SRC_TAGS = frozenset({"frame", "iframe"})
_ORIGIN_ONLY_RELS = frozenset({"dns-prefetch", "preconnect"})

_C0_OR_SPACE = "".join(chr(c) for c in range(0x21))
_TOKEN_SEPARATORS_RE = re.compile(r"[\s,]+")
# The HTML standard's declarative refresh: a time, then optionally ";" or ",", "url=",
# and the URL, quoted (up to the matching quote) or not (the rest).
_REFRESH_RE = re.compile(
    r"""\s*[0-9.]+\s*(?:[;,]\s*)?(?:url\s*=\s*)?(?:"([^"]*)|'([^']*)|(.*))""",
    re.IGNORECASE | re.DOTALL,
)


def _refresh_target(content: str) -> str | None:
    """The URL of a ``<meta http-equiv="refresh">``'s content, or None (a plain reload)."""
    match = _REFRESH_RE.match(content)
    if match is None:
        return None
    target = next(group for group in match.groups() if group is not None)
    return target or None


class _Base:
    """A base URL as `resolve` gives it, taken apart once so that plain links resolve by
    concatenation. Its serialisation percent-encodes "/", "?" and "#" in the user info,
    so the first "/" after "//" starts the path and the first "?" the query."""

    __slots__ = ("directory", "origin", "url", "without_query")

    def __init__(self, url: str) -> None:
        path_start = url.index("/", url.index("//") + 2)
        query = url.find("?")
        self.url = url
        self.origin = url[:path_start]  # scheme, user info, host and port
        self.without_query = url if query < 0 else url[:query]
        path = self.without_query[path_start:]
        self.directory = path[: path.rfind("/") + 1]


def _base_of(url: str, encoding: str) -> _Base | None:
    """A `_Base` for an absolute http(s) URL, or None if `url` is not one."""
    resolved = resolve(url, None, encoding)
    return None if resolved is None else _Base(resolved)


# Most links are plain: what the URL Standard would give back unchanged, or joined to the
# base by concatenation. A plain absolute URL has a lowercase http(s) scheme, a plain host
# and port (`_plain_authority`), a path and a query of characters the Standard leaves as
# they are ("'" is escaped in a query), and no dot segment ("." or "%2e" between slashes).
# A property test holds these shortcuts to ada-url's answers; they take 0.5-1 µs a link,
# ada-url 2-4 (it parses the base again on every call).
_PATH_CHARS = r"[A-Za-z0-9\-._~!$&'()*+,;=:@/%]"
_QUERY_CHARS = r"[A-Za-z0-9\-._~!$&()*+,;=:@/%?]"
_PLAIN_ABSOLUTE_RE = re.compile(
    rf"(https?)://([a-z0-9\-.]+)(?::([0-9]{{1,5}}))?(/{_PATH_CHARS}*)?(\?{_QUERY_CHARS}*)?"
)
# A relative path (no ":", which could end a scheme; not starting with "." or "//"), a
# query, or both.
_PLAIN_RELATIVE_RE = re.compile(
    r"([A-Za-z0-9\-_~!$&'()*+,;=@%/][A-Za-z0-9\-._~!$&'()*+,;=@%/]*)?"
    rf"(\?{_QUERY_CHARS}*)?"
)
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_DOTTED_QUAD_RE = re.compile(rf"(?:{_OCTET}\.){{3}}{_OCTET}")
_DEFAULT_PORTS = {"http": 80, "https": 443}


@lru_cache(maxsize=4096)  # a page links to a few hosts, many times over
def _plain_authority(scheme: str, host: str, port: str | None) -> bool:
    """Whether the URL Standard writes this host (lowercase letters, digits, "-" and ".")
    and port as they are: labels not empty, none an "xn--" one (whose Punycode it
    checks), the last starting with a letter (else it reads an IPv4 address) or the
    whole a dotted quad as it writes one; a port without leading zeros, not the default."""
    labels = host.split(".")
    if "" in labels or any(label.startswith("xn--") for label in labels):
        return False
    if not labels[-1][0].isalpha() and _DOTTED_QUAD_RE.fullmatch(host) is None:
        return False
    return port is None or (
        port[0] != "0" and int(port) <= 65535 and int(port) != _DEFAULT_PORTS[scheme]
    )


def _resolve(raw: str, base: _Base | None, encoding: str) -> str | None:
    """`raw` (an attribute value) resolved against `base` as a browser resolves it,
    without its fragment; None if it is no http(s) link, or names the page itself."""
    href = raw
    cut = raw.find("#")
    if cut >= 0:
        if cut == 0:
            return None
        raw = raw[:cut]  # for the shortcuts; ada-url strips spaces from the whole
    if raw.startswith("http"):
        plain = _PLAIN_ABSOLUTE_RE.fullmatch(raw)
        if plain is not None:
            scheme, host, port, path, query = plain.groups()
            if _plain_authority(scheme, host, port):
                if path is None:
                    return f"{scheme}://{host}{'' if port is None else ':' + port}/{query or ''}"
                if "/." not in path and "%2" not in path:
                    return raw
    elif base is not None and raw and not raw.startswith("//"):
        plain = _PLAIN_RELATIVE_RE.fullmatch(raw)
        if plain is not None:
            path = plain.group(1)
            if path is None:
                return base.without_query + raw
            if "/." not in path and "%2" not in path:
                if path[0] == "/":
                    return base.origin + raw
                return base.origin + base.directory + raw
    return _resolve_any(href, base, encoding)


# A page of API docs names each of a few pages hundreds of times ("#method.x"): past this
# many links, each is resolved once. Below it, the memo costs more than it saves.
_FEW_LINKS = 100


def _resolve_once(base: _Base | None, encoding: str) -> Callable[[str], str | None]:
    """`_resolve` against `base`, each link (without its fragment) resolved once."""
    memo: dict[str, str | None] = {}

    def once(raw: str) -> str | None:
        key = _link_key(raw)
        if key in memo:
            return memo[key]
        link = memo[key] = _resolve(raw, base, encoding)
        return link

    return once


def _link_key(raw: str) -> str:
    """What `_resolve(raw, …)` depends on: `raw` without its fragment, unless a space or
    control character ends what is before the "#" (the URL parser strips those from the
    end of the whole, so "a.html #x" is "a.html%20", and "a.html " is "a.html")."""
    cut = raw.find("#")
    if cut <= 0 or raw[cut - 1] <= " ":
        return raw
    return raw[:cut]


def _resolve_any(raw: str, base: _Base | None, encoding: str) -> str | None:
    """`_resolve` by ada-url, for any link."""
    text = raw.strip(_C0_OR_SPACE)
    if not text or text[0] == "#":  # the page itself ("\n#x" is "#x" by now)
        return None
    return resolve(raw, None if base is None else base.url, encoding)


# Big pages are defused before Lexbor parses them (see thresher.parse.defuse). What costs
# Lexbor quadratic time is depth, which needs tags, and crowded tags, which need bytes: a
# page with more than _FLATTEN_TAGS "<" (a 15 KB page has about 250, a 50 KB page of API
# docs about 1,600) is flattened, and a page longer than _FLATTEN_LENGTH has its crowded
# tags cut down to the attributes this module reads (so has a flattened page). Lexbor then
# gives the same links, base, robots meta and title (a test checks it). Below the limits
# the worst case is about 60 ms, here: 4,000 nested <div>s, or a 32 KB attribute bomb.
# Flattening is not done to every page because it can misread a tag-like string inside a
# comment, and costs about twice the parse (0.9 against 0.4 ms for a 50 KB page of docs).
_FLATTEN_TAGS = 4000
_FLATTEN_LENGTH = 32 * 1024
_READ_ATTRIBUTES = frozenset({"href", "src", "rel", "name", "content", "http-equiv"})


_READ_WITH_REQUISITES = _READ_ATTRIBUTES | REQUISITE_ATTRIBUTES


# A tag that may name a URL (a link, or with requisites an embed), as the flattened
# markup has it; matched as `thresher.parse.defuse` matches tags, possessively, so a run
# of unterminated tags costs linear time.
_URL_TAG_RE = re.compile(
    r"""<(?:a|area|link|frame|iframe|img|source|track|input|embed|wbr)(?=[\s/>])"""
    r"""(?:[^<>="']|=\s*(?:"[^"]*"|'[^']*')?|["'])*+>""",
    re.IGNORECASE,
)


def _cut(text: str, budget: int) -> tuple[str, int]:
    """`text` with every tag that may name a URL after the first `budget` taken out, and
    how many were. A page of a million links costs Lexbor a tree of a million elements
    (560 MiB for 24 MB of markup); the rest of the page, title, base and robots meta
    included, is still read."""
    if text.count("<") <= budget:
        return text, 0
    for n, match in enumerate(_URL_TAG_RE.finditer(text)):
        if n == budget:
            start = match.start()
            rest, cut = _URL_TAG_RE.subn("", text[start:])
            return text[:start] + rest, cut
    return text, 0


def _flatten(text: str, requisites: bool) -> str:
    return _thin(flatten_tags(text, embeds=requisites), requisites)


def _thin(text: str, requisites: bool) -> str:
    return thin_crowded(text, _READ_WITH_REQUISITES if requisites else _READ_ATTRIBUTES)


# A parser's own css() builds a CSS engine per document, which costs about as much as
# matching; one engine per thread serves every document (engines are not thread-safe).
_engines = threading.local()


def _selector() -> LexborCSSSelector:
    engine: LexborCSSSelector | None = getattr(_engines, "selector", None)
    if engine is None:
        # selectolax's stub leaves this __init__ without "-> None"
        engine = _engines.selector = LexborCSSSelector()  # type: ignore[no-untyped-call]
    return engine


def _collapse(text: str) -> str | None:
    collapsed = " ".join(text.split())
    return collapsed or None


def resolver(base_url: str) -> Callable[[str], str | None]:
    """Resolves URLs as written (in a stylesheet, a sitemap) against `base_url` as links
    are resolved, queries encoded in UTF-8; None for what is no http(s) URL."""
    base = _base_of(base_url, "utf-8")
    return lambda raw: _resolve(raw, base, "utf-8")


def extract_links(
    body: bytes,
    url: str,
    content_type: str | None = None,
    *,
    requisites: bool = False,
    max_links: int | None = None,
) -> Page:
    """The links, base, robots nofollow, encoding and title of the page `body` at `url`,
    and with `requisites` what it embeds.

    `content_type` is the Content-Type header, for its charset. With `max_links`, the
    first `max_links` links (and requisites) in document order are kept and the rest
    counted in `Page.dropped`; a big page's markup past twice that many tags naming a
    URL is not even parsed for them (`_cut`), so memory stays bounded. Never raises.
    """
    markup: str | bytes
    dropped = 0
    budget = _FLATTEN_TAGS if max_links is None else 2 * max_links + _FLATTEN_TAGS
    utf8_codec = utf8_encoding(body, content_type)
    if utf8_codec is not None:
        # Lexbor reads bytes as UTF-8, and these are: no decoding and encoding back.
        markup, encoding = body, utf8_codec
        # The "<" counted as what removing them takes away: bytes.replace finds a byte
        # with memchr, bytes.count looks at every byte (1.4 against 4.6 µs for 12 KB).
        if len(body) - len(body.replace(b"<", b"")) > _FLATTEN_TAGS:
            markup = _flatten(body.decode("utf-8"), requisites)
        elif len(body) > _FLATTEN_LENGTH and has_crowded(body):
            markup = _thin(body.decode("utf-8"), requisites)
    else:
        markup, encoding = decode_text(body, content_type)
        if markup.count("<") > _FLATTEN_TAGS:
            markup = _flatten(markup, requisites)
        elif len(markup) > _FLATTEN_LENGTH:
            markup = _thin(markup, requisites)
    if max_links is not None and isinstance(markup, str):
        markup, dropped = _cut(markup, budget)
    # A URL's query is percent-encoded in the page's encoding, except that UTF-16 pages
    # use UTF-8 (the URL standard's rule, as UTF-16 bytes would put NULs in the URL).
    query_encoding = "utf-8" if encoding.startswith("utf-16") else encoding
    page_base = _base_of(url, query_encoding)
    try:
        tree = LexborHTMLParser(markup)
    except (SelectolaxError, RuntimeError, ValueError):
        return Page([], url, False, encoding, None)
    root = tree.root
    nodes = [] if root is None else _selector().find(_SELECTOR, root)

    raw_links: list[str] = []
    embeds = Requisites() if requisites else None
    base_href: str | None = None
    nofollow = False
    title: str | None = None
    seen_title = False
    for node in nodes:
        tag = node.tag
        if tag in _HREF_TAGS:
            attrs = node.attrs
            if tag == "link":
                rel = attrs.get("rel")
                if rel:
                    rels = set(rel.lower().split())
                    if rels and rels <= _ORIGIN_ONLY_RELS:
                        continue
                    if embeds is not None and embeds.link(rels, attrs):
                        continue
            href = attrs.get("href")
            if href is None:
                continue
            raw_links.append(href)
        elif tag in _SRC_TAGS:
            src = node.attrs.get("src")
            if src is not None:
                raw_links.append(src)
        elif tag == "base":
            if base_href is None:  # a valueless href is "", which resolves to the page
                base_href = node.attrs.get("href") or ""
        elif tag == "meta":
            attrs = node.attrs
            content = attrs.get("content")
            if not content:
                continue
            name = attrs.get("name")
            if name and name.strip().lower() == "robots":
                tokens = _TOKEN_SEPARATORS_RE.split(content.lower())
                nofollow = nofollow or "nofollow" in tokens or "none" in tokens
            pragma = attrs.get("http-equiv")
            if pragma and pragma.strip().lower() == "refresh":
                target = _refresh_target(content)
                if target is not None:
                    raw_links.append(target)
        elif tag == "title" and not seen_title:
            seen_title = True
            title = _collapse(node.text(deep=True))

    base = page_base
    if base_href is not None and page_base is not None:
        resolved = _resolve(base_href, page_base, query_encoding)
        if resolved is not None:
            base = _Base(resolved)
    elif base_href is not None:
        base = _base_of(base_href, query_encoding)

    once = _resolve_once(base, query_encoding) if len(raw_links) > _FEW_LINKS else None
    links: list[str] = []
    seen: set[str] = set()
    for raw in raw_links:
        link = _resolve(raw, base, query_encoding) if once is None else once(raw)
        if link is not None and link not in seen:
            seen.add(link)
            links.append(link)
    embedded: list[str] = []
    if embeds is not None and root is not None:
        embeds.collect(root, _selector())
        embedded = embeds.urls(once or (lambda raw: _resolve(raw, base, query_encoding)))
    if max_links is not None:
        dropped += max(0, len(links) - max_links) + max(0, len(embedded) - max_links)
        del links[max_links:], embedded[max_links:]
    return Page(
        links, base.url if base is not None else url, nofollow, encoding, title, embedded, dropped
    )


_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
# Types that say nothing, which browsers sniff as if there were no header.
_UNKNOWN_TYPES = frozenset({"", "unknown/unknown", "application/unknown", "*/*"})
# The MIME Sniffing standard's HTML patterns (after leading whitespace, then a space or
# ">"), plus an XML declaration followed by an XHTML doctype or root, which it leaves to
# XML but which a crawler wants to read as a page.
_HTML_SNIFF_RE = re.compile(
    rb"[\t\n\x0c\r ]*(?:"
    rb"<(?:!doctype html|html|head|script|iframe|h1|div|font|table|a|style|title|b|body|br|p"
    rb"|!--)[ >]"
    rb"|<\?xml[^>]*>\s*(?:<!--.*?-->\s*)*<(?:!doctype html|html)[\s>])",
    re.IGNORECASE | re.DOTALL,
)
_SNIFF_BYTES = 1445  # the MIME Sniffing standard's resource header


def is_html(content_type: str | None, body: bytes) -> bool:
    """Whether a response is an HTML page: by its Content-Type, else by sniffing `body`.

    Sniffing happens only when the header is missing, unparseable or says nothing
    (``*/*``, ``application/unknown``); ``text/plain`` and other real types are trusted.
    """
    if content_type is not None:
        essence = content_type.partition(";")[0].strip(" \t\r\n").lower()
        if essence in _HTML_TYPES:
            return True
        if essence not in _UNKNOWN_TYPES and "/" in essence:
            return False
    head = body[:_SNIFF_BYTES]
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    return _HTML_SNIFF_RE.match(head) is not None
