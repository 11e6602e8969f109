"""One ingest, as a walk from the requested URL to a file: redirects, landing pages, verdict.

`Walk` is the sans-IO core of the ingest engine: it says which URL to fetch next
(`Fetch`) or that the walk is over (`Verdict`), from the answers it is given. It does no
I/O and keeps no clock, so every path through it — every status of the vocabulary — is
tested without a server, and the engine (`thresher.ingest.engine`) is only the loop that fetches.

The rules, in order, for each answer:

- A redirect (3xx with a Location) is followed, at most `max_redirects` in a row
  (``redirects-exceeded``); a target already visited in this walk is a
  ``redirect-loop``.
- A 2xx body is sniffed by its bytes (`sniff_mimetype`), never by header or extension.
  Empty: ``empty-blob``. The kind the request wants (`expected_kind`): ``success``.
  HTML where a file is wanted: a landing page, whose full-text link
  (`find_fulltext_link`) is followed, at most `max_hops` times (``max-hops-exceeded``);
  a link back to a page already visited, this very page included, is a ``link-loop``
  (as sandcrawler reports it); a page without a link is
  ``blocked-wall`` when it asks for a password (a login or paywall form), else
  ``no-pdf-link`` (``no-xml-link`` for ``xml``). Anything else: ``wrong-mimetype``.
- Any other status is ``terminal-bad-status``; 408, 425, 429 and every 5xx (Cloudflare's
  520-524 too) are worth another attempt later (`Verdict.transient`).
- A URL on the blocklist, requested or reached, is ``skip-url-blocklist`` and is not
  fetched.

The verdict's terminal URL and status are those of the last answer (None when nothing
was fetched); a URL the walk refused (a loop, the blocklist, a bad URL) is its last hop.

Fetch errors (timeouts, DNS, resets, too large, robots.txt) are turned into verdicts by
`Walk.on_error` with the status the handler names for them.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..frontier import InvalidURL, canonicalize
from .landing import find_fulltext_link
from .sniff import EMPTY, expected_kind, sniff_mimetype

__all__ = [
    "DEFAULT_BLOCKLIST",
    "MAX_HOPS",
    "MAX_REDIRECTS",
    "PERMANENT_STATUSES",
    "STATUSES",
    "TRANSIENT_STATUSES",
    "Answer",
    "Blocklist",
    "Fetch",
    "Verdict",
    "Walk",
]

MAX_HOPS = 3
"""Landing-page links followed, by default, before giving up (``max-hops-exceeded``)."""
MAX_REDIRECTS = 10
"""Redirects followed in a row before giving up (``redirects-exceeded``)."""

# The vocabulary, documented in docs/ingest.md. Transient statuses are retried with
# backoff by the job system and only recorded once the attempts are used up.
TRANSIENT_STATUSES = frozenset(
    {"timeout", "dns-error", "connection-error", "bad-response", "host-backoff"}
)
PERMANENT_STATUSES = frozenset(
    {
        "success",
        "no-pdf-link",
        "no-xml-link",
        "blocked-wall",
        "link-loop",
        "max-hops-exceeded",
        "wrong-mimetype",
        "terminal-bad-status",
        "redirect-loop",
        "redirects-exceeded",
        "body-too-large",
        "empty-blob",
        "blocked-robots",
        "blocked-address",
        "bad-url",
        "skip-url-blocklist",
    }
)
STATUSES = TRANSIENT_STATUSES | PERMANENT_STATUSES

# Answers another attempt may well not get; every 5xx too.
_RETRY_HTTP = frozenset({408, 425, 429})
_HTML = frozenset({"text/html", "application/xhtml+xml"})
_NO_LINK = {"pdf": "no-pdf-link", "xml": "no-xml-link"}
# A form with a password field: a login wall or a paywall, not the paper. The attribute
# is `type`, not `data-type` and the like.
_PASSWORD_RE = re.compile(rb"<input\b[^>]*(?<![\w-])type\s*=\s*[\"']?password\b", re.IGNORECASE)
_WALL_SCAN = 2 * 2**20

DEFAULT_BLOCKLIST: tuple[str, ...] = (
    # Replays of other archives, not the origin: ingest the original instead.
    "://web.archive.org/web/",
    "://archive.today/",
    "://archive.ph/",
    # Search result pages, never a paper.
    "://scholar.google.",
    "://www.google.com/search",
    "://www.bing.com/search",
)
"""URL substrings never fetched (``skip-url-blocklist``); a source adds its own."""


class Blocklist:
    """URLs never to fetch: each entry is a substring of the URL (case-insensitive),
    or a regular expression when it starts with ``re:``. A URL is checked as written
    and in its canonical form (``:443`` and a trailing dot of the host dropped …), so
    spelling a blocked URL differently does not get it past."""

    def __init__(self, entries: Sequence[str] = DEFAULT_BLOCKLIST) -> None:
        self._subs = tuple(e.lower() for e in entries if e and not e.startswith("re:"))
        # One pattern each: joined, inline flags and back-references would break.
        self._res = tuple(re.compile(e[3:]) for e in entries if e.startswith("re:") and e[3:])

    def blocks(self, url: str, canonical: str | None = None) -> bool:
        """Whether `url` is blocked; `canonical` is its canonical form, if known."""
        if canonical is None:
            with contextlib.suppress(InvalidURL):
                canonical = canonicalize(url)
        return self._match(url) or (canonical is not None and self._match(canonical))

    def _match(self, url: str) -> bool:
        low = url.lower()
        return any(s in low for s in self._subs) or any(r.search(url) for r in self._res)


@dataclass(frozen=True, slots=True)
class Fetch:
    """Fetch this URL next and give the answer to `Walk.on_answer`."""

    url: str


@dataclass(frozen=True, slots=True)
class Answer:
    """What the handler got for a `Fetch`: enough for the walk to decide."""

    url: str
    status: int
    location: str | None  # the absolute redirect target of a 3xx
    content: bytes  # decoded body
    content_type: str | None  # the Content-Type header, to break ties of text types


@dataclass(frozen=True, slots=True)
class Verdict:
    """How the walk ended."""

    status: str
    hit: bool
    terminal_url: str | None
    terminal_status: int | None
    mimetype: str | None = None  # of the terminal body, sniffed
    error: str | None = None
    transient: bool = False  # worth another attempt later


@dataclass
class Walk:
    """The walk of one ingest request; see the module docstring for the rules."""

    ingest_type: str
    base_url: str
    max_hops: int = MAX_HOPS
    max_redirects: int = MAX_REDIRECTS
    blocklist: Blocklist = field(default_factory=Blocklist)
    hops: list[dict[str, Any]] = field(default_factory=list)
    """Every URL fetched or refused, in order: ``{"url", "status", "kind", …}``, where
    kind is ``redirect``, ``landing`` (with the ``technique`` that found the link),
    ``terminal``, ``error``, or, for a URL refused after the last answer, ``blocked`` or
    ``loop``."""
    sniffed: str | None = None
    """The type `sniff_mimetype` gave the last 2xx answer's body (None before one)."""
    _visited: set[str] = field(default_factory=set)
    _redirects: int = 0
    _landings: int = 0
    _last: Answer | None = None

    def start(self) -> Fetch | Verdict:
        return self._go(self.base_url, None)

    def on_answer(self, answer: Answer) -> Fetch | Verdict:
        self._last = answer
        status = answer.status
        if 300 <= status < 400 and answer.location is not None:
            self.hops.append({"url": answer.url, "status": status, "kind": "redirect"})
            if self._redirects >= self.max_redirects:
                return self._end("redirects-exceeded", answer, f"more than {self.max_redirects}")
            self._redirects += 1
            return self._go(answer.location, "redirect-loop")
        if not 200 <= status < 300:
            self.hops.append({"url": answer.url, "status": status, "kind": "terminal"})
            transient = status in _RETRY_HTTP or 500 <= status < 600
            return self._end("terminal-bad-status", answer, transient=transient)
        mimetype = self.sniffed = sniff_mimetype(answer.content, answer.content_type)
        if mimetype == EMPTY:
            return self._terminal("empty-blob", answer, mimetype)
        if expected_kind(self.ingest_type, mimetype):
            return self._terminal("success", answer, mimetype, hit=True)
        if mimetype not in _HTML:
            return self._terminal("wrong-mimetype", answer, mimetype)
        link = find_fulltext_link(answer.content, answer.url, self.ingest_type, answer.content_type)
        if link is None:
            head = answer.content[:_WALL_SCAN]
            if _PASSWORD_RE.search(head):
                return self._terminal("blocked-wall", answer, mimetype)
            return self._terminal(
                _NO_LINK.get(self.ingest_type, "wrong-mimetype"), answer, mimetype
            )
        self.hops.append(
            {"url": answer.url, "status": status, "kind": "landing", "technique": link.technique}
        )
        if self._landings >= self.max_hops:
            return self._end("max-hops-exceeded", answer, f"more than {self.max_hops}", mimetype)
        if link.itself:  # the page names only itself: fetching it again would loop
            return self._refuse(link.url, "loop", "link-loop", f"back to {link.url}")
        self._landings += 1
        self._redirects = 0
        return self._go(link.url, "link-loop")

    def on_error(self, status: str, url: str, error: str) -> Verdict:
        """The fetch of `url` failed; `status` is what the handler calls the failure."""
        self.hops.append({"url": url, "status": None, "kind": "error", "error": status})
        return Verdict(
            status,
            hit=False,
            terminal_url=url,
            terminal_status=None,
            error=error,
            transient=status in TRANSIENT_STATUSES,
        )

    # --- helpers --------------------------------------------------------------------------

    def _go(self, url: str, loop_status: str | None) -> Fetch | Verdict:
        key: str | None = None
        invalid: InvalidURL | None = None
        try:
            key = canonicalize(url)
        except InvalidURL as exc:
            invalid = exc
        # The blocklist first: a blocked URL is skipped however badly it is written.
        if self.blocklist.blocks(url, key):
            return self._refuse(url, "blocked", "skip-url-blocklist", f"blocklisted: {url}")
        if key is None:
            assert invalid is not None
            return self._refuse(url, "error", "bad-url", str(invalid))
        if key in self._visited and loop_status is not None:
            return self._refuse(url, "loop", loop_status, f"back to {url}")
        self._visited.add(key)
        return Fetch(url)

    def _refuse(self, url: str, kind: str, status: str, error: str) -> Verdict:
        """`url` is not fetched: the walk ends at the last answer, if any."""
        hop: dict[str, Any] = {"url": url, "status": None, "kind": kind}
        if kind == "error":
            hop["error"] = status
        self.hops.append(hop)
        last = self._last
        if last is None:
            return Verdict(status, False, None, None, error=error)
        return Verdict(status, False, last.url, last.status, error=error)

    def _terminal(self, status: str, answer: Answer, mimetype: str, hit: bool = False) -> Verdict:
        self.hops.append(
            {"url": answer.url, "status": answer.status, "kind": "terminal", "mimetype": mimetype}
        )
        return self._end(status, answer, None, mimetype, hit=hit)

    @staticmethod
    def _end(
        status: str,
        answer: Answer,
        error: str | None = None,
        mimetype: str | None = None,
        *,
        hit: bool = False,
        transient: bool = False,
    ) -> Verdict:
        return Verdict(status, hit, answer.url, answer.status, mimetype, error, transient)
