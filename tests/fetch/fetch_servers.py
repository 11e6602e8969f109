"""Servers for the fetch tests, all on 127.0.0.1: a well-behaved aiohttp application, and
raw TCP servers that misbehave byte by byte (short bodies, resets, silence), which no
HTTP server library will do on request."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import ssl
import struct
import subprocess
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from aiohttp import web
from aiohttp.test_utils import TestServer

__all__ = ["Answer", "RawServer", "gzip_bomb", "raw_server", "reset", "self_signed", "serve"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@contextlib.asynccontextmanager
async def serve(handler: Handler, tls: ssl.SSLContext | None = None) -> AsyncIterator[str]:
    """An aiohttp server answering every path with `handler`; yields its base URL."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    server = TestServer(app, host="127.0.0.1", port=0)
    await server.start_server(ssl=tls)
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{server.port}"
    finally:
        await server.close()


class RawServer:
    """What a raw server saw, and the event that ends its hanging connections."""

    def __init__(self) -> None:
        self.base = ""
        self.requests: list[bytes] = []
        self.stop = asyncio.Event()


Answer = Callable[[asyncio.StreamWriter, RawServer], Awaitable[None]]


@contextlib.asynccontextmanager
async def raw_server(answer: Answer) -> AsyncIterator[RawServer]:
    """A TCP server that reads each request head, then lets `answer` write whatever it
    likes. Connections are closed when `answer` returns (unless it reset them)."""
    state = RawServer()
    handlers: set[asyncio.Task[None]] = set()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        handlers.add(task)
        try:
            state.requests.append(await reader.readuntil(b"\r\n\r\n"))
            await answer(writer, state)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client gave up first, as some tests make it
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    state.base = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        yield state
    finally:
        state.stop.set()
        server.close()
        await asyncio.gather(*handlers, return_exceptions=True)
        await server.wait_closed()


async def reset(writer: asyncio.StreamWriter) -> None:
    """Abort the connection with a TCP RST (linger 0), as a crashing server would."""
    await asyncio.sleep(0.05)  # let the client read what was sent first
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def gzip_bomb(size: int, block: int = 2**20) -> bytes:
    """A valid gzip stream of `size` zero bytes (a multiple of `block`), about 1000 times
    smaller, built without compressing `size` bytes: a block compressed with a full
    flush is independent of what precedes it, so it can be repeated."""
    assert size % block == 0
    count = size // block
    zeros = bytes(block)
    compressor = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    piece = compressor.compress(zeros) + compressor.flush(zlib.Z_FULL_FLUSH)
    final = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS).flush()
    crc = 0
    for _ in range(count):
        crc = zlib.crc32(zeros, crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    return header + piece * count + final + struct.pack("<II", crc, size & 0xFFFFFFFF)


def self_signed(folder: Path) -> ssl.SSLContext | None:
    """A server TLS context with a fresh self-signed certificate for 127.0.0.1, made with
    the openssl command (None when it is not installed)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        return None
    key, cert = folder / "key.pem", folder / "cert.pem"
    command = [
        *(openssl, "req", "-x509", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"),
        *("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"),
        *("-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)),
    ]
    subprocess.run(command, check=True, capture_output=True)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context
