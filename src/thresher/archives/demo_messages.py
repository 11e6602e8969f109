"""Generated list mail for the demo archive (realistic threads, and the broken mail real
archives hold), and the files archives keep it in. Pure functions, no I/O: the demo
server (`thresher.archives.demo`) serves them and the mail benchmark writes them to disk.

Why generated and not a corpus: the demo, the archive integration tests and the mail
benchmark need any number of messages, the same bytes on every run (so a second harvest
finds nothing new and a failure can be replayed), and no third party's mail. The
messages look like a developer list's: about thirty senders (some with non-ASCII names,
written as RFC 2047 ``=?utf-8?q?...?=`` words, the way clients send them), threads of
replies that carry ``In-Reply-To``/``References`` and quote their parent, ``Re:``
subjects, and now and then a body line starting with ``From `` that every mbox writer
has to escape. Speed matters because the benchmark asks for 50,000 messages: everything
that can be is precomputed at import, and each message costs a handful of random draws
and one string join.

`hostile_messages` adds, one message each, the cases an archive harvester must survive
(see its docstring for the names).

The renderers imitate what each archive really stores: pipermail's ``.txt`` (envelope
``From user at host  asctime``, ``From:`` obfuscated, body ``From `` lines NOT escaped),
mboxo for Apache mod_mbox and HyperKitty, mboxrd for Pony Mail and plain mbox files, and the
index pages of Mailman 2 and mod_mbox. Every message is rendered on its own and followed
by a blank line, so a month that gains a message only gains bytes at its end, as the
real files do (which is what makes a Range request for the tail worth trying).
"""

from __future__ import annotations

import html
import random
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, date, datetime
from email.utils import parseaddr
from typing import NamedTuple

from .message import parse_date

__all__ = [
    "HOSTILE_NAMES",
    "MONTH_NAMES",
    "Hostile",
    "generate_messages",
    "hostile_messages",
    "modmbox_index_html",
    "pipermail_file",
    "pipermail_index_html",
    "render_mbox",
    "render_pipermail",
]

_MARGIN = 14 * 3600  # dates keep clear of the month's edges in every sender's time zone

# (display name, address, UTC offset in minutes)
_PEOPLE: tuple[tuple[str, str, int], ...] = (
    ("Alice Johnson", "alice@example.com", -300),
    ("Bob Smith", "bob.smith@example.net", 0),
    ("Jörg Müller", "joerg.mueller@example.de", 60),
    ("Chen Wei", "chen.wei@example.cn", 480),
    ("Zoë Ångström", "zoe@example.se", 60),
    ("François Lefèvre", "flefevre@example.fr", 60),
    ("Dmitri Ivanov", "divanov@example.ru", 180),
    ("María José García", "mjgarcia@example.es", 60),
    ("Priya Raman", "priya@example.in", 330),
    ("Łukasz Nowak", "lnowak@example.pl", 60),
    ("Tanaka Hiroshi", "tanaka@example.jp", 540),
    ("山田太郎", "yamada@example.jp", 540),
    ("Olivia Brown", "olivia@example.org", -480),
    ("Noah Davis", "ndavis@example.com", -360),
    ("Smith, John", "jsmith@example.com", -300),
    ("Søren Kjærgaard", "soren@example.dk", 60),
    ("Emma Wilson", "emma.w@example.co.uk", 0),
    ("Lucas Silva", "lucas@example.br", -180),
    ("Ahmed Hassan", "ahassan@example.eg", 120),
    ("Grace Lee", "grace@example.kr", 540),
    ("Mateo Rossi", "mrossi@example.it", 60),
    ("Ingrid Støre", "ingrid@example.no", 60),
    ("Pat O'Neill", "pat@example.ie", 0),
    ("Yusuf Demir", "ydemir@example.com.tr", 180),
    ("Ana Pérez", "ana.perez@example.mx", -360),
    ("Kevin Nguyen", "kevin@example.com", -420),
    ("Hannah Schröder", "hannah@example.at", 60),
    ("Rui Costa", "rcosta@example.pt", 0),
    ("Sam Taylor", "sam@example.org", 600),
    ("Björn Eriksson", "bjorn@example.se", 60),
)

_TOPICS = (
    "Release plan for 2.4",
    "Build fails on ARM64 with the new toolchain",
    "Proposal: drop support for Python 3.8",
    "Flaky test in the scheduler suite",
    "Memory leak when reloading the configuration",
    "Documentation for the plugin API",
    "CI is red again",
    "Question about the license of vendored code",
    "Deprecating the old XML config format",
    "Performance regression in 2.3.1",
    "[VOTE] Release 2.3.2 (RC1)",
    "Migrating the issue tracker",
    "Default timeout is too short",
    "Unicode file names on Windows",
    "Roadmap discussion for next year",
    "Security report process",
    "Code of conduct update",
    "Crash on startup with an empty cache directory",
    "Naming of the new CLI subcommands",
    "Logging format change",
    "How should we handle time zones in the scheduler?",
    "Packaging for Debian",
    "Mentoring new contributors",
    "Thread pool starvation under load",
    "Removing the legacy HTTP client",
    "Improving error messages for bad input",
    "Benchmark results on the new storage engine",
    "Graduation checklist",
    "Patch review backlog",
    "Meeting notes from the hackathon",
    "Café meetup in Zürich next month",
    "Résumé of the design discussion",
)

_LINES = (
    "I had a look at this yesterday and I think the problem is in the parser.",
    "The patch applies cleanly on the main branch and all tests pass for me.",
    "Could you share the full stack trace? The snippet above is cut short.",
    "We discussed this at the last meeting but never wrote anything down.",
    "I would rather not change the default behaviour in a patch release.",
    "Let's keep the old option for one more release and warn when it is used.",
    "The benchmark numbers look good, about 15% faster on my machine.",
    "This breaks the build on macOS; see the CI log linked in the ticket.",
    "+1 from me, as long as the documentation is updated at the same time.",
    "I am not sure this is the right approach. What about a separate module?",
    "The root cause is a race between the reader and the cleanup thread.",
    "We need a test that reproduces this before we merge any fix.",
    "Happy to review if someone opens a pull request.",
    "The release notes should mention the changed configuration keys.",
    "It works with the default settings but not with a custom cache path.",
    "I tried both approaches; the second one is simpler and just as fast.",
    "Please don't top-post; it makes the archive hard to read.",
    "The old behaviour was never documented, so I consider it a bug.",
    "Is anybody still using the XML format? I have not seen a report in years.",
    "Thanks for the detailed write-up, that helps a lot.",
    "The failure only shows up with more than 64 workers.",
    "I pushed a branch with a minimal reproduction.",
    "We should ask the packagers before dropping the old platform.",
    "That sounds reasonable to me. Let's give it a week for objections.",
    "Naïve question: why do we need a lock here at all?",
    "Thanks — that fixes it for me.",
    "Merci, ça marche maintenant avec la nouvelle version.",
    "Danke für den Hinweis, ich schaue mir das morgen an.",
    "The fix is in 2.3.2; earlier versions are affected.",
    "I'd like to see numbers from a real workload before deciding.",
    "The vote passes with five binding +1 votes and no -1.",
    "Please file a ticket so that this does not get lost.",
    "The mirror sync takes about an hour after the release is tagged.",
    "I can take this one unless somebody else already started.",
    "We already have a helper for that in the utils module.",
    "The change looks fine but the commit message needs more detail.",
    "This is documented in the FAQ, section 4.2.",
    "Retrying with exponential backoff should be enough here.",
    "The test data set is about 2 GB, so it does not fit in the repository.",
    "I think we agree on the goal and only disagree on the timing.",
    "Sorry for the late reply, I was travelling last week.",
    "Results: 1200 requests/s before, 1450 requests/s after the change.",
    "Let me know if you need access to the build machines.",
    "The issue is reproducible on Linux and FreeBSD but not on Windows.",
    "We could also make it configurable, with the current value as default.",
    "An environment variable would be the least intrusive option.",
    "That module has no owner at the moment; volunteers welcome.",
    "I checked the archives and the same question came up in 2019.",
)

# Body lines that start with "From " (mbox writers must escape them); none looks like
# an envelope line, so splitting an unescaped pipermail file stays exact.
_FROM_LINES = (
    "From what I can tell, the cache is never invalidated.",
    "From the logs it looks like the worker restarted twice.",
    "From my point of view this is ready to merge.",
    "From now on, please run the linters before pushing.",
    "From 2.4 on, the old option will be removed.",
)

_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _q_word(text: str) -> str:
    """An RFC 2047 Q-encoded word, as mail clients write non-ASCII names."""
    out = []
    for byte in text.encode("utf-8"):
        char = chr(byte)
        if char.isascii() and char.isalnum():
            out.append(char)
        elif char == " ":
            out.append("_")
        else:
            out.append(f"={byte:02X}")
    return f"=?utf-8?q?{''.join(out)}?="


def _from_header(name: str, address: str) -> str:
    if not name.isascii():
        return f"{_q_word(name)} <{address}>"
    if any(c in name for c in ",'.\""):
        return f'"{name}" <{address}>'
    return f"{name} <{address}>"


_FROM_HEADERS = tuple(_from_header(name, addr) for name, addr, _ in _PEOPLE)
_OFFSETS = tuple(minutes * 60 for _, _, minutes in _PEOPLE)
_ZONES = tuple(f"{'-' if m < 0 else '+'}{abs(m) // 60:02d}{abs(m) % 60:02d}" for _, _, m in _PEOPLE)
# "Smith, John" signs as John.
_FIRST_NAMES = tuple(n.split()[-1] if "," in n else n.split()[0] for n, _, _ in _PEOPLE)


def _month_range(month: str) -> tuple[int, int]:
    year, mon = int(month[:4]), int(month[5:7])
    if len(month) != 7 or month[4] != "-" or not 1 <= mon <= 12:
        raise ValueError(f"not a month (YYYY-MM): {month!r}")
    start = datetime(year, mon, 1, tzinfo=UTC)
    end = datetime(year + mon // 12, mon % 12 + 1, 1, tzinfo=UTC)
    return int(start.timestamp()), int(end.timestamp())


def _rfc5322_date(ts: int, offset: int, zone: str) -> str:
    t = time.gmtime(ts + offset)
    return (
        f"{_DAYS[t.tm_wday]}, {t.tm_mday} {_MONTHS[t.tm_mon - 1]} {t.tm_year} "
        f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} {zone}"
    )


def _paragraphs() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Paragraphs of three to five lines, and the same quoted for a reply ("> ..."),
    built once from a fixed seed: a message is then a few paragraph picks."""
    rng = random.Random(20240101)
    plain: list[str] = []
    quoted: list[str] = []
    for i in range(400):
        lines = rng.sample(_LINES, 3 + rng.randrange(3))
        if i % 20 == 0:  # one paragraph in twenty opens with a "From " line
            lines[0] = _FROM_LINES[(i // 20) % len(_FROM_LINES)]
        plain.append("\n".join(lines))
        quoted.append("\n".join("> " + line for line in lines))
    return tuple(plain), tuple(quoted)


_PARAGRAPHS, _QUOTED = _paragraphs()
_PLAIN_PARAGRAPHS = tuple(i for i, p in enumerate(_PARAGRAPHS) if not p.startswith("From "))
_FROM_PARAGRAPHS = tuple(i for i, p in enumerate(_PARAGRAPHS) if p.startswith("From "))


class _Sent(NamedTuple):
    message_id: str
    subject: str  # without "Re: " and the list's prefix
    references: tuple[str, ...]
    sender: int
    date: str
    first: int  # the body's first paragraph, quoted by replies


def generate_messages(
    list_address: str, months: Sequence[str], per_month: int, seed: int = 0
) -> dict[str, list[bytes]]:
    """`per_month` messages for each month ('YYYY-MM'), in date order: raw RFC 5322
    bytes (LF line endings, no mbox envelope). The same arguments always give the same
    bytes. About 55% of messages reply to one of the 40 messages before them, quoting
    its first paragraph; about one body in twenty has a line starting with ``From ``."""
    rng = random.Random(f"{seed}:{list_address}")
    rand = rng.random
    name = list_address.split("@", 1)[0]
    list_id = list_address.replace("@", ".")
    prefix = f"[{name}] "
    people, topics = len(_PEOPLE), len(_TOPICS)
    plain, froms = len(_PLAIN_PARAGRAPHS), len(_FROM_PARAGRAPHS)
    recent: list[_Sent] = []
    out: dict[str, list[bytes]] = {}
    serial = 0
    for month in months:
        start, end = _month_range(month)
        lo, hi = start + _MARGIN, max(start + _MARGIN + 1, end - _MARGIN)
        stamps = sorted(int(lo + rand() * (hi - lo)) for _ in range(per_month))
        messages: list[bytes] = []
        for ts in stamps:
            serial += 1
            sender = int(rand() * people)
            date = _rfc5322_date(ts, _OFFSETS[sender], _ZONES[sender])
            message_id = f"{ts:x}.{rng.getrandbits(40):010x}.{serial}@example.org"
            parent = recent[int(rand() * len(recent))] if recent and rand() < 0.55 else None
            references: tuple[str, ...] = ()
            if parent is None:
                subject = _TOPICS[int(rand() * topics)]
                head = f"Subject: {prefix}{subject}\n"
                quote = ""
            else:
                subject = parent.subject
                references = (*parent.references[-9:], parent.message_id)
                refs = "\n ".join(f"<{r}>" for r in references)
                head = (
                    f"Subject: Re: {prefix}{subject}\n"
                    f"In-Reply-To: <{parent.message_id}>\nReferences: {refs}\n"
                )
                quote = (
                    f"On {parent.date}, {_FIRST_NAMES[parent.sender]} wrote:\n"
                    f"{_QUOTED[parent.first]}\n\n"
                )
            r = rand()
            picks = [_PLAIN_PARAGRAPHS[int(rand() * plain)] for _ in range(2 + int(r * r * 7))]
            if rand() < 0.05:
                picks[int(rand() * len(picks))] = _FROM_PARAGRAPHS[int(rand() * froms)]
            body = "\n\n".join([_PARAGRAPHS[i] for i in picks])
            text = (
                f"From: {_FROM_HEADERS[sender]}\nTo: {list_address}\n{head}"
                f"Date: {date}\nMessage-ID: <{message_id}>\nMIME-Version: 1.0\n"
                "Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: 8bit\n"
                f"List-Id: <{list_id}>\n\n{quote}{body}\n\n-- \n{_FIRST_NAMES[sender]}\n"
            )
            messages.append(text.encode("utf-8"))
            recent.append(_Sent(message_id, subject, references, sender, date, picks[0]))
            if len(recent) > 40:
                del recent[0]
        out[month] = messages
    return out


class Hostile(NamedTuple):
    """One broken message: `name` says what is wrong with `raw`."""

    name: str
    raw: bytes


HOSTILE_NAMES = (
    "no-message-id",
    "no-date",
    "garbage-date",
    "future-date",
    "latin1-no-charset",
    "bad-charset-word",
    "envelope-like-body",
    "nul-bytes",
    "long-header",
)


def hostile_messages(list_address: str, month: str) -> list[Hostile]:
    """One message per case real archives hold, in `HOSTILE_NAMES` order. Those with a
    date are dated inside `month`; all but ``no-message-id`` have a unique Message-ID.

    - ``no-message-id``: no Message-ID header at all (the store must key it by hash).
    - ``no-date``: no Date header.
    - ``garbage-date``: ``Date: sometime last tuesday, around noon`` (unparseable).
    - ``future-date``: dated in 2031, a sender's clock gone wrong.
    - ``latin1-no-charset``: 8-bit ISO-8859-1 bytes in From, Subject and body, and no
      Content-Type (so no charset) at all.
    - ``bad-charset-word``: RFC 2047 words with a misspelt charset (``=?uft-8?q?...?=``)
      in From and Subject.
    - ``envelope-like-body``: a body line ``From me at home Mon Jan  1 00:00:00 2024``
      that reads like an mbox envelope but is not preceded by a blank line (pipermail
      stores it unescaped; a strict splitter must not cut there).
    - ``nul-bytes``: NUL bytes inside the body.
    - ``long-header``: a ``References`` header of about 16 KB on one unfolded line.
    """
    start, _end = _month_range(month)
    date = "Date: " + _rfc5322_date(start + 2 * 86400 + 3600, 0, "+0000")
    tag = month.replace("-", "")
    to = f"To: {list_address}"
    plain = "Content-Type: text/plain; charset=utf-8"
    mallory = "From: Mallory <mallory@example.com>"

    def msg(name: str, *headers: str, body: str, message_id: bool = True) -> bytes:
        # Text is encoded as Latin-1 so that "\xe9" stays one 8-bit byte.
        mid = (f"Message-ID: <hostile.{name}.{tag}@example.org>",) if message_id else ()
        return "\n".join((*headers, *mid, "", body)).encode("latin-1")

    refs = " ".join(f"<ref{i:05d}.{tag}@example.org>" for i in range(520))
    cases = {
        "no-message-id": msg(
            "no-message-id",
            mallory, to, "Subject: No Message-ID here", date, plain,
            body="This message has no Message-ID header.\n",
            message_id=False,
        ),
        "no-date": msg(
            "no-date", mallory, to, "Subject: No date", plain,
            body="This message has no Date header.\n",
        ),
        "garbage-date": msg(
            "garbage-date",
            mallory, to, "Subject: Garbage date", "Date: sometime last tuesday, around noon",
            plain,
            body="The Date header cannot be parsed.\n",
        ),
        "future-date": msg(
            "future-date",
            mallory, to, "Subject: From the future", "Date: Wed, 15 Jan 2031 10:00:00 +0000",
            plain,
            body="The sender's clock is seven years fast.\n",
        ),
        "latin1-no-charset": msg(
            "latin1-no-charset",
            "From: Jos\xe9 Mar\xeda <jose@example.es>", to, "Subject: Caf\xe9 cr\xe8me", date,
            body="Un caf\xe9 cr\xe8me, s'il vous pla\xeet. Gr\xfc\xdfe!\n",
        ),
        "bad-charset-word": msg(
            "bad-charset-word",
            "From: =?uft-8?q?J=C3=B6rg_M=C3=BCller?= <joerg@example.de>", to,
            "Subject: =?uft-8?q?Gr=C3=BC=C3=9Fe?= from a misspelt charset", date, plain,
            body="The charset of the encoded words is misspelt.\n",
        ),
        "envelope-like-body": msg(
            "envelope-like-body",
            mallory, to, "Subject: Envelope-like body line", date, plain,
            body="I wrote this on the train.\nFrom me at home Mon Jan  1 00:00:00 2024\n"
            "and this line follows it.\n",
        ),
        "nul-bytes": msg(
            "nul-bytes", mallory, to, "Subject: NUL bytes", date, plain,
            body="Before\x00the NUL\x00\x00 and after.\n",
        ),
        "long-header": msg(
            "long-header",
            mallory, to, "Subject: A very long header line", date, f"References: {refs}", plain,
            body="The References header above is one line of about 16 KB.\n",
        ),
    }  # fmt: skip
    return [Hostile(name, cases[name]) for name in HOSTILE_NAMES]


# --- the files archives keep messages in ------------------------------------------------

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
_MONTH_NUMBER = {name: i + 1 for i, name in enumerate(_MONTHS)}


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
    way (``From `` becomes ``>From ``, as Apache mod_mbox files and HyperKitty's exports
    are); ``rd=True`` the mboxrd way (one more ``>`` on every ``>*From `` line: Pony Mail).
    Append-only like `render_pipermail`."""
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


def _size(size: int) -> str:
    # Mailman 2's HyperArch.sizeof: decimal units, truncated.
    if size < 1000:
        return f" {size} bytes "
    if size < 1000000:
        return f" {size // 1000} KB "
    return f" {size // 1000000} MB "


def pipermail_index_html(list_name: str, months: Mapping[str, int]) -> str:
    """Mailman 2's archive index page: a table row per month, newest first, linking the
    month's thread/subject/author/date pages and its ``YYYY-Month.txt.gz`` (whose size in
    bytes is the value in `months`)."""
    title = html.escape(list_name.capitalize())
    rows = []
    for month in sorted(months, reverse=True):
        stem = pipermail_file(month)
        label = f"{MONTH_NAMES[int(month[5:7]) - 1]} {month[:4]}"
        rows.append(
            f"""	    <tr>
            <td>{label}:</td>
            <td>
              <A href="{stem}/thread.html">[ Thread ]</a>
              <A href="{stem}/subject.html">[ Subject ]</a>
              <A href="{stem}/author.html">[ Author ]</a>
              <A href="{stem}/date.html">[ Date ]</a>
            </td>
            <td><a href="{stem}.txt.gz">[ Gzip'd Text{_size(months[month])}]</a></td>
            </tr>
"""
        )
    table = (
        "\t<table border=3>\n\t  <tr><td>Archive</td>\n\t  <td>View by:</td>\n"
        f"\t  <td>Downloadable version</td></tr>\n\n{''.join(rows)}\t</table>\n"
        if rows
        else "\t<p>Currently, there are no archives. </p>\n"
    )
    return f"""<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 3.2//EN">
<HTML>
  <HEAD>
     <title>The {title} Archives</title>
     <META NAME="robots" CONTENT="noindex,follow">
     <META http-equiv="Content-Type" content="text/html; charset=us-ascii">
  </HEAD>
  <BODY BGCOLOR="#ffffff">
     <h1>The {title} Archives </h1>
     <p>
      You can get <a href="/mailman/listinfo/{html.escape(list_name)}">more information about
      this list</a>.
     </p>
{table}     </BODY>
     </HTML>
"""


def modmbox_index_html(list_name: str, months_with_counts: Mapping[str, int]) -> str:
    """Apache mod_mbox's list index: ``<table id="grid">`` holding a table per year, a
    row per month (newest first) with Thread/Date/Author links and the message count in
    ``<td class="msgcount">``. `list_name` is shown as the title (mod_mbox shows the
    list's address)."""
    title = html.escape(list_name)
    by_year: dict[str, list[str]] = {}
    for month in sorted(months_with_counts, reverse=True):
        key = month.replace("-", "")
        label = f"{_MONTHS[int(month[5:7]) - 1]} {month[:4]}"
        by_year.setdefault(month[:4], []).append(
            f'<tr><td class="date">{label}</td><td class="links"><span class="links" '
            f'id="{key}"><a href="{key}.mbox/thread">Thread</a> &middot; '
            f'<a href="{key}.mbox/date">Date</a> &middot; '
            f'<a href="{key}.mbox/author">Author</a></span></td>'
            f'<td class="msgcount">{months_with_counts[month]}</td></tr>'
        )
    years = "".join(
        f'<tr><td class="year"><table class="year">\n<thead><tr><th colspan="3">Year {year}'
        "</th></tr></thead>\n<tbody>\n" + "\n".join(rows) + "\n</tbody>\n</table></td></tr>\n"
        for year, rows in by_year.items()
    )
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Strict//EN"
 "http://www.w3.org/TR/xhtml1/DTD/xhtml1-strict.dtd">
<html xmlns="http://www.w3.org/1999/xhtml">
 <head>
  <title>{title} Archives</title>
  <link rel="stylesheet" href="/archives/style.css" type="text/css" media="screen" />
 </head>
 <body id="archives">
  <h1>Mailing list archives: {title}</h1>
  <h5><a href="/mod_mbox/" title="Back to the archives depot">Site index</a></h5>
  <table id="grid">
{years}  </table>
 </body>
</html>
"""
