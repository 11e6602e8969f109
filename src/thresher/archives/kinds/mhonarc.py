"""MHonArc: mail archives rendered as HTML (lists.debian.org), one page per message.

What MHonArc 2.6 writes (read from its source, checked against Debian's `mhonarc` in
tests/archives/test_mhonarc_real.py): per archive directory a date index
`maillist.html` and a thread index `threads.html` (paged as `mail2.html`… and
`thrd2.html`… when the archive sets a page size), linking one `msgNNNNN.html` per
message. Messages are numbered from 0 in the order they were added: mail added later
(`mhonarc -add`), late mail for an old period included, gets the next number, so the
highest number harvested is the stop sign. A message page starts with HTML comments
holding the original header fields — `<!--X-Subject: …-->`, `<!--X-From-R13: …-->`
(the From field, letters rotated by `mrot13`), `<!--X-Date: …-->`,
`<!--X-Message-Id: …-->` (without `<>`), `<!--X-Content-Type: …-->`, one
`<!--X-Reference: …-->` per id of References and In-Reply-To — with `-`, `&` and `<`
written as `&#45;`, `&#38;`, `&#60;`, and the raw bytes of the fields otherwise (RFC
2047 words undecoded, 8-bit text as sent). The fields shown to readers follow as
`<li><em>Name</em>: value</li>` between `<!--X-Head-of-Message-->` and its end, and the
body as rendered between `<!--X-Body-of-Message-->` and `<!--X-Body-of-Message-End-->`.

lists.debian.org keeps one MHonArc archive per month, `LIST/YYYY/MM/`, under a list
page linking them; a unit is such a month. An archive without periods is one unit,
`all`, its messages filed under their Date's month.

A message is rebuilt (`rebuild_message`) from the comments, the fields shown and the
body converted back to text; what that loses against the mail as sent is in
docs/mail.md (MHonArc). MHonArc does not keep the original.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping
from urllib.parse import urljoin, urlsplit, urlunsplit

from ..mbox import RawMessage
from ..message import decode_bytes
from ..months import ALL, valid_month
from ..units import Known, Unit
from .base import (
    ArchiveIndexError,
    ArchiveKind,
    Harvest,
    Listing,
    PageMissing,
    Port,
    dir_url,
    http_url,
)

__all__ = [
    "CHECKPOINT",
    "MHonArc",
    "index_numbers",
    "mhonarc_list_url",
    "mrot13",
    "parse_periods",
    "rebuild_message",
]

# Message pages stored per checkpoint: a month of a busy list is thousands of pages, a
# delay apart; a crash costs at most this many pages fetched again.
CHECKPOINT = 50

_MARK = re.compile(rb"<!--\s*MHonArc\s+v\d", re.IGNORECASE)
_MSG_LINK = re.compile(rb"""href\s*=\s*["']?(msg(\d+)\.html)(?=["'\s>#])""", re.IGNORECASE)
_PAGE_LINK = re.compile(rb"""href\s*=\s*["']?((mail|thrd)\d+\.html)(?=["'\s>#])""", re.IGNORECASE)
_PERIOD_LINK = re.compile(
    r"""href\s*=\s*["']?((?:[^"'\s>]*/)?(\d{4})/(\d{2})/"""
    r"""(?:(?:maillist|threads|index|mail\d+|thrd\d+)\.html?)?)(?=["'\s>#])""",
    re.IGNORECASE,
)
# A period of a lists.debian.org-like archive: `…/LIST/YYYY/MM/` and the pages in it.
_PERIOD_URL = re.compile(r"^(.*/)(\d{4})/(\d{2})/(?:[^/]*\.html?)?$", re.IGNORECASE)
_ARCHIVE_PAGE = re.compile(
    r"/(?:maillist|threads|mail\d+|thrd\d+|msg\d+)\.html?$",
    re.IGNORECASE,
)
_HOSTS = ("lists.debian.org",)

_COMMENT_FIELD = re.compile(rb"<!--X-([A-Za-z0-9-]+): ?(.*?) ?-->", re.DOTALL)
_HEAD_END = b"<!--X-Head-End-->"
_SHOWN_START, _SHOWN_END = b"<!--X-Head-of-Message-->", b"<!--X-Head-of-Message-End-->"
_BODY_START, _BODY_END = b"<!--X-Body-of-Message-->", b"<!--X-Body-of-Message-End-->"
_SHOWN_FIELD = re.compile(
    r"<li>\s*<(?:em|strong|b)>\s*([^<:]+?)\s*</(?:em|strong|b)>\s*:?\s*(.*?)</li>",
    re.IGNORECASE | re.DOTALL,
)
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([\w.:-]+)""", re.IGNORECASE)
_NO_ID = "@NO-ID-FOUND.mhonarc.org"
_ANGLE_ID = re.compile(r"<([^<>\s]+)>")

# mrot13, as MHonArc's ewhutil.pl writes it: tr/@A-Z[a-z/N-Z[@A-Mn-za-m/.
_ROT_FROM = b"@ABCDEFGHIJKLMNOPQRSTUVWXYZ[abcdefghijklmnopqrstuvwxyz"
_ROT_TO = b"NOPQRSTUVWXYZ[@ABCDEFGHIJKLMnopqrstuvwxyzabcdefghijklm"
_ROT = bytes.maketrans(_ROT_FROM, _ROT_TO)
_UNROT = bytes.maketrans(_ROT_TO, _ROT_FROM)


def mrot13(data: bytes, *, undo: bool = False) -> bytes:
    """MHonArc's `mrot13` (letters, `@` and `[` rotated), or its inverse."""
    return data.translate(_UNROT if undo else _ROT)


def mhonarc_list_url(url: str) -> str:
    """The URL a source keeps: the list page for a period of a lists.debian.org-like
    archive (`…/LIST/2024/01/maillist.html` → `…/LIST/`), the date index of an archive
    without periods (`…/archive/msg00012.html` → `…/archive/maillist.html`), or the
    page as given (a list page)."""
    parts = urlsplit(http_url(url))
    match = _PERIOD_URL.match(parts.path)
    if match is not None and valid_month(f"{match.group(2)}-{match.group(3)}"):
        path = match.group(1)
    elif _ARCHIVE_PAGE.search(parts.path):
        path = parts.path.rsplit("/", 1)[0] + "/maillist.html"
    else:
        path = parts.path or "/"
    return urlunsplit((parts.scheme, parts.netloc, str(path), "", ""))


def parse_periods(page: bytes, base: str) -> dict[str, str]:
    """The periods a list page links to below itself: month → the period's directory."""
    found: dict[str, str] = {}
    under = dir_url(base)
    for match in _PERIOD_LINK.finditer(page.decode("latin-1")):
        month = f"{match.group(2)}-{match.group(3)}"
        link = match.group(1)
        period = urljoin(base, link[: link.rindex("/") + 1])
        if valid_month(month) and period == f"{under}{match.group(2)}/{match.group(3)}/":
            found[month] = period
    return dict(sorted(found.items()))


def index_numbers(page: bytes, base: str) -> dict[int, str]:
    """The messages an index page links to: number → the message page's URL."""
    return {int(m.group(2)): urljoin(base, m.group(1).decode()) for m in _MSG_LINK.finditer(page)}


def _uncommentize(value: bytes) -> bytes:
    # MHonArc's commentize writes "-", "&" and "<" as decimal references, nothing else.
    return re.sub(rb"&#(\d{1,3});", lambda m: bytes([int(m.group(1)) & 0xFF]), value)


def _page_charset(page: bytes) -> str | None:
    match = _META_CHARSET.search(page[:4096])
    return match.group(1).decode("ascii", "replace") if match else None


_DROP = re.compile(r"<(script|style)\b.*?</\1\s*>|<!--.*?-->", re.IGNORECASE | re.DOTALL)
_PRE = re.compile(r"(<pre\b[^>]*>)(.*?)(</pre\s*>)", re.IGNORECASE | re.DOTALL)
_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
_BLOCK = re.compile(
    r"</?(?:p|div|li|ul|ol|dl|dt|dd|tr|table|h[1-6]|blockquote|hr|pre|address)\b[^>]*>",
    re.IGNORECASE,
)
_TAG = re.compile(r"<[^>]*>")
_BLANKS = re.compile(r"[ \t\r\n\f\v]+")


def html_text(fragment: str) -> str:
    """Text from HTML as MHonArc renders a body: `<pre>` kept as it is, line for line
    (MHonArc's text/plain); elsewhere (text/html parts, `-nopre` archives) lines broken
    where `<br>` and block elements are. Tags dropped, entities decoded."""
    fragment = _DROP.sub("", fragment)
    pieces = []
    pos = 0
    for match in _PRE.finditer(fragment):
        pieces.append(_flow(fragment[pos : match.start()]))
        pieces.append(html.unescape(_TAG.sub("", match.group(2))))
        pos = match.end()
    pieces.append(_flow(fragment[pos:]))
    text = "\n".join(p.strip("\n") for p in pieces if p.strip())
    return text + "\n" if text else ""


def _flow(fragment: str) -> str:
    fragment = _BLANKS.sub(" ", fragment)
    fragment = _BREAK.sub("\n", fragment)
    fragment = _BLOCK.sub("\n", fragment)
    text = html.unescape(_TAG.sub("", fragment))
    text = "\n".join(line.strip() for line in text.split("\n"))
    return re.sub(r"\n{3,}", "\n\n", text)


def _shown_fields(page: bytes, charset: str | None) -> list[tuple[str, str]]:
    """The fields a message page shows readers, in order, as text."""
    start, end = page.find(_SHOWN_START), page.find(_SHOWN_END)
    if start < 0 or end < start:
        return []
    text = decode_bytes(page[start + len(_SHOWN_START) : end], charset)
    fields = []
    for match in _SHOWN_FIELD.finditer(text):
        name = html.unescape(_TAG.sub("", match.group(1))).strip()
        value = " ".join(html.unescape(_TAG.sub("", match.group(2))).split())
        if name and re.fullmatch(r"[!-9;-~]+", name):
            fields.append((name, value))
    return fields


def _header(name: str, value: bytes) -> bytes:
    # One line per field: a value carries no line break into the rebuilt header.
    return name.encode() + b": " + re.sub(rb"[\r\n]+[ \t]*", b" ", value).strip() + b"\n"


def rebuild_message(page: bytes) -> bytes | None:
    """The message a MHonArc page holds, as mail: header fields from the page's
    comments (raw, as the message had them) and from the fields it shows readers
    (decoded text), the body as rendered, converted back to text, in UTF-8. None when
    the page is not a MHonArc message page."""
    head_end = page.find(_HEAD_END)
    comments: dict[str, list[bytes]] = {}
    if head_end >= 0:
        for match in _COMMENT_FIELD.finditer(page, 0, head_end):
            name = match.group(1).decode("ascii").lower()
            comments.setdefault(name, []).append(_uncommentize(match.group(2)))
    body_start, body_end = page.find(_BODY_START), page.find(_BODY_END)
    if body_start < 0 or body_end < body_start:
        return None
    charset = _page_charset(page)
    shown = _shown_fields(page, charset)
    from_comments = {
        "subject": comments.get("subject", [None])[0],
        "from": mrot13(comments["from-r13"][0], undo=True) if "from-r13" in comments else None,
        "date": comments.get("date", [None])[0],
    }
    message_id = comments.get("message-id", [b""])[0].decode("utf-8", "replace").strip()
    if message_id.endswith(_NO_ID):
        message_id = ""  # made up by MHonArc for a message that had none
    refs = [r.decode("utf-8", "replace").strip() for r in comments.get("reference", [])]
    in_reply_to = {
        i
        for name, value in shown
        if name.lower() == "in-reply-to"
        for i in _ANGLE_ID.findall(value)
    }
    # X-Reference lists the ids of References, then In-Reply-To's. A page that shows
    # References says which they were; otherwise they are those not shown as In-Reply-To.
    if any(name.lower() == "references" for name, _ in shown):
        refs = []
    refs = [r for r in refs if r not in in_reply_to]
    lines: list[bytes] = []
    written: set[str] = set()
    for name, value in shown:
        key = name.lower()
        if key in written or key in ("message-id", "content-type", "mime-version"):
            continue
        written.add(key)
        raw = from_comments.get(key)
        lines.append(_header(name, raw if raw is not None else value.encode()))
    for key, field in (("from", "From"), ("subject", "Subject"), ("date", "Date")):
        kept = from_comments[key]
        if key not in written and kept is not None:
            lines.append(_header(field, kept))
    if message_id:
        lines.append(_header("Message-ID", f"<{message_id}>".encode()))
    if refs:
        lines.append(_header("References", " ".join(f"<{r}>" for r in refs).encode()))
    lines.append(b"MIME-Version: 1.0\n")
    lines.append(b"Content-Type: text/plain; charset=utf-8\n")
    lines.append(b"Content-Transfer-Encoding: 8bit\n")
    body = html_text(decode_bytes(page[body_start + len(_BODY_START) : body_end], charset))
    return b"".join(lines) + b"\n" + body.encode("utf-8")


def is_mhonarc(page: bytes) -> bool:
    return _MARK.search(page) is not None


class MHonArc(ArchiveKind):
    name = "mhonarc"
    doc = (
        "A MHonArc archive (lists.debian.org): the list page, a period's URL"
        " (…/LIST/YYYY/MM/) or an index page (maillist.html)."
    )

    def check_url(self, url: str) -> str:
        return mhonarc_list_url(url)

    def detect(self, url: str) -> bool:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            return False
        match = _PERIOD_URL.match(parts.path)
        if match is not None and valid_month(f"{match.group(2)}-{match.group(3)}"):
            return True
        if re.search(r"/(?:maillist|threads)\.html?$", parts.path, re.IGNORECASE):
            return True
        return (parts.hostname or "") in _HOSTS and parts.path.strip("/") != ""

    async def list_units(
        self, port: Port, url: str, known: Mapping[str, Known], grace: float
    ) -> Listing:
        page = await port.listing(url)
        periods = parse_periods(page, url)
        if periods:
            return Listing(
                [
                    Unit(month, (d + "maillist.html", d + "threads.html"), grows=True)
                    for month, d in periods.items()
                ]
            )
        if index_numbers(page, url) or is_mhonarc(page):
            return Listing([Unit(ALL, (url,), grows=True)])
        raise ArchiveIndexError(
            f"{url} is neither a MHonArc index nor a page linking periods (YYYY/MM/)"
        )

    async def harvest(self, port: Port, unit: Unit, known: Known | None, max_bytes: int) -> Harvest:
        index_url, numbers = await _read_index(port, unit.urls)
        events: list[tuple[str, str]] = []
        stop = known.stop_offset if known is not None and known.stop_offset is not None else -1
        if numbers and max(numbers) < stop:
            # Numbers only grow: an index whose highest is below the stop sign was made
            # anew (the archive rebuilt, its messages numbered again). Read it all.
            events.append(
                ("changed", f"the index ends at {max(numbers)}, below {stop}: read again")
            )
            stop = -1
        wire = 0
        batch: list[RawMessage] = []
        last = stop
        for number in sorted(n for n in numbers if n > stop):
            url = numbers[number]
            got = await port.get(url, None, max_bytes)
            wire += got.wire
            if got.status in (404, 410):
                # Listed, then removed before it was read: recorded, not retried.
                events.append(("unavailable", f"{url}: HTTP {got.status}"))
            else:
                got.check(url)
                raw = rebuild_message(got.content)
                if raw is None:
                    events.append(("unreadable", f"{url} is not a MHonArc message page"))
                else:
                    batch.append(RawMessage(number, raw))
            last = number
            if len(batch) >= CHECKPOINT:
                await port.checkpoint(unit.month, index_url, batch, last)
                batch = []
        return Harvest(
            url=index_url,
            status=200 if wire else 304,
            wire=wire,
            messages=batch,
            counted=len(numbers),
            expected=len(numbers),
            stop_offset=last,
            positions=frozenset(numbers),
            events=events,
        )


async def _read_index(port: Port, urls: Iterable[str]) -> tuple[str, dict[int, str]]:
    """The unit's index (the first of `urls` the archive has) and every page of it:
    the index's URL and the messages it lists, number → page URL."""
    first = None
    for url in urls:
        try:
            first = (url, await port.listing(url))
            break
        except PageMissing:
            continue
    if first is None:
        raise ArchiveIndexError(f"no MHonArc index among {list(urls)}")
    index_url, page = first
    if not is_mhonarc(page) and not index_numbers(page, index_url):
        raise ArchiveIndexError(f"{index_url} is not a MHonArc index")
    numbers = index_numbers(page, index_url)
    family = urlsplit(index_url).path.rsplit("/", 1)[-1].startswith("thr")
    todo = [
        link
        for link in _page_links(page, index_url)
        if urlsplit(link).path.rsplit("/", 1)[-1].startswith("thr") == family
    ]
    seen = {index_url, *todo}
    while todo:
        url = todo.pop(0)
        page = await port.listing(url)
        numbers.update(index_numbers(page, url))
        for link in _page_links(page, url):
            same = urlsplit(link).path.rsplit("/", 1)[-1].startswith("thr") == family
            if same and link not in seen:
                seen.add(link)
                todo.append(link)
    return index_url, numbers


def _page_links(page: bytes, base: str) -> list[str]:
    return [urljoin(base, m.group(1).decode()) for m in _PAGE_LINK.finditer(page)]
