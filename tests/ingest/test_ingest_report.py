"""`thresher ingest results` and `stats`: what a downstream importer and a person read
back out of the ingest tables, on both backends.

What they rely on: one JSON line per result in the documented shape, with the file and
every request naming the URL; the filters pick results and never trim a result's
requests; the counts are exact, pending requests included; and a big store comes out
line by line. Requests are loaded the way users load them; results and file metadata,
which `ingest run` writes, are inserted with plain SQL.
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

from thresher.cli.app import App
from thresher.cli.ingest_report import register, results_command, stats_command
from thresher.ingest.report import ingest_stats, iter_results
from thresher.ingest.requests import load_requests
from thresher.store import Store

NOW = 1_800_000_000.0
NOW_ISO = "2027-01-15T08:00:00+00:00"
A = "https://example.org/a.pdf"
B = "https://example.org/b"
C = "https://example.org/c.pdf"
D = "https://example.org/d.xml"
SHA_A = "a" * 40
SHA_B = "b" * 40
FILE_A = {
    "sha1": SHA_A,
    "sha256": "c" * 64,
    "md5": "d" * 32,
    "size": 5_000_000_000,  # past 32 bits: BIGINT on both backends
    "mimetype": "application/pdf",
    "warc_file": "ingest-00001.warc.gz",
    "warc_offset": 4_400_000_000,
}
# As `ingest run` records them; passed through as they are.
HOPS_A = [
    {"url": A, "status": 302, "kind": "redirect"},
    {"url": "https://cdn.example.org/a.pdf", "status": 200, "kind": "terminal"},
]
HOPS_B = [{"url": B, "status": 200, "kind": "terminal"}]


def execute(store_url: str, sql: str, rows: Sequence[Sequence[Any]]) -> None:
    """Run `sql` (with ? placeholders) once per row, outside the store's protocol."""
    if store_url.startswith("sqlite:///"):
        db = sqlite3.connect(store_url.removeprefix("sqlite:///"))
        try:
            with db:
                db.executemany(sql, rows)
        finally:
            db.close()
        return
    with psycopg.connect(store_url) as conn, conn.cursor() as cur:
        cur.executemany(sql.replace("?", "%s"), rows)


def add_requests(store: Store, tmp_path: Path, *lines: dict[str, Any]) -> None:
    path = tmp_path / "requests.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), "utf-8")
    report = load_requests(store, path, now=NOW)
    assert report.new == len(lines) and report.rejected == 0


def add_result(
    store_url: str,
    ingest_type: str,
    base_url: str,
    status: str,
    *,
    hit: bool = False,
    sha1: str | None = None,
    hops: Sequence[dict[str, Any]] = (),
    error: str | None = None,
    attempts: int = 1,
    updated: float = NOW,
) -> None:
    terminal = hops[-1]["url"] if hops else None
    execute(
        store_url,
        "INSERT INTO ingest_results (ingest_type, base_url, hit, status, terminal_url,"
        " terminal_status, terminal_sha1, hops, error, attempts, updated)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                ingest_type,
                base_url,
                int(hit),
                status,
                terminal,
                200 if terminal else None,
                sha1,
                json.dumps(list(hops)),
                error,
                attempts,
                updated,
            )
        ],
    )


def add_file(store_url: str, meta: dict[str, Any]) -> None:
    execute(
        store_url,
        "INSERT INTO file_meta (sha1, sha256, md5, size, mimetype, warc_file, warc_offset,"
        " first_seen) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [(*meta.values(), NOW)],
    )


@pytest.fixture
def sample(store: Store, store_url: str, tmp_path: Path) -> Store:
    """A: pdf named by two sources, a hit with its file. B: html, no file (its SHA-1 has
    no file_meta row). C: pdf, not fetched yet. D: xml, a result no request names."""
    add_requests(
        store,
        tmp_path,
        {
            "ingest_type": "pdf",
            "base_url": A,
            "link_source": "unpaywall",
            "link_source_id": "10.1/a",
            "release_stage": "published",
            "ext_ids": {"doi": "10.1/a"},
            "request": {"note": "é"},
        },
    )
    # A later load: core's request for A gets the higher id, though "core" sorts first.
    add_requests(
        store,
        tmp_path,
        {"ingest_type": "html", "base_url": B, "link_source": "core", "link_source_id": "7"},
        {"ingest_type": "pdf", "base_url": A, "link_source": "core", "link_source_id": "8"},
        {"ingest_type": "pdf", "base_url": C, "link_source": "core", "link_source_id": "9"},
    )
    add_file(store_url, FILE_A)
    add_result(
        store_url,
        "pdf",
        A,
        "success",
        hit=True,
        sha1=SHA_A,
        hops=HOPS_A,
        attempts=2,
    )
    add_result(store_url, "html", B, "wrong-mimetype", sha1=SHA_B, hops=HOPS_B, error="text/plain")
    add_result(store_url, "xml", D, "timeout", error="no answer in 60 s", updated=NOW + 123.7)
    return store


def results(store: Store, **filters: Any) -> list[dict[str, Any]]:
    with store.transaction(write=False) as tx:
        return list(iter_results(tx, **filters))


EXPECTED_A = {
    "ingest_type": "pdf",
    "base_url": A,
    "hit": True,
    "status": "success",
    "terminal_url": "https://cdn.example.org/a.pdf",
    "terminal_status": 200,
    "terminal_sha1": SHA_A,
    "hops": HOPS_A,
    "error": None,
    "attempts": 2,
    "updated": NOW_ISO,
    "file_meta": FILE_A,
    "requests": [
        {
            "link_source": "unpaywall",
            "link_source_id": "10.1/a",
            "release_stage": "published",
            "ext_ids": {"doi": "10.1/a"},
            "request": {"note": "é"},
        },
        {
            "link_source": "core",
            "link_source_id": "8",
            "release_stage": None,
            "ext_ids": None,
            "request": None,
        },
    ],
}


# --- iter_results ------------------------------------------------------------------------


def test_each_result_once_in_key_order_with_file_and_requests(sample: Store) -> None:
    got = results(sample)
    assert [(r["ingest_type"], r["base_url"]) for r in got] == [
        ("html", B),
        ("pdf", A),
        ("xml", D),
    ]
    html, pdf, xml = got
    # Both requests naming A, in the order they were stored, JSON fields parsed.
    assert pdf == EXPECTED_A
    assert list(pdf) == list(EXPECTED_A)  # the field order importers diff against
    # A SHA-1 without a file_meta row, and no SHA-1 at all: both null.
    assert html["terminal_sha1"] == SHA_B and html["file_meta"] is None
    assert html["hit"] is False and html["error"] == "text/plain" and html["hops"] == HOPS_B
    assert html["requests"] == [
        {
            "link_source": "core",
            "link_source_id": "7",
            "release_stage": None,
            "ext_ids": None,
            "request": None,
        }
    ]
    assert xml["file_meta"] is None and xml["terminal_url"] is None
    assert xml["terminal_status"] is None and xml["hops"] == []
    # A result no request names still comes out; updated is to the second, in UTC.
    assert xml["requests"] == [] and xml["updated"] == "2027-01-15T08:02:03+00:00"


def test_status_filter(sample: Store) -> None:
    assert [r["base_url"] for r in results(sample, status=["success"])] == [A]
    both = results(sample, status=["timeout", "wrong-mimetype"])
    assert [r["base_url"] for r in both] == [B, D]
    assert results(sample, status=["no-such-status"]) == []
    assert len(results(sample, status=())) == 3


def test_source_filter_picks_results_but_lists_every_request(sample: Store) -> None:
    # unpaywall asked for A only; A still lists core's request beside unpaywall's.
    assert results(sample, link_source="unpaywall") == [EXPECTED_A]
    assert [r["base_url"] for r in results(sample, link_source="core")] == [B, A]
    assert results(sample, link_source="nobody") == []


def test_type_filter_and_filters_combine(sample: Store) -> None:
    assert [r["base_url"] for r in results(sample, ingest_type="pdf")] == [A]
    assert [r["base_url"] for r in results(sample, ingest_type="xml")] == [D]
    assert results(sample, ingest_type="dataset") == []
    assert results(sample, ingest_type="pdf", status=["wrong-mimetype"]) == []
    combined = results(sample, link_source="core", status=["wrong-mimetype", "success"])
    assert [r["base_url"] for r in combined] == [B, A]


def test_empty_store(store: Store) -> None:
    assert results(store) == []


def test_many_results_stream_in_order(store: Store, store_url: str, tmp_path: Path) -> None:
    n = 5000
    urls = [f"https://example.org/p/{i:05d}.pdf" for i in range(n)]
    lines = [
        {"ingest_type": "pdf", "base_url": u, "link_source": s, "link_source_id": u}
        for u in urls
        for s in ("core", "unpaywall")
    ]
    add_requests(store, tmp_path, *lines)
    execute(
        store_url,
        "INSERT INTO ingest_results (ingest_type, base_url, hit, status, updated)"
        " VALUES (?, ?, 0, ?, ?)",
        [("pdf", u, "success" if i % 2 else "no-pdf-link", NOW) for i, u in enumerate(urls)],
    )
    with store.transaction(write=False) as tx:
        seen = 0
        for seen, record in enumerate(iter_results(tx), 1):
            assert record["base_url"] == urls[seen - 1]
            assert [q["link_source"] for q in record["requests"]] == ["core", "unpaywall"]
        assert seen == n
        # Stopping early is fine: the rest is simply not read.
        first = next(iter_results(tx, status=["success"]))
        assert first["base_url"] == urls[1]


# --- ingest_stats ------------------------------------------------------------------------


def test_stats_counts(sample: Store) -> None:
    with sample.transaction(write=False) as tx:
        stats = ingest_stats(tx)
    assert list(stats["by_status"]) == ["success", "timeout", "wrong-mimetype"]  # ties by name
    assert stats == {
        "requests": 4,
        "urls": 3,  # A, B, C; D has a result but no request
        "results": 3,
        "hits": 1,
        "by_status": {"success": 1, "timeout": 1, "wrong-mimetype": 1},
        "by_source": {
            # Requests: core's 8 (for A) and 7 (B) have results, 9 (C) is pending.
            "core": {"requests": 3, "pending": 1, "success": 1, "wrong-mimetype": 1},
            "unpaywall": {"requests": 1, "pending": 0, "success": 1},
        },
        "by_type": {
            "html": {"requests": 1, "results": 1, "hits": 0},
            "pdf": {"requests": 3, "results": 1, "hits": 1},
            "xml": {"requests": 0, "results": 1, "hits": 0},
        },
    }


def test_stats_statuses_most_frequent_first(store: Store, store_url: str) -> None:
    for i, status in enumerate(["b-status", "a-status", "b-status", "c-status", "c-status"]):
        add_result(store_url, "pdf", f"https://example.org/{i}", status)
    with store.transaction(write=False) as tx:
        by_status = ingest_stats(tx)["by_status"]
    assert list(by_status.items()) == [("b-status", 2), ("c-status", 2), ("a-status", 1)]


def test_stats_of_an_empty_store(store: Store) -> None:
    with store.transaction(write=False) as tx:
        stats = ingest_stats(tx)
    assert stats == {
        "requests": 0,
        "urls": 0,
        "results": 0,
        "hits": 0,
        "by_status": {},
        "by_source": {},
        "by_type": {},
    }


# --- the commands ------------------------------------------------------------------------


def invoke(store_url: str, tmp_path: Path, command: Any, *args: str) -> Any:
    db = None if store_url.startswith("sqlite:///") else store_url
    app = App(flags={"home": tmp_path, "db": db})
    return CliRunner().invoke(command, list(args), obj=app, catch_exceptions=False)


def test_results_command_writes_json_lines(sample: Store, store_url: str, tmp_path: Path) -> None:
    out = invoke(store_url, tmp_path, results_command)
    assert out.exit_code == 0
    lines = out.stdout.splitlines()
    assert [json.loads(line)["base_url"] for line in lines] == [B, A, D]
    assert json.loads(lines[1]) == EXPECTED_A
    assert '"note":"é"' in lines[1]  # UTF-8 as is, not \u escapes
    assert out.stderr == "wrote 3 results to standard output\n"
    # --json is the same output, kept for scripts that pass it.
    assert invoke(store_url, tmp_path, results_command, "--json").stdout == out.stdout


def test_results_command_filters(sample: Store, store_url: str, tmp_path: Path) -> None:
    def urls(*args: str) -> list[str]:
        out = invoke(store_url, tmp_path, results_command, *args)
        assert out.exit_code == 0, out.output
        return [json.loads(line)["base_url"] for line in out.stdout.splitlines()]

    assert urls("--status", "success") == [A]
    assert urls("--status", "success,timeout") == [A, D]
    assert urls("--status", "success", "--status", "timeout, success") == [A, D]
    assert urls("--source", "core", "--type", "html") == [B]
    assert urls("--status", "nothing-like-it") == []  # no results is not an error


def test_results_command_to_a_file(sample: Store, store_url: str, tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    out = invoke(store_url, tmp_path, results_command, "--type", "pdf", "-o", str(target))
    assert out.exit_code == 0 and out.stdout == ""
    assert out.stderr == f"wrote 1 result to {target}\n"
    assert [json.loads(line) for line in target.read_text("utf-8").splitlines()] == [EXPECTED_A]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []


def test_results_command_rejects_an_unknown_type(store_url: str, tmp_path: Path) -> None:
    out = invoke(store_url, tmp_path, results_command, "--type", "pfd")
    assert out.exit_code == 2 and "pfd" in out.stderr


def test_results_command_streams_every_line(store: Store, store_url: str, tmp_path: Path) -> None:
    n = 5000
    execute(
        store_url,
        "INSERT INTO ingest_results (ingest_type, base_url, hit, status, updated)"
        " VALUES ('pdf', ?, 1, 'success', ?)",
        [(f"https://example.org/{i:05d}", NOW) for i in range(n)],
    )
    out = invoke(store_url, tmp_path, results_command)
    assert out.exit_code == 0 and out.stderr == f"wrote {n} results to standard output\n"
    lines = out.stdout.splitlines()
    assert len(lines) == n and json.loads(lines[-1])["base_url"] == "https://example.org/04999"


def test_results_command_when_the_reader_goes_away(
    store: Store, store_url: str, tmp_path: Path
) -> None:
    """`thresher ingest results | head -1`: one line of error, no traceback, exit 141."""
    execute(
        store_url,
        "INSERT INTO ingest_results (ingest_type, base_url, hit, status, updated)"
        " VALUES ('pdf', ?, 1, 'success', ?)",
        [(f"https://example.org/{i:05d}" + "x" * 200, NOW) for i in range(5000)],
    )
    db = None if store_url.startswith("sqlite:///") else store_url
    # What cli.main does with a ThresherError, around the command alone (not yet wired).
    child = (
        "import sys, click\n"
        "from thresher.cli.app import App\n"
        "from thresher.cli.ingest_report import results_command\n"
        "from thresher.errors import ThresherError\n"
        "try:\n"
        f"    results_command.main([], obj=App(flags={{'home': {str(tmp_path)!r}, 'db': {db!r}}}),"
        " standalone_mode=False)\n"
        "except ThresherError as exc:\n"
        "    click.echo(f'thresher: error: {exc}', err=True)\n"
        "    sys.exit(exc.exit_code)\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", child], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        first = json.loads(proc.stdout.readline())
        proc.stdout.close()
        stderr = proc.stderr.read().decode()
        assert proc.wait(timeout=60) == 141, stderr
    assert first["base_url"].startswith("https://example.org/00000")
    assert stderr == "thresher: error: standard output was closed before the results ended\n"


def test_stats_command(sample: Store, store_url: str, tmp_path: Path) -> None:
    out = invoke(store_url, tmp_path, stats_command, "--json")
    assert out.exit_code == 0
    with sample.transaction(write=False) as tx:
        assert json.loads(out.stdout) == ingest_stats(tx)
    # Not a terminal: tab-separated sections, statuses as columns of the source table.
    plain = invoke(store_url, tmp_path, stats_command)
    assert plain.exit_code == 0
    assert plain.stdout.split("\n\n") == [
        "requests 4, urls 3, results 3, hits 1",
        "status\tresults\nsuccess\t1\ntimeout\t1\nwrong-mimetype\t1",
        "source\trequests\tpending\tsuccess\ttimeout\twrong-mimetype\n"
        "core\t3\t1\t1\t0\t1\nunpaywall\t1\t0\t1\t0\t0",
        "type\trequests\tresults\thits\nhtml\t1\t1\t0\npdf\t3\t1\t1\nxml\t0\t1\t0\n",
    ]


def test_stats_command_on_a_terminal(sample: Store, store_url: str, tmp_path: Path) -> None:
    db = None if store_url.startswith("sqlite:///") else store_url
    out = CliRunner().invoke(
        stats_command,
        [],
        obj=App(flags={"home": tmp_path, "db": db}),
        env={"TTY_COMPATIBLE": "1", "NO_COLOR": "1", "COLUMNS": "120"},
        catch_exceptions=False,
    )
    assert out.exit_code == 0
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout)  # bold and italic stay without colour
    for title in ("by status", "by source", "by type"):
        assert title in text
    assert re.search(r"┃ source +┃ requests ┃ pending ┃ success ┃ timeout ┃", text), text
    assert re.search(r"│ core +│ +3 │ +1 │ +1 │ +0 │ +1 │", text), text


def test_stats_command_on_an_empty_store(store: Store, store_url: str, tmp_path: Path) -> None:
    out = invoke(store_url, tmp_path, stats_command)
    assert out.exit_code == 0
    assert out.stdout == (
        "requests 0, urls 0, results 0, hits 0\n\n"
        "by status: none\n\nby source: none\n\nby type: none\n"
    )


def test_register_adds_both_commands() -> None:
    import click

    group = click.Group("ingest")
    register(group)
    assert sorted(group.commands) == ["results", "stats"]
