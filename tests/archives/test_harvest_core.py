"""The pure core of month harvesting: months, listings, decisions, answers absorbed."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
from datetime import UTC, datetime

import pytest

from thresher.archives.harvest import OVERLAP, Known, absorb, decide, request_headers
from thresher.archives.kinds import (
    Month,
    hyperkitty_export_url,
    hyperkitty_parts,
    parse_modmbox_index,
    parse_pipermail_index,
    parse_ponymail_stats,
    ponymail_parts,
)
from thresher.archives.mbox import maybe_gunzip
from thresher.archives.months import closes_at, is_closed, month_of, months_from, next_month
from thresher.archives.rows import display_name
from thresher.errors import PermanentError, SourceError, TransientError


def ts(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> float:
    return datetime(year, month, day, hour, minute, tzinfo=UTC).timestamp()


def msg(i: int, body: str = "hello") -> bytes:
    return (
        f"From user{i}@example.org  Mon Jan  1 00:00:{i % 60:02d} 2024\n"
        f"Message-ID: <m{i}@example.org>\nSubject: s{i}\n\n{body} {i}\n"
        + "padding line\n" * 40
        + "\n"
    ).encode()


def mbox(n: int, first: int = 0) -> bytes:
    return b"".join(msg(i) for i in range(first, first + n))


def known_after(data: bytes, month: str = "2024-01", url: str = "http://a/x.txt") -> Known:
    first = absorb(None, 200, {"etag": '"v1"'}, data, None, mboxrd=False)
    return Known(
        month=month,
        url=url,
        counted=first.counted,
        etag=first.etag,
        length=first.length,
        stop_offset=first.stop_offset,
        tail_sha256=first.tail_sha256,
    )


# --- months ---------------------------------------------------------------------------


def test_month_arithmetic() -> None:
    assert next_month("2024-12") == "2025-01"
    assert next_month("2024-01") == "2024-02"
    assert month_of(ts(2024, 2, 29, 23, 59)) == "2024-02"
    assert months_from("2023-11", ts(2024, 2, 1)) == ["2023-11", "2023-12", "2024-01", "2024-02"]
    assert months_from("2030-01", ts(2024, 2, 1)) == []


def test_a_month_closes_grace_days_after_its_end() -> None:
    assert closes_at("2024-01", 7) == ts(2024, 2, 8)
    assert not is_closed("2024-01", ts(2024, 2, 7, 23, 59), 7)
    assert is_closed("2024-01", ts(2024, 2, 8), 7)
    assert is_closed("2024-01", ts(2024, 2, 1), 0)
    assert not is_closed("all", ts(2099, 1, 1), 0)  # a plain mbox file is never complete


# --- listings -------------------------------------------------------------------------

PIPERMAIL_INDEX = b"""<html><body><table>
<tr><td>February 2024:</td><td><a href="2024-February/thread.html">[ Thread ]</a></td>
<td><a href="2024-February.txt.gz">[ Gzip'd Text 2 KB ]</a></td></tr>
<tr><td>January 2024:</td><td><a href="2024-January/thread.html">[ Thread ]</a></td>
<td><a href="2024-January.txt.gz">[ Gzip'd Text 3 KB ]</a></td></tr>
<tr><td>December 2023:</td><td><A HREF="2023-December.txt">[ Text 9 KB ]</A></td></tr>
</table></body></html>"""


def test_pipermail_index_offers_plain_text_first_for_open_months() -> None:
    base = "http://h/pipermail/dev/"
    months = parse_pipermail_index(PIPERMAIL_INDEX, base, prefer_plain=lambda m: m == "2024-02")
    assert [m.month for m in months] == ["2023-12", "2024-01", "2024-02"]
    assert months[0].urls == (base + "2023-December.txt",)
    assert months[1].urls == (base + "2024-January.txt.gz", base + "2024-January.txt")
    assert months[2].urls == (base + "2024-February.txt", base + "2024-February.txt.gz")
    assert all(m.grows and not m.mboxrd and m.expected is None for m in months)


def test_modmbox_index_counts() -> None:
    html = b"""<table id="grid">
<tr><td class="date">Feb 2024</td><td class="links"><span class="links" id="202402">
<a href="202402.mbox/thread">Thread</a></span></td><td class="msgcount">1,234</td></tr>
<tr><td class="date">Jan 2024</td><td class="links"><span class="links" id="202401">
<a href="202401.mbox/thread">Thread</a></span></td><td class="msgcount">7</td></tr>
</table>"""
    months = parse_modmbox_index(html, "http://h/mod_mbox/dev/")
    assert [(m.month, m.expected, m.urls[0]) for m in months] == [
        ("2024-01", 7, "http://h/mod_mbox/dev/202401.mbox"),
        ("2024-02", 1234, "http://h/mod_mbox/dev/202402.mbox"),
    ]


def test_ponymail_urls_and_stats() -> None:
    expected = ("https://lists.apache.org/", "dev", "maven.apache.org")
    assert ponymail_parts("https://lists.apache.org/list.html?dev@maven.apache.org") == expected
    assert ponymail_parts("https://lists.apache.org/list.html?dev@maven.apache.org:2024-1") == (
        expected
    )
    assert (
        ponymail_parts("https://lists.apache.org/api/stats.lua?list=dev&domain=maven.apache.org")
        == expected
    )
    with pytest.raises(SourceError):
        ponymail_parts("https://lists.apache.org/list.html")
    stats = b'{"firstYear": 2023, "active_months": {"2024-1": 3, "2023-12": 0, "bad": 4}}'
    assert parse_ponymail_stats(stats) == {"2024-01": 3, "2023-12": 0}
    with pytest.raises(PermanentError):
        parse_ponymail_stats(b"<html>maintenance</html>")


def test_hyperkitty_urls() -> None:
    root, address = hyperkitty_parts("https://mail.python.org/archives/list/dev@python.org/")
    assert (root, address) == ("https://mail.python.org/archives/", "dev@python.org")
    assert hyperkitty_export_url(root, address, "2024-12") == (
        "https://mail.python.org/archives/list/dev@python.org/export/"
        "dev@python.org-2024-12.mbox.gz?start=2024-12-01&end=2025-01-01"
    )


# --- decisions --------------------------------------------------------------------------


def test_decide() -> None:
    counted = Month("2024-01", ("u",), expected=5)
    plain = Month("2024-01", ("u",))
    fresh = Known("2024-01", "u", counted=5, expected=5, stop_offset=100)
    assert decide(counted, None, None) == "fetch"
    assert decide(counted, fresh, None) == "confirm"
    assert decide(Month("2024-01", ("u",), expected=6), fresh, None) == "fetch"
    assert decide(plain, fresh, None) == "fetch"  # validators: a conditional GET decides
    assert decide(plain, fresh, True) == "confirm"  # HyperKitty's total adds up
    done = Known("2024-01", "u", state="complete", counted=5, expected=5, stop_offset=100)
    assert decide(plain, done, False) == "skip"
    assert decide(counted, done, None) == "skip"
    # A count offered for free that moved reopens even a complete month.
    assert decide(Month("2024-01", ("u",), expected=7), done, None) == "fetch"
    # An archive that counts differently from its file: unchanged count, nothing new.
    odd = Known("2024-01", "u", counted=5, expected=6, stop_offset=100)
    assert decide(Month("2024-01", ("u",), expected=6), odd, None) == "confirm"


# --- answers ------------------------------------------------------------------------------


def test_first_harvest_takes_every_message() -> None:
    data = mbox(3)
    got = absorb(None, 200, {"etag": '"a"'}, data, None, mboxrd=False)
    assert got.full and got.counted == 3 and len(got.messages) == 3
    assert got.stop_offset == got.length == len(data)
    assert got.tail_sha256 == hashlib.sha256(data[-OVERLAP:]).hexdigest()


def test_conditional_range_request_for_a_growing_file() -> None:
    known = known_after(mbox(30))
    headers, start = request_headers(known, known.url, grows=True)
    assert headers["If-None-Match"] == '"v1"'
    assert start == (known.stop_offset or 0) - OVERLAP
    assert headers["Range"] == f"bytes={start}-"
    assert headers["Accept-Encoding"] == "identity"
    # Another file (the .gz), or a file that does not grow: no Range.
    assert request_headers(known, "http://a/x.txt.gz", grows=True) == ({}, None)
    assert "Range" not in request_headers(known, known.url, grows=False)[0]


def test_tail_of_a_grown_file_gives_only_new_messages() -> None:
    old, new = mbox(30), mbox(2, first=30)
    known = known_after(old)
    start = (known.stop_offset or 0) - OVERLAP
    data = old + new
    body = data[start:]
    headers = {"content-range": f"bytes {start}-{len(data) - 1}/{len(data)}"}
    got = absorb(known, 206, headers, body, start, mboxrd=False)
    assert not got.need_full and not got.full
    assert [m.offset for m in got.messages] == [len(old), len(old) + len(msg(30))]
    assert got.counted == 32 and got.stop_offset == got.length == len(data)
    assert got.tail_sha256 == hashlib.sha256(data[-OVERLAP:]).hexdigest()


def test_a_rewritten_prefix_asks_for_the_whole_file() -> None:
    old = mbox(30)
    known = known_after(old)
    start = (known.stop_offset or 0) - OVERLAP
    data = old[:-10] + b"CHANGED!!\n" + mbox(1, first=30)
    headers = {"content-range": f"bytes {start}-{len(data) - 1}/{len(data)}"}
    got = absorb(known, 206, headers, data[start:], start, mboxrd=False)
    assert got.need_full and got.events[0][0] == "changed"
    # A range that does not start where asked cannot be placed either.
    headers = {"content-range": f"bytes 0-{len(data) - 1}/{len(data)}"}
    assert absorb(known, 206, headers, data, start, mboxrd=False).need_full


def test_416_means_shrunk_and_the_whole_file_is_parsed_again() -> None:
    known = known_after(mbox(30))
    got = absorb(known, 416, {}, b"", 5, mboxrd=False)
    assert got.need_full and got.events[0][0] == "shrunk"
    smaller = mbox(29)
    whole = absorb(known, 200, {}, smaller, None, mboxrd=False)
    assert whole.full and whole.counted == 29
    assert whole.events == [("shrunk", "the file was rewritten: 30 messages before, 29 now")]


def test_whole_file_with_the_same_prefix_parses_only_the_tail() -> None:
    old = mbox(10)
    known = known_after(old)
    data, _ = asyncio.run(maybe_gunzip(gzip.compress(old + mbox(1, first=10)), 1 << 30))
    got = absorb(known, 200, {}, data, None, mboxrd=False)
    assert not got.full and got.counted == 11 and [m.offset for m in got.messages] == [len(old)]
    same = absorb(known, 200, {}, old, None, mboxrd=False)
    assert same.messages == [] and same.counted == 10 and not same.events


def test_not_modified_keeps_the_stop_sign() -> None:
    known = known_after(mbox(3))
    got = absorb(known, 304, {}, b"", None, mboxrd=False)
    assert got.not_modified and got.counted == 3 and got.stop_offset == known.stop_offset
    assert got.etag == '"v1"'


def test_truncated_gzip_is_retried_not_stored() -> None:
    data, truncated = asyncio.run(maybe_gunzip(gzip.compress(mbox(50))[:300], 1 << 30))
    assert truncated and data
    with pytest.raises(TransientError):
        absorb(None, 200, {}, data, None, mboxrd=False, truncated=truncated)
    with pytest.raises(PermanentError):
        absorb(None, 403, {}, b"", None, mboxrd=False)


@pytest.mark.parametrize(
    ("from_", "name"),
    [
        ("Ann Example <ann@example.org>", "Ann Example"),
        ('"Doe, John" <john@example.org>', "Doe, John"),
        ("ann at example.org (Ann Example)", "Ann Example"),
        ("山田太郎 <yamada@example.jp>", "山田太郎"),
        ("ann@example.org", None),
        ("<ann@example.org>", None),
        (None, None),
    ],
)
def test_the_sender_name_is_kept_apart_from_the_address(
    from_: str | None, name: str | None
) -> None:
    assert display_name(from_) == name
