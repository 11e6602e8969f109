"""The URLs a stylesheet loads: ``url()``, ``@import`` and ``image-set()``, as written.

A page's ``<style>`` blocks and ``style`` attributes, and every stylesheet a crawl fetches,
go through `css_urls`, which returns the URL strings in document order (unescaped, not
resolved: the caller resolves them against the stylesheet's URL, or the page's base for
CSS inside a page). What counts, as CSS Syntax Level 3 tokenises it:

- a ``url(…)`` token (unquoted), and ``url("…")`` / ``url('…')`` (a function whose
  argument is a string), anywhere — properties, ``@font-face`` ``src``, ``@import``;
- the string after ``@import`` (``@import "print.css" print;``);
- the strings directly inside ``image-set()`` and ``-webkit-image-set()``, which name
  images without ``url()``;

and nothing inside comments or other strings. Escapes are decoded (``\\28`` is ``(``, a
backslash before a newline in a string continues it); a "bad url" (a quote or a space
inside an unquoted ``url(``) and a string cut by a newline are dropped, as browsers drop
them.

This is a small tokenizer of our own rather than tinycss2 (which the tests use as the
reference it must agree with): tinycss2 builds every token of the sheet in Python, about
1.5 µs a byte (20 ms for a 13 KB sheet), and pages carry ``<style>`` blocks of tens of
kilobytes on the crawler's hot path. Here one regular expression skips everything but
comments, strings, escapes and the few names that matter: about 40 µs for the same sheet.
"""

from __future__ import annotations

import re
from functools import lru_cache
from urllib.parse import urlsplit

from thresher.parse.charset import encoding_from_content_type, lookup_label

__all__ = ["css_urls", "decode_css", "is_css", "unescape"]

_WS = "[ \t\n\r\f]"
# An escape: up to six hex digits and one whitespace after them, or any one character
# but a newline (which after a backslash continues a string, and is no escape elsewhere).
_ESCAPE = r"\\(?:[0-9A-Fa-f]{1,6}(?:\r\n|[ \t\n\r\f])?|[^\n\r\f])"
_STRING_ESCAPE = r"\\(?:[0-9A-Fa-f]{1,6}(?:\r\n|[ \t\n\r\f])?|[\s\S])"
# A string ends at its quote, at the end of the text, or (a bad string) before a newline.
_STRING = (
    rf""""(?:[^"\\\n\r\f]|{_STRING_ESCAPE})*(?:"|\Z|(?=[\n\r\f]))"""
    rf"""|'(?:[^'\\\n\r\f]|{_STRING_ESCAPE})*(?:'|\Z|(?=[\n\r\f]))"""
)
_COMMENT = r"/\*[\s\S]*?(?:\*/|\Z)"
# What an unquoted url() may hold: not a quote, "(", whitespace or a non-printable.
_URL_CHAR = rf"""[^"'()\\ \t\n\r\f\x00-\x08\x0b\x0e-\x1f\x7f]|{_ESCAPE}|\\\Z"""
_IDENT_CHAR = r"[A-Za-z0-9_\-\u0080-\U0010ffff]"
# A character before a name that makes it part of another token (an identifier, a
# number's unit, a hash, an at-keyword).
_NAME_CHAR = r"[A-Za-z0-9_\-\\#@\u0080-\U0010ffff]"
_IMAGE_SET = "[iI][mM][aA][gG][eE]-[sS][eE][tT]"
_WEBKIT = "-[wW][eE][bB][kK][iI][tT]-"
# "url(" and "image-set(" are recognised at their "(" by looking behind it: a "(" is
# rarer in a stylesheet than the letters of those names.
_URL_OPEN = rf"\((?<=[uU][rR][lL]\()(?<!{_NAME_CHAR}[uU][rR][lL]\()"
_SET_OPEN = (
    rf"\((?<={_IMAGE_SET}\()(?:(?<!{_NAME_CHAR}{_IMAGE_SET}\()"
    rf"|(?<={_WEBKIT}{_IMAGE_SET}\()(?<!{_NAME_CHAR}{_WEBKIT}{_IMAGE_SET}\())"
)
_IMPORT = rf"@[iI][mM][pP][oO][rR][tT](?!{_IDENT_CHAR}|\\)"
# An identifier that holds an escape ("\31 url", "u\72l"): its name is not read, so it
# is skipped whole, with its "(" if it names a function, lest a "url(" at its end count.
_ESCAPED_NAME = rf"(?>{_ESCAPE}(?:{_IDENT_CHAR}|{_ESCAPE})*+)"
_TOKEN_START = rf"""{_URL_OPEN}|{_SET_OPEN}|{_IMPORT}"""
# The tokens that matter: url( with a string or a URL (or a bad URL, which is dropped),
# @import with the string after it if there is one, and image-set(.
_TOKEN = rf"""{_URL_OPEN}{_WS}*(?:
        (?P<quoted>{_STRING})
        |(?P<url>(?:{_URL_CHAR})*){_WS}*(?:\)|\Z)
        |(?P<bad>(?:[^)\\]|\\[\s\S])*(?:\)|\Z))
    )
    |(?P<import>{_IMPORT})(?:{_WS}|{_COMMENT})*(?P<target>{_STRING})?
    |(?P<set>{_SET_OPEN})"""
# One match skips to the next token that matters, and reads it: runs of characters that
# start nothing in one tight loop of the regex engine, comments, strings and escaped
# names whole, and the rest a character at a time (a search would try the whole
# expression again at every position: ten times slower).
_TOKENS = rf"""(?:[^/"'(@\\]++|{_COMMENT}|{_STRING}|{_ESCAPED_NAME}\(?|(?!{_TOKEN_START})[\s\S])*+
    (?:{_TOKEN})"""
# Inside image-set(): its strings (URLs at its own level) and brackets are tokens too.
_SET_TOKENS = rf"""(?:[^/"'(@\\)\[\]{{}}]++|{_COMMENT}|{_ESCAPED_NAME}(?!\()
        |(?!{_TOKEN_START})[^"'()\[\]{{}}\\])*+
    (?:{_TOKEN}|(?P<string>{_STRING})|(?P<function>{_ESCAPED_NAME}\()
        |(?P<open>[(\[{{])|(?P<close>[)\]}}])|(?P<stray>\\))"""


@lru_cache(maxsize=2)
def _tokens_re(sets: bool) -> re.Pattern[str]:
    """The tokens' expression (in image-set() if `sets`), compiled on first use: the
    two take 0.3 s of CPU to compile, which every process paid at import, whether it
    reads a stylesheet or not (a `thresher worker` running mail jobs)."""
    return re.compile(_SET_TOKENS if sets else _TOKENS, re.VERBOSE)


_CLOSER = {"(": ")", "[": "]", "{": "}"}
# A newline after a backslash only happens in a string: a line continuation, dropped.
_UNESCAPE_RE = re.compile(r"\\(?:([0-9A-Fa-f]{1,6})(?:\r\n|[ \t\n\r\f])?|(\r\n|[\n\r\f])|([\s\S]))")


def _unescape_one(match: re.Match[str]) -> str:
    hex_digits, newline, char = match.groups()
    if newline is not None:
        return ""
    if hex_digits is None:
        return str(char)
    code = int(hex_digits, 16)
    if code == 0 or 0xD800 <= code <= 0xDFFF or code > 0x10FFFF:
        return "\ufffd"
    return chr(code)


def _odd_backslashes_at_end(text: str) -> bool:
    return (len(text) - len(text.rstrip("\\"))) % 2 == 1


def unescape(text: str) -> str:
    """CSS escapes decoded; a backslash at the very end stands for U+FFFD."""
    if "\\" not in text:
        return text
    if _odd_backslashes_at_end(text):
        text = text[:-1] + "\ufffd"
    return _UNESCAPE_RE.sub(_unescape_one, text)


def _string_value(token: str, text: str, end: int) -> str | None:
    """The value of the string `token` that ends at `end` of `text`; None if a newline
    cut it (a bad string)."""
    body = token[1:]
    if body.endswith(token[0]) and not _odd_backslashes_at_end(body[:-1]):
        return unescape(body[:-1])
    if end < len(text):  # stopped before a newline
        return None
    if _odd_backslashes_at_end(body):  # a backslash, then the end of the text: dropped
        body = body[:-1]
    return unescape(body)


def css_urls(text: str) -> list[str]:
    """The URLs `text` (a stylesheet, a ``<style>`` block or a ``style`` attribute)
    loads, in document order, as written (escapes decoded, not resolved); each non-blank
    URL once. Never raises."""
    return list(_cached_urls(text)) if len(text) <= _CACHED_LENGTH else _css_urls(text)


# Pages of one site repeat the same <style> blocks: the last few are remembered.
_CACHED_LENGTH = 256 * 1024


@lru_cache(maxsize=256)
def _cached_urls(text: str) -> tuple[str, ...]:
    return tuple(_css_urls(text))


def _css_urls(text: str) -> list[str]:
    found: list[str] = []
    # Inside image-set(), the blocks open: the character that closes each, and whether
    # it is image-set's own, whose strings directly inside are URLs.
    sets: list[tuple[str, bool]] = []
    pos = 0
    tokens, set_tokens = _tokens_re(False), _tokens_re(True)
    while True:
        match = (set_tokens if sets else tokens).match(text, pos)
        if match is None:
            break
        pos = match.end()
        kind = match.lastgroup
        value: str | None = None
        if kind == "url":
            value = unescape(match.group("url"))
        elif kind == "quoted":
            value = _string_value(match.group("quoted"), text, pos)
            if sets:
                sets.append((")", False))  # url('s own parenthesis, still open
        elif kind == "target":
            value = _string_value(match.group("target"), text, pos)
        elif kind == "string":
            if sets[-1][1]:
                value = _string_value(match.group("string"), text, pos)
        elif kind == "set":
            sets.append((")", True))
        elif kind == "open" or kind == "function":
            sets.append((")" if kind == "function" else _CLOSER[match.group("open")], False))
        elif kind == "close" and match.group("close") == sets[-1][0]:
            sets.pop()  # (another closer is a stray token)
        if value is not None:
            found.append(value)
    seen: set[str] = set()
    out: list[str] = []
    for url in found:
        url = url.strip(" \t\n\r\f")
        if url and url not in seen:
            seen.add(url)
            out.append(url)
    return out


# Types that say nothing, so the URL's extension decides.
_VAGUE_TYPES = frozenset({"", "text/plain", "application/octet-stream", "unknown/unknown", "*/*"})
_CHARSET_RULE_RE = re.compile(rb'@charset "([^"]{1,40})";')


def is_css(content_type: str | None, url: str) -> bool:
    """Whether a response is a stylesheet: ``text/css``, or a vague type (or none) for a
    URL whose path ends in ``.css`` (servers without the type for it still exist)."""
    essence = (content_type or "").partition(";")[0].strip(" \t").lower()
    if essence == "text/css":
        return True
    if essence not in _VAGUE_TYPES:
        return False
    try:
        path = urlsplit(url).path
    except ValueError:
        return False
    return path.lower().endswith(".css")


def decode_css(body: bytes, content_type: str | None) -> str:
    """A stylesheet's text, decoded as CSS Syntax says: a byte order mark, else the
    Content-Type charset, else an ``@charset`` rule, else UTF-8 (errors replaced)."""
    if body.startswith(b"\xef\xbb\xbf"):
        return body[3:].decode("utf-8", "replace")
    if body.startswith((b"\xff\xfe", b"\xfe\xff")):
        return body.decode("utf-16", "replace")
    encoding = encoding_from_content_type(content_type) if content_type else None
    if encoding is None:
        rule = _CHARSET_RULE_RE.match(body)
        encoding = lookup_label(rule.group(1).decode("ascii", "replace")) if rule else None
        if encoding is not None and encoding.startswith("utf-16"):
            encoding = "utf-8"  # an ASCII @charset cannot be right about UTF-16
    try:
        return body.decode(encoding or "utf-8", "replace")
    except LookupError:
        return body.decode("utf-8", "replace")
