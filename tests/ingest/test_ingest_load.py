"""`thresher ingest load`: dumps of ingest requests into the store, on both backends.

What a user relies on: every valid line is stored once however often the file is
loaded, every bad line is counted and says why without stopping the load, gzip is read
whatever the file is called, and a damaged file loads and reports what came before the
damage.
"""

from __future__ import annotations

import gzip
import json
import re
import sqlite3
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from thresher.cli.main import main
from thresher.errors import UsageError
from thresher.ingest.request_line import (
    MAX_SOURCE_BYTES,
    MAX_SOURCE_ID_BYTES,
    MAX_URL_BYTES,
    IngestRequest,
    Rejected,
    UnreadableInput,
    parse_line,
    parse_tsv_header,
)
from thresher.ingest.requests import (
    MAX_LINE_BYTES,
    MAX_REJECTS,
    DamagedInput,
    LoadReport,
    load_requests,
    read_requests,
)
from thresher.store import Store, open_store

NOW = 1_800_000_000.0


def req(**fields: Any) -> dict[str, Any]:
    base = {
        "ingest_type": "pdf",
        "base_url": "https://example.org/a.pdf",
        "link_source": "unpaywall",
        "link_source_id": "10.1234/a",
    }
    return {**base, **fields}


def jsonl(path: Path, *lines: dict[str, Any] | str) -> Path:
    text = "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines)
    path.write_text(text, "utf-8")
    return path


def rows(store_url: str) -> list[dict[str, Any]]:
    sql = "SELECT * FROM ingest_requests ORDER BY id"
    if store_url.startswith("sqlite:///"):
        db = sqlite3.connect(store_url.removeprefix("sqlite:///"))
        db.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in db.execute(sql)]
        finally:
            db.close()
    with psycopg.connect(store_url, row_factory=dict_row) as conn:
        return conn.execute(sql).fetchall()


def counts(report: LoadReport) -> tuple[int, int, int]:
    return report.new, report.duplicate, report.rejected


# --- JSON Lines, TSV, gzip ----------------------------------------------------------------


def test_jsonl_lines_are_stored_as_given(store: Store, store_url: str, tmp_path: Path) -> None:
    path = jsonl(
        tmp_path / "dump.jsonl",
        req(
            base_url="  https://Example.org/A.pdf?b=2&a=1#x \t",
            release_stage="published",
            ext_ids={"doi": "10.1234/a", "pmcid": "PMC1"},
            request={"note": "é"},
            fatcat={"release_ident": "abc"},
        ),
        "",
        req(ingest_type="html", link_source_id=12345, base_url="http://example.org/landing"),
    )
    report = load_requests(store, path, now=NOW)
    assert counts(report) == (2, 0, 0) and report.format == "jsonl" and report.error is None
    first, second = sorted(rows(store_url), key=lambda r: r["ingest_type"] != "pdf")
    # Stripped of surrounding white space, nothing else: case, query order, fragment kept.
    assert first["base_url"] == "https://Example.org/A.pdf?b=2&a=1#x"
    assert first["ingest_type"] == "pdf" and first["link_source"] == "unpaywall"
    assert first["release_stage"] == "published" and first["created"] == NOW
    assert json.loads(first["ext_ids"]) == {"doi": "10.1234/a", "pmcid": "PMC1"}
    # Keys the request does not define go into request, beside request's own.
    assert json.loads(first["request"]) == {"note": "é", "fatcat": {"release_ident": "abc"}}
    assert second["link_source_id"] == "12345" and second["ingest_type"] == "html"
    assert second["ext_ids"] is None and second["request"] is None
    assert second["release_stage"] is None


def test_loading_twice_adds_nothing(store: Store, store_url: str, tmp_path: Path) -> None:
    path = jsonl(tmp_path / "d.jsonl", *(req(link_source_id=f"id{i}") for i in range(7)))
    assert counts(load_requests(store, path, now=NOW, batch=3)) == (7, 0, 0)
    assert counts(load_requests(store, path, now=NOW + 1, batch=3)) == (0, 7, 0)
    assert len(rows(store_url)) == 7
    assert {r["created"] for r in rows(store_url)} == {NOW}  # the first load's rows stay


@pytest.mark.parametrize("batch", [1, 2, 5000])
def test_duplicates_within_one_file(
    store: Store, store_url: str, tmp_path: Path, batch: int
) -> None:
    path = jsonl(
        tmp_path / "d.jsonl",
        req(release_stage="published"),
        req(base_url=" https://example.org/a.pdf"),  # the same once stripped
        req(link_source="core"),  # another source: another request
        req(ingest_type="html"),  # another type: another request
        req(release_stage="accepted"),  # the same key: the first line's request stays
        req(base_url="https://example.org/A.pdf"),  # case kept: another request
    )
    assert counts(load_requests(store, path, now=NOW, batch=batch)) == (4, 2, 0)
    stored = {(r["ingest_type"], r["base_url"], r["link_source"]): r for r in rows(store_url)}
    assert sorted(stored) == [
        ("html", "https://example.org/a.pdf", "unpaywall"),
        ("pdf", "https://example.org/A.pdf", "unpaywall"),
        ("pdf", "https://example.org/a.pdf", "core"),
        ("pdf", "https://example.org/a.pdf", "unpaywall"),
    ]
    first = stored[("pdf", "https://example.org/a.pdf", "unpaywall")]
    assert first["release_stage"] == "published"


def test_tsv_columns(store: Store, store_url: str, tmp_path: Path) -> None:
    path = tmp_path / "dump.tsv"
    header = "link_source_id\tbase_url\tingest_type\text_ids.doi\trelease_stage\toa_status"
    path.write_bytes(
        (
            "\ufeff" + header + "\r\n"
            "10.1/a\thttps://example.org/a.pdf\tpdf\t10.1/a\taccepted\tgold\r\n"
            "\r\n"
            "10.1/b\thttps://example.org/b\thtml\t\t\t\r\n"
            "10.1/c\thttps://example.org/c\tpdf\n"
        ).encode()
    )
    report = load_requests(store, path, source="unpaywall", now=NOW)
    assert counts(report) == (2, 0, 1) and report.format == "tsv"
    assert report.rejects == [
        Rejected(5, "3 tab-separated cells where the header has 6 columns"),
    ]
    a, b = sorted(rows(store_url), key=lambda r: str(r["link_source_id"]))
    assert (a["link_source"], a["link_source_id"], a["release_stage"]) == (
        "unpaywall",
        "10.1/a",
        "accepted",
    )
    assert json.loads(a["ext_ids"]) == {"doi": "10.1/a"}
    assert json.loads(a["request"]) == {"oa_status": "gold"}
    # Empty cells are absent values.
    assert b["ext_ids"] is None and b["request"] is None and b["release_stage"] is None


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ("ingest_type\tbase_url\tlink_source", "no column link_source_id"),
        ("ingest_type\tlink_source_id\tlink_source", "no column base_url"),
        ("ingest_type\tbase_url\tlink_source_id", "link_source (or give --source)"),
        ("ingest_type\tbase_url\tlink_source\tlink_source_id\tbase_url", "'base_url' twice"),
        ("ingest_type\tbase_url\tlink_source\tlink_source_id\t", "empty column name"),
        ("ingest_type\tbase_url\tlink_source\tlink_source_id\trequest", "'request' is not"),
        ("ingest_type\tbase_url\tlink_source\tlink_source_id\text_ids.", "names no identifier"),
        ("just some text", "not JSON Lines"),
    ],
)
def test_a_bad_tsv_header_loads_nothing(header: str, message: str, tmp_path: Path) -> None:
    path = tmp_path / "d.tsv"
    path.write_text(header + "\npdf\thttps://e.org/\tx\t1\t\n")
    with pytest.raises(UnreadableInput, match=re.escape(message)):
        list(read_requests(path))
    with pytest.raises(UnreadableInput, match=re.escape(message)):
        parse_tsv_header(header)


def test_gzip_is_sniffed_not_named(store: Store, store_url: str, tmp_path: Path) -> None:
    plain = jsonl(tmp_path / "d.jsonl", req(), req(link_source_id="b"), "{oops")
    packed = tmp_path / "d.txt"  # gzip under a name that does not say so
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    not_packed = tmp_path / "e.jsonl.gz"  # and a name that says gzip for a plain file
    not_packed.write_bytes(plain.read_bytes().replace(b'"b"', b'"c"'))
    assert counts(load_requests(store, packed, now=NOW)) == (2, 0, 1)
    assert counts(load_requests(store, not_packed, now=NOW)) == (1, 1, 1)
    # Several gzip members, as `cat a.gz b.gz` makes.
    tsv = b"ingest_type\tbase_url\tlink_source_id\npdf\thttps://e.org/1\t1\n"
    members = tmp_path / "m.tsv.gz"
    members.write_bytes(gzip.compress(tsv) + gzip.compress(b"xml\thttps://e.org/2\t2\n"))
    assert counts(load_requests(store, members, source="s", now=NOW)) == (2, 0, 0)
    assert len(rows(store_url)) == 5


def test_source_fills_in_only_a_missing_link_source(
    store: Store, store_url: str, tmp_path: Path
) -> None:
    path = jsonl(
        tmp_path / "d.jsonl",
        req(link_source="core"),
        {k: v for k, v in req(link_source_id="2").items() if k != "link_source"},
        req(link_source=None, link_source_id="3"),
        req(link_source="", link_source_id="4"),
    )
    assert counts(load_requests(store, path, source="doi", now=NOW)) == (4, 0, 0)
    assert [r["link_source"] for r in rows(store_url)] == ["core", "doi", "doi", "doi"]
    # Without a source those lines cannot be requests.
    report = load_requests(store, path, now=NOW)
    assert counts(report) == (0, 1, 3)
    assert {r.reason for r in report.rejects} == {"missing field link_source"}
    with pytest.raises(UsageError, match="bad --source"):
        load_requests(store, path, source="", now=NOW)


def test_blank_lines_are_skipped_fast_and_still_numbered(store: Store, tmp_path: Path) -> None:
    # Runs of blank lines (spaces, tabs, CRs) longer than the reader's 1 MiB chunks,
    # and lines cut by a chunk's end on either side of them.
    blank = b" \t\r\n" * 300_000 + b"\n" * 500_000
    good = json.dumps(req()).encode()
    path = tmp_path / "d.jsonl"
    path.write_bytes(blank + b"{oops\n" + blank + good + b"\r\n" + b" " * 100 + b"\t\r")
    report = load_requests(store, path, now=NOW)
    assert counts(report) == (1, 0, 1) and report.format == "jsonl"
    assert [r.line_number for r in report.rejects] == [800_001]
    # In TSV too: a line of tabs is blank, not a row of empty cells.
    tsv = tmp_path / "d.tsv"
    header = b"ingest_type\tbase_url\tlink_source_id\n"
    tsv.write_bytes(blank + header + b"\t\t\n" + blank + b"pdf\thttps://e.org/1\t1\nbad\n")
    report = load_requests(store, tsv, source="s", now=NOW)
    assert counts(report) == (1, 0, 1) and report.format == "tsv"
    assert [r.line_number for r in report.rejects] == [1_600_004]


def test_an_overlong_line_after_blank_lines_is_rejected(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    long = b'{"x": "' + b"a" * (MAX_LINE_BYTES + 10) + b'"}'
    path.write_bytes(b"\n" * 3 + long + b"\n" + json.dumps(req()).encode() + b"\n" + long)
    report = load_requests(store, path, now=NOW)
    assert counts(report) == (1, 0, 2)
    assert [(r.line_number, r.reason) for r in report.rejects] == [
        (4, f"line longer than {MAX_LINE_BYTES} bytes"),
        (6, f"line longer than {MAX_LINE_BYTES} bytes"),
    ]


# --- rejected lines -------------------------------------------------------------------------

LONG_URL = "https://example.org/" + "a" * MAX_URL_BYTES

REJECTS: list[tuple[str, str]] = [
    ("{oops", "bad JSON: Expecting property name enclosed in double quotes at column 2"),
    ('{"a": 1} x', "bad JSON: Extra data at column 10"),
    ('{"a": NaN}', "bad JSON: NaN is not valid JSON"),
    ("[1, 2]", "not a JSON object but an array"),
    ('"text"', "not a JSON object but a string"),
    ("[" * 100_000 + "]" * 100_000, "bad JSON: nested too deeply"),
    (json.dumps({**req(), "ingest_type": None}), "missing field ingest_type"),
    (json.dumps({**req(), "ingest_type": 3}), "field ingest_type must be a string, not a number"),
    (json.dumps(req(ingest_type="file")), "unknown ingest_type 'file' (one of dataset, html,"),
    (json.dumps(req(ingest_type="PDF")), "unknown ingest_type 'PDF'"),
    (json.dumps({k: v for k, v in req().items() if k != "base_url"}), "missing field base_url"),
    (json.dumps(req(base_url="   ")), "missing field base_url"),
    (json.dumps(req(base_url=["x"])), "field base_url must be a string, not an array"),
    (json.dumps(req(base_url="ftp://e.org/a")), "unsupported URL scheme 'ftp' in base_url"),
    (json.dumps(req(base_url="file:///etc/passwd")), "unsupported URL scheme 'file'"),
    (json.dumps(req(base_url="javascript:alert(1)")), "unsupported URL scheme 'javascript'"),
    (json.dumps(req(base_url="example.org/a.pdf")), "base_url has no URL scheme"),
    (json.dumps(req(base_url="https:///a.pdf")), "base_url has no host"),
    (json.dumps(req(base_url="https://[::1/a")), "base_url is not a valid URL"),
    (json.dumps(req(base_url="https://e.org:99999/")), "base_url is not a valid URL"),
    (json.dumps(req(base_url="https://e.org:0/")), "base_url has port 0"),
    (json.dumps(req(base_url="https://e.org/a\tb")), "base_url contains a control character"),
    (json.dumps(req(base_url="https://e.org/a\x00")), "field base_url contains a NUL character"),
    (json.dumps(req(base_url=LONG_URL)), f"field base_url is longer than {MAX_URL_BYTES} bytes"),
    (json.dumps(req(link_source=7)), "field link_source must be a string, not a number"),
    (json.dumps(req(link_source="s" * 101)), "field link_source is longer than 100 bytes"),
    (json.dumps(req(link_source_id=None)), "missing field link_source_id"),
    (json.dumps(req(link_source_id=True)), "field link_source_id must be a string, not a bool"),
    (json.dumps(req(link_source_id=1.5)), "field link_source_id must be a string, not a number"),
    (json.dumps(req(link_source_id="x\x00")), "field link_source_id contains a NUL character"),
    (json.dumps(req(release_stage={})), "field release_stage must be a string, not an object"),
    (json.dumps(req(ext_ids="10.1/a")), "field ext_ids must be an object, not a string"),
    (json.dumps(req(request=[1])), "field request must be an object, not an array"),
    (json.dumps(req())[:-1] + ', "request": {"n": 1e999}}', "field request holds a number out"),
    (json.dumps(req(link_source_id="\ud800")), "field link_source_id is not valid Unicode"),
    (json.dumps(req(ext_ids={"doi": "\udfff"})), "field ext_ids is not valid Unicode"),
]


@pytest.mark.parametrize(("line", "reason"), REJECTS, ids=[r for _, r in REJECTS])
def test_each_reject_says_why(line: str, reason: str) -> None:
    got = parse_line(line, 42)
    assert isinstance(got, Rejected), got
    assert got.line_number == 42 and got.reason.startswith(reason), got.reason
    assert str(got) == f"line 42: {got.reason}"


def test_rejects_do_not_stop_the_load(store: Store, store_url: str, tmp_path: Path) -> None:
    lines = [line for line, _ in REJECTS]
    path = tmp_path / "bad.jsonl"
    with path.open("wb") as out:
        out.write(json.dumps(req(link_source_id="first")).encode() + b"\n")
        for line in lines:
            out.write(line.encode("utf-8", "surrogatepass") + b"\n")
        latin1 = b'{"ingest_type": "pdf", "base_url": "https://e.org/\xff\xfe"}'
        out.write(latin1 + b"\n")
        out.write(b"x" * (MAX_LINE_BYTES + 10) + b"\n")
        out.write(json.dumps(req(link_source_id="last")).encode())  # no final newline
    report = load_requests(store, path, now=NOW)
    bad = len(lines) + 2
    assert counts(report) == (2, 0, bad)
    assert [r.line_number for r in report.rejects] == list(range(2, bad + 2))
    at = latin1.index(b"\xff") + 1
    assert report.rejects[-2].reason == f"invalid UTF-8 at byte {at} of the line"
    assert report.rejects[-1].reason == f"line longer than {MAX_LINE_BYTES} bytes"
    assert [r["link_source_id"] for r in rows(store_url)] == ["first", "last"]


def test_bad_utf8_is_a_rejected_line(store: Store, store_url: str, tmp_path: Path) -> None:
    path = tmp_path / "latin1.tsv"
    path.write_bytes(
        b"ingest_type\tbase_url\tlink_source\tlink_source_id\n"
        b"pdf\thttps://e.org/caf\xe9\tx\t1\n"
        b"pdf\thttps://e.org/caf\xc3\xa9\tx\t2\n"
    )
    report = load_requests(store, path, now=NOW)
    assert counts(report) == (1, 0, 1)
    assert report.rejects == [Rejected(2, "invalid UTF-8 at byte 22 of the line")]
    assert rows(store_url)[0]["base_url"] == "https://e.org/café"


def test_only_the_first_rejects_are_kept(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "junk.jsonl"
    path.write_text("{}\n" * (MAX_REJECTS + 5))
    report = load_requests(store, path, now=NOW)
    assert report.rejected == MAX_REJECTS + 5 and len(report.rejects) == MAX_REJECTS
    assert report.rejects[-1] == Rejected(MAX_REJECTS, "missing field ingest_type")


def test_the_longest_accepted_request_fits_either_store(
    store: Store, store_url: str, tmp_path: Path
) -> None:
    """PostgreSQL refuses index entries over about 2700 bytes; the limits stay below."""
    url = "https://e.org/" + "".join(f"{i:08x}" for i in range(MAX_URL_BYTES))
    url = url[:MAX_URL_BYTES]
    longest = req(
        ingest_type="dataset",
        base_url=url,
        link_source="s" * MAX_SOURCE_BYTES,
        link_source_id="".join(f"{i:04x}" for i in range(MAX_SOURCE_ID_BYTES))[
            :MAX_SOURCE_ID_BYTES
        ],
        request={"nul": "a\x00b", "emoji": "🦀"},  # JSON text keeps the NUL escaped
    )
    path = jsonl(tmp_path / "d.jsonl", longest)
    assert counts(load_requests(store, path, now=NOW)) == (1, 0, 0)
    (row,) = rows(store_url)
    assert row["base_url"] == url and json.loads(row["request"])["nul"] == "a\x00b"


# --- reading ----------------------------------------------------------------------------


def test_read_requests_streams_requests_and_rejects(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "d.jsonl", "", req(ext_ids={"doi": "10.1/x"}), "   ", "{}")
    got = list(read_requests(path, source="ignored"))
    assert got == [
        IngestRequest(
            "pdf",
            "https://example.org/a.pdf",
            "unpaywall",
            "10.1234/a",
            None,
            {"doi": "10.1/x"},
            {},
        ),
        Rejected(4, "missing field ingest_type"),
    ]
    assert isinstance(got[0], IngestRequest)
    assert got[0].key == ("pdf", "https://example.org/a.pdf", "unpaywall", "10.1234/a")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"BZh91AY&SY", "bzip2-compressed"),
        (b"\x28\xb5\x2f\xfd\x00", "zstd-compressed"),
        (b"\xff\xfe\x00binary", "is not UTF-8, nor a TSV header"),
    ],
)
def test_not_an_ingest_file(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "f"
    path.write_bytes(content)
    with pytest.raises(UnreadableInput, match=message):
        list(read_requests(path))


def test_a_missing_file_or_folder(store: Store, tmp_path: Path) -> None:
    with pytest.raises(UnreadableInput, match="No such file"):
        load_requests(store, tmp_path / "nope.jsonl")
    with pytest.raises(UnreadableInput, match="is a folder"):
        load_requests(store, tmp_path)


def _damaged_gzip(tmp_path: Path, lines: int) -> tuple[Path, int]:
    """A gzip of `lines` requests cut short; how many whole lines survive the cut."""
    text = "".join(json.dumps(req(link_source_id=f"{i:06d}")) + "\n" for i in range(lines))
    packed = gzip.compress(text.encode(), compresslevel=1)
    cut = packed[: len(packed) * 2 // 3]
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(cut)
    survived = 0
    with gzip.open(path, "rb") as f, pytest.raises(EOFError):
        for _ in f:
            survived += 1
    return path, survived


def test_truncated_gzip_loads_what_came_before(
    store: Store, store_url: str, tmp_path: Path
) -> None:
    path, survived = _damaged_gzip(tmp_path, 20_000)
    assert 1000 < survived < 20_000
    seen: list[int] = []
    with pytest.raises(DamagedInput) as caught:
        load_requests(store, path, now=NOW, batch=1000, progress=lambda pos, r: seen.append(pos))
    report = caught.value.report
    assert report is not None and counts(report) == (survived, 0, 0)
    message = str(caught.value)
    assert f"after line {survived};" in message and "truncated" in message
    assert f"at byte {path.stat().st_size}" in message and report.error == message
    assert len(rows(store_url)) == survived
    assert seen and seen == sorted(seen)
    # read_requests yields the same lines, then raises.
    reader = read_requests(path)
    got = [next(reader) for _ in range(survived)]
    assert all(isinstance(r, IngestRequest) for r in got)
    with pytest.raises(DamagedInput, match=f"after line {survived};"):
        next(reader)


def test_corrupt_gzip(store: Store, tmp_path: Path) -> None:
    packed = bytearray(gzip.compress(b"".join(b'{"x": %d}\n' % i for i in range(100))))
    packed[-8] ^= 0xFF  # the CRC
    path = tmp_path / "crc.gz"
    path.write_bytes(bytes(packed))
    with pytest.raises(DamagedInput, match="corrupt gzip data") as caught:
        load_requests(store, path, now=NOW)
    assert caught.value.report is not None and caught.value.report.rejected == 100


# --- the command ------------------------------------------------------------------------


def _cli(store_url: str, tmp_path: Path) -> list[str]:
    if store_url.startswith("sqlite:///"):
        return ["--home", str(Path(store_url.removeprefix("sqlite:///")).parent)]
    return ["--home", str(tmp_path / "home"), "--db", store_url]


def test_cli_load_text_report(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = jsonl(
        tmp_path / "d.jsonl",
        *(req(link_source_id=str(i)) for i in range(3)),
        req(link_source_id="0"),
        *([req(base_url="gopher://e.org/")] * 25),
    )
    flags = _cli(store_url, tmp_path)
    assert main([*flags, "ingest", "load", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "new 3, duplicate 1, rejected 25"
    assert out[1] == "line 5: unsupported URL scheme 'gopher' in base_url (http or https)"
    assert len(out) == 22 and out[-1].endswith(
        "and 5 more rejected lines (--json lists the first 1000)"
    )
    assert main([*flags, "ingest", "load", str(path)]) == 0
    assert capsys.readouterr().out.startswith("new 0, duplicate 4, rejected 25\n")
    assert len(rows(store_url)) == 3


def test_cli_load_json_report_and_source(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "d.tsv"
    path.write_text(
        "ingest_type\tbase_url\tlink_source_id\nxml\thttps://e.org/1\t1\nfile\thttps://e.org/2\t2\n"
    )
    argv = [*_cli(store_url, tmp_path), "ingest", "load", str(path), "--source", "oai", "--json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report) == {
        "file",
        "format",
        "new",
        "duplicate",
        "rejected",
        "rejects",
        "error",
        "seconds",
    }
    assert report["file"] == str(path) and report["format"] == "tsv" and report["error"] is None
    assert (report["new"], report["duplicate"], report["rejected"]) == (1, 0, 1)
    assert report["rejects"] == [
        {"line": 3, "reason": "unknown ingest_type 'file' (one of dataset, html, pdf, xml)"}
    ]
    assert rows(store_url)[0]["link_source"] == "oai"


def test_cli_exit_codes(store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    flags = _cli(store_url, tmp_path)
    assert main([*flags, "ingest", "load", str(tmp_path / "missing.jsonl")]) == 2
    assert "cannot read" in capsys.readouterr().err
    path, survived = _damaged_gzip(tmp_path, 20_000)
    assert main([*flags, "ingest", "load", str(path), "--json"]) == 1
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["new"] == survived and f"after line {survived};" in report["error"]
    assert captured.err.startswith("thresher: error: ") and "truncated" in captured.err
    assert len(rows(store_url)) == survived


def test_concurrent_loads_of_overlapping_dumps(store_url: str, tmp_path: Path) -> None:
    """Two loads at once, of the same requests in opposite orders: each request is new
    for exactly one of them, and neither fails (on PostgreSQL, inserting one batch's
    keys in file order would let the two transactions wait for each other)."""
    lines = [req(link_source_id=f"{i:05d}") for i in range(4000)]
    forward = jsonl(tmp_path / "forward.jsonl", *lines)
    backward = jsonl(tmp_path / "backward.jsonl", *reversed(lines))
    stores = [open_store(store_url), open_store(store_url)]
    reports: list[LoadReport] = []
    errors: list[BaseException] = []

    def load(store: Store, path: Path) -> None:
        try:
            reports.append(load_requests(store, path, now=NOW, batch=len(lines)))
        except BaseException as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=load, args=(s, p))
        for s, p in zip(stores, (forward, backward), strict=True)
    ]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    finally:
        for s in stores:
            s.close()
    assert not errors, errors
    assert sum(r.new for r in reports) == len(lines)
    assert sum(r.duplicate for r in reports) == len(lines)
    assert len(rows(store_url)) == len(lines)
