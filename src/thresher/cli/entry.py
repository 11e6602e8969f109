"""The `thresher` program's entry point, small on purpose.

Everything the commands need is imported inside `entry`, so that a Ctrl-C while Python
loads them (a second or two on a busy machine) is caught here and ends the program with
one line, not a KeyboardInterrupt traceback: only the interpreter's own start comes
before the handler (the `thresher` package imports nothing with itself).

CPython can eat that KeyboardInterrupt: when the signal's handler runs inside a weakref
callback, as the import system's module locks have, the exception cannot propagate and
is printed as "Exception ignored in …" while the program goes on as if no key was
pressed. `_CtrlC` notes such a Ctrl-C instead of printing it and raises it again from
the next import, which an import-bound start comes to within milliseconds.
"""

from __future__ import annotations

import sys

__all__ = ["EXIT_INTERRUPTED", "entry"]

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a program Ctrl-C stopped


class _CtrlC:
    """An unraisable-exception hook and an import finder (first in `sys.meta_path`): a
    KeyboardInterrupt CPython could not raise is kept quiet, and raised by the next
    import instead (see the module docstring). It finds no module itself."""

    def __init__(self) -> None:
        self.pending = False
        self._hook = sys.unraisablehook

    def unraisable(self, args: sys.UnraisableHookArgs) -> None:
        if isinstance(args.exc_value, KeyboardInterrupt):
            self.pending = True
        else:
            self._hook(args)

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> None:
        if self.pending:
            self.pending = False
            raise KeyboardInterrupt


def entry() -> int:
    """The `thresher` program: `main` in a process of its own, tuned for long runs
    (`main(program=True)`), whose files are private."""
    ctrl_c = _CtrlC()
    sys.unraisablehook = ctrl_c.unraisable
    sys.meta_path.insert(0, ctrl_c)
    try:
        from ..runtime import private_files
        from .main import main

        private_files()
        code = main(program=True)
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
        sys.stderr.write("thresher: interrupted\n")
    # Done: a Ctrl-C now would only interrupt the interpreter's own exit (joining the
    # store's threads), with a traceback. (Imported here: `signal` takes longer to
    # import than the rest of this module, and Python's own handler raises the
    # KeyboardInterrupt caught above.)
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return code
