"""Splitting mbox archives: strict envelopes, offsets, escaping, CRLF and gzip."""

from __future__ import annotations

import asyncio
import gzip
import mailbox
import re
from email.message import Message as EmailMessage
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thresher.archives.mbox import (
    ArchiveTooLarge,
    RawMessage,
    is_envelope,
    iter_mbox,
    maybe_gunzip,
    split_mbox,
)

ENV = b"From alice at example.org  Mon Jan  1 00:00:00 2024\n"


def mbox(*bodies: bytes, envelope: bytes = ENV, sep: bytes = b"\n") -> bytes:
    return b"".join(envelope + body + sep for body in bodies)


def check_offsets(data: bytes, messages: list[RawMessage]) -> None:
    offsets = [m.offset for m in messages]
    assert offsets == sorted(set(offsets))
    for m in messages:
        assert data.startswith(b"From ", m.offset)
        assert data.startswith(m.envelope, m.offset)


@pytest.mark.parametrize(
    "line",
    [
        b"From alice at example.org  Mon Jan  1 00:00:00 2024\n",
        b"From alice@example.org Mon Jan 1 00:00:00 2024",
        b"From MAILER-DAEMON Fri Jul  8 12:08:34 2011\n",
        b"From - Sat, Jan 03 01:05:34 1996\n",
        b"From bob@example.org Tue Feb 13 10:00:00 2024 +0000\n",
        b"From bob@example.org Tue Feb 13 10:00:00 +0000 2024\n",
        b"From bob@example.org Tue Feb 13 10:00 EST 2024\r\n",
        "From jörg@exämple.de Wed Mar  6 07:08:09 2019\n".encode("latin-1"),
        "From jörg@exämple.de Wed Mar  6 07:08:09 2019\n".encode(),
        b"From dev-return-1-apmail=x@y.apache.org Mon Jan 01 00:00:00 2024\n",
    ],
)
def test_envelope_lines_accepted(line: bytes) -> None:
    assert is_envelope(line)


@pytest.mark.parametrize(
    "line",
    [
        b"From here on, things change.\n",
        b"From alice Monday January 1 2024\n",
        b"From alice at example.org Mon Jan  1 2024\n",
        b"From alice at example.org Mon Jan  1 00:00:00\n",
        b">From alice at example.org  Mon Jan  1 00:00:00 2024\n",
        b"From: alice@example.org\n",
    ],
)
def test_non_envelope_lines_rejected(line: bytes) -> None:
    assert not is_envelope(line)


def test_body_from_lines_do_not_split() -> None:
    first = (
        b"Subject: one\n\nHello\nFrom alice at example.org  Mon Jan  1 00:00:00 2024\n"
        b"\nFrom the desk of Bob,\nregards\n"
    )
    data = mbox(first, b"Subject: two\n\nbye\n")
    messages = split_mbox(data)
    assert [m.raw for m in messages] == [first, b"Subject: two\n\nbye\n"]
    check_offsets(data, messages)


def test_envelope_after_blank_line_splits_even_in_a_body() -> None:
    # Indistinguishable from a real envelope: the documented price of unescaped archives.
    data = mbox(b"Subject: one\n\nbody\n\n" + ENV + b"tail\n")
    assert len(split_mbox(data)) == 2


def test_pipermail_month(tmp_path: Path) -> None:
    data = (
        b"From alice at example.org  Mon Jan  1 00:00:00 2024\n"
        b"From: alice at example.org (Alice)\nSubject: [dev] hi\n\nFrom now on, hi.\n\n"
        b"From bob at example.org  Tue Jan  2 10:11:12 2024\n"
        b"From: bob at example.org (Bob)\nSubject: Re: [dev] hi\n\n>From now on...\nok\n\n"
    )
    kept = split_mbox(data, unescape=False)
    assert len(kept) == 2
    assert kept[1].raw.endswith(b">From now on...\nok\n")
    assert [m.offset for m in kept] == [0, data.index(b"From bob")]


def test_empty_and_garbage() -> None:
    assert split_mbox(b"") == []
    assert split_mbox(b"no envelope here\n\nFrom nobody\n") == []
    assert list(iter_mbox(b"From x Mon Jan  1 00:00:00 2024")) == [
        RawMessage(0, b"", b"From x Mon Jan  1 00:00:00 2024")
    ]


def test_leading_garbage_is_skipped() -> None:
    data = b"junk\n\n" + mbox(b"Subject: a\n\nx\n")
    [message] = split_mbox(data)
    assert message.offset == 6
    assert message.raw == b"Subject: a\n\nx\n"


def test_crlf() -> None:
    env = ENV.replace(b"\n", b"\r\n")
    bodies = [b"Subject: a\r\n\r\nFrom me\r\nline\r\n", b"Subject: b\r\n\r\nx\r\n"]
    data = mbox(*bodies, envelope=env, sep=b"\r\n")
    messages = split_mbox(data)
    assert [m.raw for m in messages] == bodies
    assert messages[0].envelope == env
    check_offsets(data, messages)


def test_mboxrd_unescape() -> None:
    body = b"Subject: a\n\n>From x\n>>From y\n>>>From z\n> From not\n>Fromage\n"
    [message] = split_mbox(mbox(body))
    assert message.raw == b"Subject: a\n\nFrom x\n>From y\n>>From z\n> From not\n>Fromage\n"
    [kept] = split_mbox(mbox(body), unescape=False)
    assert kept.raw == body


def _email(i: int, body: str) -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = f"user{i}@example.org"
    msg["Subject"] = f"message {i}"
    msg["Message-ID"] = f"<{i}@example.org>"
    msg.set_payload(body)
    return msg


def test_python_mailbox_round_trip(tmp_path: Path) -> None:
    bodies = [
        "plain body\n",
        "From the start of a line\nand more\n\nFrom again after a blank line\n",
        "",
        "no trailing newline",
        "\n\n\nblank lines\n\n",
    ]
    path = tmp_path / "list.mbox"
    box = mailbox.mbox(path)
    for i, body in enumerate(bodies):
        box.add(mailbox.mboxMessage(_email(i, body)))
    box.flush()
    box.close()
    data = path.read_bytes()

    box = mailbox.mbox(path)
    expected = [box.get_bytes(key) for key in box.iterkeys()]
    box.close()

    kept = split_mbox(data, unescape=False)
    assert [m.raw for m in kept] == expected
    unescaped = split_mbox(data)
    assert len(unescaped) == len(bodies)
    for message, body in zip(unescaped, bodies, strict=True):
        payload = message.raw.split(b"\n\n", 1)[1]
        assert payload.rstrip(b"\n") == body.encode().rstrip(b"\n")
    check_offsets(data, unescaped)


def gz(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def gunzip(data: bytes, max_size: int) -> tuple[bytes, bool]:
    return asyncio.run(maybe_gunzip(data, max_size))


def test_gunzip_sniffs_magic_not_name() -> None:
    data = mbox(b"Subject: a\n\nx\n")
    assert gunzip(data, 10) == (data, False)
    assert gunzip(gz(data), 10_000) == (data, False)


def test_gunzip_multi_member_and_trailing_garbage() -> None:
    assert gunzip(gz(b"one\n") + gz(b"two\n"), 100) == (b"one\ntwo\n", False)
    assert gunzip(gz(b"one\n") + b"\x00\x00junk", 100) == (b"one\n", False)


def test_gunzip_truncated_returns_prefix() -> None:
    data = mbox(*(f"Subject: {i}\n\nbody {i}\n".encode() for i in range(2000)))
    packed = gz(data)
    out, truncated = gunzip(packed[: len(packed) // 2], len(data))
    assert truncated
    assert 0 < len(out) < len(data)
    assert data.startswith(out)
    out, truncated = gunzip(packed[:-4], len(data))  # the size trailer is missing
    assert truncated
    assert out == data


def test_gunzip_corrupt_is_truncated() -> None:
    packed = bytearray(gz(b"x" * 1000 + bytes(range(256)) * 50))
    packed[30:40] = b"\xff" * 10
    out, truncated = gunzip(bytes(packed), 10**6)
    assert truncated
    assert len(out) < 1000 + 256 * 50


def test_gunzip_cap() -> None:
    bomb = gz(b"\0" * 5_000_000)
    with pytest.raises(ArchiveTooLarge, match="more than 1000000 bytes"):
        gunzip(bomb, 1_000_000)
    with pytest.raises(ValueError):
        gunzip(gz(b"a" * 11), 10)
    assert gunzip(gz(b"a" * 10), 10) == (b"a" * 10, False)


def test_gunzip_of_a_big_stream_leaves_the_event_loop_free() -> None:
    # Empty members give no output, so only the decompressor calls bound a step: the
    # decoding goes to a thread after its first short step, and the loop keeps ticking.
    data = gz(b"") * 200_000 + gz(b"end\n")

    async def run() -> tuple[tuple[bytes, bool], int]:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0)
                ticks += 1

        ticker = asyncio.ensure_future(tick())
        try:
            return await maybe_gunzip(data, 100), ticks
        finally:
            ticker.cancel()

    result, ticks = asyncio.run(run())
    assert result == (b"end\n", False)
    assert ticks > 10


def mboxrd_escape(body: bytes) -> bytes:
    return re.sub(rb"^(>*From )", rb">\1", body, flags=re.MULTILINE)


bodies = st.lists(st.binary(max_size=300), max_size=8)


@given(bodies, st.sampled_from([b"\n", b"\r\n"]))
@settings(max_examples=300, deadline=None)
def test_mboxrd_round_trip_property(originals: list[bytes], newline: bytes) -> None:
    bodies = [b if b.endswith(b"\n") or not b else b + b"\n" for b in originals]
    envelope = ENV.replace(b"\n", newline)
    data = mbox(*(mboxrd_escape(b) for b in bodies), envelope=envelope, sep=newline)
    messages = split_mbox(data)
    assert [m.raw for m in messages] == bodies
    check_offsets(data, messages)


@given(st.binary(max_size=2000))
@settings(max_examples=300, deadline=None)
def test_split_never_raises_and_reassembles(data: bytes) -> None:
    messages = split_mbox(data, unescape=False)
    check_offsets(data, messages)
    # Every message is the bytes between its envelope and the next one, less at most one
    # line ending: putting the pieces back gives the data from the first envelope on.
    start = messages[0].offset if messages else len(data)
    rebuilt = data[:start]
    for i, m in enumerate(messages):
        stop = messages[i + 1].offset if i + 1 < len(messages) else len(data)
        piece = data[m.offset + len(m.envelope) : stop]
        assert piece.startswith(m.raw)
        assert piece[len(m.raw) :] in (b"", b"\n", b"\r\n")
        rebuilt += m.envelope + piece
    assert rebuilt == data
    split_mbox(data)


@given(st.lists(st.sampled_from([ENV, b"\n", b"\r\n", b"From x\n", b"body\n", b">From "])))
@settings(max_examples=300, deadline=None)
def test_split_on_envelope_like_soup(parts: list[bytes]) -> None:
    data = b"".join(parts)
    messages = split_mbox(data)
    check_offsets(data, messages)
    expected = sum(
        1
        for i in range(len(data))
        if data.startswith(ENV, i) and (i == 0 or data[:i].endswith((b"\n\n", b"\n\r\n")))
    )
    assert len(messages) == expected
