"""The JSON API and the metrics of `thresher serve`, over SQLite and PostgreSQL stores
filled by real harvests: the same data as the CLI's JSON, field for field."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli_proc import Home
from conftest import new_pg_database
from serve_harvest import Filled, Served, fill, start_serve, stop_serve
from thresher.errors import StoreError
from thresher.store import open_store


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def api_served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    if request.param == "sqlite":
        filled: Filled = request.getfixturevalue("filled")
    else:
        db = new_pg_database(request.getfixturevalue("pg_admin_url"))
        filled = fill(Home(tmp_path_factory.mktemp("served-pg"), db))
    proc, url = start_serve(filled.home)
    try:
        yield Served(url, proc, filled)
    finally:
        stop_serve(proc)


def get(served: Served, path: str) -> Any:
    with urllib.request.urlopen(served.url.rstrip("/") + path, timeout=30) as resp:
        assert resp.headers["Content-Type"].startswith("application/json")
        return json.loads(resp.read())


def raw(served: Served, path: str) -> tuple[int, dict[str, str], bytes]:
    try:
        with urllib.request.urlopen(served.url.rstrip("/") + path, timeout=30) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, dict(exc.headers), exc.read()


def test_the_api_says_what_the_cli_says(api_served: Served, tmp_path: Path) -> None:
    served, home = api_served, api_served.filled.home
    cli = json.loads(home.run("status", "--json").stdout)
    assert get(served, "/api/status") == cli

    stats = json.loads(home.run("ingest", "stats", "--json").stdout)
    ingest = get(served, "/api/ingest")
    assert ingest["stats"] == stats
    assert len(ingest["results"]) == stats["results"]
    for status, n in stats["by_status"].items():
        assert len(get(served, f"/api/ingest?status={status}")["results"]) == n

    archives = {s["name"]: s["archive"] for s in cli["sources"] if "archive" in s}
    for name, archive in archives.items():
        page = get(served, f"/api/lists/{name}")
        assert page["archive"] == archive
        # Every message is in exactly one thread of its month.
        total = 0
        filed = page["filed"] or [
            {"month": m["month"], "messages": m["stored"]} for m in archive["months"]
        ]
        for f in filed:
            month = get(served, f"/api/lists/{name}/{f['month']}")
            assert month["messages"] == f["messages"]
            total += sum(t["size"] for t in month["items"])
        assert total == archive["messages"]

    hits = json.loads(home.run("search", "release", "notes", "--json", "--limit", "50").stdout)
    found = get(served, "/api/search?q=release+notes")["hits"]
    assert [h["id"] for h in found] == [h["id"] for h in hits]
    assert all(h["snippet"] == c["snippet"] for h, c in zip(found, hits, strict=True))

    # A month as mbox is what `thresher export --month` writes, byte for byte.
    month = archives["demo-ponymail"]["months"][-3]["month"]
    exported = tmp_path / "month.mbox"
    home.run("export", "demo-ponymail", "--month", month, "--format", "mbox", "-o", str(exported))
    status, headers, body = raw(served, f"/lists/demo-ponymail/{month}.mbox")
    assert status == 200 and body == exported.read_bytes()
    assert headers["Content-Disposition"].startswith("attachment")

    crawl = get(served, f"/api/crawls/{served.filled.crawl['source']}")
    assert crawl["runs"][0]["pages"] == served.filled.crawl["pages"]
    assert crawl["counts"]["done"] == served.filled.crawl["pages"]
    # The page counts the crawl's URLs by state: its /sitemap.xml, a 404 that the summary
    # does not count as an error (a site without one is not at fault), is one of them.
    assert crawl["counts"]["error"] == served.filled.crawl["errors"] + 1
    assert [h["host"] for h in crawl["hosts"]] == ["127.0.0.1"]


def test_a_thread_spans_its_replies_and_downloads_as_mbox(api_served: Served) -> None:
    served = api_served
    month = get(served, "/api/lists/demo-pipermail")["archive"]["months"][-3]["month"]
    threads = get(served, f"/api/lists/demo-pipermail/{month}")["items"]
    big = max(threads, key=lambda t: t["size"])
    thread = get(served, f"/api/lists/demo-pipermail/thread/{big['root']['id']}")
    ids = [m["id"] for m in thread["messages"]]
    assert {m["id"] for m in big["messages"]} <= set(ids)
    # From any of its messages, the same thread.
    last = get(served, f"/api/lists/demo-pipermail/thread/{ids[-1]}")
    assert [m["id"] for m in last["messages"]] == ids
    status, _headers, body = raw(served, f"/lists/demo-pipermail/thread/{ids[0]}.mbox")
    assert status == 200 and body.count(b"\nFrom ") + body.startswith(b"From ") == len(ids)
    message = get(served, f"/api/lists/demo-pipermail/message/{ids[1]}")
    assert message["parent"] in ids and message["text"]
    assert {h["name"] for h in message["shown"]} >= {"From", "Subject", "Date", "Message-ID"}


def test_metrics_parse_as_prometheus_text(api_served: Served) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    served = api_served
    status, headers, body = raw(served, "/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
    }
    cli = json.loads(served.filled.home.run("status", "--json").stdout)
    for state, n in cli["jobs"].items():
        assert samples[("thresher_jobs", (("state", state),))] == n
    crawl = served.filled.crawl
    key = (("source", crawl["source"]),)
    assert samples[("thresher_crawl_pages_total", key)] == crawl["pages"]
    assert samples[("thresher_crawl_errors_total", key)] == crawl["errors"]
    for s in cli["sources"]:
        if "archive" in s:
            assert (
                samples[("thresher_archive_messages", (("source", s["name"]),))]
                == (s["archive"]["messages"])
            )
    stats = json.loads(served.filled.home.run("ingest", "stats", "--json").stdout)
    for status_, n in stats["by_status"].items():
        assert samples[("thresher_ingest_results", (("status", status_),))] == n


def test_unknown_names_are_404_and_writes_405(api_served: Served) -> None:
    served = api_served
    for path in (
        "/api/lists/nope",
        "/api/lists/demo-mbox/1999-13",
        "/api/lists/demo-mbox/message/999999999",
        "/api/lists/demo-mbox/thread/x",
        "/api/crawls/demo-mbox",
        "/lists/nope",
        "/crawls/nope/warc/..%2Fthresher.db",
    ):
        status, _h, _b = raw(served, path)
        assert status == 404, path
    req = urllib.request.Request(served.url + "api/status", method="POST", data=b"")
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(req, timeout=30)
    with caught.value:
        assert caught.value.code == 405


def test_a_read_only_store_refuses_every_write(store_url: str) -> None:
    open_store(store_url).close()  # made and migrated
    store = open_store(store_url, readonly=True)
    try:
        with pytest.raises(StoreError), store.transaction(write=True):
            pass
        with pytest.raises(Exception, match=r"(?i)read.?only"), store.transaction(False) as tx:
            tx.execute("delete_source", name="x")
    finally:
        store.close()
