"""Crawling: the engine that drives the frontier with fetching, parsing and WARC writing."""

from __future__ import annotations

from .engine import CrawlEngine, CrawlSummary
from .settings import CrawlSettings

__all__ = ["CrawlEngine", "CrawlSettings", "CrawlSummary"]
