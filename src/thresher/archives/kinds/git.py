"""Git over the job's port: a mirror fetched incrementally, and the commits read from a stop sign.

What a git archive kind (public-inbox) needs, with dulwich doing the git:

- `fetch_mirror` brings a bare mirror (`Port.mirror_dir`) up to date with a remote
  repository over git's smart HTTP protocol. dulwich speaks the protocol (the ref
  advertisement, the want/have negotiation from what the mirror holds, side-band
  demultiplexing) and keeps the object store (thin packs completed, indexes written);
  its two requests — `GET info/refs?service=git-upload-pack` and `POST git-upload-pack`
  — are sent through the port like every other request of Thresher: robots.txt, the
  host's delay, private addresses refused unless allowed. dulwich is synchronous, so it
  runs in a thread, and each request it makes is handed to the event loop and awaited
  there; the pack is written to a temporary file as it arrives, never held in memory.
  A remote whose refs the mirror already has costs the `info/refs` request alone.
  Protocol version 0 is asked for: its advertisement is the refs themselves, so an
  unchanged repository needs no second request.
- `CommitLog` walks the first-parent history from a head back to the stop sign (a
  commit id), writing the ids to a temporary file (20 bytes a commit: an epoch of
  millions of commits costs no memory), then gives them back oldest first, a batch
  at a time, each commit read as what it did to the archive (`Change`): a message
  added, or one removed.

Nothing here writes the store; `thresher.archives.kinds.publicinbox` does, through the
port, in checkpoints.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import fcntl
import hashlib
import io
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal, TypeVar

from dulwich.client import AbstractHttpGitClient
from dulwich.diff_tree import CHANGE_DELETE, tree_changes
from dulwich.errors import GitProtocolError, HangupException, NotGitRepository
from dulwich.object_store import BaseObjectStore
from dulwich.objects import Blob, Commit, ObjectID, Tree
from dulwich.refs import Ref
from dulwich.repo import Repo

from ...errors import PermanentError
from .base import Got, PageMissing, Port

__all__ = ["Change", "CommitLog", "Fetched", "fetch_mirror", "fingerprint"]

_ADVERTISEMENT = "application/x-git-upload-pack-advertisement"
_LOCK = "thresher.lock"
_ID = 20  # bytes of a binary SHA-1
_HEAD = Ref(b"HEAD")


@dataclass(frozen=True)
class Fetched:
    """A mirror after a fetch: the commit its HEAD names (None: the remote has no
    commit yet), grokmirror's `fingerprint` of the remote's refs, the bytes received
    and whether a pack was asked for."""

    head: str | None
    fingerprint: str | None
    wire: int
    packed: bool


def fingerprint(refs: Mapping[Ref, ObjectID]) -> str | None:
    """What grokmirror's manifests (public-inbox's `manifest.js.gz`) give as a
    repository's fingerprint: the SHA-1 of `git show-ref`'s output, the refs but HEAD
    and peeled tags, sorted by name. None for a repository without refs."""
    lines = [
        sha + b" " + name + b"\n"
        for name, sha in sorted(refs.items())
        if name != b"HEAD" and not name.endswith(b"^{}")
    ]
    return hashlib.sha1(b"".join(lines)).hexdigest() if lines else None


class _Answer:
    """An answer as dulwich's HTTP client reads it (the part of urllib3's it uses)."""

    def __init__(self, got: Got, body: BinaryIO) -> None:
        self.status = got.status
        self.content_type = got.headers.get("content-type")
        self.redirect_location: str | None = None
        self._body = body

    def close(self) -> None:
        self._body.close()


class _Bridge:
    """dulwich's requests, made on the event loop through the port. `request` runs in
    dulwich's thread and blocks it until the loop has the answer."""

    def __init__(
        self, port: Port, loop: asyncio.AbstractEventLoop, max_bytes: int, spool: Path
    ) -> None:
        self.port = port
        self.loop = loop
        self.max_bytes = max_bytes
        self.spool = spool
        self.wire = 0
        self.posts = 0
        self.stopped = threading.Event()
        self._pending: concurrent.futures.Future[tuple[_Answer, Callable[[int], bytes]]] | None
        self._pending = None

    def request(
        self, url: str, headers: Mapping[str, str] | None, data: bytes | Iterator[bytes] | None
    ) -> tuple[_Answer, Callable[[int], bytes]]:
        if self.stopped.is_set():
            raise _Stopped
        body = data if data is None or isinstance(data, bytes) else b"".join(data)
        future = asyncio.run_coroutine_threadsafe(
            self._request(url, dict(headers or {}), body), self.loop
        )
        self._pending = future
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            raise _Stopped from None
        finally:
            self._pending = None

    def stop(self) -> None:
        """The job was cancelled: the request in flight is given up, and no other is made."""
        self.stopped.set()
        pending = self._pending
        if pending is not None:
            self.loop.call_soon_threadsafe(pending.cancel)

    async def _request(
        self, url: str, headers: dict[str, str], data: bytes | None
    ) -> tuple[_Answer, Callable[[int], bytes]]:
        body: BinaryIO
        if data is None:
            got = await self.port.get(url, headers)
            body = io.BytesIO(got.content)
        else:
            self.posts += 1
            body = tempfile.TemporaryFile(dir=self.spool, prefix="upload-pack-")  # noqa: SIM115
            try:
                got = await self.port.post(url, data, headers, self.max_bytes, into=body)
            except BaseException:
                body.close()
                raise
            body.seek(0)
        self.wire += got.wire
        if got.status != 200:
            body.close()
            if got.status in (404, 410):
                raise PageMissing(f"{url}: HTTP {got.status}: no git repository there")
            raise PermanentError(f"{url}: HTTP {got.status}")
        answer = _Answer(got, body)
        if data is None and answer.content_type != _ADVERTISEMENT:
            body.close()
            raise PermanentError(
                f"{url}: not git's smart HTTP (Content-Type {answer.content_type!r})"
            )
        return answer, body.read


class _Stopped(Exception):
    """The job stopped waiting for the fetch."""


class _PortClient(AbstractHttpGitClient):
    """dulwich's HTTP client with every request sent through the bridge."""

    def __init__(self, url: str, bridge: _Bridge) -> None:
        super().__init__(url, quiet=True)
        self._bridge = bridge

    def _http_request(  # type: ignore[override]
        self,
        url: str,
        headers: dict[str, str] | None = None,
        data: bytes | Iterator[bytes] | None = None,
        raise_for_status: bool = True,
    ) -> tuple[_Answer, Callable[[int], bytes]]:
        return self._bridge.request(url, headers, data)


async def fetch_mirror(port: Port, url: str, mirror: Path, max_bytes: int) -> Fetched:
    """Bring the bare repository `mirror` (made if missing) up to date with the one at
    `url`: its objects fetched, its refs made the remote's (HEAD too). A pack larger
    than `max_bytes` is an error."""
    bridge = _Bridge(port, asyncio.get_running_loop(), max_bytes, mirror)
    try:
        return await asyncio.to_thread(_fetch, url, mirror, bridge)
    except BaseException:
        bridge.stop()
        raise


@contextlib.contextmanager
def _locked(mirror: Path) -> Iterator[None]:
    # One writer per mirror: a job given up (its lease lost, its task cancelled) may
    # still be finishing in its thread when its retry starts.
    mirror.mkdir(parents=True, exist_ok=True)
    with open(mirror / _LOCK, "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _open(mirror: Path) -> Repo:
    try:
        return Repo(str(mirror))
    except NotGitRepository:
        return Repo.init_bare(str(mirror))


def _fetch(url: str, mirror: Path, bridge: _Bridge) -> Fetched:
    with _locked(mirror), _open(mirror) as repo:
        _tidy(repo)
        client = _PortClient(url, bridge)

        def wants(refs: Mapping[Ref, ObjectID], depth: int | None = None) -> list[ObjectID]:
            store = repo.object_store
            return sorted(
                {
                    sha
                    for name, sha in refs.items()
                    if not name.endswith(b"^{}") and sha not in store
                }
            )

        try:
            result = client.fetch("", repo, determine_wants=wants, protocol_version=0)
        except (GitProtocolError, HangupException) as exc:
            raise PermanentError(f"{url}: git: {exc}") from None
        refs = {k: v for k, v in result.refs.items() if v is not None}
        _mirror_refs(repo, refs, result.symrefs)
        head = repo.refs.follow(_HEAD)[1] if refs else None
    return Fetched(
        head.decode("ascii") if head is not None else None,
        fingerprint(refs),
        bridge.wire,
        bridge.posts > 0,
    )


def _mirror_refs(repo: Repo, refs: Mapping[Ref, ObjectID], symrefs: Mapping[Ref, Ref]) -> None:
    """The mirror's refs made the remote's, as `git fetch --mirror` leaves them."""
    remote = {k: v for k, v in refs.items() if k != _HEAD and not k.endswith(b"^{}")}
    for name in list(repo.refs.keys()):
        if name != _HEAD and name not in remote:
            del repo.refs[name]
    for name, sha in remote.items():
        if repo.refs.read_ref(name) != sha:
            repo.refs[name] = sha
    target = symrefs.get(_HEAD)
    if target is None and _HEAD in refs:
        # No symref advertised: HEAD names whichever branch is at its commit.
        target = next((n for n, s in sorted(remote.items()) if s == refs[_HEAD]), None)
    if target is not None and target in remote:
        repo.refs.set_symbolic_ref(_HEAD, target)


def _tidy(repo: Repo) -> None:
    """Remove what a fetch killed midway left (dulwich's temporary packs)."""
    repo.object_store.prune(grace_period=0)


# --- reading the commits -------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """What one commit did to the archive: `raw` a message `added`, or `removed`
    (public-inbox's `public-inbox-learn rm`, `-purge`: the removed message, as the
    commit names it), or `other` (a commit that touched no message)."""

    commit: str
    action: Literal["added", "removed", "other"]
    raw: bytes = b""


class CommitLog:
    """The commits of a mirror from a stop sign to a head, oldest first.

    `walk` follows the first parents from `head` back to `stop` (the last commit read
    before), or to the first commit when `stop` is None or not on that path (then
    `rewound` is true: the history was rewritten under us, as `public-inbox-purge`
    does). `batches(n)` then gives the commits after the stop sign, n at a time, read
    as `Change`s. The ids wait in a temporary file, not in memory. Its methods block:
    run them in a thread."""

    def __init__(self, mirror: Path) -> None:
        self.repo = Repo(str(mirror))
        self._ids: BinaryIO = tempfile.TemporaryFile(dir=mirror, prefix="commits-")  # noqa: SIM115
        self.count = 0
        self.rewound = False

    def close(self) -> None:
        self._ids.close()
        self.repo.close()

    def __enter__(self) -> CommitLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def walk(self, head: str, stop: str | None) -> int:
        """Follow `head`'s first parents back to `stop`; the commits after it."""
        store = self.repo.object_store
        target = stop.encode("ascii") if stop else None
        sha: bytes | None = head.encode("ascii")
        count = 0
        while sha is not None and sha != target:
            commit = _get(store, sha, Commit)
            self._ids.write(bytes.fromhex(sha.decode("ascii")))
            count += 1
            sha = commit.parents[0] if commit.parents else None
        self.rewound = target is not None and sha != target
        self.count = count
        return count

    def batches(self, size: int) -> Iterator[tuple[int, int]]:
        """The commits after the stop sign, oldest first, `size` at a time: (first,
        end) ranges, 0 the oldest, for `read`."""
        for first in range(0, self.count, size):
            yield first, min(self.count, first + size)

    def read(self, first: int, end: int) -> list[Change]:
        """Commits `first` to `end` (exclusive) after the stop sign, read."""
        # The file holds them newest first.
        self._ids.seek((self.count - end) * _ID)
        data = self._ids.read((end - first) * _ID)
        ids = [data[i : i + _ID].hex() for i in range(0, len(data), _ID)]
        return [self.change(sha) for sha in reversed(ids)]

    def change(self, sha: str) -> Change:
        store = self.repo.object_store
        commit = _get(store, sha.encode("ascii"), Commit)
        tree = _get(store, commit.tree, Tree)
        # public-inbox v2: each commit's tree is the message, `m`, or a removal, `d`.
        for name, action in ((b"m", "added"), (b"d", "removed")):
            if name in tree:
                _, blob = tree[name]
                return Change(sha, action, _get(store, blob, Blob).data)  # type: ignore[arg-type]
        # public-inbox v1: one file per message in a fan-out of directories; the commit
        # adds one, or removes one.
        parent = _get(store, commit.parents[0], Commit).tree if commit.parents else None
        for change in tree_changes(store, parent, commit.tree):
            if change.type == CHANGE_DELETE and change.old is not None and change.old.sha:
                return Change(sha, "removed", _get(store, change.old.sha, Blob).data)
            if change.new is not None and change.new.sha:
                return Change(sha, "added", _get(store, change.new.sha, Blob).data)
        return Change(sha, "other")


_T = TypeVar("_T", Commit, Tree, Blob)


def _get(store: BaseObjectStore, sha: bytes, kind: type[_T]) -> _T:
    try:
        obj = store[ObjectID(sha)]
    except KeyError:
        raise PermanentError(f"the mirror lacks object {sha.decode()}") from None
    if not isinstance(obj, kind):
        raise PermanentError(f"object {sha.decode()} is a {obj.type_name.decode()}")
    return obj
