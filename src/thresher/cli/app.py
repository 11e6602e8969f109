"""What every command shares: the global flags, the config built from them, the store."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console

from ..config import Config, load_config
from ..redact import RedactingFilter, remember
from ..store import Store, open_store

__all__ = ["App", "setup_logging"]


@dataclass
class App:
    flags: dict[str, Any] = field(default_factory=dict)
    verbose: int = 0
    _config: Config | None = None

    @property
    def config(self) -> Config:
        if self._config is None:
            self._config = load_config(self.flags)
            remember(self._config.db)
        return self._config

    def with_flags(self, **flags: Any) -> Config:
        """The config with command-specific flags (those not None) on top."""
        merged = {**self.flags, **{k: v for k, v in flags.items() if v is not None}}
        self._config = load_config(merged)
        remember(self._config.db)
        return self._config

    @contextmanager
    def store(self) -> Iterator[Store]:
        store = open_store(self.config.store_url)
        try:
            yield store
        finally:
            store.close()


def setup_logging(verbose: int, console: Console | None) -> None:
    """Rich log lines above the progress bar on a terminal; plain lines otherwise."""
    level = logging.DEBUG if verbose > 1 else logging.INFO if verbose >= 0 else logging.WARNING
    root = logging.getLogger("thresher")
    root.handlers.clear()
    root.setLevel(level)
    root.propagate = False
    handler: logging.Handler
    if console is not None:
        from rich.logging import RichHandler

        handler = RichHandler(console=console, show_path=False, markup=False)
        handler.setFormatter(logging.Formatter("%(message)s"))
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%H:%M:%S")
        )
    handler.addFilter(RedactingFilter())
    root.addHandler(handler)
