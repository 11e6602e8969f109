"""NNTP sessions (`thresher.fetch.news`): news URLs, time limits and cancellation against
a server that stays silent, and one connection per news host — in a process, and across
workers sharing a PostgreSQL store — against Debian's public-inbox-nntpd."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import new_pg_database
from nntp_server import GROUP, NewsServer, missing_reason, news_inbox
from thresher.clock import SystemClock
from thresher.errors import HostBusy, PermanentError, SourceError, TransientError
from thresher.fetch.leases import HostLeases
from thresher.fetch.news import NewsAddress, NewsHosts, NewsSettings, news_url
from thresher.store.aio import AsyncStore


@pytest.mark.parametrize(
    ("url", "kept", "address", "group"),
    [
        ("nntp://News.Example.org/comp.lang.python", None, ("news.example.org", 119, False), None),
        ("news://news.example.org:119/a.b", "nntp://news.example.org/a.b", None, "a.b"),
        ("nntp://h:1190/a.b/123", "nntp://h:1190/a.b", ("h", 1190, False), "a.b"),
        ("nntps://h/a.b", "nntps://h/a.b", ("h", 563, True), "a.b"),
        ("snews://h:563/a.b", "nntps://h/a.b", ("h", 563, True), "a.b"),
        ("nntp://[::1]:9/g", "nntp://[::1]:9/g", ("::1", 9, False), "g"),
        ("nntp://h/gmane.comp.%70ython", "nntp://h/gmane.comp.python", None, "gmane.comp.python"),
    ],
)
def test_news_urls_are_checked_and_kept_in_one_form(
    url: str, kept: str | None, address: tuple[str, int, bool] | None, group: str | None
) -> None:
    where, name, normal = news_url(url)
    if kept is not None:
        assert normal == kept
    if address is not None:
        assert (where.host, where.port, where.tls) == address
    if group is not None:
        assert name == group


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://h/g", "nntp://"),
        ("nntp:///g", "needs a host"),
        ("nntp://h/", "one newsgroup"),
        ("nntp://h/comp.*", "one newsgroup"),
        ("news://h/<id@example.org>", "one newsgroup"),
        ("nntp://h/a/b/c", "one newsgroup"),
        ("nntp://h:x/g", "bad port"),
        ("nntp://alice:s3cret@h/g", "takes no user or password"),
    ],
)
def test_bad_news_urls_say_why(url: str, says: str) -> None:
    with pytest.raises(SourceError, match=says) as info:
        news_url(url)
    assert "s3cret" not in str(info.value)


def test_user_and_password_cannot_carry_a_command() -> None:
    with pytest.raises(SourceError, match="password"):
        NewsSettings(user="u", password="pw\r\nQUIT")


class Silent:
    """A peer that accepts connections, greets and then never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = int(self.sock.getsockname()[1])
        self.conns: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.sendall(b"200 ready\r\n")
            self.conns.append(conn)

    def close(self) -> None:
        # shutdown(2) wakes the accepting thread; close alone would leave it waiting.
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        for c in self.conns:
            c.close()
        self._thread.join(5)


@pytest.fixture
def silent() -> Iterator[Silent]:
    peer = Silent()
    yield peer
    peer.close()


def _threads() -> int:
    return sum(t.name.startswith("thresher-nntp") for t in threading.enumerate())


def test_a_silent_server_times_out_at_the_read_timeout(silent: Silent) -> None:
    async def go() -> None:
        hosts = NewsHosts(SystemClock())
        settings = NewsSettings(allow_private=True, read_timeout=0.3, delay=0)
        started = time.monotonic()
        with pytest.raises(TransientError, match=r"silent for 0\.3 s after connecting"):
            async with hosts.session(NewsAddress("127.0.0.1", silent.port, False), settings):
                pass
        assert time.monotonic() - started < 10

    asyncio.run(go())


def test_a_cancelled_session_ends_its_thread_at_once(silent: Silent) -> None:
    """A job cancelled (SIGTERM past the grace period) does not leave its thread waiting
    for the read timeout: the socket is shut down under it."""

    async def go() -> float:
        hosts = NewsHosts(SystemClock())
        settings = NewsSettings(allow_private=True, read_timeout=60, delay=0)

        async def use() -> None:
            async with hosts.session(NewsAddress("127.0.0.1", silent.port, False), settings):
                pass

        task = asyncio.create_task(use())
        while not silent.conns:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)
        task.cancel()
        started = time.monotonic()
        with pytest.raises(asyncio.CancelledError):
            await task
        while _threads():
            await asyncio.sleep(0.01)
            assert time.monotonic() - started < 10, "the thread still waits"
        return time.monotonic() - started

    assert asyncio.run(go()) < 10


def test_a_private_address_is_refused_before_connecting(silent: Silent) -> None:
    async def go() -> None:
        hosts = NewsHosts(SystemClock())
        with pytest.raises(
            PermanentError,
            match=r"^nntp://127\.0\.0\.1:\d+: refused: loopback address 127\.0\.0\.1",
        ):
            async with hosts.session(
                NewsAddress("127.0.0.1", silent.port, False), NewsSettings(delay=0)
            ):
                pass

    asyncio.run(go())
    assert silent.conns == []


def test_a_name_is_connected_to_at_the_address_that_was_checked(silent: Silent) -> None:
    """The name is resolved once, by the guarded cache; the connection goes to that
    address, so a second answer of the name (DNS rebinding) is never used."""
    answers = iter([["127.0.0.1"], ["10.0.0.1"]])
    asked: list[str] = []

    async def lookup(host: str) -> list[str]:
        asked.append(host)
        return next(answers)

    async def go() -> None:
        hosts = NewsHosts(SystemClock(), lookup=lookup)
        settings = NewsSettings(allow_private=True, read_timeout=0.3, delay=0)
        with pytest.raises(TransientError, match="silent"):
            async with hosts.session(NewsAddress("news.test", silent.port, False), settings):
                pass

    asyncio.run(go())
    assert asked == ["news.test"]
    assert len(silent.conns) == 1


needs_public_inbox = pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")


@pytest.fixture
def news(tmp_path: Path) -> Iterator[NewsServer]:
    inbox = news_inbox(tmp_path / "pi")
    inbox.import_many(
        [f"From: a@x\nSubject: {i}\nMessage-ID: <{i}@x>\n\nbody\n".encode() for i in range(3)]
    )
    with NewsServer(inbox) as server:
        yield server


@needs_public_inbox
def test_one_connection_per_host_in_a_process_and_the_delay_between(news: NewsServer) -> None:
    async def go() -> list[tuple[str, int, float]]:
        hosts = NewsHosts(SystemClock())
        address = NewsAddress("127.0.0.1", news.port, False)
        settings = NewsSettings(allow_private=True, delay=0.3)
        seen: list[tuple[str, int, float]] = []

        async def use(i: int) -> None:
            async with hosts.session(address, settings) as session:
                seen.append(("open", i, time.monotonic()))
                await session.group(GROUP)
                await asyncio.sleep(0.2)
                seen.append(("close", i, time.monotonic()))

        await asyncio.gather(use(1), use(2))
        return seen

    seen = asyncio.run(go())
    assert [(e, i) for e, i, _ in seen] in (
        [("open", 1), ("close", 1), ("open", 2), ("close", 2)],
        [("open", 2), ("close", 2), ("open", 1), ("close", 1)],
    )
    assert seen[2][2] - seen[1][2] >= 0.3  # the host's delay after the first session


@needs_public_inbox
def test_a_host_busy_longer_than_max_wait_hands_the_job_back(news: NewsServer) -> None:
    async def go() -> None:
        hosts = NewsHosts(SystemClock())
        address = NewsAddress("127.0.0.1", news.port, False)
        settings = NewsSettings(allow_private=True, delay=0, max_wait=0.2)
        async with hosts.session(address, settings):
            with pytest.raises(HostBusy, match="another job has its connection"):
                async with hosts.session(address, settings):
                    pass

    asyncio.run(go())


@needs_public_inbox
def test_workers_of_a_postgresql_store_take_turns_on_a_news_host(
    news: NewsServer, pg_admin_url: str
) -> None:
    url = new_pg_database(pg_admin_url)

    async def go() -> None:
        store = await AsyncStore(url, 2).open()
        try:
            a = NewsHosts(SystemClock(), HostLeases(store, "worker-a"))
            b = NewsHosts(SystemClock(), HostLeases(store, "worker-b"))
            address = NewsAddress("127.0.0.1", news.port, False)
            settings = NewsSettings(allow_private=True, delay=0, max_wait=0.3)
            async with a.session(address, settings) as session:
                # Extended while it lasts: the hold runs out only if the worker stops.
                assert session.held_until is not None
                session.held_until = time.time()  # as if most of the hold had gone by
                await session.group(GROUP)
                assert session.held_until > time.time() + 60
                with pytest.raises(HostBusy, match="another worker has its connection"):
                    async with b.session(address, settings):
                        pass
            async with b.session(address, settings) as session:
                assert (await session.group(GROUP))[2] == 3
            rows = await store.run(lambda tx: tx.all("held_host_leases", now=0))
            assert rows == []
        finally:
            await store.close()

    asyncio.run(go())
