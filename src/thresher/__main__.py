import sys

from .cli.entry import entry

# Guarded: the child processes Thresher spawns (parsing) import the main module again.
if __name__ == "__main__":
    sys.exit(entry())
