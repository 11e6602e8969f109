"""Source types and the source directory.

The built-in types (`archives`, `ingest`, `synthetic`, `urls`, `web`) register
themselves, and their job handlers, when imported; `types.get_type`, `all_types`,
`detect_type` and `jobs.handlers.handler_for` import them on first use, so that a
command that only reads the directory (`thresher status`) does not load the fetcher,
the parsers and the crawl engine.
"""

from .directory import Source, add_source, get_source, list_sources, remove_source
from .types import SourceType, all_types, get_type, load_builtin_types

__all__ = [
    "Source",
    "SourceType",
    "add_source",
    "all_types",
    "get_source",
    "get_type",
    "list_sources",
    "load_builtin_types",
    "remove_source",
]
