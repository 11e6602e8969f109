"""public-inbox's URLs, manifests and mirror pages, read without a server (the real
server is tests/archives/test_publicinbox_real.py's)."""

from __future__ import annotations

import asyncio
import fcntl
import gzip
import json
from collections.abc import Mapping
from pathlib import Path
from typing import BinaryIO, cast

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from thresher.archives.kinds import Got, Port
from thresher.archives.kinds.git import fetch_mirror, fingerprint
from thresher.archives.kinds.publicinbox import (
    PublicInbox,
    inbox_url,
    parse_manifest,
    parse_mirror_page,
)
from thresher.errors import PermanentError, SourceError
from thresher.fetch import Fetcher, FetchSettings
from thresher.sources.types import detect_type

LORE = "https://lore.kernel.org/lkml/"


@pytest.mark.parametrize(
    "pasted",
    [
        "https://lore.kernel.org/lkml",
        "https://lore.kernel.org/lkml/",
        "https://lore.kernel.org/lkml/?q=x",
        "https://lore.kernel.org/lkml/git/0.git",
        "https://lore.kernel.org/lkml/git/12.git/info/refs",
        "https://lore.kernel.org/lkml/0",
        "https://lore.kernel.org/lkml/_/text/mirror/",
        "https://lore.kernel.org/lkml/manifest.js.gz",
        "https://lore.kernel.org/lkml/new.atom",
        "https://lore.kernel.org/lkml/20240101120000.GA1234@example.org/",
        "https://lore.kernel.org/lkml/20240101120000.GA1234%40example.org/T/#u",
        "https://lore.kernel.org/lkml/20240101120000.GA1234@example.org/t.mbox.gz",
    ],
)
def test_any_page_of_an_inbox_names_the_inbox(pasted: str) -> None:
    assert inbox_url(pasted) == LORE


def test_an_inbox_below_a_prefix_keeps_it() -> None:
    assert inbox_url("https://example.org/lore/git/git/1.git") == "https://example.org/lore/git/"
    assert inbox_url("https://example.org/archives/dev/_/text/config/raw") == (
        "https://example.org/archives/dev/"
    )


@pytest.mark.parametrize("bad", ["https://lore.kernel.org/", "ftp://lore.kernel.org/lkml/"])
def test_a_url_without_an_inbox_is_refused(bad: str) -> None:
    with pytest.raises(SourceError):
        inbox_url(bad)


@pytest.mark.parametrize(
    "url",
    [
        LORE,
        "https://lore.kernel.org/netdev/20240101.abc@example.org/",
        "https://inbox.sourceware.org/gdb/",
        "https://example.org/inboxes/dev/git/0.git",
        "http://127.0.0.1:8080/dev/_/text/mirror/",
        "https://example.org/dev/manifest.js.gz",
    ],
)
def test_public_inbox_urls_are_detected(url: str) -> None:
    assert detect_type(url).name == "publicinbox"


@pytest.mark.parametrize(
    "url",
    [
        "https://lore.kernel.org/",
        "https://git.kernel.org/manifest.js.gz",  # grokmirror, not an inbox
        "https://example.org/lists/dev/",
        "https://lists.debian.org/debian-devel/2024/01/",
    ],
)
def test_other_urls_are_not_public_inboxes(url: str) -> None:
    assert not PublicInbox().detect(url)


def manifest(entries: dict[str, str | None]) -> bytes:
    body = {
        path: {"fingerprint": fp, "modified": 1705312800, "owner": None, "reference": None}
        for path, fp in entries.items()
    }
    return gzip.compress(json.dumps(body).encode())


def test_a_manifest_gives_the_inboxs_epochs_and_their_fingerprints() -> None:
    data = manifest(
        {
            "/lkml/git/0.git": "a" * 40,
            "/lkml/git/1.git": "b" * 40,
            "/lkml/git/10.git": "c" * 40,
            "/netdev/git/0.git": "d" * 40,  # the top-level manifest lists every inbox
            "/git/git/0.git": "e" * 40,
        }
    )
    assert parse_manifest(data, LORE) == {0: "a" * 40, 1: "b" * 40, 10: "c" * 40}
    assert parse_manifest(manifest({"/old": "f" * 40}), "https://x.org/old/") == {None: "f" * 40}
    assert parse_manifest(gzip.compress(b"{}"), LORE) == {}


@pytest.mark.parametrize(
    "data", [b"\x1f\x8bnot gzip", gzip.compress(b"[1, 2]", mtime=0), b"<html>"]
)
def test_a_manifest_that_is_not_one_is_an_index_error(data: bytes) -> None:
    from thresher.archives.kinds import ArchiveIndexError

    with pytest.raises(ArchiveIndexError, match="not a manifest"):
        parse_manifest(data, LORE)


# As public-inbox 1.9's WWW writes the mirroring instructions of a v2 inbox.
MIRROR_V2 = b"""<pre>public-inbox mirroring instructions

This public inbox may be cloned and mirrored by anyone:

  git clone --mirror <a
href="https://lore.kernel.org/lkml/0">https://lore.kernel.org/lkml/0</a> lkml/git/0.git
  git clone --mirror <a
href="https://lore.kernel.org/lkml/1">https://lore.kernel.org/lkml/1</a> lkml/git/1.git

  # If you have public-inbox 1.1+ installed, you may
  # initialize and index your mirror using the following commands:
  public-inbox-init -V2 \\
    lkml ./lkml <a
href="https://lore.kernel.org/lkml">https://lore.kernel.org/lkml</a> \\
    linux-kernel@vger.kernel.org
  public-inbox-index ./lkml
AGPL code for this site:
  git clone <a
href="http://7fh6tueqddpjyxjmgtdiueylzoqt6pt7hec3pukyptlmohoowvhde4yd.onion/public-inbox.git">x</a>
</pre>"""

MIRROR_V1 = b"""<pre>This public inbox may be cloned and mirrored by anyone:

  git clone --mirror <a
href="http://127.0.0.1:41177/v1">http://127.0.0.1:41177/v1</a>
</pre>"""


def test_the_mirror_page_gives_the_epochs_to_clone() -> None:
    assert parse_mirror_page(MIRROR_V2, LORE) == [0, 1]
    assert parse_mirror_page(MIRROR_V1, "http://127.0.0.1:41177/v1/") == [None]
    assert parse_mirror_page(b"<html>nothing</html>", LORE) == []


def test_the_fingerprint_is_grokmirrors() -> None:
    # sha1 of `git show-ref` on public-inbox's side: "<sha> refs/heads/master\n"
    refs = {
        b"HEAD": b"37438484cc8a15e2623ec80736cf6b5c6a7ac69c",
        b"refs/heads/master": b"37438484cc8a15e2623ec80736cf6b5c6a7ac69c",
    }
    assert fingerprint(refs) == "ead0e67252cf7c6942ed4d882ce9c584bbdb93b9"  # type: ignore[arg-type]
    assert fingerprint({}) is None


# --- the git fetch's requests, against a server that misbehaves ---------------------------


def _pkt(line: str) -> bytes:
    data = line.encode()
    return f"{len(data) + 4:04x}".encode() + data


SHA = "f045197c983d689fbd73366c3f8f8d03da14072d"
ADVERTISEMENT = (
    _pkt("# service=git-upload-pack\n")
    + b"0000"
    + _pkt(
        f"{SHA} HEAD\0multi_ack thin-pack side-band side-band-64k ofs-delta"
        " multi_ack_detailed symref=HEAD:refs/heads/master object-format=sha1 agent=git/2.39\n"
    )
    + _pkt(f"{SHA} refs/heads/master\n")
    + b"0000"
)


class _FetcherPort:
    """The part of a job's port a git fetch uses, on a plain Fetcher."""

    def __init__(self, fetcher: Fetcher) -> None:
        self.fetcher = fetcher

    async def get(
        self, url: str, headers: Mapping[str, str] | None = None, max_bytes: int | None = None
    ) -> Got:
        r = await self.fetcher.get(url, headers, max_body=max_bytes)
        return Got(r.status, {k.lower(): v for k, v in r.headers}, r.content, len(r.body))

    async def post(
        self,
        url: str,
        data: bytes,
        headers: Mapping[str, str] | None = None,
        max_bytes: int | None = None,
        into: BinaryIO | None = None,
    ) -> Got:
        r = await self.fetcher.post(url, data, headers, max_body=max_bytes, sink=into)
        return Got(r.status, {k.lower(): v for k, v in r.headers}, r.content, r.streamed)


def test_a_dumb_http_server_is_refused_and_a_cancelled_fetch_stops(tmp_path: Path) -> None:
    asked: list[str] = []
    posted = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        asked.append(f"{request.method} {request.path}")
        if request.path.startswith("/dumb/"):
            return web.Response(text=f"{SHA}\trefs/heads/master\n")  # text/plain: dumb
        if request.method == "GET":
            return web.Response(
                body=ADVERTISEMENT, content_type="application/x-git-upload-pack-advertisement"
            )
        posted.set()
        await asyncio.sleep(3600)  # a pack that never comes
        return web.Response()

    async def body() -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handler)
        server = TestServer(app, host="127.0.0.1", port=0)
        await server.start_server()
        base = f"http://127.0.0.1:{server.port}"
        try:
            async with Fetcher(FetchSettings(allow_private=True)) as f:
                await attempts(base, f)
        finally:
            await server.close()

    async def attempts(base: str, f: Fetcher) -> None:
        port = cast(Port, _FetcherPort(f))
        with pytest.raises(PermanentError, match="not git's smart HTTP"):
            await fetch_mirror(port, f"{base}/dumb/0.git", tmp_path / "dumb.git", 2**20)
        task = asyncio.create_task(
            fetch_mirror(port, f"{base}/smart/0.git", tmp_path / "smart.git", 2**20)
        )
        await asyncio.wait_for(posted.wait(), 60)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The thread gave up too: the mirror's lock is free, and nothing more was asked.
        lock = tmp_path / "smart.git" / "thresher.lock"
        for _ in range(600):
            with open(lock, "a+b") as held:
                try:
                    fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    pass
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the fetch's thread still holds the mirror")

    asyncio.run(body())
    assert asked == [
        "GET /dumb/0.git/info/refs",
        "GET /smart/0.git/info/refs",
        "POST /smart/0.git/git-upload-pack",
    ]
