"""A hostile server on loopback addresses, and a way to run `thresher` against it and
measure what that cost (peak RSS, seconds), for the tests of tests/hostile and for
measure.py, which prints the same probes' figures for any version of the code.

The server runs in a thread of its own, so the `thresher` child processes and the
test's own event loop alike can use it. Each host is a loopback address (127.0.0.1,
127.0.0.2 …, all of 127/8 is loopback on Linux) on one port; `routes` maps a path to an
aiohttp handler, and `raw` serves a TCP answer written byte by byte (what no HTTP
server library does on request: headers at one byte a second).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiohttp import web

__all__ = [
    "Hostile",
    "Probe",
    "deflate_bomb",
    "gzip_bomb",
    "gzip_members",
    "hostile_fixture",
    "run_thresher",
]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
RawAnswer = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def deflate_bomb(size: int, byte: bytes = b"\0", block: int = 2**20) -> tuple[bytes, int]:
    """A raw deflate stream (not final) of `size` bytes of `byte`, without compressing
    `size` bytes: a block compressed with a full flush is independent of what precedes
    it, so it can be repeated. Returns it and the CRC-32 of what it decodes to."""
    assert size % block == 0
    data = byte * block
    compressor = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    piece = compressor.compress(data) + compressor.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(size // block):
        crc = zlib.crc32(data, crc)
    return piece * (size // block), crc


def gzip_bomb(size: int, byte: bytes = b"\0") -> bytes:
    """A valid gzip stream of `size` bytes of `byte` (a multiple of 1 MiB), about 1000
    times smaller."""
    body, crc = deflate_bomb(size, byte)
    final = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS).flush()
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    return header + body + final + struct.pack("<II", crc, size & 0xFFFFFFFF)


def gzip_members(total: int, last: bytes = b"") -> bytes:
    """About `total` bytes of empty gzip members (20 bytes each), then `last` gzipped."""
    import gzip

    empty = gzip.compress(b"", mtime=0)
    return empty * (total // len(empty)) + gzip.compress(last, mtime=0)


class Hostile:
    """Serves `routes` (path → handler) on `hosts` loopback addresses, and raw TCP
    answers (`raw`), from a thread. Counts the requests of each path."""

    def __init__(self, hosts: int = 1) -> None:
        self.port = _free_port()
        self.ips = [f"127.0.0.{i + 1}" for i in range(hosts)]
        self.routes: dict[str, Handler] = {}
        self.hits: Counter[str] = Counter()
        self._raw: list[asyncio.Server] = []
        self._raw_tasks: set[asyncio.Task[None]] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None

    def url(self, path: str, host: int = 0) -> str:
        return f"http://{self.ips[host]}:{self.port}{path}"

    def raw(self, answer: RawAnswer) -> str:
        """Serve `answer` on a TCP port of its own (127.0.0.1); its base URL."""

        async def start() -> str:
            server = await asyncio.start_server(self._raw_handler(answer), "127.0.0.1", 0)
            self._raw.append(server)
            return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"

        return asyncio.run_coroutine_threadsafe(start(), self._loop).result(10)

    def __enter__(self) -> Hostile:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        for ip in self.ips:
            await web.TCPSite(self._runner, ip, self.port).start()

    async def _stop(self) -> None:
        for server in self._raw:
            server.close()
        for task in self._raw_tasks:
            task.cancel()
        await asyncio.gather(*self._raw_tasks, return_exceptions=True)
        for server in self._raw:
            await server.wait_closed()
        if self._runner is not None:
            await self._runner.cleanup()

    def _raw_handler(self, answer: RawAnswer) -> Callable[..., Awaitable[None]]:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            self._raw_tasks.add(task)
            try:
                await reader.readuntil(b"\r\n\r\n")
                await answer(reader, writer)
            except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
                pass
            finally:
                writer.close()
                self._raw_tasks.discard(task)

        return handle

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.hits[request.path] += 1
        handler = self.routes.get(request.path)
        if handler is None:
            if request.path == "/robots.txt":
                return web.Response(status=404)
            return web.Response(status=404, text="not here")
        return await handler(request)


@pytest.fixture(name="hostile")
def hostile_fixture() -> Iterator[Hostile]:
    """`hostile`: a server on 16 loopback hosts (import this into a test module)."""
    with Hostile(hosts=16) as server:
        yield server


@dataclass
class Probe:
    """What one `thresher` command did: exit code, output, time, peak memory."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    rss_mib: float
    killed: bool  # still running at the timeout: killed
    term_seconds: float | None = None  # from SIGTERM to the end, if one was sent

    def outcome(self) -> str:
        if self.killed:
            return f"killed after {self.seconds:.0f} s"
        out = self.stdout.strip().splitlines()
        if out and out[-1].startswith("{"):
            last = out[-1]
        else:
            lines = (self.stderr.strip() or self.stdout.strip()).splitlines()
            last = lines[-1] if lines else ""
        return f"exit {self.returncode}: {last[:300]}"


# Runs the command as its child and writes its exit status and peak RSS (KiB) to the
# file named first. A child's ru_maxrss counts the memory of the process it was forked
# from (Linux keeps the larger of the old and the new at exec), so the command is not
# started from the test's process, which holds the hostile bodies, but from this small
# one. SIGTERM is passed on to the command; SIGUSR1 kills it (at the timeout).
_WRAPPER = """
import os, resource, signal, subprocess, sys
proc = subprocess.Popen(sys.argv[2:])
signal.signal(signal.SIGTERM, lambda *_: proc.send_signal(signal.SIGTERM))
signal.signal(signal.SIGUSR1, lambda *_: proc.kill())
code = proc.wait()
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
with open(sys.argv[1], "w") as out:
    out.write(f"{code} {peak}")
"""


def run_thresher(
    home: Path,
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 120,
    term_after: float | None = None,
    term_when: Callable[[str], bool] | None = None,
    src: str | None = None,
    code: str | None = None,
) -> Probe:
    """Run `thresher ARGS…` with THRESHER_HOME=`home` in a child process, and measure
    its peak RSS (see `_WRAPPER`). SIGTERM is sent `term_after` seconds after
    `term_when(standard error so far)` is true (or after the start). `src`: a folder put
    first on PYTHONPATH (another version's code). `code`: run this Python code instead
    of `thresher`, with ARGS as its arguments."""
    environ = {**os.environ, "THRESHER_HOME": str(home)}
    environ.pop("THRESHER_DB", None)
    environ.update(env or {})
    if src is not None:
        environ["PYTHONPATH"] = src + os.pathsep + environ.get("PYTHONPATH", "")
    with (
        tempfile.TemporaryFile() as out,
        tempfile.NamedTemporaryFile() as err,
        tempfile.NamedTemporaryFile() as result,
    ):
        started = time.monotonic()
        command = [sys.executable, *(("-c", code) if code else ("-m", "thresher")), *args]
        proc = subprocess.Popen(
            [sys.executable, "-c", _WRAPPER, result.name, *command],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=environ,
            start_new_session=True,  # killed as a group at the timeout
        )
        killed = threading.Event()
        ended = threading.Event()
        termed: list[float] = []

        def watch() -> None:
            if term_when is not None:
                while not ended.wait(0.1):
                    if term_when(Path(err.name).read_text("utf-8", "replace")):
                        break
            if not ended.wait(term_after or 0):
                termed.append(time.monotonic())
                proc.send_signal(signal.SIGTERM)

        def kill() -> None:
            killed.set()
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGUSR1)  # the wrapper still says the peak RSS
                if not ended.wait(10):
                    os.killpg(proc.pid, signal.SIGKILL)

        timer = threading.Timer(timeout, kill)
        timer.start()
        watcher = None
        if term_after is not None or term_when is not None:
            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
        try:
            proc.wait()
        finally:
            ended.set()
            timer.cancel()
            if watcher is not None:
                watcher.join()
        finished = time.monotonic()
        code, peak = (Path(result.name).read_text() or "-9 0").split()
        out.seek(0)
        err.seek(0)
        return Probe(
            args=args,
            returncode=int(code),
            stdout=out.read().decode("utf-8", "replace"),
            stderr=err.read().decode("utf-8", "replace"),
            seconds=finished - started,
            rss_mib=int(peak) / 1024,
            killed=killed.is_set(),
            term_seconds=finished - termed[0] if termed else None,
        )
