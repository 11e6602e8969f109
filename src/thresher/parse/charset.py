"""Bytes of a fetched page to text, choosing the encoding the way a browser would.

A crawler that reads a page in the wrong encoding still finds most links (they are mostly
ASCII), but it mangles every link, title and query with a non-ASCII character, and then
fetches URLs no browser would ever ask for. So `decode_text` follows the order of the
HTML standard's encoding sniffing algorithm, simplified where a harvester loses nothing:

1. a byte order mark (UTF-8, UTF-16LE, UTF-16BE) wins over any declaration;
2. the ``charset`` parameter of the Content-Type header;
3. a ``<meta charset>`` or ``<meta http-equiv="Content-Type" content="...charset=...">``
   in the first 1024 bytes (the standard's prescan window), skipping comments and
   quoted attribute values; failing that, an XML declaration's ``encoding``
   (XHTML served as XML);
4. UTF-8, if the whole body is valid UTF-8;
5. windows-1252 (what browsers fall back to for Western pages).

Labels are read with the WHATWG Encoding Standard's label table, not Python's aliases:
browsers read ``iso-8859-1``, ``latin1`` and ``us-ascii`` as windows-1252, ``gb2312`` as
GB18030, ``euc-kr`` as windows-949, and so must we. Python also knows codecs that are no
web encoding at all (``base64``, ``unicode_escape``, ``utf-7``), and a hostile header must
not select those, so a label the table does not list counts as no declaration. So does
the standard's ``replacement`` encoding: it exists to keep browsers from rendering
ISO-2022-KR-style content unsafely, a harvester looking for links is better served by
the next rule.

Decoding never raises: bytes invalid in the chosen encoding become U+FFFD, except in
windows-1252, whose five unassigned bytes map to the C1 controls as the Encoding
Standard says.
"""

from __future__ import annotations

import codecs
import re

__all__ = [
    "decode_text",
    "encoding_from_content_type",
    "encoding_from_document",
    "lookup_label",
    "utf8_encoding",
]

# Python codec name -> WHATWG labels (Encoding Standard, encodings.json).
_WHATWG_LABELS: dict[str, tuple[str, ...]] = {
    "utf-8": (
        "unicode-1-1-utf-8",
        "unicode11utf8",
        "unicode20utf8",
        "utf-8",
        "utf8",
        "x-unicode20utf8",
    ),
    "cp866": ("866", "cp866", "csibm866", "ibm866"),
    "iso8859-2": (
        "csisolatin2",
        "iso-8859-2",
        "iso-ir-101",
        "iso8859-2",
        "iso88592",
        "iso_8859-2",
        "iso_8859-2:1987",
        "l2",
        "latin2",
    ),
    "iso8859-3": (
        "csisolatin3",
        "iso-8859-3",
        "iso-ir-109",
        "iso8859-3",
        "iso88593",
        "iso_8859-3",
        "iso_8859-3:1988",
        "l3",
        "latin3",
    ),
    "iso8859-4": (
        "csisolatin4",
        "iso-8859-4",
        "iso-ir-110",
        "iso8859-4",
        "iso88594",
        "iso_8859-4",
        "iso_8859-4:1988",
        "l4",
        "latin4",
    ),
    "iso8859-5": (
        "csisolatincyrillic",
        "cyrillic",
        "iso-8859-5",
        "iso-ir-144",
        "iso8859-5",
        "iso88595",
        "iso_8859-5",
        "iso_8859-5:1988",
    ),
    "iso8859-6": (
        "arabic",
        "asmo-708",
        "csiso88596e",
        "csiso88596i",
        "csisolatinarabic",
        "ecma-114",
        "iso-8859-6",
        "iso-8859-6-e",
        "iso-8859-6-i",
        "iso-ir-127",
        "iso8859-6",
        "iso88596",
        "iso_8859-6",
        "iso_8859-6:1987",
    ),
    "iso8859-7": (
        "csisolatingreek",
        "ecma-118",
        "elot_928",
        "greek",
        "greek8",
        "iso-8859-7",
        "iso-ir-126",
        "iso8859-7",
        "iso88597",
        "iso_8859-7",
        "iso_8859-7:1987",
        "sun_eu_greek",
    ),
    # ISO-8859-8-I differs from ISO-8859-8 only in bidi rendering, not in bytes.
    "iso8859-8": (
        "csiso88598e",
        "csisolatinhebrew",
        "hebrew",
        "iso-8859-8",
        "iso-8859-8-e",
        "iso-ir-138",
        "iso8859-8",
        "iso88598",
        "iso_8859-8",
        "iso_8859-8:1988",
        "visual",
        "csiso88598i",
        "iso-8859-8-i",
        "logical",
    ),
    "iso8859-10": (
        "csisolatin6",
        "iso-8859-10",
        "iso-ir-157",
        "iso8859-10",
        "iso885910",
        "l6",
        "latin6",
    ),
    "iso8859-13": ("iso-8859-13", "iso8859-13", "iso885913"),
    "iso8859-14": ("iso-8859-14", "iso8859-14", "iso885914"),
    "iso8859-15": (
        "csisolatin9",
        "iso-8859-15",
        "iso8859-15",
        "iso885915",
        "iso_8859-15",
        "l9",
    ),
    "iso8859-16": ("iso-8859-16",),
    "koi8-r": ("cskoi8r", "koi", "koi8", "koi8-r", "koi8_r"),
    "koi8-u": ("koi8-ru", "koi8-u"),
    "mac-roman": ("csmacintosh", "mac", "macintosh", "x-mac-roman"),
    "cp874": ("dos-874", "iso-8859-11", "iso8859-11", "iso885911", "tis-620", "windows-874"),
    "cp1250": ("cp1250", "windows-1250", "x-cp1250"),
    "cp1251": ("cp1251", "windows-1251", "x-cp1251"),
    "cp1252": (
        "ansi_x3.4-1968",
        "ascii",
        "cp1252",
        "cp819",
        "csisolatin1",
        "ibm819",
        "iso-8859-1",
        "iso-ir-100",
        "iso8859-1",
        "iso88591",
        "iso_8859-1",
        "iso_8859-1:1987",
        "l1",
        "latin1",
        "us-ascii",
        "windows-1252",
        "x-cp1252",
        # x-user-defined maps 0x80-0xFF into a private-use block, which no link or
        # title a harvester wants depends on; windows-1252 keeps the ASCII half the same.
        "x-user-defined",
    ),
    "cp1253": ("cp1253", "windows-1253", "x-cp1253"),
    "cp1254": (
        "cp1254",
        "csisolatin5",
        "iso-8859-9",
        "iso-ir-148",
        "iso8859-9",
        "iso88599",
        "iso_8859-9",
        "iso_8859-9:1989",
        "l5",
        "latin5",
        "windows-1254",
        "x-cp1254",
    ),
    "cp1255": ("cp1255", "windows-1255", "x-cp1255"),
    "cp1256": ("cp1256", "windows-1256", "x-cp1256"),
    "cp1257": ("cp1257", "windows-1257", "x-cp1257"),
    "cp1258": ("cp1258", "windows-1258", "x-cp1258"),
    "mac-cyrillic": ("x-mac-cyrillic", "x-mac-ukrainian"),
    # The standard's GBK decoder is its GB18030 decoder.
    "gb18030": (
        "chinese",
        "csgb2312",
        "csiso58gb231280",
        "gb2312",
        "gb_2312",
        "gb_2312-80",
        "gbk",
        "iso-ir-58",
        "x-gbk",
        "gb18030",
    ),
    "big5hkscs": ("big5", "big5-hkscs", "cn-big5", "csbig5", "x-x-big5"),
    "euc_jp": ("cseucpkdfmtjapanese", "euc-jp", "x-euc-jp"),
    "iso2022_jp": ("csiso2022jp", "iso-2022-jp"),
    # The standard's Shift_JIS is Microsoft's variant, which Python calls cp932.
    "cp932": (
        "csshiftjis",
        "ms932",
        "ms_kanji",
        "shift-jis",
        "shift_jis",
        "sjis",
        "windows-31j",
        "x-sjis",
    ),
    "cp949": (
        "cseuckr",
        "csksc56011987",
        "euc-kr",
        "iso-ir-149",
        "korean",
        "ks_c_5601-1987",
        "ks_c_5601-1989",
        "ksc5601",
        "ksc_5601",
        "windows-949",
    ),
    "utf-16-be": ("unicodefffe", "utf-16be"),
    "utf-16-le": (
        "csunicode",
        "iso-10646-ucs-2",
        "ucs-2",
        "unicode",
        "unicodefeff",
        "utf-16",
        "utf-16le",
    ),
}

_LABELS: dict[str, str] = {
    label: codec for codec, labels in _WHATWG_LABELS.items() for label in labels
}

_ASCII_WHITESPACE = "\t\n\f\r "
_UTF16 = frozenset({"utf-16-le", "utf-16-be"})


def _c1_controls(error: UnicodeError) -> tuple[str, int]:
    """windows-1252's unassigned bytes (0x81, 0x8D, 0x8F, 0x90, 0x9D) as U+0081... ."""
    assert isinstance(error, UnicodeDecodeError)
    return error.object[error.start : error.end].decode("latin-1"), error.end


codecs.register_error("thresher.c1", _c1_controls)


def lookup_label(label: str) -> str | None:
    """The Python codec for a WHATWG encoding label, or None if it names no web encoding."""
    return _LABELS.get(label.strip(_ASCII_WHITESPACE).lower())


# "charset" as a parameter of a media type: after ";" and optional whitespace, a token or
# a quoted string. Only the first charset counts, as in the Fetch standard.
_HEADER_CHARSET_RE = re.compile(
    r';[ \t]*charset[ \t]*=[ \t]*(?:"([^"]*)"|([^;,\s"]*))', re.IGNORECASE
)


def encoding_from_content_type(content_type: str | None) -> str | None:
    """The codec named by a Content-Type header's charset, or None (absent or unknown)."""
    if not content_type:
        return None
    match = _HEADER_CHARSET_RE.search(content_type)
    if match is None:
        return None
    label = match.group(1) if match.group(1) is not None else match.group(2)
    return lookup_label(label)


# The prescan's tokens, over the first 1024 bytes read as latin-1 (one char per byte):
# a comment; a meta tag with its attributes; any other tag, consumed the same way so that
# a "<meta" inside its attribute values is not taken for a tag; "<!", "</", "<?" runs.
# As in the tokenizer, a quote opens a value only right after "=", and a quoted value is
# consumed whole, so a ">" inside it does not end the tag.
_TAG_REST = r"""(?:[^>="']|=\s*(?:"[^"]*"|'[^']*')?|["'])*+"""
_PRESCAN_RE = re.compile(
    rf"""<!--.*?(?:-->|\Z)
      | <meta(?=[\s/])(?P<meta>{_TAG_REST})
      | <[a-z]{_TAG_REST}
      | <[!/?][^>]*""",
    re.IGNORECASE | re.DOTALL | re.VERBOSE,
)
_ATTRIBUTE_RE = re.compile(
    r"""([^\s/>=]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]*)))?""",
)
# The standard's "extract a character encoding from a meta element".
_CONTENT_CHARSET_RE = re.compile(
    r"""charset\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s;"']+))""", re.IGNORECASE
)
_XML_DECLARATION_RE = re.compile(
    r"""<\?xml\s[^>]*?encoding\s*=\s*(?:"([^"]*)"|'([^']*)')""", re.IGNORECASE
)
_PRESCAN_BYTES = 1024


def _meta_label(attributes: str) -> str | None:
    """The label a meta tag declares, following the standard's need-pragma rules."""
    seen: dict[str, str] = {}
    for match in _ATTRIBUTE_RE.finditer(attributes):
        name = match.group(1).lower()
        if name not in seen:  # the first of duplicate attributes counts
            value = match.group(2) or match.group(3) or match.group(4) or ""
            seen[name] = value
    if "charset" in seen:
        return seen["charset"]
    content = seen.get("content")
    if content is None or seen.get("http-equiv", "").lower() != "content-type":
        return None
    found = _CONTENT_CHARSET_RE.search(content)
    if found is None:
        return None
    return next(group for group in found.groups() if group is not None)


def encoding_from_document(body: bytes) -> str | None:
    """The codec declared in the document itself (meta prescan, then XML declaration)."""
    head = body[:_PRESCAN_BYTES].decode("latin-1")
    if "<" not in head:
        return None
    for match in _PRESCAN_RE.finditer(head):
        attributes = match.group("meta")
        if attributes is None or "charset" not in attributes.lower():
            continue
        label = _meta_label(attributes)
        codec = lookup_label(label) if label is not None else None
        if codec is None:
            continue  # an unknown label makes the standard keep scanning
        # A document whose meta tag we could read as ASCII is not UTF-16, whatever it
        # says; the standard reads it as UTF-8.
        return "utf-8" if codec in _UTF16 else codec
    declaration = _XML_DECLARATION_RE.match(head)
    if declaration is not None:
        codec = lookup_label(declaration.group(1) or declaration.group(2) or "")
        if codec is not None:
            return "utf-8" if codec in _UTF16 else codec
    return None


def _bom(body: bytes) -> tuple[str, int] | None:
    if body[:3] == codecs.BOM_UTF8:
        return "utf-8", 3
    if body[:2] == codecs.BOM_UTF16_LE:
        return "utf-16-le", 2
    if body[:2] == codecs.BOM_UTF16_BE:
        return "utf-16-be", 2
    return None


def _errors_for(codec: str) -> str:
    return "thresher.c1" if codec == "cp1252" else "replace"


def _declared(body: bytes, content_type: str | None) -> tuple[str, int] | None:
    """(codec, length of the byte order mark) by rules 1-3, or None."""
    bom = _bom(body)
    if bom is not None:
        return bom
    codec = encoding_from_content_type(content_type) or encoding_from_document(body)
    return None if codec is None else (codec, 0)


def decode_text(body: bytes, content_type: str | None = None) -> tuple[str, str]:
    """(text, Python codec name) of an HTML body; the order is in the module docstring.

    The text never starts with a byte order mark. Never raises.
    """
    declared = _declared(body, content_type)
    if declared is not None:
        codec, skip = declared
        return body[skip:].decode(codec, "replace" if skip else _errors_for(codec)), codec
    try:
        return body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return body.decode("cp1252", "thresher.c1"), "cp1252"


# Web encodings in which ASCII bytes do not simply stand for themselves.
_NOT_ASCII_COMPATIBLE = frozenset({"utf-16-le", "utf-16-be", "iso2022_jp"})


def utf8_encoding(body: bytes, content_type: str | None = None) -> str | None:
    """The codec `decode_text` would name, if `body` already is that text in UTF-8: ASCII
    in any ASCII-compatible codec, or valid UTF-8 without a byte order mark when the codec
    is UTF-8. A parser that reads UTF-8 (Lexbor) may then take the bytes as they are, and
    skip decoding them only to encode them again. None otherwise."""
    ascii = body.isascii()
    declared = _declared(body, content_type)
    if declared is None:
        codec = "utf-8"
    elif declared[1]:  # a byte order mark, which the text leaves out
        return None
    else:
        codec = declared[0]
    if ascii:
        return None if codec in _NOT_ASCII_COMPATIBLE else codec
    if codec != "utf-8":
        return None
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return None  # decode_text replaces the bad bytes; Lexbor need not do the same
    return codec
