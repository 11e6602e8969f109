"""Whether a worker process (a row of the `workers` table) is alive.

A worker writes its host name, pid and the kernel's boot id with every heartbeat. On
the same machine that tells for certain a process that is gone (its pid no longer
exists, or the machine rebooted since) from one that is merely slow; elsewhere only
its heartbeat can tell, once it is older than a lease. The job system frees a dead
worker's leases by it (`jobs.queue.expire_dead_owners`), `thresher status` tells a run
still worked on from one left open by a stopped process, and `thresher worker --name`
reuses a name only once its last holder is gone.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["BOOT_ID", "HOST", "is_alive", "is_dead_here"]

HOST = socket.gethostname()


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


BOOT_ID = _boot_id()


def is_dead_here(worker: Mapping[str, Any]) -> bool:
    """True for a worker of this machine that is certainly gone: its machine rebooted
    since, or its process no longer exists. Anything else waits for its lease to expire."""
    if worker["hostname"] != HOST or not BOOT_ID or not worker["boot_id"]:
        return False
    if worker["boot_id"] != BOOT_ID:
        return True
    if int(worker["pid"]) == os.getpid():
        return False
    try:
        os.kill(int(worker["pid"]), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # exists, owned by someone else
    return False


def is_alive(worker: Mapping[str, Any], now: float, lease_seconds: float) -> bool:
    """A worker that has not stopped, sent a heartbeat within a lease, and is not known
    to be gone."""
    return (
        worker["stopped"] is None
        and float(worker["heartbeat"]) >= now - lease_seconds
        and not is_dead_here(worker)
    )
