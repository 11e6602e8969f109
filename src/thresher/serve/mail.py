"""One stored message made fit to show: its headers decoded, its parts listed.

Why the stdlib parser with `compat32`: it never raises on the broken mail archives hold
(the stricter `default` policy raises on some malformed headers when they are read), and
header values are decoded with `thresher.archives.message.decode_header_value`, the
same fallbacks the harvest used. Nothing here makes HTML: values are text, escaped by
the templates like everything else.

The text shown is the `body` column, the text `thresher search` indexes (the plain parts,
or the HTML part's text when there is none: see `thresher.archives.body`), so an HTML-only
message is shown as its text, never as HTML.
"""

from __future__ import annotations

import email
import email.policy
from dataclasses import dataclass
from email.message import Message

from ..archives.body import MAX_TEXT
from ..archives.message import decode_header_value

__all__ = ["SHOWN_HEADERS", "Attachment", "Parsed", "attachment", "parse_for_display"]

# Headers shown at the top of a message, in this order; the rest are under "all headers".
SHOWN_HEADERS = ("From", "To", "Cc", "Date", "Subject", "Message-ID", "In-Reply-To")
# A header longer than this is cut for display (a 16 KB References line is not read).
_MAX_HEADER = 2000


@dataclass(frozen=True)
class Attachment:
    index: int  # the part's number in a walk of the message (what /part/N names)
    filename: str | None
    content_type: str
    size: int


@dataclass(frozen=True)
class Parsed:
    headers: list[tuple[str, str]]  # every header, decoded, in order
    shown: list[tuple[str, str]]  # SHOWN_HEADERS present
    attachments: list[Attachment]
    text_truncated: bool


def _parse(raw: bytes) -> Message:
    return email.message_from_bytes(raw, policy=email.policy.compat32)


def _value(value: object) -> str:
    text = decode_header_value(str(value))
    return text if len(text) <= _MAX_HEADER else text[:_MAX_HEADER] + " …"


def _filename(part: Message) -> str | None:
    try:
        name = part.get_filename()
    except Exception:  # a malformed RFC 2231 parameter
        return None
    return None if name is None else _value(name)


def _size(part: Message) -> int:
    payload = part.get_payload(decode=True)
    return len(payload) if isinstance(payload, bytes) else 0


def parse_for_display(raw: bytes, text: str | None) -> Parsed:
    """The headers and attachments of `raw`; `text` is the stored body text."""
    msg = _parse(raw)
    headers = [(str(k), _value(v)) for k, v in msg.items()]
    shown = []
    for name in SHOWN_HEADERS:
        found = msg.get(name)
        if found is not None:
            shown.append((name, _value(found)))
    attachments = []
    for index, part in enumerate(msg.walk()):
        if part.is_multipart():
            continue
        filename = _filename(part)
        ctype = part.get_content_type()
        inline_text = ctype in ("text/plain", "text/html") and filename is None
        if index == 0 or inline_text:
            continue  # the body itself, shown as text
        attachments.append(Attachment(index, filename, ctype, _size(part)))
    return Parsed(headers, shown, attachments, len(text or "") >= MAX_TEXT)


def attachment(raw: bytes, index: int) -> tuple[str | None, bytes] | None:
    """Part `index` of the message (numbered as `parse_for_display` numbers them),
    decoded from its transfer encoding; None when there is no such leaf part."""
    for i, part in enumerate(_parse(raw).walk()):
        if i == index and not part.is_multipart():
            payload = part.get_payload(decode=True)
            return _filename(part), payload if isinstance(payload, bytes) else b""
    return None
