"""Tables for people on a terminal, tab-separated lines for everything else.

A command's output that goes to a file, a pipe or a script is plain: one line per row,
cells separated by tabs (tabs and line breaks inside a cell become spaces), a header
line first. Only a terminal gets rich's tables, sized to it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence

import click

__all__ = ["flat", "print_table", "stdout_is_terminal"]


def stdout_is_terminal() -> bool:
    return sys.stdout.isatty()


def flat(cell: object) -> str:
    """A cell as one tab-free line."""
    return " ".join(str("" if cell is None else cell).split())


def print_table(
    header: Sequence[str],
    rows: Iterable[Sequence[object]],
    *,
    title: str | None = None,
    width: int | None = None,
) -> None:
    """`rows` under `header`: a rich table on a terminal (`width` columns at most, if
    given), else a header line and a line per row, tab-separated."""
    if stdout_is_terminal():
        from rich.console import Console
        from rich.table import Table

        table = Table(*header, title=title)
        for row in rows:
            table.add_row(*(str("" if c is None else c) for c in row))
        Console(width=width).print(table)
        return
    click.echo("\t".join(flat(h) for h in header))
    for row in rows:
        click.echo("\t".join(flat(c) for c in row))
