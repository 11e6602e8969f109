"""robots.txt, the file: parsed once per site, then asked once per URL (RFC 9309).

`parse_robots(body)` reads a robots.txt body into a `RobotsTxt`; `RobotsTxt.rules_for(token)`
compiles the rules that apply to one crawler (its product token) into `Rules`, whose
`allowed(url)` is asked for every URL of the site. No I/O; the fetching and the
expiry live in `thresher.frontier.robots`.

What RFC 9309 asks, and how it is done here:

- **Lines** (§2.2): ``key: value``, keys in any case, ``#`` starts a comment, CR, LF or
  CRLF end a line. A UTF-8 byte-order mark at the start is skipped (it would otherwise
  hide the first ``User-agent`` line, and with it the first group). Lines that are not
  understood are ignored and end nothing (§2.2.4: "MUST NOT terminate a group"). As
  Google does, ``disallow /x`` without its colon is read as ``disallow: /x`` (for
  user-agent, allow and disallow lines made of exactly two words).
- **Groups** (§2.1, §2.2.1): consecutive ``User-agent`` lines share the rules that follow
  them, and a rule line ends the run of user-agent lines: ``Allow``, ``Disallow``, and
  ``Crawl-delay``, which the ABNF's "define additional lines you need" lets us read as a
  rule of its group, as Bing, Yandex and Scrapy do (so ``User-agent: *`` / ``Crawl-delay:
  10`` / ``User-agent: BadBot`` / ``Disallow: /`` keeps BadBot's ``Disallow`` out of the
  ``*`` group; Google, which ignores Crawl-delay, would merge them). ``Sitemap`` and
  unknown lines end nothing. Rules before the first user-agent line belong to no group.
- **Which group** (§2.2.1): the crawler's product token (`product_token`: the first
  word of its User-Agent) is matched case-insensitively against each user-agent line's
  token (its leading letters, ``_`` and ``-``, so ``Thresher/1.0`` names ``thresher``),
  never against words elsewhere in the crawler's User-Agent header: ``User-agent: web``
  is not a group for ``Thresher/0.1 (...; web archive harvester)``. Every group naming
  the token is combined; if none does, every ``*`` group is; if there is none either,
  nothing is disallowed.
- **Matching** (§2.2.2, §2.2.3): patterns match the URL's path and query from their first
  octet; ``*`` is any run of octets, a final ``$`` the end. The longest matching
  pattern (most octets, ``*`` and ``$`` counting one each, as Google counts them)
  decides, and ``Allow`` wins a tie; no match allows. ``/robots.txt`` is always allowed.
- **Percent-encoding** (§2.2.2): both sides are compared as octets, every ``%HH`` escape
  decoded and every character in UTF-8, which is exactly the RFC's normal form
  (unreserved characters plain, reserved and non-ASCII ones percent-encoded) spelled
  differently: ``/foo/bar?baz=https://foo.bar`` and ``...https%3A%2F%2Ffoo.bar`` match,
  so do ``/%7Ejoe`` and ``/~joe``, ``ツ`` and ``%E3%83%84``, ``%2f`` and ``%2F``. A
  pattern's ``%2A`` and ``%24`` are a literal ``*`` and ``$`` (§2.2.3).
- **Limits** (§2.5): the first 500 KiB are parsed, cut after the last whole line
  (`robots_body`); the rest is ignored, not a reason to skip the site.

Why not protego, which Thresher used before: checked rule by rule against the RFC
(tests/frontier/test_robotstxt.py), protego 0.7 lost the first group of a file with a
BOM, chose groups by searching the whole User-Agent header for the group's name (so
``User-agent: web`` applied to Thresher), let an unknown line between two user-agent
lines split them, compared ``https://`` and ``https%3A%2F%2F`` as different, and took
13.5 µs of CPU per decision on a typical robots.txt where this module takes 3.7
(benchmarks/crawl/robots_decisions.py). Its parser cannot be fixed from outside, so
this module replaces it: a line loop, and a matcher without regular expressions. A
pattern is a literal prefix, an exact path, or literal pieces between ``*``s found left
to right with `bytes.find` — greedy leftmost matching is exact for ``*``-only patterns
and takes time linear in the path for each piece, however many ``*`` a hostile file
writes (a regular expression would backtrack).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import unquote_to_bytes

__all__ = [
    "MAX_ROBOTS_BYTES",
    "URL_PARTS",
    "Group",
    "RobotsTxt",
    "Rules",
    "parse_robots",
    "path_octets",
    "path_of",
    "product_token",
    "robots_body",
]

MAX_ROBOTS_BYTES = 500 * 1024
"""RFC 9309 §2.5: the parsing limit "MUST be at least 500 kibibytes"; ours is exactly that."""

_BOM = b"\xef\xbb\xbf"
_TOKEN = re.compile(rb"[A-Za-z_-]*")
_TOKEN_STR = re.compile(r"[A-Za-z_-]*")
_COMPATIBLE = re.compile(r"\s*Mozilla/[0-9.]+\s*\(\s*compatible\s*;\s*([A-Za-z_-]+)", re.IGNORECASE)
# The site part of an absolute URL (scheme and authority) and its path and query.
URL_PARTS = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^/?#]*)([^#]*)")
_LENIENT_KEYS = frozenset((b"user-agent", b"allow", b"disallow"))


def product_token(user_agent: str) -> str:
    """The product token of a User-Agent header, lowercase: its first word's leading
    letters, ``_`` and ``-`` (``Thresher/0.1 (+https://…)`` gives ``thresher``; RFC 9309
    §2.2.1 allows only those characters in a token). In the browser-compatible form
    ``Mozilla/5.0 (compatible; ExampleBot/0.1; …)`` it is the crawler's name that follows
    ``compatible;`` (``examplebot``, as in the RFC's example). Empty when there is none:
    then only ``*`` groups apply."""
    m = _COMPATIBLE.match(user_agent) or _TOKEN_STR.match(user_agent.strip())
    return m.group(m.lastindex or 0).lower() if m else ""


def robots_body(body: bytes) -> bytes:
    """The part of `body` that is parsed: all of it up to 500 KiB; past that, the first
    500 KiB up to the end of the last whole line in them (a line cut in two could read
    as a different rule). Store this, not the whole body."""
    if len(body) <= MAX_ROBOTS_BYTES:
        return body
    head = body[:MAX_ROBOTS_BYTES]
    if body[MAX_ROBOTS_BYTES] in b"\r\n":
        return head
    return head[: max(head.rfind(b"\n"), head.rfind(b"\r")) + 1]


def path_of(url: str) -> bytes:
    """The octets robots.txt patterns are matched against: `url`'s path and query (no
    fragment), ``/`` if it has neither, every percent-escape decoded."""
    m = URL_PARTS.match(url)
    return path_octets(m.group(2) if m else url)


def path_octets(path_query: str) -> bytes:
    """`path_of` for a path and query already split from their URL."""
    if not path_query:
        return b"/"
    if path_query[0] != "/":
        path_query = "/" + path_query
    if "%" not in path_query and path_query.isascii():
        return path_query.encode("ascii")
    return unquote_to_bytes(path_query.encode("utf-8", "surrogatepass"))


@dataclass(frozen=True, slots=True)
class Group:
    """One group as written: its user-agent tokens (lowercase, or ``*``), its rules as
    (allow, raw pattern) in file order, and its Crawl-delay."""

    agents: tuple[str, ...]
    rules: tuple[tuple[bool, bytes], ...]
    crawl_delay: float | None


@dataclass(frozen=True, slots=True)
class RobotsTxt:
    """A parsed robots.txt: its groups and its ``Sitemap:`` lines."""

    groups: tuple[Group, ...]
    sitemaps: tuple[str, ...]
    """The values of the ``Sitemap:`` lines, in file order, duplicates dropped, as written
    (the sitemaps protocol wants absolute URLs; resolve them against the robots.txt URL).
    They belong to no group."""

    def rules_for(self, token: str) -> Rules:
        """The rules for the crawler whose product token is `token` (RFC 9309 §2.2.1): the
        groups naming it, combined; else the ``*`` groups, combined; else none."""
        token = token.lower()
        chosen = [g for g in self.groups if token and token in g.agents]
        if not chosen:
            chosen = [g for g in self.groups if "*" in g.agents]
        delays = [g.crawl_delay for g in chosen if g.crawl_delay is not None]
        return Rules((r for g in chosen for r in g.rules), max(delays) if delays else None)


def parse_robots(body: bytes | str) -> RobotsTxt:
    """Parse a robots.txt body (bytes as served; a str is taken as its UTF-8). Never
    raises: whatever cannot be read is ignored, line by line (RFC 9309 §2.3.1.5)."""
    if isinstance(body, str):
        body = body.encode("utf-8", "replace")
    for i in (3, 2, 1):  # a BOM, or what is left of one
        if body.startswith(_BOM[:i]):
            body = body[i:]
            break
    body = robots_body(body)
    groups: list[tuple[list[str], list[tuple[bool, bytes]], list[float]]] = []
    sitemaps: dict[str, None] = {}
    agents_open = False  # the last user-agent/allow/disallow line was a user-agent line
    for raw in body.splitlines():
        hash_at = raw.find(b"#")
        line = raw if hash_at < 0 else raw[:hash_at]
        key, colon, value = line.partition(b":")
        if colon:
            key, value = key.strip().lower(), value.strip()
        else:
            words = line.split()
            if len(words) != 2 or words[0].lower() not in _LENIENT_KEYS:
                continue
            key, value = words[0].lower(), words[1]
        if key == b"user-agent":
            if not agents_open:
                groups.append(([], [], []))
                agents_open = True
            groups[-1][0].append(_agent(value))
        elif key == b"allow" or key == b"disallow":
            if not groups:
                continue  # §2.2.2: rules in no group are ignored
            agents_open = False
            if value:  # an empty pattern matches nothing
                groups[-1][1].append((key == b"allow", value))
        elif key == b"crawl-delay":
            if groups:
                agents_open = False  # a member of its group, like a rule (see above)
                delay = _delay(value)
                if delay is not None:
                    groups[-1][2].append(delay)
        elif key == b"sitemap" and value:
            sitemaps[value.decode("utf-8", "replace")] = None
    return RobotsTxt(
        tuple(Group(tuple(a), tuple(r), d[0] if d else None) for a, r, d in groups),
        tuple(sitemaps),
    )


def _agent(value: bytes) -> str:
    # Google's reading: "*" alone (or followed by a space) is the global group; anything
    # else names the token made of its leading letters, "_" and "-".
    if value[:1] == b"*" and (len(value) == 1 or value[1:2].isspace()):
        return "*"
    m = _TOKEN.match(value)
    return m.group(0).decode("ascii").lower() if m else ""


def _delay(value: bytes) -> float | None:
    try:
        delay = float(value)
    except ValueError:
        return None
    return delay if math.isfinite(delay) and delay >= 0 else None


# A pattern with "*": (priority, allow, length of the literal head before the first "*",
# the literals between "*"s (empty ones dropped), the literal after the last "*", whether
# it ended with "$"). A plain tuple: unpacked in the loop, it costs less than attributes.
_Glob = tuple[int, bool, int, tuple[bytes, ...], bytes, bool]

# Up to this many literal prefixes, one `bytes.startswith(tuple)` (a C loop) first tells
# whether any of them matches at all, the usual answer being no.
_QUICK_REJECT = 128


class Rules:
    """The Allow and Disallow rules that apply to one crawler, compiled for matching.

    Patterns fall into three kinds, each found the cheap way: literal prefixes (most
    rules) in one dict, looked up by the path's own prefixes of each length a pattern
    has, longest first, so a decision costs a lookup per distinct length rather than a
    comparison per rule; exact paths (``/page$``) in another dict; and patterns with
    ``*``, filed under their literal head the same way, and tried longest first only as
    long as they could still beat the best match found. A pattern's pieces are found
    left to right, each at its leftmost place (`bytes.find`): for patterns whose only
    wildcard is ``*`` that is exact, and linear in the path per piece.
    """

    __slots__ = (
        "_exact",
        "_glob_lengths",
        "_globs",
        "_lengths",
        "_prefixes",
        "_quick",
        "allows_all",
        "crawl_delay",
    )

    def __init__(self, rules: Iterable[tuple[bool, bytes]], crawl_delay: float | None = None):
        self.crawl_delay = crawl_delay
        prefixes: dict[bytes, bool] = {}
        exact: dict[bytes, bool] = {}
        globs: list[tuple[bytes, _Glob]] = []
        for allow, pattern in dict.fromkeys(rules):
            anchored = pattern.endswith(b"$")
            body = pattern[:-1] if anchored else pattern
            pieces = [unquote_to_bytes(p) if b"%" in p else p for p in body.split(b"*")]
            if len(pieces) == 1:
                table = exact if anchored else prefixes
                # The same pattern allowed and disallowed: allow wins the tie.
                table[pieces[0]] = table.get(pieces[0], False) or allow
                continue
            # Octets, each "*" and the "$" counting one, as Google counts a pattern.
            priority = sum(map(len, pieces)) + len(pieces) - 1 + anchored
            middle = tuple(p for p in pieces[1:-1] if p)
            head = pieces[0]
            globs.append((head, (priority, allow, len(head), middle, pieces[-1], anchored)))
        self._prefixes = prefixes
        self._lengths = sorted({len(p) for p in prefixes}, reverse=True)
        self._quick = tuple(prefixes) if len(prefixes) <= _QUICK_REJECT else None
        self._exact = exact
        by_head: dict[bytes, list[_Glob]] = {}
        # Longest first, Allow before Disallow of the same length.
        for head, glob in sorted(globs, key=lambda hg: (-hg[1][0], not hg[1][1])):
            by_head.setdefault(head, []).append(glob)
        self._globs = by_head
        self._glob_lengths = sorted({len(h) for h in by_head}, reverse=True)
        self.allows_all = not (
            False in prefixes.values() or False in exact.values() or any(not g[1] for _, g in globs)
        )
        """No Disallow rule: everything is allowed, whatever the Allow rules say."""

    def allowed(self, url: str) -> bool:
        """May `url` (absolute, or a path) be fetched under these rules?"""
        return self.allowed_path(path_of(url))

    def allowed_path(self, path: bytes) -> bool:
        """May the path and query `path` (as `path_of` gives it) be fetched?"""
        if self.allows_all or path == b"/robots.txt":  # §2.2.2: "implicitly allowed"
            return True
        best, verdict = -1, True
        size = len(path)
        hit = self._exact.get(path) if self._exact else None
        if hit is not None:  # longer than any prefix of the path: those need no look
            best, verdict = size + 1, hit
        elif self._quick is None or path.startswith(self._quick):
            prefixes = self._prefixes
            for length in self._lengths:
                if length <= size:
                    hit = prefixes.get(path[:length])
                    if hit is not None:
                        best, verdict = length, hit
                        break
        globs = self._globs
        for length in self._glob_lengths:
            if length > size:
                continue
            candidates = globs.get(path[:length])
            if candidates is None:
                continue
            for priority, allow, pos, middle, tail, anchored in candidates:
                if priority < best or (priority == best and (verdict or not allow)):
                    break
                for piece in middle:
                    at = path.find(piece, pos)
                    if at < 0:
                        break
                    pos = at + len(piece)
                else:
                    if anchored:
                        if size - len(tail) < pos or not path.endswith(tail):
                            continue
                    elif tail and path.find(tail, pos) < 0:
                        continue
                    best, verdict = priority, allow
                    break
        return verdict
