"""The demo archive's MHonArc pages: what MHonArc 2.6 writes, made by Thresher's demo.

`thresher demo` shows the `mhonarc` type without MHonArc installed, so the demo server
renders its list as MHonArc 2.6's default resources do (read from its source,
mhamain.pl, mhutil.pl, ewhutil.pl): per month a date index `maillist.html` and a
thread index `threads.html` linking `msgNNNNN.html` pages numbered in archive order;
per message the header comments (`X-Subject`, `X-From-R13`, `X-Date`, `X-Message-Id`,
`X-Content-Type`, `X-Reference`) with `-`, `&` and `<` as character references, the
fields shown to readers (To, Subject, From, Date, then the others alphabetically but
MHonArc's default exclusions), and the body in `<pre>`, non-ASCII as `&#xHH;`.

It is an imitation, like the demo's other kinds: the `mhonarc` type is proven against
pages the real `mhonarc` writes (tests/archives/test_mhonarc_real.py), which also
checks that Thresher reads the same messages back from these pages as from those.
"""

from __future__ import annotations

import email
import hashlib
import html
import re
from collections.abc import Sequence
from email import policy
from email.message import Message as EmailMessage

from .kinds.mhonarc import mrot13
from .message import decode_bytes, decode_header_value

__all__ = ["mhonarc_index_html", "mhonarc_list_html", "mhonarc_message_html"]

_FIELD = re.compile(rb"([!-9;-~]+)[ \t]*:[ \t]*([^\n]*(?:\n[ \t][^\n]*)*)(?:\n|\Z)")
_HEAD_END = re.compile(rb"\r?\n\r?\n")
_ANGLE = re.compile(rb"<([^<>]+)>")
# MHonArc's %HFieldsExc: fields it does not show (prefixes).
_EXCLUDED = (
    "content-", "errors-to", "forward", "lines", "message-id", "mime-", "nntp-",
    "originator", "path", "precedence", "received", "replied", "return-path",
    "status", "via", "x-",
)  # fmt: skip
_FIRST = ("to", "subject", "from", "date")
_MBOXO = re.compile(rb"^From ", re.MULTILINE)


def _fields(raw: bytes) -> list[tuple[str, bytes]]:
    match = _HEAD_END.search(raw)
    head = raw[: match.start() if match else len(raw)].replace(b"\r\n", b"\n")
    return [
        (m.group(1).decode("ascii").lower(), re.sub(rb"\n[ \t]+", b" ", m.group(2)).strip())
        for m in _FIELD.finditer(head)
    ]


def _commentize(value: bytes) -> bytes:
    return re.sub(rb"[-&<]", lambda m: b"&#%d;" % m.group(0)[0], value)


def _entities(text: str) -> str:
    """HTML-escaped, non-ASCII as character references, as MHonArc writes text."""
    return html.escape(text, quote=False).encode("ascii", "xmlcharrefreplace").decode()


def _first(fields: list[tuple[str, bytes]], name: str) -> bytes | None:
    return next((v for k, v in fields if k == name), None)


def _body_html(raw: bytes) -> str:
    parsed = email.message_from_bytes(raw, policy=policy.compat32)
    parts = []
    for part in parsed.walk() if parsed.is_multipart() else [parsed]:
        if part.is_multipart():
            continue
        if part.get_content_maintype() != "text":
            name = part.get_filename() or part.get_content_type()
            parts.append(f"<p><tt>&lt;attachment: {_entities(name)}&gt;</tt></p>")
            continue
        parts.append(f"<pre>{_entities(_text(part))}\n</pre>")
    return "\n".join(parts)


def _text(part: EmailMessage) -> str:
    payload = part.get_payload(decode=True)
    data = payload if isinstance(payload, bytes) else b""
    # MHonArc writes a NUL as a space.
    return decode_bytes(data, part.get_content_charset()).replace("\x00", " ")


def mhonarc_message_html(raw: bytes, number: int, archived: str) -> bytes:
    """The page MHonArc writes for message `number`, read from an mbox (body lines
    `From ` quoted the mboxo way, as a list's mbox has them); `archived` is the date it
    gives a message without one (when it archived it, as MHonArc does)."""
    fields = _fields(raw)
    raw = _MBOXO.sub(b">From ", raw)
    subject = _first(fields, "subject") or b""
    from_ = _first(fields, "from") or b"Unknown"
    date = _first(fields, "date") or archived.encode()
    mid = _first(fields, "message-id")
    found = _ANGLE.search(mid) if mid else None
    if found is not None:
        message_id = found.group(1)
    elif mid:
        message_id = mid.strip()
    else:
        end = _HEAD_END.search(raw)
        head = raw[: end.start()] if end else raw
        message_id = hashlib.md5(head).hexdigest().encode() + b"@NO-ID-FOUND.mhonarc.org"
    refs: list[bytes] = _ANGLE.findall(_first(fields, "references") or b"")
    irt = _ANGLE.findall(_first(fields, "in-reply-to") or b"")
    if irt:
        refs.append(irt[-1])
    refs = list(dict.fromkeys(refs))
    ctype = (_first(fields, "content-type") or b"text/plain").split(b";")[0].strip().lower()
    comments = [
        b"<!-- MHonArc v2.6.19+ -->",
        b"<!--X-Subject: " + _commentize(subject) + b" -->",
        b"<!--X-From-R13: " + _commentize(mrot13(from_)) + b" -->",
        b"<!--X-Date: " + _commentize(date) + b" -->",
        b"<!--X-Message-Id: " + _commentize(message_id) + b" -->",
        b"<!--X-Content-Type: " + _commentize(ctype or b"text/plain") + b" -->",
        *(b"<!--X-Reference: " + _commentize(r) + b" -->" for r in refs),
        b"<!--X-Head-End-->",
    ]
    shown = []
    names = [n for n in _FIRST if _first(fields, n) is not None]
    names += sorted(
        {k for k, _ in fields if k not in _FIRST and not k.startswith(_EXCLUDED)},
    )
    for name in names:
        for key, value in fields:
            if key == name:
                text = decode_header_value(decode_bytes(value))
                shown.append(f"<li><em>{_entities(name.capitalize())}</em>: {_entities(text)}</li>")
    title = _entities(decode_header_value(decode_bytes(subject)))
    page = "\n".join(
        [
            '<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 4.01 Transitional//EN">',
            f"<html>\n<head>\n<title>{title}</title>\n</head>\n<body>",
            "<!--X-Body-Begin-->",
            "<!--X-TopPNI-->",
            f'[<a href="maillist.html#{number:05d}">Date Index</a>]'
            f'[<a href="threads.html#{number:05d}">Thread Index</a>]',
            "<!--X-TopPNI-End-->",
            "<!--X-MsgBody-->",
            f"<!--X-Subject-Header-Begin-->\n<h1>{title}</h1>\n<hr>\n<!--X-Subject-Header-End-->",
            "<!--X-Head-of-Message-->",
            "<ul>",
            *shown,
            "</ul>",
            "<!--X-Head-of-Message-End-->",
            "<!--X-Head-Body-Sep-Begin-->\n<hr>\n<!--X-Head-Body-Sep-End-->",
            "<!--X-Body-of-Message-->",
            _body_html(raw),
            "<!--X-Body-of-Message-End-->",
            "<!--X-MsgBody-End-->",
            "</body>\n</html>\n",
        ]
    )
    return b"\n".join(comments) + b"\n" + page.encode("ascii")


def mhonarc_index_html(messages: Sequence[bytes], *, threads: bool = False) -> bytes:
    """A month's `maillist.html` (or `threads.html`): a link per message, by number."""
    items = []
    for number, raw in enumerate(messages):
        fields = _fields(raw)
        subject = decode_header_value(decode_bytes(_first(fields, "subject") or b""))
        sender = decode_header_value(decode_bytes(_first(fields, "from") or b"Unknown"))
        items.append(
            f'<li><strong><a name="{number:05d}" href="msg{number:05d}.html">'
            f"{_entities(subject)}</a></strong>\n"
            f"<ul><li><em>From</em>: {_entities(sender)}</li></ul>\n</li>"
        )
    title = "Thread Index" if threads else "Mail Index"
    other = (
        '<a href="maillist.html">Date Index</a>'
        if threads
        else ('<a href="threads.html">Thread Index</a>')
    )
    page = (
        f"<!-- MHonArc v2.6.19+ -->\n<html>\n<head>\n<title>{title}</title>\n</head>\n"
        f"<body>\n<h1>{title}</h1>\n<ul>\n<li>{other}</li>\n</ul>\n<hr>\n<ul>\n"
        + "\n".join(items)
        + "\n</ul>\n<hr>\n</body>\n</html>\n"
    )
    return page.encode("ascii")


def mhonarc_list_html(name: str, months: Sequence[str]) -> bytes:
    """The list page, as lists.debian.org's: per month its thread and date indexes."""
    rows = "\n".join(
        f'<li>{m}: <a href="{m[:4]}/{m[5:]}/threads.html">threads</a>'
        f' <a href="{m[:4]}/{m[5:]}/maillist.html">date</a></li>'
        for m in reversed(months)
    )
    return (
        f"<html><head><title>{html.escape(name)} archives</title></head><body>\n"
        f"<h1>{html.escape(name)}</h1>\n<ul>\n{rows}\n</ul>\n</body></html>\n"
    ).encode()
