"""The `thresher` program's entry point, small on purpose.

Everything the commands need is imported inside `entry`, so that a Ctrl-C while Python
loads them (a second or two on a busy machine) is caught here and ends the program with
one line, not a KeyboardInterrupt traceback: only the interpreter's own start comes
before the handler (the `thresher` package imports nothing with itself).
"""

from __future__ import annotations

import sys

__all__ = ["EXIT_INTERRUPTED", "entry"]

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a program Ctrl-C stopped


def entry() -> int:
    """The `thresher` program: `main` in a process of its own, tuned for long runs
    (`main(program=True)`), whose files are private."""
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
