"""pywb replays what the writer wrote, through the writer's own CDXJ: payloads come back byte
for byte, revisits resolve to their originals, pywb's indexer writes the same index as ours,
and our SURT keys are the ones the ``surt`` package computes.

pywb pins old releases of several packages (werkzeug, redis, webassets…), so it runs in a
virtualenv of its own, built once with pip and kept under ``~/.cache/thresher-tests``
(``$XDG_CACHE_HOME`` if set): the first run takes about a minute, later ones a few seconds.
"""

from __future__ import annotations

import fcntl
import gzip
import importlib.util
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from warc_samples import gzip_encoded, make_exchange, write

from thresher.store.cdxj import cdxj_path, parse_cdxj_line, surt
from thresher.store.warc import WarcWriter

pytestmark = pytest.mark.slow

PYWB = "pywb==2.10.0"
COLLECTION = "thresher"


@pytest.fixture(scope="session")
def pywb_venv() -> Path:
    """A virtualenv with pywb, built on first use and reused across test runs."""
    if importlib.util.find_spec("ensurepip") is None:
        pytest.skip("pip is unavailable: python3 -m venv cannot install it (python3-venv)")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "thresher-tests"
    cache.mkdir(parents=True, exist_ok=True)
    v = sys.version_info
    venv = cache / f"{PYWB.replace('==', '-')}-py{v.major}.{v.minor}"
    done = venv / "installed"
    # Test runs on one machine share the cache: one builds, the others wait for it.
    with open(cache / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(venv, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            pip = subprocess.run(
                [
                    venv / "bin" / "python",
                    "-m",
                    "pip",
                    "install",
                    "-q",
                    "--disable-pip-version-check",
                    PYWB,
                ],
                capture_output=True,
                text=True,
                timeout=900,
            )
            if pip.returncode != 0:
                pytest.fail(f"pip install {PYWB} failed:\n{pip.stdout[-2000:]}{pip.stderr[-4000:]}")
            done.write_text(PYWB + "\n")
    return venv


@dataclass(frozen=True)
class Capture:
    url: str
    timestamp: str
    payload: bytes  # what replay must return


@dataclass(frozen=True)
class Archive:
    directory: Path
    base: str  # http://127.0.0.1:PORT/COLLECTION
    captures: list[Capture]


def stamp(t: float) -> str:
    return time.strftime("%Y%m%d%H%M%S", time.gmtime(t))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str, **headers: str) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status), bytes(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@pytest.fixture(scope="module")
def archive(pywb_venv: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Archive]:
    """A few captures across several WARC files, served by ``wayback`` on a free port."""
    root = tmp_path_factory.mktemp("pywb")
    warcs = root / "warcs"
    plain = make_exchange(0)
    encoded = gzip_encoded(make_exchange(1))
    # A URL whose SURT key drops "www", lowercases and sorts the query.
    odd = replace(make_exchange(2), url="https://www.Example.ORG/Search/?q=B%20c&a=1")
    elsewhere = make_exchange(3)  # another URL with plain's payload: a revisit
    later = replace(make_exchange(4), url=plain.url)  # plain again, unchanged: a revisit
    # A tiny max_size puts every exchange in a file of its own: replay must follow the
    # revisits across files.
    with WarcWriter(warcs, max_size=1) as writer:
        for ex in (plain, encoded, odd):
            write(writer, ex)
        for ex in (elsewhere, later):
            write(writer, ex, payload=plain.payload, revisit_of=(plain.url, plain.fetched_at))
    captures = [
        Capture(plain.url, stamp(plain.fetched_at), plain.payload),
        Capture(encoded.url, stamp(encoded.fetched_at), encoded.payload),
        Capture(odd.url, stamp(odd.fetched_at), odd.payload),
        Capture(elsewhere.url, stamp(elsewhere.fetched_at), plain.payload),
        Capture(later.url, stamp(later.fetched_at), plain.payload),
    ]
    (root / "config.yaml").write_text(
        json.dumps(  # YAML is a superset of JSON
            {"collections": {COLLECTION: {"index_paths": str(warcs), "archive_paths": f"{warcs}/"}}}
        )
    )
    port = free_port()
    with open(root / "wayback.log", "wb") as log:
        server = subprocess.Popen(
            [pywb_venv / "bin" / "wayback", "-b", "127.0.0.1", "-p", str(port)],
            cwd=root,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}/{COLLECTION}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if get(f"{base}/cdx?url={plain.url}")[0] == 200:
                    break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail("wayback did not start:\n" + (root / "wayback.log").read_text())
            time.sleep(0.2)
        yield Archive(warcs, base, captures)
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def test_replay_returns_each_payload_as_stored(archive: Archive) -> None:
    assert len(list(archive.directory.glob("*.warc.gz"))) == len(archive.captures)
    for capture in archive.captures:
        url = f"{archive.base}/{capture.timestamp}id_/{capture.url}"
        status, body = get(url, **{"Accept-Encoding": "gzip"})
        assert status == 200, (capture, body[:500])
        assert body == capture.payload, capture.url
    # A client that does not take gzip gets the gzip-encoded capture decoded.
    encoded = archive.captures[1]
    status, body = get(f"{archive.base}/{encoded.timestamp}id_/{encoded.url}")
    assert (status, body) == (200, gzip.decompress(encoded.payload))


def test_pywb_finds_our_index_lines(archive: Archive) -> None:
    status, body = get(f"{archive.base}/cdx?url={archive.captures[0].url}&output=json")
    assert status == 200
    found = [json.loads(line) for line in body.decode().splitlines()]
    assert [(c["timestamp"], c["mime"]) for c in found] == [
        (archive.captures[0].timestamp, "text/html"),
        (archive.captures[4].timestamp, "warc/revisit"),
    ]


def test_pywb_indexer_writes_the_same_index(
    archive: Archive, pywb_venv: Path, tmp_path: Path
) -> None:
    warcs = sorted(archive.directory.glob("*.warc.gz"))
    # One run for all files; it writes NAME.cdx for each NAME.warc.gz into tmp_path.
    subprocess.run(
        [pywb_venv / "bin" / "cdx-indexer", "-j", "-s", "-o", tmp_path, *warcs],
        check=True,
        capture_output=True,
    )
    for warc in warcs:
        pywb_index = tmp_path / warc.name.replace(".warc.gz", ".cdx")
        theirs = [parse_cdxj_line(x) for x in pywb_index.read_text().splitlines()]
        ours = [parse_cdxj_line(x) for x in cdxj_path(warc).read_text().splitlines()]
        for _, _, fields in ours:
            if fields["mime"] == "warc/revisit":
                # pywb's indexer leaves out a revisit's status; webrecorder's cdxj-indexer
                # and we keep the status of the HTTP head that a revisit record holds.
                del fields["status"]
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


def test_surt_keys_equal_the_surt_package(pywb_venv: Path) -> None:
    urls = awkward_urls(600)
    reference = subprocess.run(
        [pywb_venv / "bin" / "python", "-W", "ignore", "-c", SURT_REFERENCE],
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
