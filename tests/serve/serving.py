"""`thresher serve` as a subprocess, as a user starts it."""

from __future__ import annotations

import json
import re
import signal
import subprocess
from dataclasses import dataclass
from typing import Any

from harvested import Filled

from cli_proc import Home

__all__ = ["Served", "start_serve", "stop_serve"]


@dataclass
class Served:
    url: str  # http://127.0.0.1:PORT/ (with the trailing slash)
    proc: subprocess.Popen[str]
    filled: Filled

    def status(self) -> dict[str, Any]:
        return dict(json.loads(self.filled.home.run("status", "--json").stdout))


def start_serve(home: Home, *args: str) -> tuple[subprocess.Popen[str], str]:
    """`thresher serve --port 0 ARGS` started; its URL, read from its first line."""
    proc = home.start("serve", "--port", "0", *args)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    found = re.search(r"serving (http://\S+/)", line)
    if not found:
        proc.kill()
        raise AssertionError(f"thresher serve did not start: {line!r} {proc.communicate()}")
    return proc, found[1]


def stop_serve(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
