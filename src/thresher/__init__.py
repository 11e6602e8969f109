"""Thresher: a harvester for web archives, complete and current, run after run."""

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
