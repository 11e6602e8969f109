"""What the crawler reads in a fetched page: its links, and the text they are written in.

The crawler calls `is_html` on every response and `extract_links` on every HTML page,
then canonicalises each returned link with `thresher.frontier.canonicalize`. Both sit on
the hot path of a crawler meant to do about a thousand pages a second on two cores with
fetching and WARC writing, which leaves a few hundred microseconds per page for parsing,
and both take whatever a server sends: they never raise.

- `thresher.parse.charset`: bytes to text, choosing the encoding as browsers do
  (`decode_text`: byte order mark, Content-Type charset, ``<meta>`` prescan, UTF-8,
  windows-1252; WHATWG labels only).
- `thresher.parse.links`: `extract_links` (links, base, robots nofollow, title) and
  `is_html` (Content-Type, or MIME sniffing when the header says nothing).

Cost, measured with ``python3 tests/parse/bench_links.py`` on this project's 2-core
machine (selectolax 1.0.2, Python 3.11) while other sessions' benchmarks kept one core
busy; fastest batch, in µs per page:

=====================================================  =======
extract_links, 15 KB mail-archive page, 20 links           250
extract_links, the same page in windows-1252               285
extract_links, 100 KB, 300 links (flattened first)        2000
=====================================================  =======

Of the 250 µs: Lexbor parse 75-90, selecting the link, base, meta and title elements
30, reading their attributes 16, resolving and checking the links 50 (2.5 per link),
decoding and the ``<meta>`` prescan 16, freeing the tree 20. The crawler's
`canonicalize` costs another 15 per link.

Lexbor (`selectolax.lexbor`) is the backend: selectolax 1.0 removed Modest, and on
selectolax 0.4.13, the last release with both, Modest took 370 µs to parse and select the
same page where Lexbor took 265 (and selectolax 1.0's Lexbor takes 97). Text goes to
Lexbor as ``str``: from bytes it reads only UTF-8, and for UTF-8 pages both cost the same.
"""

from __future__ import annotations

from thresher.parse.charset import (
    decode_text,
    encoding_from_content_type,
    encoding_from_document,
    lookup_label,
)
from thresher.parse.links import Page, extract_links, is_html

__all__ = [
    "Page",
    "decode_text",
    "encoding_from_content_type",
    "encoding_from_document",
    "extract_links",
    "is_html",
    "lookup_label",
]
