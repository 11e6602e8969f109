"""The readable text of a message, for full-text search.

Search needs words, not MIME: the body of a ``text/plain`` message decoded from its
transfer encoding and charset, or the ``text/plain`` parts of a multipart message (the
HTML part's text when there is no plain one). The raw bytes stay in the store exactly as
harvested; this text is only what the search index sees, so it is capped and may be
imperfect on broken mail, but it never raises.

Why a fast path: most list mail is a single ``text/plain`` part, and the mail benchmark
indexes tens of thousands of messages a run; the stdlib parser (about 100 µs a message)
only runs for multipart mail.
"""

from __future__ import annotations

import binascii
import email
import email.policy
import re
from email.message import Message as EmailMessage

from selectolax.lexbor import LexborHTMLParser

from .message import decode_bytes

__all__ = ["MAX_TEXT", "text_body"]

# Characters of body text kept for the index: enough for every real message's words,
# while a 50 MB attachment mistaken for text cannot bloat the index.
MAX_TEXT = 64 * 1024

_HEADER_END = re.compile(rb"\r?\n\r?\n")
_CONTENT_TYPE = re.compile(rb"^content-type:[ \t]*([^\r\n]*(?:\r?\n[ \t][^\r\n]*)*)", re.I | re.M)
_CTE = re.compile(rb"^content-transfer-encoding:[ \t]*([^\s;]+)", re.I | re.M)
_CHARSET = re.compile(rb"charset\s*=\s*\"?([^\s\";]+)", re.I)


def text_body(raw: bytes, limit: int = MAX_TEXT) -> str:
    """The message's text (see the module docstring); '' when it has none."""
    end = _HEADER_END.search(raw)
    if end is None:
        return ""
    headers, body = raw[: end.start() + 1], raw[end.end() :]
    match = _CONTENT_TYPE.search(headers)
    ctype = match.group(1).strip().lower() if match else b"text/plain"
    if ctype.startswith(b"multipart/"):
        try:
            return _from_parts(email.message_from_bytes(raw, policy=email.policy.compat32), limit)
        except Exception:  # the stdlib parser on hostile input: index the bytes as text
            return decode_bytes(body[: limit * 4])[:limit]
    if not (ctype.startswith(b"text/") or not ctype):
        return ""
    cte = _CTE.search(headers)
    data = _decode_transfer(body, cte.group(1).lower() if cte else b"")
    charset = _CHARSET.search(ctype)
    text = decode_bytes(data[: limit * 4], charset.group(1).decode("latin-1") if charset else None)
    if ctype.startswith(b"text/html"):
        text = _html_text(text)
    return text[:limit]


def _decode_transfer(body: bytes, cte: bytes) -> bytes:
    try:
        if cte == b"base64":
            return binascii.a2b_base64(body)
        if cte == b"quoted-printable":
            return binascii.a2b_qp(body)
    except (binascii.Error, ValueError):
        pass  # a broken encoding: index the bytes as they are
    return body


def _html_text(html: str) -> str:
    return LexborHTMLParser(html).text(separator=" ") or ""


def _from_parts(msg: EmailMessage, limit: int) -> str:
    plain: list[str] = []
    html: list[str] = []
    for part in msg.walk():
        if part.is_multipart() or part.get_content_maintype() != "text":
            continue
        if part.get_filename():
            continue  # an attached file, not the message's text
        payload = part.get_payload(decode=True)
        if not isinstance(payload, bytes):
            continue
        text = decode_bytes(payload[: limit * 4], part.get_content_charset())
        (html if part.get_content_subtype() == "html" else plain).append(text)
    if plain:
        return "\n".join(plain)[:limit]
    return "\n".join(_html_text(t) for t in html)[:limit]
