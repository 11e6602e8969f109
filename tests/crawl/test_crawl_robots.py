"""robots.txt in a real crawl: the loopback server's access log proves what was fetched.

Three hosts, each with a robots.txt that the crawler before issue 19 got wrong: one
starting with a UTF-8 byte-order mark (its first group was lost, and ``/private/`` was
fetched), one with groups for ``web`` and ``archive`` (words of Thresher's User-Agent
header, whose groups were applied to it), and one of 3 MB, larger than the crawl's
``max_body`` (the site was skipped; a large one was stored whole in the database).
Runs on both stores.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from crawlsite import Page, SiteServer
from test_crawl import crawl, make_config, warc_records

from thresher.config import DEFAULT_USER_AGENT
from thresher.frontier.robotstxt import MAX_ROBOTS_BYTES
from thresher.store.aio import AsyncStore

BOM_ROBOTS = "\ufeffUser-agent: *\nDisallow: /private/\n"
WORDS_ROBOTS = (
    "User-agent: web\nDisallow: /\n\n"
    "User-agent: archive\nDisallow: /\n\n"
    "User-agent: *\nDisallow: /private/\n"
)
# Past the first 500 KiB, a rule that would keep every page out: ignored.
HUGE_ROBOTS = (
    "User-agent: *\nDisallow: /private/\n"
    + ("# " + "x" * 97 + "\n") * 30_000
    + "User-agent: *\nDisallow: /p/\n"
)


def _page(links: list[str]) -> Page:
    body = "".join(f'<a href="{u}">{u}</a>\n' for u in links)
    return Page(body=f"<!doctype html><title>t</title>{body}".encode(), links=tuple(links))


def test_a_crawl_obeys_robots_txt_to_the_letter(store_url: str, tmp_path: Path) -> None:
    assert "web" in DEFAULT_USER_AGENT and "archive" in DEFAULT_USER_AGENT
    assert len(HUGE_ROBOTS.encode()) > 2 * 2**20
    with SiteServer(hosts=3) as site:
        for h, robots in enumerate((BOM_ROBOTS, WORDS_ROBOTS, HUGE_ROBOTS)):
            site.robots[site.ips[h]] = robots
            b = site.base(h)
            nxt = site.base((h + 1) % 3)
            site.pages[f"{b}/p/0.html"] = _page(
                [
                    f"{b}/p/1.html",
                    f"{b}/private/secret.html",
                    f"{b}/%70rivate/spelled-otherwise.html",  # %70 is "p"
                    f"{nxt}/p/0.html",
                ]
            )
            site.pages[f"{b}/p/1.html"] = _page([f"{b}/p/0.html"])
            site.pages[f"{b}/private/secret.html"] = _page([])
            site.pages[f"{b}/%70rivate/spelled-otherwise.html"] = _page([])
        config = make_config(store_url, tmp_path)
        c = crawl(config, [f"{site.base(0)}/p/0.html"], max_body=str(2**20))
        hits = [h.url for h in site.hits]

    assert c.report.outcome == "ok", c.report.error
    for h in range(3):
        b = site.base(h)
        # The access log: robots.txt once, both pages, nothing under /private/.
        assert hits.count(f"{b}/robots.txt") == 1, hits
        assert f"{b}/p/0.html" in hits and f"{b}/p/1.html" in hits, (h, hits)
        assert not [u for u in hits if u.startswith(b) and "rivate" in u], (h, hits)
        assert c.urls[f"{b}/private/secret.html"]["state"] == "robots"
        assert c.urls[f"{b}/private/secret.html"]["error"] is None  # the rules say why
    assert c.run["robots_excluded"] >= 3

    async def stored() -> list[Any]:
        store = await AsyncStore(config.store_url).open()
        try:
            return await store.run(lambda tx: tx.all("crawl_robots", source="site"), write=False)
        finally:
            await store.close()

    rows = {str(r["site"]): r for r in asyncio.run(stored())}
    huge = rows[f"http://{site.ips[2]}:{site.port}"]
    assert huge["status"] == 200
    # At most what was parsed is stored, cut after a whole line.
    assert 400 * 1024 < len(huge["body"]) <= MAX_ROBOTS_BYTES
    assert bytes(huge["body"]).endswith(b"\n")
    assert HUGE_ROBOTS.encode().startswith(bytes(huge["body"]))
    # A robots.txt cut short is not archived as if it were whole; the others are.
    robots_records = {uri for _, uri, _, _ in warc_records(tmp_path) if uri.endswith("robots.txt")}
    assert robots_records == {f"{site.base(h)}/robots.txt" for h in (0, 1)}


def test_urls_refused_for_want_of_robots_txt_say_so(store_url: str, tmp_path: Path) -> None:
    """A site whose robots.txt answers 503 is not crawled for now (RFC 9309: unreachable
    is disallow all), and its URLs, counted in robots_excluded like those its rules
    disallow, say why in crawl_urls.error: a rule is not what kept them out."""
    with SiteServer(hosts=2) as site:
        down, up = site.base(1), site.base(0)
        site.robots_status[site.ips[1]] = 503
        site.pages[f"{up}/p/0.html"] = _page([f"{down}/p/0.html"])
        site.pages[f"{down}/p/0.html"] = _page([])
        c = crawl(make_config(store_url, tmp_path), [f"{up}/p/0.html"])
        hits = [h.url for h in site.hits]
    assert c.report.outcome == "ok", c.report.error
    assert f"{down}/robots.txt" in hits and f"{down}/p/0.html" not in hits
    row = c.urls[f"{down}/p/0.html"]
    assert row["state"] == "robots"
    assert row["error"] == "robots.txt unreachable (HTTP 503): the site waits until it answers"
    assert c.run["robots_excluded"] == 1
