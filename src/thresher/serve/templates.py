"""The Jinja2 environment of `thresher serve`: templates shipped in the package,
autoescaping on for every template (harvested text is data, never markup), and the few
filters the pages format values with."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import Environment, PackageLoader, StrictUndefined

__all__ = ["environment", "href"]


def href(*segments: Any, **params: Any) -> str:
    """A path of `segments`, each percent-encoded (a list name or month can hold any
    character), with the query `params` that are not None or empty."""
    path = "/" + "/".join(quote(str(s), safe="") for s in segments)
    query = {k: v for k, v in params.items() if v is not None and v != ""}
    return path + ("?" + urlencode(query) if query else "")


def _parse(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def when(value: str | None) -> str:
    """An ISO time as '2026-01-05 12:00 UTC'; '' for none."""
    t = _parse(value)
    return t.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC") if t else ""


def ago(value: str | None, now: float) -> str:
    """How long before `now` an ISO time was: '5 s ago', '3 min ago', '2 h ago', '4 d ago'."""
    t = _parse(value)
    if t is None:
        return ""
    seconds = now - t.timestamp()
    if seconds < 0:
        return "in the future"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit} ago"
    return f"{int(seconds)} s ago"


def num(value: Any) -> str:
    return "" if value is None else f"{int(value):,}"


def size(value: Any) -> str:
    if value is None:
        return ""
    n = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("thresher.serve", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(when=when, ago=ago, num=num, size=size)
    env.globals.update(href=href)
    return env
