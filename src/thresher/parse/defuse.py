"""Pages made safe for Lexbor: markup whose parse would cost quadratic time, taken out.

Lexbor, unlike browsers, has no limit on the depth of the tree or on the number of
attributes of one element, and costs time quadratic in both: some of the HTML standard's
steps scan the whole stack of open elements (is there a <p> to close?), so 40 000 nested
<div>s take seconds and a million take hours, and a tag with 16 000 attributes (64 KB)
takes 200 ms, 40 000 seconds. Link extraction (`thresher.parse.links`) and landing-page
reading (`thresher.ingest.landing`) therefore defuse big pages first, in linear time:

- `flatten_tags` drops the start tag of every element that neither can be a link nor
  changes how its content is tokenised, so Lexbor sees a shallow document (the end tags
  it leaves close nothing: Lexbor ignores them);
- `thin_crowded` cuts every tag with `CROWDED` attributes or more down to the attributes
  the caller reads. It reads attribute values as the tokenizer does (a quote opens a
  value only after "="; ">" and "<" inside a value do not end the tag; a quoted value may
  be followed by the next name without a space), so that '<a x=">" a0 a1 …>' cannot hide
  a bomb from it.

Both can misread a tag-like string inside a comment or a script, so callers apply them
only to pages big enough to be dangerous.
"""

from __future__ import annotations

import re
from itertools import islice

__all__ = ["CROWDED", "EMBED_MARK", "flatten_tags", "has_crowded", "thin_crowded"]

CROWDED = 64

_KEPT_TAGS = (
    "a|area|link|frame|frameset|iframe|base|meta|title"
    "|script|style|textarea|xmp|noembed|noframes|plaintext"
)
# The rest of a tag after its name's first letter, with quoted attribute values consumed
# whole (only after "=", as in the tokenizer); it stops at "<" and matches possessively so
# that a run of unterminated tags cannot make the scan quadratic. (Unrolled: a run of
# plain characters is one step, which halves the time of a scan.)
_TAG_END = r"""[^<>="']*+(?:(?:=\s*(?:"[^"]*+"|'[^']*+')?|["'])[^<>="']*+)*+>"""
# A start tag of any other element. End tags stay: one that closes nothing costs Lexbor a
# look down a stack kept shallow, and matching only start tags halves the scan.
_FLATTEN_RE = re.compile(rf"""<(?=[a-zA-Z])(?!(?:{_KEPT_TAGS})[\s/>])[a-zA-Z]{_TAG_END}""", re.I)
# With embeds kept (page requisites wanted): the void elements that embed a resource
# stay as they are (they cannot nest), and the other tags that name one are turned into
# void <wbr> elements that keep their attributes and name the tag in EMBED_MARK.
_KEPT_VOID_EMBEDS = "img|source|track|input|embed|wbr"
_FLATTEN_EMBEDS_RE = re.compile(
    rf"""<(?=[a-zA-Z])(?!(?:{_KEPT_TAGS}|{_KEPT_VOID_EMBEDS})[\s/>])[a-zA-Z]{_TAG_END}""", re.I
)
EMBED_MARK = "data-thresher-tag"
_TAG_REST = r"""(?P<rest>(?:[^<>="']|=\s*(?:"[^"]*"|'[^']*')?|["'])*+)>"""
# The tags that name a resource but are not void, and any other tag that says url(
# before its end (a style attribute, most likely): one pass renames them.
_EMBEDDING_TAGS = "video|audio|object|body|table|td|th|image|use"
_EMBEDDING_TAG_RE = re.compile(
    rf"""<(?P<name>(?:{_EMBEDDING_TAGS})(?=[\s/>])
        |(?!(?:{_KEPT_TAGS}|{_KEPT_VOID_EMBEDS})[\s/>])[a-zA-Z][^\s/>]*(?=[^<>]*?url\())
    {_TAG_REST}""",
    re.IGNORECASE | re.VERBOSE,
)
# Without "url(" anywhere, the second kind cannot be: a cheaper pass, which looks at the
# first letter before trying each name.
_EMBEDDING_ONLY_RE = re.compile(
    rf"<(?=[abiotuvABIOTUV])(?P<name>{_EMBEDDING_TAGS})(?=[\s/>]){_TAG_REST}", re.I
)
_W = "\t\n\x0c\r "
_ATTRIBUTE = (
    rf"[{_W}/]*+(=?[^{_W}/>=]++|=)"
    rf"""(?:[{_W}]*+=[{_W}]*+(?:"[^"]*+"|'[^']*+'|[^{_W}>]*+))?"""
)
_ATTRIBUTE_RE = re.compile(_ATTRIBUTE)
_CROWDED_RE = re.compile(rf"<([a-zA-Z][^{_W}/>]*+)((?:{_ATTRIBUTE}){{{CROWDED},}}+)")
# The same on UTF-8 bytes: every character it names is ASCII, and a multi-byte character
# is as much outside its classes as its bytes are.
_CROWDED_BYTES_RE = re.compile(_CROWDED_RE.pattern.encode("ascii"))
# What may end a raw-text element or comment the check misread as a tag ("</script",
# "-->"): kept as it is when it ends a cut-down tag, so that the rest of the page is
# still read as the tokenizer would.
_TAIL = 64


def flatten_tags(text: str, *, embeds: bool = False) -> str:
    """`text` without the start tags that cannot be links (see the module docstring);
    with `embeds`, the tags that embed a resource are kept, as void elements."""
    if not embeds:
        return _FLATTEN_RE.sub("", text)
    rename = _EMBEDDING_TAG_RE if "url(" in text or "URL(" in text else _EMBEDDING_ONLY_RE
    text = rename.sub(rf'<wbr {EMBED_MARK}="\g<name>"\g<rest>>', text)
    return _FLATTEN_EMBEDS_RE.sub("", text)


def has_crowded(markup: bytes) -> bool:
    """Whether UTF-8 `markup` has a tag `thin_crowded` would cut down: asked of the bytes,
    so that the many pages with none are not decoded for it (text needs no such question:
    `thin_crowded` asks it first)."""
    return _CROWDED_BYTES_RE.search(markup) is not None


def thin_crowded(text: str, keep: frozenset[str], scan: int | None = None) -> str:
    """`text` with every tag of `CROWDED` attributes or more cut down to the attributes
    named in `keep` (lower case; the first of each). With `scan`, only a tag's first
    `scan` attributes are read: reading costs about 1 µs an attribute, and the rest of a
    tag that crowded is no page's real markup."""

    def thin(match: re.Match[str]) -> str:
        attributes = match.group(2)
        kept: dict[str, str] = {}
        for attribute in islice(_ATTRIBUTE_RE.finditer(attributes), scan):
            name = attribute.group(1).lower()
            if name in keep and name not in kept:
                kept[name] = attribute.group().lstrip(_W + "/")
        tail = max(attributes.rfind("</"), attributes.rfind("--"))
        end = attributes[tail:] if tail >= 0 and len(attributes) - tail <= _TAIL else ""
        return " ".join(["<" + match.group(1), *kept.values()]) + " " + end

    if _CROWDED_RE.search(text) is None:
        return text
    return _CROWDED_RE.sub(thin, text)
