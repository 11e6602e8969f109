"""URLs as a browser reads them: the WHATWG URL Standard, parsed by ada-url.

What a crawler fetches is what a browser would fetch for the same link: the ``href`` as
written, resolved against its base by the URL Standard (the parser of Chromium, Firefox,
Safari and Node.js; ada-url is Node's), with the fragment left off since it never
reaches the server. Nothing else is changed: the query keeps its order, its ``;`` and
its valueless names, the path its escapes. The Standard does normalise what every
browser normalises before a request: the scheme and host are lowercased, the host goes
through UTS #46 non-transitional IDNA (``faß.example`` → ``xn--fa-hia.example``), an IPv4
address written in any of its forms (``0x7f.1``, ``2130706433``, ``0177.0.0.1``) becomes a
dotted quad, an IPv6 address its shortest form, the default port and empty user info
(``http://@host/``, and the ``:`` of ``http://a:@host/``) are dropped, dot segments are
resolved, and characters that cannot stand in a URL are percent-encoded as UTF-8 (the
query in the page's own encoding, as browsers do; see `resolve`).

This is one half of a URL's life in a crawl; `thresher.frontier.canonical` is the other:
the key that makes two spellings of one URL one entry of the sieve.
"""

from __future__ import annotations

import re

from ada_url import join_url, normalize_url

__all__ = ["WEB_SCHEMES", "ipv4", "join", "resolve"]

WEB_SCHEMES = ("http://", "https://")


def _without_lone_surrogates(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD, as a browser's string would
    hold it (a Python str may carry one; UTF-8 cannot)."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _query_in(href: str, encoding: str) -> str:
    """`href` with the non-ASCII characters of its query percent-encoded in `encoding`,
    as the URL Standard's parser does for a document in a legacy encoding; a character
    the encoding lacks becomes ``%26%23NNNN%3B`` (``&#NNNN;``), as there."""
    end = href.find("#")
    head = href if end < 0 else href[:end]
    start = head.find("?")
    if start < 0:
        return href
    out: list[str] = []
    for ch in head[start:]:
        if ch.isascii():
            out.append(ch)
            continue
        try:
            raw = ch.encode(encoding)
        except UnicodeEncodeError:
            out.append(f"%26%23{ord(ch)}%3B")
            continue
        out.append("".join(f"%{b:02X}" for b in raw))
    return head[:start] + "".join(out) + ("" if end < 0 else href[end:])


def join(href: str, base: str | None = None, encoding: str = "utf-8") -> str | None:
    """`href` resolved against `base` (or alone, if None) as the URL Standard resolves
    it, without its fragment, whatever its scheme; None if the Standard fails it.

    `encoding` is the page's: a query is percent-encoded in it (a link ``?q=é`` on a
    windows-1252 page asks for ``?q=%E9``); paths and hosts are always UTF-8.
    """
    if encoding != "utf-8" and not href.isascii():
        href = _query_in(href, encoding)
    try:
        url = normalize_url(href) if base is None else join_url(base, href)
    except ValueError:
        # ada refuses text UTF-8 cannot carry; a browser reads a lone surrogate as U+FFFD.
        cleaned = _without_lone_surrogates(href)
        if cleaned == href:
            return None
        return join(cleaned, base, encoding)
    # The serialisation percent-encodes "#" everywhere else: the first one is the fragment's.
    cut = url.find("#")
    return url if cut < 0 else url[:cut]


def resolve(href: str, base: str | None = None, encoding: str = "utf-8") -> str | None:
    """`join`, for an http(s) URL only: what a crawler may fetch for `href`, or None."""
    url = join(href, base, encoding)
    return url if url is not None and url.startswith(WEB_SCHEMES) else None


# Host text an IPv4 address may be written as (decimal, octal, hex numbers; 1-4 parts).
_IPV4_CHARS_RE = re.compile(r"[0-9a-fA-FxX.]+")
_DOTTED_QUAD_RE = re.compile(r"\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}")


def ipv4(host: str) -> str | None:
    """The dotted quad a URL's host text names if the URL Standard reads it as an IPv4
    address (``0x7f.1``, ``2130706433``, ``0177.0.0.1`` → ``127.0.0.1``), else None."""
    if _IPV4_CHARS_RE.fullmatch(host) is None:
        return None
    url = resolve(f"http://{host}/")
    if url is None:
        return None
    name = url[len("http://") : -1]
    return name if _DOTTED_QUAD_RE.fullmatch(name) else None
