"""The command line: `entry.entry` is the `thresher` program, `main.main` runs a command
line and returns its exit code, `main.cli` is the click group. Nothing is imported with
the package: the entry point imports the rest itself, inside its Ctrl-C handler."""

__all__: list[str] = []
