"""The demo archive: generated and hostile mail, the five file formats, and the server
over real HTTP on 127.0.0.1 (validators, ranges, changes, faults, the request log)."""

from __future__ import annotations

import asyncio
import email
import gzip
import http.client
import json
import mailbox
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from email.message import Message as EmailMessage
from email.utils import formatdate
from pathlib import Path

import aiohttp
import pytest

from helpers import reference_seconds
from thresher.archives import parse_message, split_mbox
from thresher.archives.demo import (
    HOSTILE_NAMES,
    ArchiveList,
    DemoArchive,
    generate_messages,
    hostile_messages,
    modmbox_index_html,
    pipermail_index_html,
    render_mbox,
    render_pipermail,
)
from thresher.archives.months import month_bounds

LIST = "dev@example.org"
MONTHS = ["2024-01", "2024-02", "2024-03"]
PER_MONTH = 12


class Clock:
    def __init__(self) -> None:
        self.now = 1_717_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def server(clock: Clock) -> Iterator[DemoArchive]:
    with DemoArchive(clock=clock) as archive:
        months = generate_messages(LIST, MONTHS, PER_MONTH)
        months["2024-01"] += [h.raw for h in hostile_messages(LIST, "2024-01")]
        archive.add_list(LIST, "2023-11", months)
        yield archive


def get(
    server: DemoArchive, path: str, headers: dict[str, str] | None = None, method: str = "GET"
) -> tuple[int, http.client.HTTPMessage, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request(method, path, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.headers, response.read()
    finally:
        conn.close()


def ids(messages: list[bytes]) -> list[str | None]:
    return [parse_message(raw).message_id for raw in messages]


def sample(n: int = 40) -> list[bytes]:
    months = generate_messages(LIST, ["2024-05"], n, seed=3)
    return months["2024-05"] + [h.raw for h in hostile_messages(LIST, "2024-05")]


# --- messages ---------------------------------------------------------------------------


def test_generation_is_deterministic_and_realistic() -> None:
    first = generate_messages(LIST, MONTHS, 50)
    assert first == generate_messages(LIST, MONTHS, 50)
    assert first != generate_messages(LIST, MONTHS, 50, seed=1)
    assert list(first) == MONTHS
    everything = [raw for month in MONTHS for raw in first[month]]
    parsed = [parse_message(raw, now=datetime(2030, 1, 1, tzinfo=UTC)) for raw in everything]
    message_ids = [m.message_id for m in parsed]
    assert len(set(message_ids)) == len(everything)
    assert all(i and i.endswith("@example.org") for i in message_ids)
    for month in MONTHS:
        start, end = month_bounds(month)
        for raw in first[month]:
            date = parse_message(raw).date
            assert date is not None and start <= date.timestamp() < end
    seen: set[str | None] = set()
    replies = 0
    for message in parsed:
        if message.in_reply_to is not None:
            replies += 1
            assert message.in_reply_to in seen  # replies point back to earlier mail
            assert message.references[-1] == message.in_reply_to
            assert (message.subject or "").startswith("Re: ")
            assert b"\n> " in message.raw  # the quoted parent
        seen.add(message.message_id)
    assert 0.3 < replies / len(parsed) < 0.8
    assert len({m.from_addr for m in parsed}) >= 25
    assert any(b"=?utf-8?q?" in raw for raw in everything)
    assert any("ö" in (m.from_ or "") for m in parsed)  # RFC 2047 names decode
    assert any(re.search(rb"\nFrom ", raw) for raw in everything)
    assert not any(b"\r" in raw for raw in everything)
    assert all(b"Content-Type: text/plain; charset=utf-8" in raw for raw in everything)
    assert 1000 < sum(map(len, everything)) / len(everything) < 2000


def test_generation_is_fast() -> None:
    months = [f"{year}-{mon:02d}" for year in (2020, 2021) for mon in range(1, 13)]
    started = time.process_time()  # CPU time: other processes' load does not count
    result = generate_messages(LIST, months, 50_000 // len(months) + 1)
    elapsed = time.process_time() - started
    assert sum(map(len, result.values())) >= 50_000
    # About 8 yardsticks here (0.45-0.49 s against 0.06 s); the bound is relative.
    assert elapsed < 30 * reference_seconds()


def test_hostile_messages() -> None:
    hostile = hostile_messages(LIST, "2024-01")
    assert tuple(h.name for h in hostile) == HOSTILE_NAMES
    raw = {h.name: h.raw for h in hostile}
    now = datetime(2025, 1, 1, tzinfo=UTC)
    parsed = {name: parse_message(r, now=now) for name, r in raw.items()}
    assert parsed["no-message-id"].message_id is None
    assert parsed["no-message-id"].key.startswith("sha256:")
    assert parsed["no-date"].date_flag == "missing"
    assert parsed["garbage-date"].date_flag == "unparseable"
    assert parsed["future-date"].date_flag == "future"
    assert b"\xe9" in raw["latin1-no-charset"] and b"Content-Type" not in raw["latin1-no-charset"]
    assert parsed["latin1-no-charset"].subject == "Café crème"
    assert b"=?uft-8?" in raw["bad-charset-word"]
    assert "Jörg" in (parsed["bad-charset-word"].from_ or "")
    assert b"home\nFrom me at home Mon Jan  1 00:00:00 2024\n" not in raw["envelope-like-body"]
    assert b"train.\nFrom me at home Mon Jan  1 00:00:00 2024\n" in raw["envelope-like-body"]
    assert b"\x00" in raw["nul-bytes"]
    assert max(len(line) for line in raw["long-header"].split(b"\n")) > 15_000
    keys = [m.key for m in parsed.values()]
    assert len(set(keys)) == len(keys)
    for name in HOSTILE_NAMES:
        if name not in ("no-date", "garbage-date", "future-date"):
            date = parsed[name].date
            assert date is not None and date.strftime("%Y-%m") == "2024-01"


# --- file formats -----------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["pipermail", "mboxo", "mboxrd"])
def test_renderers_round_trip(kind: str) -> None:
    messages = sample()
    from_lines = [raw for raw in messages if re.search(rb"\n\n?From (?!me at)", raw)]
    assert from_lines, "the sample needs a body line starting with From"
    if kind == "pipermail":
        data = render_pipermail(messages)
        split = split_mbox(data, unescape=False)
        assert ids([m.raw for m in split]) == ids(messages)
        line = re.search(rb"\n(From [^\n]+)\n", from_lines[0].split(b"\n\n", 1)[1])
        assert line is not None and b"\n" + line.group(1) + b"\n" in data  # not escaped
        first = split[0]
        sender = parse_message(messages[0]).from_addr or ""
        assert first.envelope.startswith(f"From {sender.replace('@', ' at ')}  ".encode())
        assert re.search(rb"^From: \S+ at \S+ \(.+\)$", first.raw, re.M)
        assert parse_message(first.raw).from_addr == sender
    else:
        data = render_mbox(messages, rd=kind == "mboxrd")
        split = split_mbox(data, unescape=True)
        assert [m.raw for m in split] == messages  # exact, "From " lines included
        assert b"\n>From me at home Mon Jan  1 00:00:00 2024\n" in data
        assert not re.search(rb"\n\nFrom (?!\S+ \w{3} \w{3} [ \d]\d \d\d:)", data)
    assert len(split) == len(messages)
    assert all(m.envelope.endswith(b"\n") for m in split)


def test_mboxrd_escapes_quoted_from_lines() -> None:
    raw = b"Subject: x\nMessage-ID: <q@example.org>\n\nFrom a\n>From b\n>>From c\n"
    assert b"\n>From a\n>>From b\n>>>From c\n" in render_mbox([raw], rd=True)
    assert b"\n>From a\n>From b\n>>From c\n" in render_mbox([raw], rd=False)
    assert split_mbox(render_mbox([raw], rd=True))[0].raw == raw


@pytest.mark.parametrize("kind", ["pipermail", "mboxo", "mboxrd"])
def test_renderers_only_append(kind: str) -> None:
    messages = sample(20)

    def render(part: list[bytes]) -> bytes:
        if kind == "pipermail":
            return render_pipermail(part)
        return render_mbox(part, rd=kind == "mboxrd")

    whole = render(messages)
    for cut in (0, 1, 7, len(messages) - 1):
        assert whole == render(messages[:cut]) + render(messages[cut:])


@pytest.mark.parametrize("rd", [False, True])
def test_python_mailbox_reads_the_mbox(tmp_path: Path, rd: bool) -> None:
    messages = sample()
    path = tmp_path / "list.mbox"
    path.write_bytes(render_mbox(messages, rd=rd))
    box = mailbox.mbox(path, create=False)
    try:
        read: list[EmailMessage] = list(box)
        assert len(read) == len(messages)
        expected = [email.message_from_bytes(raw)["Message-ID"] for raw in messages]
        assert [m["Message-ID"] for m in read] == expected
    finally:
        box.close()


def test_index_pages() -> None:
    page = pipermail_index_html("dev", {"2023-12": 800, "2024-01": 3456})
    assert page.index("December 2023") > page.index("January 2024")  # newest first
    assert "<td>January 2024:</td>" in page
    assert 'href="2024-January/thread.html"' in page and 'href="2024-January/date.html"' in page
    assert '<a href="2024-January.txt.gz">[ Gzip\'d Text 3 KB ]</a>' in page
    assert "[ Gzip'd Text 800 bytes ]" in page
    page = modmbox_index_html(LIST, {"2023-12": 5, "2024-01": 123})
    assert '<table id="grid">' in page
    assert page.index('id="202401"') < page.index('id="202312"')
    row = (
        '<tr><td class="date">Jan 2024</td><td class="links"><span class="links" id="202401">'
        '<a href="202401.mbox/thread">Thread</a> &middot; <a href="202401.mbox/date">Date</a>'
        ' &middot; <a href="202401.mbox/author">Author</a></span></td>'
        '<td class="msgcount">123</td></tr>'
    )
    assert row in page


def test_archive_list_versions(clock: Clock) -> None:
    archive = ArchiveList(LIST, months={"2024-02": [b"b"], "2024-01": [b"a"]}, clock=clock)
    assert (archive.name, archive.domain, archive.created) == ("dev", "example.org", "2024-01")
    assert list(archive.months) == ["2024-01", "2024-02"]
    clock.now += 60
    archive.add("2023-12", b"late")
    archive.add_duplicate("2024-01", 0)
    assert list(archive.months) == ["2023-12", "2024-01", "2024-02"]
    assert archive.counts() == {"2023-12": 1, "2024-01": 2, "2024-02": 1}
    assert archive.versions["2024-01"] == 2 and archive.changed["2024-01"] == clock.now
    assert archive.remove("2024-01", 0) == b"a"
    assert archive.versions["2024-01"] == 3
    with pytest.raises(ValueError):
        archive.add("2024-13", b"x")


# --- the server -------------------------------------------------------------------------


def test_endpoints(server: DemoArchive) -> None:
    assert server.base == f"http://127.0.0.1:{server.port}"
    counts = server.lists[LIST].counts()
    status, _, page = get(server, "/pipermail/dev/")
    assert status == 200 and b'href="2024-March.txt.gz"' in page
    status, headers, text = get(server, "/pipermail/dev/2024-January.txt")
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    assert len(split_mbox(text, unescape=False)) == counts["2024-01"]
    status, headers, gz = get(server, "/pipermail/dev/2024-January.txt.gz")
    assert status == 200 and gzip.decompress(gz) == text
    assert b"[ Gzip'd Text" in page and f"{len(gz) // 1000} KB".encode() in page

    status, _, page = get(server, "/mod_mbox/dev/")
    assert status == 200 and f'<td class="msgcount">{counts["2024-01"]}</td>'.encode() in page
    status, headers, data = get(server, "/mod_mbox/dev/202402.mbox")
    assert status == 200 and headers["Content-Type"] == "application/mbox"
    assert len(split_mbox(data)) == PER_MONTH

    status, _, page = get(server, f"/list.html?{LIST}")
    assert status == 200 and LIST.encode() in page
    status, headers, data = get(server, "/api/stats.lua?list=dev&domain=example.org")
    stats = json.loads(data)
    assert headers["Content-Type"] == "application/json"
    assert (stats["firstYear"], stats["firstMonth"], stats["lastYear"], stats["lastMonth"]) == (
        2024,
        1,
        2024,
        3,
    )
    assert stats["active_months"] == counts and stats["emails"] == []
    status, headers, data = get(server, f"/api/mbox.lua?list={LIST}&date=2024-01")
    assert status == 200 and headers["Content-Type"] == "application/mbox"
    assert [m.raw for m in split_mbox(data)] == server.lists[LIST].months["2024-01"]
    assert get(server, f"/api/mbox.lua?list={LIST}&date=2024-7")[:3:2] == (200, b"")

    status, _, page = get(server, f"/hyperkitty/list/{LIST}/")
    # Like HyperKitty's: every month from the oldest message's to the current one.
    assert status == 200 and f"/hyperkitty/list/{LIST}/2024/1/".encode() in page
    assert f"/hyperkitty/list/{LIST}/2023/12/".encode() not in page
    status, _, data = get(server, f"/hyperkitty/api/list/{LIST}/")
    info = json.loads(data)
    assert info["name"] == LIST and info["display_name"] == "dev"
    assert info["created_at"] == "2023-11-01T00:00:00Z"
    assert info["emails"] == f"{server.base}/hyperkitty/api/list/{LIST}/emails/"
    export = f"/hyperkitty/list/{LIST}/export/{LIST}-2024-02.mbox.gz"
    status, headers, data = get(server, export + "?start=2024-02-01&end=2024-03-01")
    assert status == 200 and headers["Content-Type"] == "application/gzip"
    february = server.lists[LIST].months["2024-02"]
    # Quoted the mboxo way, as HyperKitty's exports are.
    assert gzip.decompress(data) == render_mbox(february, rd=False)

    status, headers, data = get(server, "/mbox/dev.mbox")
    assert status == 200 and len(split_mbox(data)) == sum(counts.values())
    status, _, gz = get(server, "/mbox/dev.mbox.gz")
    assert status == 200 and gzip.decompress(gz) == data


def test_hyperkitty_emails_pages(server: DemoArchive) -> None:
    total = sum(server.lists[LIST].counts().values())
    api = f"/hyperkitty/api/list/{LIST}/emails/"
    page = json.loads(get(server, api)[2])
    assert page["count"] == total and len(page["results"]) == 10 and page["previous"] is None
    assert page["next"] == f"{server.base}{api}?limit=10&offset=10"
    newest = parse_message(server.lists[LIST].months["2024-03"][-1])
    first = page["results"][0]
    assert first["message_id"] == newest.message_id and first["subject"] == newest.subject
    assert first["sender_name"] and first["date"].endswith("Z")
    page = json.loads(get(server, f"{api}?limit=5&offset={total - 3}")[2])
    assert len(page["results"]) == 3 and page["next"] is None and page["previous"]
    oldest = parse_message(server.lists[LIST].months["2024-01"][0])
    assert page["results"][-1]["message_id"] == oldest.message_id
    assert json.loads(get(server, f"{api}?limit=1")[2])["count"] == total


def test_unknown_lists_and_months_are_404(server: DemoArchive) -> None:
    for path in [
        "/pipermail/nope/",
        "/pipermail/dev/2019-January.txt",
        "/pipermail/dev/2024-Janvier.txt",
        "/mod_mbox/nope/",
        "/mod_mbox/dev/201901.mbox",
        "/list.html?nope@example.org",
        "/api/stats.lua?list=nope&domain=example.org",
        "/api/mbox.lua?list=nope@example.org&date=2024-01",
        "/hyperkitty/api/list/nope@example.org/",
        "/hyperkitty/api/list/nope@example.org/emails/",
        "/mbox/nope.mbox",
        "/robots.txt",
        "/elsewhere",
    ]:
        assert get(server, path)[0] == 404, path
    server.robots = "User-agent: *\nDisallow: /private/\n"
    assert get(server, "/robots.txt")[::2] == (200, server.robots.encode())
    assert get(server, f"/api/mbox.lua?list={LIST}&date=garbage")[0] == 400


def test_dynamic_endpoints_have_no_validators_or_ranges(server: DemoArchive) -> None:
    for path in [
        f"/api/mbox.lua?list={LIST}&date=2024-01",
        f"/hyperkitty/list/{LIST}/export/{LIST}-2024-01.mbox.gz?start=2024-01-01&end=2024-02-01",
    ]:
        status, headers, data = get(server, path, {"Range": "bytes=10-"})
        assert status == 200 and len(data) > 10
        assert not {"ETag", "Last-Modified", "Accept-Ranges"} & set(headers)


def test_conditional_get(server: DemoArchive, clock: Clock) -> None:
    path = "/pipermail/dev/2024-February.txt"
    status, headers, body = get(server, path)
    etag, modified = headers["ETag"], headers["Last-Modified"]
    assert headers["Accept-Ranges"] == "bytes"
    assert modified == formatdate(int(clock.now), usegmt=True)
    assert get(server, path, {"If-None-Match": etag})[::2] == (304, b"")
    assert get(server, path, {"If-None-Match": f'"other", W/{etag}'})[0] == 304
    assert get(server, path, {"If-Modified-Since": modified})[0] == 304
    earlier = formatdate(int(clock.now) - 10, usegmt=True)
    assert get(server, path, {"If-Modified-Since": earlier})[::2] == (200, body)
    # If-None-Match takes precedence over If-Modified-Since (RFC 9110).
    assert get(server, path, {"If-None-Match": '"other"', "If-Modified-Since": modified})[0] == 200
    status, headers, data = get(server, path, method="HEAD")
    assert (status, data, headers["ETag"]) == (200, b"", etag)
    assert int(headers["Content-Length"]) == len(body)
    for other in ("/mod_mbox/dev/202401.mbox", "/mbox/dev.mbox", "/mbox/dev.mbox.gz"):
        tag = get(server, other)[1]["ETag"]
        assert get(server, other, {"If-None-Match": tag})[0] == 304


def test_ranges(server: DemoArchive) -> None:
    path = "/mod_mbox/dev/202401.mbox"
    body = get(server, path)[2]
    size = len(body)
    status, headers, data = get(server, path, {"Range": "bytes=100-"})
    assert (status, data) == (206, body[100:])
    assert headers["Content-Range"] == f"bytes 100-{size - 1}/{size}"
    status, headers, data = get(server, path, {"Range": "bytes=10-19"})
    assert (status, data, headers["Content-Range"]) == (206, body[10:20], f"bytes 10-19/{size}")
    status, headers, _ = get(server, path, {"Range": f"bytes={size}-"})
    assert (status, headers["Content-Range"]) == (416, f"bytes */{size}")
    # A changed file (If-None-Match does not match) with a Range: 206 of the current bytes.
    status, _, data = get(server, path, {"Range": "bytes=5-", "If-None-Match": '"old"'})
    assert (status, data) == (206, body[5:])
    server.ranges = False
    status, headers, data = get(server, path, {"Range": "bytes=100-"})
    assert (status, data) == (200, body) and "Accept-Ranges" not in headers


def test_changes_move_validators(server: DemoArchive, clock: Clock) -> None:
    archive = server.lists[LIST]
    path = "/pipermail/dev/2024-February.txt"
    _, headers, before = get(server, path)
    clock.now += 3600
    late = generate_messages(LIST, ["2024-02"], 1, seed=9)["2024-02"][0]
    archive.add("2024-02", late)
    status, after_headers, _ = get(server, path, {"If-None-Match": headers["ETag"]})
    assert status == 200 and after_headers["ETag"] != headers["ETag"]
    assert after_headers["Last-Modified"] == formatdate(int(clock.now), usegmt=True)
    status, _, tail = get(server, path, {"Range": f"bytes={len(before)}-"})
    assert status == 206 and tail == render_pipermail([late])  # the file only grew
    archive.remove("2024-02", 0)
    assert len(split_mbox(get(server, path)[2], unescape=False)) == PER_MONTH
    archive.add("2024-04", late)
    assert b"2024-April.txt.gz" in get(server, "/pipermail/dev/")[2]
    assert b'id="202404"' in get(server, "/mod_mbox/dev/")[2]


def test_counts_include_duplicates(server: DemoArchive) -> None:
    archive = server.lists[LIST]
    archive.add_duplicate("2024-03", 0)
    archive.add_duplicate("2024-03", 0)
    stats = json.loads(get(server, "/api/stats.lua?list=dev&domain=example.org")[2])
    assert stats["active_months"]["2024-03"] == PER_MONTH + 2
    assert f'<td class="msgcount">{PER_MONTH + 2}</td>'.encode() in get(server, "/mod_mbox/dev/")[2]
    emails = json.loads(get(server, f"/hyperkitty/api/list/{LIST}/emails/")[2])
    assert emails["count"] == sum(archive.counts().values())
    data = get(server, f"/api/mbox.lua?list={LIST}&date=2024-03")[2]
    assert len(split_mbox(data)) == PER_MONTH + 2


def test_status_faults(server: DemoArchive) -> None:
    path = "/mod_mbox/dev/202401.mbox"
    server.fault("202401", "503", times=2, retry_after=7)
    server.fault("stats.lua", "500")
    for _ in range(2):
        status, headers, _ = get(server, path)
        assert (status, headers["Retry-After"]) == (503, "7")
    assert get(server, path)[0] == 200
    assert get(server, "/api/stats.lua?list=dev&domain=example.org")[0] == 500
    assert get(server, "/api/stats.lua?list=dev&domain=example.org")[0] == 200
    assert server.count("202401", status=503) == 2 and server.count(status=500) == 1
    with pytest.raises(ValueError):
        server.fault("x", "teapot")  # type: ignore[arg-type]


def test_reset_and_truncate(server: DemoArchive) -> None:
    path = "/pipermail/dev/2024-January.txt"
    size = len(get(server, path)[2])
    server.reset_log()
    server.fault("2024-January.txt", "truncate")
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("GET", path)
    response = conn.getresponse()
    assert response.status == 200 and int(response.headers["Content-Length"]) == size
    with pytest.raises(http.client.IncompleteRead) as info:
        response.read()
    assert len(info.value.partial) == size // 2
    conn.close()
    server.fault("2024-January.txt", "reset")
    with pytest.raises((ConnectionResetError, http.client.IncompleteRead)):
        get(server, path)
    assert get(server, path)[0] == 200
    log = server.requests
    assert [(r.status, r.sent) for r in log] == [(200, size // 2), (200, size // 2), (200, size)]
    assert server.bytes_sent("2024-January") == 2 * (size // 2) + size


def test_hang_stalls_only_its_request(server: DemoArchive) -> None:
    # Long enough that a busy machine answers the other request well within it.
    server.hang_seconds = 2
    server.fault("202402", "hang")
    results: list[float] = []

    def slow() -> None:
        started = time.monotonic()
        assert get(server, "/mod_mbox/dev/202402.mbox")[0] == 200
        results.append(time.monotonic() - started)

    thread = threading.Thread(target=slow)
    thread.start()
    time.sleep(0.05)
    assert get(server, "/mod_mbox/dev/202401.mbox")[0] == 200
    # Answered while the slow one still waits: not queued behind it (an order, not a
    # time, so a busy machine cannot make it fail).
    assert not results and thread.is_alive()
    thread.join()
    assert results and results[0] >= 2


def test_hang_does_not_block_stop() -> None:
    server = DemoArchive(hang_seconds=30).start()
    server.add_list(LIST, None, generate_messages(LIST, ["2024-01"], 3))
    server.fault("202401", "hang")
    outcome: list[object] = []

    def hung() -> None:
        try:
            outcome.append(get(server, "/mod_mbox/dev/202401.mbox")[0])
        except (OSError, http.client.HTTPException) as exc:
            outcome.append(exc)

    thread = threading.Thread(target=hung)
    thread.start()
    time.sleep(0.1)
    started = time.monotonic()
    server.stop()
    thread.join(5)
    # Not the 30 s the request hangs for.
    assert time.monotonic() - started < 15 and outcome and not thread.is_alive()


def test_request_log(server: DemoArchive) -> None:
    server.reset_log()
    body = get(server, "/mod_mbox/dev/202403.mbox", {"If-None-Match": '"x"'})[2]
    tag = get(server, "/mod_mbox/dev/202403.mbox")[1]["ETag"]
    get(server, "/mod_mbox/dev/202403.mbox", {"If-None-Match": tag})
    get(server, "/api/stats.lua?list=dev&domain=example.org")
    get(server, "/nope")
    first = server.requests[0]
    assert (first.method, first.path, first.status, first.sent) == (
        "GET",
        "/mod_mbox/dev/202403.mbox",
        200,
        len(body),
    )
    assert first.headers["if-none-match"] == '"x"' and first.time > 0
    stats = server.requests[3]
    assert (stats.query, stats.target) == (
        "list=dev&domain=example.org",
        "/api/stats.lua?list=dev&domain=example.org",
    )
    assert server.count() == 5 and server.count("202403") == 3
    assert server.count("202403", status=304) == 1 and server.count(status=404) == 1
    assert server.count("domain=example") == 1
    assert server.bytes_sent("202403") == 2 * len(body)
    server.reset_log()
    assert server.requests == [] and server.count() == 0


def test_async_client_on_another_loop(server: DemoArchive) -> None:
    async def fetch() -> tuple[int, dict[str, int]]:
        async with aiohttp.ClientSession() as session:
            url = f"{server.base}/api/stats.lua?list=dev&domain=example.org"
            async with session.get(url) as response:
                return response.status, (await response.json())["active_months"]

    assert asyncio.run(fetch()) == (200, server.lists[LIST].counts())


def test_subprocess_client(server: DemoArchive) -> None:
    code = "import sys, urllib.request; print(len(urllib.request.urlopen(sys.argv[1]).read()))"
    url = f"{server.base}/mod_mbox/dev/202401.mbox"
    out = subprocess.run(
        [sys.executable, "-c", code, url], capture_output=True, text=True, check=True, timeout=30
    )
    assert int(out.stdout) == len(get(server, "/mod_mbox/dev/202401.mbox")[2])


def test_lifecycle_and_urls() -> None:
    with DemoArchive() as first:
        with pytest.raises(OSError):
            DemoArchive(port=first.port).start()
        first.add_list(LIST)
        assert first.url("pipermail", LIST) == f"{first.base}/pipermail/dev/"
        assert first.url("modmbox", LIST) == f"{first.base}/mod_mbox/dev/"
        assert first.url("ponymail", LIST) == f"{first.base}/list.html?{LIST}"
        assert first.url("hyperkitty", LIST) == f"{first.base}/hyperkitty/list/{LIST}/"
        assert first.url("mbox", LIST) == f"{first.base}/mbox/dev.mbox"
        assert get(first, "/")[0] == 200
        assert get(first, "/api/mbox.lua?list=dev@example.org&date=2024-01")[::2] == (200, b"")
    first.stop()  # a second stop is harmless


def test_hyperkitty_lists_what_it_archived_last_first(server: DemoArchive) -> None:
    """Like HyperKitty's `emails` listing (newest *archived* first): late mail for an old
    month comes first, with the date of the month it is filed under."""
    archive = server.lists[LIST]
    late = archive.months["2024-03"][0].replace(b"Message-ID: <", b"Message-ID: <late.", 1)
    archive.add("2024-01", late)
    page = json.loads(get(server, f"/hyperkitty/api/list/{LIST}/emails/?limit=2")[2])
    first, second = page["results"]
    assert first["message_id"] == parse_message(late).message_id
    assert first["date"] == "2024-01-01T00:00:00Z"  # filed in January, dated March
    assert second["message_id"] == parse_message(archive.months["2024-03"][-1]).message_id
    export = f"/hyperkitty/list/{LIST}/export/x.mbox.gz?start=2024-01-01&end=2024-02-01"
    assert split_mbox(gzip.decompress(get(server, export)[2]))[-1].raw == late
