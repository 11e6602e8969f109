"""Broken mail for the demo archive: `hostile_messages` adds, one message each, the
cases an archive harvester must survive (see its docstring for the names). Pure
functions, no I/O, the same bytes on every run, like the generated mail
(`demo_messages`).
"""

from __future__ import annotations

from typing import NamedTuple

from .demo_messages import month_range, rfc5322_date

__all__ = ["HOSTILE_NAMES", "Hostile", "hostile_messages"]


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
    start, _end = month_range(month)
    date = "Date: " + rfc5322_date(start + 2 * 86400 + 3600, 0, "+0000")
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
