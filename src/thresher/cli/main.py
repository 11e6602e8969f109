"""The `thresher` command: global flags, the commands, and the one place errors become
exit codes. A ThresherError prints one line and exits with its code; only a bug shows
a traceback."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .. import __version__
from ..config import describe
from ..errors import ThresherError
from ..redact import redact_text
from ..runtime import private_files, tune_process
from .app import App
from .crawl import crawl_command
from .demo import demo_command
from .export import export_command
from .ingest import ingest_group
from .run import run_command
from .search import search_command
from .serve import serve_command
from .source import source_group
from .status import status_command
from .worker import worker_command

__all__ = ["cli", "entry", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="thresher")
@click.option(
    "--home",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="THRESHER_HOME",
    help="Home folder (store, content, config file). [env THRESHER_HOME; default ./thresher-data]",
)
@click.option(
    "--db",
    envvar="THRESHER_DB",
    metavar="URL",
    help="postgresql://… store instead of SQLite in the home folder. [env THRESHER_DB]",
)
@click.option("-v", "--verbose", count=True, help="More log output (-vv: debug).")
@click.option("-q", "--quiet", is_flag=True, help="Only warnings and errors.")
@click.pass_context
def cli(ctx: click.Context, home: Path | None, db: str | None, verbose: int, quiet: bool) -> None:
    """Thresher keeps local copies of web archives complete and current, run after run."""
    ctx.obj = App(flags={"home": home, "db": db}, verbose=-1 if quiet else verbose)


@cli.command("config")
@click.pass_obj
def config_command(app: App) -> None:
    """Show every setting: its value now, its environment variable and what it does.

    Settings come from HOME/thresher.toml, then THRESHER_* variables, then flags."""
    for name, value, env, doc in describe(app.config):
        click.echo(f"{name} = {value}\n    {doc} [env {env}]")


cli.add_command(crawl_command)
cli.add_command(demo_command)
cli.add_command(source_group)
cli.add_command(run_command)
cli.add_command(status_command)
cli.add_command(export_command)
cli.add_command(search_command)
cli.add_command(serve_command)
cli.add_command(ingest_group)
cli.add_command(worker_command)


def entry() -> int:
    """The `thresher` program: `main` in a process of its own, tuned for long runs,
    whose files are private."""
    private_files()
    tune_process()
    return main()


def main(argv: list[str] | None = None) -> int:
    try:
        cli.main(args=argv, prog_name="thresher", standalone_mode=False)
    except ThresherError as exc:
        click.echo(f"thresher: error: {redact_text(str(exc))}", err=True)
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("thresher: aborted", err=True)
        return 130
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
