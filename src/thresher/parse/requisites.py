"""Page requisites: what a browser loads to render a page, as the page names it.

`thresher.parse.links.extract_links(…, requisites=True)` collects them in the same parse
as the links (a `Requisites` per page): the stylesheets, icons and preloads among the
``link`` elements it reads anyway, then, in one more selection over the tree:

- ``img`` (``src``, ``srcset``), ``picture``'s ``source`` (``srcset``), ``video``
  (``src``, ``poster``), ``audio``, ``source`` and ``track`` (``src``);
- ``script src``, ``object data``, ``embed src``, ``input type=image src``;
- the ``background`` attribute of ``body``, ``table``, ``td`` and ``th`` (old pages,
  mail archives among them, still use it, and browsers still draw it);
- SVG ``image`` and ``use`` (``href``, ``xlink:href``);
- the CSS of ``<style>`` blocks and of ``style`` attributes: its ``url()``, ``@import``
  and ``image-set()`` (`thresher.parse.css`).

``link`` elements count when their ``rel`` has ``stylesheet`` (alternate ones too),
an icon (``icon``, ``shortcut icon``, ``apple-touch-icon``, ``mask-icon`` …),
``modulepreload``, or ``preload`` for anything but a document (``as=style``, ``script``,
``font``, ``image`` with its ``imagesrcset`` …); other ``link``s stay links.

``srcset`` is split as the HTML standard's "parse a srcset attribute" does (URLs may
hold commas; descriptors in parentheses may too), and every candidate counts: an
archive cannot know which one a reader's screen will ask for. Iframes and frames are
links, not requisites: they are pages of their own, crawled if in scope.

Big pages are defused before parsing (`thresher.parse.defuse`): with requisites wanted,
the flattening keeps the void embedding elements (``img``, ``source``, ``track``,
``input``, ``embed``) and turns the others it would drop (``video``, ``object``,
``td`` …, and any tag whose attributes say ``url(``) into void ``wbr`` elements that
carry their attributes and their name in ``data-thresher-tag``, which this module reads
as the element named there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from selectolax.lexbor import LexborAttributes, LexborCSSSelector, LexborNode

from thresher.parse.css import css_urls

__all__ = ["ATTRIBUTES", "SELECTOR", "Requisites", "is_requisite_link", "srcset_urls"]

# One more selection over the parsed tree. A node matched by two of these comes twice
# (Lexbor's selector lists do not merge): harmless, the URLs are kept once.
SELECTOR = (
    "img,source,video,audio,track,script[src],object[data],embed[src],input[src],"
    "body[background],table[background],td[background],th[background],image,use,"
    'wbr[data-thresher-tag],style,[style*="url(" i]'
)
# The attributes read here, which the defusing of crowded tags must keep.
ATTRIBUTES = frozenset(
    {
        "src", "srcset", "poster", "data", "background", "href", "xlink:href", "style",
        "type", "rel", "as", "imagesrcset", "data-thresher-tag",
    }
)  # fmt: skip
_ICON_RELS = frozenset(
    {
        "icon", "apple-touch-icon", "apple-touch-icon-precomposed", "apple-touch-startup-image",
        "mask-icon", "fluid-icon",
    }
)  # fmt: skip
_WS = " \t\n\r\f"
_WS_OR_COMMA = _WS + ","
# Which attributes of each element name a resource (srcset lists, style holds CSS).
_URL_ATTRIBUTES: Mapping[str, tuple[str, ...]] = {
    "img": ("src",),
    "source": ("src",),
    "video": ("src", "poster"),
    "audio": ("src",),
    "track": ("src",),
    "script": ("src",),
    "object": ("data",),
    "embed": ("src",),
    "input": ("src",),  # type=image only
    "body": ("background",),
    "table": ("background",),
    "td": ("background",),
    "th": ("background",),
    "image": ("href", "xlink:href"),
    "use": ("href", "xlink:href"),
}
_SRCSET_TAGS = frozenset({"img", "source"})


def is_requisite_link(rels: set[str], as_: str | None) -> bool:
    """Whether a ``link`` with these ``rel`` tokens (lower case) and ``as`` loads a
    requisite of its page (see the module docstring)."""
    if "stylesheet" in rels or "modulepreload" in rels or not rels.isdisjoint(_ICON_RELS):
        return True
    return "preload" in rels and (as_ or "").strip().lower() != "document"


def srcset_urls(value: str) -> list[str]:
    """The candidate URLs of a ``srcset`` (or ``imagesrcset``) value, in order."""
    urls: list[str] = []
    end = len(value)
    pos = 0
    while True:
        while pos < end and value[pos] in _WS_OR_COMMA:
            pos += 1
        if pos >= end:
            return urls
        start = pos
        while pos < end and value[pos] not in _WS:
            pos += 1
        url = value[start:pos]
        if url.endswith(","):
            # "a.png,b.png 2x": a URL ending in commas has no descriptors.
            url = url.rstrip(",")
        else:
            # Descriptors, up to a comma outside parentheses.
            in_parens = False
            while pos < end:
                char = value[pos]
                pos += 1
                if char == "(":
                    in_parens = True
                elif char == ")":
                    in_parens = False
                elif char == "," and not in_parens:
                    break
        if url:
            urls.append(url)


class Requisites:
    """The requisites of one page, gathered while its links are read."""

    __slots__ = ("css", "raw")

    def __init__(self) -> None:
        self.raw: list[str] = []  # attribute values, as written
        self.css: list[str] = []  # style blocks and attributes

    def link(self, rels: set[str], attrs: LexborAttributes) -> bool:
        """Take a ``link`` element's URL if it is a requisite; whether it was."""
        if not is_requisite_link(rels, attrs.get("as")):
            return False
        href = attrs.get("href")
        if href:
            self.raw.append(href)
        srcset = attrs.get("imagesrcset")
        if srcset:
            self.raw.extend(srcset_urls(srcset))
        return True

    def collect(self, root: LexborNode, selector: LexborCSSSelector) -> None:
        """Read the embedding elements of the tree under `root`."""
        raw = self.raw
        for node in selector.find(SELECTOR, root):
            tag = node.tag
            attrs = node.attrs
            if tag == "style":
                text = node.text(deep=True)
                if text:
                    self.css.append(text)
                continue
            if tag == "wbr":
                tag = (attrs.get("data-thresher-tag") or "").lower()
            if tag == "input" and (attrs.get("type") or "").strip().lower() != "image":
                tag = ""
            for name in _URL_ATTRIBUTES.get(tag or "", ()):
                value = attrs.get(name)
                if value:
                    raw.append(value)
            if tag in _SRCSET_TAGS:
                srcset = attrs.get("srcset")
                if srcset:
                    raw.extend(srcset_urls(srcset))
            style = attrs.get("style")
            if style and "(" in style:
                self.css.append(style)

    def urls(self, resolve: Callable[[str], str | None]) -> list[str]:
        """The requisites, resolved (by `resolve`, against the page's base), each once."""
        raw = self.raw
        for text in self.css:
            raw.extend(css_urls(text))
        out: list[str] = []
        seen: set[str] = set()
        for value in raw:
            url = resolve(value)
            if url is not None and url not in seen:
                seen.add(url)
                out.append(url)
        return out
