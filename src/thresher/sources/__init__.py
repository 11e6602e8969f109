"""Source types and the source directory. Importing this registers every built-in type."""

from . import archives, ingest, synthetic, urls, web
from .directory import Source, add_source, get_source, list_sources, remove_source
from .types import SourceType, all_types, get_type

__all__ = [
    "Source",
    "SourceType",
    "add_source",
    "all_types",
    "archives",
    "get_source",
    "get_type",
    "ingest",
    "list_sources",
    "remove_source",
    "synthetic",
    "urls",
    "web",
]
