"""Thresher: a harvester for web archives, complete and current, run after run.

The names below are imported on first use (PEP 562), not with the package: the
`thresher` program's entry (`thresher.cli.entry`) is inside this package, and whatever
the package imports runs before the entry can catch a Ctrl-C (a traceback, not one line).
"""

from __future__ import annotations

import importlib

# Not typing's: importing typing takes longer than the rest of the start (see above).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from .clock import Clock, FakeClock, SystemClock
    from .config import Config, load_config
    from .errors import (
        ConfigError,
        JobError,
        LeaseLost,
        PermanentError,
        SourceError,
        StoreError,
        StoreUnavailable,
        ThresherError,
        TransientError,
        UnknownSource,
        UsageError,
    )

__version__ = "0.1.0"

__all__ = [
    "Clock",
    "Config",
    "ConfigError",
    "FakeClock",
    "JobError",
    "LeaseLost",
    "PermanentError",
    "SourceError",
    "StoreError",
    "StoreUnavailable",
    "SystemClock",
    "ThresherError",
    "TransientError",
    "UnknownSource",
    "UsageError",
    "__version__",
    "load_config",
]

_HOMES = {"Clock": "clock", "FakeClock": "clock", "SystemClock": "clock", "Config": "config"}
_HOMES["load_config"] = "config"


def __getattr__(name: str) -> object:
    if name not in __all__ or name == "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_HOMES.get(name, 'errors')}", __name__), name)
    globals()[name] = value
    return value
