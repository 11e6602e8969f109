"""Hostile numbers and what a run leaves on disk: usage errors, not tracebacks; private
files (see scenarios.py)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from aiohttp import web
from hostile_server import Hostile, hostile_fixture, run_thresher  # noqa: F401 (a fixture)
from scenarios import export_big_message, run_a_million_workers, search_huge_limit

from thresher.store import open_store


def test_a_huge_search_limit_is_a_usage_error(hostile: Hostile, tmp_path: Path) -> None:
    probe = search_huge_limit(hostile, tmp_path, None).probe
    assert probe.returncode == 2 and "Invalid value for '--limit'" in probe.stderr
    assert "Traceback" not in probe.stderr


def test_a_million_workers_is_a_usage_error(hostile: Hostile, tmp_path: Path) -> None:
    probe = run_a_million_workers(hostile, tmp_path, None).probe
    assert probe.returncode == 2 and "Invalid value for '-w' / '--workers'" in probe.stderr
    assert not probe.killed and probe.rss_mib < 200
    env = run_thresher(tmp_path / "home", "status", env={"THRESHER_WORKERS": "1000000"})
    assert env.returncode == 2 and "workers must be from 1 to 1024" in env.stderr


def test_exporting_a_big_message_costs_about_its_size(hostile: Hostile, tmp_path: Path) -> None:
    result = export_big_message(hostile, tmp_path, None)
    assert result.probe.returncode == 0, result.probe.stderr
    # 48 MiB: held as the row's bytes (and SQLite's copy), not 8 times over.
    assert result.probe.rss_mib < 250, result.probe.rss_mib


def test_files_are_private_whatever_the_umask(hostile: Hostile, tmp_path: Path) -> None:
    async def page(request: web.Request) -> web.Response:
        return web.Response(text="<p>hi</p>", content_type="text/html")

    hostile.routes["/"] = page
    home = tmp_path / "home"
    old = os.umask(0o022)  # the child inherits it: what most users have
    try:
        probe = run_thresher(
            home, "crawl", hostile.url("/"), "--allow-private", "--name", "c", "--delay", "0"
        )
    finally:
        os.umask(old)
    assert probe.returncode == 0, probe.stderr
    made = [home, *home.rglob("*")]
    assert any(p.name.endswith(".warc.gz") for p in made)
    assert any(p.name == "thresher.db" for p in made)
    for path in made:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode & 0o077 == 0, f"{path} is {oct(mode)}"


def test_a_sqlite_store_is_private_when_opened_from_python(tmp_path: Path) -> None:
    # Not only the `thresher` program (whose umask keeps others out): the API too.
    old = os.umask(0o022)
    try:
        store = open_store(f"sqlite:///{tmp_path / 'home' / 'thresher.db'}")
        store.close()
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "home").stat().st_mode) == 0o700
    for path in (tmp_path / "home").iterdir():  # the database, its -wal and -shm
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
