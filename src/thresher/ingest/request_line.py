"""One line of an ingest dump: an `IngestRequest`, or a `Rejected` line and why.

Input formats (the format is told from the first non-blank line, not the file name;
gzip is recognised by its magic bytes, whatever the name):

JSON Lines: one object per line::

    {"ingest_type": "pdf", "base_url": "https://example.org/paper.pdf",
     "link_source": "unpaywall", "link_source_id": "10.1234/abc",
     "release_stage": "published", "ext_ids": {"doi": "10.1234/abc"},
     "request": {"any": "thing"}}

``ext_ids`` and ``request`` are optional objects; other keys of the line go into
``request`` (a key of ``request`` itself wins), so nothing a dump carries is lost. An
integer ``link_source_id`` is taken as its decimal string.

TSV: the first non-blank line is a header naming the columns (in any order), then one
request per line, cells separated by tabs, with no quoting or escapes; an empty cell
is an absent value. Columns:

==================  =========================================================
``ingest_type``     required column: ``pdf``, ``html``, ``xml`` or ``dataset``
``base_url``        required column
``link_source``     required column unless a default source is given
``link_source_id``  required column
``release_stage``   optional
``ext_ids.NAME``    optional, any number of them: ``ext_ids.doi`` → ext_ids["doi"]
anything else       goes into ``request`` as a string: ``request[column] = cell``
==================  =========================================================

A line with another number of cells than the header has is rejected; ``ext_ids`` and
``request`` as column names are refused (see the last two rows).

In both formats blank lines (nothing but spaces, tabs and CRs) are skipped (not
counted), a UTF-8 byte order mark and CRLF line ends are accepted, and of two lines
with the same key the first one is stored.
Field sizes are capped (`MAX_URL_BYTES` …) so that any accepted request fits
PostgreSQL's index entries; the reasons a line is rejected are in `_validate`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ..errors import UsageError

__all__ = [
    "INGEST_TYPES",
    "JSON_ENCODER",
    "IngestRequest",
    "Parsed",
    "Rejected",
    "TsvHeader",
    "UnreadableInput",
    "as_request",
    "check_source",
    "parse_line",
    "parse_raw",
    "parse_tsv_header",
]

INGEST_TYPES = frozenset({"pdf", "html", "xml", "dataset"})
# The four key columns share one B-tree entry on PostgreSQL, which refuses entries over
# about 2700 bytes; these limits keep any accepted request insertable, on both backends.
MAX_URL_BYTES = 2048
MAX_SOURCE_BYTES = 100
MAX_SOURCE_ID_BYTES = 256
MAX_RELEASE_STAGE_BYTES = 64
_KNOWN = ("ingest_type", "base_url", "link_source", "link_source_id", "release_stage")
_JSON_TYPES = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Most URLs: scheme, a plain host name or IPv4 address, maybe a port. Anything else
# goes through urlsplit, which says what is wrong.
_PLAIN_URL = re.compile(r"https?://[A-Za-z0-9.-]+(?::([0-9]{1,5}))?(?:[/?#]|$)", re.IGNORECASE)


class UnreadableInput(UsageError):
    """The file cannot be read, or is not an ingest file at all: nothing was loaded."""


@dataclass(frozen=True)
class IngestRequest:
    """One claim that `base_url` holds the full text of a work, as a source made it.

    `base_url` is the URL as given, stripped of surrounding white space and nothing
    else. The request records what the source said, so it is kept in the source's
    spelling: canonicalising it (lower-case host or path, default port, sorted query,
    no fragment, http → https) would merge URLs that servers do tell apart
    (case-sensitive paths, order-sensitive query strings) and would store a URL other
    than the dump's, so a request could no longer be matched with the record it came
    from. Two spellings of one URL cost at most a second fetch. Surrounding white space
    is never part of a URL (RFC 3986, appendix C) but an artefact of the export: a
    trailing space, a CR left by a Windows tool, padding in a TSV cell.
    """

    ingest_type: str
    base_url: str
    link_source: str
    link_source_id: str
    release_stage: str | None = None
    ext_ids: Mapping[str, Any] = field(default_factory=dict)
    request: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, str, str]:
        """What makes a request unique in the store."""
        return (self.ingest_type, self.base_url, self.link_source, self.link_source_id)


@dataclass(frozen=True)
class Rejected:
    """A line that is not a valid request, and why. Line numbers count every line of
    the file from 1, a TSV header and blank lines included, as an editor shows them."""

    line_number: int
    reason: str

    def __str__(self) -> str:
        return f"line {self.line_number}: {self.reason}"


@dataclass(frozen=True)
class TsvHeader:
    """A TSV file's columns, each with where its cells go: ("field", name) for the
    request's own fields, ("ext_ids", name) and ("request", name)."""

    columns: tuple[str, ...]
    roles: tuple[tuple[str, str], ...]


def parse_tsv_header(line: str, source: str | None = None) -> TsvHeader:
    """The header line of a TSV file; `UnreadableInput` if it cannot be one."""
    names = tuple(name.strip() for name in line.rstrip("\r\n").removeprefix("\ufeff").split("\t"))
    missing = [c for c in ("ingest_type", "base_url", "link_source_id") if c not in names]
    if "link_source" not in names and source is None:
        missing.append("link_source (or give --source)")
    if missing:
        raise UnreadableInput(
            "not JSON Lines (the first line does not start with '{') nor TSV (a header "
            f"naming the columns): no column {', '.join(missing)}"
        )
    roles: list[tuple[str, str]] = []
    for name in names:
        if not name:
            raise UnreadableInput("TSV header has an empty column name")
        if names.count(name) > 1:
            raise UnreadableInput(f"TSV header names column {name!r} twice")
        if name in ("ext_ids", "request"):
            raise UnreadableInput(
                f"TSV column {name!r} is not allowed: use ext_ids.NAME columns for ext_ids;"
                " columns of other names go into request"
            )
        if name in _KNOWN:
            roles.append(("field", name))
        elif name.startswith("ext_ids."):
            if not name.removeprefix("ext_ids."):
                raise UnreadableInput("TSV column 'ext_ids.' names no identifier")
            roles.append(("ext_ids", name.removeprefix("ext_ids.")))
        else:
            roles.append(("request", name))
    return TsvHeader(names, tuple(roles))


# What the loader stores: the columns, ext_ids and request already as JSON text.
Parsed = tuple[dict[str, Any], dict[str, Any], dict[str, Any]]


def check_source(source: str) -> None:
    """UsageError unless `source` may be the link_source of the lines without one."""
    problem = _text_problem("source", source, MAX_SOURCE_BYTES)
    if not source or problem:
        raise UsageError(f"bad --source {source!r}: {problem or 'empty'}")


def parse_line(
    line: str | bytes,
    line_number: int,
    *,
    header: TsvHeader | None = None,
    source: str | None = None,
) -> IngestRequest | Rejected:
    """One line (JSON Lines, or TSV under `header`) as a request, or why it is not one.

    `source` is the link_source of a line that has none. Bytes must be UTF-8; a
    trailing newline or CR is ignored."""
    return as_request(parse_raw(line, line_number, header, source))


def as_request(parsed: Parsed | Rejected) -> IngestRequest | Rejected:
    """What `parse_raw` gave, as the request it is (a `Rejected` as it is)."""
    if isinstance(parsed, Rejected):
        return parsed
    row, ext_ids, request = parsed
    return IngestRequest(
        row["ingest_type"],
        row["base_url"],
        row["link_source"],
        row["link_source_id"],
        row["release_stage"],
        ext_ids,
        request,
    )


def parse_raw(
    line: str | bytes, n: int, header: TsvHeader | None, source: str | None
) -> Parsed | Rejected:
    """`parse_line` short of the request: the rows the loader stores as they are."""
    if isinstance(line, bytes):
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            return Rejected(n, f"invalid UTF-8 at byte {exc.start + 1} of the line")
    else:
        text = line
    text = text.rstrip("\r\n")
    if header is None:
        return _from_json(text, n, source)
    return _from_tsv(text, n, header, source)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


# Made once: json.loads and json.dumps build a new decoder or encoder on every call that
# passes options, which costs more than parsing a short line.
_DECODER = json.JSONDecoder(parse_constant=_no_constant)
JSON_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_OWN_KEYS = frozenset({*_KNOWN, "ext_ids", "request"})


def _from_json(text: str, n: int, source: str | None) -> Parsed | Rejected:
    try:
        obj = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        return Rejected(n, f"bad JSON: {exc.msg} at column {exc.colno}")
    except ValueError as exc:  # NaN, Infinity, an integer of thousands of digits
        return Rejected(n, f"bad JSON: {exc}")
    except RecursionError:
        return Rejected(n, "bad JSON: nested too deeply")
    if type(obj) is not dict:
        return Rejected(n, f"not a JSON object but {_type_name(obj)}")
    extra = None
    if not _OWN_KEYS.issuperset(obj):
        extra = {k: v for k, v in obj.items() if k not in _OWN_KEYS}
    return _validate(obj, extra, n, source)


def _from_tsv(text: str, n: int, header: TsvHeader, source: str | None) -> Parsed | Rejected:
    cells = text.split("\t")
    if len(cells) != len(header.roles):
        return Rejected(
            n,
            f"{len(cells)} tab-separated cells where the header has {len(header.roles)} columns",
        )
    obj: dict[str, Any] = {}
    ext_ids: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for (role, name), cell in zip(header.roles, cells, strict=True):
        if not cell:
            continue
        if role == "field":
            obj[name] = cell
        elif role == "ext_ids":
            ext_ids[name] = cell
        else:
            extra[name] = cell
    if ext_ids:
        obj["ext_ids"] = ext_ids
    return _validate(obj, extra, n, source)


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return "a number"
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _text_problem(name: str, value: str, limit: int) -> str | None:
    """Why a text field cannot be stored as is (None when it can)."""
    if value.isascii():
        if len(value) <= limit and "\x00" not in value:
            return None  # the common case, at the cost of two scans
        size = len(value)
    else:
        try:
            size = len(value.encode("utf-8"))
        except UnicodeEncodeError:
            return f"field {name} is not valid Unicode (a lone surrogate)"
    if "\x00" in value:
        return f"field {name} contains a NUL character"  # PostgreSQL text cannot hold one
    if size > limit:
        return f"field {name} is longer than {limit} bytes"
    return None


def _string(obj: Mapping[str, Any], name: str, n: int, limit: int) -> str | Rejected | None:
    """An optional text field: None when absent, null or empty."""
    value = obj.get(name)
    if value is None or value == "":
        return None
    if type(value) is not str:
        return Rejected(n, f"field {name} must be a string, not {_type_name(value)}")
    problem = _text_problem(name, value, limit)
    return Rejected(n, problem) if problem else value


def _url_problem(url: str) -> str | None:
    """Why `url` (stripped, not empty) is not an http(s) URL we can store."""
    plain = _PLAIN_URL.match(url)
    if (
        plain
        and (plain[1] is None or 0 < int(plain[1]) < 65536)
        and len(url) <= MAX_URL_BYTES
        and url.isascii()
        and _CONTROL.search(url) is None
    ):
        return None  # the common case: no need for urlsplit
    problem = _text_problem("base_url", url, MAX_URL_BYTES)
    if problem:
        return problem
    if _CONTROL.search(url):
        return "base_url contains a control character"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"base_url is not a valid URL: {exc}"
    if not parts.scheme:
        return "base_url has no URL scheme (http or https)"
    if parts.scheme.lower() not in ("http", "https"):
        return f"unsupported URL scheme {parts.scheme!r} in base_url (http or https)"
    if not parts.hostname:
        return "base_url has no host"
    if port == 0:
        return "base_url has port 0"
    return None


def _object(obj: Mapping[str, Any], name: str, n: int) -> dict[str, Any] | Rejected:
    value = obj.get(name)
    if value is None:
        return {}
    if type(value) is not dict:
        return Rejected(n, f"field {name} must be an object, not {_type_name(value)}")
    return value


def _json_text(name: str, value: dict[str, Any], n: int) -> str | Rejected | None:
    """`value` as the JSON text stored (None for an empty object), or why it cannot be
    stored on both backends."""
    if not value:
        return None
    try:
        text = JSON_ENCODER.encode(value)
    except ValueError:  # inf, from a literal such as 1e999
        return Rejected(n, f"field {name} holds a number out of range")
    except RecursionError:
        return Rejected(n, f"field {name} is nested too deeply")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return Rejected(n, f"field {name} is not valid Unicode (a lone surrogate)")
    return text


def _validate(
    obj: Mapping[str, Any], extra: dict[str, Any] | None, n: int, source: str | None
) -> Parsed | Rejected:
    """The checks both formats share, in the order of the fields; the first failure is
    the line's reason. `extra` holds what goes into request besides its own keys."""
    ingest_type = obj.get("ingest_type")
    if type(ingest_type) is not str or ingest_type not in INGEST_TYPES:
        if ingest_type is None or ingest_type == "":
            return Rejected(n, "missing field ingest_type")
        if not isinstance(ingest_type, str):
            return Rejected(n, f"field ingest_type must be a string, not {_type_name(ingest_type)}")
        types = ", ".join(sorted(INGEST_TYPES))
        return Rejected(n, f"unknown ingest_type {ingest_type[:40]!r} (one of {types})")

    base_url = obj.get("base_url")
    if type(base_url) is str:
        base_url = base_url.strip()
    if base_url is None or base_url == "":
        return Rejected(n, "missing field base_url")
    if type(base_url) is not str:
        return Rejected(n, f"field base_url must be a string, not {_type_name(base_url)}")
    problem = _url_problem(base_url)
    if problem:
        return Rejected(n, problem)

    link_source = _string(obj, "link_source", n, MAX_SOURCE_BYTES)
    if isinstance(link_source, Rejected):
        return link_source
    link_source = link_source or source
    if link_source is None:
        return Rejected(n, "missing field link_source")

    raw_id = obj.get("link_source_id")
    if type(raw_id) is int:
        obj = {**obj, "link_source_id": str(raw_id)}
    link_source_id = _string(obj, "link_source_id", n, MAX_SOURCE_ID_BYTES)
    if isinstance(link_source_id, Rejected):
        return link_source_id
    if link_source_id is None:
        return Rejected(n, "missing field link_source_id")

    release_stage = _string(obj, "release_stage", n, MAX_RELEASE_STAGE_BYTES)
    if isinstance(release_stage, Rejected):
        return release_stage

    ext_ids = _object(obj, "ext_ids", n)
    if isinstance(ext_ids, Rejected):
        return ext_ids
    request = _object(obj, "request", n)
    if isinstance(request, Rejected):
        return request
    if extra:
        request = {**extra, **request}
    ext_text = _json_text("ext_ids", ext_ids, n)
    if isinstance(ext_text, Rejected):
        return ext_text
    request_text = _json_text("request", request, n)
    if isinstance(request_text, Rejected):
        return request_text
    row = {
        "ingest_type": ingest_type,
        "base_url": base_url,
        "link_source": link_source,
        "link_source_id": link_source_id,
        "release_stage": release_stage,
        "ext_ids": ext_text,
        "request": request_text,
    }
    return row, ext_ids, request
