"""Secrets never print: every command, run against a PostgreSQL store whose URL carries
known passwords, and with store URLs that are wrong in each way libpq or Thresher
complains about; nothing any of them prints (standard output, standard error, the
logs at -vv, the crawl's child processes) contains a password."""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from aiohttp import web
from hostile_server import Hostile, Probe, run_thresher

PW_USERINFO = "Us3rinfo-Secret"
PW_QUERY = "Qu3ry-Secret"
PW_KEYWORD = "K3yword-Secret"
SECRETS = (PW_USERINFO, PW_QUERY, PW_KEYWORD)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def database(pg_admin_url: str) -> Iterator[tuple[str, int, str]]:
    """(host, port, database) of a new database on the test server (trust auth: a
    password in the URL is sent and ignored)."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"'.encode())
    port = int(pg_admin_url.rsplit(":", 1)[1].split("/", 1)[0])
    yield "127.0.0.1", port, name


def _clean(probe: Probe, what: str) -> None:
    for secret in SECRETS:
        for stream in (probe.stdout, probe.stderr):
            assert secret not in stream, f"{what} printed a password:\n{stream}"
    assert "Traceback" not in probe.stderr, f"{what}:\n{probe.stderr}"


def test_no_command_prints_the_store_password(
    database: tuple[str, int, str], tmp_path: Path
) -> None:
    host, port, name = database
    # Both URL forms at once: the user information's password and the query's.
    url = f"postgresql://postgres:{PW_USERINFO}@{host}:{port}/{name}?password={PW_QUERY}"
    env = {"THRESHER_DB": url}
    home = tmp_path / "home"
    dump = tmp_path / "requests.jsonl"
    message = b"From a@b.c Mon Jan  1 00:00:00 2024\nSubject: release\nMessage-ID: <1@b>\n\nhi\n"
    with Hostile() as site:

        async def page(request: web.Request) -> web.Response:
            return web.Response(text="<a href='/b'>b</a>", content_type="text/html")

        async def mbox(request: web.Request) -> web.Response:
            return web.Response(body=message, content_type="application/mbox")

        site.routes.update({"/": page, "/b": page, "/list.mbox": mbox})
        dump.write_text(
            json.dumps(
                {
                    "ingest_type": "pdf",
                    "base_url": site.url("/paper.pdf"),
                    "link_source": "t",
                    "link_source_id": "1",
                }
            )
            + "\n"
        )
        private = ("-o", "allow_private=1", "-o", "delay=0")
        commands: list[tuple[str, ...]] = [
            ("config",),
            ("-vv", "source", "add", "site", site.url("/"), "-t", "web", *private),
            ("source", "add", "list", site.url("/list.mbox"), "-t", "mbox", *private),
            ("source", "list", "--json"),
            ("-vv", "run", "--json", "--no-progress"),
            ("-vv", "crawl", site.url("/"), "--allow-private", "--shards", "2", "--json"),
            ("status",),
            ("export", "list", "--format", "jsonl"),
            ("search", "release", "--json"),
            ("-vv", "ingest", "load", str(dump)),
            ("-vv", "ingest", "run", "--allow-private", "--delay", "0", "--json"),
            ("ingest", "stats", "--json"),
            ("source", "remove", "site"),
            ("source", "show", "site"),  # an error: no such source
        ]
        for args in commands:
            probe = run_thresher(home, *args, env=env, timeout=180)
            _clean(probe, f"thresher {' '.join(args)}")
            assert probe.returncode in (0, 2), (args, probe.stderr)
        # The store URL is shown, masked, where it is shown at all.
        status = run_thresher(home, "status", "--json", env=env)
        _clean(status, "thresher status --json")
        assert json.loads(status.stdout)["store"]["url"] == (
            f"postgresql://postgres:***@{host}:{port}/{name}?password=***"
        )
        config = run_thresher(home, "config", env=env).stdout
        assert f"db = postgresql://postgres:***@{host}:{port}/{name}?password=***" in config
        worker = run_thresher(
            home,
            *("-vv", "worker"),
            env=env,
            term_when=lambda err: "***" in err,  # it says which store it works on, masked
            timeout=60,
        )
        _clean(worker, "thresher worker")
        assert not worker.killed and "***" in worker.stderr


@pytest.mark.parametrize(
    "url",
    [
        "host={host} port={port} dbname={name} user=postgres password=" + PW_KEYWORD,
        "mysql://postgres:" + PW_USERINFO + "@{host}:{port}/{name}",
        "postgresql://postgres:" + PW_USERINFO + "@{host}:notaport/{name}",
        "postgresql://postgres:" + PW_USERINFO + "%zz@{host}:{port}/{name}",
        "postgresql://postgres:" + PW_USERINFO + "@[::1/{name}",
        "postgresql://postgres@{host}:{port}/{name}?password=" + PW_QUERY + "&bogus=1",
    ],
    ids=[
        "keyword-value",
        "wrong-scheme",
        "bad-port",
        "bad-percent-escape",
        "unterminated-ipv6",
        "unknown-parameter",
    ],
)
def test_a_bad_store_url_is_refused_without_its_password(
    url: str, database: tuple[str, int, str], tmp_path: Path
) -> None:
    host, port, name = database
    db = url.format(host=host, port=port, name=name)
    home = tmp_path / "home"
    for probe in (
        run_thresher(home, "config", env={"THRESHER_DB": db}),
        run_thresher(home, "-vv", "status", env={"THRESHER_DB": db}),
        run_thresher(home, "--db", db, "-vv", "run", "--no-progress"),
    ):
        _clean(probe, f"thresher {' '.join(probe.args)}")
        if probe.args != ("config",) or not db.startswith("postgresql://"):
            assert probe.returncode in (2, 3), probe.stderr
            assert "thresher: error:" in probe.stderr
