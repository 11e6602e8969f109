"""What the store keeps for revisits, on both backends: with each URL's validators, the
capture they came from (its URI when not the URL, WARC-Date and record ID), and what a 304
names when a store from before migration 14 knows only the URL and the payload digest."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
from crawlsite import Page, SiteServer
from warcio.archiveiterator import ArchiveIterator  # type: ignore[import-untyped]

from cli_proc import Home
from thresher.store.warcrecord import NOT_MODIFIED_PROFILE, REVISIT_PROFILE


def captures(warc_dir: Path) -> dict[str, list[dict[str, str]]]:
    """The WARC headers of each URL's response and revisit records, oldest first."""
    found: dict[str, list[dict[str, str]]] = {}
    for path in sorted(warc_dir.glob("*.warc.gz")):
        with path.open("rb") as f:
            for rec in ArchiveIterator(f):
                if rec.rec_type in ("response", "revisit"):
                    headers = dict(rec.rec_headers.headers)
                    found.setdefault(headers["WARC-Target-URI"], []).append(headers)
    return {url: sorted(h, key=lambda x: x["WARC-Date"]) for url, h in found.items()}


def execute(home: Home, sql: str) -> None:
    if home.db:
        with psycopg.connect(home.db, autocommit=True) as conn:
            conn.execute(sql.encode())
        return
    db = sqlite3.connect(home.path / "thresher.db", timeout=60)
    try:
        with db:
            db.execute(sql)
    finally:
        db.close()


def test_the_store_keeps_the_capture_and_old_stores_name_what_they_know(home: Home) -> None:
    with SiteServer(hosts=1) as site:
        b = site.base(0)
        seed, page, dup = f"{b}/", f"{b}/page.html", f"{b}/dup.html"
        body = b"<html><body>a page</body></html>"
        site.pages[seed] = Page(body=f'<a href="{page}">p</a>'.encode())
        site.pages[page] = Page(body=body)

        def crawl() -> dict[str, Any]:
            proc = home.run("crawl", seed, "--allow-private", "--delay", "0", "--json")
            summary: dict[str, Any] = json.loads(proc.stdout)
            assert summary["status"] == "ok"
            return summary

        warc_dir = Path(crawl()["warc_dir"])
        [original] = captures(warc_dir)[page]
        rows = {
            r["url"]: r
            for r in home.query("SELECT url, capture_uri, capture_date, capture_id FROM crawl_urls")
        }
        # The URL is the capture's: not stored twice.
        assert rows[page]["capture_uri"] is None
        assert rows[page]["capture_date"] == original["WARC-Date"]
        assert rows[page]["capture_id"] == original["WARC-Record-ID"]

        # A store from before migration 14: validators and digests, no captures.
        execute(
            home, "UPDATE crawl_urls SET capture_uri = NULL, capture_date = NULL, capture_id = NULL"
        )
        site.pages[seed] = Page(body=f'<a href="{page}">p</a><a href="{dup}">d</a>'.encode())
        site.pages[dup] = Page(body=body)
        second = crawl()
        assert (second["not_modified"], second["duplicates"]) == (1, 1)

    found = captures(warc_dir)
    [_, unmodified] = found[page]
    assert unmodified["WARC-Profile"] == NOT_MODIFIED_PROFILE
    assert unmodified["WARC-Refers-To-Target-URI"] == page
    assert unmodified["WARC-Payload-Digest"] == original["WARC-Payload-Digest"]
    assert "WARC-Refers-To-Date" not in unmodified and "WARC-Refers-To" not in unmodified
    [copy] = found[dup]
    assert copy["WARC-Profile"] == REVISIT_PROFILE
    assert copy["WARC-Refers-To-Target-URI"] == page
    assert "WARC-Refers-To-Date" not in copy and "WARC-Refers-To" not in copy
    # The copy's capture is the page's, URI and all (not the copy's own URL).
    [row] = home.query(f"SELECT capture_uri, capture_date FROM crawl_urls WHERE url = '{dup}'")
    assert row == {"capture_uri": page, "capture_date": None}
