"""Read the headers Thresher needs out of one archived message, whatever state it is in.

List archives hold decades of mail from every broken client there ever was: 8-bit
headers with no charset, misspelt charsets in RFC 2047 words, NUL bytes, missing or
garbage ``Date:`` headers, dates in 9999, and pipermail's ``user at host`` addresses.
`parse_message` therefore never raises: every field falls back to a value (``None``, the
raw text, a flag) instead, so one bad message cannot stop the ingest of a month.

Why the key: the store identifies a message by `Message.key`, the normalised Message-ID,
or ``"sha256:"`` + the digest of its normal form (`thresher.archives.normal`) when there
is none, so re-harvesting an archive never creates a second copy, even when the archive
wraps the message differently this time. Message-IDs are normalised the same way
wherever they appear (``Message-ID``, ``In-Reply-To``, ``References``): the text
inside the first ``<...>`` (or the whole value when there are no brackets), with all
whitespace removed.

Why only the header block is read, and by a regex: the headers end at the first blank
line, so a 10 MB message costs what a 1 KB one does; and the stdlib ``FeedParser``
(``compat32``) spent two thirds of the time for the same seven fields, while the mail
benchmark needs about 50,000 messages at several times Perceval's speed. Dates and
addresses still go through `email.utils`. ``raw`` is kept byte for byte.

Why RFC 2047 words are decoded here rather than with `email.header.decode_header`:
that function re-encodes the text around encoded words with ``raw-unicode-escape`` and
loses 8-bit text mixed with encoded words; decoding each word with the same fallbacks
as raw 8-bit text (UTF-8, then the message's declared charset, then windows-1252, then
Latin-1, which cannot fail) keeps both.
"""

from __future__ import annotations

import binascii
import codecs
import contextlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from email.utils import getaddresses, parsedate_to_datetime, parsedate_tz
from typing import Literal

__all__ = [
    "DateFlag",
    "Message",
    "decode_bytes",
    "decode_header_value",
    "normalize_message_id",
    "parse_date",
    "parse_message",
]

DateFlag = Literal["missing", "unparseable", "future"]

# Headers longer than this are not mail but garbage; parsing them would only cost time.
_MAX_HEADER_BLOCK = 256 * 1024
_FUTURE_SLACK = timedelta(days=1)
_MAX_FROM_SCAN = 1000
_HEADER_END = re.compile(rb"\r?\n\r?\n")
_ENCODED_WORD = re.compile(r"=\?([^?\s]+)\?([bBqQ])\?([^?\s]*)\?=")
# RFC 2047: whitespace between two adjacent encoded words is not part of the text.
_BETWEEN_WORDS = re.compile(r"(?<=\?=)[ \t\r\n]+(?==\?[^?\s]+\?[bBqQ]\?)")
_FOLD = re.compile(r"\r?\n(?=[ \t])|\r$")
_ANGLE_ID = re.compile(r"<([^<>]*)>")
_PIPERMAIL_ADDR = re.compile(r"([^\s<>()\"',;:@]+) at ([^\s<>()\"',;:@]+\.[^\s<>()\"',;:@]+)")
_ANGLE_ADDR = re.compile(r"<\s*([^<>@\s]+)@([^<>@\s]+?)\s*>")
_BARE_ADDR = re.compile(r"\s*([^\s<>@()]+)@([^\s<>@()]+)\s*(?:\([^()]*\)\s*)?$")
_CHARSET_PARAM = re.compile(r"charset\s*=\s*\"?([^\s\";]+)", re.IGNORECASE)
_COMMENT = re.compile(r"\([^()]*\)")
_WANTED = frozenset(
    (b"message-id", b"date", b"from", b"subject", b"in-reply-to", b"references", b"content-type")
)
# A field: a name of printable ASCII without ":" (RFC 5322 ftext), optional blanks (an
# obsolete form still seen), ":", then the value with its continuation lines.
_FIELD = re.compile(rb"([!-9;-~]+)[ \t]*:[ \t]*([^\n]*(?:\n[ \t][^\n]*)*)(?:\n|\Z)")


@dataclass(frozen=True, slots=True)
class Message:
    """What Thresher keeps of one message. `references` is a tuple so the value stays
    immutable; `raw` is the message exactly as given to `parse_message`."""

    key: str
    message_id: str | None
    date: datetime | None
    date_raw: str | None
    date_flag: DateFlag | None
    from_: str | None
    from_addr: str | None
    subject: str | None
    in_reply_to: str | None
    references: tuple[str, ...]
    list_name: str | None
    raw: bytes


def decode_bytes(data: bytes, charset: str | None = None) -> str:
    """Text from bytes of unknown encoding: UTF-8, then `charset`, then windows-1252,
    then Latin-1 (which maps every byte, so this never fails). Never raises, whatever
    `charset` names, and never returns lone surrogates."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    for candidate in (charset, "cp1252"):
        if not candidate:
            continue
        try:
            text = data.decode(candidate)
            # A codec may hand back lone surrogates (unicode_escape, utf-16 of odd
            # bytes): no store can hold them.
            text.encode("utf-8")
        except Exception:  # a codec is arbitrary code: idna, "undefined", a NUL in
            continue  # the name... raise UnicodeError, ValueError and more
        return text
    return data.decode("latin-1")


def _lookup_charset(name: str) -> str | None:
    # RFC 2231 allows "utf-8*en"; the language suffix is not part of the charset name.
    name = name.split("*", 1)[0].strip().lower()
    try:
        return codecs.lookup(name).name
    except Exception:  # LookupError, ValueError (a NUL), or a codec search function's own
        return None


def _decode_word(match: re.Match[str], fallback: str | None) -> str:
    charset, encoding, text = match.groups()
    try:
        payload = text.encode("ascii")
        if encoding in "bB":
            # Clients often drop the base64 padding; restore it rather than fail.
            payload += b"=" * (-len(payload) % 4)
            data = binascii.a2b_base64(payload)
        else:
            data = binascii.a2b_qp(payload, header=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        return match.group(0)
    return decode_bytes(data, _lookup_charset(charset) or fallback)


def decode_header_value(value: str, fallback_charset: str | None = None) -> str:
    """Unfold a header value and decode its RFC 2047 encoded words; a word that cannot
    be decoded is left as written. Never raises."""
    value = _FOLD.sub("", value)
    if "=?" not in value:
        return value
    value = _BETWEEN_WORDS.sub("", value)
    return _ENCODED_WORD.sub(lambda m: _decode_word(m, fallback_charset), value)


def normalize_message_id(value: str | None) -> str | None:
    """The id inside the first ``<...>``, or the whole value without brackets, with all
    whitespace removed; None when nothing is left."""
    if value is None:
        return None
    match = _ANGLE_ID.search(value)
    text = match.group(1) if match else value.strip().strip("<>")
    text = "".join(text.split())
    return text or None


def _references(value: str | None) -> tuple[str, ...]:
    if not value:
        return ()
    found = _ANGLE_ID.findall(value)
    tokens = found if found else value.split()
    ids = (normalize_message_id(token) for token in tokens)
    return tuple(i for i in ids if i)


def _in_reply_to(value: str | None) -> str | None:
    if not value:
        return None
    match = _ANGLE_ID.search(value)
    if match:
        return normalize_message_id(match.group(0))
    # Without brackets only a single token is an id; "Your message of ..." is prose.
    tokens = value.split()
    return normalize_message_id(tokens[0]) if len(tokens) == 1 else None


def _as_utc(moment: datetime) -> datetime | None:
    try:
        if moment.tzinfo is None:
            return moment.replace(tzinfo=UTC)
        return moment.astimezone(UTC)
    except (OverflowError, ValueError):
        return None


def _from_parsed_tuple(value: str) -> datetime | None:
    parts = parsedate_tz(value)
    if parts is None:
        return None
    try:
        moment = datetime(*parts[:6])
    except (ValueError, OverflowError, TypeError):
        return None
    offset = parts[9]
    if offset is not None:
        # An impossible offset (+9900) says nothing; the clock time is then read as UTC.
        with contextlib.suppress(ValueError, OverflowError):
            moment = moment.replace(tzinfo=timezone(timedelta(seconds=offset)))
    return _as_utc(moment)


def parse_date(value: str) -> datetime | None:
    """An aware UTC datetime from a ``Date:`` value, or None. Tries RFC 5322 (with
    obsolete forms), then the same without comments and with the timezone dropped if it
    is impossible, then ISO 8601. A date without a timezone is taken as UTC."""
    text = value.strip()
    if not text:
        return None
    try:
        moment: datetime | None = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        moment = None
    if moment is not None:
        return _as_utc(moment)
    cleaned = " ".join(_COMMENT.sub(" ", text).replace(",", " ").split())
    moment = _from_parsed_tuple(cleaned)
    if moment is not None:
        return moment
    try:
        iso = datetime.fromisoformat(text)
    except ValueError:
        return None
    return _as_utc(iso)


def _read_headers(raw: bytes) -> dict[bytes, bytes]:
    # The headers are read with one anchored regex per field: the stdlib FeedParser took
    # two thirds of parse_message's time for the same result on these few fields, and it
    # also stops at the first line that is neither a field nor a continuation.
    end = _HEADER_END.search(raw, 0, _MAX_HEADER_BLOCK)
    block = raw[: end.start() + 1] if end else raw[:_MAX_HEADER_BLOCK]
    pos = 0
    if block.startswith((b"From ", b">From ")):
        # An envelope line left on the message (as the email parser's "unixfrom").
        newline = block.find(b"\n")
        pos = len(block) if newline < 0 else newline + 1
    headers: dict[bytes, bytes] = {}
    match = _FIELD.match(block, pos)
    while match is not None:
        name = match.group(1).lower()
        if name in _WANTED and name not in headers:
            headers[name] = match.group(2)
        match = _FIELD.match(block, match.end())
    return headers


def _from_addr(from_: str) -> str | None:
    # An address sits near the start; searching a 200 KB header is quadratic in re.
    from_ = from_[:_MAX_FROM_SCAN]
    match = _PIPERMAIL_ADDR.search(from_)
    if match:
        return f"{match.group(1)}@{match.group(2).lower()}"
    if from_.count("@") == 1 and "," not in from_ and '"' not in from_:
        # The common "Name <user@host>" and bare "user@host": getaddresses costs about
        # 100 µs a message, most of the mail benchmark's parsing time.
        match = _ANGLE_ADDR.search(from_) or _BARE_ADDR.match(from_)
        if match:
            return f"{match.group(1)}@{match.group(2).lower()}"
    try:
        addresses = getaddresses([from_])
    except Exception:  # getaddresses has raised on odd input in the past
        return None
    for _name, addr in addresses:
        if "@" in addr:
            local, _, domain = addr.strip().rpartition("@")
            return f"{local}@{domain.lower()}"
    return None


def parse_message(
    raw: bytes,
    *,
    list_name: str | None = None,
    now: datetime | None = None,
    normal: str | None = None,
) -> Message:
    """The headers Thresher needs from one message (see the module docstring).

    `now` is the moment against which a date counts as in the future (more than one day
    later); it defaults to the current time. `normal` is the message's
    `normal_digest`, when the caller has it already. Never raises on any bytes.
    """
    headers = _read_headers(raw)
    content_type = headers.get(b"content-type")
    declared = None
    if content_type is not None:
        match = _CHARSET_PARAM.search(content_type.decode("latin-1"))
        declared = _lookup_charset(match.group(1)) if match else None

    def text(name: bytes) -> str | None:
        value = headers.get(name)
        if value is None:
            return None
        return decode_header_value(decode_bytes(value, declared), declared).strip()

    message_id = normalize_message_id(text(b"message-id"))
    if message_id:
        key = message_id
    else:
        if normal is None:
            from .normal import normal_digest  # here: normal.py uses this module's decoders

            normal = normal_digest(raw)
        key = "sha256:" + normal

    date_raw = text(b"date")
    date = parse_date(date_raw) if date_raw else None
    flag: DateFlag | None = None
    if not date_raw:
        flag = "missing"
    elif date is None:
        flag = "unparseable"
    else:
        reference = now if now is not None else datetime.now(UTC)
        if reference.tzinfo is None:
            reference = reference.replace(tzinfo=UTC)
        if date > reference + _FUTURE_SLACK:
            flag = "future"

    from_ = text(b"from") or None
    return Message(
        key=key,
        message_id=message_id,
        date=date,
        date_raw=date_raw,
        date_flag=flag,
        from_=from_,
        from_addr=_from_addr(from_) if from_ else None,
        subject=text(b"subject"),
        in_reply_to=_in_reply_to(text(b"in-reply-to")),
        references=_references(text(b"references")),
        list_name=list_name,
        raw=raw,
    )
