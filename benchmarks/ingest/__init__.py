"""The ingest load benchmark (load.py). A package only so that mypy, which checks all of
benchmarks/, tells its modules from those of the other benchmarks."""
