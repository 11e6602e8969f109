"""Lower layers never import higher ones.

From the top: the CLI; serving; the execution plan and status; the source types; what
they run (mail archives, crawls, ingests); jobs; fetch and parse; the frontier; the
store; under all of them, small modules of one concept each. A source type registers
its jobs' handlers when the plan (or the CLI) loads it, never because a lower layer
imported it: `jobs` once imported `sources` to find a handler. Every import counts, a
function's own or one only for type checking: each ties the lower layer to the higher.
"""

from __future__ import annotations

import ast
from pathlib import Path

import thresher

ROOT = Path(thresher.__file__).parent

# Higher numbers are higher layers; a module may import its own layer and those below.
LAYERS: dict[str, int] = {
    "cli": 9,
    "__main__": 9,
    "serve": 8,
    "plan": 7,
    "status": 7,
    "sources": 6,
    "archives": 5,
    "crawl": 5,
    "ingest": 5,
    "jobs": 4,
    "fetch": 3,
    "parse": 3,
    "frontier": 2,
    "store": 1,
}
# What every layer may use: small modules of one concept each, importing only each other.
BASE = {
    "__init__",
    "childproc",
    "clock",
    "config",
    "errors",
    "liveness",
    "mailtypes",
    "redact",
    "runtime",
    "weburl",
}


def _layer_of(name: str) -> str:
    return name.removesuffix(".py")


def _imported(source: str, parts: tuple[str, ...]) -> set[str]:
    """The top-level parts of thresher that `source`, the module at `parts` (its path
    inside the package), imports."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                names = [node.module or ""]
            else:
                package = ["thresher", *parts[:-1]]
                package = package[: len(package) - (node.level - 1)]
                module = ".".join([*package, *([node.module] if node.module else [])])
                # `from . import x` and `from .. import x` may name modules too.
                names = [module] if node.module else [f"{module}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            bits = name.split(".")
            if bits[0] != "thresher" or len(bits) == 1:
                continue
            top = bits[1]
            is_module = (ROOT / top).is_dir() or (ROOT / f"{top}.py").exists()
            found.add(top if is_module else "__init__")  # a name of the package itself
    return found


def _modules() -> list[tuple[tuple[str, ...], str]]:
    return [(path.relative_to(ROOT).parts, path.read_text()) for path in sorted(ROOT.rglob("*.py"))]


def test_every_module_of_thresher_has_a_layer() -> None:
    tops = {_layer_of(p.name) for p in ROOT.iterdir() if p.suffix == ".py" or p.is_dir()}
    tops.discard("__pycache__")
    assert tops <= set(LAYERS) | BASE, tops - set(LAYERS) - BASE


def test_no_layer_imports_a_higher_one() -> None:
    wrong = []
    for parts, source in _modules():
        mine = _layer_of(parts[0])
        for other in _imported(source, parts) - {mine}:
            if other not in BASE and (mine in BASE or LAYERS[other] > LAYERS[mine]):
                wrong.append(f"{'/'.join(parts)} imports thresher.{other}")
    assert not wrong, "\n".join(wrong)


def test_the_check_sees_every_kind_of_import() -> None:
    """The import this test was written for sat inside a function; others name a
    module from a package, or import it absolutely."""
    parts = ("jobs", "handlers.py")
    inside = "def handler_for():\n    from ..sources.types import load_builtin_types\n"
    assert _imported(inside, parts) == {"sources"}
    assert _imported("from .. import plan, __version__\n", parts) == {"plan", "__init__"}
    assert _imported("import thresher.cli.main\n", parts) == {"cli"}
    assert _imported("from . import queue\n", parts) == {"jobs"}
