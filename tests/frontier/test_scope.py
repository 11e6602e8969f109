"""Scope rules built from seeds: host, domain, prefix, regex, and max depth."""

from __future__ import annotations

import pytest

from thresher.errors import UsageError
from thresher.frontier import InvalidScope, Scope, ScopeKind

SEEDS = ["http://www.Example.com/list/index.html", "https://lists.example.org/"]


def test_host() -> None:
    scope = Scope.from_rule("host", SEEDS)
    assert scope.kind is ScopeKind.HOST
    assert scope.allows("http://www.example.com/anything")
    assert scope.allows("https://WWW.EXAMPLE.COM:443/x")
    assert scope.allows("http://lists.example.org/x")
    assert not scope.allows("http://example.com/")
    assert not scope.allows("http://sub.www.example.com/")


def test_domain() -> None:
    scope = Scope.from_rule("domain", SEEDS)
    assert scope.allows("http://example.com/")
    assert scope.allows("http://www.example.com/")
    assert scope.allows("http://mail.example.com/")
    assert scope.allows("http://a.lists.example.org/")
    assert not scope.allows("http://example.org/")
    assert not scope.allows("http://notexample.com/")
    assert not scope.allows("http://example.com.evil.net/")


def test_prefix() -> None:
    scope = Scope.from_rule("prefix", SEEDS)
    assert scope.allows("http://www.example.com/list/2024/msg1.html")
    assert scope.allows("http://www.example.com:80/list/a/../b#x")
    assert not scope.allows("http://www.example.com/other")
    assert not scope.allows("https://www.example.com/list/x")
    assert scope.allows("https://lists.example.org/anything")


def test_regex() -> None:
    scope = Scope.from_rule(r"^https?://[^/]*example\.(com|org)/list", SEEDS)
    assert scope.kind is ScopeKind.REGEX
    assert scope.allows("http://www.example.com/list/x")
    assert not scope.allows("http://www.example.com/other")


def test_regex_prefix_forces_a_regex() -> None:
    scope = Scope.from_rule("regex:host", [])
    assert scope.kind is ScopeKind.REGEX
    assert scope.allows("http://host.example/")


def test_max_depth() -> None:
    scope = Scope.from_rule("host", SEEDS, max_depth=2)
    assert scope.allows("http://www.example.com/a", depth=0)
    assert scope.allows("http://www.example.com/a", depth=2)
    assert not scope.allows("http://www.example.com/a", depth=3)


def test_uncrawlable_urls_are_out_of_scope() -> None:
    scope = Scope.from_rule(".*", SEEDS)
    assert not scope.allows("mailto:someone@example.com")
    assert not scope.allows("ftp://www.example.com/list/")


@pytest.mark.parametrize(
    ("rule", "seeds", "max_depth", "message"),
    [
        ("([", SEEDS, None, "not a valid regex"),
        ("host", [], None, "at least one seed"),
        ("host", ["ftp://x/"], None, "bad seed"),
        ("host", SEEDS, -1, "max depth"),
    ],
)
def test_bad_rules_are_usage_errors(
    rule: str, seeds: list[str], max_depth: int | None, message: str
) -> None:
    with pytest.raises(InvalidScope, match=message) as info:
        Scope.from_rule(rule, seeds, max_depth)
    assert isinstance(info.value, UsageError)


def test_a_scope_built_directly_works_too() -> None:
    scope = Scope(ScopeKind.REGEX, (r"/a$", r"/b$"))
    assert scope.allows("http://x.example/a")
    assert scope.allows("http://x.example/b")
    assert not scope.allows("http://x.example/c")


def test_allows_canonical_matches_allows_for_canonical_urls() -> None:
    from thresher.frontier import Scope, canonicalize

    scope = Scope.from_rule("domain", ["http://www.example.com/"], max_depth=2)
    for url in ["http://example.com/a", "http://sub.example.com/", "http://other.org/"]:
        for depth in (0, 2, 3):
            canon = canonicalize(url)
            assert scope.allows_canonical(canon, depth) == scope.allows(url, depth)
