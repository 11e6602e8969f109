"""What the benchmarks read from /proc about the processes they measure.

Shared by the benchmark scripts, which import it (and benchlib.py) by putting this
folder on sys.path (they are run as scripts). Peak memory is each process's own VmHWM,
not wait4's ru_maxrss: Linux carries the high-water mark of the forking process over
exec, so a child's ru_maxrss is never below the RSS of the script that started it.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = [
    "cpu_times",
    "descendants",
    "hwm_kib",
    "pss_kib",
    "rss_kib",
    "stat_fields",
    "tree_cpu_seconds",
]

_PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024


def stat_fields(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after "(command name)": state, ppid, …"""
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2 :].split()


def descendants(root: int) -> list[int]:
    """Every live process below `root`, from one pass over /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                ppid = int(stat_fields(int(entry.name))[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def cpu_times(pids: list[int]) -> tuple[float, float]:
    """User and system CPU seconds so far of the processes `pids` (those gone count 0)."""
    user = system = 0
    for pid in pids:
        with contextlib.suppress(OSError, ValueError, IndexError):
            f = stat_fields(pid)
            user += int(f[11])
            system += int(f[12])
    tick = os.sysconf("SC_CLK_TCK")
    return user / tick, system / tick


def tree_cpu_seconds(root: int) -> float:
    """User + system CPU so far of `root` and of each process now below it."""
    total = 0
    for pid in [root, *descendants(root)]:
        with contextlib.suppress(OSError, ValueError, IndexError):
            f = stat_fields(pid)
            total += int(f[11]) + int(f[12])
    return total / os.sysconf("SC_CLK_TCK")


def _status_kib(pid: int, path: str, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/{path}").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def hwm_kib(pid: int) -> int:
    """The process's peak RSS so far (VmHWM), of its present program only: exec starts it
    afresh, unlike ru_maxrss."""
    return _status_kib(pid, "status", "VmHWM:")


def pss_kib(pid: int) -> int:
    """Proportional set size: RSS with each page shared by k processes counted 1/k, so
    that summing it over forked processes counts shared pages once."""
    return _status_kib(pid, "smaps_rollup", "Pss:")


def rss_kib(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * _PAGE_KIB
    except (OSError, ValueError, IndexError):
        return 0
