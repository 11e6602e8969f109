"""A site crawled three times with `thresher crawl`, then replayed through pywb by following
docs/crawling.md: an unchanged page's newest capture (a 304, archived as a revisit) answers
200 with the page, a changed page the new body, and a URL the server answers 304 unasked
(its first capture a redirect or a 404) the redirect or the 404 again. Both stores: the
capture a 304 confirms is kept in the store between runs."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from crawlsite import Page, SiteServer
from warcio.archiveiterator import ArchiveIterator  # type: ignore[import-untyped]

from cli_proc import Home
from conftest import new_pg_database
from thresher.store.cdxj import parse_cdxj_line
from thresher.store.warcrecord import NOT_MODIFIED_PROFILE, REVISIT_PROFILE
from wayback import get, wayback

pytestmark = pytest.mark.slow

DOC = Path(__file__).parents[2] / "docs" / "crawling.md"


def doc_steps() -> list[list[str]]:
    """The shell commands of each console block of docs/crawling.md's replay section (a
    command's continuation lines, a here-document's, joined to it)."""
    section = DOC.read_text().split("\n## Replaying with pywb\n", 1)[1].split("\n## ", 1)[0]
    blocks = []
    for block in re.findall(r"```console\n(.*?)```", section, re.S):
        commands: list[str] = []
        for line in block.splitlines():
            if line.startswith("$ "):
                commands.append(line[2:])
            else:
                commands[-1] += "\n" + line
        blocks.append(commands)
    return blocks


def follow(commands: list[str], folder: Path, pywb_bin: Path, warc_dir: str) -> None:
    """Run the documented commands in `folder`, up to `wayback -p 8080`, which the caller
    starts itself (on a free port)."""
    assert commands[-1] == "wayback -p 8080"
    folder.mkdir()
    subprocess.run(
        ["bash", "-euc", "\n".join(commands[:-1])],
        cwd=folder,
        env={"PATH": f"{pywb_bin}:/usr/bin:/bin", "WARC_DIR": warc_dir, "HOME": str(folder)},
        check=True,
        capture_output=True,
    )


def next_second() -> None:
    """Wait for the next second: replay tools tell captures apart by the second."""
    time.sleep(1 - time.time() % 1 + 0.01)


def records(warc_dir: Path, url: str) -> list[Any]:
    """(type, WARC headers, HTTP head or None) of the captures of `url`, oldest first."""
    found = []
    for path in sorted(warc_dir.glob("*.warc.gz")):
        with path.open("rb") as f:
            for rec in ArchiveIterator(f):
                if rec.rec_type in ("response", "revisit") and (
                    rec.rec_headers.get_header("WARC-Target-URI") == url
                ):
                    head = rec.http_headers.get_statuscode() if rec.http_headers else None
                    found.append((rec.rec_type, dict(rec.rec_headers.headers), head))
    return sorted(found, key=lambda r: r[1]["WARC-Date"])


def stamp(warc_date: str) -> str:
    return re.sub(r"\D", "", warc_date)[:14]


def memento_stamp(reply_headers: dict[str, str] | Any) -> str:
    when = time.strptime(reply_headers["memento-datetime"], "%a, %d %b %Y %H:%M:%S GMT")
    return time.strftime("%Y%m%d%H%M%S", when)


def test_a_recrawl_replays_like_the_site(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, pywb_bin: Path
) -> None:
    db = new_pg_database(request.getfixturevalue("pg_admin_url")) if backend == "postgres" else None
    home = Home(tmp_path / "home", db)
    install, by_config, by_manager = doc_steps()
    assert install == ["python3 -m venv ~/pywb && ~/pywb/bin/pip install pywb"]
    with SiteServer(hosts=1) as site:
        b = site.base(0)
        seed, same, changed, copy, moved, gone = (
            f"{b}/",
            f"{b}/same.html",
            f"{b}/changed.html",
            f"{b}/copy.html",
            f"{b}/moved",
            f"{b}/gone",
        )
        same_body = b"<html><body><h1>The same every time</h1></body></html>"
        site.pages[seed] = Page(
            body=f'<a href="{same}">s</a><a href="{changed}">c</a>'
            f'<a href="{moved}">m</a><a href="{gone}">g</a>'.encode()
        )
        site.pages[same] = Page(body=same_body)
        site.pages[changed] = Page(body=b"<html><body>first version</body></html>")
        site.pages[moved] = Page(status=302, headers={"Location": same})
        site.pages[gone] = Page(status=404, body=b"gone for good", content_type="text/plain")

        def crawl() -> dict[str, Any]:
            next_second()
            proc = home.run("crawl", seed, "--allow-private", "--delay", "0", "--json")
            summary: dict[str, Any] = json.loads(proc.stdout)
            assert summary["status"] == "ok", summary
            return summary

        first = crawl()
        warc_dir = Path(first["warc_dir"])
        # Replay as docs/crawling.md says, from now on: later runs show up as they finish.
        follow(by_config, tmp_path / "replay", pywb_bin, str(warc_dir))
        with wayback(pywb_bin, tmp_path / "replay") as base:
            coll = f"{base}/mysite"
            newest = {u: get(f"{coll}/id_/{u}") for u in (same, changed, moved, gone)}
            assert (newest[same].status, newest[same].body) == (200, same_body)
            assert newest[changed].body == b"<html><body>first version</body></html>"
            assert newest[moved].status == 302
            assert newest[moved].headers["location"] == same  # id_: as archived
            assert (newest[gone].status, newest[gone].body) == (404, b"gone for good")

            # The second run: a page changed (linking a new page, a copy of another);
            # the server answers 304 to the redirect and the 404, though not asked to.
            site.pages[changed] = Page(
                body=f'<html><body>second version <a href="{copy}">c</a></body></html>'.encode()
            )
            site.pages[copy] = Page(body=same_body)
            site.pages[moved] = site.pages[gone] = Page(status=304)
            site.hits.clear()
            second = crawl()
            asked = {h.url: h.headers for h in site.hits}
            assert "if-none-match" in asked[same] and "if-none-match" in asked[changed]
            assert "if-none-match" not in asked[moved] and "if-none-match" not in asked[gone]
            assert (second["not_modified"], second["pages"], second["duplicates"]) == (
                4,  # seed, same, moved, gone
                2,  # changed, copy
                1,  # copy
            )
            third = crawl()  # nothing changed: 304s all round
            assert (third["not_modified"], third["pages"]) == (6, 0)

            # What the WARC files say: each revisit names the capture with the payload.
            first_same, *revisits = records(warc_dir, same)
            assert first_same[0] == "response" and len(revisits) == 2
            for kind, headers, head in revisits:
                assert (kind, headers["WARC-Profile"], head) == (
                    "revisit",
                    NOT_MODIFIED_PROFILE,
                    None,  # no block: pywb would serve a 304 head as it is
                )
                assert headers["Content-Length"] == "0"
                original = first_same[1]
                assert headers["WARC-Refers-To"] == original["WARC-Record-ID"]
                assert headers["WARC-Refers-To-Target-URI"] == same
                assert headers["WARC-Refers-To-Date"] == original["WARC-Date"]
                assert headers["WARC-Payload-Digest"] == original["WARC-Payload-Digest"]
            [copied, copy_again] = records(warc_dir, copy)
            assert copied[1]["WARC-Profile"] == REVISIT_PROFILE
            assert copy_again[1]["WARC-Profile"] == NOT_MODIFIED_PROFILE
            for _, headers, _ in (copied, copy_again):
                assert headers["WARC-Refers-To"] == first_same[1]["WARC-Record-ID"]
                assert headers["WARC-Refers-To-Target-URI"] == same
            changes = records(warc_dir, changed)
            assert [r[0] for r in changes] == ["response", "response", "revisit"]
            assert changes[2][1]["WARC-Refers-To"] == changes[1][1]["WARC-Record-ID"]
            for url in (moved, gone):
                _, *unasked = records(warc_dir, url)
                assert [h["WARC-Refers-To-Target-URI"] for _, h, _ in unasked] == [url, url]
                assert not any("WARC-Refers-To-Date" in h for _, h, _ in unasked)

            # What replay shows: every capture of the unchanged page is the page, the
            # newest at the third run's date.
            for _, headers, _ in [first_same, *revisits]:
                reply = get(f"{coll}/{stamp(headers['WARC-Date'])}id_/{same}")
                assert (reply.status, reply.body) == (200, same_body)
                assert memento_stamp(reply.headers) == stamp(headers["WARC-Date"])
            reply = get(f"{coll}/id_/{same}")
            assert (reply.status, reply.body) == (200, same_body)
            assert memento_stamp(reply.headers) == stamp(revisits[-1][1]["WARC-Date"])
            cdx = get(f"{coll}/cdx?url={same}&output=json").body.decode().splitlines()
            assert [json.loads(x)["mime"] for x in cdx] == ["text/html", *["warc/revisit"] * 2]
            # The changed page: the new body now, the old one at the first run's date.
            reply = get(f"{coll}/id_/{changed}")
            assert (reply.status, reply.body) == (200, site.pages[changed].body)
            reply = get(f"{coll}/{stamp(changes[0][1]['WARC-Date'])}id_/{changed}")
            assert reply.body == b"<html><body>first version</body></html>"
            reply = get(f"{coll}/id_/{copy}")
            assert (reply.status, reply.body) == (200, same_body)
            # 304s nobody asked for: the redirect and the 404 again, never an empty 304.
            reply = get(f"{coll}/id_/{moved}")
            assert (reply.status, reply.headers["location"]) == (302, same)
            reply = get(f"{coll}/id_/{gone}")
            assert (reply.status, reply.body) == (404, b"gone for good")

    # The other way docs/crawling.md gives: pywb's own collection, indexed by pywb, which
    # writes the lines Thresher wrote. (The files are the same whatever the store: once.)
    if backend != "sqlite":
        return
    follow(by_manager, tmp_path / "managed", pywb_bin, str(warc_dir))
    managed = tmp_path / "managed" / "collections" / "mysite"
    index = (managed / "indexes" / "index.cdxj").read_text().splitlines()
    theirs = [parse_cdxj_line(x) for x in index]
    ours = sorted(
        line for path in warc_dir.glob("*.cdxj") for line in path.read_text().splitlines()
    )
    assert theirs == [parse_cdxj_line(x) for x in ours]
    with wayback(pywb_bin, tmp_path / "managed") as base:
        reply = get(f"{base}/mysite/id_/{same}")
        assert (reply.status, reply.body) == (200, same_body)
