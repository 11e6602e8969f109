"""The WARC writer: what it writes reads back byte for byte (warcio and FastWARC), files
rotate with a warcinfo each, the CDXJ points at every capture, and a crash at any moment
followed by a resume from the last committed position stores every URL exactly once."""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib
import io
import itertools
import json
import os
import random
import re
import signal
import subprocess
import sys
import uuid
import zlib
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fastwarc.warc import ArchiveIterator as FastArchiveIterator
from fastwarc.warc import WarcRecordType
from warc_samples import (
    capture_of,
    gzip_encoded,
    make_exchange,
    not_modified,
    read_records,
    responses,
    warc_date,
    write,
)
from warcio.archiveiterator import ArchiveIterator  # type: ignore[import-untyped]

from thresher.store.cdxj import cdxj_path, parse_cdxj_line, surt, timestamp14, write_index
from thresher.store.gzmember import gzip_stored
from thresher.store.warc import WarcError, WarcPosition, WarcWriter
from thresher.store.warcrecord import (
    NOT_MODIFIED_PROFILE,
    REVISIT_PROFILE,
    Capture,
    _record_id,
    _warc_date,
    http_head,
    payload_digest,
)

HERE = Path(__file__).parent


@pytest.mark.parametrize("gzip_level", [None, 6])
def test_round_trip_every_header_and_byte(tmp_path: Path, gzip_level: int | None) -> None:
    exchanges = [
        make_exchange(0),
        replace(gzip_encoded(make_exchange(1)), ip=None),  # no WARC-IP-Address then
        make_exchange(2, size=0, links=0),
    ]
    with WarcWriter(tmp_path, software="Thresher-test/1.0", gzip_level=gzip_level) as writer:
        written = [write(writer, ex) for ex in exchanges]
    [name] = writer.files
    records = read_records(tmp_path / name)

    assert [r.type for r in records] == [
        "warcinfo",
        *("request", "response", "metadata"),
        *("request", "response", "metadata"),
        *("request", "response"),  # no outlinks, no metadata record
    ]
    info = records[0]
    assert info.header("WARC-Filename") == name
    assert info.header("Content-Type") == "application/warc-fields"
    assert b"software: Thresher-test/1.0\r\n" in info.block

    rest = iter(records[1:])
    for ex, w in zip(exchanges, written, strict=True):
        request, response = next(rest), next(rest)
        date = warc_date(ex.fetched_at)
        assert response.block == ex.response_head + ex.payload
        assert request.block == ex.request_head
        assert response.header("WARC-Record-ID") == w.record_id
        assert (response.offset, response.length) == (w.offset, w.length)
        assert w.filename == name
        assert w.payload_digest == payload_digest(ex.payload)
        expected = {
            "WARC-Type": "response",
            "WARC-Record-ID": w.record_id,
            "WARC-Date": date,
            "WARC-Target-URI": ex.url,
            "Content-Type": "application/http; msgtype=response",
            "WARC-Payload-Digest": w.payload_digest,
            "WARC-Block-Digest": payload_digest(response.block),
            "Content-Length": str(len(response.block)),
        }
        if ex.ip:
            expected["WARC-IP-Address"] = ex.ip
        assert dict(response.headers) == expected
        assert len(response.headers) == len(expected)
        assert request.header("WARC-Type") == "request"
        assert request.header("WARC-Concurrent-To") == w.record_id
        assert request.header("WARC-Date") == date
        assert request.header("WARC-Target-URI") == ex.url
        assert request.header("WARC-IP-Address") == ex.ip
        assert request.header("Content-Type") == "application/http; msgtype=request"
        assert request.header("WARC-Block-Digest") == payload_digest(ex.request_head)
        if ex.outlinks:
            metadata = next(rest)
            assert metadata.header("WARC-Concurrent-To") == w.record_id
            assert metadata.header("WARC-Target-URI") == ex.url
            assert metadata.header("WARC-Date") == date
    assert next(rest, None) is None

    # warcio parses the HTTP heads and verifies both digests of every record.
    with open(tmp_path / name, "rb") as f:
        parsed = [
            (rec.rec_type, rec.http_headers, rec.raw_stream.read())
            for rec in ArchiveIterator(f, check_digests="raise")
        ]
    http = [(t, h, p) for t, h, p in parsed if t == "response"]
    assert [p for _, _, p in http] == [ex.payload for ex in exchanges]
    assert [h.get_statuscode() for _, h, _ in http] == ["200"] * 3
    assert http[1][1].get_header("Content-Encoding") == "gzip"
    assert gzip.decompress(http[1][2]) == make_exchange(1).payload
    requests = [h for t, h, _ in parsed if t == "request"]
    assert requests[0].protocol == "GET"
    assert requests[0].get_header("Host") == "example.com"


def test_compression_is_chosen_by_level(tmp_path: Path) -> None:
    try:
        importlib.import_module("isal.isal_zlib")
        fastest = "isal level 2"
    except ImportError:
        fastest = "zlib level 1"
    with WarcWriter(tmp_path) as fast:
        assert fast.compression == fastest
    with WarcWriter(tmp_path, gzip_level=9) as small:
        assert small.compression == "zlib level 9"
    with pytest.raises(ValueError, match="gzip_level"):
        WarcWriter(tmp_path, gzip_level=10)


@pytest.mark.parametrize("gzip_level", [None, 0, 6])
def test_every_record_is_its_own_gzip_member(tmp_path: Path, gzip_level: int | None) -> None:
    with WarcWriter(tmp_path, gzip_level=gzip_level) as writer:
        for i in range(3):
            write(writer, make_exchange(i))
    [name] = writer.files
    data = (tmp_path / name).read_bytes()
    members = 0
    while data:
        d = zlib.decompressobj(31)
        d.decompress(data)
        assert d.eof
        data = d.unused_data
        members += 1
    assert members == len(read_records(tmp_path / name)) == 1 + 3 * 3


def test_fastwarc_reads_every_record(tmp_path: Path) -> None:
    exchanges = [make_exchange(0), gzip_encoded(make_exchange(1))]
    with WarcWriter(tmp_path) as writer:
        written = [write(writer, ex) for ex in exchanges]
        write(
            writer,
            make_exchange(2),
            payload=exchanges[0].payload,
            revisit_of=capture_of(exchanges[0]),
        )
        write(writer, not_modified(exchanges[1], 3), not_modified_of=capture_of(exchanges[1]))
    [name] = writer.files
    path = str(tmp_path / name)
    # FastWARC's records live only while the iterator is on them: check each in the loop.
    types, block_ok = [], []
    for rec in FastArchiveIterator(path, parse_http=False):
        types.append(rec.record_type)
        block_ok.append(rec.verify_block_digest())
    assert types == [
        WarcRecordType.warcinfo,
        *[WarcRecordType.request, WarcRecordType.response, WarcRecordType.metadata] * 2,
        *[WarcRecordType.request, WarcRecordType.revisit, WarcRecordType.metadata] * 2,
    ]
    assert all(block_ok)

    found, profiles = [], []
    for rec in FastArchiveIterator(path, parse_http=True):
        if rec.record_type == WarcRecordType.response:
            found.append(
                (
                    rec.stream_pos,
                    rec.record_id,
                    rec.headers["WARC-Target-URI"],
                    rec.http_headers.status_code,
                    rec.http_headers.get("Content-Type"),
                    rec.reader.read(),
                )
            )
        elif rec.record_type == WarcRecordType.request:
            assert str(rec.http_headers.status_line).startswith("GET /page/")
        elif rec.record_type == WarcRecordType.revisit:
            profiles.append(rec.headers["WARC-Profile"])
            if rec.headers["WARC-Profile"] == REVISIT_PROFILE:
                assert rec.http_headers.status_code == 200
            else:  # no block, so no HTTP head
                assert rec.content_length == 0
            assert rec.reader.read() == b""
    assert found == [
        (
            w.offset,
            w.record_id,
            ex.url,
            200,
            ex.response_head.split(b"Content-Type: ")[1].split(b"\r\n")[0].decode(),
            ex.payload,
        )
        for ex, w in zip(exchanges, written, strict=True)
    ]
    assert profiles == [REVISIT_PROFILE, NOT_MODIFIED_PROFILE]
    responses_ok = [
        rec.verify_payload_digest()
        for rec in FastArchiveIterator(path, parse_http=True)
        if rec.record_type == WarcRecordType.response
    ]
    assert responses_ok == [True, True]


def test_revisit_keeps_the_head_and_points_to_the_original(tmp_path: Path) -> None:
    original = make_exchange(0)
    again = make_exchange(1)
    with WarcWriter(tmp_path) as writer:
        first = write(writer, original)
        revisit = write(
            writer,
            again,
            payload=original.payload,
            revisit_of=capture_of(original, first),
            payload_digest=first.payload_digest,
        )
    [name] = writer.files
    records = {r.offset: r for r in read_records(tmp_path / name)}
    orig, rec = records[first.offset], records[revisit.offset]
    assert rec.type == "revisit"
    assert rec.block == again.response_head  # the head, no payload
    assert rec.header("Content-Length") == str(len(again.response_head))
    assert rec.header("WARC-Profile") == REVISIT_PROFILE
    assert rec.header("WARC-Truncated") == "length"  # WARC 1.1 6.7.2
    assert rec.header("WARC-Refers-To-Target-URI") == original.url
    assert rec.header("WARC-Refers-To-Date") == orig.header("WARC-Date")
    assert rec.header("WARC-Refers-To") == orig.header("WARC-Record-ID") == first.record_id
    assert rec.header("WARC-Payload-Digest") == orig.header("WARC-Payload-Digest")
    assert rec.header("WARC-Block-Digest") == payload_digest(again.response_head)
    assert rec.header("WARC-Target-URI") == again.url
    assert revisit.payload_digest == first.payload_digest

    lines = [
        parse_cdxj_line(x)
        for x in (tmp_path / name).with_suffix("").with_suffix(".cdxj").read_text().splitlines()
    ]
    by_offset = {int(fields["offset"]): fields for _, _, fields in lines}
    assert by_offset[revisit.offset]["mime"] == "warc/revisit"
    assert by_offset[revisit.offset]["digest"] == by_offset[first.offset]["digest"]
    assert "status" not in by_offset[revisit.offset]


def test_a_304_is_a_server_not_modified_revisit_of_the_capture_it_confirms(
    tmp_path: Path,
) -> None:
    original = make_exchange(0)
    again = not_modified(original, 5)
    with WarcWriter(tmp_path) as writer:
        first = write(writer, original)
        revisit = write(writer, again, not_modified_of=capture_of(original, first))
        # Nothing known but the URL (a store from before captures were kept).
        bare = write(writer, not_modified(original, 6), not_modified_of=Capture(original.url))
    [name] = writer.files
    records = read_records(tmp_path / name)
    by_offset = {r.offset: r for r in records}
    orig, rec = by_offset[first.offset], by_offset[revisit.offset]
    assert rec.type == "revisit"
    assert rec.header("WARC-Profile") == NOT_MODIFIED_PROFILE
    assert rec.header("WARC-Target-URI") == original.url
    assert rec.header("WARC-Date") == warc_date(again.fetched_at)
    assert rec.header("WARC-Refers-To") == orig.header("WARC-Record-ID")
    assert rec.header("WARC-Refers-To-Target-URI") == orig.header("WARC-Target-URI")
    assert rec.header("WARC-Refers-To-Date") == orig.header("WARC-Date")
    # The payload is the confirmed capture's (WARC 1.1 6.7.3), never the empty 304 body's.
    assert rec.header("WARC-Payload-Digest") == orig.header("WARC-Payload-Digest")
    assert revisit.payload_digest == first.payload_digest
    assert (rec.block, rec.header("Content-Length"), rec.header("Content-Type")) == (b"", "0", None)
    assert rec.header("WARC-Truncated") is None  # nothing to cut short
    # The 304's head, kept in the metadata record beside it, byte for byte.
    [meta] = [
        r
        for r in records
        if r.type == "metadata" and r.header("WARC-Concurrent-To") == revisit.record_id
    ]
    assert meta.header("Content-Type") == "application/warc-fields"
    assert meta.header("WARC-Target-URI") == original.url
    status, *headers = again.response_head.rstrip(b"\r\n").split(b"\r\n")
    assert meta.block.split(b"\r\n")[:-1] == [
        b"http-status-line: " + status,
        *(b"http-header: " + h for h in headers),
    ]
    # The conditional request, as sent.
    [request] = [
        r
        for r in records
        if r.type == "request" and r.header("WARC-Concurrent-To") == revisit.record_id
    ]
    assert request.block == again.request_head

    empty = by_offset[bare.offset]
    assert empty.header("WARC-Refers-To-Target-URI") == original.url
    for absent in ("WARC-Refers-To", "WARC-Refers-To-Date", "WARC-Payload-Digest"):
        assert empty.header(absent) is None
    assert bare.payload_digest is None

    index = {
        int(f["offset"]): f
        for _, _, f in map(parse_cdxj_line, cdxj_path(tmp_path / name).read_text().splitlines())
    }
    assert index[revisit.offset] == {
        "url": original.url,
        "mime": "warc/revisit",
        "digest": index[first.offset]["digest"],
        "length": str(revisit.length),
        "offset": str(revisit.offset),
        "filename": name,
    }
    assert "digest" not in index[bare.offset]
    write_index(tmp_path / name, tmp_path / "rebuilt.cdxj")
    assert (tmp_path / "rebuilt.cdxj").read_text() == cdxj_path(tmp_path / name).read_text()


def test_a_revisit_is_one_kind_and_a_304_has_no_payload(tmp_path: Path) -> None:
    ex = make_exchange(0)
    with WarcWriter(tmp_path) as writer:
        with pytest.raises(ValueError, match="one kind"):
            write(writer, ex, revisit_of=capture_of(ex), not_modified_of=capture_of(ex))
        with pytest.raises(ValueError, match="no payload"):
            write(writer, ex, not_modified_of=capture_of(ex))
        with pytest.raises(ValueError, match="line break"):
            write(writer, not_modified(ex, 1), not_modified_of=Capture("http://a/\r\nX: y"))


def test_metadata_lists_the_outlinks(tmp_path: Path) -> None:
    links = ("http://example.com/a", "https://other.example/b?x=1&y=ü", "http://example.com/c d")
    with WarcWriter(tmp_path) as writer:
        w = write(writer, make_exchange(0), outlinks=links)
    [name] = writer.files
    [metadata] = [r for r in read_records(tmp_path / name) if r.type == "metadata"]
    assert metadata.header("WARC-Concurrent-To") == w.record_id
    assert metadata.header("Content-Type") == "application/warc-fields"
    assert metadata.block.decode().splitlines() == [f"outlink: {link}" for link in links]
    assert metadata.header("WARC-Block-Digest") == payload_digest(metadata.block)


def test_files_rotate_by_size_each_with_a_warcinfo(tmp_path: Path) -> None:
    max_size = 12_000
    with WarcWriter(tmp_path, max_size=max_size) as writer:
        written = [write(writer, make_exchange(i)) for i in range(30)]
    files = writer.files
    assert len(files) >= 4
    assert sorted({w.filename for w in written}, key=files.index) == files
    largest_exchange = 0
    for name in files:
        records = read_records(tmp_path / name)
        assert records[0].type == "warcinfo"
        assert records[0].header("WARC-Filename") == name
        assert all(r.type != "warcinfo" for r in records[1:])
        # Exchanges stay whole: every request is followed by its response and metadata.
        types = [r.type for r in records[1:]]
        assert types == ["request", "response", "metadata"] * (len(types) // 3)
        for i in range(1, len(records), 3):
            largest_exchange = max(largest_exchange, sum(r.length for r in records[i : i + 3]))
        size = (tmp_path / name).stat().st_size
        if name != files[-1]:
            assert size >= max_size
        # A file is closed at the first exchange that starts past max_size.
        assert size - sum(r.length for r in records[-3:]) < max_size
        assert cdxj_path(tmp_path / name).exists()
    urls = [str(rec.header("WARC-Target-URI")) for _, rec in responses(tmp_path)]
    assert sorted(urls) == sorted(make_exchange(i).url for i in range(30))
    assert largest_exchange < max_size


def test_cdxj_is_sorted_and_points_at_each_capture(tmp_path: Path) -> None:
    rnd = random.Random(5)
    hosts = ["example.com", "www.example.org", "a.example.net", "EXAMPLE.com"]
    with WarcWriter(tmp_path, max_size=20_000) as writer:
        for i in rnd.sample(range(40), 40):
            write(writer, make_exchange(i, host=rnd.choice(hosts), size=800))
        write(
            writer,
            make_exchange(99),
            payload=make_exchange(1).payload,
            revisit_of=capture_of(make_exchange(1)),
        )
        write(
            writer, not_modified(make_exchange(1), 98), not_modified_of=capture_of(make_exchange(1))
        )
    total = 0
    for name in writer.files:
        warc = tmp_path / name
        index = cdxj_path(warc)
        text = index.read_text()
        lines = text.splitlines()
        assert lines == sorted(lines)
        captures = [r for r in read_records(warc) if r.type in ("response", "revisit")]
        assert len(lines) == len(captures)
        total += len(lines)
        data = warc.read_bytes()
        for line in lines:
            key, stamp, fields = parse_cdxj_line(line)
            assert fields["filename"] == name
            offset, length = int(fields["offset"]), int(fields["length"])
            [rec] = read_records_from(data[offset : offset + length])
            assert rec.rec_type in ("response", "revisit")
            url = rec.rec_headers.get_header("WARC-Target-URI")
            assert fields["url"] == url
            assert key == surt(url)
            assert stamp == timestamp14(rec.rec_headers.get_header("WARC-Date"))
            digest = rec.rec_headers.get_header("WARC-Payload-Digest")
            assert fields.get("digest") == (digest and digest.removeprefix("sha1:"))
            if rec.rec_type == "revisit":  # as pywb's indexer has it: no status
                assert fields["mime"] == "warc/revisit" and "status" not in fields
            else:
                assert (fields["mime"], fields["status"]) == ("text/html", "200")
        # The index built while writing equals one built by reading the file.
        write_index(warc, tmp_path / "rebuilt.cdxj")
        assert (tmp_path / "rebuilt.cdxj").read_text() == text
    assert total == 42
    assert not list(tmp_path.glob("*.open")) and not list(tmp_path.glob("*.tmp"))


def read_records_from(member: bytes) -> list[Any]:
    """warcio's records in ``member``, their payloads read."""
    it = ArchiveIterator(io.BytesIO(member))
    out = []
    for rec in it:
        rec.raw_stream.read()
        out.append(rec)
    return out


# --- crash and resume ---------------------------------------------------------------------

CHILD = """
import json, os, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from warc_samples import make_exchange, write
from thresher.store.warc import WarcPosition, WarcWriter

directory, max_size, start = Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[5])
position = WarcPosition(*json.loads(sys.argv[4])) if sys.argv[4] != "null" else None
writer = WarcWriter(directory, max_size=max_size, resume=position)

def commit(done):
    pos = writer.sync()
    print(json.dumps([done, pos.filename, pos.offset]), flush=True)

commit(start)
for i in range(start, start + 1000):
    write(writer, make_exchange(i))
    if (i + 1) % 3 == 0:
        commit(i + 1)
time.sleep(60)
"""


def run_until_killed(
    directory: Path,
    max_size: int,
    resume: WarcPosition | None,
    start: int,
    commits: int,
    uncommitted: int,
) -> tuple[int, WarcPosition]:
    """Run a writer in a child process that syncs and prints its position every three
    exchanges. The ``commits``-th position printed is the one "committed"; the child goes on
    for ``uncommitted`` more syncs (a commit that never happened: the database lags) and is
    killed with SIGKILL in the middle of whatever it writes next. Returns the committed
    (count of URLs done, position)."""
    resume_arg = json.dumps([resume.filename, resume.offset]) if resume else "null"
    command = [sys.executable, "-c", CHILD, str(HERE), str(directory), str(max_size)]
    child = subprocess.Popen([*command, resume_arg, str(start)], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    try:
        lines = [child.stdout.readline() for _ in range(commits + uncommitted)]
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
        child.stdout.close()
    assert all(lines), "the child died before it was killed"
    done, filename, offset = json.loads(lines[commits - 1])
    return done, WarcPosition(filename, offset)


def test_kill_9_then_resume_stores_every_url_exactly_once(tmp_path: Path) -> None:
    max_size = 15_000  # about seven exchanges per file: many rotations
    rnd = random.Random(11)
    done, position = 0, None
    cut = discarded = 0  # what the resumes have to undo, to know the test tests something
    for _round in range(5):
        done, position = run_until_killed(
            tmp_path, max_size, position, done, rnd.randint(1, 12), rnd.randint(1, 8)
        )
        committed_file = tmp_path / position.filename
        cut += committed_file.stat().st_size - position.offset
        later = sorted(p.name for p in tmp_path.glob("*.warc.gz") if p.name > position.filename)
        discarded += len(later)
    assert cut > 0 and discarded > 0
    assert position is not None
    prefix = committed_file.read_bytes()[: position.offset]

    total = done + 25
    with WarcWriter(tmp_path, max_size=max_size, resume=position) as writer:
        assert committed_file.stat().st_size == position.offset
        assert committed_file.read_bytes() == prefix
        assert writer.discarded == later
        assert writer.files[-1] == position.filename
        for i in range(done, total):
            write(writer, make_exchange(i))

    urls = Counter(rec.header("WARC-Target-URI") for _, rec in responses(tmp_path))
    assert urls == Counter(make_exchange(i).url for i in range(total))
    assert_indexes_complete(tmp_path, writer.files)


def assert_indexes_complete(directory: Path, files: list[str]) -> None:
    assert sorted(p.name for p in directory.glob("*.warc.gz")) == sorted(files)
    for name in files:
        warc = directory / name
        assert read_records(warc)[0].type == "warcinfo"
        write_index(warc, directory / "rebuilt.cdxj")
        assert cdxj_path(warc).read_text() == (directory / "rebuilt.cdxj").read_text()
    (directory / "rebuilt.cdxj").unlink()
    leftovers = [p.name for p in directory.iterdir() if p.suffix in (".open", ".tmp")]
    assert leftovers == []


def test_resume_cuts_a_torn_tail_and_a_stale_index(tmp_path: Path) -> None:
    with WarcWriter(tmp_path) as writer:
        for i in range(5):
            write(writer, make_exchange(i))
        position = writer.sync()
        for i in range(5, 8):
            write(writer, make_exchange(i))
    name = position.filename
    with open(tmp_path / name, "ab") as f:
        f.write(zlib.compress(b"WARC/1.1\r\nWARC-Type: resp", wbits=31)[:17])  # torn member
    assert len(cdxj_path(tmp_path / name).read_text().splitlines()) == 8

    with WarcWriter(tmp_path, resume=position) as writer:
        assert (tmp_path / name).stat().st_size == position.offset
        assert writer.discarded == []
        assert not cdxj_path(tmp_path / name).exists()
        for i in range(5, 9):
            write(writer, make_exchange(i))
        assert writer.sync().filename == name
    urls = [rec.header("WARC-Target-URI") for _, rec in responses(tmp_path)]
    assert urls == [make_exchange(i).url for i in range(9)]
    assert_indexes_complete(tmp_path, [name])


def test_a_failed_fsync_stops_the_writer_until_resumed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = WarcWriter(tmp_path)
    write(writer, make_exchange(0))
    position = writer.sync()
    write(writer, make_exchange(1))

    def failing_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    with monkeypatch.context() as m:
        m.setattr(os, "fsync", failing_fsync)
        with pytest.raises(OSError, match="Input/output"):
            writer.sync()
    # After a failed fsync the kernel may have dropped the dirty pages: retrying could
    # "succeed" over lost data, so the writer refuses everything until it is resumed.
    with pytest.raises(WarcError, match="resume"):
        writer.sync()
    with pytest.raises(WarcError, match="resume"):
        write(writer, make_exchange(2))
    writer.close()
    assert not cdxj_path(tmp_path / position.filename).exists()

    with WarcWriter(tmp_path, resume=position) as writer:
        write(writer, make_exchange(1))
    urls = [rec.header("WARC-Target-URI") for _, rec in responses(tmp_path)]
    assert urls == [make_exchange(0).url, make_exchange(1).url]
    assert_indexes_complete(tmp_path, [position.filename])


def test_resume_right_after_opening_and_at_offset_zero(tmp_path: Path) -> None:
    writer = WarcWriter(tmp_path)
    opened = writer.sync()  # what the crawler commits before its first exchange
    write(writer, make_exchange(0))
    writer.close()
    with WarcWriter(tmp_path, resume=opened) as writer:
        write(writer, make_exchange(1))
    with WarcWriter(tmp_path, resume=WarcPosition(opened.filename, 0)) as writer:
        write(writer, make_exchange(2))
    records = read_records(tmp_path / opened.filename)
    assert [r.type for r in records] == ["warcinfo", "request", "response", "metadata"]
    assert records[2].header("WARC-Target-URI") == make_exchange(2).url
    assert_indexes_complete(tmp_path, [opened.filename])


def test_resume_rebuilds_a_missing_index_of_an_earlier_file(tmp_path: Path) -> None:
    with WarcWriter(tmp_path, max_size=5_000) as writer:
        for i in range(4):
            write(writer, make_exchange(i))
        position = writer.sync()
    first = writer.files[0]
    index = cdxj_path(tmp_path / first)
    expected = index.read_text()
    index.unlink()
    with WarcWriter(tmp_path, max_size=5_000, resume=position):
        assert index.read_text() == expected


def test_resume_refuses_a_position_the_files_do_not_have(tmp_path: Path) -> None:
    with WarcWriter(tmp_path) as writer:
        write(writer, make_exchange(0))
        position = writer.sync()
    contents = (tmp_path / position.filename).read_bytes()
    with pytest.raises(WarcError, match="bytes but"):
        WarcWriter(tmp_path, resume=WarcPosition(position.filename, position.offset + 1))
    with pytest.raises(WarcError, match="missing"):
        WarcWriter(tmp_path, resume=WarcPosition(position.filename.replace("00001", "00009"), 0))
    with pytest.raises(WarcError, match="not a WARC file of prefix"):
        WarcWriter(tmp_path, "other", resume=position)
    with pytest.raises(WarcError, match="cannot be read"):
        WarcWriter(tmp_path, resume=WarcPosition(position.filename, position.offset - 10))
    # A refused resume touches nothing.
    assert (tmp_path / position.filename).read_bytes() == contents
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [position.filename, cdxj_path(tmp_path / position.filename).name]
    )


def test_a_new_writer_starts_a_new_file_and_leaves_the_old_ones(tmp_path: Path) -> None:
    with WarcWriter(tmp_path) as first:
        write(first, make_exchange(0))
    old = (tmp_path / first.files[0]).read_bytes()
    with WarcWriter(tmp_path, "other") as other:
        write(other, make_exchange(1))
    with WarcWriter(tmp_path) as second:
        write(second, make_exchange(2))
    assert len(second.files) == 2
    assert second.files[0] == first.files[0]
    assert second.files[1].endswith("-00002.warc.gz")
    assert (tmp_path / first.files[0]).read_bytes() == old
    assert other.files[0].startswith("other-")


def test_invalid_input_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    ex = make_exchange(0)
    with WarcWriter(tmp_path) as writer:
        before = writer.sync()
        with pytest.raises(ValueError, match="line break"):
            write(writer, ex, url="http://example.com/\r\nWARC-Type: forged")
        with pytest.raises(ValueError, match="line break"):
            write(writer, ex, outlinks=["http://a/\nb"])
        with pytest.raises(ValueError, match=re.escape(r"line break: 'http://b/\r'")):
            write(writer, ex, outlinks=["http://a/", "http://b/\r", "http://c/"])
        with pytest.raises(ValueError, match="blank line"):
            write(writer, ex, response_head=b"HTTP/1.1 200 OK\r\n")
        with pytest.raises(ValueError, match="port"):
            write(writer, ex, url="http://example.com:99999/")
        assert writer.sync() == before
    with pytest.raises(ValueError, match="closed"):
        write(writer, ex)
    with pytest.raises(ValueError, match="prefix"):
        WarcWriter(tmp_path, "../x")


def test_http_head_and_payload_digest() -> None:
    head = http_head(
        "HTTP/1.1 200 OK",
        [(b"Content-Type", b"text/html"), ("Transfer-Encoding", "chunked"), ("X-A", "1")],
    )
    assert head == b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-A: 1\r\n\r\n"
    kept = http_head(
        b"HTTP/1.1 200 OK", [("Transfer-Encoding", "chunked")], keep_transfer_encoding=True
    )
    assert kept == b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    # The SHA-1 of nothing, in the base32 every WARC tool writes.
    assert payload_digest(b"") == "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ"
    # The hand-made base32 agrees with the standard library's on any data.
    rng = random.Random(7)
    for size in (0, 1, 3, 20, 1000, 70_000, *range(100)):
        data = rng.randbytes(size)
        expected = base64.b32encode(hashlib.sha1(data).digest()).decode()
        assert payload_digest(data) == "sha1:" + expected


def test_record_ids_are_distinct_random_uuids(tmp_path: Path) -> None:
    with WarcWriter(tmp_path) as writer:
        for i in range(50):
            write(writer, make_exchange(i))
        name = writer.files[0]
    with open(tmp_path / name, "rb") as f:
        ids = [r.rec_headers.get_header("WARC-Record-ID") for r in ArchiveIterator(f)]
    assert len(ids) == len(set(ids)) > 100
    for record_id in ids:
        assert record_id.startswith("<urn:uuid:") and record_id.endswith(">")
        parsed = uuid.UUID(record_id[len("<urn:uuid:") : -1])
        assert (parsed.version, parsed.variant) == (4, uuid.RFC_4122)
        assert str(parsed) == record_id[len("<urn:uuid:") : -1]


def test_record_ids_of_a_forked_process_are_its_own() -> None:
    """Shards are forked from one process: their IDs must not repeat each other's."""
    _record_id()
    read, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read)
        os.write(write_end, " ".join(_record_id() for _ in range(20)).encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read, "rb") as f:
        theirs = set(f.read().decode().split())
    os.waitpid(pid, 0)
    mine = {_record_id() for _ in range(20)}
    assert len(theirs) == len(mine) == 20 and not theirs & mine


def test_warc_dates_round_as_datetime_does() -> None:
    rng = random.Random(3)
    times = [rng.uniform(0, 4e9) for _ in range(20_000)]
    times += [t + d for t in (0.0, 1796135124.0) for d in (0.4999995, 0.9999995, 0.9999996)]
    times += [1796135124.25] * 3 + [1796135125.5, 1796135124.75, -1.5, -0.0000004]
    for t in times:
        assert _warc_date(t) == warc_date(t), t


@pytest.mark.parametrize("size", [0, 1, 65_534, 65_535, 65_536, 3 * 65_535 + 7])
def test_a_stored_gzip_member_reads_back_as_zlibs_does(size: int) -> None:
    data = os.urandom(size)
    member = gzip_stored(data)
    assert gzip.decompress(member) == data == gzip.decompress(zlib.compress(data, 0, 31))
    # Stored blocks: the length plus 5 bytes a block, 10 of header and 8 of trailer.
    assert len(member) == size + 5 * max(1, -(-size // 65_535)) + 18
    # One member that ends where it says: a reader of a file of many finds the next.
    d = zlib.decompressobj(31)
    assert d.decompress(member + b"next") == data and d.eof and d.unused_data == b"next"


@pytest.mark.parametrize(
    "cuts",
    [(), (0,), (10,), (65_535,), (65_530, 65_540), (1, 2, 3, 70_000, 200_000), (196_612,)],
)
def test_a_stored_member_in_parts_is_the_member_of_their_join(cuts: tuple[int, ...]) -> None:
    # A record's head, its payload and its end are handed over apart, never joined: the
    # member must be the same bytes, whatever falls across a block's boundary.
    data = os.urandom(3 * 65_535 + 7)
    bounds = [0, *cuts, len(data)]
    parts = [data[a:b] for a, b in itertools.pairwise(bounds)]
    assert gzip_stored(*parts) == gzip_stored(data)
    assert gzip.decompress(gzip_stored(*parts)) == data
    assert gzip_stored(b"", b"") == gzip_stored(b"") == gzip_stored()
