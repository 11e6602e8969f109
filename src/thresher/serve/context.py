"""What every route of `thresher serve` shares: the read-only store, the settings, the
templates, and the headers that make a response safe."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web
from jinja2 import Environment

from ..clock import iso
from ..sources.archives import ARCHIVE_TYPE_NAMES
from ..store import Tx
from ..store.aio import AsyncStore
from .auth import Access
from .templates import environment, href

__all__ = [
    "CSP_PAGE",
    "CSP_SANDBOX",
    "Context",
    "source_href",
]

T = TypeVar("T")

# Every page: nothing but this server's own script, styles and fetches; no inline script
# or style, no plugin, no frame, no form posting elsewhere.
CSP_PAGE = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
# Harvested bytes (a raw message, an archived page's payload, an attachment): even if a
# browser were talked into rendering them, they run in a sandbox without script, origin,
# forms or plugins.
CSP_SANDBOX = "sandbox; default-src 'none'; frame-ancestors 'none'"


def source_href(source: dict[str, Any]) -> str:
    """The page of a source, by its type."""
    if source["type"] in ARCHIVE_TYPE_NAMES:
        return href("lists", source["name"])
    if source["type"] == "web":
        return href("crawls", source["name"])
    if source["type"] == "ingest":
        return "/ingest"
    return href("sources", source["name"])


@dataclass
class Context:
    store: AsyncStore
    home: Path
    lease_seconds: float
    access: Access
    store_info: dict[str, Any]  # backend, url (password hidden), schema_version
    env: Environment = field(default_factory=environment)

    async def read(self, fn: Callable[[Tx], T]) -> T:
        """Run `fn` in a read-only transaction on a store thread."""
        return await self.store.run(fn, write=False)

    def render(
        self, template: str, nav: str = "", status: int = 200, **values: Any
    ) -> web.Response:
        now = time.time()
        html = self.env.get_template(template).render(
            nav=nav,
            now=now,
            now_iso=iso(now),
            store_label=f"{self.store_info['backend']} store",
            source_href=source_href,
            **values,
        )
        return web.Response(text=html, status=status, content_type="text/html", charset="utf-8")
