"""Three `thresher worker` processes, each in a network namespace of its own (made with
`ip netns`, loopback only), on one PostgreSQL store, one of them killed with `kill -9`
in the middle: a crawl of a multi-host site and a URL list on another site are each
stored exactly once, and (from the server's own request log) no host is ever fetched
twice within its delay.

Nothing but loopback exists in a namespace, so the workers reach PostgreSQL through its
unix socket (the file system is shared), and the sites' one server process also listens
inside every namespace: a short-lived thread enters the namespace with setns(2) and binds
the listening sockets there (a socket stays in the namespace it was made in). Each
request is logged with the namespace it came in through.

Needs root and a working `ip netns add`; skipped otherwise.
"""

from __future__ import annotations

import ctypes
import functools
import os
import shutil
import socket
import subprocess
import threading
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import psycopg
import pytest
from crawlsite import SiteServer, build_site
from fleet import add_sources, crawled, too_close, watch_workers
from psycopg.conninfo import conninfo_to_dict

from cli_proc import Home
from conftest import new_pg_database

DELAY = 0.2
WORKERS = 3
CLONE_NEWNET = 0x40000000  # from <sched.h>
T = TypeVar("T")


# -- network namespaces ---------------------------------------------------------------------


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


def _ns_inode(name: str) -> int:
    return os.stat(f"/var/run/netns/{name}").st_ino


def in_netns(name: str, fn: Callable[[], T]) -> T:
    """`fn()`, called in a short-lived thread that has entered network namespace `name`
    (setns affects only the calling thread; the rest of the process stays where it is)."""
    result: list[T] = []
    failed: list[BaseException] = []

    def work() -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = os.open(f"/var/run/netns/{name}", os.O_RDONLY)
            try:
                if int(libc.setns(fd, CLONE_NEWNET)) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"setns({name}): {os.strerror(err)}")
            finally:
                os.close(fd)
            assert os.stat("/proc/thread-self/ns/net").st_ino == _ns_inode(name)
            result.append(fn())
        except BaseException as e:
            failed.append(e)

    thread = threading.Thread(target=work, name=f"netns-{name}")
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    return result[0]


def listening_sockets(addrs: list[tuple[str, int]]) -> list[socket.socket]:
    socks: list[socket.socket] = []
    try:
        for addr in addrs:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(addr)
            sock.listen(128)
    except BaseException:
        for sock in socks:
            sock.close()
        raise
    return socks


def refused(addr: tuple[str, int]) -> bool:
    try:
        socket.create_connection(addr, timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


@pytest.fixture
def namespaces() -> Iterator[list[str]]:
    """WORKERS fresh network namespaces with only `lo`, up; deleted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    if shutil.which("ip") is None:
        pytest.skip("no `ip` command (iproute2)")
    if not hasattr(ctypes.CDLL(None), "setns"):
        pytest.skip("libc has no setns()")
    names = [f"thresher-{os.getpid()}-w{i}" for i in range(WORKERS)]
    made: list[str] = []
    try:
        for name in names:
            added = _ip("netns", "add", name)
            if added.returncode != 0:
                if not made:
                    pytest.skip(f"`ip netns add` does not work here: {added.stderr.strip()}")
                raise AssertionError(f"ip netns add {name}: {added.stderr}")
            made.append(name)
            up = _ip("netns", "exec", name, "ip", "link", "set", "lo", "up")
            assert up.returncode == 0, up.stderr
        # Really another network: a port listening out here is not there.
        with socket.create_server(("127.0.0.1", 0)) as outside:
            where = outside.getsockname()
            assert all(in_netns(name, lambda: refused(where)) for name in names)
        yield names
    finally:
        for name in made:
            _ip("netns", "del", name)


class NetnsHome(Home):
    """The same home folder and store, with commands run inside network namespace
    `netns` (`ip netns exec` execs the command, so the process keeps its pid)."""

    def __init__(self, path: Path, db: str | None, netns: str, **env: str) -> None:
        super().__init__(path, db, **env)
        self.netns = netns

    def cmd(self, *args: str) -> list[str]:
        return ["ip", "netns", "exec", self.netns, *super().cmd(*args)]


def socket_url(admin_url: str, db_url: str) -> str:
    """`db_url`'s database reached through the server's unix socket, which network
    namespaces do not hide; skips when the server has none on this machine."""
    with psycopg.connect(admin_url) as conn:
        dirs = str(conn.execute("SHOW unix_socket_directories").fetchone()[0])  # type: ignore[index]
        port = str(conn.execute("SHOW port").fetchone()[0])  # type: ignore[index]
    found = [d for d in (d.strip() for d in dirs.split(",")) if d.startswith("/")]
    found = [d for d in found if Path(d, f".s.PGSQL.{port}").exists()]
    if not found:
        pytest.skip(f"PostgreSQL has no unix socket here (unix_socket_directories={dirs!r})")
    info = conninfo_to_dict(db_url)
    auth = quote(str(info.get("user", "postgres")), safe="")
    if info.get("password"):
        auth += ":" + quote(str(info["password"]), safe="")
    dbname = quote(str(info["dbname"]), safe="")
    return f"postgresql://{auth}@/{dbname}?host={quote(found[0], safe='')}&port={port}"


# -- the run ---------------------------------------------------------------------------------


def harvest(home: Home, namespaces: list[str]) -> dict[str, Any]:
    """Queue a run of every source, let a worker in each namespace do it, kill -9 the
    one holding the crawl once work is under way; return what was stored and who was
    killed when."""
    home.run("run", "--detach")
    procs = {
        name: NetnsHome(home.path, home.db, name, **home.env).start(
            "worker", "--name", name, "-c", "4", "--grace", "5"
        )
        for name in namespaces
    }

    def victim() -> int | None:
        progress = home.query(
            "SELECT (SELECT count(*) FROM documents) AS docs,"
            " (SELECT coalesce(max(pages), 0) FROM crawl_runs) AS pages"
        )[0]
        # A worker is named what it was named (no pid in it): its pid is in `workers`.
        owners = home.query(
            "SELECT w.pid FROM jobs j JOIN workers w ON w.owner = j.lease_owner"
            " WHERE j.kind = 'web.crawl' AND j.state = 'leased'"
        )
        if not (owners and progress["docs"] and progress["pages"] >= 10):
            return None
        # Each worker runs in its own namespace (the test process does not).
        for name, proc in procs.items():
            if proc.poll() is None:
                ns = os.stat(f"/proc/{proc.pid}/ns/net").st_ino
                assert ns == _ns_inode(name) != os.stat("/proc/self/ns/net").st_ino
        return int(owners[0]["pid"])

    killed, killed_at = watch_workers(home, procs, 90, victim)
    assert killed is not None, "the crawl finished before a worker could be killed"
    return {
        "outcomes": sorted(r["outcome"] for r in home.query("SELECT outcome FROM source_runs")),
        "pages": crawled(home.path),
        "docs": Counter(r["url"] for r in home.query("SELECT url FROM documents")),
        "workers": home.query("SELECT owner, jobs_done FROM workers"),
        "killed": killed,
        "killed_at": killed_at,
    }


@pytest.mark.slow
def test_workers_in_separate_network_namespaces_store_everything_once_and_stay_polite(
    pg_admin_url: str, namespaces: list[str], tmp_path: Path
) -> None:
    db = socket_url(pg_admin_url, new_pg_database(pg_admin_url))
    crawl, docs = SiteServer(hosts=3), SiteServer(hosts=2)
    for server in (crawl, docs):
        for name in namespaces:
            addrs = [(ip, server.port) for ip in server.ips]
            for sock in in_netns(name, functools.partial(listening_sockets, addrs)):
                server.listen(sock, name)
    with crawl, docs:
        seeds = build_site(crawl, pages_per_host=25)
        build_site(docs, pages_per_host=10, seed=11)
        # Only plain pages in the list: its awkward ones (a redirect loop, a page that
        # fails once and is retried after a back-off) take long and are tested elsewhere.
        docs.pages = {url: page for url, page in docs.pages.items() if "/p/" in url}
        expected = crawl.reachable(seeds) | {f"{crawl.base(i)}/robots.txt" for i in range(3)}
        home = Home(tmp_path / "home", db, THRESHER_LEASE_SECONDS="3")
        add_sources(home, crawl, seeds, docs, DELAY)
        got = harvest(home, namespaces)
        crawl_hits, doc_hits = list(crawl.hits), list(docs.hits)

    assert got["outcomes"] == ["ok", "ok"]
    # Each page and document stored once, and what the sites serve.
    assert set(got["pages"]) == expected
    assert max(got["pages"].values()) == 1
    assert set(got["docs"]) == set(docs.pages) and max(got["docs"].values()) == 1
    # The work was shared (the killed worker's count may not have reached its last
    # heartbeat) …
    assert sum(1 for w in got["workers"] if w["jobs_done"]) >= 2
    # … and every request came in through a worker's namespace, none from out here: the
    # killed worker's crawl was carried on from another namespace.
    hits = crawl_hits + doc_hits
    assert {h.via for h in hits} <= set(namespaces) and len({h.via for h in hits}) >= 2
    assert got["killed"] in {h.via for h in crawl_hits if h.at < got["killed_at"]}
    assert {h.via for h in crawl_hits if h.at > got["killed_at"]} - {got["killed"]}
    # No host fetched twice within its delay, whichever namespace asked.
    by_host: dict[str, list[float]] = defaultdict(list)
    for hit in hits:
        by_host[hit.url.split("/")[2]].append(hit.at)
    assert too_close(by_host, DELAY) == {}
