"""A real news server for the tests: Debian's public-inbox, its `public-inbox-nntpd` on
127.0.0.1.

An inbox is made by `public-inbox-init` (v2, index level `basic`: the overview NNTP
needs, no Xapian) with a `newsgroup`, in a folder of its own with its own config file
(`PI_CONFIG`). Mail arrives the way public-inbox takes it: one message at a time by
`public-inbox-mda` (what a mail server's delivery runs), or many at once through
public-inbox's own importer (`PublicInbox::InboxWritable`, the code `public-inbox-mda`
calls, in one process: 300 messages in a second instead of two minutes), then
`public-inbox-index`. `public-inbox-learn rm` removes a message, as a moderator does.
The server runs on a free port with `-W0` (one process), plain and, when asked, over
TLS with a self-signed certificate made by `openssl`.

`CommandLog` sits between Thresher and the server: a TCP proxy on 127.0.0.1 that
passes every byte on and writes down each command Thresher sends (AUTHINFO PASS's
argument masked), so a test can say which commands a run sent. It can also demand
AUTHINFO USER/PASS before it passes commands on (RFC 4643; public-inbox has no
accounts), answer STARTTLS itself (RFC 4642, its own certificate) so that a test sees
what was sent inside TLS, and run a hook when a command arrives.

`public-inbox` is installed by scripts/test (Debian's package, as root); without it
these tests skip and say so.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType

TOOLS = (
    "public-inbox-init",
    "public-inbox-mda",
    "public-inbox-index",
    "public-inbox-learn",
    "public-inbox-nntpd",
)
GROUP = "test.dev"
ADDRESS = "dev@example.org"

# public-inbox's importer, driven the way public-inbox-mda drives it, for many files.
_IMPORT = r"""
use strict; use warnings;
use PublicInbox::Config; use PublicInbox::InboxWritable; use PublicInbox::Eml;
my ($name, $dir) = @ARGV;
my $ibx = PublicInbox::Config->new->lookup_name($name) or die "no inbox $name\n";
my $im = PublicInbox::InboxWritable->new($ibx)->importer(0);
opendir(my $dh, $dir) or die "$dir: $!\n";
for my $f (sort grep { /\.eml\z/ } readdir($dh)) {
    my $raw = do { open(my $fh, '<', "$dir/$f") or die "$f: $!\n"; local $/; <$fh> };
    $im->add(PublicInbox::Eml->new(\$raw)) or print STDERR "not added: $f\n";
}
$im->done;
"""


def missing_reason() -> str | None:
    """Why public-inbox cannot run here, or None when it can."""
    absent = [t for t in TOOLS if shutil.which(t) is None]
    if absent:
        return (
            f"public-inbox is not installed ({', '.join(absent)} missing): scripts/test"
            " installs Debian's public-inbox package as root"
        )
    if shutil.which("openssl") is None:
        return "openssl is not installed (the TLS tests make a certificate with it)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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


class Inbox:
    """One public-inbox inbox with a newsgroup, and what its tools do to it."""

    def __init__(self, root: Path, name: str = "dev") -> None:
        self.root = root.resolve()
        self.name = name
        self.dir = self.root / name
        self.config = self.root / "pi-config"
        (self.root / "home").mkdir(parents=True, exist_ok=True)
        self.env = {
            **os.environ,
            "PI_CONFIG": str(self.config),
            "HOME": str(self.root / "home"),
            "ORIGINAL_RECIPIENT": ADDRESS,
        }
        self._run(
            "public-inbox-init",
            "-V2",
            "-L",
            "basic",
            "--ng",
            GROUP,
            name,
            str(self.dir),
            f"http://example.org/{name}",
            ADDRESS,
        )
        # No spam filter (its default is SpamAssassin's spamc).
        self._run("git", "config", "-f", str(self.config), "publicinboxmda.spamcheck", "none")
        self._batches = 0

    def _run(self, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        proc = subprocess.run(
            args, input=stdin, env=self.env, capture_output=True, timeout=300, check=False
        )
        if proc.returncode != 0:
            raise AssertionError(f"{' '.join(args)} exited {proc.returncode}: {proc.stderr!r}")
        return proc

    def import_messages(self, messages: Sequence[bytes]) -> None:
        """Add `messages` in one go (public-inbox's importer), then index."""
        self._batches += 1
        folder = self.root / f"incoming-{self._batches}"
        folder.mkdir()
        for i, raw in enumerate(messages):
            (folder / f"{i:06d}.eml").write_bytes(raw)
        script = self.root / "import.pl"
        script.write_text(_IMPORT)
        self._run("perl", str(script), self.name, str(folder))
        self._run("public-inbox-index", str(self.dir))
        shutil.rmtree(folder)

    def deliver(self, raw: bytes) -> None:
        """Deliver one message as a mail server does (`public-inbox-mda`)."""
        self._run("public-inbox-mda", "--no-precheck", stdin=raw)

    def remove(self, raw: bytes) -> None:
        """Remove a message, as a moderator does (`public-inbox-learn rm`)."""
        self._run("public-inbox-learn", "rm", stdin=raw)


class NewsServer:
    """`public-inbox-nntpd` serving the inbox's group on 127.0.0.1, plain and (with a
    certificate) over TLS."""

    def __init__(self, inbox: Inbox, *, tls: tuple[Path, Path] | None = None) -> None:
        self.inbox = inbox
        self.tls = tls
        self.port = 0
        self.tls_port = 0
        self._proc: subprocess.Popen[bytes] | None = None

    def url(self, scheme: str = "nntp") -> str:
        port = self.tls_port if scheme == "nntps" else self.port
        return f"{scheme}://127.0.0.1:{port}/{GROUP}"

    def start(self) -> NewsServer:
        for _ in range(5):
            self.port = free_port()
            listen = ["-l", f"nntp://127.0.0.1:{self.port}"]
            if self.tls is not None:
                self.tls_port = free_port()
                cert, key = self.tls
                listen += ["-l", f"nntps://127.0.0.1:{self.tls_port}?cert={cert},key={key}"]
            log = self.inbox.root / "nntpd.log"
            self._proc = subprocess.Popen(
                ["public-inbox-nntpd", "-W0", *listen, f"--stdout={log}", f"--stderr={log}"],
                env=self.inbox.env,
                stdin=subprocess.DEVNULL,
            )
            if self._ready():
                return self
            self.stop()
        raise RuntimeError("public-inbox-nntpd did not start")

    def _ready(self) -> bool:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                return False  # the port was taken meanwhile: another one
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
                    s.recv(100)  # the greeting
                return True
            except OSError:
                time.sleep(0.05)
        return False

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None

    def message_ids(self) -> set[str]:
        """The Message-IDs the server lists for its group (OVER over every article)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as s:
            f = s.makefile("rwb")
            f.readline()
            f.write(f"GROUP {GROUP}\r\n".encode())
            f.flush()
            _, _, first, last, _ = f.readline().split()
            f.write(f"OVER {int(first)}-{int(last)}\r\nQUIT\r\n".encode())
            f.flush()
            assert f.readline().startswith(b"224")
            found = set()
            for line in iter(f.readline, b".\r\n"):
                found.add(line.split(b"\t")[4].decode().strip("<>"))
            return found

    def __enter__(self) -> NewsServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


Hook = Callable[[str], None]

_PASS = re.compile(r"^(AUTHINFO\s+PASS\s+).*$", re.IGNORECASE)


class CommandLog:
    """A TCP proxy to the news server that writes down every command it passes on."""

    def __init__(
        self,
        upstream_port: int,
        *,
        auth: tuple[str, str] | None = None,
        starttls: ssl.SSLContext | None = None,
        hook: Hook | None = None,
    ) -> None:
        self.upstream_port = upstream_port
        self.auth = auth
        self.starttls = starttls
        self.hook = hook
        self.port = 0
        self.commands: list[str] = []
        self.secret_seen: list[str] = []  # what came as AUTHINFO PASS, for the test to check
        self.tls_seen: list[bool] = []  # whether each command came inside TLS
        self.connections = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def url(self) -> str:
        return f"nntp://127.0.0.1:{self.port}/{GROUP}"

    def verbs(self) -> list[str]:
        return [c.split()[0].upper() for c in self.commands if c.strip()]

    def reset(self) -> None:
        self.commands.clear()
        self.tls_seen.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
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

    def start(self) -> CommandLog:
        ready = threading.Event()
        loop = asyncio.new_event_loop()

        async def serve() -> None:
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
            self.port = int(self._server.sockets[0].getsockname()[1])

        async def shut() -> None:
            assert self._server is not None
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await self._server.wait_closed()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.run_until_complete(serve())
            ready.set()
            loop.run_forever()
            loop.run_until_complete(shut())
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=run, name="nntp-proxy", daemon=True)
        self._thread.start()
        if not ready.wait(30):
            raise RuntimeError("the proxy did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(30)
        self._loop = self._thread = None

    def __enter__(self) -> CommandLog:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
