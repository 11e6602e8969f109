"""Source types: how a kind of source is validated, detected and harvested.

A type names the job kind that harvests one run of a source (its root job) and the
options it takes. Later capabilities (archives, crawls, ingest lists) add types here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import SourceError
from ..redact import MASK
from ..store import Tx

__all__ = [
    "Option",
    "RunNote",
    "SourceType",
    "all_types",
    "detect_type",
    "get_type",
    "load_builtin_types",
    "register_type",
    "shown_options",
]

# The modules of the built-in types, each registering its own when imported.
BUILTIN_MODULES = ("archives", "ingest", "synthetic", "urls", "web")


@dataclass(frozen=True)
class RunNote:
    """What a run whose jobs all succeeded still has to say: `text`, one line; `failed`:
    the run achieved nothing (every fetch refused), so it is failed with `text` as its
    error rather than ok."""

    text: str
    failed: bool = False


@dataclass(frozen=True)
class Option:
    kind: type
    default: Any
    doc: str
    # A password: stored, but masked wherever the source's options are shown.
    secret: bool = False

    def parse(self, name: str, raw: str) -> Any:
        try:
            if self.kind is bool:
                if raw.lower() not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                    raise ValueError(raw)
                return raw.lower() in ("1", "true", "yes", "on")
            value = self.kind(raw)
        except ValueError:
            raise SourceError(f"option {name}={raw!r}: expected {self.kind.__name__}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise SourceError(f"option {name}={raw!r}: must be a finite number")
        if isinstance(value, int | float) and value < 0:
            raise SourceError(f"option {name}={raw!r}: must not be negative")
        return value


@dataclass(frozen=True)
class SourceType:
    name: str
    root_kind: str
    doc: str
    check_url: Callable[[str], str]
    detect: Callable[[str], bool] = lambda url: False
    options: dict[str, Option] = field(default_factory=dict)
    # Checks the options together (a scope regex that compiles, say), after each parsed.
    check_options: Callable[[str, dict[str, Any]], None] = lambda url, options: None
    # What a finished run that is otherwise ok should still report (a `urls` run's 404s):
    # (transaction, source name, when the run started) -> a note, or None.
    problems: Callable[[Tx, str, float], RunNote | None] = lambda tx, source, since: None

    def shown(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """`options` fit to print: secrets (a password) masked."""
        return {
            k: MASK if v is not None and k in self.options and self.options[k].secret else v
            for k, v in options.items()
        }

    def validate(self, url: str, raw: dict[str, str]) -> tuple[str, dict[str, Any]]:
        unknown = sorted(set(raw) - set(self.options))
        if unknown:
            known = ", ".join(sorted(self.options)) or "none"
            raise SourceError(f"type {self.name} has no option {unknown[0]!r} (options: {known})")
        options = {k: opt.default for k, opt in self.options.items()}
        options.update({k: self.options[k].parse(k, v) for k, v in raw.items()})
        url = self.check_url(url)
        self.check_options(url, options)
        return url, options


_TYPES: dict[str, SourceType] = {}


def register_type(stype: SourceType) -> SourceType:
    _TYPES[stype.name] = stype
    return stype


def load_builtin_types() -> None:
    """Import the built-in types' modules (once): they register their types and jobs."""
    import importlib

    for module in BUILTIN_MODULES:
        importlib.import_module(f"{__package__}.{module}")


def all_types() -> list[SourceType]:
    load_builtin_types()
    return [_TYPES[k] for k in sorted(_TYPES)]


def get_type(name: str) -> SourceType:
    load_builtin_types()
    try:
        return _TYPES[name]
    except KeyError:
        known = ", ".join(sorted(_TYPES))
        raise SourceError(f"unknown source type {name!r} (known: {known})") from None


def detect_type(url: str) -> SourceType:
    load_builtin_types()
    for stype in all_types():
        if stype.detect(url):
            return stype
    raise SourceError(f"cannot tell the source type of {url!r}: give --type")


def shown_options(type_name: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """A source's options fit to print (secrets masked), whatever its type; a type no
    longer known shows none of its string values, which might be secrets."""
    stype = _TYPES.get(type_name)
    if stype is None:
        return {k: MASK if isinstance(v, str) else v for k, v in options.items()}
    return stype.shown(options)
