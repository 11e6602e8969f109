"""Crawling: the engine that drives the frontier with fetching, parsing and WARC writing."""

from __future__ import annotations

from .engine import CrawlEngine
from .settings import CrawlSettings
from .summary import CrawlSummary

__all__ = ["CrawlEngine", "CrawlSettings", "CrawlSummary"]
