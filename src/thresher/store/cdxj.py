"""CDXJ indexes beside the WARC files, so that pywb (or OpenWayback) replays them as they are.

A replay tool finds a capture through a sorted text index, one line per response or revisit
record: ``SURT-key timestamp14 {json}``. The JSON has the fields, spelling and order that
webrecorder's ``cdxj-indexer`` writes and pywb reads — ``url``, ``mime``, ``status``,
``digest`` (base32 SHA-1 *without* the ``sha1:`` prefix), ``length``, ``offset`` and
``filename``, every value a string, a field left out when the record has no value for it.
A revisit's line has ``mime`` ``warc/revisit`` and no status, as pywb's indexer writes it
(pywb takes the status from the original when it resolves the revisit). Lines are sorted
as strings, which is the order pywb's binary search expects.

`surt` is our own implementation of the key that pywb computes for a lookup (the rules of
archive-commons' ``WaybackURLKeyMaker``: Google's then the Internet Archive's
canonicalisation, then the host reversed). We do not depend on the ``surt`` package: it is
AGPL-3.0 (Thresher is Apache-2.0), ships only as an sdist, and imports ``tldextract``,
which wants to download the public-suffix list. A key that differs from pywb's for some URL
would make that capture unreachable, so the pywb test compares `surt` with the package's
output over a few hundred awkward URLs.

`write_index` builds the index of any WARC by reading it (warcio); the writer builds the
same lines as it writes and uses `write_index` only to repair. Both take the HTTP status and
MIME type from the raw HTTP head with `http_status_and_mime`, so the two always agree.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import re
import socket
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, NamedTuple
from urllib.parse import quote_from_bytes, unquote_to_bytes

from warcio.archiveiterator import ArchiveIterator  # type: ignore[import-untyped]

__all__ = [
    "RecordInfo",
    "cdxj_line",
    "cdxj_path",
    "fsync_directory",
    "http_status_and_mime",
    "index_lines",
    "iter_records",
    "parse_cdxj_line",
    "record_line",
    "surt",
    "timestamp14",
    "write_index",
    "write_lines_sorted",
]

# --- SURT -----------------------------------------------------------------------------------

_HAS_SCHEME = re.compile(rb"^[a-zA-Z][a-zA-Z0-9+.-]*:")
_REPEATED_HTTP = re.compile(rb"^(https?://)+")
# RFC 3986 appendix B, with the scheme limited to legal scheme characters.
_SPLIT = re.compile(
    rb"^(?:([a-zA-Z][a-zA-Z0-9+.-]*):)?(?://([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?$", re.S
)
_CONTROL_WS = re.compile(rb"[\t\n\r]")
_WWW = re.compile(rb"^www\d*\.")
_DECIMAL_IP = re.compile(rb"^[1-9][0-9]*(\.[0-9]+){0,3}$")
_OCTAL_IP = re.compile(rb"^0[0-7]*(\.[0-7]+){0,3}$")
# Everything printable stays as it is; '%', '#', controls, space and non-ASCII are escaped.
_SAFE = b"!\"$&'()*+,-./:;<=>?@[\\]^_`{|}~"
# Session ids that servers put in paths and queries; the same page without them is the
# same capture, so the key leaves them out.
_PATH_SESSION = (
    re.compile(rb"^(.*/)(\((?:[a-z]\([0-9a-z]{24}\))+\)/)([^?]+\.aspx.*)$", re.I | re.S),
    re.compile(rb"^(.*/)(\([0-9a-z]{24}\)/)([^?]+\.aspx.*)$", re.I | re.S),
)
_QUERY_SESSION = (
    re.compile(rb"^(.*)(?:jsessionid=[0-9a-zA-Z]{32})(?:&(.*))?$", re.I | re.S),
    re.compile(rb"^(.*)(?:phpsessid=[0-9a-zA-Z]{32})(?:&(.*))?$", re.I | re.S),
    re.compile(rb"^(.*)(?:sid=[0-9a-zA-Z]{32})(?:&(.*))?$", re.I | re.S),
    re.compile(rb"^(.*)(?:aspsessionid[a-zA-Z]{8}=[a-zA-Z]{24})(?:&(.*))?$", re.I | re.S),
    re.compile(rb"^(.*)(?:cfid=[^&]+&cftoken=[^&]+)(?:&(.*))?$", re.I | re.S),
)
_DEFAULT_PORTS = {b"http": 80, b"https": 443}


def _unescape(data: bytes) -> bytes:
    """Percent-decode until nothing changes: ``%2541`` and ``A`` must get one key."""
    while True:
        decoded = unquote_to_bytes(data)
        if decoded == data:
            return data
        data = decoded


def _escape(data: bytes) -> bytes:
    return quote_from_bytes(data, safe=_SAFE).encode("ascii")


def _normalize_path(path: bytes) -> bytes:
    """Resolve ``.`` and ``..`` and collapse repeated slashes; keep a trailing slash."""
    kept: list[bytes] = []
    for segment in path.split(b"/")[1:]:
        if segment == b".":
            continue
        if segment == b"..":
            if kept:
                kept.pop()
            else:
                # Above the root: archive-commons keeps it rather than guess.
                kept.append(segment)
            continue
        kept.append(segment)
    if not kept:
        return b"/"
    return b"/" + b"".join(s + b"/" for s in kept[:-1] if s) + kept[-1]


def _ip_host(host: bytes) -> bytes | None:
    """Dotted-quad form of a numeric host (``2130706433``, ``0177.1`` → ``127.0.0.1``)."""
    if host.isdigit():
        return socket.inet_ntoa(struct.pack(">L", int(host) & 0xFFFFFFFF)).encode("ascii")
    if _DECIMAL_IP.match(host) or _OCTAL_IP.match(host):
        try:
            return socket.inet_ntoa(socket.inet_aton(host.decode("ascii"))).encode("ascii")
        except OSError:
            return None
    return None


@functools.lru_cache(maxsize=4096)  # a crawl's records come from few hosts
def _canonical_host(host: bytes) -> bytes:
    host = _unescape(host)
    if not host.isascii():
        with contextlib.suppress(UnicodeError):
            host = host.decode("utf-8", "ignore").encode("idna")
    host = host.replace(b"..", b".").strip(b".")
    ip = _ip_host(host)
    return ip if ip is not None else _escape(host.lower())


def _canonical_query(query: bytes) -> bytes:
    query = _escape(_unescape(query))
    for pattern in _QUERY_SESSION:
        m = pattern.match(query)
        if m:
            query = m.group(1) + (m.group(2) or b"")
    query = query.lower()
    if len(query) > 1:
        pairs = sorted(tuple(arg.split(b"=", 1)) for arg in query.split(b"&"))
        query = b"&".join(b"=".join(pair) for pair in pairs)
    return query


# A URL of the commonest kind: http(s), a host of letters, digits, dots and dashes, a
# port, and a path with nothing to decode, escape, resolve or strip as a session id; no
# query. Its key is the host's (cached) and the path lowercased: 1 µs instead of 9 (a
# property test holds it to the general rules).
_PLAIN_URL = re.compile(
    r"(https?)://([A-Za-z0-9.-]+)(?::([0-9]{1,5}))?(/[A-Za-z0-9\-_~/!$&'*+,;=:@.]*)?"
)


@functools.lru_cache(maxsize=4096)
def _host_key(scheme: str, host: str, port: str | None) -> str | None:
    """``com,example:8080)`` for a plain URL's authority, or None to take the long way."""
    canonical = _WWW.sub(b"", _canonical_host(host.encode("ascii")), count=1)
    number = int(port) if port else None
    if not canonical or (number is not None and number > 65535):
        return None
    key = ",".join(reversed(canonical.decode("ascii").split(".")))
    if number and number != _DEFAULT_PORTS[scheme.encode("ascii")]:
        key += f":{number}"
    return key + ")"


def surt(url: str) -> str:
    """The SURT key pywb looks ``url`` up by: ``http://www.Example.com/A?b=1&a=2`` →
    ``com,example)/a?a=2&b=1``.

    Scheme, ``www``/``wwwN`` prefix, user info, default port, fragment and common session
    ids are dropped; host, path and query are lowercased; the query's arguments are sorted;
    percent-encoding is normalised; the host is reversed into comma-separated labels.
    Raises ValueError for a URL whose port is not a number (pywb cannot look it up either).
    """
    plain = _PLAIN_URL.fullmatch(url)
    if plain is not None:
        scheme, host, port, path = plain.groups()
        if path is None:
            path = "/"
        elif "/." in path or "//" in path:
            return _surt_any(url)
        key = _host_key(scheme, host, port)
        if key is not None:
            path = path.lower()
            return key + (path[:-1] if len(path) > 1 and path[-1] == "/" else path)
    return _surt_any(url)


def _surt_any(url: str) -> str:
    """`surt` by the general rules, for any URL."""
    raw = _CONTROL_WS.sub(b"", url.encode("utf-8").strip())
    if not raw:
        return "-"
    if raw.startswith(b"filedesc"):
        return raw.decode("utf-8")
    if not _HAS_SCHEME.match(raw):
        raw = b"http://" + raw
    raw = _REPEATED_HTTP.sub(lambda m: m.group(1), raw)
    m = _SPLIT.match(raw)
    assert m is not None  # every group is optional: the pattern matches any string
    scheme = m.group(1) or b""
    netloc = (m.group(2) or b"").rstrip(b":")
    path = m.group(3) or b""
    query = m.group(4) or b""

    # Host and port as urllib's SplitResult.hostname and .port see them.
    hostport = netloc.rpartition(b"@")[2]
    _, bracket, bracketed = hostport.partition(b"[")
    if bracket:
        host, _, rest = bracketed.partition(b"]")
        port_text = rest.partition(b":")[2]
    else:
        host, _, port_text = hostport.partition(b":")
    host = host.lower()
    port = None
    if port_text:
        if not (port_text.isdigit() and port_text.isascii()) or int(port_text) > 65535:
            raise ValueError(f"invalid port in {url!r}")
        port = int(port_text)
    if not host and path and scheme.startswith(b"http"):
        # "http:////example.com/a": the host hides in the path.
        host, _, rest = path.lstrip(b"/").partition(b"/")
        path = b"/" + rest

    if host:
        host = _canonical_host(host)
        if scheme != b"dns":
            host = _WWW.sub(b"", host, count=1)
        path = _normalize_path(_unescape(path))
    else:
        path = _unescape(path)
    path = _escape(path).lower()
    for pattern in _PATH_SESSION:
        m = pattern.match(path)
        if m:
            path = m.group(1) + m.group(3)
    if len(path) > 1 and path.endswith(b"/"):
        path = path[:-1]
    query = _canonical_query(query) if query else b""

    if host:
        key = b",".join(reversed(host.split(b".")))
        if port and port != _DEFAULT_PORTS.get(scheme.lower()):
            key += b":%d" % port
        key += b")"
    else:
        key = scheme + b":"
    if path:
        key += path
    elif query:
        key += b"/"
    if query:
        key += b"?" + query
    return key.decode("utf-8")


# --- CDXJ lines -----------------------------------------------------------------------------

_STATUS_LINE = re.compile(rb"^HTTP/\d(?:\.\d)?[ \t]+(\d{3})")
_CONTENT_TYPE = re.compile(rb"\ncontent-type:[ \t]*([^\r\n]*)", re.I)
_MIME_END = re.compile(r"[; ]")
_HEAD_PEEK = 65536


def http_status_and_mime(head: bytes) -> tuple[str | None, str]:
    """(status code or None, MIME type without parameters) from an HTTP response head.

    The MIME type is the first Content-Type up to ``;`` or a space, as pywb takes it, and
    ``unk`` without one (a 404 often has none), as pywb's indexer writes it.
    """
    m = _STATUS_LINE.match(head)
    status = m.group(1).decode("ascii") if m else None
    end = head.find(b"\r\n\r\n")
    ct = _CONTENT_TYPE.search(head, 0, len(head) if end < 0 else end + 2)
    value = ct.group(1).decode("latin-1").strip() if ct else ""
    return status, _MIME_END.split(value, maxsplit=1)[0] if value else "unk"


def timestamp14(warc_date: str) -> str:
    """``2024-05-01T12:34:56.123456Z`` → ``20240501123456`` (CDXJ keeps seconds)."""
    d = warc_date
    return d[0:4] + d[5:7] + d[8:10] + d[11:13] + d[14:16] + d[17:19]


def cdxj_line(
    *,
    url: str,
    warc_date: str,
    mime: str | None,
    status: str | None,
    digest: str | None,
    length: int,
    offset: int,
    filename: str,
) -> str:
    """One CDXJ line (no newline) for a response (``mime`` from its HTTP head) or a revisit
    (pass ``mime="warc/revisit"`` and no status). ``digest`` may carry the ``sha1:`` prefix;
    it is dropped.
    """
    fields: dict[str, str] = {"url": url}
    if mime:
        fields["mime"] = mime
    if status:
        fields["status"] = status
    if digest:
        fields["digest"] = digest.removeprefix("sha1:")
    fields["length"] = str(length)
    fields["offset"] = str(offset)
    fields["filename"] = filename
    return f"{surt(url)} {timestamp14(warc_date)} {json.dumps(fields)}"


def parse_cdxj_line(line: str) -> tuple[str, str, dict[str, str]]:
    """(key, timestamp, fields) of a CDXJ line."""
    key, timestamp, rest = line.rstrip("\n").split(" ", 2)
    fields = json.loads(rest)
    if not isinstance(fields, dict):
        raise ValueError(f"not a CDXJ line: {line!r}")
    return key, timestamp, {str(k): str(v) for k, v in fields.items()}


def cdxj_path(warc_path: Path) -> Path:
    """``x.warc.gz`` → ``x.cdxj``, the name pywb's directory index source picks up."""
    name = warc_path.name
    for ext in (".warc.gz", ".warc"):
        if name.endswith(ext):
            return warc_path.with_name(name[: -len(ext)] + ".cdxj")
    return warc_path.with_name(name + ".cdxj")


class RecordInfo(NamedTuple):
    """What the index needs of one record, and where its gzip member is."""

    rec_type: str
    url: str | None
    warc_date: str | None
    payload_digest: str | None
    head: bytes  # the block's first bytes (at most 64 KiB): the HTTP head of an HTTP record
    offset: int
    length: int


def iter_records(stream: IO[bytes] | io.RawIOBase) -> Iterator[RecordInfo]:
    """Every record of ``stream``, a WARC read from its start (warcio)."""
    it = ArchiveIterator(stream, no_record_parse=True)
    for record in it:
        headers = record.rec_headers
        head: bytes = record.raw_stream.read(_HEAD_PEEK)
        it.read_to_end(record)
        yield RecordInfo(
            rec_type=record.rec_type,
            url=headers.get_header("WARC-Target-URI"),
            warc_date=headers.get_header("WARC-Date"),
            payload_digest=headers.get_header("WARC-Payload-Digest"),
            head=head,
            offset=it.get_record_offset(),
            length=it.get_record_length(),
        )


def record_line(info: RecordInfo, filename: str) -> str | None:
    """The CDXJ line of a response or revisit record; None for the records not indexed."""
    if info.rec_type not in ("response", "revisit") or not info.url or not info.warc_date:
        return None
    revisit = info.rec_type == "revisit"
    status, mime = (None, "warc/revisit") if revisit else http_status_and_mime(info.head)
    return cdxj_line(
        url=info.url,
        warc_date=info.warc_date,
        mime=mime,
        status=status,
        digest=info.payload_digest,
        length=info.length,
        offset=info.offset,
        filename=filename,
    )


def index_lines(stream: IO[bytes] | io.RawIOBase, filename: str) -> Iterator[str]:
    """The CDXJ lines (unsorted, no newlines) of the response and revisit records in
    ``stream``, a WARC read from its start."""
    for info in iter_records(stream):
        line = record_line(info, filename)
        if line is not None:
            yield line


def write_lines_sorted(lines: Iterable[str], path: Path) -> Path:
    """Sort ``lines`` and write them to ``path`` atomically and durably (temp file, fsync,
    rename, fsync of the directory): a reader sees the old index or the whole new one."""
    ordered = sorted(lines)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(line + "\n" for line in ordered)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_directory(path.parent)
    return path


def fsync_directory(directory: Path) -> None:
    """Make creations, renames and deletions in ``directory`` survive a power cut."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_index(warc_path: Path, index_path: Path | None = None) -> Path:
    """Build the sorted CDXJ of ``warc_path`` by reading it; write it beside the WARC
    (`cdxj_path`) unless ``index_path`` says where. Returns the index's path."""
    warc_path = Path(warc_path)
    with open(warc_path, "rb") as f:
        lines = list(index_lines(f, warc_path.name))
    return write_lines_sorted(lines, index_path or cdxj_path(warc_path))
