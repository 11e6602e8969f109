"""The names of the mail source types (the archive kinds Thresher ships), known without
importing the kinds themselves and the email parsing they need: `thresher status` tells
mail sources by these and must start in a fraction of a second."""

from __future__ import annotations

__all__ = ["ARCHIVE_TYPE_NAMES", "BUILTIN_KIND_NAMES"]

# thresher.archives.kinds.BUILTIN, by name (a test checks that the two agree).
BUILTIN_KIND_NAMES = (
    "pipermail", "modmbox", "ponymail", "hyperkitty", "mbox", "mhonarc", "publicinbox", "nntp"
)  # fmt: skip

# Every mail source type: these and any kind registered later
# (`thresher.sources.archives.register_kind` adds its name).
ARCHIVE_TYPE_NAMES: set[str] = set(BUILTIN_KIND_NAMES)
