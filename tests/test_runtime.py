"""The `thresher` program tunes the garbage collector for itself; `main` called in a
test's own process does not."""

from __future__ import annotations

import gc
import json
import subprocess
import sys

from thresher.cli.main import main
from thresher.runtime import GC_THRESHOLD

PROBE = """
import gc, json, sys
from thresher.cli.main import entry
sys.argv = ["thresher", "--version"]
code = entry()
print(json.dumps({"code": code, "threshold": gc.get_threshold(), "frozen": gc.get_freeze_count()}))
"""


def test_the_program_freezes_its_imports_and_collects_less_often() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["code"] == 0
    assert tuple(got["threshold"]) == GC_THRESHOLD
    assert got["frozen"] > 10_000  # the modules, classes and functions imported


def test_main_in_a_test_process_leaves_the_collector_alone() -> None:
    before = (gc.get_threshold(), gc.get_freeze_count())
    assert main(["--version"]) == 0
    assert (gc.get_threshold(), gc.get_freeze_count()) == before
