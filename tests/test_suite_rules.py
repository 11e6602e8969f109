"""Rules the test suite itself keeps, so that it passes on a busy machine and offline."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _decorator_name(node: ast.expr) -> str:
    target = node.func if isinstance(node, ast.Call) else node
    return target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")


def test_every_property_test_has_no_deadline() -> None:
    """Hypothesis fails an example that takes over 200 ms: on a loaded machine a property
    test of the sieve took 320 ms and failed, though it passes alone. Every @given says
    @settings(deadline=None) (conftest's profile says it too)."""
    missing = []
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            names = [_decorator_name(d) for d in node.decorator_list]
            if "given" not in names:
                continue
            ok = any(
                _decorator_name(d) == "settings"
                and isinstance(d, ast.Call)
                and any(
                    k.arg == "deadline"
                    and isinstance(k.value, ast.Constant)
                    and k.value.value is None
                    for k in d.keywords
                )
                for d in node.decorator_list
            )
            if not ok:
                missing.append(f"{path.relative_to(TESTS)}:{node.lineno} {node.name}")
    assert missing == []


def test_nothing_is_installed_or_downloaded_while_the_tests_run() -> None:
    """Test-only software (pywb, HyperKitty, the URL Standard's test data) is installed
    by scripts/test before pytest starts; a test that ran pip, or fetched from a
    registry, would need the network and time the suite does not have."""
    # pip run by a test (`-m pip …`, `pip install` in a command), or a download tool.
    pattern = re.compile(r"""["']-m["'],\s*["']pip["']|["'](pip3?|uv|wget|curl)["'],\s*["']""")
    found = [
        f"{path.relative_to(TESTS)}:{n}"
        for path in sorted(TESTS.rglob("*.py"))
        if path.name != Path(__file__).name
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == []


def test_the_quick_subset_starts_no_real_server() -> None:
    """`pytest -m "not slow"` (the README's quick check) leaves out every test that
    starts a real HyperKitty, pywb or Chromium, marked by the fixture it uses."""
    files = [
        "archives/test_hyperkitty_real.py",
        "serve/test_serve_browser.py",
        "store_warc/test_warc_pywb.py",
        "crawl/test_crawl_requisites.py",
    ]
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    quick = subprocess.run(
        [*command, "-m", "not slow", *(str(TESTS / f) for f in files)],
        capture_output=True,
        text=True,
        cwd=TESTS.parent,
        check=False,
    )
    collected = [line for line in quick.stdout.splitlines() if "::" in line]
    assert quick.returncode == 0, quick.stdout + quick.stderr
    # The requisites tests that replay through pywb are left out, the others kept.
    assert collected and all(line.startswith("tests/crawl/") for line in collected)
    assert not any("pywb" in line for line in collected), collected


def _made_at_collection(tree: ast.Module) -> Iterator[ast.AST]:
    """What runs while pytest collects a module: its top-level statements and the
    decorators of its functions (parametrize lists), not the functions' bodies."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield from node.decorator_list
        elif not isinstance(node, ast.ClassDef):
            yield node


def _walk_eager(node: ast.AST) -> Iterator[ast.AST]:
    """`ast.walk`, not into lambdas: their bodies run with the test, not at collection."""
    yield node
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, ast.Lambda):
            yield from _walk_eager(child)


def test_test_ids_are_the_same_in_every_process() -> None:
    """`scripts/test` runs two pytest processes, which must collect the same tests: a gzip
    made while collecting (a parameter and its id) carries the time unless `mtime=0`."""
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for top in _made_at_collection(tree):
            for node in _walk_eager(top):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "compress"
                    and getattr(node.func.value, "id", "") == "gzip"
                    and not any(k.arg == "mtime" for k in node.keywords)
                ):
                    found.append(f"{path.relative_to(TESTS)}:{node.lineno}")
    assert found == []
