"""What an archive kind is: a small adapter beside the one shared unit job.

A run of a mail source is the same three jobs whatever the kind (docs/mail.md): the
root job lists the archive's units and decides about each, a unit job harvests each
unit that may have changed, a commit job records the totals. What differs from kind to
kind is only what an `ArchiveKind` says:

- how it is recognised and checked (`detect`, `check_url`);
- how it lists its units, with the archive's own counts where it gives them, and which
  of them its numbers vouch for (`list_units` → `Listing`);
- how one unit is read from its stop sign on, and split into messages (`harvest` →
  `Harvest`): conditional requests, Range requests, index pages, git fetches, NNTP;
- the options its source type takes beyond those every kind takes (`options`).

A kind does no I/O of its own making: every request goes through the `Port` the job
hands it (polite, robots.txt, private addresses refused unless allowed), and the store
is read and written only through it. So this layer imports nothing above it, and the
job machinery (`thresher.sources.archive_jobs`) is written once for every kind.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, ClassVar, Protocol
from urllib.parse import urlsplit, urlunsplit

from ...errors import PermanentError, SourceError
from ..mbox import RawMessage
from ..units import Known, Unit

__all__ = [
    "ADDRESS",
    "ArchiveIndexError",
    "ArchiveKind",
    "Got",
    "Harvest",
    "KindOption",
    "Listing",
    "NewsReader",
    "PageMissing",
    "Port",
    "dir_url",
    "http_url",
    "url_path",
]


# A list's address, as pasted in a URL: one "@", a dot in the domain.
ADDRESS = re.compile(r"^[^@/\s]+@[^@/\s]+\.[^@/\s]+$")


class ArchiveIndexError(PermanentError):
    """The archive's listing of its units cannot be read."""


class PageMissing(ArchiveIndexError):
    """An index page the archive does not have (404, 410): a kind may look elsewhere."""


@dataclass(frozen=True)
class Got:
    """One answer, as a kind sees it: `headers` with lower-case names, `content` the
    decoded payload, `wire` the bytes transferred."""

    status: int
    headers: Mapping[str, str]
    content: bytes
    wire: int
    retry_after: float | None = None
    url: str | None = None  # where the answer came from, redirects followed

    def check(self, url: str) -> None:
        """Raise PermanentError for an error answer (416 is the caller's to read)."""
        if self.status >= 400 and self.status != 416:
            raise PermanentError(f"{url}: HTTP {self.status}")


class NewsReader(Protocol):
    """A connection to a news server (NNTP), as a kind uses it (`Port.news`)."""

    async def group(self, name: str) -> tuple[int, int, int]:
        """GROUP: select `name`; its estimated count, first and last article numbers.
        PermanentError when the server has no such group."""
        ...

    async def over(self, first: int, last: int) -> Sequence[tuple[int, str | None]]:
        """OVER (or XOVER): the articles numbered `first` to `last` the server lists,
        as (number, Message-ID or None)."""
        ...

    async def article(self, number: int, max_bytes: int) -> bytes | None:
        """ARTICLE: the article as the server holds it (lines ending in LF), None when
        it has no such article (423, 430); `thresher.fetch.news_answers.ArticleTooLarge`
        past `max_bytes`."""
        ...


class Port(Protocol):
    """What a kind may ask of the job that runs it (`thresher.sources.archive_port`)."""

    @property
    def now(self) -> float:
        """The job's clock, seconds since the epoch."""
        ...

    @property
    def max_message_bytes(self) -> int:
        """The longest message stored whole in the index (the `max_message_bytes`
        setting): a longer one's whole bytes go to a file of their own when it is
        stored, and a kind that cuts messages out of a file may give only its start
        (`thresher.archives.mbox.RawMessage.whole`)."""
        ...

    async def get(
        self, url: str, headers: Mapping[str, str] | None = None, max_bytes: int | None = None
    ) -> Got:
        """GET `url` through the process's polite fetcher (robots.txt, the host's delay,
        redirects followed, private addresses refused unless allowed), or a local file
        answered like a static server would. Answers worth retrying (429, 5xx) raise
        TransientError with the server's Retry-After; every other answer is returned."""
        ...

    async def listing(self, url: str) -> bytes:
        """An index page, asked for conditionally against the copy kept from the last
        run when the server gave validators (a 304 is read from the store). The new
        copy is kept when the job's outcome is committed. PageMissing for a 404 or a
        410, PermanentError for other errors."""
        ...

    async def stored_keys(self, keys: Sequence[str]) -> set[str]:
        """Which of `keys` the source's store holds."""
        ...

    async def checkpoint(
        self,
        unit: str,
        url: str,
        messages: Sequence[RawMessage],
        stop_offset: int,
        tail_sha256: str | None = None,
    ) -> None:
        """Store `messages` now, with the unit's stop sign moved to `stop_offset` (and
        `tail_sha256`, what vouches for all before it: a git epoch's commit id), in one
        transaction (the job must still hold its lease). For a unit too big for one
        job's outcome (a git epoch, a month of thousands of pages): a crash then costs
        what came after the last checkpoint, never a message stored twice."""
        ...

    # What a git kind needs (public-inbox): a POST for git-upload-pack, and a place
    # for its mirrors.

    async def post(
        self,
        url: str,
        data: bytes,
        headers: Mapping[str, str] | None = None,
        max_bytes: int | None = None,
        into: BinaryIO | None = None,
    ) -> Got:
        """POST `data` to `url` through the polite fetcher, with the manners of `get`
        (no redirect followed; 429 and 5xx raise TransientError). With `into`, the body
        is written to that file as it arrives, not kept (`Got.content` is empty,
        `Got.wire` its size): a git pack."""
        ...

    def mirror_dir(self, name: str) -> Path:
        """A directory of the home folder kept for this source across runs
        (`HOME/git/SOURCE/NAME`), made if missing: where a git kind keeps its mirror."""
        ...

    def news(self, url: str) -> AbstractAsyncContextManager[NewsReader]:
        """A connection to the news server of `url` (nntp://, news://, nntps://): the
        host's only one while it is open, wherever the workers run, with a pause between
        batches of commands; private addresses refused unless allowed; the source's
        user and password sent when given."""
        ...


@dataclass(frozen=True)
class Listing:
    """What a root job learnt from the archive: its units now; the total it counts
    (HyperKitty; NNTP's GROUP count); the units its numbers vouch for, unchanged since
    the last harvest, which are confirmed without a request; and the units known to
    hold messages the store does not, which are fetched whatever their counts say."""

    units: list[Unit]
    total: int | None = None
    vouched: frozenset[str] = frozenset()
    changed: frozenset[str] = frozenset()


@dataclass
class Harvest:
    """What a unit job read, for the shared job to store with the unit's new state.

    `messages`: the new ones since the stop sign (or the last checkpoint), their
    `offset` their position in the archive's order of the unit. `counted`: the messages
    the unit holds now. `expected`: the unit's own count when the harvest learnt it
    (an index page's; None: the root job's listing said). `stop_offset`: the stop sign
    after this harvest. `full`: `messages` are every message the unit holds, so stored
    ones that are not among them are recorded as missing; `positions`: the positions the
    unit lists now, for the same check by position (a kind that reads an index, not the
    messages). `length`, `tail_sha256`, `etag`, `last_modified`: what a file's next
    conditional or Range request needs. `status` and `wire`: the deciding answer's
    status and the bytes transferred, reported in the job's result."""

    url: str
    status: int
    wire: int = 0
    messages: list[RawMessage] = field(default_factory=list)
    counted: int = 0
    expected: int | None = None
    stop_offset: int | None = None
    full: bool = False
    positions: frozenset[int] | None = None
    length: int | None = None
    tail_sha256: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    closed: bool | None = None
    events: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class KindOption:
    """An option of a kind's source type beyond those every kind takes (`-o name=…`).
    `secret`: never shown (a password), masked wherever the source's options are."""

    kind: type
    default: Any
    doc: str
    secret: bool = False


class ArchiveKind(ABC):
    """One kind of archive. Subclasses set `name` (the source type) and `doc`, and
    implement `list_units` and `harvest`; `thresher.sources.archives` registers each
    built-in kind (`thresher.archives.kinds.BUILTIN`) as a source type with its jobs.
    `demo`: whether `thresher demo` serves it (it cannot serve a news server)."""

    name: ClassVar[str]
    doc: ClassVar[str]
    # The default of the source option `max_bytes`: the largest file (a git pack) fetched.
    max_bytes: ClassVar[int] = 2**30
    demo: ClassVar[bool] = True
    options: ClassVar[Mapping[str, KindOption]] = {}

    def check_options(self, url: str, options: Mapping[str, Any]) -> None:
        """Check the source's options together (SourceError), after each was parsed."""
        return None

    def check_url(self, url: str) -> str:
        """The URL to store for the source (normalised), or SourceError."""
        return http_url(url)

    def detect(self, url: str) -> bool:
        """Whether a pasted URL is of this kind, by its shape alone (no request)."""
        return False

    @abstractmethod
    async def list_units(
        self, port: Port, url: str, known: Mapping[str, Known], grace: float
    ) -> Listing:
        """The archive's units now, and what its numbers say about them."""

    @abstractmethod
    async def harvest(self, port: Port, unit: Unit, known: Known | None, max_bytes: int) -> Harvest:
        """Read `unit` from its stop sign on (all of it when `known` is None)."""


def http_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SourceError(f"an archive URL must be http(s) with a host, not {url!r}")
    return url


def url_path(url: str) -> str:
    return urlsplit(url).path.lower()


def dir_url(url: str) -> str:
    """The directory of a page URL (`…/index.html` → `…/`), query and fragment dropped."""
    parts = urlsplit(url)
    path = parts.path
    if path.endswith((".html", ".htm")):
        path = path.rsplit("/", 1)[0] + "/"
    elif not path.endswith("/"):
        path += "/"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))
