"""The normal form of a message: what stays the same however an archive wraps it.

Archives re-serialise mail. HyperKitty builds each message of a month export anew on
every request, with fresh MIME boundaries; an archive may re-wrap base64 or
quoted-printable lines, turn LF into CRLF, fold a header at another place, write an
envelope line or not, quote ``From `` lines the mboxo or the mboxrd way, or leave an
extra blank line at the end of a message. The raw bytes then differ while the message
does not, and a store keyed on the raw digest would keep a copy per fetch. The store
therefore tells messages apart by the digest of this normal form (`normal_digest`):

- line endings are LF; leading ``From `` / ``>From `` envelope lines are dropped;
- header fields are unfolded, their RFC 2047 words and 8-bit bytes decoded (UTF-8, the
  declared charset, windows-1252, Latin-1: `decode_bytes`), runs of blanks made one
  space, names lower-cased; ``Content-Transfer-Encoding`` is dropped and the
  ``boundary`` parameter of ``Content-Type`` removed;
- a body is decoded from base64 or quoted-printable (its line wrapping gone);
  ``>``-quoted ``From `` lines lose their quotes (mboxo and mboxrd quote differently,
  and a plain mbox cannot say which it used); trailing blank lines and blanks go;
- a multipart body is its parts, each in normal form, found by their boundary; the
  preamble and the epilogue (text no reader shows) are left out; a ``message/rfc822``
  part is normalised as a message.

Two messages with the same normal form are one message; anything else that differs
(a word of the text, an attachment, a header's value) keeps them apart. Changing these
rules changes the digests of stored messages: it needs a migration that recomputes
them (see migration 0013).

Why by hand and not with `email`: the stdlib parser costs about 100 µs a message and the
mail benchmark stores tens of thousands a run; this costs about 25 µs for the
benchmark's messages, a third of the rest of their parsing (docs/mail.md, Limits), most
of it in decoding the RFC 2047 words of headers. `normal_form` never raises on any bytes.
"""

from __future__ import annotations

import binascii
import contextlib
import hashlib
import re

from .message import decode_bytes, decode_header_value

__all__ = ["normal_digest", "normal_form"]

# Deeper nesting than this is hostile, not mail: the rest is kept as opaque bytes.
_MAX_DEPTH = 16

_UNFOLD = re.compile(rb"\n[ \t]+")
_BLANKS = re.compile(rb"[ \t\r\x0b\x0c]+")
_TEXT_BLANKS = re.compile(r"[ \t\r\n\x0b\x0c]+")
_CHARSET = re.compile(rb"charset\s*=\s*\"?([^\s\";]+)", re.IGNORECASE)
_BOUNDARY = re.compile(rb";?\s*boundary\s*=\s*(?:\"([^\"]*)\"|([^\s;]+))", re.IGNORECASE)
_QUOTED_FROM = re.compile(rb"^>+(From )", re.MULTILINE)
_TRAILING = b" \t\n\r\x0b\x0c"


def normal_digest(raw: bytes) -> str:
    """The SHA-256 (hex) of `normal_form(raw)`."""
    return hashlib.sha256(normal_form(raw)).hexdigest()


def normal_form(raw: bytes) -> bytes:
    """The message's normal form (see the module docstring). Never raises."""
    data = raw.replace(b"\r\n", b"\n") if b"\r" in raw else raw
    while data.startswith((b"From ", b">From ")):
        newline = data.find(b"\n")
        data = data[newline + 1 :] if newline >= 0 else b""
    return _entity(data, 0)


def _entity(data: bytes, depth: int) -> bytes:
    """One message or body part: its normal header lines, a blank line, its body."""
    if data.startswith(b"\n"):
        block, body = b"", data[1:]
    else:
        end = data.find(b"\n\n")
        block, body = (data, b"") if end < 0 else (data[: end + 1], data[end + 2 :])
    head, media, cte, boundary = _headers(block)
    if depth < _MAX_DEPTH:
        if boundary is not None and media.startswith(b"multipart/"):
            parts = _split_parts(body, boundary)
            if parts is not None:
                framed = [
                    len(p).to_bytes(8, "big") + p for p in (_entity(p, depth + 1) for p in parts)
                ]
                return head + b"\n\x00multipart\n" + b"".join(framed)
        elif media == b"message/rfc822" and cte in (b"", b"7bit", b"8bit", b"binary"):
            return head + b"\n\x00message\n" + _entity(body.lstrip(b"\n"), depth + 1)
    return head + b"\n" + _leaf(body, cte)


def _headers(block: bytes) -> tuple[bytes, bytes, bytes, bytes | None]:
    """(the normal header lines, each ending in a newline; the media type; the
    transfer encoding; the multipart boundary or None).

    Bytes methods on the whole block, and a loop over its lines only when a line must
    be decoded: a regular expression without a literal to look for costs about 6 ns a
    byte in `re`, as much as all the rest. So names keep their case (no archive seen
    changes it) and a blank next to a colon is dropped anywhere in a field, which costs
    nothing and treats ``Subject:x`` and ``Subject: x`` alike."""
    if b"\n " in block or b"\n\t" in block:
        block = _UNFOLD.sub(b" ", block)
    if b"\t" in block or b"  " in block or b"\r" in block or b"\x0b" in block or b"\x0c" in block:
        block = _BLANKS.sub(b" ", block)
    block = block.replace(b" :", b":").replace(b": ", b":").replace(b" \n", b"\n")
    if block.startswith(b" ") or b"\n\n" in block:
        block = b"".join(ln.strip(b" ") + b"\n" for ln in block.split(b"\n") if ln.strip(b" "))
    media, cte, boundary = b"text/plain", b"", None
    lowered = b"\n" + block.lower()
    at = lowered.find(b"\ncontent-transfer-encoding:")
    if at >= 0:
        stop = block.find(b"\n", at)
        stop = len(block) if stop < 0 else stop  # a last line without its newline
        cte = lowered[at + 27 : stop + 1].strip(b" ")
        block = block[:at] + block[stop + 1 :]
        lowered = b"\n" + block.lower()
    at = lowered.find(b"\ncontent-type:")
    if at >= 0:
        start = at + 13
        stop = block.find(b"\n", start)
        stop = len(block) if stop < 0 else stop
        value = block[start:stop]
        media = value.split(b";", 1)[0].strip(b" ").lower()
        param = _BOUNDARY.search(value)
        if param is not None:
            boundary = param.group(1) if param.group(1) is not None else param.group(2)
            value = (value[: param.start()] + value[param.end() :]).strip(b" ")
            block = block[:start] + value + block[stop:]
    if b"=?" in block or not block.isascii():
        charset = _CHARSET.search(block)
        declared = charset.group(1).decode("latin-1") if charset else None
        block = b"".join(
            (_decoded(ln, declared) if b"=?" in ln or not ln.isascii() else ln) + b"\n"
            for ln in block.split(b"\n")
            if ln
        )
    return block, media, cte, boundary


def _decoded(line: bytes, declared: str | None) -> bytes:
    text = decode_header_value(decode_bytes(line, declared), declared)
    text = _TEXT_BLANKS.sub(" ", text).strip(" ").replace(" :", ":").replace(": ", ":")
    return text.encode("utf-8", "surrogatepass")


def _split_parts(body: bytes, boundary: bytes) -> list[bytes] | None:
    """The parts between the delimiter lines ``--boundary``, up to ``--boundary--`` (or
    the end); None when no delimiter is found. The newline before a delimiter belongs
    to the delimiter (RFC 2046)."""
    if not boundary:
        return None
    text = b"\n" + body
    marker = b"\n--" + boundary
    parts: list[bytes] = []
    start: int | None = None
    pos = text.find(marker)
    while pos >= 0:
        line_end = text.find(b"\n", pos + 1)
        rest = text[pos + len(marker) : line_end if line_end >= 0 else len(text)]
        tail = rest.rstrip(b" \t")
        if tail not in (b"", b"--"):
            pos = text.find(marker, pos + 1)  # a longer token that starts with the boundary
            continue
        if start is not None:
            parts.append(text[start:pos])
        if tail == b"--" or line_end < 0:
            return parts
        start = line_end + 1
        pos = text.find(marker, line_end)
    if start is None:
        return None
    parts.append(text[start:])  # no closing delimiter: the last part runs to the end
    return parts


def _leaf(body: bytes, cte: bytes) -> bytes:
    if cte == b"base64" or cte == b"quoted-printable":
        # A broken encoding is compared as written.
        with contextlib.suppress(binascii.Error, ValueError):
            body = binascii.a2b_base64(body) if cte == b"base64" else binascii.a2b_qp(body)
        if b"\r\n" in body:
            body = body.replace(b"\r\n", b"\n")
    if b">From " in body:
        body = _QUOTED_FROM.sub(rb"\1", body)
    return body.rstrip(_TRAILING)
