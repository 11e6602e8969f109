"""Walk, the sans-IO core of an ingest: every status it decides, driven by Answer values.

No server and no I/O: each test plays the fetcher, answering each `Fetch` the walk asks
for, and checks every step, the final `Verdict` and the `hops` exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thresher.frontier import InvalidURL, canonicalize
from thresher.ingest.landing import _page_key
from thresher.ingest.walk import (
    DEFAULT_BLOCKLIST,
    MAX_HOPS,
    MAX_REDIRECTS,
    STATUSES,
    TRANSIENT_STATUSES,
    Answer,
    Blocklist,
    Fetch,
    Verdict,
    Walk,
)
from thresher.weburl import resolve

# -- bodies ------------------------------------------------------------------------------------

PDF = b"%PDF-1.7\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00"
ZIP = b"PK\x03\x04\x14\x00\x00\x00\x08\x00data.csv"
CSV = b"id,value\n1,0.5\n2,0.7\n"
JATS = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n'
    b'<!DOCTYPE article PUBLIC "-//NLM//DTD JATS (Z39.96) Journal Publishing DTD v1.2'
    b' 20190208//EN" "JATS-journalpublishing1.dtd">\n'
    b'<article article-type="research-article" dtd-version="1.2"><front/></article>'
)
XML = b'<?xml version="1.0"?>\n<record><title>On the harvesting of things</title></record>'
HTML_TYPE = "text/html; charset=utf-8"


def page(head: str = "", body: str = "") -> bytes:
    """An article page: navigation and a footer that no technique takes for the full text."""
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>An article</title>"
        f"{head}</head><body><nav><a href='/'>Home</a> <a href='/about'>About</a></nav>"
        f"<h1>An article</h1><p>Abstract.</p>{body}<footer>(c) Journal</footer></body></html>"
    ).encode()


def landing(link: str) -> bytes:
    """A landing page whose citation_pdf_url is `link`."""
    return page(f'<meta name="citation_pdf_url" content="{link}">')


def xml_landing(link: str) -> bytes:
    return page(f'<meta name="citation_xml_url" content="{link}">')


def wall(field: str = '<input type="password" name="pw">') -> bytes:
    return page(body=f'<form action="/login" method="post"><input name="user">{field}</form>')


# -- answers -----------------------------------------------------------------------------------


def ok(url: str, body: bytes, content_type: str | None = HTML_TYPE) -> Answer:
    return Answer(url, 200, None, body, content_type)


def moved(url: str, to: str | None, status: int = 302) -> Answer:
    return Answer(url, status, to, b"", None)


def failed(url: str, status: int) -> Answer:
    return Answer(url, status, None, b"<html><body>Nope</body></html>", HTML_TYPE)


def run(walk: Walk, answers: Sequence[Answer]) -> Verdict:
    """Start `walk` and give it `answers` in order; each must be for the URL it asked for.

    The walk must end exactly when the answers do.
    """
    step = walk.start()
    for answer in answers:
        assert step == Fetch(answer.url)
        step = walk.on_answer(answer)
    assert isinstance(step, Verdict), step
    return step


def landing_hop(url: str, technique: str = "citation_pdf_url") -> dict[str, Any]:
    return {"url": url, "status": 200, "kind": "landing", "technique": technique}


def terminal_hop(url: str, mimetype: str, status: int = 200) -> dict[str, Any]:
    return {"url": url, "status": status, "kind": "terminal", "mimetype": mimetype}


def redirect_hop(url: str, status: int = 302) -> dict[str, Any]:
    return {"url": url, "status": status, "kind": "redirect"}


def blocked_hop(url: str) -> dict[str, Any]:
    return {"url": url, "status": None, "kind": "blocked"}


def loop_hop(url: str) -> dict[str, Any]:
    return {"url": url, "status": None, "kind": "loop"}


def bad_url_hop(url: str) -> dict[str, Any]:
    return {"url": url, "status": None, "kind": "error", "error": "bad-url"}


def success(url: str, mimetype: str) -> Verdict:
    return Verdict("success", True, url, 200, mimetype)


A = "https://journal.example.org/article/1"
B = "https://journal.example.org/article/1/pdf"
C = "https://cdn.example.org/files/1.pdf"
D = "https://cdn.example.org/files/2.pdf"


# -- success -----------------------------------------------------------------------------------


def test_defaults() -> None:
    walk = Walk("pdf", A)
    assert (walk.max_hops, walk.max_redirects) == (MAX_HOPS, MAX_REDIRECTS) == (3, 10)
    assert walk.hops == []


def test_pdf_at_the_url() -> None:
    walk = Walk("pdf", C)
    assert run(walk, [ok(C, PDF, "application/pdf")]) == success(C, "application/pdf")
    assert walk.hops == [terminal_hop(C, "application/pdf")]


@pytest.mark.parametrize("content_type", ["text/html", "application/octet-stream", None])
def test_a_pdf_is_a_pdf_whatever_its_content_type(content_type: str | None) -> None:
    walk = Walk("pdf", C)
    assert run(walk, [ok(C, PDF, content_type)]) == success(C, "application/pdf")
    assert walk.hops == [terminal_hop(C, "application/pdf")]


def test_landing_page_to_pdf() -> None:
    walk = Walk("pdf", A)
    verdict = run(walk, [ok(A, landing(C)), ok(C, PDF, "application/pdf")])
    assert verdict == success(C, "application/pdf")
    assert walk.hops == [landing_hop(A), terminal_hop(C, "application/pdf")]


def test_relative_citation_pdf_url_resolves_against_the_page_url() -> None:
    page_url = "https://journal.example.org/a/b/view?id=7"
    pdf_url = "https://journal.example.org/files/7.pdf"
    walk = Walk("pdf", page_url)
    verdict = run(walk, [ok(page_url, landing("../../files/7.pdf")), ok(pdf_url, PDF)])
    assert verdict == success(pdf_url, "application/pdf")
    assert walk.hops == [landing_hop(page_url), terminal_hop(pdf_url, "application/pdf")]


def test_relative_link_resolves_against_the_page_reached_by_redirect() -> None:
    # The page's URL is where the redirect led, not the URL that was requested.
    walk = Walk("pdf", "http://doi.example/10.1/x")
    verdict = run(
        walk,
        [
            moved("http://doi.example/10.1/x", "https://pub.example/art/9/landing"),
            ok("https://pub.example/art/9/landing", landing("full.pdf")),
            ok("https://pub.example/art/9/full.pdf", PDF),
        ],
    )
    assert verdict == success("https://pub.example/art/9/full.pdf", "application/pdf")


def test_html_served_as_pdf_is_a_landing_page() -> None:
    walk = Walk("pdf", "https://repo.example/x.pdf")
    verdict = run(
        walk,
        [
            ok("https://repo.example/x.pdf", landing(C), "application/pdf"),
            ok(C, PDF, "application/pdf"),
        ],
    )
    assert verdict == success(C, "application/pdf")
    assert walk.hops == [
        landing_hop("https://repo.example/x.pdf"),
        terminal_hop(C, "application/pdf"),
    ]


def test_landing_page_technique_is_recorded() -> None:
    walk = Walk("pdf", A)
    body = page(body='<a href="/files/1.pdf">Download PDF</a>')
    pdf_url = "https://journal.example.org/files/1.pdf"
    assert run(walk, [ok(A, body), ok(pdf_url, PDF)]) == success(pdf_url, "application/pdf")
    assert walk.hops[0] == landing_hop(A, "anchor_text_pdf")


def test_redirects_then_landing_then_pdf() -> None:
    walk = Walk("pdf", "http://doi.example/10.1/x")
    verdict = run(
        walk,
        [
            moved("http://doi.example/10.1/x", A, 301),
            moved(A, B, 307),
            ok(B, landing(C)),
            moved(C, D, 302),
            ok(D, PDF, "application/octet-stream"),
        ],
    )
    assert verdict == success(D, "application/pdf")
    assert walk.hops == [
        redirect_hop("http://doi.example/10.1/x", 301),
        redirect_hop(A, 307),
        landing_hop(B),
        redirect_hop(C, 302),
        terminal_hop(D, "application/pdf"),
    ]


@pytest.mark.parametrize(
    ("body", "mimetype"), [(JATS, "application/jats+xml"), (XML, "application/xml")]
)
def test_xml_success(body: bytes, mimetype: str) -> None:
    walk = Walk("xml", C)
    assert run(walk, [ok(C, body, "text/plain")]) == success(C, mimetype)
    assert walk.hops == [terminal_hop(C, mimetype)]


def test_xml_through_a_landing_page() -> None:
    walk = Walk("xml", A)
    verdict = run(walk, [ok(A, xml_landing(D)), ok(D, JATS, "application/xml")])
    assert verdict == success(D, "application/jats+xml")
    assert walk.hops == [
        landing_hop(A, "citation_xml_url"),
        terminal_hop(D, "application/jats+xml"),
    ]


def test_html_success_is_the_page_itself_even_with_a_pdf_link() -> None:
    walk = Walk("html", A)
    assert run(walk, [ok(A, landing(C))]) == success(A, "text/html")
    assert walk.hops == [terminal_hop(A, "text/html")]


@pytest.mark.parametrize(
    ("body", "mimetype"),
    [
        (CSV, "text/plain"),
        (ZIP, "application/zip"),
        (PDF, "application/pdf"),
        (XML, "application/xml"),
    ],
)
def test_dataset_success_is_anything_but_html(body: bytes, mimetype: str) -> None:
    walk = Walk("dataset", C)
    assert run(walk, [ok(C, body, "application/octet-stream")]) == success(C, mimetype)
    assert walk.hops == [terminal_hop(C, mimetype)]


# -- landing pages without a link ------------------------------------------------------------


def test_no_pdf_link() -> None:
    walk = Walk("pdf", A)
    assert run(walk, [ok(A, page())]) == Verdict("no-pdf-link", False, A, 200, "text/html")
    assert walk.hops == [terminal_hop(A, "text/html")]


def test_a_link_to_the_page_itself_is_a_link_loop() -> None:
    # As sandcrawler reports it: the page's full-text link leads back to the page.
    walk = Walk("pdf", A)
    verdict = run(walk, [ok(A, landing(A))])
    assert verdict == Verdict("link-loop", False, A, 200, error=f"back to {A}")
    assert walk.hops == [landing_hop(A), loop_hop(A)]


def test_a_link_to_the_page_itself_after_a_hop_is_a_link_loop() -> None:
    walk = Walk("pdf", A)
    verdict = run(walk, [ok(A, landing(B)), ok(B, landing(B + "#pdf"))])
    assert verdict == Verdict("link-loop", False, B, 200, error=f"back to {B}")
    assert walk.hops == [landing_hop(A), landing_hop(B), loop_hop(B)]


def test_a_link_to_the_page_itself_beside_a_real_one_is_followed() -> None:
    walk = Walk("pdf", A)
    html = page(
        f'<meta name="citation_pdf_url" content="{A}">'
        f'<link rel="alternate" type="application/pdf" href="{C}">'
    )
    verdict = run(walk, [ok(A, html), ok(C, PDF, "application/pdf")])
    assert verdict.status == "success"
    assert walk.hops[0] == landing_hop(A, "link_alternate_pdf")


def test_no_xml_link() -> None:
    # A PDF link does not count for xml.
    walk = Walk("xml", A)
    assert run(walk, [ok(A, landing(C))]) == Verdict("no-xml-link", False, A, 200, "text/html")
    assert walk.hops == [terminal_hop(A, "text/html")]


def test_no_pdf_link_after_a_hop() -> None:
    walk = Walk("pdf", A)
    verdict = run(walk, [ok(A, landing(B)), ok(B, page())])
    assert verdict == Verdict("no-pdf-link", False, B, 200, "text/html")
    assert walk.hops == [landing_hop(A), terminal_hop(B, "text/html")]


@pytest.mark.parametrize(
    "field",
    [
        '<input type="password" name="pw">',
        "<input type='password' name='pw'>",
        "<input name=pw type=password>",
        '<INPUT NAME="PW" TYPE="PASSWORD">',
        '<input class="form-control"\n  type = "Password" autocomplete="current-password">',
        '<input name="pw"type="password">',
        '<input data-type="secret" type="password">',
    ],
)
@pytest.mark.parametrize("ingest_type", ["pdf", "xml"])
def test_blocked_wall(field: str, ingest_type: str) -> None:
    walk = Walk(ingest_type, A)
    verdict = run(walk, [ok(A, wall(field))])
    assert verdict == Verdict("blocked-wall", False, A, 200, "text/html")
    assert walk.hops == [terminal_hop(A, "text/html")]


@pytest.mark.parametrize(
    "field",
    [
        '<input type="text" name="password">',  # a field named so is no password field
        '<input type="hidden" name="type" value="password">',
        "<p>Forgot your password? type it again</p>",
    ],
)
def test_not_a_wall_without_a_password_input(field: str) -> None:
    walk = Walk("pdf", A)
    assert run(walk, [ok(A, wall(field))]).status == "no-pdf-link"


@pytest.mark.parametrize(
    "field",
    [
        '<input data-type="password" name="pw">',
        "<input data-type=password name=pw>",
        '<input DATA-TYPE="Password" name="pw">',
        '<input data-type="password" type="text" name="pw">',
        '<input data-field-type="password" name="pw">',
        '<input name="pw" x-type="password">',
    ],
)
@pytest.mark.parametrize("ingest_type", ["pdf", "xml"])
def test_a_data_type_password_attribute_is_no_wall(field: str, ingest_type: str) -> None:
    # The attribute that makes a password field is `type`, not `data-type` and the like.
    walk = Walk(ingest_type, A)
    verdict = run(walk, [ok(A, wall(field))])
    assert verdict == Verdict(f"no-{ingest_type}-link", False, A, 200, "text/html")
    assert walk.hops == [terminal_hop(A, "text/html")]


def test_a_wall_with_a_pdf_link_is_followed() -> None:
    walk = Walk("pdf", A)
    body = page('<meta name="citation_pdf_url" content="/files/1.pdf">', wall().decode())
    pdf_url = "https://journal.example.org/files/1.pdf"
    assert run(walk, [ok(A, body), ok(pdf_url, PDF)]) == success(pdf_url, "application/pdf")


def test_login_wall_reached_by_redirect() -> None:
    login = "https://journal.example.org/login?next=/files/1.pdf"
    walk = Walk("pdf", A)
    verdict = run(walk, [ok(A, landing(C)), moved(C, login), ok(login, wall())])
    assert verdict == Verdict("blocked-wall", False, login, 200, "text/html")
    assert walk.hops == [landing_hop(A), redirect_hop(C), terminal_hop(login, "text/html")]


# -- wrong kinds, empty bodies ---------------------------------------------------------------


def test_png_for_pdf_is_wrong_mimetype() -> None:
    walk = Walk("pdf", C)
    verdict = run(walk, [ok(C, PNG, "application/pdf")])
    assert verdict == Verdict("wrong-mimetype", False, C, 200, "image/png")
    assert walk.hops == [terminal_hop(C, "image/png")]


def test_html_for_dataset_is_wrong_mimetype() -> None:
    walk = Walk("dataset", A)
    verdict = run(walk, [ok(A, landing(C))])  # no link is followed for a dataset
    assert verdict == Verdict("wrong-mimetype", False, A, 200, "text/html")
    assert walk.hops == [terminal_hop(A, "text/html")]


def test_pdf_for_html_is_wrong_mimetype() -> None:
    walk = Walk("html", C)
    verdict = run(walk, [ok(C, PDF, "text/html")])
    assert verdict == Verdict("wrong-mimetype", False, C, 200, "application/pdf")


@pytest.mark.parametrize("ingest_type", ["pdf", "xml", "html", "dataset"])
def test_empty_blob(ingest_type: str) -> None:
    walk = Walk(ingest_type, C)
    verdict = run(walk, [ok(C, b"", "application/pdf")])
    assert verdict == Verdict("empty-blob", False, C, 200, "application/x-empty")
    assert walk.hops == [terminal_hop(C, "application/x-empty")]


def test_empty_blob_after_a_landing_page() -> None:
    walk = Walk("pdf", A)
    verdict = run(walk, [ok(A, landing(C)), Answer(C, 204, None, b"", None)])
    assert verdict == Verdict("empty-blob", False, C, 204, "application/x-empty")
    assert walk.hops == [landing_hop(A), terminal_hop(C, "application/x-empty", 204)]


# -- HTTP statuses ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "transient"),
    [
        (408, True),
        (425, True),
        (429, True),
        (500, True),
        (502, True),
        (503, True),
        (504, True),
        (400, False),
        (401, False),
        (403, False),
        (404, False),
        (410, False),
        (451, False),
        (100, False),
    ],
)
def test_terminal_bad_status(status: int, transient: bool) -> None:
    walk = Walk("pdf", C)
    verdict = run(walk, [failed(C, status)])
    assert verdict == Verdict("terminal-bad-status", False, C, status, transient=transient)
    assert walk.hops == [{"url": C, "status": status, "kind": "terminal"}]


# Not only the usual 500, 502, 503 and 504: 507, 509, Cloudflare's 520-524 (origin down,
# connection timed out, timeout) and the rest of the 5xx are worth another attempt too.
@pytest.mark.parametrize("status", [501, 505, 507, 509, 520, 521, 522, 523, 524, 599])
def test_every_5xx_is_transient(status: int) -> None:
    walk = Walk("pdf", C)
    verdict = run(walk, [failed(C, status)])
    assert verdict == Verdict("terminal-bad-status", False, C, status, transient=True)
    assert walk.hops == [{"url": C, "status": status, "kind": "terminal"}]


def test_terminal_bad_status_after_a_redirect_and_a_landing_page() -> None:
    walk = Walk("pdf", A)
    verdict = run(walk, [ok(A, landing(C)), moved(C, D, 303), failed(D, 503)])
    assert verdict == Verdict("terminal-bad-status", False, D, 503, transient=True)
    assert walk.hops == [
        landing_hop(A),
        redirect_hop(C, 303),
        {"url": D, "status": 503, "kind": "terminal"},
    ]


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308, 300, 304])
def test_3xx_without_location_is_terminal_bad_status(status: int) -> None:
    walk = Walk("pdf", C)
    verdict = run(walk, [moved(C, None, status)])
    assert verdict == Verdict("terminal-bad-status", False, C, status, transient=False)
    assert walk.hops == [{"url": C, "status": status, "kind": "terminal"}]


# -- loops -------------------------------------------------------------------------------------
# The walk ends at the last answer (its URL and status); the URL it would not fetch again is
# named in the error and is the last hop, of kind "loop".


def test_link_loop_back_to_the_first_page() -> None:
    walk = Walk("pdf", A)
    verdict = run(walk, [ok(A, landing(B)), ok(B, landing(A))])
    assert verdict == Verdict("link-loop", False, B, 200, error=f"back to {A}")
    assert walk.hops == [landing_hop(A), landing_hop(B), loop_hop(A)]


def test_link_loop_back_to_a_page_reached_by_redirect() -> None:
    walk = Walk("pdf", A)
    verdict = run(walk, [moved(A, B), ok(B, landing(C)), ok(C, landing(B))])
    assert verdict == Verdict("link-loop", False, C, 200, error=f"back to {B}")
    assert walk.hops == [redirect_hop(A), landing_hop(B), landing_hop(C), loop_hop(B)]


def test_link_loop_back_to_a_url_that_redirected() -> None:
    walk = Walk("pdf", A)
    verdict = run(walk, [moved(A, B), ok(B, landing(A))])
    assert verdict == Verdict("link-loop", False, B, 200, error=f"back to {A}")
    assert walk.hops == [redirect_hop(A), landing_hop(B), loop_hop(A)]


@pytest.mark.parametrize(
    ("start", "again", "reported"),
    [
        ("HTTP://Host.example:80/a", "http://host.example/a", "http://host.example/a"),
        # The link finder reads links as browsers do (host lowercased, default port and
        # fragment dropped); canonically, the query's order does not count either.
        ("http://host.example/a", "HTTP://HOST.EXAMPLE:80/a", "http://host.example/a"),
        (
            "https://Host.example./a?y=2&x=1",
            "https://host.example:443/a?x=1&y=2#pdf",
            "https://host.example/a?x=1&y=2",
        ),
    ],
)
def test_link_loop_by_canonical_url(start: str, again: str, reported: str) -> None:
    b = "http://other.example/b"
    walk = Walk("pdf", start)
    verdict = run(walk, [ok(start, landing(b)), ok(b, landing(again))])
    # The error and the loop hop name the link as the page gave it (as a browser reads it).
    assert verdict == Verdict("link-loop", False, b, 200, error=f"back to {reported}")
    assert walk.hops == [landing_hop(start), landing_hop(b), loop_hop(reported)]


def test_redirect_loop() -> None:
    walk = Walk("pdf", A)
    verdict = run(walk, [moved(A, B), moved(B, A, 301)])
    assert verdict == Verdict("redirect-loop", False, B, 301, error=f"back to {A}")
    assert walk.hops == [redirect_hop(A), redirect_hop(B, 301), loop_hop(A)]


def test_redirect_to_itself() -> None:
    walk = Walk("pdf", A)
    verdict = run(walk, [moved(A, A)])
    assert verdict == Verdict("redirect-loop", False, A, 302, error=f"back to {A}")
    assert walk.hops == [redirect_hop(A), loop_hop(A)]


def test_redirect_loop_by_canonical_url() -> None:
    start, again = "http://host.example/a", "HTTP://HOST.example:80/a#top"
    walk = Walk("pdf", start)
    verdict = run(walk, [moved(start, again, 307)])
    # The error and the loop hop name the Location as the server gave it.
    assert verdict == Verdict("redirect-loop", False, start, 307, error=f"back to {again}")
    assert walk.hops == [redirect_hop(start, 307), loop_hop(again)]


def test_redirect_back_to_a_landing_page() -> None:
    walk = Walk("pdf", A)
    verdict = run(walk, [ok(A, landing(C)), moved(C, A)])
    assert verdict == Verdict("redirect-loop", False, C, 302, error=f"back to {A}")
    assert walk.hops == [landing_hop(A), redirect_hop(C), loop_hop(A)]


def test_http_to_https_is_no_loop() -> None:
    walk = Walk("pdf", "http://host.example/a.pdf")
    verdict = run(
        walk,
        [
            moved("http://host.example/a.pdf", "https://host.example/a.pdf", 301),
            ok("https://host.example/a.pdf", PDF),
        ],
    )
    assert verdict == success("https://host.example/a.pdf", "application/pdf")


# -- limits ------------------------------------------------------------------------------------


def hop_url(i: int) -> str:
    return f"https://hops.example/page/{i}"


@pytest.mark.parametrize("max_hops", [0, 1, 3])
def test_max_hops_landing_pages_are_followed(max_hops: int) -> None:
    walk = Walk("pdf", hop_url(0), max_hops=max_hops)
    answers = [ok(hop_url(i), landing(hop_url(i + 1))) for i in range(max_hops)]
    verdict = run(walk, [*answers, ok(hop_url(max_hops), PDF)])
    assert verdict == success(hop_url(max_hops), "application/pdf")
    assert walk.hops == [landing_hop(hop_url(i)) for i in range(max_hops)] + [
        terminal_hop(hop_url(max_hops), "application/pdf")
    ]


@pytest.mark.parametrize("max_hops", [0, 1, 3])
def test_max_hops_exceeded_at_max_hops_plus_one_landing_pages(max_hops: int) -> None:
    walk = Walk("pdf", hop_url(0), max_hops=max_hops)
    verdict = run(walk, [ok(hop_url(i), landing(hop_url(i + 1))) for i in range(max_hops + 1)])
    last = hop_url(max_hops)
    assert verdict == Verdict(
        "max-hops-exceeded", False, last, 200, "text/html", error=f"more than {max_hops}"
    )
    assert walk.hops == [landing_hop(hop_url(i)) for i in range(max_hops + 1)]


def redirect_url(i: int) -> str:
    return f"https://r.example/{i}"


@pytest.mark.parametrize("max_redirects", [0, 1, MAX_REDIRECTS])
def test_max_redirects_are_followed(max_redirects: int) -> None:
    walk = Walk("pdf", redirect_url(0), max_redirects=max_redirects)
    answers = [moved(redirect_url(i), redirect_url(i + 1)) for i in range(max_redirects)]
    verdict = run(walk, [*answers, ok(redirect_url(max_redirects), PDF)])
    assert verdict == success(redirect_url(max_redirects), "application/pdf")
    assert len(walk.hops) == max_redirects + 1


@pytest.mark.parametrize("max_redirects", [0, 1, MAX_REDIRECTS])
def test_redirects_exceeded_at_max_redirects_plus_one(max_redirects: int) -> None:
    walk = Walk("pdf", redirect_url(0), max_redirects=max_redirects)
    verdict = run(
        walk, [moved(redirect_url(i), redirect_url(i + 1), 301) for i in range(max_redirects + 1)]
    )
    assert verdict == Verdict(
        "redirects-exceeded",
        False,
        redirect_url(max_redirects),
        301,
        error=f"more than {max_redirects}",
    )
    assert walk.hops == [redirect_hop(redirect_url(i), 301) for i in range(max_redirects + 1)]


def test_redirect_count_resets_after_a_landing_page() -> None:
    # Two redirects, a landing page, two more redirects: never more than two in a row.
    walk = Walk("pdf", redirect_url(0), max_redirects=2)
    verdict = run(
        walk,
        [
            moved(redirect_url(0), redirect_url(1)),
            moved(redirect_url(1), redirect_url(2)),
            ok(redirect_url(2), landing(redirect_url(3))),
            moved(redirect_url(3), redirect_url(4)),
            moved(redirect_url(4), redirect_url(5)),
            ok(redirect_url(5), PDF),
        ],
    )
    assert verdict == success(redirect_url(5), "application/pdf")


def test_redirect_count_is_not_reset_without_a_landing_page() -> None:
    walk = Walk("pdf", redirect_url(0), max_redirects=2)
    verdict = run(
        walk,
        [
            moved(redirect_url(0), redirect_url(1)),
            moved(redirect_url(1), redirect_url(2)),
            ok(redirect_url(2), landing(redirect_url(3))),
            moved(redirect_url(3), redirect_url(4)),
            moved(redirect_url(4), redirect_url(5)),
            moved(redirect_url(5), redirect_url(6)),
        ],
    )
    assert (verdict.status, verdict.terminal_url) == ("redirects-exceeded", redirect_url(5))


# -- the blocklist -----------------------------------------------------------------------------
# A blocklisted URL is not fetched: the walk ends at the last answer (no URL and no status when
# it is the start URL), the error names the URL and it is the last hop, of kind "blocked".


def blocked(url: str, terminal_url: str | None = None, status: int | None = None) -> Verdict:
    return Verdict("skip-url-blocklist", False, terminal_url, status, error=f"blocklisted: {url}")


@pytest.mark.parametrize(
    "url",
    [
        "https://web.archive.org/web/2020/https://journal.example.org/1.pdf",
        "http://archive.today/2021.01.01/https://journal.example.org/",
        "https://archive.ph/AbCdE",
        "https://scholar.google.de/scholar?q=harvesting",
        "https://www.google.com/search?q=harvesting",
        "https://www.bing.com/search?q=harvesting",
        "HTTPS://WEB.ARCHIVE.ORG/web/2020/https://journal.example.org/1.pdf",
        "https://Scholar.Google.com/scholar?q=x",
    ],
)
def test_start_url_on_the_default_blocklist(url: str) -> None:
    walk = Walk("pdf", url)
    assert walk.start() == blocked(url)
    assert walk.hops == [blocked_hop(url)]


# Spellings of blocked URLs that no entry matches as written: the canonical form does.
BLOCKED_SPELLINGS = [
    "https://web.archive.org:443/web/2020/https://journal.example.org/1.pdf",
    "https://web.archive.org./web/2020/https://journal.example.org/1.pdf",
    "http://web.archive.org:80/web/2020/https://journal.example.org/1.pdf",
    "HTTPS://Web.Archive.Org.:443/web/2020/https://journal.example.org/1.pdf",
    "https://web.archive.org/./web/2020/https://journal.example.org/1.pdf",
    "https://archive.ph.:443/AbCdE",
    "https://www.google.com:443/search?q=harvesting",
]


@pytest.mark.parametrize("url", BLOCKED_SPELLINGS)
def test_a_blocked_url_spelled_differently_is_blocked(url: str) -> None:
    assert not any(entry in url.lower() for entry in DEFAULT_BLOCKLIST)
    walk = Walk("pdf", url)
    assert walk.start() == blocked(url)
    assert walk.hops == [blocked_hop(url)]  # the URL as it was given


@pytest.mark.parametrize("target", BLOCKED_SPELLINGS[:2])
def test_a_blocked_url_spelled_differently_is_blocked_when_reached(target: str) -> None:
    walk = Walk("pdf", A)
    assert run(walk, [moved(A, target, 301)]) == blocked(target, A, 301)
    assert walk.hops == [redirect_hop(A, 301), blocked_hop(target)]
    walk = Walk("pdf", B)
    linked = resolve(target)  # a link, as a browser reads it
    assert linked is not None
    assert run(walk, [ok(B, landing(target))]) == blocked(linked, B, 200)
    assert walk.hops == [landing_hop(B), blocked_hop(linked)]


@pytest.mark.parametrize(
    "url",
    [
        "https://www.archive.org/details/x",  # not a replay
        "https://google.com/scholar-like/paper.pdf",
        "https://archive.phys.example/1.pdf",
        "https://web.archive.org:8443/web/2020/https://journal.example.org/1.pdf",  # not :443
        "https://web.archive.org.example/web/2020/https://journal.example.org/1.pdf",
    ],
)
def test_near_misses_are_fetched(url: str) -> None:
    assert Walk("pdf", url).start() == Fetch(url)


def test_custom_substring_is_case_insensitive_and_keeps_the_defaults() -> None:
    blocklist = Blocklist((*DEFAULT_BLOCKLIST, "/Private/Files/"))
    assert blocklist.blocks("https://x.example/PRIVATE/files/1.pdf")
    assert blocklist.blocks("https://web.archive.org/web/1/x")
    assert not blocklist.blocks("https://x.example/private/1.pdf")
    url = "https://X.example/private/FILES/1.pdf"
    walk = Walk("pdf", url, blocklist=blocklist)
    assert walk.start() == blocked(url)
    assert walk.hops == [blocked_hop(url)]


def test_own_entries_replace_the_defaults() -> None:
    url = "https://web.archive.org/web/1/x"
    assert Walk("pdf", url, blocklist=Blocklist(["/private/"])).start() == Fetch(url)
    assert Walk("pdf", url, blocklist=Blocklist(())).start() == Fetch(url)
    # Empty entries block nothing.
    assert Walk("pdf", url, blocklist=Blocklist([""])).start() == Fetch(url)


def test_regex_entry() -> None:
    blocklist = Blocklist([r"re:\.zip$", r"re:^https?://[^/]*\.tracker\.example/", "/x/"])
    assert blocklist.blocks("https://x.example/data.zip")
    assert not blocklist.blocks("https://x.example/data.zip?download=1")
    assert blocklist.blocks("http://a.tracker.example/?u=1")
    assert not blocklist.blocks("https://x.example/?via=http://a.tracker.example/")
    assert blocklist.blocks("https://x.example/x/1.pdf")
    # "re:" entries are regular expressions, not substrings.
    assert not blocklist.blocks(r"https://x.example/re:\.zip$")
    assert not Blocklist([r"re:\.zip$"]).blocks("https://x.example/dataXzip")


def test_regex_entry_matches_the_canonical_form_too() -> None:
    blocklist = Blocklist([r"re:^https://web\.archive\.org/web/", r"re:\.zip$"])
    assert blocklist.blocks("HTTPS://WEB.ARCHIVE.ORG:443/web/1/x")
    assert blocklist.blocks("https://web.archive.org./web/1/x")
    assert not blocklist.blocks("https://web.archive.org:8443/web/1/x")
    # The fragment is never sent: the URL fetched ends in .zip.
    assert blocklist.blocks("https://x.example/data.zip#download")


def test_regex_entry_with_inline_flags() -> None:
    # Each entry is compiled on its own, so a global flag such as (?i) is at its start and
    # holds for that entry alone.
    blocklist = Blocklist([r"re:/case/\.pdf$", r"re:(?i)\.ZIP$"])
    assert blocklist.blocks("https://x.example/data.zip")
    assert blocklist.blocks("https://x.example/DATA.Zip")
    assert not blocklist.blocks("https://x.example/data.zip?x=1")
    assert blocklist.blocks("https://x.example/case/.pdf")
    assert not blocklist.blocks("https://x.example/CASE/.PDF")


def test_regex_entries_are_independent() -> None:
    # A back-reference names a group of its own entry, whatever entries come before it.
    blocklist = Blocklist([r"re:/(a)x/", r"re:/(b+)/\1$"])
    assert blocklist.blocks("https://x.example/bb/bb")
    assert blocklist.blocks("https://x.example/ax/1")
    assert not blocklist.blocks("https://x.example/bb/b")
    assert not blocklist.blocks("https://x.example/bb/a")


def test_empty_regex_entry_blocks_nothing() -> None:
    # Like an empty substring entry; the other entries still count.
    assert not Blocklist(["re:"]).blocks(C)
    assert Walk("pdf", C, blocklist=Blocklist(["re:", ""])).start() == Fetch(C)
    assert Blocklist(["re:", "/files/"]).blocks(C)
    assert Blocklist(["re:", r"re:/files/"]).blocks(C)


# (a blocklist, a URL on it, a URL that is not)
REACHED = [
    (
        Blocklist(),
        "https://web.archive.org/web/2020/https://journal.example.org/1.pdf",
        "https://www.archive.org/details/journal-1",
    ),
    (
        Blocklist((*DEFAULT_BLOCKLIST, "/PayWall/")),
        "https://journal.example.org/paywall/1.pdf",
        "https://journal.example.org/pay/wall/1.pdf",
    ),
    (
        Blocklist([r"re:/paywall/.*\.pdf$"]),
        "https://journal.example.org/paywall/1.pdf",
        "https://journal.example.org/paywall/1.pdf?free=1",
    ),
]


@pytest.mark.parametrize(("blocklist", "target", "_"), REACHED)
def test_redirect_to_a_blocklisted_url(blocklist: Blocklist, target: str, _: str) -> None:
    walk = Walk("pdf", A, blocklist=blocklist)
    verdict = run(walk, [moved(A, target)])
    assert verdict == blocked(target, A, 302)
    assert walk.hops == [redirect_hop(A), blocked_hop(target)]


@pytest.mark.parametrize(("blocklist", "target", "_"), REACHED)
def test_landing_page_link_to_a_blocklisted_url(blocklist: Blocklist, target: str, _: str) -> None:
    walk = Walk("pdf", A, blocklist=blocklist)
    verdict = run(walk, [ok(A, landing(target))])
    assert verdict == blocked(target, A, 200)
    assert walk.hops == [landing_hop(A), blocked_hop(target)]


def test_blocklisted_url_after_redirects_and_a_landing_page() -> None:
    target = REACHED[0][1]
    walk = Walk("pdf", A)
    verdict = run(walk, [moved(A, B, 301), ok(B, landing(C)), moved(C, target, 307)])
    assert verdict == blocked(target, C, 307)
    assert walk.hops == [
        redirect_hop(A, 301),
        landing_hop(B),
        redirect_hop(C, 307),
        blocked_hop(target),
    ]


@pytest.mark.parametrize(("blocklist", "_", "target"), REACHED)
def test_redirect_and_link_off_the_blocklist_are_followed(
    blocklist: Blocklist, _: str, target: str
) -> None:
    walk = Walk("pdf", A, blocklist=blocklist)
    assert walk.start() == Fetch(A)
    assert walk.on_answer(moved(A, B)) == Fetch(B)
    assert walk.on_answer(ok(B, landing(target))) == Fetch(target)


# -- bad URLs ----------------------------------------------------------------------------------
# Like a blocklisted URL: not fetched, the walk ends at the last answer, the URL is the last hop.


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("https://journal.example.org:99999/1.pdf", "Port out of range"),
        ("https://journal.example.org:pdf/1.pdf", "Port could not be cast"),
        ("http://[::1/1.pdf", "Invalid IPv6 URL"),
        ("ftp://journal.example.org/1.pdf", "scheme 'ftp' is not http or https"),
        ("https://", "no host"),
    ],
)
def test_bad_start_url(url: str, why: str) -> None:
    walk = Walk("pdf", url)
    verdict = walk.start()
    assert isinstance(verdict, Verdict)
    assert verdict.error is not None
    # Nothing was fetched: no terminal URL, no status.
    assert verdict == Verdict("bad-url", False, None, None, error=verdict.error)
    assert verdict.error.startswith(f"cannot crawl {url!r}: ")
    assert why in verdict.error
    assert walk.hops == [bad_url_hop(url)]


def test_redirect_to_a_bad_url() -> None:
    target = "http://journal.example.org:65536/1.pdf"
    walk = Walk("pdf", A)
    verdict = run(walk, [moved(A, target)])
    error = f"cannot crawl {target!r}: Port out of range 0-65535"
    assert verdict == Verdict("bad-url", False, A, 302, error=error)
    assert walk.hops == [redirect_hop(A), bad_url_hop(target)]


def test_blocklist_is_checked_before_the_url_is_parsed() -> None:
    url = "https://journal.example.org:99999/blocked/1.pdf"
    walk = Walk("pdf", url, blocklist=Blocklist(["/blocked/"]))
    assert walk.start() == blocked(url)
    assert walk.hops == [blocked_hop(url)]


# -- fetch errors ------------------------------------------------------------------------------

PERMANENT_FETCH_ERRORS = ["body-too-large", "blocked-robots", "blocked-address", "bad-url"]


@pytest.mark.parametrize(
    ("status", "transient"),
    [(s, True) for s in sorted(TRANSIENT_STATUSES)] + [(s, False) for s in PERMANENT_FETCH_ERRORS],
)
def test_on_error_at_the_start(status: str, transient: bool) -> None:
    walk = Walk("pdf", C)
    assert walk.start() == Fetch(C)
    verdict = walk.on_error(status, C, "what went wrong")
    assert verdict == Verdict(
        status, False, C, None, None, error="what went wrong", transient=transient
    )
    assert walk.hops == [{"url": C, "status": None, "kind": "error", "error": status}]


def test_transient_statuses_are_the_documented_ones() -> None:
    documented = {"timeout", "dns-error", "connection-error", "bad-response", "host-backoff"}
    assert documented == TRANSIENT_STATUSES
    assert TRANSIENT_STATUSES < STATUSES


def test_on_error_after_a_redirect_and_a_landing_page() -> None:
    walk = Walk("pdf", A)
    step = walk.start()
    assert step == Fetch(A)
    assert walk.on_answer(moved(A, B, 301)) == Fetch(B)
    assert walk.on_answer(ok(B, landing(C))) == Fetch(C)
    verdict = walk.on_error("timeout", C, "read timed out after 30 s")
    assert verdict == Verdict(
        "timeout", False, C, None, error="read timed out after 30 s", transient=True
    )
    assert walk.hops == [
        redirect_hop(A, 301),
        landing_hop(B),
        {"url": C, "status": None, "kind": "error", "error": "timeout"},
    ]


# -- property: any answers end the walk, soon, without fetching a URL twice -------------------

# Many spellings of few pages: URLs that differ as text often are the same page.
_SPELLINGS = [
    f"{scheme}://{host}/{path}"
    for scheme in ("http", "HTTP", "https")
    for host in ("h.example", "H.Example:80", "g.example", "g.example.")
    for path in (
        *("", "a", "a/../b", "c?y=1&x=2", "c?x=2&y=1", "d.pdf", "e#frag"),
        *(f"p/{i}" for i in range(12)),
    )
]
_REFUSED = [
    "http://h.example:99999/x",  # bad port
    "https://web.archive.org/web/1/http://h.example/",  # blocklisted
    "https://web.archive.org:443/web/1/http://h.example/",  # blocklisted, spelled differently
    "https://WEB.archive.org./web/1/http://h.example/",  # the same
]
STARTS = st.sampled_from(_SPELLINGS + _REFUSED * 6)
TARGETS = st.sampled_from(_SPELLINGS + _REFUSED * 3 + ["../p/1", "d.pdf"] * 6)
# The kind of each answer: mostly redirects and landing pages, so that walks run long.
KINDS = st.sampled_from(["redirect"] * 4 + ["landing"] * 4 + ["other-landing", "end", "error"])
BODIES = st.sampled_from([PDF, PNG, b"", JATS, XML, CSV, page(), wall()])
LANDINGS = {"pdf": landing, "xml": xml_landing}


def _absolute(to: str) -> str:
    return to if "://" in to else "http://h.example/x/" + to  # a Location is absolute


def draw_answer(data: st.DataObject, url: str, ingest_type: str) -> Answer | str:
    """What a server may answer for `url`, or the status of a fetch error."""
    kind = data.draw(KINDS)
    if kind == "redirect":
        status = data.draw(st.sampled_from([301, 302, 303, 307, 308]))
        return Answer(url, status, _absolute(data.draw(TARGETS)), b"", None)
    if kind in ("landing", "other-landing"):
        same = kind == "landing"
        make = LANDINGS.get(ingest_type if same else "xml" if ingest_type == "pdf" else "pdf")
        body = (make or landing)(data.draw(TARGETS))
        return Answer(url, 200, None, body, data.draw(st.sampled_from([HTML_TYPE, None])))
    if kind == "error":
        return data.draw(st.sampled_from(sorted(TRANSIENT_STATUSES) + PERMANENT_FETCH_ERRORS))
    status = data.draw(st.sampled_from([200, 200, 200, 204, 302, 404, 429, 501, 503]))
    body = data.draw(BODIES) if status == 200 else b""
    return Answer(url, status, None, body, data.draw(st.sampled_from([None, "application/pdf"])))


# The URLs the walk refuses to fetch: the status of the verdict, the kind of the last hop.
REFUSALS = {
    "link-loop": "loop",
    "redirect-loop": "loop",
    "skip-url-blocklist": "blocked",
    "bad-url": "error",
}


@settings(max_examples=200, deadline=None)
@given(
    data=st.data(),
    ingest_type=st.sampled_from(["pdf", "pdf", "xml", "html", "dataset"]),
    start=STARTS,
    max_hops=st.integers(0, 3),
    max_redirects=st.integers(0, 3),
)
def test_any_answers_end_in_a_verdict_soon_without_fetching_twice(
    data: st.DataObject, ingest_type: str, start: str, max_hops: int, max_redirects: int
) -> None:
    walk = Walk(ingest_type, start, max_hops=max_hops, max_redirects=max_redirects)
    bound = (max_redirects + 1) * (max_hops + 1) + max_hops + 2
    fetched: list[str] = []
    answers: list[Answer | str] = []
    step = walk.start()
    steps = 1
    while isinstance(step, Fetch):
        assert steps < bound, f"no verdict after {steps} steps"
        fetched.append(step.url)
        answer = draw_answer(data, step.url, ingest_type)
        answers.append(answer)
        if isinstance(answer, str):
            step = walk.on_error(answer, step.url, "failed")
        else:
            step = walk.on_answer(answer)
        steps += 1
    verdict = step
    assert verdict.status in STATUSES
    assert verdict.hit == (verdict.status == "success")
    if verdict.status == "terminal-bad-status":
        status = verdict.terminal_status
        assert status is not None and not 200 <= status < 300
        assert verdict.transient == (status in (408, 425, 429) or status >= 500)
    else:
        assert verdict.transient == (verdict.status in TRANSIENT_STATUSES)
    keys = [canonicalize(url) for url in fetched]
    assert len(keys) == len(set(keys)), fetched
    # One hop per URL fetched, in order, with the status it answered (None for a fetch error)...
    assert [(hop["url"], hop["status"]) for hop in walk.hops[: len(fetched)]] == [
        (url, None if isinstance(answer, str) else answer.status)
        for url, answer in zip(fetched, answers, strict=True)
    ]
    # ... and the verdict is that of the last answer: the last URL fetched and its status,
    # None for a fetch error, None and None when nothing was fetched.
    last = answers[-1] if answers else None
    assert verdict.terminal_url == (fetched[-1] if fetched else None)
    assert verdict.terminal_status == (last.status if isinstance(last, Answer) else None)
    if isinstance(last, str):  # a fetch error ends the walk there
        assert (verdict.status, verdict.error) == (last, "failed")
        assert len(walk.hops) == len(fetched)
        return
    # Then at most one hop for the URL refused, which ends the walk.
    refused = walk.hops[len(fetched) :]
    assert len(refused) <= 1
    assert bool(refused) == (verdict.status in REFUSALS)
    if not refused:
        return
    (hop,) = refused
    url = hop["url"]
    kind = REFUSALS[verdict.status]
    assert hop == (
        bad_url_hop(url) if kind == "error" else {"url": url, "status": None, "kind": kind}
    )
    assert verdict.mimetype is None
    # The URL refused is the start URL, the Location of the last answer or a link on it.
    if last is None:
        assert url == start
        assert kind != "loop"  # nothing fetched yet, nothing fetched again
    elif 300 <= last.status < 400:
        assert url == last.location
        assert verdict.status != "link-loop"
    else:
        assert 200 <= last.status < 300
        assert verdict.status != "redirect-loop"
    if kind == "loop":
        assert verdict.error == f"back to {url}"
        # A URL fetched before, or the landing page's link to that very page (however
        # its scheme or a trailing slash is written: the link finder's rule).
        assert canonicalize(url) in keys or (
            last is not None and _page_key(url) == _page_key(last.url)
        )
    elif kind == "blocked":
        assert verdict.error == f"blocklisted: {url}"
        assert walk.blocklist.blocks(url)
        assert url not in fetched
    else:
        assert verdict.error is not None and verdict.error.startswith(f"cannot crawl {url!r}: ")
        with pytest.raises(InvalidURL):
            canonicalize(url)
