"""The full-text link of a landing page: where a paper's PDF (or JATS XML) really is.

A URL that a digital library says holds a paper's PDF often answers with the paper's
landing page: a publisher's article page, a repository record, an arXiv abstract. The
ingest then has to find the file on that page and fetch it, as a reader would click
"Download PDF". `find_fulltext_link` tries these techniques in order and returns the
first link one of them finds; the technique's name goes into the ingest result, so that
the mix of techniques (and the hits each one leads to) can be counted.

For ``pdf``:

``citation_pdf_url``
    ``<meta name="citation_pdf_url">``: the Highwire Press tags that Google Scholar's
    inclusion guidelines ask for. OJS, DSpace, arXiv and most publisher platforms emit
    them, so this one finds most PDFs.
``bepress_citation_pdf_url``
    The same tag with the prefix bepress Digital Commons (institutional repositories)
    uses.
``eprints_document_url``
    ``<meta name="eprints.document_url">`` of EPrints repositories (one per document;
    those ending in ``.pdf`` first).
``dc_identifier_pdf`` / ``prism_url_pdf``
    Dublin Core ``DC.identifier`` (or ``DCTERMS.identifier``) and PRISM's ``prism.url``,
    only when they end in ``.pdf``: mostly they hold a DOI or the page itself.
``link_alternate_pdf``
    ``<link rel="alternate" type="application/pdf" href>``: HTML's own way to name
    another representation of the page, which some publisher platforms and journal
    themes use for the PDF.
``ojs_galley_page``
    The page is an Open Journal Systems galley viewer, ``.../article/view/ID/GALLEY``:
    the file itself is ``.../article/download/ID/GALLEY``.
``ojs_galley_link``
    OJS 3's default theme's galley button, ``<a class="obj_galley_link pdf">``; its
    viewer URL is turned into the download URL, saving a hop.
``ojs_galley_view``
    Any link to an OJS galley (``article/view/ID/GALLEY``, ``viewFile`` or ``download``;
    OJS 2 and custom themes), as a download URL; links of the page's own article that
    mention PDF (in their text or class) first, then those of its own article, then any.
``dspace_bitstream``
    DSpace item pages: ``/bitstream/handle/PREFIX/ID/FILE.pdf?sequence=1`` (XMLUI),
    ``/bitstream/PREFIX/ID/SEQ/FILE.pdf`` (JSPUI) and DSpace 7's
    ``/bitstreams/UUID/download``.
``arxiv_abs``
    An arXiv abstract page ``/abs/ID`` (old- or new-style identifier, with or without
    version) has its PDF at ``/pdf/ID`` on the same host.
``anchor_text_pdf``
    A link whose text is "PDF", "Download PDF", "Full text (PDF)", "View PDF",
    "PDF (1.2 MB)" and similar, case-insensitive (an icon-only link by its
    ``aria-label`` or ``title``): what pages without metadata show readers. "Author
    guidelines (PDF)" does not count.
``anchor_href_pdf``
    A link whose path ends in ``.pdf``: the last resort, for plain staff pages and
    small society sites.

For ``xml``: ``citation_xml_url`` (the Highwire tag for full-text XML) and
``link_alternate_xml`` (``<link rel="alternate">`` of type ``application/xml``,
``text/xml`` or ``application/jats+xml``). For ``html`` the page is the result and there
is nothing to find; other ingest types (``dataset``) have no landing-page rule either:
both give None.

Every link is resolved as `thresher.parse.links` resolves links, honouring
``<base href>``, with the fragment dropped and only http(s) kept; a link to the page
itself (some sites put the landing page's own URL in ``citation_pdf_url``) is skipped,
and the next candidate or technique is tried; when nothing else is found, that link is
returned marked `FulltextLink.itself` (the walk calls it a ``link-loop``). The page is read as
`thresher.parse.charset` reads it (BOM, `declared_charset`, ``<meta charset>``, UTF-8,
windows-1252), at most its first 2 MB (landing pages are far smaller; the tags looked
for are in the head or near the top), and parsed once with Lexbor after markup that
would make Lexbor slow is taken out (see `_defused`). A 50 KB publisher page takes
about 0.5 ms. Nothing here raises on what a server sends.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from selectolax.lexbor import LexborHTMLParser, LexborNode, SelectolaxError

from thresher.parse.charset import decode_text
from thresher.parse.defuse import flatten_tags, thin_crowded
from thresher.parse.links import (
    _Base,
    _base_of,
    _resolve,
    _selector,
)

__all__ = [
    "MAX_PAGE_BYTES",
    "PDF_TECHNIQUES",
    "XML_TECHNIQUES",
    "FulltextLink",
    "find_fulltext_link",
]

MAX_PAGE_BYTES = 2 * 1024 * 1024
"""How much of a page is read; the rest is ignored."""


@dataclass(frozen=True, slots=True)
class FulltextLink:
    """Where a landing page says the full text is, and which technique said so."""

    url: str
    """An absolute http(s) URL without fragment, other than the page's own (unless
    `itself`)."""
    technique: str
    """One of `PDF_TECHNIQUES` or `XML_TECHNIQUES`."""
    itself: bool = False
    """The only full-text link the page has points back to the page itself: a loop
    (``link-loop`` in the walk, as sandcrawler has it), not a page without a link."""


_SELECTOR = "meta[content],link[href],a[href],base[href]"
_META_NAMES = frozenset(
    {
        "citation_pdf_url",
        "bepress_citation_pdf_url",
        "eprints.document_url",
        "dc.identifier",
        "dcterms.identifier",
        "prism.url",
        "citation_xml_url",
    }
)
_XML_TYPES = frozenset({"application/xml", "text/xml", "application/jats+xml"})
_MAX_ANCHOR_TEXT = 200

# OJS: .../article/{view,viewFile,download}/ARTICLE/GALLEY, the query kept.
_OJS_GALLEY_RE = re.compile(
    r"(https?://[^/?]+/(?:[^?]*/)?article/)(view|viewFile|download)/([^/?]+)/([^/?]+)/?(\?.*)?",
    re.IGNORECASE | re.DOTALL,
)
_OJS_ARTICLE_RE = re.compile(r"https?://[^?]*/article/view/([^/?]+)", re.IGNORECASE)
_DSPACE_RE = re.compile(
    r"https?://[^?]*/bitstream/[^?]*\.pdf(?:\?.*)?"
    r"|https?://[^?]*/bitstreams/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    r"/download/?(?:\?.*)?",
    re.IGNORECASE | re.DOTALL,
)
_ARXIV_HOSTS = frozenset({"arxiv.org", "www.arxiv.org", "export.arxiv.org"})
_ARXIV_ABS_RE = re.compile(r"https?://([^/?]+)/abs/([^?]+?)/?(?:\?.*)?", re.DOTALL)
# "PDF", "Download PDF", "Full text (PDF)", "View full-text PDF", "PDF (1.2 MB)",
# "Download (PDF, 2 MB)", "PDF download", ...
_PDF_TEXT_RE = re.compile(
    r"(?:(?:download|view|get|open|read)\s*)?(?:(?:the\s+)?(?:full[\s-]*text|article|paper)\s*)?"
    r"[(\[]?\s*pdf(?:\s*,[^)\]]*)?\s*[)\]]?(?:\s*(?:download|version|file))?"
    r"(?:\s*[(\[][^)\]]*[)\]])?",
    re.IGNORECASE,
)
# Icon-font glyphs (private use), arrows and other symbols around a button's words.
_SYMBOLS_RE = re.compile(r"[^\w\s()\[\],.\-]+")


def _ends_in_pdf(url: str) -> bool:
    return url.partition("?")[0].lower().endswith(".pdf")


def _page_key(url: str) -> tuple[str, str, str] | None:
    """What two URLs of the same page share: host and port, path, query (not scheme)."""
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").rstrip(".")
        port = parts.port
    except ValueError:
        return None
    if port is not None and port not in (80, 443):
        host = f"{host}:{port}"
    return host, parts.path.rstrip("/"), parts.query


@dataclass
class _Page:
    """What the techniques read, gathered in one pass over the parsed page."""

    tree: LexborHTMLParser  # the nodes below live as long as it does
    page: _Base | None
    base: _Base | None
    encoding: str
    metas: dict[str, list[str]] = field(default_factory=dict)
    alternates: list[tuple[str, str]] = field(default_factory=list)  # (type, href)
    anchors: list[tuple[LexborNode, str]] = field(default_factory=list)  # (node, href)
    _anchor_urls: list[tuple[LexborNode, str]] | None = None

    def resolve(self, raw: str) -> str | None:
        return _resolve(raw, self.base, self.encoding)

    def resolved(self, raws: Iterable[str]) -> Iterator[str]:
        for raw in raws:
            url = self.resolve(raw)
            if url is not None:
                yield url

    def anchor_urls(self) -> list[tuple[LexborNode, str]]:
        """The links' nodes and URLs, resolved once for all the techniques that read them."""
        if self._anchor_urls is None:
            self._anchor_urls = []
            for node, raw in self.anchors:
                url = self.resolve(raw)
                if url is not None:
                    self._anchor_urls.append((node, url))
        return self._anchor_urls


def _meta(name: str) -> Callable[[_Page], Iterator[str]]:
    def technique(page: _Page) -> Iterator[str]:
        return page.resolved(page.metas.get(name, ()))

    return technique


def _eprints_document_url(page: _Page) -> Iterator[str]:
    urls = list(page.resolved(page.metas.get("eprints.document_url", ())))
    yield from (url for url in urls if _ends_in_pdf(url))
    yield from (url for url in urls if not _ends_in_pdf(url))


def _dc_identifier_pdf(page: _Page) -> Iterator[str]:
    raws = page.metas.get("dc.identifier", []) + page.metas.get("dcterms.identifier", [])
    return (url for url in page.resolved(raws) if _ends_in_pdf(url))


def _prism_url_pdf(page: _Page) -> Iterator[str]:
    return (url for url in page.resolved(page.metas.get("prism.url", ())) if _ends_in_pdf(url))


def _link_alternate(types: frozenset[str]) -> Callable[[_Page], Iterator[str]]:
    def technique(page: _Page) -> Iterator[str]:
        return page.resolved(href for kind, href in page.alternates if kind in types)

    return technique


def _ojs_download(url: str) -> str | None:
    """An OJS galley URL as its download URL, or None if `url` is no galley URL."""
    match = _OJS_GALLEY_RE.fullmatch(url)
    if match is None:
        return None
    prefix, verb, article, galley, query = match.groups()
    if verb.lower() == "viewfile":  # OJS 2's direct download
        return url
    return f"{prefix}download/{article}/{galley}{query or ''}"


def _ojs_galley_page(page: _Page) -> Iterator[str]:
    if page.page is not None:
        match = _OJS_GALLEY_RE.fullmatch(page.page.url)
        if match is not None and match.group(2).lower() == "view":
            download = _ojs_download(page.page.url)
            if download is not None:
                yield download


def _classes(node: LexborNode) -> list[str]:
    return (node.attrs.get("class") or "").lower().split()


def _ojs_galley_link(page: _Page) -> Iterator[str]:
    for node, url in page.anchor_urls():
        classes = _classes(node)
        if "obj_galley_link" in classes and "pdf" in classes:
            yield _ojs_download(url) or url


def _anchor_text(node: LexborNode) -> str:
    """The words of a link: its text, else its aria-label or title; '' if too long.

    Symbols (icon-font glyphs, arrows) are dropped and whitespace is collapsed.
    """
    text = node.text(deep=True, separator=" ")
    if not text.strip():
        attrs = node.attrs
        text = attrs.get("aria-label") or attrs.get("title") or ""
    if len(text) > _MAX_ANCHOR_TEXT:
        return ""
    return " ".join(_SYMBOLS_RE.sub(" ", text).split())


def _mentions_pdf(node: LexborNode) -> bool:
    return "pdf" in (node.attrs.get("class") or "").lower() or "pdf" in _anchor_text(node).lower()


def _ojs_galley_view(page: _Page) -> Iterator[str]:
    article = None
    if page.page is not None:
        match = _OJS_ARTICLE_RE.match(page.page.url)
        article = match.group(1) if match is not None else None
    own_pdf: list[str] = []
    own: list[str] = []
    other: list[str] = []
    for node, url in page.anchor_urls():
        match = _OJS_GALLEY_RE.fullmatch(url)
        download = _ojs_download(url)
        if match is None or download is None:
            continue
        if match.group(3) == article:
            (own_pdf if _mentions_pdf(node) else own).append(download)
        else:
            other.append(download)
    yield from own_pdf
    yield from own
    yield from other


def _dspace_bitstream(page: _Page) -> Iterator[str]:
    return (url for _, url in page.anchor_urls() if _DSPACE_RE.fullmatch(url) is not None)


def _arxiv_abs(page: _Page) -> Iterator[str]:
    if page.page is None:
        return
    match = _ARXIV_ABS_RE.fullmatch(page.page.url)
    if match is not None and match.group(1).lower() in _ARXIV_HOSTS:
        yield f"{page.page.origin}/pdf/{match.group(2)}"


def _anchor_text_pdf(page: _Page) -> Iterator[str]:
    for node, url in page.anchor_urls():
        if _PDF_TEXT_RE.fullmatch(_anchor_text(node)) is not None:
            yield url


def _anchor_href_pdf(page: _Page) -> Iterator[str]:
    return (url for _, url in page.anchor_urls() if _ends_in_pdf(url))


_Technique = tuple[str, Callable[[_Page], Iterable[str]]]

_PDF: tuple[_Technique, ...] = (
    ("citation_pdf_url", _meta("citation_pdf_url")),
    ("bepress_citation_pdf_url", _meta("bepress_citation_pdf_url")),
    ("eprints_document_url", _eprints_document_url),
    ("dc_identifier_pdf", _dc_identifier_pdf),
    ("prism_url_pdf", _prism_url_pdf),
    ("link_alternate_pdf", _link_alternate(frozenset({"application/pdf"}))),
    ("ojs_galley_page", _ojs_galley_page),
    ("ojs_galley_link", _ojs_galley_link),
    ("ojs_galley_view", _ojs_galley_view),
    ("dspace_bitstream", _dspace_bitstream),
    ("arxiv_abs", _arxiv_abs),
    ("anchor_text_pdf", _anchor_text_pdf),
    ("anchor_href_pdf", _anchor_href_pdf),
)
_XML: tuple[_Technique, ...] = (
    ("citation_xml_url", _meta("citation_xml_url")),
    ("link_alternate_xml", _link_alternate(_XML_TYPES)),
)
_TECHNIQUES: dict[str, tuple[_Technique, ...]] = {"pdf": _PDF, "xml": _XML}

PDF_TECHNIQUES: tuple[str, ...] = tuple(name for name, _ in _PDF)
"""The techniques tried for ``pdf``, in order."""
XML_TECHNIQUES: tuple[str, ...] = tuple(name for name, _ in _XML)
"""The techniques tried for ``xml``, in order."""


def _content_type(declared_charset: str | None) -> str | None:
    """`declared_charset` as the Content-Type `decode_text` reads (a full one passes)."""
    if not declared_charset:
        return None
    if "=" in declared_charset:
        return declared_charset
    if '"' in declared_charset:
        return None
    return f'text/html; charset="{declared_charset.strip()}"'


# Lexbor's parse costs time quadratic in the depth of the tree and in the number of
# attributes of one element (see thresher.parse.defuse): 5000 nested <div>s take 80 ms,
# 20 000 take 1.4 s, and a tag with 16 000 attributes (64 KB) 200 ms. A page with more
# than _FLATTEN_TAGS "<" is therefore flattened, which leaves at most ~30 ms of nesting
# below the limit; a normal landing page (600 to 3000 tags) is parsed as it is, which
# halves the cost. Every tag with CROWDED attributes or more is then cut down to the
# attributes read here.
_FLATTEN_TAGS = 3000
_READ_ATTRIBUTES = frozenset({"href", "content", "name", "property", "rel", "type", "class"})
# Only a crowded tag's first attributes are read for those to keep.
_THIN_SCAN = 256


def _defused(text: str) -> str:
    """`text` with what would make Lexbor slow taken out (see above)."""
    if text.count("<") > _FLATTEN_TAGS:
        text = flatten_tags(text)
    return thin_crowded(text, _READ_ATTRIBUTES, scan=_THIN_SCAN)


def _read(html: bytes, base_url: str, declared_charset: str | None) -> _Page | None:
    """The page parsed and its candidates gathered, or None if Lexbor refuses it."""
    text, encoding = decode_text(html[:MAX_PAGE_BYTES], _content_type(declared_charset))
    # As in thresher.parse.links: queries in the page's encoding, except UTF-16's.
    encoding = "utf-8" if encoding.startswith("utf-16") else encoding
    text = _defused(text)
    try:
        tree = LexborHTMLParser(text)
    except (SelectolaxError, RuntimeError, ValueError):
        return None
    root = tree.root
    nodes = [] if root is None else _selector().find(_SELECTOR, root)
    page_base = _base_of(base_url, encoding)
    page = _Page(tree, page_base, page_base, encoding)
    base_href: str | None = None
    for node in nodes:
        tag = node.tag
        attrs = node.attrs
        if tag == "a":
            href = attrs.get("href")
            if href:
                page.anchors.append((node, href))
        elif tag == "meta":
            name = attrs.get("name") or attrs.get("property")
            content = attrs.get("content")
            if name and content:
                key = name.strip().lower()
                if key in _META_NAMES:
                    page.metas.setdefault(key, []).append(content)
        elif tag == "link":
            rel = (attrs.get("rel") or "").lower().split()
            href = attrs.get("href")
            if "alternate" in rel and href:
                kind = (attrs.get("type") or "").partition(";")[0].strip().lower()
                page.alternates.append((kind, href))
        elif tag == "base" and base_href is None:
            base_href = attrs.get("href") or ""
    if base_href is not None:
        if page_base is not None:
            resolved = _resolve(base_href, page_base, encoding)
            if resolved is not None:
                page.base = _Base(resolved)
        else:
            page.base = _base_of(base_href, encoding)
    return page


def find_fulltext_link(
    html: bytes,
    base_url: str,
    ingest_type: str = "pdf",
    declared_charset: str | None = None,
) -> FulltextLink | None:
    """The link to the full text of `ingest_type` on the landing page `html` at `base_url`.

    `declared_charset` is the Content-Type header's charset (a whole Content-Type value
    is accepted too). Techniques are tried in the order of `PDF_TECHNIQUES` or
    `XML_TECHNIQUES`; the first link found that is not the page itself wins; else the
    first that is, marked `itself`. None when nothing is found, for ``html`` (the page is
    the full text) and for other types. Never raises on any `html`.
    """
    techniques = _TECHNIQUES.get(ingest_type.strip().lower())
    if techniques is None:
        return None
    page = _read(html, base_url, declared_charset)
    if page is None:
        return None
    own = _page_key(page.page.url) if page.page is not None else None
    loop: FulltextLink | None = None
    for name, technique in techniques:
        for url in technique(page):
            if own is None or _page_key(url) != own:
                return FulltextLink(url, name)
            loop = loop or FulltextLink(url, name, itself=True)
    return loop
