"""pywb replays what the writer wrote, through the writer's own CDXJ: payloads come back byte
for byte, revisits (identical payloads and 304s) resolve to their originals, pywb's
indexer writes the same index as ours, and our SURT keys are the ones the ``surt``
package computes. pywb runs from the virtualenv scripts/test makes (see tests/wayback.py).
"""

from __future__ import annotations

import gzip
import json
import random
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from warc_samples import capture_of, gzip_encoded, make_exchange, not_modified, write

from thresher.store.cdxj import cdxj_path, parse_cdxj_line, surt
from thresher.store.warc import WarcWriter
from thresher.store.warcrecord import Capture
from wayback import get, wayback

pytestmark = pytest.mark.slow

COLLECTION = "thresher"


@dataclass(frozen=True)
class Replayed:
    url: str
    timestamp: str
    payload: bytes  # what replay must return


@dataclass(frozen=True)
class Archive:
    directory: Path
    base: str  # http://127.0.0.1:PORT/COLLECTION
    captures: list[Replayed]


def stamp(t: float) -> str:
    return time.strftime("%Y%m%d%H%M%S", time.gmtime(t))


@pytest.fixture(scope="module")
def archive(pywb_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Archive]:
    """A few captures across several WARC files, served by ``wayback`` on a free port."""
    root = tmp_path_factory.mktemp("pywb")
    warcs = root / "warcs"
    plain = make_exchange(0)
    encoded = gzip_encoded(make_exchange(1))
    # A URL whose SURT key drops "www", lowercases and sorts the query.
    odd = replace(make_exchange(2), url="https://www.Example.ORG/Search/?q=B%20c&a=1")
    elsewhere = make_exchange(3)  # another URL with plain's payload: a revisit
    later = replace(make_exchange(4), url=plain.url)  # plain again, unchanged: a revisit
    unmodified = not_modified(plain, 5)  # plain asked for again, answered 304
    # odd, answered 304, by a store that knew only its URL and digest (before migration 14)
    odd_unmodified = not_modified(odd, 6)
    # A tiny max_size puts every exchange in a file of its own: replay must follow the
    # revisits across files.
    with WarcWriter(warcs, max_size=1) as writer:
        first = write(writer, plain)
        write(writer, encoded)
        odd_first = write(writer, odd)
        for ex in (elsewhere, later):
            write(writer, ex, payload=plain.payload, revisit_of=capture_of(plain, first))
        write(writer, unmodified, not_modified_of=capture_of(plain, first))
        write(
            writer,
            odd_unmodified,
            not_modified_of=Capture(odd.url, digest=odd_first.payload_digest),
        )
    captures = [
        Replayed(plain.url, stamp(plain.fetched_at), plain.payload),
        Replayed(encoded.url, stamp(encoded.fetched_at), encoded.payload),
        Replayed(odd.url, stamp(odd.fetched_at), odd.payload),
        Replayed(elsewhere.url, stamp(elsewhere.fetched_at), plain.payload),
        Replayed(later.url, stamp(later.fetched_at), plain.payload),
        Replayed(unmodified.url, stamp(unmodified.fetched_at), plain.payload),
        Replayed(odd.url, stamp(odd_unmodified.fetched_at), odd.payload),
    ]
    (root / "config.yaml").write_text(
        json.dumps(  # YAML is a superset of JSON
            {"collections": {COLLECTION: {"index_paths": str(warcs), "archive_paths": f"{warcs}/"}}}
        )
    )
    with wayback(pywb_bin, root) as base:
        yield Archive(warcs, f"{base}/{COLLECTION}", captures)


def test_replay_returns_each_payload_as_stored(archive: Archive) -> None:
    assert len(list(archive.directory.glob("*.warc.gz"))) == len(archive.captures)
    for capture in archive.captures:
        url = f"{archive.base}/{capture.timestamp}id_/{capture.url}"
        reply = get(url, **{"Accept-Encoding": "gzip"})
        assert reply.status == 200, (capture, reply.body[:500])
        assert reply.body == capture.payload, capture.url
    # A client that does not take gzip gets the gzip-encoded capture decoded.
    encoded = archive.captures[1]
    reply = get(f"{archive.base}/{encoded.timestamp}id_/{encoded.url}")
    assert (reply.status, reply.body) == (200, gzip.decompress(encoded.payload))


def test_the_latest_capture_of_an_unmodified_page_replays_the_original(archive: Archive) -> None:
    """The 304 is the newest capture of its URL: replay serves the page it confirms, at
    the 304's date."""
    plain, unmodified = archive.captures[0], archive.captures[5]
    reply = get(f"{archive.base}/id_/{plain.url}")
    assert (reply.status, reply.body) == (200, plain.payload)
    when = time.strptime(reply.headers["memento-datetime"], "%a, %d %b %Y %H:%M:%S GMT")
    assert time.strftime("%Y%m%d%H%M%S", when) == unmodified.timestamp


def test_pywb_finds_our_index_lines(archive: Archive) -> None:
    reply = get(f"{archive.base}/cdx?url={archive.captures[0].url}&output=json")
    assert reply.status == 200
    found = [json.loads(line) for line in reply.body.decode().splitlines()]
    assert [(c["timestamp"], c["mime"]) for c in found] == [
        (archive.captures[0].timestamp, "text/html"),
        (archive.captures[4].timestamp, "warc/revisit"),
        (archive.captures[5].timestamp, "warc/revisit"),
    ]


def test_pywb_indexer_writes_the_same_index(
    archive: Archive, pywb_bin: Path, tmp_path: Path
) -> None:
    warcs = sorted(archive.directory.glob("*.warc.gz"))
    # One run for all files; it writes NAME.cdx for each NAME.warc.gz into tmp_path.
    subprocess.run(
        [pywb_bin / "cdx-indexer", "-j", "-s", "-o", tmp_path, *warcs],
        check=True,
        capture_output=True,
    )
    for warc in warcs:
        pywb_index = tmp_path / warc.name.replace(".warc.gz", ".cdx")
        theirs = [parse_cdxj_line(x) for x in pywb_index.read_text().splitlines()]
        ours = [parse_cdxj_line(x) for x in cdxj_path(warc).read_text().splitlines()]
        assert theirs and ours == theirs


def awkward_urls(n: int) -> list[str]:
    """URLs that exercise every rule of the SURT canonicalisation."""
    rnd = random.Random(7)
    schemes = ["http://", "https://", "HTTP://", "", "http://https://", "ftp://"]
    users = ["", "user@", "u:p@"]
    hosts = [
        "example.com", "www.example.com", "WWW2.Example.COM", "www.", "127.0.0.1", "2130706433",
        "0177.0.0.1", "1.2.3", "[::1]", "[2001:DB8::1]", "xn--bcher-kva.de", "bücher.de",
        "a..b.com", ".example.com.", "ex%41mple.com", "example.com:", "wwwexample.com",
        "www1.www.example.org", "999.1.1.1", "08.1.1.1",
    ]  # fmt: skip
    ports = ["", ":80", ":443", ":8080", ":0", ":"]
    paths = [
        "", "/", "/a/b/", "/A/B/c.html", "/a/./b/../c", "/../a", "//a//b//", "/%7Euser/",
        "/a%2520b", "/ä/ö", "/a b", "/(S(abcdefghijklmnopqrstuvwx))/page.aspx",
        "/(abcdefghijklmnopqrstuvwx)/x.aspx", "/a/%2F/b", "/index.html;jsessionid=1", "/%",
        "/%zz",
    ]  # fmt: skip
    queries = [
        "", "?", "?b=2&a=1", "?B=2&a=1&a", "?a=%20b",
        "?jsessionid=0123456789abcdef0123456789ABCDEF",
        "?x=1&phpsessid=0123456789abcdef0123456789abcdef&y=2", "?cfid=1&cftoken=2&z", "?q=ü",
        "?a=1&a=", "?sid=0123456789abcdef0123456789abcdef", "?%41=1",
        "?ASPSESSIONIDabcdefgh=ABCDEFGHIJKLMNOPQRSTUVWX",
    ]  # fmt: skip
    fragments = ["", "#x", "#"]
    urls = [
        "".join(
            rnd.choice(part) for part in (schemes, users, hosts, ports, paths, queries, fragments)
        )
        for _ in range(n)
    ]
    return [*urls, "  http://example.com/\t", "http:////www.example.com/a", "dns:example.com"]


SURT_REFERENCE = """
import json, sys, surt
out = []
for url in json.load(sys.stdin):
    try:
        out.append(surt.surt(url))
    except Exception as exc:
        out.append("error: " + type(exc).__name__)
json.dump(out, sys.stdout)
"""


def test_surt_keys_equal_the_surt_package(pywb_bin: Path) -> None:
    urls = awkward_urls(600)
    reference = subprocess.run(
        [pywb_bin / "python", "-W", "ignore", "-c", SURT_REFERENCE],
        input=json.dumps(urls),
        capture_output=True,
        text=True,
        check=True,
    )
    expected = json.loads(reference.stdout)

    def ours(url: str) -> str:
        try:
            return surt(url)
        except ValueError:
            return "error: ValueError"

    mismatches = [(u, e, ours(u)) for u, e in zip(urls, expected, strict=True) if ours(u) != e]
    assert mismatches == []
