"""A real HyperKitty on 127.0.0.1 for the tests: the `hyperkitty` package from PyPI.

scripts/test installs it in its own venv, `.venv-hyperkitty` (Django and a dozen Django
apps that Thresher has no business depending on); the tests only run it. The site is
`hyperkitty_site/` beside this file: Django with a SQLite file, HyperKitty under
`/archives/` as mailman-web mounts it.

There is no Mailman core. HyperKitty asks Mailman's REST API about a list and its
senders when it archives mail; the site runs in batch mode (`HYPERKITTY_BATCH_MODE`),
which skips those calls, its Mailman URL points at a loopback port nobody listens on,
and old mail is imported with `hyperkitty_import --no-sync-mailman`, which creates the
list in HyperKitty's own database with `created_at` = now: a list created today whose
archive holds earlier years, as after every Mailman 2 → 3 migration. Later mail is
posted to the archiver API (`/archives/api/mailman/archive`, the archiver key in the
Authorization header) the way Mailman core's mailman-hyperkitty plugin posts it.
Background tasks (django-q) run synchronously inside the request: no qcluster.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(__file__).resolve().parent / "hyperkitty_site"
PYTHON = ROOT / ".venv-hyperkitty" / "bin" / "python"
ARCHIVER_KEY = "thresher-archiver-key"  # as in hyperkitty_site/settings.py

_LOGGED = re.compile(r'"(GET|POST|HEAD) (\S+) HTTP/[\d.]+" (\d{3})')


def missing_reason() -> str | None:
    """Why HyperKitty cannot run here, or None when it can."""
    if not PYTHON.exists():
        return (
            f"HyperKitty is not installed: scripts/test makes {PYTHON.parent.parent.name}"
            " with pip install 'hyperkitty>=1.3,<1.4' (it needs PyPI)"
        )
    probe = subprocess.run(
        [str(PYTHON), "-c", "import hyperkitty, django"], capture_output=True, timeout=120
    )
    if probe.returncode != 0:
        return f"HyperKitty does not import in {PYTHON}: {probe.stderr.decode()[-300:]}"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class HyperKitty:
    """One HyperKitty site: its database in `data`, its server on a free loopback port."""

    def __init__(self, data: Path) -> None:
        self.data = data
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = data / "server.log"
        self._server: subprocess.Popen[bytes] | None = None
        self._barrier = 0
        self._seen: dict[str, int] = {}

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "DJANGO"))}
        return env | {
            "HK_DATA": str(self.data),
            "PYTHONPATH": str(SITE),
            "DJANGO_SETTINGS_MODULE": "settings",
        }

    def manage(self, *args: str) -> str:
        """Run a Django management command of the site; its output."""
        done = subprocess.run(
            [str(PYTHON), "-m", "django", *args],
            env=self._env(),
            cwd=self.data,
            capture_output=True,
            timeout=600,
        )
        output = done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")
        if done.returncode != 0:
            raise RuntimeError(f"manage {' '.join(args)} failed:\n{output[-3000:]}")
        return output

    def start(self) -> HyperKitty:
        self.manage("migrate", "--no-input", "-v0")
        with open(self.log_path, "wb") as log:
            self._server = subprocess.Popen(
                [str(PYTHON), "-m", "django", "runserver", "--noreload", f"127.0.0.1:{self.port}"],
                env=self._env(),
                cwd=self.data,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        started = time.monotonic()
        while True:
            if self._server.poll() is not None:
                raise RuntimeError(f"HyperKitty exited:\n{self.log_path.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{self.base}/archives/api/lists/", timeout=10):
                    return self
            except OSError:
                if time.monotonic() - started > 300:
                    self.stop()
                    raise RuntimeError("HyperKitty did not answer within 300 s") from None
                time.sleep(0.2)

    def stop(self) -> None:
        if self._server is not None:
            self._server.terminate()
            try:
                self._server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._server.kill()
                self._server.wait()
            self._server = None

    def list_url(self, address: str) -> str:
        return f"{self.base}/archives/list/{address}/"

    def import_mbox(self, address: str, mbox: bytes) -> str:
        """`hyperkitty_import` an mbox into `address`, creating the list (today) if new."""
        path = self.data / f"import-{uuid.uuid4().hex[:8]}.mbox"
        path.write_bytes(mbox)
        try:
            return self.manage("hyperkitty_import", "--no-sync-mailman", "-l", address, str(path))
        finally:
            path.unlink()

    def archive(self, address: str, raw: bytes) -> dict[str, Any]:
        """Post one message to the archiver API, as Mailman core does for new mail."""
        boundary = uuid.uuid4().hex
        body = (
            (
                f'--{boundary}\r\nContent-Disposition: form-data; name="mlist"\r\n\r\n{address}\r\n'
                f'--{boundary}\r\nContent-Disposition: form-data; name="message";'
                ' filename="message.eml"\r\nContent-Type: message/rfc822\r\n\r\n'
            ).encode()
            + raw
            + f"\r\n--{boundary}--\r\n".encode()
        )
        request = urllib.request.Request(
            f"{self.base}/archives/api/mailman/archive",
            data=body,
            headers={
                "Content-Type": f"multipart/form-data; boundary={boundary}",
                "Authorization": f"Token {ARCHIVER_KEY}",
            },
        )
        with urllib.request.urlopen(request, timeout=120) as answer:
            result: dict[str, Any] = json.loads(answer.read())
        return result

    def api(self, path: str) -> Any:
        with urllib.request.urlopen(f"{self.base}/archives/api/{path}", timeout=120) as answer:
            return json.loads(answer.read())

    def requests(self) -> list[tuple[str, str, int]]:
        """(method, target, status) of every request the server logged so far. A request
        of our own is made first and waited for in the log: the server logs a request
        after sending its answer, so a client may hold the answer a moment before."""
        self._barrier += 1
        mark = f"/archives/api/lists/?barrier={self._barrier}"
        with urllib.request.urlopen(self.base + mark, timeout=120):
            pass
        started = time.monotonic()
        while True:
            logged = [
                (m.group(1), m.group(2), int(m.group(3)))
                for m in _LOGGED.finditer(self.log_path.read_text(errors="replace"))
            ]
            if any(target == mark for _, target, _ in logged) or time.monotonic() - started > 60:
                return [r for r in logged if "barrier=" not in r[1]]
            time.sleep(0.05)

    def new_requests(self, substr: str) -> list[tuple[str, str, int]]:
        """The requests whose target contains `substr` since the last call for it."""
        found = [r for r in self.requests() if substr in r[1]]
        seen, self._seen[substr] = self._seen.get(substr, 0), len(found)
        return found[seen:]


def start_hyperkitty(data: Path) -> HyperKitty:
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    return HyperKitty(data).start()
