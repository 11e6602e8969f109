"""Named SQL queries, loaded from the `.sql` files beside this module.

`queries/*.sql` holds the SQL both backends share; `queries/<backend>/*.sql` overrides a
query by name where the dialects differ. A file is a series of blocks, each starting
with `-- name: some_name`. Parameters are written `:name`; the PostgreSQL side rewrites
them to psycopg's `%(name)s` (leaving `::type` casts alone). Comments on lines of their
own are dropped, so they may mention parameters.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

__all__ = ["load_queries", "parse_queries"]

_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)
# Not after "[": a POSIX class such as [[:alnum:]] in a regular expression.
_PARAM = re.compile(r"(?<![:\w\[]):([A-Za-z_]\w*)")


def _parse(text: str, origin: str) -> dict[str, str]:
    parts = _NAME.split(text)
    if parts[0].strip() and not all(
        line.startswith("--") or not line.strip() for line in parts[0].splitlines()
    ):
        raise ValueError(f"{origin}: SQL before the first '-- name:' line")
    out: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in out:
            raise ValueError(f"{origin}: query {name!r} defined twice")
        # Whole-line comments go: a ":word" in one would be taken for a parameter, which
        # psycopg then asks for (a comment between queries belongs to the one above).
        lines = [line for line in body.splitlines() if not line.lstrip().startswith("--")]
        out[name] = "\n".join(lines).strip().rstrip(";")
    return out


@cache
def load_queries(backend: str) -> dict[str, str]:
    root = resources.files("thresher.store").joinpath("queries")
    queries: dict[str, str] = {}
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".sql"):
            queries.update(_parse(entry.read_text("utf-8"), entry.name))
    override = root.joinpath(backend)
    if override.is_dir():
        for entry in sorted(override.iterdir(), key=lambda e: e.name):
            if entry.name.endswith(".sql"):
                for name, sql in _parse(entry.read_text("utf-8"), entry.name).items():
                    if name not in queries:
                        raise ValueError(f"{backend}/{entry.name}: {name!r} overrides nothing")
                    queries[name] = sql
    return _for_backend(queries, backend)


def parse_queries(text: str, origin: str, backend: str) -> dict[str, str]:
    """Named queries from `text` (the format of the files), ready for `backend`: for a
    migration's Python step, which brings its own SQL."""
    return _for_backend(_parse(text, origin), backend)


def _for_backend(queries: dict[str, str], backend: str) -> dict[str, str]:
    if backend == "postgres":
        return {k: _PARAM.sub(r"%(\1)s", v.replace("%", "%%")) for k, v in queries.items()}
    return queries
