"""Real public-inbox inboxes, made and fed by Debian's `public-inbox`, served by its own
`public-inbox-httpd` (WWW and git) and `public-inbox-nntpd` (NNTP) on 127.0.0.1.

Each `PublicInboxes` is one public-inbox installation of its own: a config file
(`PI_CONFIG`) and a home folder in a temporary directory. Inboxes are made by
`public-inbox-init` (v2 by default, so they have epochs; v1 on request; index level
`basic`: the overview NNTP needs, no Xapian; a `newsgroup` on request) and grown the
ways a list's archive grows: `public-inbox-mda` delivers a message as a mail server
would, `import_many` hands many to public-inbox's own importer in one process (what
`-mda` calls per message, without a Perl start-up per message: 300 messages in a second
instead of two minutes), `public-inbox-learn rm` removes one, as a moderator does, and
`new_epoch` begins the next epoch the way public-inbox does when the newest is full (its
`MultiGit::add_epoch`; it does so at a gigabyte, too much for a test).

`PublicInboxHTTPD` serves them all with `public-inbox-httpd` (the WWW interface and
git's smart HTTP, through `git http-backend`) on a socket bound here and inherited
(systemd's LISTEN_FDS), with Plack's access log — the server's own record of every
request — and a robots.txt the test may write. `NewsServer` serves an inbox's newsgroup
with `public-inbox-nntpd -W0` (one process) on a free port, plain and, when given a
certificate, over TLS.

`public-inbox` is installed by scripts/test (Debian's package, as root); without it
these tests skip and say so.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import sqlite3
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from thresher.archives.demo_mbox import render_mbox
from thresher.archives.demo_thread import Served

_TOOLS = (
    "public-inbox-init",
    "public-inbox-mda",
    "public-inbox-learn",
    "public-inbox-httpd",
    "public-inbox-nntpd",
    "git",
    "perl",
    "bash",
)

# public-inbox's WWW with an access log and a robots.txt the test controls.
_PSGI = r"""
use strict;
use warnings;
use PublicInbox::WWW;
use Plack::Builder;
my $www = PublicInbox::WWW->new;
$www->preload;
my $robots = $ENV{THRESHER_TEST_ROBOTS};
builder {
	enable 'AccessLog', format => '%m %U%q %>s';
	enable 'Head';
	mount '/robots.txt' => sub {
		open(my $fh, '<', $robots) or
			return [404, ['Content-Type' => 'text/plain'], ["none\n"]];
		local $/;
		my $text = <$fh>;
		[200, ['Content-Type' => 'text/plain'], [$text]];
	};
	mount '/' => sub { $www->call(@_) };
};
"""

# public-inbox's importer (InboxWritable::import_mbox), many messages in one process.
_IMPORT = r"""
use strict;
use PublicInbox::Config;
use PublicInbox::InboxWritable;
my $ibx = PublicInbox::Config->new->lookup_name($ARGV[0]) or die "no inbox $ARGV[0]\n";
$ibx = PublicInbox::InboxWritable->new($ibx);
open(my $fh, '<', $ARGV[1]) or die "$ARGV[1]: $!\n";
$ibx->import_mbox($fh, 'mboxrd');
"""

# What public-inbox's V2Writable does when the newest epoch is full.
_NEW_EPOCH = r"""
use strict;
use PublicInbox::MultiGit;
my $mg = PublicInbox::MultiGit->new($ARGV[0], 'all.git', 'git');
$mg->add_epoch($mg->git_epochs + 1);
"""


def missing_reason() -> str | None:
    """Why public-inbox cannot run here, or None when it can."""
    absent = [tool for tool in _TOOLS if shutil.which(tool) is None]
    if absent:
        return (
            f"public-inbox is not installed ({', '.join(absent)} missing): scripts/test"
            " installs Debian's public-inbox package as root"
        )
    return None


class PublicInboxes:
    """One public-inbox installation: its config (`PI_CONFIG`) and its inboxes."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.config = self.root / "config"
        home = self.root / "home"
        home.mkdir(exist_ok=True)
        self.env = {
            **os.environ,
            "PI_CONFIG": str(self.config),
            "HOME": str(home),
            "GIT_CONFIG_NOSYSTEM": "1",
        }
        self.inboxes: dict[str, Inbox] = {}

    def run(self, *args: str, stdin: bytes | None = None, **env: str) -> None:
        proc = subprocess.run(
            list(args),
            input=stdin,
            env={**self.env, **env},
            capture_output=True,
            timeout=300,
            check=False,
        )
        if proc.returncode != 0:
            raise AssertionError(
                f"{' '.join(args)} exited {proc.returncode}: {proc.stderr.decode(errors='replace')}"
            )

    def init(self, name: str, *, version: int = 2, newsgroup: str | None = None) -> Inbox:
        """A new inbox `name` (`public-inbox-init -V2`), for `NAME@example.org`, served
        over NNTP as `newsgroup` when given."""
        inbox = Inbox(self, name, version, newsgroup)
        self.run(
            "public-inbox-init",
            f"-V{version}",
            "-L",
            "basic",
            *(["--ng", newsgroup] if newsgroup else []),
            name,
            str(inbox.dir),
            f"http://127.0.0.1/{name}",
            inbox.address,
        )
        # No SpamAssassin here: every message delivered is archived.
        self.run("git", "config", "-f", str(self.config), "publicinboxmda.spamcheck", "none")
        self.inboxes[name] = inbox
        return inbox


class Inbox:
    def __init__(
        self, owner: PublicInboxes, name: str, version: int, newsgroup: str | None
    ) -> None:
        self.owner = owner
        self.name = name
        self.version = version
        self.newsgroup = newsgroup
        self.address = f"{name}@example.org"
        self.dir = owner.root / "inboxes" / name

    def deliver(self, raw: bytes) -> None:
        """One message, as the mail server hands it to `public-inbox-mda`."""
        self.owner.run(
            "public-inbox-mda", "--no-precheck", stdin=raw, ORIGINAL_RECIPIENT=self.address
        )

    def import_many(self, messages: Sequence[bytes]) -> None:
        """Many messages through public-inbox's own importer, in one process."""
        mbox = self.owner.root / f"{self.name}-incoming.mbox"
        mbox.write_bytes(render_mbox(list(messages), rd=True))
        try:
            self.owner.run("perl", "-e", _IMPORT, self.name, str(mbox))
        finally:
            mbox.unlink()

    def remove(self, raw: bytes) -> None:
        """`public-inbox-learn rm`: the message is removed from the inbox (not from the
        history: a commit records the removal)."""
        self.owner.run("public-inbox-learn", "rm", stdin=raw)

    def new_epoch(self) -> int:
        """Begin the next epoch, as public-inbox does when the newest is full; the
        mail delivered after goes there. Its number."""
        assert self.version == 2
        self.owner.run("perl", "-e", _NEW_EPOCH, str(self.dir))
        return max(self.epochs())

    def epochs(self) -> list[int]:
        return sorted(int(p.name[:-4]) for p in (self.dir / "git").glob("*.git"))

    def git_dirs(self) -> list[Path]:
        if self.version == 1:
            return [self.dir]
        return [self.dir / "git" / f"{n}.git" for n in self.epochs()]

    def message_ids(self) -> set[str]:
        """The Message-IDs the inbox holds, by public-inbox's own index of them (the
        msgmap every public-inbox interface numbers messages by)."""
        path = self.dir / "msgmap.sqlite3"
        if self.version == 1:
            path = self.dir / "public-inbox" / "msgmap.sqlite3"
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return {str(row[0]) for row in db.execute("SELECT mid FROM msgmap")}
        finally:
            db.close()

    def commits(self) -> int:
        """Commits in all the inbox's repositories (what a mirror reads)."""
        total = 0
        for git_dir in self.git_dirs():
            proc = subprocess.run(
                ["git", f"--git-dir={git_dir}", "rev-list", "--count", "--all"],
                capture_output=True,
                text=True,
                check=False,
            )
            total += int(proc.stdout.strip() or 0) if proc.returncode == 0 else 0
        return total


@dataclass(frozen=True)
class Logged:
    method: str
    path: str
    status: int


_LOG_LINE = re.compile(r"^(GET|POST|HEAD|PUT|DELETE|OPTIONS) (\S+) (\d{3})$")


class PublicInboxHTTPD(Served):
    """`public-inbox-httpd` serving `inboxes` on 127.0.0.1, with its access log."""

    def __init__(self, inboxes: PublicInboxes) -> None:
        self.inboxes = inboxes
        self.robots = inboxes.root / "robots.txt"
        self.log_path = inboxes.root / "httpd.log"
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._seen = 0

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path.lstrip('/')}"

    def start(self) -> PublicInboxHTTPD:
        psgi = self.inboxes.root / "thresher-test.psgi"
        psgi.write_text(_PSGI)
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        fd = listener.fileno()
        # The daemon takes inherited listeners from fd 3 on (LISTEN_FDS), for its own pid.
        moved = "" if fd == 3 else f"exec 3<&{fd} {fd}<&-; "
        script = f"{moved}LISTEN_PID=$$ LISTEN_FDS=1 exec public-inbox-httpd -W0 {psgi}"
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                ["bash", "-c", script],
                pass_fds=[fd],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env={**self.inboxes.env, "THRESHER_TEST_ROBOTS": str(self.robots)},
            )
        listener.close()
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(self.url("/robots.txt"), timeout=10):
                    break
            except urllib.error.HTTPError:
                break  # answered
            except OSError:
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    # Without its socket it may have bound a default address: stop it.
                    self.stop()
                    raise RuntimeError(f"public-inbox-httpd did not start: {self.log()}") from None
                time.sleep(0.05)
        self.reset_log()
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def reset_log(self) -> None:
        """Forget the requests so far: `requests` lists those made after this."""
        self._seen = self.log_path.stat().st_size

    def requests(self) -> list[Logged]:
        with open(self.log_path, "rb") as f:
            f.seek(self._seen)
            text = f.read().decode(errors="replace")
        found = []
        for line in text.splitlines():
            match = _LOG_LINE.match(line.strip())
            if match is not None:
                found.append(Logged(match.group(1), match.group(2), int(match.group(3))))
        return found

    def packs(self) -> list[Logged]:
        """The requests for a pack (git-upload-pack)."""
        return [r for r in self.requests() if r.path.endswith("/git-upload-pack")]

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        _stop(proc)


class NewsServer(Served):
    """`public-inbox-nntpd` serving an inbox's newsgroup on 127.0.0.1, plain and (with a
    certificate) over TLS; on a free port unless given one."""

    def __init__(
        self, inbox: Inbox, *, tls: tuple[Path, Path] | None = None, port: int = 0
    ) -> None:
        assert inbox.newsgroup is not None, "the inbox has no newsgroup"
        self.inbox = inbox
        self.group = inbox.newsgroup
        self.tls = tls
        self.fixed_port = port
        self.port = 0
        self.tls_port = 0
        self.log_path = inbox.owner.root / "nntpd.log"
        self._proc: subprocess.Popen[bytes] | None = None

    def url(self, scheme: str = "nntp") -> str:
        port = self.tls_port if scheme == "nntps" else self.port
        return f"{scheme}://127.0.0.1:{port}/{self.group}"

    def start(self) -> NewsServer:
        for _ in range(1 if self.fixed_port else 5):
            self.port = self.fixed_port or free_port()
            listen = ["-l", f"nntp://127.0.0.1:{self.port}"]
            if self.tls is not None:
                self.tls_port = free_port()
                cert, key = self.tls
                listen += ["-l", f"nntps://127.0.0.1:{self.tls_port}?cert={cert},key={key}"]
            log = self.log_path
            self._proc = subprocess.Popen(
                ["public-inbox-nntpd", "-W0", *listen, f"--stdout={log}", f"--stderr={log}"],
                env=self.inbox.owner.env,
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
        _stop(self._proc)
        self._proc = None

    def message_ids(self) -> set[str]:
        """The Message-IDs the server lists for its group (OVER over every article)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as s:
            f = s.makefile("rwb")
            f.readline()
            f.write(f"GROUP {self.group}\r\n".encode())
            f.flush()
            _, _, first, last, _ = f.readline().split()
            f.write(f"OVER {int(first)}-{int(last)}\r\nQUIT\r\n".encode())
            f.flush()
            assert f.readline().startswith(b"224")
            found = set()
            for line in iter(f.readline, b".\r\n"):
                found.add(line.split(b"\t")[4].decode().strip("<>"))
            return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is not None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
