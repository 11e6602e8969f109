"""`thresher source …`: the source directory."""

from __future__ import annotations

import json
import time

import click

from ..errors import UsageError
from ..sources import Source, add_source, all_types, get_source, get_type, list_sources
from ..sources import remove_source as remove
from ..sources.types import shown_options
from ..status import iso
from .app import App
from .commands import examples, summary

__all__ = ["source_group"]


def source_json(source: Source) -> dict[str, object]:
    return {
        "name": source.name,
        "type": source.type,
        "url": source.url,
        "options": shown_options(source.type, source.options),
        "created": iso(source.created),
        "updated": iso(source.updated),
    }


@click.group(
    "source",
    short_help=summary("source"),
    epilog=examples(
        "thresher source add maven-dev 'https://lists.apache.org/list.html?dev@maven.apache.org'",
        "thresher source list --json",
    ),
)
def source_group() -> None:
    """Add, list, show and remove sources (the things to harvest)."""


@source_group.command(
    "add",
    epilog=examples(
        "thresher source add maven-dev 'https://lists.apache.org/list.html?dev@maven.apache.org'",
        "thresher source add site https://example.org/ --type web -o scope=domain -o delay=2",
    ),
)
@click.argument("name")
@click.argument("url")
@click.option("-t", "--type", "type_name", help="Source type (see 'thresher source types').")
@click.option(
    "-o", "--option", "options", multiple=True, metavar="KEY=VALUE", help="A type option; repeat."
)
@click.pass_obj
def add_command(
    app: App, name: str, url: str, type_name: str | None, options: tuple[str, ...]
) -> None:
    """Add source NAME harvesting URL."""
    raw: dict[str, str] = {}
    for item in options:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--option {item!r}: expected KEY=VALUE")
        raw[key.strip()] = value
    with app.store() as store, store.transaction() as tx:
        source = add_source(tx, name, url, type_name, raw, time.time())
    click.echo(f"added source {source.name} ({source.type}) {source.url}")


@source_group.command(
    "list", epilog=examples("thresher source list", "thresher source list --json")
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="One JSON array; each source has name, type, url, options (defaults filled in),"
    " created and updated (ISO 8601 UTC).",
)
@click.pass_obj
def list_command(app: App, as_json: bool) -> None:
    """List the sources."""
    with app.store(read=True) as store, store.transaction(write=False) as tx:
        sources = list_sources(tx)
    if as_json:
        click.echo(json.dumps([source_json(s) for s in sources], indent=2))
        return
    if not sources:
        click.echo("no sources yet: add one with 'thresher source add NAME URL --type TYPE'")
    for s in sources:
        click.echo(f"{s.name}\t{s.type}\t{s.url}")


@source_group.command(
    "show", epilog=examples("thresher source show maven-dev", "thresher source show site --json")
)
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="As JSON.")
@click.pass_obj
def show_command(app: App, name: str, as_json: bool) -> None:
    """Show one source with its options."""
    with app.store(read=True) as store, store.transaction(write=False) as tx:
        source = get_source(tx, name)
    if as_json:
        click.echo(json.dumps(source_json(source), indent=2))
        return
    docs = get_type(source.type).options
    click.echo(f"name:    {source.name}\ntype:    {source.type}\nurl:     {source.url}")
    click.echo(f"created: {iso(source.created)}")
    for key, value in sorted(shown_options(source.type, source.options).items()):
        doc = docs[key].doc if key in docs else ""
        click.echo(f"  {key} = {json.dumps(value)}    {doc}")


@source_group.command("remove", epilog=examples("thresher source remove maven-dev"))
@click.argument("name")
@click.pass_obj
def remove_command(app: App, name: str) -> None:
    """Remove a source. What it harvested stays in the store."""
    with app.store() as store, store.transaction() as tx:
        remove(tx, name, time.time())
    click.echo(f"removed source {name}")


@source_group.command(
    "types", epilog=examples("thresher source types", "thresher source types | grep -A12 '^web'")
)
def types_command() -> None:
    """List the source types and their options."""
    for stype in all_types():
        click.echo(f"{stype.name}: {stype.doc}")
        for key, opt in stype.options.items():
            click.echo(f"  -o {key}=…  {opt.doc} (default {json.dumps(opt.default)})")
