"""The table of commands, for a `thresher --help` that imports none of them, and the
examples every command's help ends with.

`thresher --help`, `--version` and `status` start in a fraction of a second because each
command's module (and what it needs: aiohttp, the crawl engine, rich's progress…) is
imported only when that command runs (`main.LazyGroup`). The listing in `--help` shows
each command's summary from here; each command declares the same text as its
`short_help`, so the two cannot differ.
"""

from __future__ import annotations

__all__ = ["COMMANDS", "examples", "summary"]

# name -> (module under thresher.cli, its click command, the summary shown in --help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "config": ("main", "config_command", "Show every setting, its value and what it does."),
    "crawl": ("crawl", "crawl_command", "Crawl from SEED… into WARC files."),
    "demo": ("demo", "demo_command", "Serve a mailing-list archive on 127.0.0.1 and harvest it."),
    "export": ("export", "export_command", "Write a list's stored messages as mbox or JSON."),
    "ingest": ("ingest", "ingest_group", "Bulk ingest: full-text URLs named by libraries."),
    "run": ("run", "run_command", "Harvest the sources: one pass, or forever with --every."),
    "search": ("search", "search_command", "Find stored messages by words and phrases."),
    "serve": ("serve", "serve_command", "A read-only web dashboard and archive browser."),
    "source": ("source", "source_group", "Add, list, show and remove sources."),
    "status": ("status", "status_command", "Sources, their last runs, jobs and workers."),
    "worker": ("worker", "worker_command", "Work on every open run of the store until stopped."),
}


def summary(name: str) -> str:
    """A command's one-line summary (its `short_help`)."""
    return COMMANDS[name][2]


def examples(*lines: str) -> str:
    """The end of a command's help: a few real command lines (an epilog kept as is)."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)
