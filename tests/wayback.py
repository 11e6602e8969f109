"""pywb for the replay tests: its commands, and its `wayback` server on a free port.

pywb pins old releases of several packages (werkzeug, redis, webassets…), so scripts/test
installs it in a virtualenv of its own, ``.venv-pywb`` at the top of the checkout
(``THRESHER_PYWB_VENV`` names another). Nothing is downloaded while the tests run: without
that virtualenv the tests that need it skip, saying so (under CI they fail instead).
"""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["Reply", "free_port", "get", "pywb_bin", "wayback"]

VENV = Path(os.environ.get("THRESHER_PYWB_VENV") or Path(__file__).parents[1] / ".venv-pywb")


@pytest.fixture(scope="session")
def pywb_bin() -> Path:
    """The ``bin`` folder of the virtualenv with pywb (``wayback``, ``wb-manager`` …)."""
    if not (VENV / "bin" / "wayback").exists():
        why = f"pywb is not installed in {VENV}: scripts/test installs it"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    return VENV / "bin"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Reply:
    status: int
    headers: Mapping[str, str]  # names lowercased
    body: bytes


def get(url: str, **headers: str) -> Reply:
    """GET ``url`` without following redirects (a replayed redirect is what is checked)."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.netloc, timeout=30)
    try:
        conn.request("GET", parts.path + (f"?{parts.query}" if parts.query else ""), None, headers)
        resp = conn.getresponse()
        return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
    finally:
        conn.close()


@contextmanager
def wayback(bin_dir: Path, cwd: Path, *, port: int | None = None) -> Iterator[str]:
    """Run ``wayback`` in ``cwd`` (where its config.yaml or collections/ are) until the
    block ends; yields its base URL, ``http://127.0.0.1:PORT``."""
    port = port or free_port()
    log_path = cwd / "wayback.log"
    with open(log_path, "wb") as log:
        server = subprocess.Popen(
            [bin_dir / "wayback", "-b", "127.0.0.1", "-p", str(port)],
            cwd=cwd,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        # Up when it answers: pywb takes a second or two to import, more on a busy machine;
        # the bound is only there so that a wayback that hangs fails the test.
        give_up = time.monotonic() + 120
        while True:
            try:
                get(base + "/")
                break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > give_up:
                pytest.fail("wayback did not start:\n" + log_path.read_text())
            time.sleep(0.2)
        yield base
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
