"""The mail archive benchmark (run.py). A package only so that mypy, which checks all of
benchmarks/, tells its run.py from benchmarks/crawl/run.py."""
