"""A real news server for the tests: Debian's public-inbox, its `public-inbox-nntpd` on
127.0.0.1 (public_inbox.py: the inbox, its importer and the server).

`news_inbox` makes an inbox with the newsgroup the tests read. `CommandLog` sits between
Thresher and the server: a TCP proxy on 127.0.0.1 that passes every byte on and writes
down each command Thresher sends (AUTHINFO PASS's argument masked), so a test can say
which commands a run sent. It can also demand AUTHINFO USER/PASS before it passes
commands on (RFC 4643; public-inbox has no accounts), answer STARTTLS itself (RFC 4642,
its own certificate) so that a test sees what was sent inside TLS, and run a hook when a
command arrives. `make_certificate` makes a self-signed certificate with `openssl`.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import ssl
import subprocess
from collections.abc import Callable
from pathlib import Path

import public_inbox
from public_inbox import Inbox, NewsServer, PublicInboxes
from thresher.archives.demo_thread import ThreadedServer

__all__ = [
    "GROUP",
    "CommandLog",
    "Inbox",
    "NewsServer",
    "make_certificate",
    "missing_reason",
    "news_inbox",
]

GROUP = "test.dev"


def missing_reason() -> str | None:
    """Why public-inbox cannot run here, or None when it can."""
    reason = public_inbox.missing_reason()
    if reason is None and shutil.which("openssl") is None:
        return "openssl is not installed (the TLS tests make a certificate with it)"
    return reason


def news_inbox(root: Path) -> Inbox:
    """An inbox `dev` served as the newsgroup `GROUP`, in an installation of its own."""
    return PublicInboxes(root).init("dev", newsgroup=GROUP)


def make_certificate(folder: Path, name: str = "cert") -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and localhost, and its key."""
    cert, key = folder / f"{name}.pem", folder / f"{name}.key"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


Hook = Callable[[str], None]

_PASS = re.compile(r"^(AUTHINFO\s+PASS\s+).*$", re.IGNORECASE)


class CommandLog(ThreadedServer):
    """A TCP proxy to the news server that writes down every command it passes on."""

    thread_name = "nntp-proxy"

    def __init__(
        self,
        upstream_port: int,
        *,
        auth: tuple[str, str] | None = None,
        starttls: ssl.SSLContext | None = None,
        hook: Hook | None = None,
    ) -> None:
        super().__init__()
        self.upstream_port = upstream_port
        self.auth = auth
        self.starttls = starttls
        self.hook = hook
        self.port = 0
        self.commands: list[str] = []
        self.secret_seen: list[str] = []  # what came as AUTHINFO PASS, for the test to check
        self.tls_seen: list[bool] = []  # whether each command came inside TLS
        self.connections = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def url(self) -> str:
        return f"nntp://127.0.0.1:{self.port}/{GROUP}"

    def verbs(self) -> list[str]:
        return [c.split()[0].upper() for c in self.commands if c.strip()]

    def reset(self) -> None:
        self.commands.clear()
        self.tls_seen.clear()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        authed = self.auth is None
        in_tls = False

        async def down() -> None:
            # The server's answers, passed on as they come (a STARTTLS swaps the writer).
            while data := await up_reader.read(65536):
                writer.write(data)
                await writer.drain()

        pump = asyncio.create_task(down())
        try:
            while line := await reader.readline():
                text = line.decode("utf-8", "replace").rstrip("\r\n")
                self.commands.append(_PASS.sub(r"\1***", text))
                self.tls_seen.append(in_tls)
                if self.hook is not None:
                    await asyncio.to_thread(self.hook, text)
                verb = text.split(" ", 1)[0].upper()
                if self.starttls is not None and verb == "CAPABILITIES":
                    # Answer for the server, adding STARTTLS (before TLS only).
                    caps = "101 Capability list:\r\nVERSION 2\r\nREADER\r\nOVER\r\n"
                    caps += "" if in_tls else "STARTTLS\r\n"
                    writer.write((caps + "AUTHINFO USER\r\n.\r\n").encode())
                    await writer.drain()
                    continue
                if self.starttls is not None and verb == "STARTTLS" and not in_tls:
                    writer.write(b"382 Continue with TLS negotiation\r\n")
                    await writer.drain()
                    pump.cancel()
                    await writer.start_tls(self.starttls)
                    in_tls = True
                    pump = asyncio.create_task(down())
                    continue
                if not authed:
                    reply = self._auth(text)
                    if reply is not None:
                        authed = reply.startswith("281")
                        writer.write(reply.encode() + b"\r\n")
                        await writer.drain()
                        continue
                up_writer.write(line)
                await up_writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            pump.cancel()
            up_writer.close()
            writer.close()
            self._tasks.discard(task)

    def _auth(self, text: str) -> str | None:
        """The answer to a command before authentication, or None to pass it on."""
        assert self.auth is not None
        words = text.split()
        verb = " ".join(words[:2]).upper()
        if verb == "AUTHINFO USER":
            self._user = words[2] if len(words) > 2 else ""
            return "381 Password required"
        if verb == "AUTHINFO PASS":
            given = text.split(None, 2)[2] if len(words) > 2 else ""
            self.secret_seen.append(given)
            if (getattr(self, "_user", None), given) == self.auth:
                return "281 Authentication accepted"
            return "481 Authentication failed"
        if words and words[0].upper() in ("CAPABILITIES", "QUIT", "MODE"):
            return None
        return "480 Authentication required"

    async def _serve(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def _shutdown(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()
