"""The `thresher` command: global flags, the commands, and the one place errors become
exit codes. A ThresherError prints one line and exits with its code; only a bug shows
a traceback."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import click

from .. import __version__
from ..errors import ThresherError
from .commands import COMMANDS, examples, summary

__all__ = ["cli", "entry", "main"]


class LazyGroup(click.Group):
    """A group whose commands are imported when one is run or asked for, not before:
    `thresher --help` lists them from `commands.COMMANDS` without importing any."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in COMMANDS:
            module, attribute, _ = COMMANDS[cmd_name]
            command = getattr(importlib.import_module(f"{__package__}.{module}"), attribute)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx) if name in COMMANDS]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=examples(
        "thresher demo",
        "thresher source add maven-dev 'https://lists.apache.org/list.html?dev@maven.apache.org'"
        " && thresher run",
    ),
)
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
    """Thresher keeps local copies of web archives complete and current, run after run.

    Each command's --help says what it does and shows examples; the README (the
    package's page, https://pypi.org/project/thresher/) and the docs/ folder of the
    source distribution say more."""
    if isinstance(ctx.obj, dict) and ctx.obj.get("program"):
        # The `thresher` program itself, not a test calling `main`: the command and
        # everything it needs are imported by now (see `thresher.runtime`).
        from ..runtime import tune_process

        tune_process()
    from .app import App

    ctx.obj = App(flags={"home": home, "db": db}, verbose=-1 if quiet else verbose)


@cli.command(
    "config",
    short_help=summary("config"),
    epilog=examples("thresher config", "THRESHER_DELAY=0 thresher config | grep -A1 '^delay '"),
)
@click.pass_obj
def config_command(app: Any) -> None:
    """Show every setting: its value now, its environment variable and what it does.

    Settings come from HOME/thresher.toml, then THRESHER_* variables, then flags."""
    from ..config import describe

    for name, value, env, doc in describe(app.config):
        click.echo(f"{name} = {value}\n    {doc} [env {env}]")


def entry() -> int:
    """The `thresher` program (kept here for installs whose script names it)."""
    from .entry import entry as run

    return run()


def main(argv: list[str] | None = None, *, program: bool = False) -> int:
    """Run the command line `argv` (default: the process's); errors become one line and
    an exit code. `program`: this is the `thresher` program, not a caller of `main`."""
    try:
        cli.main(
            args=argv,
            prog_name="thresher",
            standalone_mode=False,
            obj={"program": True} if program else None,
        )
    except ThresherError as exc:
        from ..redact import redact_text

        click.echo(f"thresher: error: {redact_text(str(exc))}", err=True)
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("thresher: interrupted", err=True)
        return 130
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
