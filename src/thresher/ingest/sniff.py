"""What a fetched body is, read from its bytes, and whether it is what an ingest asked for.

An ingest request says "this URL holds the PDF (or JATS XML, or HTML) of that paper",
and the answer decides whether the request is a hit, a landing page to look into, or a
failure. Neither the Content-Type header nor the URL's extension can decide it: servers
send PDFs as ``application/octet-stream``, ``text/html`` or ``application/x-download``,
landing pages from URLs ending in ``.pdf``, and login walls with status 200. So
`sniff_mimetype` looks at the bytes, as libmagic and the WHATWG MIME Sniffing standard do,
and reads the declared type only to choose between text types the bytes cannot tell
apart:

- Binary formats by their signature at offset 0: gzip, zip (OOXML, ODF and EPUB are zip
  files and are reported as ``application/zip``), PNG, JPEG, GIF, PostScript (and the
  binary DOS EPS header).
- PDF by ``%PDF-`` and a version digit anywhere in the first 1024 bytes, the window
  Acrobat accepts (the PDF Reference's implementation notes): dynamic sites put a UTF-8
  BOM, blank lines or a PHP warning (``<br /><b>Warning</b>: ...``) before the file,
  and every PDF reader still opens it, so such a body is the PDF that was asked for,
  not a landing page.
- Markup by its prolog, after any BOM and whitespace: an XML declaration, comments,
  processing instructions and a doctype are skipped to the root element. A doctype
  ``html`` or a root that is an HTML element (``html``, ``head``, ``body``, ``meta``,
  ``title``, the WHATWG patterns ``div``, ``p``, ``table``, ``script``, ...) is HTML;
  after an XML declaration only ``html``, ``head`` and ``body`` are (XHTML), since XML
  vocabularies reuse names like ``title``. A root ``article`` with a JATS or NLM
  doctype, a ``jats.nlm.nih.gov`` namespace or a ``dtd-version`` attribute, or any
  ``<!DOCTYPE article``, is JATS (``application/jats+xml``), as PubMed Central, PLOS
  and SciELO serve it. Any other markup (an XML declaration, a namespace, an unknown
  root element) is ``application/xml``.
- Anything else without the WHATWG "binary data bytes" (C0 controls other than tab,
  newline, form feed, carriage return and escape) in its first 4 KB, or with a UTF-16
  byte order mark, is ``text/plain``; the rest is ``application/octet-stream``.

`declared` (the Content-Type header) breaks ties only: markup the prolog rules leave open
(a bare unknown root, a page whose markup starts after a line of text) is HTML if the
server says ``text/html``, and XHTML is ``application/xhtml+xml`` if the server says
so. It never turns a PDF into HTML or HTML into plain text.
"""

from __future__ import annotations

import re

__all__ = ["EMPTY", "expected_kind", "sniff_mimetype"]

EMPTY = "application/x-empty"
"""What `sniff_mimetype` says of a zero-length body (an ``empty-blob`` result)."""

_PDF = "application/pdf"
_HTML = "text/html"
_XHTML = "application/xhtml+xml"
_XML = "application/xml"
_JATS = "application/jats+xml"
_PLAIN = "text/plain"
_BINARY = "application/octet-stream"

_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"%PDF-", _PDF),
    (b"\x1f\x8b", "application/gzip"),
    (b"PK\x03\x04", "application/zip"),
    (b"PK\x05\x06", "application/zip"),  # an empty archive
    (b"PK\x07\x08", "application/zip"),  # a spanned archive's first part
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"%!PS", "application/postscript"),
    (b"\xc5\xd0\xd3\xc6", "application/postscript"),  # DOS EPS binary header
)

_PDF_WINDOW = 1024
_PDF_HEADER_RE = re.compile(rb"%PDF-[0-9]")
_HEAD_BYTES = 4096
_BINARY_BYTE_RE = re.compile(rb"[\x00-\x08\x0b\x0e-\x1a\x1c-\x1f]")
_WHITESPACE = "\t\n\x0c\r \ufeff"

# Root elements that make a document without an XML declaration HTML: the WHATWG
# standard's patterns plus the elements a page or fragment commonly starts with.
_HTML_ROOTS = frozenset(
    {
        "html", "head", "body", "meta", "title", "link", "base", "script", "style",
        "noscript", "iframe", "frameset", "h1", "h2", "h3", "h4", "h5", "h6", "div",
        "span", "font", "table", "a", "b", "i", "br", "p", "center", "form", "img",
        "ul", "ol", "pre", "header", "nav", "main", "section", "footer",
    }
)  # fmt: skip
_XHTML_ROOTS = frozenset({"html", "head", "body"})

_DECLARATION_RE = re.compile(r"<\?xml(?:[\s?]|$)", re.IGNORECASE)
_NAME_RE = re.compile(r"<([A-Za-z_][\w.\-:]*)")
_DOCTYPE_RE = re.compile(r"<!doctype\s+([^\s>\[]*)", re.IGNORECASE)
_JATS_DOCTYPE_RE = re.compile(r"jats|//nlm//|nlm\.nih\.gov", re.IGNORECASE)
_JATS_ROOT_RE = re.compile(r"jats\.nlm\.nih\.gov|\sdtd-version\s*=", re.IGNORECASE)
_MARKUP_LATER_RE = re.compile(r"<[A-Za-z!/]")


def _essence(content_type: str | None) -> str:
    """The type/subtype of a Content-Type value, lowercased ('' if absent)."""
    if not content_type:
        return ""
    return content_type.partition(";")[0].strip(" \t\r\n").lower()


def _is_xml_type(essence: str) -> bool:
    return essence in (_XML, "text/xml", _JATS) or (essence.endswith("+xml") and essence != _XHTML)


def _head_text(head: bytes) -> tuple[str, bool]:
    """The first bytes as text for reading markup, and whether they are UTF-16.

    ASCII-compatible encodings are read as latin-1: only the ASCII of the prolog matters.
    """
    if head[:2] == b"\xff\xfe" or head[:4] in (b"<\x00?\x00", b"<\x00!\x00"):
        return head.decode("utf-16-le", "replace").lstrip("\ufeff"), True
    if head[:2] == b"\xfe\xff" or head[:4] in (b"\x00<\x00?", b"\x00<\x00!"):
        return head.decode("utf-16-be", "replace").lstrip("\ufeff"), True
    if head[:3] == b"\xef\xbb\xbf":
        head = head[3:]
    return head.decode("latin-1"), False


class _Prolog:
    """What precedes (and opens) the root element of a markup document."""

    __slots__ = ("comment", "declaration", "doctype", "markup", "root", "root_tag")

    def __init__(self, text: str) -> None:
        self.declaration = False  # an <?xml ...?> declaration
        self.comment = False  # a comment before the root
        self.doctype: str | None = None  # the doctype's text
        self.root: str | None = None  # the root element's name, lowercased
        self.root_tag = ""  # the root's start tag, as far as the text holds it
        self.markup = False  # the text starts with markup at all
        self._read(text)

    def _read(self, text: str) -> None:
        pos = len(text) - len(text.lstrip(_WHITESPACE))
        first = True
        while pos < len(text):
            if text[pos] != "<":
                return
            self.markup = True
            if text.startswith("<?", pos):
                if first and _DECLARATION_RE.match(text, pos) is not None:
                    self.declaration = True
                end = text.find("?>", pos)
                if end < 0:
                    return
                pos = end + 2
            elif text.startswith("<!--", pos):
                self.comment = True
                end = text.find("-->", pos + 4)
                if end < 0:
                    return
                pos = end + 3
            elif text[pos : pos + 9].lower() == "<!doctype":
                end = text.find(">", pos)
                bracket = text.find("[", pos, end if end >= 0 else len(text))
                if bracket >= 0:  # an internal subset may hold ">"
                    close = text.find("]", bracket)
                    end = text.find(">", close) if close >= 0 else -1
                self.doctype = text[pos : end + 1 if end >= 0 else len(text)]
                if end < 0:
                    return
                pos = end + 1
            else:
                match = _NAME_RE.match(text, pos)
                if match is not None:
                    self.root = match.group(1).lower()
                    end = text.find(">", pos)
                    self.root_tag = text[pos : end + 1 if end >= 0 else len(text)]
                return
            first = False
            pos = len(text) - len(text[pos:].lstrip(_WHITESPACE))


def _markup_type(prolog: _Prolog, declared: str, binary: bool) -> str | None:
    """The type of a document that starts with markup, or None to treat it as text."""
    doctype_name = ""
    if prolog.doctype is not None:
        match = _DOCTYPE_RE.match(prolog.doctype)
        doctype_name = match.group(1).lower() if match is not None else ""
    html = _XHTML if declared == _XHTML else _HTML
    if doctype_name == "html":
        return html
    if doctype_name == "article":
        return _JATS
    root = prolog.root
    if root is not None:
        local = root.rpartition(":")[2]
        if local in (_XHTML_ROOTS if prolog.declaration else _HTML_ROOTS):
            return html
        if local == "article" and (
            _JATS_ROOT_RE.search(prolog.root_tag) is not None
            or (prolog.doctype is not None and _JATS_DOCTYPE_RE.search(prolog.doctype))
        ):
            return _JATS
    if prolog.declaration:
        return _XML
    if root is None:
        # A comment or doctype with no root in sight: WHATWG reads "<!--" as HTML.
        if prolog.comment or prolog.doctype is not None:
            return _XML if _is_xml_type(declared) else _HTML
        return None
    if declared in (_HTML, _XHTML):
        return html
    if _is_xml_type(declared) or "xmlns" in prolog.root_tag:
        return _XML
    return None if binary else _XML


def sniff_mimetype(body: bytes, declared: str | None = None) -> str:
    """The media type of `body` by its bytes; `declared` only breaks ties between text types.

    Returns one of ``application/pdf``, ``text/html``, ``application/xhtml+xml`` (only
    when declared so), ``application/jats+xml``, ``application/xml``,
    ``application/gzip``, ``application/zip``, ``image/png``, ``image/jpeg``,
    ``image/gif``, ``application/postscript``, ``text/plain``,
    ``application/octet-stream``, or `EMPTY` for an empty body. Never raises.
    """
    if not body:
        return EMPTY
    for signature, mimetype in _SIGNATURES:
        if body.startswith(signature):
            return mimetype
    if _PDF_HEADER_RE.search(body, 0, _PDF_WINDOW + 5) is not None:
        return _PDF
    declared_type = _essence(declared)
    head = body[:_HEAD_BYTES]
    text, utf16 = _head_text(head)
    binary = not utf16 and _BINARY_BYTE_RE.search(head) is not None
    stripped = text.lstrip(_WHITESPACE)
    if stripped.startswith("%!PS"):
        return "application/postscript"
    prolog = _Prolog(text)
    if prolog.markup:
        markup = _markup_type(prolog, declared_type, binary)
        if markup is not None:
            return markup
    if binary:
        return _BINARY
    if declared_type in (_HTML, _XHTML) and _MARKUP_LATER_RE.search(text) is not None:
        return declared_type
    return _PLAIN


_HTML_TYPES = frozenset({_HTML, _XHTML})


def expected_kind(ingest_type: str, mimetype: str) -> bool:
    """Whether a body of `mimetype` (as `sniff_mimetype` says) is what `ingest_type` wants.

    ``pdf`` wants a PDF; ``xml`` any XML (JATS included, XHTML not); ``html`` an HTML page;
    ``dataset`` anything non-empty that is not HTML (a landing page is not the data).
    Unknown ingest types want nothing. `mimetype` may carry parameters (``; charset=``).
    """
    essence = _essence(mimetype)
    kind = ingest_type.strip().lower()
    if kind == "pdf":
        return essence == _PDF
    if kind == "xml":
        return _is_xml_type(essence)
    if kind == "html":
        return essence in _HTML_TYPES
    if kind == "dataset":
        return bool(essence) and essence != EMPTY and essence not in _HTML_TYPES
    return False
