"""robots.txt conformance: RFC 9309, rule by rule, from the RFC's own text and examples.

Each test names the section it checks and quotes the sentence it holds us to. The
regressions of issue 19 (a BOM hiding the first group, groups chosen by words anywhere
in the User-Agent header, an unknown line ending a group) have tests of their own at
the end, with the property tests.
"""

from __future__ import annotations

import time
from urllib.parse import unquote_to_bytes

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from thresher.config import DEFAULT_USER_AGENT
from thresher.frontier.robotstxt import (
    MAX_ROBOTS_BYTES,
    parse_robots,
    path_of,
    product_token,
    robots_body,
)

THRESHER = DEFAULT_USER_AGENT


def allowed(robots: str | bytes, url: str, agent: str = "FooBot") -> bool:
    """Is `url` (a path, or an absolute URL) allowed to `agent` (a product token or a
    whole User-Agent header) by the robots.txt `robots`?"""
    return parse_robots(robots).rules_for(product_token(agent)).allowed(url)


# -- §2.1 Protocol definition, §2.2 Formal syntax ----------------------------------------


def test_keys_are_case_insensitive() -> None:
    """§2.2 ABNF: ``"user-agent"``, ``"allow"``, ``"disallow"`` are ABNF strings, which
    are case-insensitive (RFC 5234 §2.3)."""
    for robots in (
        "USER-AGENT: FooBot\nALLOW: /x/\nDISALLOW: /\n",
        "user-agent: FooBot\nallow: /x/\ndisallow: /\n",
        "uSeR-aGeNt: FooBot\nAlLoW: /x/\ndIsAlLoW: /\n",
    ):
        assert allowed(robots, "/x/y")
        assert not allowed(robots, "/a/b")


def test_whitespace_around_the_colon_and_the_value_is_optional() -> None:
    """§2.2 ABNF: ``rule = *WS ("allow" / "disallow") *WS ":" *WS (path-pattern /
    empty-pattern) EOL``; §5.1: "The rules of the group are missing the optional space
    character, which is acceptable"."""
    robots = "  User-agent  :  FooBot \n\tDisallow\t:\t/a \nDisallow:/b\n"
    assert not allowed(robots, "/a")
    assert not allowed(robots, "/b")
    assert allowed(robots, "/c")


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
def test_lines_end_with_cr_lf_or_crlf(eol: str) -> None:
    """§2.2 ABNF: ``NL = %x0D / %x0A / %x0D.0A``."""
    robots = eol.join(["User-agent: FooBot", "Allow: /x/", "", "Disallow: /"])
    assert allowed(robots, "/x/1")
    assert not allowed(robots, "/y")
    mixed = "User-agent: FooBot\r\nAllow: /x/\rDisallow: /\n"
    assert allowed(mixed, "/x/1") and not allowed(mixed, "/y")


def test_a_group_ends_at_the_next_user_agent_line() -> None:
    """§2.1: "Group: One or more user-agent lines that are followed by one or more
    rules. The group is terminated by a user-agent line or end of file." """
    robots = "User-agent: FooBot\nDisallow: /foo\nUser-agent: BarBot\nDisallow: /bar\n"
    assert not allowed(robots, "/foo") and allowed(robots, "/bar")
    assert allowed(robots, "/foo", "BarBot") and not allowed(robots, "/bar", "BarBot")


def test_consecutive_user_agent_lines_share_the_rules_after_them() -> None:
    """§2.2 ABNF: ``group = startgroupline *(startgroupline / emptyline) *(rule /
    emptyline)``: user-agent lines, empty lines between them, then the rules."""
    robots = "User-agent: FooBot\n\nUser-agent: BarBot\nUser-agent: BazBot\n\nDisallow: /x\n"
    for agent in ("FooBot", "BarBot", "BazBot"):
        assert not allowed(robots, "/x", agent)
    assert allowed(robots, "/x", "QuxBot")


def test_empty_lines_do_not_end_a_group() -> None:
    """§2.2 ABNF: ``*(rule / emptyline)``: empty lines may come between a group's rules."""
    robots = "User-agent: FooBot\nDisallow: /a\n\n\nDisallow: /b\n"
    assert not allowed(robots, "/a") and not allowed(robots, "/b")


def test_rules_in_no_group_are_ignored() -> None:
    """§2.2.2: "The crawler SHOULD ignore "disallow" and "allow" rules that are not in any
    group (for example, any rule that precedes the first user-agent line)." """
    robots = "Disallow: /\nAllow: /foo\n\nUser-agent: FooBot\nDisallow: /bar\n"
    assert allowed(robots, "/baz")
    assert not allowed(robots, "/bar")
    assert allowed("Disallow: /\n", "/x")


def test_the_last_group_may_have_no_rules() -> None:
    """§2.1: "The last group may have no rules, which means it implicitly allows
    everything." """
    robots = "User-agent: *\nDisallow: /\n\nUser-agent: FooBot\n"
    assert allowed(robots, "/anything")
    assert not allowed(robots, "/anything", "BarBot")


def test_comments_are_ignored() -> None:
    """§2.2 ABNF: ``EOL = *WS [comment] NL``; §2.2.3: ``"#"`` "Designates a line comment"
    (examples: ``allow: / # comment in line``, ``# comment on its own line``)."""
    robots = (
        "# comment on its own line\n"
        "User-agent: FooBot # a comment after the agent\n"
        "# Disallow: /\n"
        "Disallow: /foo/quz#qux\n"
        "allow: / # comment in line\n"
    )
    assert allowed(robots, "/foo/bar")
    assert not allowed(robots, "/foo/quz")
    assert not allowed(robots, "/foo/quz#qux")  # a URL's fragment is not matched at all


def test_each_line_is_parsed_whatever_the_others() -> None:
    """§2.3.1.5: "Crawlers MUST try to parse each line of the robots.txt file. Crawlers
    MUST use the parseable rules." """
    robots = "User-agent: FooBot\n\x00\x01garbage::\n:::\nDisallow /a b c\n\xff\xfe\nDisallow: /x\n"
    assert not allowed(robots, "/x")
    assert allowed(robots, "/y")


# -- §2.2.1 The user-agent line ----------------------------------------------------------


def test_the_product_token_of_a_user_agent_header() -> None:
    """§2.2.1: "Crawlers set their own name, which is called a product token, to find
    relevant groups. The product token MUST contain only uppercase and lowercase letters
    ("a-z" and "A-Z"), underscores ("_"), and hyphens ("-")", and "SHOULD be a substring in
    the User-Agent header" (the RFC's example: header ``Mozilla/5.0 (compatible;
    ExampleBot/0.1; https://www.example.com/bot.html)``, line ``user-agent: ExampleBot``)."""
    assert product_token(THRESHER) == "thresher"
    assert THRESHER.lower().startswith(product_token(THRESHER))
    example = "Mozilla/5.0 (compatible; ExampleBot/0.1; https://www.example.com/bot.html)"
    assert product_token(example) == "examplebot"
    assert not allowed("user-agent: ExampleBot\ndisallow: /\n", "/", example)
    assert product_token("my_bot-two/3") == "my_bot-two"
    assert product_token("/nothing") == ""


def test_groups_are_chosen_case_insensitively() -> None:
    """§2.2.1: "Crawlers MUST use case-insensitive matching to find the group that matches
    the product token"."""
    for line in ("FooBot", "foobot", "FOOBOT", "fOoBoT"):
        robots = f"User-agent: {line}\nDisallow: /\n"
        assert not allowed(robots, "/x", "FooBot")
        assert not allowed(robots, "/x", "foobot")


def test_the_token_is_matched_whole_never_as_part_of_a_word() -> None:
    """§2.2.1: the group is the one "that matches the product token": ``thresher``, not
    ``thresh`` nor ``thresherbot``, and not any word of the rest of the User-Agent header."""
    for line in ("thresh", "thresherbot", "Thr", "web", "archive", "pypi", "harvester", "https"):
        robots = f"User-agent: {line}\nDisallow: /\n"
        assert allowed(robots, "/x", THRESHER), line


def test_a_user_agent_line_names_its_leading_token() -> None:
    """§2.2 ABNF: ``product-token = identifier / "*"``, ``identifier = 1*(%x2D / %x41-5A /
    %x5F / %x61-7A)``. Lines that add a version or words after it (``Thresher/1.0``,
    ``Thresher crawler``) name the token they start with, as Google reads them."""
    for line in ("Thresher/1.0", "Thresher crawler", "thresher;", "THRESHER/2"):
        assert not allowed(f"User-agent: {line}\nDisallow: /\n", "/x", THRESHER), line
    assert allowed("User-agent: /Thresher\nDisallow: /\n", "/x", THRESHER)


def test_groups_for_the_same_agent_are_combined() -> None:
    """§2.2.1: "If there is more than one group matching the user-agent, the matching
    groups' rules MUST be combined into one group" (the RFC's table)."""
    robots = (
        "user-agent: ExampleBot\ndisallow: /foo\ndisallow: /bar\n\n"
        "user-agent: OtherBot\ndisallow: /qux\n\n"
        "user-agent: ExampleBot\ndisallow: /baz\n"
    )
    for path in ("/foo", "/bar", "/baz"):
        assert not allowed(robots, path, "ExampleBot"), path
    assert allowed(robots, "/qux", "ExampleBot")


def test_the_star_group_applies_when_no_group_matches() -> None:
    """§2.2.1: "If no matching group exists, crawlers MUST obey the group with a user-agent
    line with the "*" value, if present" (the RFC's table: ``BazBot``'s group is not
    ExampleBot's)."""
    robots = "user-agent: *\ndisallow: /foo\ndisallow: /bar\n\nuser-agent: BazBot\ndisallow: /baz\n"
    assert not allowed(robots, "/foo", "ExampleBot")
    assert not allowed(robots, "/bar", "ExampleBot")
    assert allowed(robots, "/baz", "ExampleBot")


def test_the_star_group_does_not_apply_when_a_group_matches() -> None:
    """§2.2.1: the ``*`` group is obeyed only "If no matching group exists"."""
    robots = "User-agent: *\nDisallow: /x/\n\nUser-agent: FooBot\nDisallow: /y/\n"
    assert allowed(robots, "/x/page")
    assert not allowed(robots, "/y/page")


def test_star_groups_are_combined_too() -> None:
    """§2.2.1: groups that match are combined; several ``*`` groups are one."""
    robots = (
        "User-agent: *\nDisallow: /a\n\nUser-agent: BarBot\nDisallow: /\n\n"
        "User-agent: *\nDisallow: /b\n"
    )
    assert not allowed(robots, "/a") and not allowed(robots, "/b") and allowed(robots, "/c")


def test_no_group_and_no_star_group_means_no_rules() -> None:
    """§2.2.1: "If no group matches the product token and there is no group with a
    user-agent line with the "*" value, or no groups are present at all, no rules
    apply." """
    assert allowed("User-agent: BarBot\nDisallow: /\n", "/x")
    assert allowed("", "/x")
    assert allowed("# nothing but a comment\n", "/x")


# -- §2.2.2 The "Allow" and "Disallow" lines ---------------------------------------------


def test_matching_starts_with_the_first_octet_of_the_path() -> None:
    """§2.2.2: "The matching MUST start with the first octet of the path." """
    robots = "User-agent: *\nDisallow: /x\n"
    assert not allowed(robots, "http://foo.bar/x/y")
    assert allowed(robots, "http://foo.bar/a/x")
    assert allowed(robots, "http://x.bar/a")  # the host is not the path


def test_matching_is_case_sensitive() -> None:
    """§2.2.2: "The matching SHOULD be case sensitive." """
    assert not allowed("User-agent: *\nDisallow: /x/\n", "/x/y")
    assert allowed("User-agent: *\nDisallow: /X/\n", "/x/y")


def test_the_path_and_query_are_matched() -> None:
    """§2.2.2's examples match ``/foo/bar?baz=quz``: the query is part of what is matched
    (and the fragment is not sent, so not matched). The issue's rules, on the links it
    quotes."""
    robots = "User-agent: *\nDisallow: /*?sort=\nDisallow: /search?q=\nDisallow: /*&action=edit\n"
    assert not allowed(robots, "http://h/list.html?sort=asc&page=2")
    assert not allowed(robots, "http://h/search?q=robots")
    assert not allowed(robots, "http://h/w/index.php?title=X&action=edit")
    assert allowed(robots, "http://h/list.html?page=2")
    assert allowed(robots, "http://h/search?page=1&q=robots")
    assert path_of("http://h/a?b=c#frag") == b"/a?b=c"
    assert path_of("http://h") == b"/" and path_of("http://h?x") == b"/?x"


def test_the_longest_match_wins() -> None:
    """§2.2.2: "The most specific match found MUST be used. The most specific match is
    the match that has the most octets." """
    robots = "User-agent: *\nDisallow: /x/page.html\nAllow: /x/\n"
    assert not allowed(robots, "/x/page.html")
    robots = "User-agent: *\nAllow: /x/page.html\nDisallow: /x/\n"
    assert allowed(robots, "/x/page.html") and not allowed(robots, "/x/")
    robots = "User-agent: *\nDisallow: /x\nAllow: /x/\n"
    assert not allowed(robots, "/x") and allowed(robots, "/x/")
    robots = "User-agent: *\nAllow: /page\nDisallow: /*.html\n"
    assert not allowed(robots, "/page.html") and allowed(robots, "/page")
    robots = "User-agent: *\nAllow: /$\nDisallow: /\n"
    assert allowed(robots, "/") and not allowed(robots, "/page.html")


def test_allow_wins_a_tie() -> None:
    """§2.2.2: "If an "allow" rule and a "disallow" rule are equivalent, then the "allow"
    rule SHOULD be used." """
    assert allowed("User-agent: *\nDisallow: /x/page.html\nAllow: /x/page.html\n", "/x/page.html")
    assert allowed("User-agent: *\nDisallow: /\nAllow: /\n", "/x")
    assert allowed("User-agent: *\nAllow: /folder\nDisallow: /folder\n", "/folder/page")
    # As long (6 octets, "*" counting one), and both match: allow.
    assert allowed("User-agent: *\nDisallow: /a*c\nAllow: /ab*\n", "/abc")


def test_no_match_allows() -> None:
    """§2.2.2: "If no match is found amongst the rules in a group for a matching
    user-agent or there are no rules in the group, the URI is allowed." """
    assert allowed("User-agent: *\nDisallow: /private/\n", "/public/")
    assert allowed("User-agent: *\nDisallow:\n", "/anything")
    assert allowed("User-agent: *\nDisallow:\nAllow:\n", "/anything")


def test_robots_txt_is_always_allowed() -> None:
    """§2.2.2: "The /robots.txt URI is implicitly allowed." """
    assert allowed("User-agent: *\nDisallow: /\n", "http://h/robots.txt")
    assert allowed("User-agent: *\nDisallow: /robots.txt\n", "/robots.txt")
    assert not allowed("User-agent: *\nDisallow: /\n", "/robots.txt.bak")


@pytest.mark.parametrize(
    ("path", "encoded", "to_match"),
    [
        ("/foo/bar?baz=quz", "/foo/bar?baz=quz", "/foo/bar?baz=quz"),
        (
            "/foo/bar?baz=https://foo.bar",
            "/foo/bar?baz=https%3A%2F%2Ffoo.bar",
            "/foo/bar?baz=https%3A%2F%2Ffoo.bar",
        ),
        ("/foo/bar/ツ", "/foo/bar/%E3%83%84", "/foo/bar/%E3%83%84"),
        ("/foo/bar/%E3%83%84", "/foo/bar/%E3%83%84", "/foo/bar/%E3%83%84"),
        ("/foo/bar/%62%61%7A", "/foo/bar/%62%61%7A", "/foo/bar/baz"),
    ],
)
def test_the_rfcs_percent_encoding_table(path: str, encoded: str, to_match: str) -> None:
    """§2.2.2: "Octets in the URI and robots.txt paths outside the range of the ASCII coded
    character set, and those in the reserved range defined by [RFC3986], MUST be
    percent-encoded as defined by [RFC3986] prior to comparison. If a percent-encoded ASCII
    octet is encountered in the URI, it MUST be unencoded prior to comparison, unless it is
    a reserved character in the URI as defined by [RFC3986] or the character is outside the
    unreserved character range." The RFC's table ("Path", "Encoded Path", "Path to
    Match"), each spelling as a rule against each as a URL."""
    for rule in (path, encoded, to_match):
        robots = f"User-agent: *\nDisallow: /\nAllow: {rule}\n"
        for url in (encoded, to_match):
            assert allowed(robots, f"http://foo.bar{url}"), (rule, url)
            assert not allowed(robots, f"http://foo.bar{url[:-1]}"), (rule, url)


def test_percent_encoding_compares_in_one_normal_form() -> None:
    """§2.2.2: reserved characters compare the same written or percent-encoded, hex digits
    in either case, unreserved characters the same encoded or not, on both sides."""
    cases = [
        ("/a%3c", "/a%3C"),  # hex digits' case
        ("/a%3C", "/a%3c"),
        ("/%7Ejoe", "/~joe"),  # unreserved, encoded in the rule
        ("/~joe", "/%7ejoe"),  # unreserved, encoded in the URL
        ("/a/b", "/a%2Fb"),  # reserved "/" either way
        ("/a%2fb", "/a/b"),
        ("/p?q=a b", "/p?q=a%20b"),  # a space in a rule is the octet %20
        ("/ünï", "/%C3%BCn%C3%AF"),
    ]
    for rule, url in cases:
        assert not allowed(f"User-agent: *\nDisallow: {rule}\n", url), (rule, url)
    assert allowed("User-agent: *\nDisallow: /a%2Fb\n", "/a%2Fc")


def test_non_utf8_octets_are_compared_as_octets() -> None:
    """§2.2.2 compares octets; §2.2.2 "Implementors MAY bridge encoding mismatches if they
    detect that the robots.txt file is not UTF-8 encoded": a Latin-1 rule matches the
    URL's same octet, percent-encoded."""
    robots = b"User-agent: *\nDisallow: /caf\xe9\n"
    assert not allowed(robots, "/caf%E9")
    assert allowed(robots, "/caf%C3%A9")


# -- §2.2.3 Special characters -----------------------------------------------------------


def test_star_is_any_run_of_characters() -> None:
    """§2.2.3: ``"*"`` "Designates 0 or more instances of any character" (example
    ``allow: /this/*/exactly``); §5.1: "The "*" character designates any character,
    including the otherwise-required forward slash"."""
    robots = "User-agent: *\nDisallow: /\nAllow: /this/*/exactly\n"
    assert allowed(robots, "/this/is/exactly")
    assert allowed(robots, "/this//exactly")
    assert allowed(robots, "/this/a/b/c/exactly/and/more")
    assert not allowed(robots, "/this/exactly")
    robots = "User-agent: *\nDisallow: /foo/bar/quz\nAllow: /foo/*/qux\n"
    assert not allowed(robots, "/foo/bar/quz")
    assert allowed(robots, "/foo/quz")  # no rule matches: allowed
    assert allowed("User-agent: *\nDisallow: /\nAllow: /fish*.php\n", "/fishheads/catfish.php?x")
    # Pieces between "*"s do not overlap: "/*ab*b" needs a "b" after the "ab".
    robots = "User-agent: *\nDisallow: /*ab*b\nDisallow: /*ba*a$\n"
    assert allowed(robots, "/ab") and not allowed(robots, "/abb") and not allowed(robots, "/xabyb")
    assert allowed(robots, "/ba") and not allowed(robots, "/baa") and allowed(robots, "/baab")


def test_dollar_ends_the_pattern() -> None:
    """§2.2.3: ``"$"`` "Designates the end of the match pattern" (example ``allow:
    /this/path/exactly$``)."""
    robots = "User-agent: *\nDisallow: /\nAllow: /this/path/exactly$\n"
    assert allowed(robots, "/this/path/exactly")
    assert not allowed(robots, "/this/path/exactly/")
    assert not allowed(robots, "/this/path/exactly?x")
    robots = "User-agent: *\nDisallow: /\nAllow: /*.php$\n"
    assert allowed(robots, "/folder/filename.php")
    assert not allowed(robots, "/filename.php?parameters")
    assert not allowed(robots, "/filename.php5")


def test_dollar_inside_a_pattern_is_a_plain_character() -> None:
    """§2.2.3: ``$`` designates "the end of the match pattern", so only a final one does."""
    robots = "User-agent: *\nDisallow: /a$b\n"
    assert not allowed(robots, "/a$b/c")
    assert not allowed(robots, "/a%24b")
    assert allowed(robots, "/a")


def test_percent_encoded_special_characters_are_literal() -> None:
    """§2.2.3: "If crawlers match special characters verbatim in the URI, crawlers SHOULD
    use "%" encoding" (the RFC's table: ``/path/file-with-a-%2A.html`` matches
    ``…/path/file-with-a-*.html``, ``/path/foo-%24`` matches ``…/path/foo-$``)."""
    robots = "User-agent: *\nDisallow: /path/file-with-a-%2A.html\nDisallow: /path/foo-%24\n"
    assert not allowed(robots, "https://www.example.com/path/file-with-a-*.html")
    assert not allowed(robots, "https://www.example.com/path/foo-$")
    assert allowed(robots, "https://www.example.com/path/file-with-a-b.html")
    assert allowed(robots, "https://www.example.com/path/foo-")


# -- §2.2.4 Other records ----------------------------------------------------------------


def test_a_sitemap_line_does_not_end_a_group() -> None:
    """§2.2.4: "Parsing of other records MUST NOT interfere with the parsing of explicitly
    defined records [...] For example, a "Sitemaps" record MUST NOT terminate a group." """
    robots = "User-agent: FooBot\nSitemap: https://h/s.xml\nUser-agent: BarBot\nDisallow: /x\n"
    assert not allowed(robots, "/x", "FooBot")
    assert not allowed(robots, "/x", "BarBot")
    robots = "User-agent: FooBot\nDisallow: /a\nSitemap: https://h/s.xml\nDisallow: /b\n"
    assert not allowed(robots, "/b")


def test_unknown_lines_are_ignored_and_end_no_group() -> None:
    """§2.2.4: other records "MUST NOT interfere"; a line Thresher does not know (``Host``,
    ``Noindex``, ``Clean-param``, garbage) is ignored where it stands."""
    robots = (
        "User-agent: FooBot\nHost: example.com\nClean-param: ref /x\n"
        "User-agent: BarBot\nNoindex: /y\nDisallow: /x\n"
    )
    assert not allowed(robots, "/x", "FooBot")
    assert not allowed(robots, "/x", "BarBot")


def test_sitemap_lines_are_collected_wherever_they_are() -> None:
    """§2.2.4: "Crawlers MAY interpret other records [...] for example, "Sitemaps"": each
    ``Sitemap:`` line, in order, outside or inside groups, duplicates once."""
    robots = parse_robots(
        "Sitemap: https://h/a.xml\nUser-agent: *\nDisallow: /x\n"
        "SITEMAP:https://h/b.xml.gz # a comment\nsitemap: https://h/a.xml\nSitemap:\n"
    )
    assert robots.sitemaps == ("https://h/a.xml", "https://h/b.xml.gz")
    assert not robots.rules_for("thresher").allowed("/x")


def test_crawl_delay_is_a_rule_of_its_group() -> None:
    """§2.2 ABNF: "parser implementors: define additional lines you need": Crawl-delay is
    read as a rule of the group it is in, so it ends the run of user-agent lines as a
    rule does. The common file below means a delay for everyone and BadBot kept out, not
    everyone kept out (which Google's reading, ignoring Crawl-delay, would give).
    Values that are not a number of seconds are ignored."""
    robots = parse_robots(
        "User-agent: *\nCrawl-delay: 10\n\nUser-agent: BadBot\nDisallow: /\n\n"
        "User-agent: FooBot\nUser-agent: BarBot\nCrawl-delay: 2.5\nDisallow: /x\n\n"
        "User-agent: BazBot\nCrawl-delay: soon\nCrawl-delay: -1\n"
    )
    star = robots.rules_for("thresher")
    assert star.crawl_delay == 10.0 and star.allowed("/page")
    assert not robots.rules_for("badbot").allowed("/page")
    assert robots.rules_for("badbot").crawl_delay is None
    for bot in ("foobot", "barbot"):
        assert robots.rules_for(bot).crawl_delay == 2.5
        assert not robots.rules_for(bot).allowed("/x")
    assert robots.rules_for("bazbot").crawl_delay is None
    assert parse_robots("Crawl-delay: 5\nUser-agent: *\n").rules_for("x").crawl_delay is None


def test_a_missing_colon_is_forgiven_as_google_forgives_it() -> None:
    """Beyond the RFC's grammar, as Google: ``disallow /x`` means ``disallow: /x`` (a line
    of exactly two words whose first is user-agent, allow or disallow)."""
    robots = "User-agent FooBot\nDisallow /x\n"
    assert not allowed(robots, "/x")
    assert allowed("User-agent: FooBot\nDisallow /x /y\n", "/x")


# -- §2.3 Access method, §2.5 Limits -----------------------------------------------------


def test_a_utf8_byte_order_mark_is_skipped() -> None:
    """§2.3: "The file MUST be UTF-8 encoded"; a UTF-8 byte-order mark is part of no line,
    so the group it precedes is still read (issue 19: its first group was lost, and
    ``/private/`` was fetched)."""
    robots = b"\xef\xbb\xbfUser-agent: *\nDisallow: /private/\n"
    assert not allowed(robots, "/private/x", THRESHER)
    assert not allowed(robots.decode("utf-8"), "/private/x", THRESHER)  # "\ufeff" in a str
    assert not allowed(b"\xef\xbbUser-agent: *\nDisallow: /private/\n", "/private/x")


def test_the_first_500_kib_are_parsed_and_the_rest_ignored() -> None:
    """§2.5: "The parsing limit MUST be at least 500 kibibytes." Ours is exactly that,
    cut after the last whole line: a line cut in two is not a rule."""
    head = b"User-agent: *\nDisallow: /early\n"
    filler = b"# " + b"x" * 98 + b"\n"
    body = head + filler * ((MAX_ROBOTS_BYTES - len(head)) // len(filler))
    body += b"Disallow: /cut-in-two\nDisallow: /late\n" + filler * 1000
    assert len(body) > MAX_ROBOTS_BYTES
    rules = parse_robots(body).rules_for("thresher")
    assert not rules.allowed("/early")
    assert rules.allowed("/cut-in-two") and rules.allowed("/late")
    kept = robots_body(body)
    assert len(kept) <= MAX_ROBOTS_BYTES and kept.endswith(b"\n")
    assert body.startswith(kept)
    # Exactly at the limit, and a line ending just there: nothing cut.
    exact = head + b"#" * (MAX_ROBOTS_BYTES - len(head) - 1) + b"\n"
    assert robots_body(exact) == exact
    assert robots_body(exact + b"more") == exact
    assert robots_body(exact[:-1] + b"xmore") == head


# -- §5 Examples -------------------------------------------------------------------------

RFC_5_1 = """\
User-Agent: *
Disallow: *.gif$
Disallow: /example/
Allow: /publications/

User-Agent: foobot
Disallow:/
Allow:/example/page.html
Allow:/example/allowed.gif

User-Agent: barbot
User-Agent: bazbot
Disallow: /example/page.html

User-Agent: quxbot

EOF
"""


def test_rfc_example_5_1() -> None:
    """§5.1, the RFC's "Simple Example", each of its statements:

    - ``*``: "allows access to the URLs with the /publications/ path prefix, and it
      restricts access to the URLs with the /example/ path prefix and to all URLs with a
      .gif suffix";
    - foobot: "only has access to two URL path prefixes on the site -- /example/page.html
      and /example/allowed.gif";
    - barbot and bazbot: "are not allowed to access the URLs with the /example/page.html
      path prefix but otherwise have unrestricted access";
    - quxbot: "An empty group at the end of the file [...] unrestricted access".
    (The trailing ``EOF`` is an unknown line, ignored.)"""
    r = parse_robots(RFC_5_1)
    star = r.rules_for("otherbot")
    assert star.allowed("/publications/a.html")
    assert not star.allowed("/example/") and not star.allowed("/example/x")
    assert not star.allowed("/images/a.gif") and not star.allowed("/a.gif")
    assert star.allowed("/a.gif?x") and star.allowed("/a.gifs")
    assert star.allowed("/other")
    foo = r.rules_for("foobot")
    assert foo.allowed("/example/page.html") and foo.allowed("/example/page.html?x")
    assert foo.allowed("/example/allowed.gif")
    assert not foo.allowed("/") and not foo.allowed("/publications/") and not foo.allowed("/a")
    for bot in ("barbot", "bazbot", "BarBot"):
        rules = r.rules_for(bot)
        assert not rules.allowed("/example/page.html")
        assert not rules.allowed("/example/page.html5")
        assert rules.allowed("/example/") and rules.allowed("/a.gif") and rules.allowed("/")
    qux = r.rules_for("quxbot")
    for path in ("/", "/example/page.html", "/a.gif"):
        assert qux.allowed(path)


def test_rfc_example_5_2_longest_match() -> None:
    """§5.2: "in the case of two rules, the longest one is used for matching [...]
    /example/page/disallowed.gif MUST be used for the URI
    example.com/example/page/disallow.gif" (sic: the rule's own path)."""
    robots = "User-Agent: foobot\nAllow: /example/page/\nDisallow: /example/page/disallowed.gif\n"
    assert not allowed(robots, "http://example.com/example/page/disallowed.gif", "foobot")
    assert allowed(robots, "http://example.com/example/page/allowed.gif", "foobot")
    assert allowed(robots, "http://example.com/example/page/disallow.gif", "foobot")


# -- Issue 19's regressions --------------------------------------------------------------


def test_regression_bom_prefixed_file_keeps_its_first_group() -> None:
    """Issue 19: "a file that starts with a UTF-8 byte-order mark is ignored entirely (its
    first group is lost; /private/ was fetched in a real crawl)"."""
    body = (
        b"\xef\xbb\xbfUser-agent: *\r\nDisallow: /private/\r\n\r\nUser-agent: x\r\nDisallow: /\r\n"
    )
    rules = parse_robots(body).rules_for(product_token(THRESHER))
    assert not rules.allowed("https://site.example/private/report.html")
    assert rules.allowed("https://site.example/public/")


def test_regression_words_of_the_user_agent_header_choose_no_group() -> None:
    """Issue 19: "a group is chosen by words anywhere in the full User-Agent header, so
    User-agent: web, archive or pypi groups apply to Thresher"."""
    for word in ("web", "archive", "pypi", "harvester", "project"):
        robots = f"User-agent: {word}\nDisallow: /\n\nUser-agent: *\nDisallow: /private/\n"
        assert allowed(robots, "/page", THRESHER), word
        assert not allowed(robots, "/private/x", THRESHER), word


def test_regression_an_unrecognised_line_does_not_end_the_group() -> None:
    """Issue 19: "an unrecognised line ends the group"."""
    robots = (
        "User-agent: otherbot\nRequest-rate: 1/5\nUser-agent: thresher\nVisit-time: 0600-0845\n"
        "Disallow: /a\nUnknown-directive: whatever\nDisallow: /b\n"
    )
    for agent in ("otherbot", THRESHER):
        assert not allowed(robots, "/a", agent) and not allowed(robots, "/b", agent)


# -- Properties --------------------------------------------------------------------------


def _reference_matches(pattern: bytes, path: bytes) -> tuple[bool, int]:
    """Does `pattern` match `path`, and with how many octets: a plain dynamic-programming
    glob matcher over octets, slow and obviously right, to check the fast one against."""
    anchored = pattern.endswith(b"$")
    pieces = [unquote_to_bytes(p) for p in (pattern[:-1] if anchored else pattern).split(b"*")]
    tokens: list[int | None] = []  # an octet, or None for "*"
    for i, piece in enumerate(pieces):
        if i:
            tokens.append(None)
        tokens.extend(piece)
    # reach[j]: the first i tokens can match path[:j].
    reach = [True] + [False] * len(path)
    for tok in tokens:
        if tok is None:
            nxt = reach[:]
            for j in range(1, len(path) + 1):
                nxt[j] = nxt[j] or nxt[j - 1]
        else:
            nxt = [False] + [reach[j] and path[j] == tok for j in range(len(path))]
        reach = nxt
    hit = reach[len(path)] if anchored else any(reach)
    return hit, len(tokens) + anchored


def _reference_allowed(rules: list[tuple[bool, bytes]], path: bytes) -> bool:
    if path == b"/robots.txt":
        return True
    best, verdict = -1, True
    for allow, pattern in rules:
        hit, priority = _reference_matches(pattern, path)
        if hit and (priority > best or (priority == best and allow)):
            best, verdict = priority, allow
    return verdict


# Few letters, so that patterns overlap, tie and nearly match; escapes of some of them.
_PATTERN = st.lists(
    st.sampled_from(["a", "b", "/", "*", "*", "$", "%61", "%2F", "%2a", "ツ"]), max_size=5
).map(lambda xs: "/" + "".join(xs))
_PATH = st.lists(st.sampled_from(["a", "b", "/", "*", "$", "%61", "%2f", "%E3%83%84"]), max_size=6)


@settings(deadline=None, max_examples=1500)
@example(rules=[(False, "/*ab*b")], path=["a", "b"])
@example(rules=[(False, "/ab"), (True, "/a*")], path=["a", "b"])
@example(rules=[(True, "/a$"), (False, "/*a")], path=["a"])
@given(rules=st.lists(st.tuples(st.booleans(), _PATTERN), min_size=1, max_size=4), path=_PATH)
def test_the_matcher_agrees_with_a_plain_reference(
    rules: list[tuple[bool, str]], path: list[str]
) -> None:
    """Longest match, Allow on ties, ``*``, ``$`` and percent-encoding, on random rules and
    paths: the compiled matcher (indexes, early exits) says what a slow, plain one says."""
    body = "User-agent: *\n" + "".join(f"{'Allow' if a else 'Disallow'}: {p}\n" for a, p in rules)
    url = "http://h/" + "".join(path)
    octets = path_of(url)
    expected = _reference_allowed([(a, p.encode()) for a, p in rules], octets)
    assert parse_robots(body).rules_for("thresher").allowed(url) is expected


@settings(deadline=None, max_examples=300)
@given(body=st.binary(max_size=2048), path=st.text(max_size=40))
def test_random_bytes_never_raise(body: bytes, path: str) -> None:
    """Any bytes parse, for any agent, and any URL gets a yes or a no (robots.txt itself
    always yes)."""
    robots = parse_robots(body)
    for token in ("thresher", "*", ""):
        rules = robots.rules_for(token)
        assert isinstance(rules.allowed("http://h/" + path), bool)
        assert rules.allowed("http://h/robots.txt")


@settings(deadline=None, max_examples=100)
@given(
    lines=st.lists(
        st.tuples(
            st.sampled_from(["User-agent", "Allow", "Disallow", "Sitemap", "Crawl-delay", "X"]),
            st.text(st.sampled_from("/*$%a-Z?#:\t \ufeff\x00"), max_size=30),
        ),
        max_size=30,
    ),
    eol=st.sampled_from(["\n", "\r", "\r\n"]),
)
def test_random_robots_files_never_raise(lines: list[tuple[str, str]], eol: str) -> None:
    """Files made of the records Thresher reads, with hostile values (many ``*``, stray
    ``%``, NULs, BOMs): parsed and asked without an error."""
    robots = parse_robots(eol.join(f"{k}:{v}" for k, v in lines))
    rules = robots.rules_for("thresher")
    for url in ("http://h/", "http://h/" + "a*" * 50, "http://h/%zz%2"):
        assert isinstance(rules.allowed(url), bool)


def _best_time(fn: object, rounds: int = 5) -> float:
    assert callable(fn)
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def test_hostile_patterns_cost_time_linear_in_the_path() -> None:
    """Security (§3): a pattern with many ``*`` against a long path that almost matches
    would take exponential time in a backtracking matcher; here four times the path costs
    about four times the time (bound: 40 times, far below the 4^k of backtracking)."""
    pattern = "/" + "*a" * 40 + "*b$"
    rules = parse_robots(f"User-agent: *\nDisallow: {pattern}\n").rules_for("thresher")

    def run(n: int) -> object:
        path = "/" + "a" * n
        return lambda: [rules.allowed(path) for _ in range(20)]

    assert rules.allowed("/" + "a" * 100)
    small, large = _best_time(run(2_000)), _best_time(run(8_000))
    assert large < 40 * small + 0.05


def test_parsing_costs_time_linear_in_the_file() -> None:
    """§2.5 and §3: parsing four times the lines costs about four times the time."""
    chunk = b"User-agent: a\nDisallow: /*x*y*z$\nAllow: /%E3%83%84\nSitemap: https://h/s\n" * 500
    small, large = (
        _best_time(lambda: parse_robots(chunk)),
        _best_time(lambda: parse_robots(chunk * 4)),
    )
    assert large < 40 * small + 0.05
