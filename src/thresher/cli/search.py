"""`thresher search QUERY`: find stored list messages by words and phrases.

On a terminal the hits are a table with the matched words highlighted; otherwise one
tab-separated line per hit, so the output can be piped to grep, cut or a script without
parsing a table (or use ``--json``).
"""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..archives.search import parse_query, search_messages
from ..clock import iso
from ..errors import UsageError
from ..sources import get_source
from ..store import Row
from . import limits
from .app import App

__all__ = ["hit_json", "search_command"]


def hit_json(row: Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "source": row["source"],
        "month": row["month"],
        "date": iso(row["date"]),
        "from_name": row["from_name"],
        "from_addr": row["from_addr"],
        "subject": row["subject"],
        "message_id": row["message_id"],
        "snippet": row["snippet"],
    }


def _sender(row: Row) -> str:
    name, addr = row["from_name"] or "", row["from_addr"] or ""
    if name and addr:
        return f"{name} <{addr}>"
    return name or addr


def _flat(text: Any) -> str:
    return " ".join(str(text or "").split())


@click.command("search")
@click.argument("query", nargs=-1, required=True)
@click.option("--list", "list_name", metavar="NAME", help="Only the messages of this list.")
@click.option(
    "--limit",
    type=limits.count(limits.MAX_HITS),
    default=20,
    show_default=True,
    metavar="N",
    help="At most N hits.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON array (fields: see docs/mail.md).")
@click.pass_obj
def search_command(
    app: App, query: tuple[str, ...], list_name: str | None, limit: int, as_json: bool
) -> None:
    """Find stored messages containing every word of QUERY (subject, sender, body).

    Put a phrase in double quotes, inside the shell's quotes: thresher search
    '"exact phrase" word'. Best matches first, then newest."""
    text = " ".join(query)
    if not parse_query(text):
        raise UsageError(f"nothing to search for in {text!r}: give words or quoted phrases")
    with app.store() as store, store.transaction(write=False) as tx:
        if list_name is not None:
            get_source(tx, list_name)
        rows = search_messages(tx, store.backend, text, list_name, limit)
    if as_json:
        click.echo(json.dumps([hit_json(r) for r in rows], indent=2, ensure_ascii=False))
        return
    console = Console()
    if not console.is_terminal:
        for r in rows:
            fields = (
                iso(r["date"]) or "-",
                r["source"],
                _flat(_sender(r)),
                _flat(r["subject"]),
                r["message_id"] or "-",
                r["snippet"],
            )
            click.echo("\t".join(_flat(f) for f in fields))
        return
    if not rows:
        console.print("no messages match", style="dim")
        return
    table = Table("date", "list", "from", "subject", "snippet")
    for r in rows:
        snippet = Text(r["snippet"])
        for start, end in r["matches"]:
            snippet.stylize("bold yellow", start, end)
        table.add_row(
            (iso(r["date"]) or "")[:10],
            Text(r["source"]),
            Text(_sender(r)),
            Text(r["subject"] or ""),
            snippet,
        )
    console.print(table)
