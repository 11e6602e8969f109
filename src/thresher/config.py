"""Configuration: one frozen object, read in one place.

Precedence, lowest to highest: built-in defaults, `thresher.toml` in the home folder,
`THRESHER_*` environment variables, command-line flags. The defaults and their meaning
are documented here once (the `doc` of each field); `thresher config` prints them.
"""

from __future__ import annotations

import dataclasses
import math
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .redact import redact_text, redact_url

__all__ = ["CONFIG_FILE", "MAX_GRACE_SECONDS", "MAX_WORKERS", "Config", "describe", "load_config"]

CONFIG_FILE = "thresher.toml"
DEFAULT_HOME = Path("thresher-data")
DEFAULT_USER_AGENT = "Thresher/0.1 (+https://pypi.org/project/thresher/; web archive harvester)"
# Far above any sensible use, far below what breaks: a million workers took gigabytes
# and kept the loop too busy to hear SIGTERM.
MAX_WORKERS = 1024
MAX_GRACE_SECONDS = 86_400.0
# The longest any other time setting may be: a day.
MAX_SECONDS = 86_400.0


def _opt(default: Any, doc: str) -> Any:
    return field(default=default, metadata={"doc": doc})


@dataclass(frozen=True)
class Config:
    home: Path = _opt(
        DEFAULT_HOME, "Home folder: the SQLite store, thresher.toml and harvested content."
    )
    db: str | None = _opt(
        None, "postgresql://… URL of a shared store; unset means SQLite in the home folder."
    )
    workers: int = _opt(4, "Concurrent job workers in one `thresher run` process.")
    lease_seconds: float = _opt(
        60.0, "How long a claimed job stays leased without a heartbeat before others may take it."
    )
    max_attempts: int = _opt(
        5,
        "Attempts of a job in one run; then it fails with its error, and the next run tries again.",
    )
    backoff_base: float = _opt(
        2.0,
        "First retry delay in seconds (half of it fixed, half random); doubles on each attempt.",
    )
    backoff_max: float = _opt(
        60.0, "Longest retry delay in seconds, a server's Retry-After included (see defer_max)."
    )
    defer_max: float = _opt(
        3600.0,
        "Longest a job is handed back, no attempt counted, to wait for its host's turn (its"
        " delay, a Retry-After, a host parked after failures); a longer wait is a failed attempt.",
    )
    grace_seconds: float = _opt(
        5.0,
        "On SIGINT/SIGTERM, how long in-flight jobs may run before they are released (a"
        " crawl stops its fetches at once, finishes those in flight and commits).",
    )
    user_agent: str = _opt(DEFAULT_USER_AGENT, "User-Agent sent with every request.")
    http_timeout: float = _opt(60.0, "Total time limit of one HTTP request, in seconds.")
    stall_timeout: float = _opt(
        10.0,
        "Seconds a server may stay silent before any of the body came; each 64 KiB of body"
        " received adds a second, up to read_timeout.",
    )
    read_timeout: float = _opt(
        30.0,
        "Longest silence of a server in seconds, mid-way through a large body (see stall_timeout).",
    )
    delay: float = _opt(
        1.0, "Seconds between two requests to one host (robots.txt Crawl-delay if larger)."
    )
    max_links_per_page: int = _opt(
        10_000,
        "Links (and requisites) read from one crawled page; the rest are dropped, counted in"
        " the crawl's summary (links_dropped), and a big page's markup past them is not parsed.",
    )
    max_message_bytes: int = _opt(
        32 * 2**20,
        "Bytes of one mail message stored in the index (its row, searched and shown); a"
        " longer message is stored whole in a file under HOME/messages/ and its row flagged"
        " truncated.",
    )
    keep_jobs_days: float = _opt(
        7.0,
        "Days the jobs of a finished run are kept, then deleted (the run keeps their"
        " counts); negative: kept for ever.",
    )

    @property
    def heartbeat_seconds(self) -> float:
        # Three heartbeats per lease: one lost heartbeat never costs a lease.
        return self.lease_seconds / 3

    @property
    def store_url(self) -> str:
        return self.db or f"sqlite:///{(self.home / 'thresher.db').resolve()}"

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            problem = _problem(f.name, getattr(self, f.name))
            if problem:
                raise ConfigError(f"{f.name} {problem}")
        if self.backoff_max < self.backoff_base:
            raise ConfigError("need 0 <= backoff_base <= backoff_max")
        if self.db is not None and not self.db.startswith(("postgresql://", "postgres://")):
            raise ConfigError(f"db must be a postgresql:// URL, not {redact_url(self.db)!r}")


# Every number's range: (least, most, whether the least itself is allowed). A number must
# also be finite: "nan" compares false with both ends and would pass any range.
_RANGES: dict[str, tuple[float, float, bool]] = {
    "workers": (1, MAX_WORKERS, True),
    "lease_seconds": (0, MAX_SECONDS, False),
    "max_attempts": (1, 1000, True),
    "backoff_base": (0, MAX_SECONDS, True),
    "backoff_max": (0, MAX_SECONDS, True),
    "defer_max": (0, MAX_SECONDS, True),
    "grace_seconds": (0, MAX_GRACE_SECONDS, True),
    "http_timeout": (0, MAX_SECONDS, False),
    "stall_timeout": (0, MAX_SECONDS, False),
    "read_timeout": (0, MAX_SECONDS, False),
    "delay": (0, MAX_SECONDS, True),
    "keep_jobs_days": (-math.inf, 100_000, True),
    "max_links_per_page": (1, 10_000_000, True),
    # Neither store takes a value of 1 GB or more (SQLite's default SQLITE_MAX_LENGTH,
    # PostgreSQL's bytea).
    "max_message_bytes": (64 * 2**10, 512 * 2**20, True),
}


def _problem(name: str, value: Any) -> str | None:
    """What is wrong with `value` for setting `name` ("must be …"), or None."""
    if name not in _RANGES or not isinstance(value, int | float):
        return None
    least, most, inclusive = _RANGES[name]
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number, not {value}"
    if least < value <= most or (inclusive and value == least):
        return None
    shown = (
        "" if math.isinf(least) else f"from {_num(least)}" if inclusive else f"above {_num(least)}"
    )
    return f"must be {shown} {'to' if inclusive else 'and at most'} {_num(most)}, not {_num(value)}"


def _num(value: float) -> str:
    """1000000 as that, not 1e+06; -1.0 as -1; 0.25 as it is."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


_FIELDS = {f.name: f for f in dataclasses.fields(Config)}


def _coerce(name: str, value: Any, origin: str) -> Any:
    default = _FIELDS[name].default
    try:
        if name == "home":
            return Path(value)
        if name == "db":
            return str(value) if value not in (None, "") else None
        if isinstance(default, bool):
            if isinstance(value, str):
                return value.strip().lower() in ("1", "true", "yes", "on")
            return bool(value)
        number: int | float
        if isinstance(default, int):
            if isinstance(value, float) and not value.is_integer():
                raise ValueError(value)
            number = int(value)
        elif isinstance(default, float):
            number = float(value)
        else:
            return str(value)
    except (TypeError, ValueError, OverflowError):
        shown = redact_text(repr(value))
        wanted = "a whole number" if isinstance(default, int) else "a number"
        raise ConfigError(f"{origin}: {name} = {shown} must be {wanted}") from None
    problem = _problem(name, number)
    if problem:  # said here, where the origin of the value is known
        raise ConfigError(f"{origin}: {name} = {value!r} {problem}")
    return number


def env_name(name: str) -> str:
    return "THRESHER_" + name.upper()


def load_config(
    flags: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
) -> Config:
    """Build the Config from the file, the environment and flags (None flags are unset)."""
    environ = os.environ if environ is None else environ
    flags = {k: v for k, v in (flags or {}).items() if v is not None}
    values: dict[str, Any] = {}
    # The home folder decides where the file is, so it cannot come from the file.
    home = flags.get("home") or environ.get(env_name("home")) or DEFAULT_HOME
    values["home"] = Path(home)
    path = values["home"] / CONFIG_FILE
    if path.exists():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: {exc}") from None
        data = data.get("thresher", data)
        for key, value in data.items():
            if key not in _FIELDS or key == "home":
                raise ConfigError(f"{path}: unknown setting {key!r}")
            values[key] = _coerce(key, value, str(path))
    for name in _FIELDS:
        if name != "home" and env_name(name) in environ:
            values[name] = _coerce(name, environ[env_name(name)], env_name(name))
    for name, value in flags.items():
        if name not in _FIELDS:
            raise ConfigError(f"unknown setting {name!r}")
        values[name] = _coerce(name, value, f"--{name.replace('_', '-')}")
    return Config(**values)


def describe(config: Config) -> list[tuple[str, str, str, str]]:
    """(name, current value, environment variable, documentation) of every setting."""
    rows = []
    for f in dataclasses.fields(Config):
        value = getattr(config, f.name)
        shown = redact_url(value) if f.name == "db" and value else str(value)
        rows.append((f.name, shown, env_name(f.name), f.metadata["doc"]))
    return rows
