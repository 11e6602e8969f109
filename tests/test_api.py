"""Every module says what it exports, and exports only what exists."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import thresher

MODULES = sorted(
    m.name
    for m in pkgutil.walk_packages(thresher.__path__, "thresher.")
    if not m.name.endswith("__main__")
)


@pytest.mark.parametrize("name", MODULES)
def test_all_is_declared_and_true(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    assert len(exported) == len(set(exported))
    for symbol in exported:
        assert hasattr(module, symbol), f"{name}.__all__ names missing {symbol!r}"


def test_error_tree_has_one_root() -> None:
    for symbol in thresher.__all__:
        obj = getattr(thresher, symbol)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, thresher.ThresherError)
