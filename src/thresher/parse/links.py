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

Each URL is cleaned the way the URL standard parses an ``href``: surrounding C0 controls
and spaces are stripped, tabs and newlines inside are removed, ``\\`` counts as ``/``
before the query. Empty links, fragment-only links and every scheme other than http(s)
(``javascript:``, ``mailto:``, ``data:``, ``tel:``, …) are skipped; the fragment is
dropped. Links are resolved as the URL standard resolves them for http(s), by string
concatenation: dot segments are removed (``%2e`` counting as a dot, as browsers do),
``http:x`` on an http page is relative, ``http:/x`` and ``///x`` name the host ``x``.
A result whose host is missing or unusable (bad IPv6 literal, port outside 0-65535,
characters no host can hold, a name IDNA cannot encode) is dropped.

URLs that are ASCII and hold only characters valid in a URL are returned as they are;
the rest go through `w3lib.url.safe_url_string`, which percent-encodes as browsers do:
the path in UTF-8, the query in the page's encoding (so a link ``?q=é`` on a windows-1252
page asks for ``?q=%E9``, as a browser would), the host in IDNA. That keeps w3lib's
~5 µs per URL off the common case. The crawler canonicalises every link afterwards, so
nothing here normalises case, query order or default ports.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from urllib.parse import urlsplit

from selectolax.lexbor import LexborCSSSelector, LexborHTMLParser, SelectolaxError
from w3lib.url import safe_url_string

from thresher.parse.charset import decode_text, utf8_encoding
from thresher.parse.defuse import flatten_tags, thin_crowded
from thresher.parse.requisites import ATTRIBUTES as REQUISITE_ATTRIBUTES
from thresher.parse.requisites import Requisites

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


_SELECTOR = (
    "a[href],area[href],link,frame[src],iframe[src],base[href],meta[name],meta[http-equiv],title"
)
_HREF_TAGS = frozenset({"a", "area", "link"})
_SRC_TAGS = frozenset({"frame", "iframe"})
_ORIGIN_ONLY_RELS = frozenset({"dns-prefetch", "preconnect"})

_C0_OR_SPACE = "".join(chr(c) for c in range(0x21))
_DROP_TAB_NEWLINE = str.maketrans("", "", "\t\n\r")
_SCHEME_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_WEB_SCHEMES = frozenset({"http", "https"})
# Anything outside RFC 3986's unreserved, reserved and "%": safe_url_string has work to do.
_NEEDS_QUOTING_RE = re.compile(r"[^A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]")
# The URL standard's forbidden host code points (IPv6 literals are checked by urlsplit).
_BAD_HOST_RE = re.compile(r"[\x00-\x20#%/:<>?@\[\\\]^|\x7f]")
_DOT = frozenset({".", "%2e"})
_DOT_DOT = frozenset({"..", ".%2e", "%2e.", "%2e%2e"})
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


def _clean(raw: str) -> str:
    """An attribute value as the URL parser sees it (see the module docstring)."""
    href = raw.strip(_C0_OR_SPACE)
    if "\t" in href or "\n" in href or "\r" in href:
        href = href.translate(_DROP_TAB_NEWLINE)
    href = href.partition("#")[0]
    if "\\" in href:
        path, question, query = href.partition("?")
        href = path.replace("\\", "/") + question + query
    return href


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4 for an absolute path, with browsers' ``%2e`` as a dot."""
    segments = path.split("/")
    kept: list[str] = []
    for segment in segments[1:]:
        lowered = segment.lower()
        if lowered in _DOT_DOT:
            if kept:
                kept.pop()
        elif lowered not in _DOT:
            kept.append(segment)
    result = "/" + "/".join(kept)
    last = segments[-1].lower()
    if (last in _DOT or last in _DOT_DOT) and not result.endswith("/"):
        result += "/"
    return result


def _without_dot_segments(path: str) -> str:
    """`path` (absolute) with dot segments removed; cheap when there are none."""
    # Every segment follows a "/", so a dot segment needs "/." or "/%2e" somewhere.
    if "/." in path or "%2" in path:
        return _remove_dot_segments(path)
    return path


# Pages link to a handful of hosts many times over; each is checked once.
@lru_cache(maxsize=4096)
def _netloc_ok(netloc: str) -> bool:
    """Whether an authority has a usable host and port (IDNA is checked when quoting)."""
    try:
        parts = urlsplit("//" + netloc)
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError for a port outside 0-65535
    except ValueError:
        return False
    if not host or not host.rstrip("."):  # "." is no name, and canonicalize says so
        return False
    if ":" in host:  # an IPv6 literal, checked by urlsplit; browsers refuse zone ids
        return "%" not in host
    return _BAD_HOST_RE.search(host) is None


_ABSOLUTE_RE = re.compile(r"(https?)://([^/?]*)(.*)", re.IGNORECASE | re.DOTALL)


def _absolute(url: str, encoding: str) -> str | None:
    """An absolute URL (cleaned, no fragment) checked and finished, or None."""
    match = _ABSOLUTE_RE.fullmatch(url)
    if match is None:
        return None
    scheme, netloc, rest = match.groups()
    if not _netloc_ok(netloc):
        return None
    path, question, query = rest.partition("?")
    if path:
        clean_path = _without_dot_segments(path)
        if clean_path is not path:
            url = f"{scheme}://{netloc}{clean_path}{question}{query}"
    return _finished(url, encoding)


def _finished(url: str, encoding: str) -> str | None:
    """`url` percent-encoded where needed (see the module docstring), or None."""
    if url.isascii() and _NEEDS_QUOTING_RE.search(url) is None:
        return url
    try:
        try:
            safe = safe_url_string(url, encoding=encoding)
        except UnicodeEncodeError:  # the query holds a character the page's encoding lacks
            safe = safe_url_string(url, encoding="utf-8")
    except (ValueError, UnicodeError):
        return None
    # A host IDNA cannot encode comes back as Unicode: no resolver would find it.
    return safe if safe.isascii() else None


class _Base:
    """A checked absolute base URL taken apart once, so links resolve by concatenation."""

    __slots__ = ("directory", "origin", "plain", "scheme", "url", "without_query")

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        path = parts.path or "/"
        self.url = url
        self.scheme = parts.scheme.lower()
        self.origin = f"{self.scheme}://{parts.netloc}"
        self.without_query = self.origin + path
        self.directory = path[: path.rfind("/") + 1]
        # Paths resolve against it by concatenation only if it has no dot segment.
        self.plain = "/." not in self.directory and "%2" not in self.directory


def _base_of(url: str, encoding: str) -> _Base | None:
    """A `_Base` for an absolute http(s) URL, or None if `url` is not one."""
    checked = _absolute(_clean(url), encoding)
    return None if checked is None else _Base(checked)


# Most links are plain: an absolute http(s) URL or a path, of characters that need no
# cleaning or quoting, without dot segments. Their resolution is a concatenation at most
# (a property test holds it to `_resolve_any`'s), under half the time of the general rules.
_PLAIN_CHARS = r"[A-Za-z0-9\-._~!$&'()*+,;=:@/%]"
_PLAIN_ABSOLUTE_RE = re.compile(
    rf"https?://([A-Za-z0-9\-.:]+)(/{_PLAIN_CHARS}*)?(\?{_PLAIN_CHARS}*)?"
)
_PLAIN_PATH_RE = re.compile(r"[A-Za-z0-9\-_~!$&'()*+,;=@/%][A-Za-z0-9\-._~!$&'()*+,;=@/%]*")


def _resolve(raw: str, base: _Base | None, encoding: str) -> str | None:
    """`raw` (an attribute value) resolved against `base`, or None if it is no web link."""
    if raw.startswith("http"):
        plain = _PLAIN_ABSOLUTE_RE.fullmatch(raw)
        if plain is not None:
            path = plain.group(2)
            if (path is None or ("/." not in path and "%2" not in path)) and _netloc_ok(
                plain.group(1)
            ):
                return raw
    elif (
        base is not None
        and base.plain
        and _PLAIN_PATH_RE.fullmatch(raw)
        and "/." not in raw
        and "%2" not in raw
        and not raw.startswith("//")
    ):
        return base.origin + raw if raw[0] == "/" else base.origin + base.directory + raw
    return _resolve_any(raw, base, encoding)


def _resolve_any(raw: str, base: _Base | None, encoding: str) -> str | None:
    """`raw` (an attribute value) resolved against `base`, or None if it is no web link.

    Follows the URL standard for http(s): "http:path" is relative to an http base, and
    any number of slashes may precede a host ("http:/x", "///x" on an http page).
    """
    href = _clean(raw)
    if not href:
        return None
    scheme = _SCHEME_RE.match(href)
    if scheme is not None:
        name = scheme.group()[:-1].lower()
        if name not in _WEB_SCHEMES:
            return None
        rest = href[scheme.end() :]
        if base is None or name != base.scheme or rest.startswith("//"):
            return _absolute(f"{name}://{rest.lstrip('/')}", encoding)
        href = rest
        if not href:
            return None
    if base is None:
        return None
    if href[0] == "/":
        if href.startswith("//"):
            return _absolute(f"{base.scheme}://{href.lstrip('/')}", encoding)
        path, question, query = href.partition("?")
        return _finished(f"{base.origin}{_without_dot_segments(path)}{question}{query}", encoding)
    if href[0] == "?":
        return _finished(base.without_query + href, encoding)
    path, question, query = href.partition("?")
    path = _without_dot_segments(base.directory + path)
    return _finished(f"{base.origin}{path}{question}{query}", encoding)


# Big pages are defused before Lexbor parses them (see thresher.parse.defuse): a page
# with more than _FLATTEN_TAGS "<" (a 15 KB page has about 250) or _FLATTEN_LENGTH
# characters is flattened and its crowded tags cut down to the attributes this module
# reads. Lexbor then sees a shallow document and gives the same links, base, robots meta
# and title (a test checks it). Below both limits the worst case is about 60 ms (a 32 KB
# attribute bomb). Flattening is not done to every page because it can misread a
# tag-like string inside a comment and costs up to twice the parse on pages of mostly text.
_FLATTEN_TAGS = 1000
_FLATTEN_LENGTH = 32 * 1024
_READ_ATTRIBUTES = frozenset({"href", "src", "rel", "name", "content", "http-equiv"})


_READ_WITH_REQUISITES = _READ_ATTRIBUTES | REQUISITE_ATTRIBUTES


def _flatten(text: str, requisites: bool) -> str:
    if requisites:
        return thin_crowded(flatten_tags(text, embeds=True), _READ_WITH_REQUISITES)
    return thin_crowded(flatten_tags(text), _READ_ATTRIBUTES)


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
    body: bytes, url: str, content_type: str | None = None, *, requisites: bool = False
) -> Page:
    """The links, base, robots nofollow, encoding and title of the page `body` at `url`,
    and with `requisites` what it embeds.

    `content_type` is the Content-Type header, for its charset. Never raises.
    """
    markup: str | bytes
    utf8_codec = utf8_encoding(body, content_type)
    if utf8_codec is not None:
        # Lexbor reads bytes as UTF-8, and these are: no decoding and encoding back.
        markup, encoding = body, utf8_codec
        # The "<" counted as what removing them takes away: bytes.replace finds a byte
        # with memchr, bytes.count looks at every byte (1.4 against 4.6 µs for 12 KB).
        if len(body) > _FLATTEN_LENGTH or len(body) - len(body.replace(b"<", b"")) > _FLATTEN_TAGS:
            markup = _flatten(body.decode("utf-8"), requisites)
    else:
        markup, encoding = decode_text(body, content_type)
        if len(markup) > _FLATTEN_LENGTH or markup.count("<") > _FLATTEN_TAGS:
            markup = _flatten(markup, requisites)
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

    links: list[str] = []
    seen: set[str] = set()
    for raw in raw_links:
        link = _resolve(raw, base, query_encoding)
        if link is not None and link not in seen:
            seen.add(link)
            links.append(link)
    embedded: list[str] = []
    if embeds is not None and root is not None:
        embeds.collect(root, _selector())
        embedded = embeds.urls(lambda raw: _resolve(raw, base, query_encoding))
    return Page(links, base.url if base is not None else url, nofollow, encoding, title, embedded)


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
