from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import settings

import chromium
from cli_proc import Home
from pg import PgServer, find_pg_bin
from serve_harvest import Filled, Served, fill, start_serve, stop_serve
from thresher.store import Store, open_store
from wayback import pywb_bin  # noqa: F401  (a fixture for the replay tests)

BACKENDS = ["sqlite", "postgres"]

# No test depends on how fast the machine is: Hypothesis's 200 ms deadline per example
# failed a property test on a loaded machine (320 ms) that passes alone. Every @given
# says deadline=None too; this profile covers one that forgets (its settings inherit).
settings.register_profile("thresher", deadline=None)
settings.load_profile("thresher")

# A test that starts real HyperKitty (Django), pywb or Chromium takes seconds before its
# first assert: `-m "not slow"` leaves it out (the tests that run long on their own are
# marked where they are written).
SLOW_FIXTURES = {"hyperkitty", "pywb_bin", "browser"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def pg_admin_url() -> Iterator[str]:
    """A PostgreSQL server on which tests create and drop their own databases."""
    if os.environ.get("THRESHER_TEST_PG"):
        yield os.environ["THRESHER_TEST_PG"]
        return
    bindir = find_pg_bin()
    if bindir is None:
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL is not installed: .ci/run should have installed it")
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql)")
    server = PgServer(bindir).start()
    try:
        yield server.url
    finally:
        server.stop()


def new_pg_database(admin_url: str) -> str:
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return admin_url.rsplit("/", 1)[0] + f"/{name}"


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def drop_pg_database(admin_url: str, url: str) -> None:
    """Drop a test's database, whoever is still connected: hundreds of them (7 MB and a
    thousand files each) made the server's data 6 GB and its removal minutes long."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)')


@pytest.fixture
def store_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """A new, empty store of each backend: every test using it runs twice."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'thresher.db'}"
        return
    admin = request.getfixturevalue("pg_admin_url")
    url = new_pg_database(admin)
    yield url
    drop_pg_database(admin, url)


@pytest.fixture
def home(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Home]:
    """A home folder for the `thresher` command, with a new, empty store of each
    backend: every test using it runs twice."""
    if backend == "sqlite":
        yield Home(tmp_path / "home")
        return
    admin = request.getfixturevalue("pg_admin_url")
    url = new_pg_database(admin)
    yield Home(tmp_path / "home", url)
    drop_pg_database(admin, url)


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    s = open_store(store_url)
    try:
        yield s
    finally:
        s.close()


# --- thresher serve (tests/serve): one store filled by real harvests and one server over
# it for the session, one browser session per module.


@pytest.fixture(scope="session")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Filled:
    """A SQLite home filled by `thresher demo`, a hostile list, a crawl and an ingest."""
    return fill(Home(tmp_path_factory.mktemp("served-home")))


@pytest.fixture(scope="session")
def served(filled: Filled) -> Iterator[Served]:
    proc, url = start_serve(filled.home)
    try:
        yield Served(url, proc, filled)
    finally:
        stop_serve(proc)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium from Debian's packages (skipped, saying why, without it)."""
    reason = chromium.missing()
    if reason:
        pytest.skip(reason)
    with chromium.chromium() as driver:
        yield driver
