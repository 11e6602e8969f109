"""How long extract_links takes per page: the number the crawler's budget is made of.

    python3 tests/parse/bench_links.py            # about 20 seconds
    python3 tests/parse/bench_links.py --quick    # about 3 seconds

The page is a realistic 15 KB mail-archive message (navigation, quoted text, inline
markup, 20 links of every kind: relative, absolute, query, fragment, mailto). Each row
times batches of calls and prints the fastest and the median batch per call: the fastest
is the cost on an idle core, the median what other load on the machine made of it. Not
a test (pytest collects only test_*.py); the numbers are quoted in thresher.parse.
"""

from __future__ import annotations

import argparse
import importlib
import random
import statistics
import sys
import timeit
from collections.abc import Callable

import selectolax
from selectolax.lexbor import LexborHTMLParser

from thresher.frontier.canonical import key_of, url_hash
from thresher.parse import decode_text, extract_links
from thresher.parse import links as links_module

URL = "http://lists.example.org/pipermail/dev/2024-May/012345.html"
HREFS = [
    "/",
    "/pipermail/dev/",
    "date.html#12345",
    "thread.html#12345",
    "subject.html#12345",
    "author.html#12345",
    "012344.html",
    "012346.html",
    "../2024-April/011999.html",
    "mailto:dev%40lists.example.org?Subject=Re%3A%20patch",
    "https://lists.example.org/mailman/listinfo/dev",
    "https://github.com/example/project/pull/4711/files?diff=split",
    "https://bugs.example.org/show_bug.cgi?id=123456",
    "http://www.example.com/docs/manual/index.html#install",
    "//cdn.example.net/archive/attachment-0001.patch",
    "attachments/20240512/4a3b2c1d/attachment.bin",
    "?sort=date&order=desc",
    "#top",
    "https://example.org/wiki/Release_Notes_2.4",
    "/pipermail/dev/2024-May/thread.html",
]
TEXT = (
    "the patch applies cleanly on top of main but the test for the parser fails when the "
    "input holds a stray byte order mark so I moved the check before decoding and added "
    "a case for it thanks for the review"
)
WORDS = TEXT.split()


def sentence(i: int, n: int) -> str:
    return " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(n))


def make_page(size: int = 15_000, links: int = 20) -> bytes:
    """A deterministic mail-archive page of about `size` bytes with `links` links."""
    hrefs = [HREFS[i % len(HREFS)] for i in range(links)]
    head = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
        "<title>[dev] Re: [PATCH v3] parser: handle a BOM before the doctype</title>\n"
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<link rel="stylesheet" href="/static/archive.css">\n'
        "<script>function toggle(id){var e=document.getElementById(id);"
        "e.style.display = e.style.display == 'none' ? '' : 'none';}</script>\n"
        '</head><body>\n<div class="header"><h1>[dev] Re: [PATCH v3] parser</h1>\n'
        f'<b>Alice Example</b> <a href="{hrefs[0]}" title="Reply">alice at example.org</a>'
        "<br>\n<i>Sun May 12 10:22:31 UTC 2024</i><ul class='nav'>\n"
    )
    parts = [head]
    parts.extend(
        f'<li><a href="{href}">{sentence(i, 3)}</a></li>\n' for i, href in enumerate(hrefs[1:9])
    )
    parts.append('</ul></div><hr><div class="body"><pre>\n')
    parts.extend(
        f'&gt; {sentence(i, 6)} <a href="{href}">{sentence(i + 1, 2)}</a>\n'
        for i, href in enumerate(hrefs[9:], start=9)
    )
    i = 0
    while sum(map(len, parts)) < size - 100:
        quote = "&gt; " if i % 3 else ""
        parts.append(f"{quote}{sentence(i, 14)} <b>{WORDS[i % len(WORDS)]}</b>\n")
        i += 1
    parts.append('</pre></div><hr><p class="footer">More information about the dev list')
    parts.append("</p></body></html>\n")
    return "".join(parts).encode()


def make_crawl_page(i: int = 1234, port: int = 46559, hosts: int = 20) -> tuple[bytes, str]:
    """A page like those of benchmarks/crawl (13 KB, 30 links: 40 % paths on
    its own host, the rest absolute URLs of the site's loopback hosts, one in ten with a
    fragment), and its URL."""
    rng = random.Random(i)
    anchors = []
    for _ in range(30):
        j = rng.randrange(20_000)
        href = f"http://127.0.0.{j % hosts + 1}:{port}/p/{j}.html"
        if rng.random() < 0.4:
            href = f"/p/{j}.html"
        if rng.random() < 0.1:
            href += f"#s{rng.randint(1, 9)}"
        anchors.append(f'<a href="{href}">{sentence(j, 2)}</a>')
    text = " ".join(sentence(k, 12) for k in range(100))
    body = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>Page</title>'
        f"</head><body><p>{text[:8000]}</p><p>{' '.join(anchors)}</p><p>{text[:7000]} é</p>"
        "</body></html>"
    )
    return body.encode(), f"http://127.0.0.{i % hosts + 1}:{port}/p/{i}.html"


def links_and_keys(body: bytes, url: str) -> list[int]:
    """What a crawl does with a page's links: extract them, then key each (`key_of`,
    `url_hash`), with none in the engine's cache of recent links."""
    return [url_hash(key_of(link)) for link in extract_links(body, url).links]


def measure(name: str, func: Callable[[], object], number: int, repeat: int) -> None:
    times = [t / number * 1e6 for t in timeit.repeat(func, number=number, repeat=repeat)]
    print(
        f"{name:52s} {min(times):8.1f} {statistics.median(times):8.1f}",
        flush=True,
    )


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer batches")
    args = parser.parse_args(argv)
    number, repeat = (20, 30) if args.quick else (20, 300)
    page = make_page()
    page_1252 = make_page().replace(b"utf-8", b"windows-1252").replace(b"Alice", b"Al\xefce")
    big = make_page(100_000, 300)
    text = page.decode()
    selector = links_module._SELECTOR
    found = extract_links(page, URL)
    assert abs(len(page) - 15_000) < 200 and len(found.links) == 18, (len(page), found.links)
    print(f"selectolax {selectolax.__version__}, Python {sys.version.split()[0]}")
    print(f"{'µs per call':52s} {'fastest':>8s} {'median':>8s}")
    measure("extract_links, 15 KB, 20 links", lambda: extract_links(page, URL), number, repeat)
    measure(
        "  the same, with requisites",
        lambda: extract_links(page, URL, requisites=True),
        number,
        repeat,
    )
    with_images = page.replace(b"<b>", b'<img src="/icons/b.png" alt="" style="width:1em">', 12)
    measure(
        "  with 12 images, requisites off",
        lambda: extract_links(with_images, URL),
        number,
        repeat,
    )
    measure(
        "  with 12 images, requisites on",
        lambda: extract_links(with_images, URL, requisites=True),
        number,
        repeat,
    )
    measure(
        "extract_links, 15 KB, windows-1252 from the header",
        lambda: extract_links(page_1252, URL, "text/html; charset=windows-1252"),
        number,
        repeat,
    )
    measure(
        "extract_links, 100 KB, 300 links (flattened)",
        lambda: extract_links(big, URL),
        max(1, number // 5),
        repeat,
    )
    measure(
        "  the same, with requisites",
        lambda: extract_links(big, URL, requisites=True),
        max(1, number // 5),
        repeat,
    )
    crawl_page, crawl_url = make_crawl_page()
    measure(
        "extract_links + key each link, 15 KB, 20 links",
        lambda: links_and_keys(page, URL),
        number,
        repeat,
    )
    measure(
        "extract_links, crawl benchmark page, 30 links",
        lambda: extract_links(crawl_page, crawl_url),
        number,
        repeat,
    )
    measure(
        "extract_links + key each link, the same page",
        lambda: links_and_keys(crawl_page, crawl_url),
        number,
        repeat,
    )
    measure("  decode_text, 15 KB", lambda: decode_text(page), number, repeat)
    measure("  Lexbor parse, 15 KB", lambda: LexborHTMLParser(text), number, repeat)
    measure(
        "  Lexbor parse + css(), 15 KB",
        lambda: LexborHTMLParser(text).css(selector),
        number,
        repeat,
    )
    engine = links_module._selector()

    def parse_and_select() -> object:
        root = LexborHTMLParser(text).root
        assert root is not None
        return engine.find(selector, root)

    measure("  Lexbor parse + shared selector, 15 KB (ours)", parse_and_select, number, repeat)
    try:  # the Modest backend, gone since selectolax 1.0
        modest = importlib.import_module("selectolax.parser").HTMLParser
    except (ImportError, AttributeError):
        print("  Modest backend: not in this selectolax")
    else:
        measure("  Modest parse + css(), 15 KB", lambda: modest(text).css(selector), number, repeat)


if __name__ == "__main__":
    main(sys.argv[1:])
