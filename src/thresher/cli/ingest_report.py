"""`thresher ingest results` and `thresher ingest stats`: what the ingest found.

`results` is the hand-over to a downstream importer, so its output is JSON Lines and
nothing else on standard output: one result per line, written as it is read, so that an
importer can start on the first line while the rest is still coming, and a store of any
size can be exported. `--json` is accepted and changes nothing; scripts written when
it was needed still pass it. With `-o FILE` the file is replaced only once complete, as
with `thresher export`, since an importer cannot tell a cut file from a short one.

`stats` is for people: tables on a terminal, tab-separated lines otherwise, the report
as one JSON object with `--json`.

These commands live beside `cli/ingest.py` rather than in it and are attached to the
`ingest` group by `register`, so that the module that fetches and the one that reports
can change independently.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

import click
from rich.console import Console
from rich.table import Table

from ..ingest.report import PENDING, ingest_stats, iter_results
from ..ingest.request_line import INGEST_TYPES
from .app import App
from .commands import examples
from .export import write_output

__all__ = ["register", "results_command", "stats_command"]


def register(group: click.Group) -> None:
    """Attach `results` and `stats` to the `ingest` group."""
    group.add_command(results_command)
    group.add_command(stats_command)


def _statuses(values: Iterable[str]) -> list[str]:
    """`--status a,b --status c` → [a, b, c], each once, in the order given."""
    out: dict[str, None] = {}
    for value in values:
        for part in value.split(","):
            if part.strip():
                out[part.strip()] = None
    return list(out)


def _write_lines(lines: Iterable[dict[str, Any]], out: IO[bytes]) -> int:
    count = 0
    for line in lines:
        text = json.dumps(line, ensure_ascii=False, separators=(",", ":"))
        out.write(text.encode("utf-8") + b"\n")
        count += 1
    return count


@click.command(
    "results",
    epilog=examples(
        "thresher ingest results --status success -o hits.jsonl",
        "thresher ingest results --source unpaywall | jq -r .status | sort | uniq -c",
    ),
)
@click.option(
    "--status",
    "statuses",
    metavar="S",
    multiple=True,
    help="Only results with this status; repeat it or separate statuses by commas.",
)
@click.option(
    "--source", metavar="S", help="Only results this link_source asked for (all its requests)."
)
@click.option(
    "--type",
    "ingest_type",
    type=click.Choice(sorted(INGEST_TYPES)),
    help="Only results of this ingest_type.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="JSON Lines, as without it (kept for scripts that pass it).",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write to FILE (replaced only once complete) instead of standard output.",
)
@click.pass_obj
def results_command(
    app: App,
    statuses: tuple[str, ...],
    source: str | None,
    ingest_type: str | None,
    as_json: bool,
    output: Path | None,
) -> None:
    """Write the ingest results as JSON Lines, one per fetched URL, ordered by
    ingest_type and base_url: what was found (status, hit, terminal URL, hops, error),
    the file (file_meta, or null) and every request naming the URL. Each line has
    ingest_type, base_url, hit, status, terminal_url, terminal_status, hops, error,
    attempts, updated, file_meta (sha1, sha256, md5, size, mimetype, warc_file,
    warc_offset) and
    requests (link_source, link_source_id, release_stage, ext_ids, request). Exits 0
    even when nothing matches."""
    del as_json  # JSON Lines is the only output; the flag stays for old scripts
    wanted = _statuses(statuses)
    with app.store(read=True) as store, store.transaction(write=False) as tx:
        results = iter_results(tx, status=wanted, link_source=source, ingest_type=ingest_type)
        count, where = write_output(output, lambda out: _write_lines(results, out), "results")
    if app.verbose >= 0:
        noun = "result" if count == 1 else "results"
        click.echo(f"wrote {count} {noun} to {where}", err=True)


@click.command("stats", epilog=examples("thresher ingest stats", "thresher ingest stats --json"))
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="As one JSON object: requests, urls, results, hits, by_status, by_source, by_type.",
)
@click.pass_obj
def stats_command(app: App, as_json: bool) -> None:
    """Count requests, URLs, results and hits; results by status; requests by source
    (pending: no result yet, and by the status of their URL's result); requests,
    results and hits by ingest_type."""
    with app.store(read=True) as store, store.transaction(write=False) as tx:
        stats = ingest_stats(tx)
    if as_json:
        click.echo(json.dumps(stats, indent=2, ensure_ascii=False))
        return
    console = Console()
    if console.is_terminal:
        _print_tables(console, stats)
    else:
        for line in _plain_lines(stats):
            click.echo(line)


def _summary(stats: dict[str, Any]) -> str:
    return (
        f"requests {stats['requests']}, urls {stats['urls']}, "
        f"results {stats['results']}, hits {stats['hits']}"
    )


def _sections(stats: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) of each table: one layout for the terminal and for pipes."""
    statuses = list(stats["by_status"])
    sections: list[tuple[str, list[str], list[list[str]]]] = [
        ("by status", ["status", "results"], [[s, str(n)] for s, n in stats["by_status"].items()])
    ]
    # Every status under a source is some result's, so by_status names them all and its
    # order (most frequent first) makes the columns.
    source_rows = [
        [name, str(c["requests"]), str(c[PENDING]), *(str(c.get(s, 0)) for s in statuses)]
        for name, c in stats["by_source"].items()
    ]
    sections.append(("by source", ["source", "requests", PENDING, *statuses], source_rows))
    type_rows = [
        [name, str(c["requests"]), str(c["results"]), str(c["hits"])]
        for name, c in stats["by_type"].items()
    ]
    sections.append(("by type", ["type", "requests", "results", "hits"], type_rows))
    return sections


def _plain_lines(stats: dict[str, Any]) -> Iterable[str]:
    yield _summary(stats)
    for title, header, rows in _sections(stats):
        if rows:
            yield ""
            yield "\t".join(header)
            yield from ("\t".join(row) for row in rows)
        else:
            yield ""
            yield f"{title}: none"


def _print_tables(console: Console, stats: dict[str, Any]) -> None:
    console.print(_summary(stats))
    for title, header, rows in _sections(stats):
        if not rows:
            console.print(f"{title}: none")
            continue
        table = Table(*header, title=title)
        for column in table.columns[1:]:
            column.justify = "right"
        for row in rows:
            table.add_row(*row)
        console.print(table)
