"""The files archives keep the demo's mail in. Pure functions, no I/O: the demo server
(`thresher.archives.demo`) serves them and the mail benchmark writes them to disk.

The renderers imitate what each archive really stores: pipermail's ``.txt`` (envelope
``From user at host  asctime``, ``From:`` obfuscated, body ``From `` lines NOT escaped),
mboxo for Apache mod_mbox, and mboxrd for Pony Mail, HyperKitty and plain mbox files.
Every message is rendered on its own and followed by a blank line, so a month that gains
a message only gains bytes at its end, as the real files do (which is what makes a Range
request for the tail worth trying).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from datetime import date
from email.utils import parseaddr
from typing import NamedTuple

from .demo_messages import MONTHS
from .message import parse_date

__all__ = ["MONTH_NAMES", "pipermail_file", "render_mbox", "render_pipermail"]

# English, whatever the locale (calendar.month_name is not).
MONTH_NAMES = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_FIXED_ASCTIME = "Mon Jan  1 00:00:00 2024"
_FROM_FIELD = re.compile(
    rb"^From[ \t]*:[ \t]*([^\r\n]*(?:\r?\n[ \t][^\r\n]*)*)(\r?\n)", re.M | re.I
)
_DATE_FIELD = re.compile(rb"^Date[ \t]*:[ \t]*([^\r\n]*)", re.M | re.I)
_MBOXO = re.compile(rb"^From ", re.M)
_MBOXRD = re.compile(rb"^(>*From )", re.M)


class _Envelope(NamedTuple):
    addr: str | None  # user@host from the From header
    name: str  # the display name as written (RFC 2047 words left encoded)
    asctime: str  # the Date header in UTC, asctime style, or a fixed date
    from_span: tuple[int, int] | None  # where the From header's value and newline sit


# Fast paths for the forms generated mail uses; anything else goes through email.utils
# and parse_date (about ten times slower, and the benchmark renders 50,000 messages).
_NAME_ADDR = re.compile(r'\s*"?([^"<>]*?)"?\s*<([^<>\s@]+@[^<>\s@]+)>\s*')
_SIMPLE_DATE = re.compile(
    r"(?:[A-Z][a-z]{2}, )?(\d{1,2}) ([A-Z][a-z]{2}) (\d{4}) (\d\d):(\d\d):(\d\d) ([+-])(\d\d)(\d\d)"
)
_MONTH_NUMBER = {name: i + 1 for i, name in enumerate(MONTHS)}


def _parse_from(value: str) -> tuple[str, str]:
    match = _NAME_ADDR.fullmatch(value)
    if match is not None:
        return match.group(1), match.group(2)
    return parseaddr(value)


_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()


def _asctime(value: str) -> str:
    match = _SIMPLE_DATE.fullmatch(value)
    if match is not None and match.group(2) in _MONTH_NUMBER:
        day, mon, year, hh, mm, ss, sign, zh, zm = match.groups()
        try:
            days = date(int(year), _MONTH_NUMBER[mon], int(day)).toordinal() - _EPOCH_ORDINAL
        except ValueError:
            days = None
        if days is not None:
            offset = (int(zh) * 3600 + int(zm) * 60) * (1 if sign == "+" else -1)
            seconds = days * 86400 + int(hh) * 3600 + int(mm) * 60 + int(ss) - offset
            return time.asctime(time.gmtime(seconds))
    parsed = parse_date(value)
    if parsed is None or not 1 <= parsed.year <= 9999:
        return _FIXED_ASCTIME
    return time.asctime(parsed.utctimetuple())


def _header_end(raw: bytes) -> int:
    """The index just after the header block's last newline (the whole of `raw` when
    there is no blank line)."""
    end = raw.find(b"\n\n")
    crlf = raw.find(b"\n\r\n", 0, end if end >= 0 else len(raw))
    if crlf >= 0:
        return crlf + 1
    return end + 1 if end >= 0 else len(raw)


def _envelope(raw: bytes) -> _Envelope:
    head = raw[: _header_end(raw)]
    addr, name, span = None, "", None
    found = _FROM_FIELD.search(head)
    if found is not None:
        name, parsed = _parse_from(found.group(1).decode("latin-1"))
        if "@" in parsed and not any(c.isspace() for c in parsed):
            addr, span = parsed, (found.start(1), found.end(2))
    date = _DATE_FIELD.search(head)
    asctime = _asctime(date.group(1).decode("latin-1").strip()) if date else _FIXED_ASCTIME
    return _Envelope(addr, name, asctime, span)


def _ends_in_newline(raw: bytes) -> bytes:
    return raw if raw.endswith(b"\n") else raw + b"\n"


def render_pipermail(messages: Iterable[bytes]) -> bytes:
    """A Mailman 2 ``YYYY-Month.txt``: per message the envelope ``From user at host
    asctime`` (two spaces, as Mailman writes it), the headers with ``From:`` rewritten to
    ``From: user at host (Name)``, the body with ``From `` lines NOT escaped (pipermail
    never did), and a blank line. Each message is rendered on its own, so adding a
    message to a month only appends bytes."""
    out: list[bytes] = []
    for raw in messages:
        env = _envelope(raw)
        if env.addr is None or env.from_span is None:
            sender = "bogus at does.not.exist.com"  # what Mailman writes for no address
        else:
            sender = env.addr.replace("@", " at ", 1)
            value = f"{sender} ({env.name})" if env.name else sender
            start, stop = env.from_span
            newline = b"\r\n" if raw[stop - 2 : stop] == b"\r\n" else b"\n"
            raw = raw[:start] + value.encode("latin-1", "replace") + newline + raw[stop:]
        out.append(f"From {sender}  {env.asctime}\n".encode("latin-1", "replace"))
        out.append(_ends_in_newline(raw))
        out.append(b"\n")
    return b"".join(out)


def render_mbox(messages: Iterable[bytes], *, rd: bool) -> bytes:
    """An mbox: per message the envelope ``From addr asctime``, the message with body
    lines starting ``From `` escaped, and a blank line. ``rd=False`` escapes the mboxo
    way (``From `` becomes ``>From ``: Apache mod_mbox files, HyperKitty's exports,
    Python's ``mailbox``); ``rd=True`` the mboxrd way (one more ``>`` on every
    ``>*From `` line: Pony Mail Foal). Append-only like `render_pipermail`."""
    pattern, repl = (_MBOXRD, rb">\1") if rd else (_MBOXO, b">From ")
    out: list[bytes] = []
    for raw in messages:
        env = _envelope(raw)
        out.append(f"From {env.addr or 'MAILER-DAEMON'} {env.asctime}\n".encode("latin-1"))
        out.append(_ends_in_newline(pattern.sub(repl, raw) if b"From " in raw else raw))
        out.append(b"\n")
    return b"".join(out)


def pipermail_file(month: str) -> str:
    """``2024-01`` → ``2024-January``, the stem of pipermail's month files."""
    return f"{month[:4]}-{MONTH_NAMES[int(month[5:7]) - 1]}"
