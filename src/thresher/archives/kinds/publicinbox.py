"""public-inbox: mail archives kept in git (lore.kernel.org), mirrored with git itself.

What public-inbox serves (version 1.9, checked against Debian's `public-inbox` in
tests/archives/test_publicinbox_real.py), for an inbox at `…/LIST/`:

- a v2 inbox is one or more git repositories, its *epochs*, `…/LIST/git/0.git`,
  `1.git`… (each about a gigabyte of packed mail; a new one is begun when the newest
  is full). Every commit holds one message: the blob `m` of its tree is the mail as
  it was received, and a commit whose tree holds `d` instead removes that message
  (`public-inbox-learn rm`, spam). History is linear, and only ever appended to,
  except by `public-inbox-purge`, which rewrites it. A v1 inbox is one repository at
  `…/LIST/` itself, one file per message in a fan-out of directories.
- `…/LIST/manifest.js.gz`, a grokmirror manifest: per repository its path and a
  `fingerprint`, the SHA-1 of `git show-ref` (an empty epoch is left out).
- `…/LIST/_/text/mirror/`, the mirroring instructions: a `git clone --mirror URL`
  per epoch (`…/LIST/0`, the same repository as `…/LIST/git/0.git`).

A unit is an epoch (`git-0`, `git-1`…; `git` for a v1 inbox). The root job reads the
manifest (or, without one, the mirror page) for the epochs, new ones included; an
epoch whose fingerprint is the one its last harvest ended at (kept as the unit's
`etag`) is confirmed without a request. A unit job fetches the epoch into the
source's mirror, `HOME/git/SOURCE/git/N.git` (`git.fetch_mirror`: only what the mirror
lacks; nothing but `info/refs` when it lacks nothing), then reads the commits after
its stop sign — the last commit read, in `tail_sha256`, with their count in
`stop_offset` — oldest first, storing them in checkpoints of `CHECKPOINT` messages.
A message removed upstream is recorded as a `removed` event; nothing is deleted.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import re
from collections.abc import Mapping
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

from ...errors import PermanentError, SourceError
from ..mbox import RawMessage
from ..message import parse_message
from ..units import Known, Unit
from .base import ArchiveIndexError, ArchiveKind, Harvest, Listing, PageMissing, Port, http_url
from .git import Change, CommitLog, fetch_mirror

__all__ = [
    "CHECKPOINT",
    "PublicInbox",
    "inbox_url",
    "parse_manifest",
    "parse_mirror_page",
]

log = logging.getLogger("thresher.archives")

# Messages stored per checkpoint: a crash costs at most this many read again (from the
# mirror, not the network). An epoch of lore.kernel.org's LKML holds about a million.
CHECKPOINT = 500

# Where public-inbox is known to serve inboxes at the top of the path.
_HOSTS = ("lore.kernel.org", "public-inbox.org", "inbox.sourceware.org", "lore.gnuweeb.org")

_EPOCH_PATH = re.compile(r"/git/(\d+)\.git(?:/.*)?$")
_CLONE_HREF = re.compile(r"""git\s+clone\s+--mirror\s+<a\s+href\s*=\s*["']([^"']+)["']""")
_MANIFEST_BYTES = 16 * 2**20  # one inbox's manifest is a few hundred bytes an epoch
_V1 = "git"


def inbox_url(url: str) -> str:
    """The inbox a pasted URL belongs to, ending in "/": `…/LIST/` from an epoch's URL
    (`…/LIST/git/0.git`, `…/LIST/0`), a page of the inbox (`…/LIST/_/text/mirror/`,
    `…/LIST/new.atom`, `…/LIST/manifest.js.gz`) or of a message (`…/LIST/<id>/…`, an
    id having an "@")."""
    parts = urlsplit(http_url(url))
    segments = [s for s in parts.path.split("/") if s]
    for i, segment in enumerate(segments):
        # A message's page: its Message-ID, percent-encoded or not.
        if "@" in unquote(segment) and i > 0:
            segments = segments[:i]
            break
        if segment == "_" and i > 0:
            segments = segments[:i]
            break
        if segment == "git" and i > 0 and i + 1 < len(segments) and _is_epoch(segments[i + 1]):
            segments = segments[:i]
            break
    if segments and segments[-1] in ("manifest.js.gz", "new.atom", "new.html", "index.html"):
        segments = segments[:-1]
    if len(segments) > 1 and segments[-1].isdigit():
        segments = segments[:-1]  # `git clone --mirror …/LIST/0`
    if not segments:
        raise SourceError(f"{url}: a public-inbox URL names an inbox (…/LIST/)")
    path = "/" + "/".join(segments) + "/"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def _is_epoch(segment: str) -> bool:
    return segment.endswith(".git") and segment[:-4].isdigit()


def _unit(epoch: int | None) -> str:
    return _V1 if epoch is None else f"git-{epoch}"


def _git_url(inbox: str, epoch: int | None) -> str:
    return inbox.rstrip("/") if epoch is None else f"{inbox}git/{epoch}.git"


def parse_manifest(data: bytes, inbox: str) -> dict[int | None, str | None]:
    """The repositories of `inbox` a grokmirror manifest lists, each with its
    fingerprint: epoch number → fingerprint, None the repository of a v1 inbox."""
    try:
        manifest = json.loads(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)
    except (OSError, EOFError, ValueError) as exc:
        raise ArchiveIndexError(f"{inbox}manifest.js.gz is not a manifest: {exc}") from None
    if not isinstance(manifest, dict):
        raise ArchiveIndexError(f"{inbox}manifest.js.gz is not a manifest: not an object")
    name = urlsplit(inbox).path.rstrip("/").rsplit("/", 1)[-1]
    found: dict[int | None, str | None] = {}
    for path, entry in manifest.items():
        if not isinstance(path, str):
            continue
        fingerprint = entry.get("fingerprint") if isinstance(entry, dict) else None
        fingerprint = fingerprint if isinstance(fingerprint, str) else None
        match = _EPOCH_PATH.search(path)
        if match is not None:
            if path[: match.start()].rstrip("/").rsplit("/", 1)[-1] == name:
                found[int(match.group(1))] = fingerprint
        elif path.rstrip("/").rsplit("/", 1)[-1] == name:
            found[None] = fingerprint
    return found


def parse_mirror_page(page: bytes, inbox: str) -> list[int | None]:
    """The repositories the inbox's mirroring instructions (`_/text/mirror/`) give a
    `git clone --mirror` for: epoch numbers (`…/LIST/0`), None for a v1 inbox
    (`…/LIST`)."""
    found: set[int | None] = set()
    base = inbox.rstrip("/")
    for match in _CLONE_HREF.finditer(page.decode("utf-8", "replace")):
        url = urljoin(inbox, match.group(1)).rstrip("/")
        if url == base:
            found.add(None)
            continue
        tail = url.removeprefix(base + "/")
        if tail != url:
            tail = tail.removeprefix("git/").removesuffix(".git")
            if tail.isdigit():
                found.add(int(tail))
    return sorted(found, key=_order)


def _order(epoch: int | None) -> int:
    return -1 if epoch is None else epoch


class PublicInbox(ArchiveKind):
    name = "publicinbox"
    doc = (
        "A public-inbox archive (lore.kernel.org): the inbox …/LIST/ (or any page of it),"
        " mirrored with git."
    )
    # An epoch's pack is about a gigabyte (lore's LKML): it goes to a file, not memory.
    max_bytes = 8 * 2**30
    demo = False  # git's smart HTTP: `thresher demo` cannot serve it

    def check_url(self, url: str) -> str:
        return inbox_url(url)

    def detect(self, url: str) -> bool:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            return False
        path = parts.path
        if _EPOCH_PATH.search(path) or "/_/text/" in path:
            return True
        if path.endswith("/manifest.js.gz") and path.strip("/") != "manifest.js.gz":
            return True
        return (parts.hostname or "") in _HOSTS and path.strip("/") != ""

    async def list_units(
        self, port: Port, url: str, known: Mapping[str, Known], grace: float
    ) -> Listing:
        inbox = inbox_url(url)
        epochs: dict[int | None, str | None] = {}
        try:
            got = await port.get(inbox + "manifest.js.gz", None, _MANIFEST_BYTES)
        except PermanentError as exc:
            # Disallowed by robots.txt, say: the mirror page may not be (and if the
            # site is refused as a whole, it fails the same way).
            log.info("%smanifest.js.gz: %s; reading the mirror page", inbox, exc)
        else:
            if got.status == 200:
                # Answered from where the redirects led: the epochs are there too.
                inbox = inbox_url(got.url or inbox)
                epochs = parse_manifest(got.content, inbox)
            elif got.status not in (404, 410):
                got.check(inbox + "manifest.js.gz")
        if not epochs:
            # No manifest (or every epoch empty): the mirroring instructions list them.
            mirror_page = inbox + "_/text/mirror/"
            try:
                page = await port.listing(mirror_page)
            except PageMissing:
                raise ArchiveIndexError(
                    f"{inbox} is not a public-inbox: neither {inbox}manifest.js.gz nor"
                    f" {mirror_page} lists a git repository"
                ) from None
            epochs = dict.fromkeys(parse_mirror_page(page, inbox))
            if not epochs:
                raise ArchiveIndexError(
                    f"{inbox} is not a public-inbox: {mirror_page} gives no `git clone`"
                )
        units = []
        vouched = set()
        for epoch, fingerprint in sorted(
            epochs.items(), key=lambda e: -1 if e[0] is None else e[0]
        ):
            name = _unit(epoch)
            units.append(Unit(name, (_git_url(inbox, epoch),), grows=True, params={"epoch": epoch}))
            k = known.get(name)
            if fingerprint and k is not None and k.harvested and k.etag == fingerprint:
                vouched.add(name)
        return Listing(units, vouched=frozenset(vouched))

    async def harvest(self, port: Port, unit: Unit, known: Known | None, max_bytes: int) -> Harvest:
        url = unit.urls[0]
        epoch = unit.params.get("epoch")
        mirror = port.mirror_dir(_V1 + ".git" if epoch is None else f"git/{int(epoch)}.git")
        fetched = await fetch_mirror(port, url, mirror, max_bytes)
        status = 200 if fetched.packed else 304
        done = known is not None and known.harvested
        stop = known.tail_sha256 if done and known is not None else None
        base = (known.stop_offset or 0) if known is not None else 0
        counted = known.counted if known is not None else 0
        if fetched.head is None or fetched.head == stop:
            return Harvest(
                url=url,
                status=status,
                wire=fetched.wire,
                counted=counted if fetched.head else 0,
                stop_offset=base if fetched.head else 0,
                tail_sha256=stop if fetched.head else None,
                etag=fetched.fingerprint,
                closed=False,
            )
        events: list[tuple[str, str]] = []
        batch: list[RawMessage] = []
        with CommitLog(mirror) as log:
            await asyncio.to_thread(log.walk, fetched.head, stop)
            if log.rewound:
                events.append(
                    (
                        "changed",
                        f"{url}: commit {stop} is no longer in the history (rewritten):"
                        " read again from the first commit",
                    )
                )
                base, counted = 0, 0
            position, last = base, stop
            for first, end in log.batches(CHECKPOINT):
                if batch:
                    await port.checkpoint(unit.month, url, batch, position, last)
                    batch = []
                for change in await asyncio.to_thread(log.read, first, end):
                    position += 1
                    last = change.commit
                    if change.action == "added":
                        batch.append(RawMessage(position, change.raw))
                        counted += 1
                    elif change.action == "removed":
                        counted = max(0, counted - 1)
                        events.append(("removed", _removed(url, change)))
        return Harvest(
            url=url,
            status=status,
            wire=fetched.wire,
            messages=batch,
            counted=counted,
            stop_offset=position,
            tail_sha256=last,
            etag=fetched.fingerprint,
            closed=False,
            events=events,
        )


def _removed(url: str, change: Change) -> str:
    message = parse_message(change.raw)
    name = f"<{message.message_id}>" if message.message_id else f"a message ({message.key})"
    return f"{name} was removed from the archive by commit {change.commit} of {url}"
