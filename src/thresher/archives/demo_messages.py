"""Generated list mail for the demo archive: realistic threads. Pure functions, no I/O:
the demo server (`thresher.archives.demo`) serves them and the mail benchmark writes them
to disk.

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

The broken mail real archives hold is `demo_hostile`'s, the files archives keep mail
in are `demo_mbox`'s and their index pages `demo_indexes`'.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import NamedTuple

__all__ = ["MONTHS", "generate_messages", "month_range", "rfc5322_date"]

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
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


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


def month_range(month: str) -> tuple[int, int]:
    year, mon = int(month[:4]), int(month[5:7])
    if len(month) != 7 or month[4] != "-" or not 1 <= mon <= 12:
        raise ValueError(f"not a month (YYYY-MM): {month!r}")
    start = datetime(year, mon, 1, tzinfo=UTC)
    end = datetime(year + mon // 12, mon % 12 + 1, 1, tzinfo=UTC)
    return int(start.timestamp()), int(end.timestamp())


def rfc5322_date(ts: int, offset: int, zone: str) -> str:
    t = time.gmtime(ts + offset)
    return (
        f"{_DAYS[t.tm_wday]}, {t.tm_mday} {MONTHS[t.tm_mon - 1]} {t.tm_year} "
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
        start, end = month_range(month)
        lo, hi = start + _MARGIN, max(start + _MARGIN + 1, end - _MARGIN)
        stamps = sorted(int(lo + rand() * (hi - lo)) for _ in range(per_month))
        messages: list[bytes] = []
        for ts in stamps:
            serial += 1
            sender = int(rand() * people)
            date = rfc5322_date(ts, _OFFSETS[sender], _ZONES[sender])
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
