"""MHonArc pages read back into mail, URLs and listings: the pure parts of the kind.

The pages here are cut from what Debian's mhonarc 2.6.19 wrote for the demo's messages
(test_mhonarc_real.py runs it); the harvest itself is tested there."""

from __future__ import annotations

import pytest

from thresher.archives.kinds.mhonarc import (
    MHonArc,
    html_text,
    index_numbers,
    mhonarc_list_url,
    mrot13,
    parse_periods,
    rebuild_message,
)
from thresher.archives.message import parse_message
from thresher.archives.normal import normal_digest
from thresher.errors import SourceError
from thresher.sources.types import detect_type

REPLY = b"""<!-- MHonArc v2.6.19+ -->
<!--X-Subject: Re: [dev] Logging format change -->
<!--X-From-R13: =?hgs&#45;8?d?E=Q3=P8era_Yw=Q3=O6etnneq?= &#60;fberaNrknzcyr.qx> -->
<!--X-Date: Sat, 6 Jan 2024 06:25:15 +0100 -->
<!--X-Message-Id: 6598e43b.2ddc549ad0.2@example.org -->
<!--X-Content-Type: text/plain -->
<!--X-Reference: 6593bd9e.adc4bbc5b3.1@example.org -->
<!--X-Head-End-->
<html><head><title>Re: [dev] Logging format change</title></head><body>
<!--X-Body-Begin-->
<!--X-TopPNI-->
[<a href="msg00000.html">Date Prev</a>][<a href="maillist.html#00001">Date Index</a>]
<!--X-TopPNI-End-->
<!--X-MsgBody-->
<!--X-Head-of-Message-->
<ul>
<li><em>To</em>: <a href="mailto:dev%40example.org">dev@example.org</a></li>
<li><em>Subject</em>: Re: [dev] Logging format change</li>
<li><em>From</em>: S&#xF8;ren Kj&#xE6;rgaard &lt;<a href="mailto:soren%40example.dk">\
soren@example.dk</a>&gt;</li>
<li><em>Date</em>: Sat, 6 Jan 2024 06:25:15 +0100</li>
<li><em>In-reply-to</em>: &lt;<a href="msg00000.html">6593bd9e.adc4bbc5b3.1@example.org</a>&gt;</li>
<li><em>List-id</em>: &lt;dev.example.org&gt;</li>
</ul>
<!--X-Head-of-Message-End-->
<!--X-Head-Body-Sep-Begin-->
<hr>
<!--X-Head-Body-Sep-End-->
<!--X-Body-of-Message-->
<pre>On Tue, 2 Jan 2024 02:39:10 -0500, Alice wrote:
&gt; The old behaviour was never documented, so I consider it a bug.

Danke f&#xFC;r den Hinweis &amp; bis morgen: <a href="https://example.org/x?a=1&amp;b=2">https://example.org/x?a=1&amp;b=2</a>

--\x20
S&#xF8;ren

</pre>
<!--X-Body-of-Message-End-->
<!--X-MsgBody-End-->
<!--X-Follow-Ups-->
<hr>
</body></html>
"""


def test_mrot13_is_mhonarcs_and_undone_exactly() -> None:
    # As MHonArc 2.6.19 wrote "Alice Johnson <alice@example.com>" into X-From-R13.
    assert mrot13(b"Alice Johnson <alice@example.com>") == b"Oyvpr Xbuafba <nyvprNrknzcyr.pbz>"
    every = bytes(range(256))
    assert mrot13(mrot13(every), undo=True) == every


def test_a_message_page_is_rebuilt_from_its_comments_its_fields_and_its_body() -> None:
    raw = rebuild_message(REPLY)
    assert raw is not None
    msg = parse_message(raw)
    assert msg.key == msg.message_id == "6598e43b.2ddc549ad0.2@example.org"
    assert msg.from_ == "Søren Kjærgaard <soren@example.dk>"  # its RFC 2047 words, decoded
    assert msg.subject == "Re: [dev] Logging format change"
    assert msg.date is not None and msg.date.isoformat() == "2024-01-06T05:25:15+00:00"
    assert msg.in_reply_to == "6593bd9e.adc4bbc5b3.1@example.org"
    assert msg.references == ()  # X-Reference held only the In-Reply-To id
    head, body = raw.split(b"\n\n", 1)
    assert b"List-id: <dev.example.org>" in head.split(b"\n")
    assert body.decode() == (
        "On Tue, 2 Jan 2024 02:39:10 -0500, Alice wrote:\n"
        "> The old behaviour was never documented, so I consider it a bug.\n\n"
        "Danke für den Hinweis & bis morgen: https://example.org/x?a=1&b=2\n\n"
        "-- \nSøren\n"
    )
    # The same page read twice is the same message.
    assert normal_digest(raw) == normal_digest(rebuild_message(REPLY) or b"")


def test_an_id_mhonarc_made_up_is_dropped_and_the_message_keyed_by_its_normal_form() -> None:
    page = REPLY.replace(
        b"6598e43b.2ddc549ad0.2@example.org -->",
        b"daf8acb785073e07791bb6403f0a6e1d@NO&#45;ID&#45;FOUND.mhonarc.org -->",
    )
    raw = rebuild_message(page)
    assert raw is not None and b"NO-ID-FOUND" not in raw
    assert parse_message(raw).key.startswith("sha256:")


def test_a_page_without_header_comments_is_rebuilt_from_the_fields_it_shows() -> None:
    page = REPLY[REPLY.index(b"<!--X-Head-End-->") + len(b"<!--X-Head-End-->") :]
    msg = parse_message(rebuild_message(page) or b"")
    assert msg.from_addr == "soren@example.dk" and (msg.subject or "").startswith("Re: [dev]")
    assert msg.message_id is None  # MHonArc does not show it by default


def test_a_page_that_is_not_a_message_is_none() -> None:
    assert rebuild_message(b"<html><body>Mail Index</body></html>") is None


def test_html_parts_and_line_breaks_become_text() -> None:
    assert (
        html_text("<p>One <b>bold</b>\nline</p><p>Two<br>three</p>")
        == "One bold line\n\nTwo\nthree\n"
    )
    assert html_text("<pre>  keep   spaces \n\n\n\nand &lt;tags&gt;\n\n</pre>") == (
        "  keep   spaces \n\n\n\nand <tags>\n"
    )
    assert html_text("<script>alert(1)</script><!-- x -->") == ""


@pytest.mark.parametrize(
    ("pasted", "kept"),
    [
        (
            "https://lists.debian.org/debian-devel/2024/01/",
            "https://lists.debian.org/debian-devel/",
        ),
        (
            "https://lists.debian.org/debian-devel/2024/01/msg00113.html#top",
            "https://lists.debian.org/debian-devel/",
        ),
        ("https://lists.debian.org/debian-devel/", "https://lists.debian.org/debian-devel/"),
        ("https://x.example/arch/threads.html", "https://x.example/arch/maillist.html"),
        ("https://x.example/arch/msg00012.html", "https://x.example/arch/maillist.html"),
        ("https://x.example/arch/maillist.html", "https://x.example/arch/maillist.html"),
    ],
)
def test_the_url_kept_is_the_list_page_or_the_archives_date_index(pasted: str, kept: str) -> None:
    assert mhonarc_list_url(pasted) == kept


def test_mhonarc_urls_are_detected_by_their_shape() -> None:
    for url in (
        "https://lists.debian.org/debian-devel/",
        "https://lists.example.org/lists/dev/2024/01/",
        "https://lists.example.org/lists/dev/2024/01/msg00003.html",
        "https://archive.example.org/dev/maillist.html",
    ):
        assert detect_type(url).name == "mhonarc", url
    kind = MHonArc()
    for url in ("https://example.org/2024/13/", "https://lists.debian.org/", "ftp://x/2024/01/"):
        assert not kind.detect(url), url
    with pytest.raises(SourceError):
        kind.check_url("file:///srv/archive/maillist.html")


def test_a_list_page_gives_its_own_periods_and_an_index_its_messages() -> None:
    page = b"""<ul><li>2024: <a href="2024/01/threads.html">Jan</a>
    <a href="2024/01/maillist.html">date</a> <a href='2024/02/'>Feb</a> <a href="2024/13/">bad</a>
    <a href="../debian-user/2024/03/threads.html">another list</a></ul>"""
    base = "https://lists.debian.org/debian-devel/"
    assert parse_periods(page, base) == {
        "2024-01": base + "2024/01/",
        "2024-02": base + "2024/02/",
    }
    index = b'<a name="00001" href="msg00001.html">x</a><a href=msg00010.html>y</a>'
    assert index_numbers(index, base + "2024/01/maillist.html") == {
        1: base + "2024/01/msg00001.html",
        10: base + "2024/01/msg00010.html",
    }
