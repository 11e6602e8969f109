"""The `thresher` program tunes the garbage collector and the C heap for itself; `main`
called in a test's own process does not."""

from __future__ import annotations

import asyncio
import gc
import json
import subprocess
import sys
from pathlib import Path

import pytest

from thresher.childproc import spawn_pool
from thresher.cli.main import main
from thresher.runtime import GC_THRESHOLD, event_loop_name, run

PROBE = """
import gc, json, sys
from thresher.cli.main import entry
sys.argv = ["thresher", "config"]
code = entry()
print(json.dumps({"code": code, "threshold": gc.get_threshold(), "frozen": gc.get_freeze_count()}))
"""


def test_the_program_freezes_its_imports_and_collects_less_often(tmp_path: Path) -> None:
    """A command that runs (`config`): `--version` and `--help` end before the program
    tunes itself, which a process that ends at once does not need."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        cwd=tmp_path,
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["code"] == 0
    assert tuple(got["threshold"]) == GC_THRESHOLD
    assert got["frozen"] > 10_000  # the modules, classes and functions imported


def test_main_in_a_test_process_leaves_the_collector_alone() -> None:
    before = (gc.get_threshold(), gc.get_freeze_count())
    assert main(["--version"]) == 0
    assert (gc.get_threshold(), gc.get_freeze_count()) == before


# Frees 4 MiB of small blocks at the top of the C heap, then asks glibc how much free
# space the top kept (mallinfo2's keepcost): all of it once trimming waits for 8 MiB.
HEAP_PROBE = """
import ctypes, json, sys
TUNE = sys.argv[1] == "tuned"
if TUNE:
    from thresher.cli.main import entry
    sys.argv = ["thresher", "config"]
    entry()
class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()
    )]
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
libc.mallinfo2.restype = Info
blocks = [libc.malloc(64 * 1024) for _ in range(64)]
for b in reversed(blocks):
    libc.free(b)
print(json.dumps({"keepcost": libc.mallinfo2().keepcost}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's heap")
def test_the_program_keeps_free_heap_space_instead_of_trimming_it_each_time(
    tmp_path: Path,
) -> None:
    def keepcost(mode: str) -> int:
        out = subprocess.run(
            [sys.executable, "-c", HEAP_PROBE, mode],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
            cwd=tmp_path,
        )
        return int(json.loads(out.stdout.strip().splitlines()[-1])["keepcost"])

    assert keepcost("tuned") >= 2 << 20
    assert keepcost("plain") < 1 << 20  # glibc's default gives it back: the probe tells


def _threshold() -> tuple[int, int, int]:
    return gc.get_threshold()


def test_spawned_children_tune_themselves_as_the_program_does() -> None:
    """`childproc.spawn_pool`'s children (page parsing, mail parsing) run long too."""
    pool = spawn_pool(1)
    try:
        assert pool.submit(_threshold).result(timeout=120) == GC_THRESHOLD
    finally:
        pool.shutdown()
    assert gc.get_threshold() != GC_THRESHOLD  # this process is left alone


def test_commands_run_their_loop_on_uvloop() -> None:
    """`runtime.run` is what every command runs its work with (see thresher.runtime)."""

    async def which() -> str:
        await asyncio.sleep(0)
        return type(asyncio.get_running_loop()).__module__

    assert event_loop_name() == "uvloop"
    assert run(which()).startswith("uvloop")


def test_run_hands_back_what_the_work_raised() -> None:
    async def fail() -> None:
        raise LookupError("no such thing")

    with pytest.raises(LookupError, match="no such thing"):
        run(fail())
