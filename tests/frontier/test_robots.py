"""RobotsCache: RFC 9309 outcomes, Crawl-delay, expiry — all with a plain float clock."""

from __future__ import annotations

import pytest

from thresher.config import DEFAULT_USER_AGENT
from thresher.frontier import InvalidURL, RobotsCache, robots_url, site_of

T0 = 1_700_000_000.0
RULES = b"""User-agent: *
Disallow: /private
Allow: /private/open
Crawl-delay: 7

User-agent: thresher
Disallow: /nothresher
"""


def test_unknown_until_told() -> None:
    robots = RobotsCache()
    assert robots.allowed("http://example.com/a", T0) is None
    assert robots.crawl_delay("http://example.com/a", T0) is None
    assert robots.expires("http://example.com/a") is None


def test_2xx_rules_are_applied() -> None:
    robots = RobotsCache(user_agent="otherbot")
    robots.on_robots("http://example.com/robots.txt", 200, RULES, T0)
    assert robots.allowed("http://example.com/a", T0) is True
    assert robots.allowed("http://example.com/private/x", T0) is False
    assert robots.allowed("http://example.com/private/open/x", T0) is True
    assert robots.crawl_delay("http://example.com/", T0) == 7.0


def test_our_own_group_wins() -> None:
    robots = RobotsCache(user_agent="thresher")
    robots.on_robots("http://example.com/", 200, RULES.decode(), T0)
    assert robots.allowed("http://example.com/nothresher", T0) is False
    assert robots.allowed("http://example.com/private/x", T0) is True
    assert robots.crawl_delay("http://example.com/", T0) is None


def test_rules_are_per_scheme_host_and_port() -> None:
    robots = RobotsCache()
    robots.on_robots("http://example.com/", 200, b"User-agent: *\nDisallow: /\n", T0)
    assert robots.allowed("http://example.com/a", T0) is False
    assert robots.allowed("https://example.com/a", T0) is None
    assert robots.allowed("http://example.com:8080/a", T0) is None
    assert robots.allowed("http://other.example.com/a", T0) is None
    assert robots.allowed("HTTP://EXAMPLE.COM:80/a", T0) is False


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 301])
def test_4xx_and_given_up_redirects_allow_all(status: int) -> None:
    robots = RobotsCache()
    robots.on_robots("http://example.com/", status, b"User-agent: *\nDisallow: /\n", T0)
    assert robots.allowed("http://example.com/private", T0) is True
    assert robots.crawl_delay("http://example.com/", T0) is None


@pytest.mark.parametrize("status", [500, 503, 429, None])
def test_unreachable_disallows_for_the_retry_period_then_asks_again(status: int | None) -> None:
    robots = RobotsCache(unreachable_retry=600.0)
    robots.on_robots("http://example.com/", status, None, T0)
    assert robots.allowed("http://example.com/a", T0) is False
    answer = "no answer" if status is None else f"HTTP {status}"
    assert robots.refusal("http://example.com/a", T0) == (
        f"robots.txt unreachable ({answer}): the site waits until it answers"
    )
    assert robots.allowed("http://example.com/a", T0 + 599.9) is False
    assert robots.allowed("http://example.com/a", T0 + 600.0) is None
    assert robots.refusal("http://example.com/a", T0 + 600.0) is None
    robots.on_robots("http://example.com/", 200, b"", T0 + 601)
    assert robots.allowed("http://example.com/a", T0 + 601) is True


def test_a_url_its_rules_disallow_has_no_refusal_to_record() -> None:
    """Only "robots.txt could not be had" is recorded with a refused URL: a rule is
    what the stored robots.txt says."""
    robots = RobotsCache(user_agent="otherbot")
    robots.on_robots("http://example.com/robots.txt", 200, RULES, T0)
    assert robots.allowed("http://example.com/private/x", T0) is False
    assert robots.refusal("http://example.com/private/x", T0) is None
    assert robots.refusal("http://unknown.example.com/x", T0) is None


def test_rules_expire_after_the_ttl() -> None:
    robots = RobotsCache()
    robots.on_robots("http://example.com/", 200, RULES, T0)
    assert robots.expires("http://example.com/") == T0 + 24 * 3600
    assert robots.allowed("http://example.com/a", T0 + 24 * 3600 - 1) is True
    assert robots.allowed("http://example.com/a", T0 + 24 * 3600) is None
    assert len(robots) == 0


def test_only_the_first_500_kib_are_read() -> None:
    robots = RobotsCache()
    body = b"User-agent: *\n" + b"#" * (600 * 1024) + b"\nDisallow: /\n"
    robots.on_robots("http://example.com/", 200, body, T0)
    assert robots.allowed("http://example.com/a", T0) is True
    body = b"User-agent: *\nDisallow: /x\n" + b"#\n" * (300 * 1024) + b"Disallow: /\n"
    robots.on_robots("http://example.com/", 200, body, T0)
    assert robots.allowed("http://example.com/x", T0) is False
    assert robots.allowed("http://example.com/a", T0) is True


def test_groups_are_chosen_by_the_product_token_of_the_user_agent() -> None:
    """Thresher's whole User-Agent header names the ``thresher`` group, and no group
    named after another word of it (issue 19)."""
    robots = RobotsCache(DEFAULT_USER_AGENT)
    assert robots.token == "thresher"
    body = (
        "User-agent: web\nDisallow: /\n\nUser-agent: pypi\nDisallow: /\n\n"
        "User-agent: Thresher/0.1\nDisallow: /mine\n\nUser-agent: *\nDisallow: /all\n"
    )
    robots.on_robots("http://example.com/", 200, body, T0)
    assert robots.allowed("http://example.com/page", T0) is True
    assert robots.allowed("http://example.com/all", T0) is True
    assert robots.allowed("http://example.com/mine", T0) is False


def test_urls_are_matched_as_written_with_escapes_decoded() -> None:
    robots = RobotsCache()
    robots.on_robots(
        "http://example.com/", 200, "User-agent: *\nDisallow: /*?sort=\nDisallow: /ツ\n", T0
    )
    assert robots.allowed("http://example.com/list?sort=asc&page=2", T0) is False
    assert robots.allowed("http://example.com/list?page=2&sort=asc", T0) is True
    assert robots.allowed("http://example.com/list?page=2&%73ort=asc", T0) is True
    assert robots.allowed("http://example.com/list?%73ort=asc", T0) is False
    assert robots.allowed("http://example.com/%E3%83%84/x", T0) is False
    assert robots.allowed("http://user:pw@EXAMPLE.com:80/%e3%83%84", T0) is False
    assert robots.allowed("http://example.com/robots.txt", T0) is True


def test_sitemaps_are_given_absolute() -> None:
    robots = RobotsCache()
    assert robots.sitemaps("https://example.com/a", T0) is None
    robots.on_robots(
        "https://example.com/x",
        200,
        b"Sitemap: https://cdn.example.net/s.xml\nSitemap: /local.xml.gz\nUser-agent: *\n",
        T0,
    )
    assert robots.sitemaps("https://example.com/a", T0) == (
        "https://cdn.example.net/s.xml",
        "https://example.com/local.xml.gz",
    )
    robots.on_robots("https://example.com/x", 404, b"Sitemap: /s.xml\n", T0)
    assert robots.sitemaps("https://example.com/a", T0) == ()
    assert robots.sitemaps("https://example.com/a", T0 + 24 * 3600) is None


def test_sitemaps_are_resolved_as_links_are() -> None:
    """Behind a byte-order mark, each once, by the URL Standard (as the crawl fetches
    them): a relative one against the robots.txt URL, a host in IDNA, a space encoded;
    other schemes and what is no URL dropped."""
    robots = RobotsCache()
    robots.on_robots(
        "http://example.com/",
        200,
        b"\xef\xbb\xbfSitemap: http://example.com/s.xml\nUser-agent: *\nDisallow: /x\n"
        b"sitemap: https://cdn.example.net/s2.xml.gz\nSitemap: http://example.com/s.xml\n"
        b"Sitemap: //Fa\xc3\x9f.example/m.xml\nSitemap: /a b/s.xml?q=1&r\n"
        b"Sitemap: ftp://example.com/s.xml\nSitemap: http://[::1/s.xml\n",
        T0,
    )
    assert robots.sitemaps("http://example.com/page", T0) == (
        "http://example.com/s.xml",
        "https://cdn.example.net/s2.xml.gz",
        "http://xn--fa-hia.example/m.xml",
        "http://example.com/a%20b/s.xml?q=1&r",
    )
    assert robots.allowed("http://example.com/x", T0) is False


def test_spellings_of_one_site_share_its_rules() -> None:
    robots = RobotsCache()
    robots.on_robots(
        "https://Example.COM:443/robots.txt", 200, b"User-agent: *\nDisallow: /x\n", T0
    )
    for url in ("https://example.com/x", "HTTPS://EXAMPLE.COM/x", "https://u@example.com:443/x"):
        assert robots.allowed(url, T0) is False, url
    assert len(robots) == 1
    robots.on_robots("https://example.com/", 200, b"", T0)
    assert robots.allowed("HTTPS://EXAMPLE.COM/x", T0) is True
    assert len(robots) == 1


def test_undecodable_bytes_do_not_break_parsing() -> None:
    robots = RobotsCache()
    robots.on_robots("http://example.com/", 200, b"\xff\xfe\nUser-agent: *\nDisallow: /x\n", T0)
    assert robots.allowed("http://example.com/x", T0) is False


def test_robots_url_and_site() -> None:
    assert robots_url("http://Example.com/a/b?c") == "http://example.com/robots.txt"
    assert robots_url("https://example.com:8443/a") == "https://example.com:8443/robots.txt"
    assert robots_url("http://[::1]:8080/a") == "http://[::1]:8080/robots.txt"
    assert site_of("https://example.com/a") == ("https", "example.com", 443)
    with pytest.raises(InvalidURL):
        site_of("ftp://example.com/")
