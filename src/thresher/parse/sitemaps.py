"""Sitemaps (sitemaps.org protocol 0.9): the URLs a site lists, read safely and in bounded
memory.

`read_sitemap` takes a fetched sitemap (XML ``urlset`` or ``sitemapindex``, a text file
of one URL a line, either gzipped) and returns its page URLs with their ``lastmod``, or
the sitemaps an index lists. No I/O: the crawler fetches (politely, like pages) and
decides what is in scope. The ``Sitemap:`` lines of a robots.txt are read with its rules
(`thresher.frontier.robots.RobotsCache.sitemaps`).

- **gzip**: a body that starts with gzip's magic bytes is decompressed here (a
  ``.xml.gz`` file served as ``application/gzip``); one sent with ``Content-Encoding:
  gzip`` was decoded by the fetcher already.
- **Limits** (the protocol's): at most `MAX_URLS` (50,000) URLs or sitemaps per file and
  `MAX_BYTES` (50 MiB) uncompressed; past either the rest is left unread, what came
  before is kept, and `Sitemap.error` says why.
- **XML** is read with lxml's incremental parser (`lxml.etree.XMLPullParser`), fed 64 KiB
  at a time, each ``url`` element dropped once read, so a 50 MiB sitemap never becomes a
  50 MiB tree. It is refused safely: entities are not resolved, nothing is fetched from
  the network, lxml's ``huge_tree`` stays off (its limits on depth and text size hold),
  and a document with a DOCTYPE (the carrier of entity expansion, "billion laughs" and
  external entities; no sitemap needs one) is refused when its root element starts.
  Malformed XML keeps the URLs read before the fault.
- **Namespaces**: elements are matched by local name, so the old 0.84 namespace and
  sitemaps with none are read too; extensions (``image:loc``, ``xhtml:link``) are not.
- **lastmod** is kept as written when it is a W3C Datetime (``2024-05-12``,
  ``2024-05-12T10:22:31+00:00`` …); anything else is dropped.
- Text sitemaps: UTF-8, one absolute http(s) URL a line; other lines are skipped.

RSS and Atom feeds, which the protocol also allows, are not read.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from lxml import etree

from thresher.parse.links import resolver

__all__ = ["MAX_BYTES", "MAX_URLS", "Sitemap", "read_sitemap"]

MAX_URLS = 50_000
MAX_BYTES = 50 * 2**20
_CHUNK = 64 * 1024
_GZIP_MAGIC = b"\x1f\x8b"
_W3C_DATETIME_RE = re.compile(
    r"\d{4}(?:-\d{2}(?:-\d{2}(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:\d{2}))?)?)?"
)
_MAX_LASTMOD = 64
_FULL = f"more than {MAX_URLS} entries: the rest skipped"

_Resolve = Callable[[str], "str | None"]


@dataclass
class Sitemap:
    """What one sitemap file lists."""

    urls: list[tuple[str, str | None]] = field(default_factory=list)
    """Page URLs (absolute, as links are resolved) with their lastmod, in file order."""
    sitemaps: list[str] = field(default_factory=list)
    """The sitemaps a sitemap index lists."""
    error: str | None = None
    """Why the file was refused, or read only in part (what was read is kept)."""

    @property
    def count(self) -> int:
        return len(self.urls) + len(self.sitemaps)


def _lastmod(text: str | None) -> str | None:
    if not text:
        return None
    text = text.strip()
    if len(text) <= _MAX_LASTMOD and _W3C_DATETIME_RE.fullmatch(text):
        return text
    return None


def _chunks(body: bytes, sitemap: Sitemap) -> Iterator[bytes]:
    """The bytes of the file in chunks, gunzipped if gzipped, at most MAX_BYTES."""
    if not body.startswith(_GZIP_MAGIC):
        if len(body) > MAX_BYTES:
            sitemap.error = f"larger than {MAX_BYTES} bytes: read in part"
        for start in range(0, min(len(body), MAX_BYTES), _CHUNK):
            yield body[start : start + _CHUNK]
        return
    inflate = zlib.decompressobj(wbits=31)
    total = 0
    for start in range(0, len(body), _CHUNK):
        data = body[start : start + _CHUNK]
        while data:
            try:
                out = inflate.decompress(data, _CHUNK)
            except zlib.error as exc:
                sitemap.error = f"bad gzip data: {exc}"
                return
            total += len(out)
            if total > MAX_BYTES:
                sitemap.error = f"larger than {MAX_BYTES} bytes uncompressed: read in part"
                yield out[: len(out) - (total - MAX_BYTES)]
                return
            if out:
                yield out
            data = inflate.unconsumed_tail
        if inflate.eof:
            return
    sitemap.error = "the gzip data ends too soon"


def read_sitemap(body: bytes, url: str) -> Sitemap:
    """The URLs or sitemaps listed in `body`, the sitemap fetched from `url` (which
    relative locations resolve against). Never raises."""
    sitemap = Sitemap()
    chunks = _chunks(body, sitemap)
    first = b""
    for chunk in chunks:
        first = chunk
        if chunk.strip():
            break
    head = first.lstrip(b"\xef\xbb\xbf \t\r\n")
    resolve = resolver(url)
    if head.startswith(b"<"):
        _read_xml(first, chunks, resolve, sitemap)
    elif head:
        _read_text(first, chunks, resolve, sitemap)
    return sitemap


def _local(tag: object) -> str:
    return tag.rpartition("}")[2] if isinstance(tag, str) else ""


_ROOT_START_RE = re.compile(rb"<[A-Za-z_]")


def _read_xml(first: bytes, rest: Iterator[bytes], resolve: _Resolve, sitemap: Sitemap) -> None:
    # A DOCTYPE is refused before lxml reads it (lxml would refuse an entity bomb too,
    # but with a message about amplification); the root element's docinfo is checked
    # again below, for a prolog longer than the first chunk.
    root_start = _ROOT_START_RE.search(first)
    if b"<!DOCTYPE" in (first if root_start is None else first[: root_start.start()]).upper():
        sitemap.error = "refused: a sitemap has no DOCTYPE"
        return
    parser = etree.XMLPullParser(
        events=("end",),
        tag=("{*}url", "{*}sitemap"),
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        huge_tree=False,
        remove_comments=True,
        remove_pis=True,
    )
    kind: str | None = None  # "urlset" or "sitemapindex", once the root is known
    chunk: bytes | None = first
    try:
        while chunk is not None:
            parser.feed(chunk)
            for _, element in parser.read_events():
                if not isinstance(element, etree._Element):
                    continue
                if kind is None:
                    kind = _check_root(element.getroottree(), sitemap)
                    if kind is None:
                        return
                if not _take_entry(element, kind, resolve, sitemap):
                    return
                # Read: drop it, and what came before it, from the tree.
                element.clear()
                parent = element.getparent()
                if parent is not None:
                    while element.getprevious() is not None:
                        del parent[0]
            chunk = next(rest, None)
        root = parser.close()
        if kind is None:
            _check_root(root.getroottree(), sitemap)
    except etree.XMLSyntaxError as exc:
        if sitemap.error is None:
            sitemap.error = f"malformed XML: {exc}"


def _check_root(tree: etree._ElementTree, sitemap: Sitemap) -> str | None:
    """The sitemap's kind from its root element, or None (and why) if it is none."""
    docinfo = tree.docinfo
    if docinfo.internalDTD is not None or docinfo.doctype:
        sitemap.error = "refused: a sitemap has no DOCTYPE"
        return None
    kind = _local(tree.getroot().tag)
    if kind not in ("urlset", "sitemapindex"):
        sitemap.error = f"not a sitemap: the root element is {kind!r}"
        return None
    return kind


def _take_entry(element: etree._Element, kind: str, resolve: _Resolve, sitemap: Sitemap) -> bool:
    """Take one url or sitemap element; False once the limit is reached."""
    loc: str | None = None
    lastmod: str | None = None
    for child in element:
        name = _local(child.tag)
        if name == "loc":
            loc = child.text
        elif name == "lastmod":
            lastmod = child.text
    target = resolve(loc.strip()) if loc else None
    if target is None:
        return True
    if sitemap.count >= MAX_URLS:
        sitemap.error = _FULL
        return False
    name = _local(element.tag)
    if kind == "sitemapindex" and name == "sitemap":
        sitemap.sitemaps.append(target)
    elif kind == "urlset" and name == "url":
        sitemap.urls.append((target, _lastmod(lastmod)))
    return True


def _read_text(first: bytes, rest: Iterator[bytes], resolve: _Resolve, sitemap: Sitemap) -> None:
    pending = b""
    chunk: bytes | None = first
    while chunk is not None:
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        for line in lines:
            if _take_line(line, resolve, sitemap):
                return
        chunk = next(rest, None)
    _take_line(pending, resolve, sitemap)


def _take_line(line: bytes, resolve: _Resolve, sitemap: Sitemap) -> bool:
    """Take one line of a text sitemap; whether the limit is reached."""
    text = line.decode("utf-8", "replace").strip().removeprefix("\ufeff")
    if not text.lower().startswith(("http://", "https://")):
        return False
    target = resolve(text)
    if target is not None:
        if len(sitemap.urls) >= MAX_URLS:
            sitemap.error = _FULL
            return True
        sitemap.urls.append((target, None))
    return False
