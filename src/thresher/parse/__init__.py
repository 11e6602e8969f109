"""What the crawler reads in a fetched page: its links, and the text they are written in.

The crawler calls `is_html` on every response and `extract_links` on every HTML page,
fetches each returned link as it is (resolved as browsers resolve it: `thresher.weburl`)
and keys it by its canonical form (`thresher.frontier.key_of`). Both sit on
the hot path of a crawler meant to do about a thousand pages a second on two cores with
fetching and WARC writing, which leaves a few hundred microseconds per page for parsing,
and both take whatever a server sends: they never raise.

- `thresher.parse.charset`: bytes to text, choosing the encoding as browsers do
  (`decode_text`: byte order mark, Content-Type charset, ``<meta>`` prescan, UTF-8,
  windows-1252; WHATWG labels only).
- `thresher.parse.links`: `extract_links` (links, base, robots nofollow, title, and on
  request the page's requisites: `thresher.parse.requisites`) and `is_html`
  (Content-Type, or MIME sniffing when the header says nothing).
- `thresher.parse.css`: the URLs a stylesheet loads (`css_urls`), `is_css`, `decode_css`.
- `thresher.parse.sitemaps`: sitemaps (XML, text, gzip) and robots.txt ``Sitemap:`` lines.

Cost, measured with ``python3 tests/parse/bench_links.py`` on this project's 2-core
machine (selectolax 1.0.2, Python 3.11), quiet; fastest batch, in µs per page:

=====================================================  =======
extract_links, 15 KB mail-archive page, 20 links           116
extract_links, the same page in windows-1252               127
extract_links, 100 KB, 300 links (flattened first)         985
=====================================================  =======

Page requisites (``extract_links(…, requisites=True)``) cost one more selection over the
tree, and on big pages one more regular expression pass before flattening (the tags that
embed a resource made void). Measured against the code before them, interleaved, on the
same machine busy with other work (so about 1.7x the quiet figures above; fastest of 15
rounds): requisites off, 15 KB page 189 → 197 µs and 100 KB 1793 → 1818 (unchanged
within the noise); requisites on, 15 KB 227 µs (+20 %), 15 KB with 12 images 259 (+27 %),
100 KB flattened 2755 (+50 %, the extra pass over the text).

On a page of the crawl benchmark (17 KB, 30 links, UTF-8 with one non-ASCII character)
the parts are: Lexbor parse 34 µs, selecting the link, base, meta and title elements 9,
reading their attributes 11, resolving and checking the links 17 (most links are plain,
resolved by concatenation; by the general rules they took 39), checking that the bytes
are UTF-8 7.5. The crawler's `key_of` costs another 0.6 µs for a link already
canonical, 6 for the others (w3lib). Since links are resolved by the URL Standard
(ada-url, 2-4 µs a link that is not plain), the same page costs what it did: in CPU time
on a busy machine (six alternating runs, fastest), 100 µs for `extract_links` before and
after, 157-176 µs with every link keyed before and 170-179 after (noise of ±10 µs); the
mail-archive page 182 and 321 before, 176 and 273 after.

Lexbor (`selectolax.lexbor`) is the backend: selectolax 1.0 removed Modest, and on
selectolax 0.4.13, the last release with both, Modest took 370 µs to parse and select the
same page where Lexbor took 265 (and selectolax 1.0's Lexbor takes 97). Lexbor reads
bytes as UTF-8: a page that is ASCII, or valid UTF-8 in a UTF-8 page, goes to it as bytes
(`thresher.parse.charset.utf8_encoding` says when); any other is decoded first and goes as
``str``, which selectolax encodes to UTF-8 again (8-10 µs for 15 KB).
"""

from __future__ import annotations

from thresher.parse.charset import (
    decode_text,
    encoding_from_content_type,
    encoding_from_document,
    lookup_label,
)
from thresher.parse.css import css_urls, decode_css, is_css
from thresher.parse.links import Page, extract_links, is_html

__all__ = [
    "Page",
    "css_urls",
    "decode_css",
    "decode_text",
    "encoding_from_content_type",
    "encoding_from_document",
    "extract_links",
    "is_css",
    "is_html",
    "lookup_label",
]
