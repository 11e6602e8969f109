"""The mail archive types, one per archive kind.

Each kind of `thresher.archives.kinds.BUILTIN` becomes a source type here, with its
root job. What a run does is the same for every kind, one module each: its jobs
(`archive_jobs`), the port they hand the kind (`archive_port`) and the storing of a
unit's messages (`archive_messages`).
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from ..archives.kinds import ARCHIVE_TYPE_NAMES, BUILTIN, ArchiveKind
from ..archives.months import DEFAULT_GRACE_DAYS
from ..jobs import register
from .archive_jobs import KINDS, root_job
from .types import Option, SourceType, register_type

__all__ = ["ARCHIVE_TYPES", "ARCHIVE_TYPE_NAMES", "register_kind"]

_COMMON = {
    "grace_days": Option(
        float, DEFAULT_GRACE_DAYS, "Days after a month ends before it can be complete."
    ),
    "allow_private": Option(bool, False, "Also fetch private, loopback and link-local addresses."),
    "delay": Option(float, None, "Seconds between requests to one host [config delay]."),
    "max_bytes": Option(
        int, 2**30, "Largest month file (publicinbox: git pack) fetched; larger is an error."
    ),
}


def register_kind(kind: ArchiveKind) -> SourceType:
    """Make `kind` a source type, with its root job (`<name>.run`); the unit and the
    commit jobs are the same for every kind."""
    if kind.name in KINDS:
        raise ValueError(f"two archive kinds named {kind.name!r}")
    KINDS[kind.name] = kind
    ARCHIVE_TYPE_NAMES.add(kind.name)
    register(f"{kind.name}.run")(partial(root_job, kind=kind))
    return register_type(
        SourceType(
            name=kind.name,
            root_kind=f"{kind.name}.run",
            doc=kind.doc,
            check_url=kind.check_url,
            detect=kind.detect,
            options={
                **_COMMON,
                "max_bytes": replace(_COMMON["max_bytes"], default=kind.max_bytes),
                **{
                    name: Option(o.kind, o.default, o.doc, o.secret)
                    for name, o in kind.options.items()
                },
            },
            check_options=kind.check_options,
        )
    )


ARCHIVE_TYPES = tuple(register_kind(kind) for kind in BUILTIN)
