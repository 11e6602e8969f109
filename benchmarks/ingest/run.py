"""Bulk ingest throughput: `thresher ingest run` on 20 000 requests against loopback.

Builds a deterministic synthetic repository site (fixed seed: by default 20 000 ingest
requests over 20 host addresses 127.0.0.1 … 127.0.0.20 on one port: direct PDFs, landing
pages with `citation_pdf_url`, two-hop landing → viewer → PDF, pages without a link, 404s,
nginx 302s, HTML served at `.pdf` URLs, copies of another request's PDF), serves it with a
private nginx, writes the requests as a JSON Lines dump and then:

1. loads it with `thresher ingest load` and runs `thresher ingest run --allow-private
   --delay 0 -w N --shards 2 --json` in a fresh home, on SQLite and on PostgreSQL (a private
   throwaway server, as the tests start it), measuring wall time, results/s, CPU and
   peak RSS, and checks every result's status (and the SHA-1 of its file) against the
   site's known mix, and that file_meta holds exactly the site's distinct bodies;
2. kill test: a fresh home, `ingest run` killed with SIGKILL once about half the results
   are written, the same command again; then exactly one result per URL, every status as
   in the clean run, the WARC files hold each body once (= file_meta), and how many URLs
   nginx served twice because they were in flight at the kill;
3. wget2 fetching the same base URLs (`-i`, as many threads as Thresher has workers), as
   a reference for the raw fetching: it follows redirects but neither landing pages nor
   sniffs.

    python3 benchmarks/ingest/run.py                     # 20 000 requests, -w 16
    python3 benchmarks/ingest/run.py --requests 2000     # a quick run
    python3 benchmarks/ingest/run.py --no-pg --only sqlite,kill

Needs nginx and wget2 (Debian packages `nginx`, `wget2`); PostgreSQL rows need the
server binaries (`postgresql`) or THRESHER_BENCH_PG. The exit status is 1 when a check
fails. The results also go to benchmarks/ingest/results.json.
"""

from __future__ import annotations

import argparse
import base64
import collections
import contextlib
import datetime
import functools
import hashlib
import json
import math
import multiprocessing
import os
import platform
import random
import resource
import shlex
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

# The modules shared by the benchmark scripts, from the folder above.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchlib import (
    THIS,
    BenchError,
    Build,
    baseline,
    bench_run,
    child_env,
    cpu_model,
    find_program,
    free_port,
    measure_tree,
    nginx_process,
    precompile,
    python_build,
    thresher_cmd,
    thresher_folder,
    thresher_version,
    verdict,
)
from benchpg import Postgres, postgres, tests_pg
from procstats import tree_cpu_seconds

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
RESULTS = HERE / "results.json"
HOSTS = 20
SEED = 20261202  # of the site's random generator: the same site on every run
USER_AGENT = "thresher-ingest-bench/1"
STEPS = ("sqlite", "postgres", "kill", "wget2")
# The targets (issue 22), for the median round of each clean run.
RATE_TARGETS = {"sqlite": 1000.0, "postgres": 700.0}  # requests/s
CPU_TARGET_MS = 1.5  # Thresher's CPU per request (user + system, its whole process tree)
RSS_TARGET_MIB = 150.0  # peak RSS


# --- the site ---------------------------------------------------------------------------

# (kind, share of the requests, the status its result must have)
MIX: tuple[tuple[str, float, str], ...] = (
    ("pdf", 0.55, "success"),  # the URL serves the PDF
    ("landing", 0.25, "success"),  # a landing page whose citation_pdf_url is the PDF
    ("two-hop", 0.05, "success"),  # landing page -> viewer page ("Download PDF") -> PDF
    ("no-link", 0.05, "no-pdf-link"),  # a landing page without a full-text link
    ("missing", 0.03, "terminal-bad-status"),  # 404
    ("redirect", 0.03, "success"),  # nginx `return 302` to a PDF
    ("wall-at-pdf", 0.01, "blocked-wall"),  # a login page (200) at a .pdf URL
    ("page-at-pdf", 0.01, "success"),  # an interstitial page at a .pdf URL -> the PDF
    ("same-pdf", 0.02, "success"),  # another URL serving the same bytes as a "pdf" one
)
STATUS_OF = {kind: status for kind, _, status in MIX}


@dataclass
class Site:
    """The site's requests and what a correct ingest of them gives."""

    docroot: Path  # one folder per host address: nginx's root is docroot/$server_addr
    port: int
    hosts: int
    dump: Path  # the requests, JSON Lines
    redirects: Path  # nginx map lines: "ADDR/PATH" "TARGET";
    urls: list[str]  # base URL of each request (all distinct)
    kinds: list[str]
    terminal_sha1: list[str | None]  # SHA-1 of the file a success ends on
    bodies: list[str]  # SHA-1s of every distinct 2xx body the requests lead to
    fetches: int  # requests a clean ingest makes, robots.txt aside
    files: int  # files written (hard links included)
    pdfs: int  # distinct PDF bodies
    pdf_bytes: int
    html_pages: int  # distinct HTML bodies
    html_bytes: int

    def host(self, h: int) -> str:
        return f"127.0.0.{h}"

    def status(self, i: int) -> str:
        return STATUS_OF[self.kinds[i]]

    def expected_statuses(self) -> dict[str, int]:
        return dict(collections.Counter(self.status(i) for i in range(len(self.urls))))


_SYLLABLES = (
    "ka", "ro", "mi", "ten", "sa", "lo", "ve", "dur", "an", "is", "pel", "tho", "rin", "gar",
    "mu", "ne", "sol", "vi", "qua", "bes", "tor", "ly", "fen",
)  # fmt: skip
_JOURNALS = ("Applied Lorem", "Theoretical Ipsum", "Comparative Dolor", "Marine Sitametics")


class _Words:
    """Pools of made-up text (the pages differ by their DOI, number and picks from these)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.vocabulary = [
            "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 4))) for _ in range(3000)
        ]
        self.paragraphs = [self.sentence(40, 160) for _ in range(400)]
        self.titles = [self.sentence(4, 11).rstrip(".") for _ in range(4000)]
        initials = "ABCDEFGHJKLMNPRS"
        self.names = [f"{w.capitalize()}, {rng.choice(initials)}." for w in self.vocabulary]
        self.references = [
            f"<li>{rng.choice(self.names)} ({rng.randint(1950, 2024)}). {rng.choice(self.titles)}."
            f" <i>{rng.choice(_JOURNALS)}</i> {rng.randint(1, 90)}: {rng.randint(1, 900)}.</li>\n"
            for _ in range(3000)
        ]

    def sentence(self, low: int, high: int) -> str:
        words = (self.rng.choice(self.vocabulary) for _ in range(self.rng.randint(low, high)))
        return " ".join(words).capitalize() + "."

    def title(self) -> str:
        return self.rng.choice(self.titles)

    def name(self) -> str:
        return self.rng.choice(self.names)


def pdf_body(rng: random.Random, i: int, size: int) -> bytes:
    """A PDF-shaped body of about `size` bytes: header, a page and a stream of random
    (incompressible, as a real Flate stream) bytes, a cross-reference table, %%EOF."""
    head = f"%PDF-1.{rng.choice('34567')}\n%\xe2\xe3\xcf\xd3\n".encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
    ]
    stream = rng.randbytes(max(256, size - 700))
    objects.append(
        f"<< /Length {len(stream)} /Filter /FlateDecode >>\nstream\n".encode()
        + stream
        + b"\nendstream"
    )
    objects.append(f"<< /Title (Bench paper {i}) /Producer (thresher bench) >>".encode())
    out = bytearray(head)
    offsets = []
    for n, obj in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{n} 0 obj\n".encode() + obj + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{o:010d} 00000 n \n" for o in offsets).encode()
    out += (
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R /Info 5 0 R >>\n"
        f"startxref\n{xref}\n%%EOF\n"
    ).encode()
    return bytes(out)


def landing_html(
    words: _Words,
    i: int,
    journal: str,
    *,
    pdf_meta: str | None = None,
    anchor: tuple[str, str] | None = None,
    no_access: bool = False,
) -> bytes:
    """A publisher's article page (3-13 KB): Highwire citation tags, abstract, references,
    related articles; the full-text link only as `pdf_meta` (citation_pdf_url) or
    `anchor` (href, text), if given. Nothing else on it is a full-text link."""
    rng = words.rng
    title = words.title()
    authors = [words.name() for _ in range(rng.randint(1, 6))]
    year = rng.randint(1998, 2025)
    metas = [
        f'<meta name="citation_title" content="{title}">',
        *(f'<meta name="citation_author" content="{a}">' for a in authors),
        f'<meta name="citation_journal_title" content="Journal of {journal}">',
        f'<meta name="citation_publication_date" content="{year}/{rng.randint(1, 12):02d}">',
        f'<meta name="citation_doi" content="10.5555/bench.{i:05d}">',
    ]
    if pdf_meta is not None:
        metas.insert(
            rng.randint(1, len(metas)), f'<meta name="citation_pdf_url" content="{pdf_meta}">'
        )
    tools = ['<a href="/cite">Cite</a>', '<a href="/share">Share</a>']
    if anchor is not None:
        tools.insert(0, f'<a class="btn btn-primary" href="{anchor[0]}">{anchor[1]}</a>')
    if no_access:
        tools.insert(
            0, '<p class="access">The full text of this article is not available online.</p>'
        )
    abstract = " ".join(rng.choice(words.paragraphs) for _ in range(rng.randint(1, 3)))
    refs = "".join(rng.choices(words.references, k=rng.randint(10, 60)))
    related = "".join(
        f'<li><a href="/articles/{rng.randrange(100000):05d}">{words.title()}</a></li>\n'
        for _ in range(rng.randint(3, 8))
    )
    nl = "\n"
    page = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title} | Journal of {journal}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
{nl.join(metas)}
<link rel="stylesheet" href="/static/site.css">
<script src="/static/app.js" defer></script>
</head>
<body>
<header><nav><a href="/">Home</a> | <a href="/issues">Issues</a> | <a href="/about">About</a> | <a href="/login">Sign in</a></nav></header>
<main><article>
<h1>{title}</h1>
<p class="authors">{"; ".join(authors)}</p>
<p class="doi">https://doi.org/10.5555/bench.{i:05d}</p>
<div class="tools">{" ".join(tools)}</div>
<section class="abstract"><h2>Abstract</h2><p>{abstract}</p></section>
<section class="refs"><h2>References</h2><ol>
{refs}</ol></section>
<aside><h2>Related articles</h2><ul>
{related}</ul></aside>
</article></main>
<footer><p>Journal of {journal}. Published by the Bench Society.</p></footer>
</body>
</html>
"""  # noqa: E501
    return page.encode()


def viewer_html(i: int, pdf: str, back: str) -> bytes:
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>Reader: article {i}</title>\n"
        '<link rel="stylesheet" href="/static/reader.css">\n</head>\n<body>\n'
        f'<div class="toolbar"><a href="{back}">Back to the article</a>\n'
        f'<a class="download" href="{pdf}" download>Download PDF</a></div>\n'
        f'<iframe class="viewer" src="/static/pdfjs/viewer.html?n={i}" title="Reader"></iframe>\n'
        "</body>\n</html>\n"
    ).encode()


def wall_html(host: str) -> bytes:
    """A host's login wall: the same page for every URL that it guards."""
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>Sign in | {host}</title>\n</head>\n<body>\n"
        "<h1>Sign in to read this article</h1>\n"
        '<form action="/login" method="post">\n'
        '<label>User name <input type="text" name="user"></label>\n'
        '<label>Password <input type="password" name="password"></label>\n'
        "<button>Sign in</button>\n</form>\n"
        '<p>Not a subscriber? <a href="/subscribe">Subscribe</a></p>\n'
        "</body>\n</html>\n"
    ).encode()


def interstitial_html(pdf: str) -> bytes:
    return (
        '<!DOCTYPE html>\n<html>\n<head>\n<meta charset="utf-8">\n'
        f'<meta name="citation_pdf_url" content="{pdf}">\n'
        f'<meta http-equiv="refresh" content="5;url={pdf}">\n'
        "<title>Preparing your download</title>\n</head>\n<body>\n"
        f'<p>Your download starts in a moment. <a href="{pdf}">Click here</a> if it'
        " does not.</p>\n</body>\n</html>\n"
    ).encode()


def build_site(work: Path, port: int, requests: int, hosts: int = HOSTS) -> Site:
    """Write the site's files, the nginx redirect map and the request dump.

    Deterministic for given (requests, hosts, port): the kinds are the MIX's shares of
    `requests` (rounded; the rest are direct PDFs), shuffled; each request is on a random
    host; PDFs are 3-300 KB, log-uniform (a median of 30 KB)."""
    rng = random.Random(SEED)
    words = _Words(rng)
    docroot = work / "site"
    counts = {kind: round(share * requests) for kind, share, _ in MIX}
    counts["pdf"] += requests - sum(counts.values())
    kinds = [kind for kind, _, _ in MIX for _ in range(counts[kind])]
    rng.shuffle(kinds)
    for h in range(1, hosts + 1):
        (docroot / f"127.0.0.{h}").mkdir(parents=True, exist_ok=True)
        (docroot / f"127.0.0.{h}" / "robots.txt").write_text("User-agent: *\nAllow: /\n")
    written: dict[Path, str] = {}  # file -> SHA-1 of its bytes
    folders: set[Path] = set()
    pdf_sha1: set[str] = set()
    html_sha1: set[str] = set()
    sizes = {"pdf": 0, "html": 0}
    pdf_files: list[Path] = []  # of kind "pdf", for "same-pdf" to copy

    def origin(h: int) -> str:
        return f"http://127.0.0.{h}:{port}"

    def write(h: int, path: str, data: bytes, kind: str) -> str:
        file = docroot / f"127.0.0.{h}" / urlsplit(path).path.lstrip("/")
        if file in written:
            raise BenchError(f"site generator wrote {file} twice")
        if file.parent not in folders:
            file.parent.mkdir(parents=True, exist_ok=True)
            folders.add(file.parent)
        file.write_bytes(data)
        sha1 = hashlib.sha1(data).hexdigest()
        written[file] = sha1
        seen = pdf_sha1 if kind == "pdf" else html_sha1
        if sha1 not in seen:
            seen.add(sha1)
            sizes[kind] += len(data)
        return sha1

    def new_pdf(i: int, h: int, path: str) -> str:
        size = int(math.exp(rng.uniform(math.log(3_000), math.log(300_000))))
        return write(h, path, pdf_body(rng, i, size), "pdf")

    def link(h: int, page: str, target_host: int, target: str) -> str:
        """How a page at `page` on host h names `target` on target_host: absolute, or
        relative to the root or to the page when on the same host."""
        if target_host != h or rng.random() < 0.4:
            return origin(target_host) + target
        if rng.random() < 0.5:
            return target
        rel = os.path.relpath(target, os.path.dirname(page))
        if urljoin(page, rel) != target:  # the resolution a browser does
            raise BenchError(f"relative link {rel} from {page} is not {target}")
        return rel

    def other(h: int) -> int:
        return rng.choice([g for g in range(1, hosts + 1) if g != h]) if rng.random() < 0.3 else h

    urls: list[str] = []
    terminal: list[str | None] = []
    bodies: set[str] = set()
    fetches = 0
    redirect_lines: list[str] = []
    same_pdf: list[int] = []
    walls: dict[int, str] = {}
    for i, kind in enumerate(kinds):
        h = rng.randint(1, hosts)
        journal = rng.choice(_JOURNALS)
        sha1: str | None = None
        chain: list[str] = []  # SHA-1s of the 2xx bodies on the way
        if kind == "pdf":
            path = rng.choice(
                (
                    f"/files/{i:05d}.pdf",
                    f"/content/pdf/10.5555/bench.{i:05d}.pdf",
                    f"/download/{i:05d}",  # served as application/octet-stream
                    f"/pdf/{i:05d}?download=true",  # application/pdf, no extension
                )
            )
            sha1 = new_pdf(i, h, path)
            pdf_files.append(docroot / f"127.0.0.{h}" / urlsplit(path).path.lstrip("/"))
            chain = [sha1]
            fetches += 1
        elif kind in ("landing", "no-link"):
            path = rng.choice((f"/articles/{i:05d}", f"/doi/10.5555/bench.{i:05d}"))
            if kind == "landing":
                g = other(h)
                target = rng.choice((f"/fulltext/{i:05d}.pdf", f"/cdn/{i:05d}/article.pdf"))
                sha1 = new_pdf(i, g, target)
                page = landing_html(words, i, journal, pdf_meta=link(h, path, g, target))
                chain = [write(h, path, page, "html"), sha1]
            else:
                page = landing_html(words, i, journal, no_access=True)
                chain = [write(h, path, page, "html")]
            fetches += len(chain)
        elif kind == "two-hop":
            path = f"/records/{i:05d}"
            reader = f"/reader/{i:05d}"
            target = f"/fulltext/v{i:05d}.pdf"
            sha1 = new_pdf(i, h, target)
            pdf_link = link(h, reader, h, target)
            view = write(h, reader, viewer_html(i, pdf_link, link(h, reader, h, path)), "html")
            via = link(h, path, h, reader)
            if rng.random() < 0.5:  # citation_pdf_url names the viewer, as some platforms do
                page = landing_html(words, i, journal, pdf_meta=via)
            else:
                page = landing_html(words, i, journal, anchor=(via, "View PDF"))
            chain = [write(h, path, page, "html"), view, sha1]
            fetches += 3
        elif kind == "missing":
            path = rng.choice((f"/files/{i:05d}.pdf", f"/articles/{i:05d}"))
            fetches += 1
        elif kind == "redirect":
            path = f"/resolve/10.5555/bench.{i:05d}"
            g = other(h)
            target = f"/fulltext/r{i:05d}.pdf"
            sha1 = new_pdf(i, g, target)
            redirect_lines.append(f'"127.0.0.{h}{path}" "{origin(g)}{target}";')
            chain = [sha1]
            fetches += 2
        elif kind == "wall-at-pdf":
            path = f"/files/{i:05d}.pdf"
            if h not in walls:
                walls[h] = hashlib.sha1(wall_html(f"127.0.0.{h}")).hexdigest()
            write(h, path, wall_html(f"127.0.0.{h}"), "html")
            chain = [walls[h]]
            fetches += 1
        elif kind == "page-at-pdf":
            path = f"/files/{i:05d}.pdf"
            target = f"/fulltext/p{i:05d}.pdf"
            sha1 = new_pdf(i, h, target)
            chain = [write(h, path, interstitial_html(link(h, path, h, target)), "html"), sha1]
            fetches += 2
        elif kind == "same-pdf":
            path = f"/mirror/{i:05d}.pdf"
            same_pdf.append(i)
            fetches += 1
        else:
            raise AssertionError(kind)
        urls.append(origin(h) + path)
        terminal.append(sha1)
        bodies.update(chain)
    # Copies of other requests' PDFs (hard links: the same bytes), once those exist.
    for i in same_pdf:
        source = rng.choice(pdf_files)
        parts = urlsplit(urls[i])
        file = docroot / str(parts.hostname) / parts.path.lstrip("/")
        file.parent.mkdir(parents=True, exist_ok=True)
        os.link(source, file)
        written[file] = written[source]
        terminal[i] = written[source]
    # Everything readable by nginx's workers (`nobody` when we are root).
    for folder in [work, *docroot.rglob("*")]:
        if folder.is_dir():
            folder.chmod(0o755)
    redirects = work / "redirects.map"
    redirects.write_text("".join(f"{line}\n" for line in redirect_lines))
    dump = work / "requests.jsonl"
    with open(dump, "w", encoding="utf-8") as out:
        for i, url in enumerate(urls):
            line = {
                "ingest_type": "pdf",
                "base_url": url,
                "link_source": "bench",
                "link_source_id": f"10.5555/bench.{i:05d}",
            }
            out.write(json.dumps(line, separators=(",", ":")) + "\n")
    if len(set(urls)) != len(urls):
        raise BenchError("the site generator made two requests with one URL")
    return Site(
        docroot=docroot,
        port=port,
        hosts=hosts,
        dump=dump,
        redirects=redirects,
        urls=urls,
        kinds=kinds,
        terminal_sha1=terminal,
        bodies=sorted(bodies),
        fetches=fetches,
        files=len(written),
        pdfs=len(pdf_sha1),
        pdf_bytes=sizes["pdf"],
        html_pages=len(html_sha1),
        html_bytes=sizes["html"],
    )


# --- nginx ------------------------------------------------------------------------------


@dataclass
class Nginx:
    proc: subprocess.Popen[bytes]
    binary: str
    access_log: Path

    def log_size(self) -> int:
        return self.access_log.stat().st_size

    def lines(self, start: int, end: int | None = None) -> list[list[str]]:
        """The access log's lines between two sizes: [addr, method, uri, status, bytes].
        nginx writes each line when its request ends, unbuffered."""
        with open(self.access_log, "rb") as f:
            f.seek(start)
            data = f.read() if end is None else f.read(end - start)
        return [line.split(" ") for line in data.decode("utf-8", "replace").splitlines()]

    def cpu_seconds(self) -> float:
        """User + system CPU of the master and its workers (from /proc)."""
        return tree_cpu_seconds(self.proc.pid)


@contextlib.contextmanager
def nginx(site: Site, work: Path) -> Iterator[Nginx]:
    """A private nginx serving `site` on every host address, with the site's 302 rules
    (a map from address + path to the target); config, pid and logs in `work`."""
    conf_dir = work / "nginx"
    access_log = conf_dir / "access.log"
    listens = "".join(
        f"        listen 127.0.0.{h}:{site.port};\n" for h in range(1, site.hosts + 1)
    )
    http = f"""    log_format bench '$server_addr $request_method $request_uri $status $body_bytes_sent';
    access_log {access_log} bench;
    log_not_found off;
    types {{ application/pdf pdf; text/plain txt; }}
    default_type text/html;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    keepalive_timeout 60s;
    map_hash_bucket_size 256;
    map_hash_max_size 65536;
    map "$server_addr$uri" $bench_redirect {{
        default "";
        include {site.redirects};
    }}
    server {{
{listens}        root {site.docroot}/$server_addr;
        if ($bench_redirect) {{ return 302 $bench_redirect; }}
        location /download/ {{ default_type application/octet-stream; }}
        location /pdf/ {{ default_type application/pdf; }}
    }}
"""  # noqa: E501
    conf_dir.mkdir(parents=True, exist_ok=True)
    access_log.touch()

    def ready() -> None:
        for h in range(1, site.hosts + 1):
            socket.create_connection((f"127.0.0.{h}", site.port), timeout=1).close()

    with nginx_process(conf_dir, http, ready, connections=4096) as (proc, binary):
        yield Nginx(proc, binary, access_log)


# --- PostgreSQL (benchpg.py) -----------------------------------------------------------


def pg_available() -> bool:
    if os.environ.get("THRESHER_BENCH_PG"):
        return True
    return tests_pg().find_pg_bin() is not None


# --- measuring a process tree (with benchlib.measure_tree) ------------------------------


@dataclass
class Usage:
    seconds: float  # wall time, process start to exit
    cpu_user: float  # of the process and every descendant it waited for
    cpu_system: float
    hwm_kib: int  # the largest VmHWM of a process of the tree, sampled every 0.05 s
    tree_pss_kib: int  # peak of the summed PSS of the live tree, when it had several
    processes: int  # most processes alive at once in the tree (sampled)
    returncode: int
    killed: bool = False  # we sent SIGKILL (kill_when said so)

    @property
    def cpu(self) -> float:
        return self.cpu_user + self.cpu_system

    @property
    def peak_rss_kib(self) -> int:
        return max(self.hwm_kib, self.tree_pss_kib)


def run_measured(
    cmd: Sequence[str],
    out: Path,
    timeout: float,
    env: dict[str, str] | None = None,
    kill_when: Callable[[], bool] | None = None,
) -> Usage:
    """Run `cmd` to its end (stdout to `out`, stderr to out + .log); wall time, CPU and
    memory of it and its descendants (see benchlib.measure_tree, which kills the process
    group with SIGKILL if `kill_when()` turns true).

    Memory is the sampled VmHWM, not wait4's ru_maxrss, which Linux carries over exec
    from this script (see benchmarks/README.md)."""
    with open(out, "wb") as stdout, open(f"{out}.log", "wb") as stderr:
        started = time.perf_counter()
        proc = subprocess.Popen(
            list(cmd), stdout=stdout, stderr=stderr, env=env, start_new_session=True
        )
    too_long = f"{shlex.join(cmd)} took longer than {timeout:.0f} s"
    m = measure_tree(proc, started, timeout, too_long, kill_when)
    return Usage(
        seconds=m.seconds,
        cpu_user=m.rusage.ru_utime + m.orphan_user,
        cpu_system=m.rusage.ru_stime + m.orphan_system,
        hwm_kib=m.hwm_kib,
        tree_pss_kib=m.tree_pss_kib,
        processes=m.processes,
        returncode=m.returncode,
        killed=m.killed,
    )


# --- Thresher ---------------------------------------------------------------------------


def run_cmd(home: Path, db: str | None, workers: int, shards: int = 1) -> list[str]:
    return thresher_cmd(
        home, db, "ingest", "run", "--allow-private", "--delay", "0",
        "-w", str(workers), "--json", "--no-progress",
        *(["--shards", str(shards)] if shards > 1 else []),
    )  # fmt: skip


class Store:
    """Read access to a Thresher store, SQLite or PostgreSQL, for the checks."""

    def __init__(self, home: Path, db: str | None) -> None:
        self.home, self.db = home, db

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        if self.db is None:
            conn = sqlite3.connect(f"file:{self.home / 'thresher.db'}?mode=ro", uri=True)
            try:
                return conn.execute(sql).fetchall()
            finally:
                conn.close()
        import psycopg

        with psycopg.connect(self.db, autocommit=True) as pg:
            return list(pg.execute(sql.encode()).fetchall())

    def results(self) -> int:
        return int(self.query("SELECT count(*) FROM ingest_results")[0][0])


class Counter:
    """The number of results, polled while `ingest run` runs (one connection, kept)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._sqlite: sqlite3.Connection | None = None
        self._pg: Any = None
        self.last = 0

    def __call__(self) -> int:
        try:
            if self.store.db is None:
                if self._sqlite is None:
                    path = self.store.home / "thresher.db"
                    self._sqlite = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1)
                row = self._sqlite.execute("SELECT count(*) FROM ingest_results").fetchone()
            else:
                import psycopg

                if self._pg is None:
                    self._pg = psycopg.connect(self.store.db, autocommit=True)
                row = self._pg.execute(b"SELECT count(*) FROM ingest_results").fetchone()
            self.last = int(row[0])
        except (sqlite3.Error, OSError, ImportError) as exc:
            raise BenchError(f"cannot count the results: {exc}") from exc
        return self.last

    def close(self) -> None:
        if self._sqlite is not None:
            self._sqlite.close()
        if self._pg is not None:
            self._pg.close()


def read_results(
    home: Path, db: str | None, out: Path, build: Build = THIS
) -> dict[str, dict[str, Any]]:
    """Every result, through `thresher ingest results` (JSON Lines), by base URL."""
    proc = subprocess.run(
        thresher_cmd(home, db, "ingest", "results", "-o", str(out)),
        env=build.env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        raise BenchError(f"thresher ingest results exited {proc.returncode}: {proc.stderr[-500:]}")
    results: dict[str, dict[str, Any]] = {}
    duplicates = 0
    with open(out, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if r["base_url"] in results:
                duplicates += 1
            results[r["base_url"]] = r
    if duplicates:
        raise BenchError(f"ingest results listed {duplicates} URLs twice")
    return results


def warc_bodies(warc_dir: Path) -> tuple[collections.Counter[str], dict[str, tuple[str, int]]]:
    """SHA-1 (hex) of the payload of every response record in the WARC files, counted,
    and where (file name, offset) each was found; each record's WARC-Payload-Digest is
    checked against the bytes too. Read with FastWARC when it is installed (the tests'
    second WARC reader, twice as fast here), else with warcio."""
    seen: collections.Counter[str] = collections.Counter()
    where: dict[str, tuple[str, int]] = {}
    for path in sorted(warc_dir.glob("*.warc*")):
        if path.name.endswith(".cdxj"):
            continue
        for payload, declared, offset in _responses(path):
            sha1 = hashlib.sha1(payload)
            if declared.startswith("sha1:") and declared[5:] != base64.b32encode(
                sha1.digest()
            ).decode("ascii"):
                raise BenchError(f"{path.name}@{offset}: payload digest {declared} is wrong")
            seen[sha1.hexdigest()] += 1
            where[sha1.hexdigest()] = (path.name, offset)
    return seen, where


def _responses(path: Path) -> Iterator[tuple[bytes, str, int]]:
    """(payload, WARC-Payload-Digest, record offset) of each response record."""
    try:
        from fastwarc.warc import ArchiveIterator, WarcRecordType
    except ImportError:
        from warcio.archiveiterator import (  # type: ignore[import-untyped]
            ArchiveIterator as WarcioIterator,
        )

        with open(path, "rb") as f:
            records = WarcioIterator(f)
            for record in records:
                if record.rec_type == "response":
                    payload = record.content_stream().read()
                    declared = record.rec_headers.get_header("WARC-Payload-Digest") or ""
                    yield payload, declared, records.get_record_offset()
        return
    with open(path, "rb") as f:
        for rec in ArchiveIterator(f, record_types=WarcRecordType.response, parse_http=True):
            declared = rec.headers.get("WARC-Payload-Digest") or ""
            yield rec.reader.read(), str(declared), int(rec.stream_pos)


@dataclass
class Check:
    """What a finished ingest's store holds, against the site."""

    results: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    file_meta: int = 0
    warc_records: int = 0
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0  # how long checking took


def check_store(
    site: Site,
    home: Path,
    db: str | None,
    label: str,
    warc: bool,
    work: Path,
    build: Build = THIS,
) -> tuple[Check, dict[str, str]]:
    """Compare the results, file_meta and (if `warc`) the WARC files with the site;
    the check and each URL's status."""
    started = time.perf_counter()
    check = Check()
    results = read_results(home, db, work / f"{label}-results.jsonl", build)
    check.results = len(results)
    check.statuses = dict(collections.Counter(r["status"] for r in results.values()))
    statuses = {url: r["status"] for url, r in results.items()}
    wrong: list[str] = []
    for i, url in enumerate(site.urls):
        r = results.get(url)
        if r is None:
            wrong.append(f"{url}: no result")
        elif r["status"] != site.status(i):
            wrong.append(f"{url} ({site.kinds[i]}): {r['status']}, not {site.status(i)}")
        elif r["terminal_sha1"] != site.terminal_sha1[i] and site.status(i) == "success":
            wrong.append(f"{url}: file {r['terminal_sha1']}, not {site.terminal_sha1[i]}")
    extra = set(results) - set(site.urls)
    if wrong:
        check.problems.append(f"{len(wrong)} results not as expected, e.g. {'; '.join(wrong[:3])}")
    if extra:
        check.problems.append(f"{len(extra)} results for URLs not requested")
    store = Store(home, db)
    meta = {
        str(sha1): (str(file), int(offset) if offset is not None else -1)
        for sha1, file, offset in store.query("SELECT sha1, warc_file, warc_offset FROM file_meta")
    }
    check.file_meta = len(meta)
    want = set(site.bodies)
    if set(meta) != want:
        check.problems.append(
            f"file_meta has {len(meta)} rows, the site {len(want)} distinct bodies:"
            f" {len(set(meta) - want)} unexpected, {len(want - set(meta))} missing"
        )
    if warc:
        seen, where = warc_bodies(home / "warc" / "ingest")
        check.warc_records = sum(seen.values())
        twice = [s for s, n in seen.items() if n > 1]
        if twice:
            check.problems.append(f"{len(twice)} bodies have more than one WARC record")
        if set(seen) != set(meta):
            check.problems.append(
                f"WARC bodies != file_meta: {len(set(seen) - set(meta))} not in file_meta,"
                f" {len(set(meta) - set(seen))} of file_meta not in a WARC file"
            )
        misplaced = [s for s, loc in where.items() if s in meta and meta[s] != loc]
        if misplaced:
            check.problems.append(
                f"{len(misplaced)} file_meta rows do not point at their WARC record,"
                f" e.g. {misplaced[0]}: {meta[misplaced[0]]} vs {where[misplaced[0]]}"
            )
    check.seconds = time.perf_counter() - started
    return check, statuses


# --- the runs ---------------------------------------------------------------------------


@dataclass
class Row:
    tool: str
    requests: int  # results written (Thresher) or base URLs given (wget2)
    usage: Usage
    nginx_requests: int  # what nginx served meanwhile, robots.txt included
    nginx_cpu: float
    db_cpu: float | None = None
    report: dict[str, Any] = field(default_factory=dict)
    check: Check | None = None
    notes: list[str] = field(default_factory=list)
    load: float = 0.0  # the 1-minute load average when it ended
    rounds: list[Row] = field(default_factory=list)  # every round's row (the median's own)

    @property
    def rate(self) -> float:
        return self.requests / self.usage.seconds if self.usage.seconds else 0.0

    @property
    def cpu_ms(self) -> float:
        """Thresher's (or wget2's) CPU per request, in ms."""
        return 1000 * self.usage.cpu / self.requests if self.requests else 0.0


@functools.cache
def shards_known(build: Build) -> bool:
    """Whether `build`'s `ingest run` takes --shards: a baseline from before it had them
    runs in one process (and its row says so)."""
    helped = subprocess.run(
        [sys.executable, "-m", "thresher", "ingest", "run", "--help"],
        env=build.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    return "--shards" in helped.stdout


@dataclass
class Bench:
    site: Site
    server: Nginx
    work: Path
    workers: int
    timeout: float
    warc_check: bool  # read the clean runs' WARC files back too
    pg: Postgres | None = None
    shards: int = 1

    def load(
        self, home: Path, db: str | None, label: str, build: Build = THIS
    ) -> tuple[Usage, dict[str, Any]]:
        out = self.work / f"{label}-load.json"
        cmd = thresher_cmd(home, db, "ingest", "load", str(self.site.dump), "--json")
        usage = run_measured(cmd, out, self.timeout, build.env())
        report = _json_of(out)
        n = len(self.site.urls)
        if usage.returncode != 0 or report.get("new") != n:
            raise BenchError(
                f"{label}: ingest load exited {usage.returncode}, new {report.get('new')} of {n};"
                f" see {out}.log"
            )
        return usage, report

    def clean(
        self, label: str, db: str | None, build: Build = THIS, tag: str = ""
    ) -> tuple[Row, dict[str, str]]:
        """Load and ingest into a fresh home; the row, checked, and each URL's status."""
        name = f"{label}{tag}"
        home = self.work / f"home-{name}"
        load, _ = self.load(home, db, name, build)
        print(f"loaded in {load.seconds:.1f} s;", end=" ", file=sys.stderr, flush=True)
        row = self.ingest(f"thresher{build.label} ({label})", home, db, name, build=build)
        row.notes.append(f"ingest load before it: {load.seconds:.1f} s, {load.cpu:.1f} CPU s")
        check, statuses = check_store(self.site, home, db, name, self.warc_check, self.work, build)
        row.check = check
        return row, statuses

    def ingest(
        self,
        tool: str,
        home: Path,
        db: str | None,
        label: str,
        kill_at: int | None = None,
        build: Build = THIS,
    ) -> Row:
        out = self.work / f"{label}.json"
        counter = Counter(Store(home, db))
        kill_when = None if kill_at is None else (lambda: counter() >= kill_at)
        log0, nginx0 = self.server.log_size(), self.server.cpu_seconds()
        db0 = self.pg.cpu_seconds() if self.pg and db else None
        try:
            cmd = run_cmd(home, db, self.workers, self.shards if shards_known(build) else 1)
            usage = run_measured(cmd, out, self.timeout, build.env(), kill_when)
        finally:
            counter.close()
        db1 = self.pg.cpu_seconds() if self.pg and db else None
        served = len(self.server.lines(log0))
        report = _json_of(out)
        if kill_at is None and (usage.returncode != 0 or report.get("status") != "ok"):
            tail = Path(f"{out}.log").read_text(errors="replace")[-1500:]
            raise BenchError(f"{tool} exited {usage.returncode}: {report}\n{tail}")
        results = Store(home, db).results()
        row = Row(
            tool,
            results,
            usage,
            served,
            self.server.cpu_seconds() - nginx0,
            db1 - db0 if db0 is not None and db1 is not None else None,
            report,
            load=os.getloadavg()[0],
        )
        return row

    def kill_test(self, db: str | None, label: str, clean: dict[str, str] | None) -> KillTest:
        tag = f"kill-{label}"
        home = self.work / f"home-{tag}"
        self.load(home, db, tag)
        total = len(self.site.urls)
        half = total // 2
        log0 = self.server.log_size()
        first = self.ingest(f"thresher ({label}, killed)", home, db, f"{tag}-1", kill_at=half)
        if not first.usage.killed:
            raise BenchError(f"{label}: the run ended before {half} results ({first.requests})")
        at_kill = first.requests
        log1 = self.server.log_size()
        print(f"killed at {at_kill} results;", end=" ", file=sys.stderr, flush=True)
        second = self.ingest(f"thresher ({label}, again)", home, db, f"{tag}-2")
        second.requests -= at_kill  # what this run added
        check, statuses = check_store(self.site, home, db, tag, True, self.work)
        second.check = check
        if clean is not None:
            differ = [u for u, s in statuses.items() if clean.get(u) != s]
            if differ:
                check.problems.append(f"{len(differ)} statuses differ from the clean run's")
        # What nginx served more than once across the two runs (robots.txt aside), and
        # which of those the first run asked for last: the ones in flight at the kill.
        lines = self.server.lines(log0)
        requested = collections.Counter(
            (a[0], a[2]) for a in lines if len(a) >= 3 and a[2] != "/robots.txt"
        )
        twice = {key for key, n in requested.items() if n > 1}
        before = {(a[0], a[2]) for a in self.server.lines(log0, log1) if len(a) >= 3}
        base = {(urlsplit(u).hostname, _path_query(u)) for u in self.site.urls}
        return KillTest(
            label=label,
            total=total,
            at_kill=at_kill,
            first=first,
            second=second,
            fetched_twice=len(twice),
            fetched_twice_base=len(twice & base),
            fetched_twice_in_first=len(twice & before),
            more_than_twice=sum(1 for n in requested.values() if n > 2),
        )


def _path_query(url: str) -> str:
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def _json_of(path: Path) -> dict[str, Any]:
    for line in reversed(path.read_text(errors="replace").splitlines()):
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                value = json.loads(line)
                return value if isinstance(value, dict) else {}
    with contextlib.suppress(ValueError):
        value = json.loads(path.read_text() or "{}")
        return value if isinstance(value, dict) else {}
    return {}


@dataclass
class KillTest:
    label: str
    total: int
    at_kill: int  # results committed when the first run was killed
    first: Row
    second: Row
    fetched_twice: int  # distinct URLs nginx served more than once over both runs
    fetched_twice_base: int  # of them, requests' base URLs (the rest are later hops)
    fetched_twice_in_first: int  # of them, asked for by the killed run
    more_than_twice: int

    @property
    def seconds(self) -> float:
        return self.first.usage.seconds + self.second.usage.seconds

    @property
    def problems(self) -> list[str]:
        out = list(self.second.check.problems) if self.second.check else ["not checked"]
        if self.at_kill + self.second.requests != self.total:
            out.append(f"{self.at_kill + self.second.requests} results, not {self.total}")
        return out

    def line(self) -> str:
        check = self.second.check
        assert check is not None
        verdict = "OK" if not self.problems else "FAILED: " + "; ".join(self.problems)
        return (
            f"kill test ({self.label}): kill -9 at {self.at_kill} of {self.total} results"
            f" ({self.first.usage.seconds:.1f} s in), the same command again:"
            f" {self.second.requests} more in {self.second.usage.seconds:.1f} s;"
            f" {check.results} results for {self.total} URLs, statuses as the clean run,"
            f" {check.file_meta} file_meta rows, {check.warc_records} WARC response records"
            f" (each body once); {self.fetched_twice} URLs fetched twice"
            f" ({self.fetched_twice_base} base URLs,"
            f" {self.fetched_twice - self.fetched_twice_base} later hops; in flight at the"
            f" kill), {self.more_than_twice} more than twice: {verdict}"
        )


def run_wget2(site: Site, server: Nginx, work: Path, threads: int, timeout: float) -> Row:
    binary = shutil.which("wget2")
    if binary is None:
        raise BenchError("wget2 is not installed: apt-get install wget2")
    urls = work / "urls.txt"
    urls.write_text("".join(f"{u}\n" for u in site.urls))
    out = work / "wget2"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    cmd = [
        binary, f"--input-file={urls}", f"--max-threads={threads}", "--robots=off",
        "--no-verbose", f"--user-agent={USER_AGENT}", "-P", str(out / "files"),
    ]  # fmt: skip
    log0, nginx0 = server.log_size(), server.cpu_seconds()
    usage = run_measured(cmd, out / "stdout", timeout, child_env())
    lines = server.lines(log0)
    # 8: some answer was an error (the site's 404s).
    if usage.returncode not in (0, 8):
        tail = Path(f"{out / 'stdout'}.log").read_text(errors="replace")[-1500:]
        raise BenchError(f"wget2 exited {usage.returncode}:\n{tail}")
    saved = sum(1 for p in (out / "files").rglob("*") if p.is_file())
    row = Row(
        "wget2",
        len(site.urls),
        usage,
        len(lines),
        server.cpu_seconds() - nginx0,
        load=os.getloadavg()[0],
    )
    statuses = collections.Counter(a[3] for a in lines if len(a) >= 4)
    row.notes.append(
        f"{saved} files saved; nginx answered "
        + ", ".join(f"{n} x {s}" for s, n in sorted(statuses.items()))
    )
    if usage.returncode == 8:
        row.notes.append("exit status 8 (server error responses: the site's 404s)")
    shutil.rmtree(out, ignore_errors=True)
    return row


# --- report -----------------------------------------------------------------------------


def table(rows: Sequence[Row], reference: Row | None, extra: Sequence[Row] = ()) -> str:
    """The rows (each a tool's median round, with every round's rate), then `extra` rows
    (the kill test's), then each Thresher row against wget2."""
    lines = [
        "| tool | requests | seconds | req/s | rounds (req/s) | CPU s (user+sys) | CPU ms/req"
        " | peak RSS MiB | processes | nginx requests | nginx CPU s | PostgreSQL CPU s"
        " | PostgreSQL CPU ms/req | load |",
        "|---|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in [*rows, *extra]:
        u = r.usage
        db = f"{r.db_cpu:.1f}" if r.db_cpu is not None else "-"
        db_ms = f"{1000 * r.db_cpu / r.requests:.2f}" if r.db_cpu is not None else "-"
        rounds = ", ".join(f"{x.rate:.0f}" for x in r.rounds) if len(r.rounds) > 1 else "-"
        lines.append(
            f"| {r.tool} | {r.requests} | {u.seconds:.1f} | {r.rate:.0f} | {rounds}"
            f" | {u.cpu:.1f} ({u.cpu_user:.1f}+{u.cpu_system:.1f}) | {r.cpu_ms:.2f}"
            f" | {u.peak_rss_kib / 1024:.0f} | {u.processes} | {r.nginx_requests}"
            f" | {r.nginx_cpu:.1f} | {db} | {db_ms} | {r.load:.2f} |"
        )
    if reference is not None:
        for r in rows:
            if r is reference or r.tool.startswith("wget2"):
                continue
            lines.append(
                f"| **{r.tool} / wget2** | | {r.usage.seconds / reference.usage.seconds:.2f}"
                f" | **{r.rate / reference.rate:.2f}** | | {r.usage.cpu / reference.usage.cpu:.2f}"
                f" | | {r.usage.peak_rss_kib / reference.usage.peak_rss_kib:.2f} | | | | | | |"
            )
    return "\n".join(lines)


def medians(rows: Sequence[Row]) -> list[Row]:
    """One row per tool, in the order first run: its median round by seconds, carrying
    every round's row in `rounds`."""
    by: dict[str, list[Row]] = {}
    for r in rows:
        by.setdefault(r.tool, []).append(r)
    out = []
    for group in by.values():  # the median round; of two middle ones, the slower
        median = sorted(group, key=lambda r: r.usage.seconds)[len(group) // 2]
        median.rounds = group
        out.append(median)
    return out


def targets(rows: Sequence[Row]) -> list[str]:
    """The targets' lines for this checkout's clean rows (medians), beside the baseline's
    and wget2's medians when there are some."""
    lines = []
    wget2 = next((r for r in rows if r.tool == "wget2"), None)
    for backend, target in RATE_TARGETS.items():
        mine = next((r for r in rows if r.tool == f"thresher ({backend})"), None)
        if mine is None:
            continue
        n = len(mine.rounds) or 1
        before = [
            r for r in rows if r.tool.startswith("thresher@") and r.tool.endswith(f"({backend})")
        ]
        vs = "".join(
            f"; {b.tool}: {b.rate:.0f} req/s, {b.cpu_ms:.2f} ms, x{mine.rate / b.rate:.1f}"
            for b in before
        )
        if wget2 is not None:
            vs += f"; wget2: {wget2.rate:.0f} req/s"
        rss = mine.usage.peak_rss_kib / 1024
        lines.append(
            f"target: {mine.tool} >= {target:.0f} req/s: {mine.rate:.0f} (median of {n}"
            f" rounds: {', '.join(f'{r.rate:.0f}' for r in mine.rounds or [mine])}){vs}:"
            f" {verdict(mine.rate >= target)}"
        )
        lines.append(
            # Three decimals: 1.504 shown as "1.50" read as met while it was not.
            f"target: {mine.tool} <= {CPU_TARGET_MS} ms of CPU per request: {mine.cpu_ms:.3f}"
            f" (rounds: {', '.join(f'{r.cpu_ms:.3f}' for r in mine.rounds or [mine])}):"
            f" {verdict(mine.cpu_ms <= CPU_TARGET_MS)}"
        )
        lines.append(
            f"target: {mine.tool} peak RSS <= {RSS_TARGET_MIB:.0f} MiB: {rss:.0f}:"
            f" {verdict(rss <= RSS_TARGET_MIB)}"
        )
        if mine.db_cpu is not None:
            lines.append(
                f"reported: PostgreSQL's CPU per request beside it:"
                f" {1000 * mine.db_cpu / mine.requests:.2f} ms"
                + "".join(
                    f"; {b.tool}: {1000 * b.db_cpu / b.requests:.2f} ms"
                    for b in before
                    if b.db_cpu is not None
                )
            )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=20000, help="requests in the dump (20000)")
    parser.add_argument(
        "-w", "--workers", type=int, default=16, help="thresher -w, and wget2's threads (16)"
    )
    parser.add_argument(
        "--shards",
        type=int,
        default=2,
        help="thresher ingest run --shards (2: a process per core of the 2-core machine)",
    )
    parser.add_argument(
        "--pg",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="PostgreSQL rows (default: when PostgreSQL is installed or THRESHER_BENCH_PG set)",
    )
    parser.add_argument(
        "--only", default=",".join(STEPS), help=f"steps to run, in order ({','.join(STEPS)})"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run the clean runs and wget2 this many times, in turns; each one's median"
        " round is shown (1)",
    )
    parser.add_argument(
        "--baseline",
        metavar="REV",
        help="also run the Thresher of git revision REV (e.g. main) in each round",
    )
    parser.add_argument(
        "--baseline-rounds",
        type=int,
        help="rounds of the baseline, when fewer than --rounds (it may be slow)",
    )
    parser.add_argument(
        "--kill-backend",
        choices=("sqlite", "postgres"),
        default="sqlite",
        help="the store of the kill test (sqlite)",
    )
    parser.add_argument(
        "--warc-check",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="read the clean runs' WARC files back too, not only the kill test's (on)",
    )
    parser.add_argument("--timeout", type=float, default=900, help="seconds per command (900)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder, print it")
    parser.add_argument(
        "--results", type=Path, default=RESULTS, help=f"JSON results file ({RESULTS.name})"
    )
    opts = parser.parse_args(argv)
    steps = [s.strip() for s in opts.only.split(",") if s.strip()]
    if not steps or any(s not in STEPS for s in steps):
        parser.error(f"--only takes a comma-separated list of {', '.join(STEPS)}")
    if opts.requests < 100 or opts.workers < 1 or opts.rounds < 1 or opts.shards < 1:
        parser.error("--requests must be at least 100; --workers, --rounds, --shards positive")
    baseline_rounds = opts.rounds if opts.baseline_rounds is None else opts.baseline_rounds
    use_pg = pg_available() if opts.pg is None else opts.pg
    if not use_pg:
        if "postgres" in steps:
            steps.remove("postgres")
            print("skipping the PostgreSQL row: no PostgreSQL (or --no-pg)", file=sys.stderr)
        if opts.kill_backend == "postgres":
            parser.error("--kill-backend postgres needs PostgreSQL")
    need_pg = "postgres" in steps or ("kill" in steps and opts.kill_backend == "postgres")

    rows: list[Row] = []
    kill: KillTest | None = None
    problems: list[str] = []
    with bench_run("thresher-ingest-bench-", opts.keep) as run:
        work = run.work
        find_program("nginx", "nginx")
        if "wget2" in steps and shutil.which("wget2") is None:
            raise BenchError("wget2 is not installed: apt-get install wget2 (or leave out wget2)")
        precompile(thresher_folder())
        started = time.perf_counter()
        # In a child process, so that this one stays small.
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            site = pool.submit(build_site, work, free_port(HOSTS), opts.requests).result()
        kinds = collections.Counter(site.kinds)
        print(
            f"site: {len(site.urls)} requests on {site.hosts} hosts (127.0.0.1-{site.hosts},"
            f" port {site.port}): {', '.join(f'{k} {kinds[k]}' for k, _, _ in MIX)};"
            f" {site.pdfs} PDFs ({site.pdf_bytes / 2**20:.0f} MiB), {site.html_pages} HTML"
            f" pages ({site.html_bytes / 2**20:.0f} MiB), {len(site.bodies)} distinct bodies;"
            f" built in {time.perf_counter() - started:.1f} s",
            file=sys.stderr,
        )
        load_before = os.getloadavg()
        with contextlib.ExitStack() as stack:
            builds = [THIS]
            if opts.baseline:
                builds.append(stack.enter_context(baseline(opts.baseline, work)))
            server = stack.enter_context(nginx(site, work))
            missing = "PostgreSQL is not installed (apt-get install postgresql); use --no-pg"
            pg = stack.enter_context(postgres(missing)) if need_pg else None
            bench = Bench(
                site, server, work, opts.workers, opts.timeout, opts.warc_check, pg, opts.shards
            )
            clean_statuses: dict[str, str] | None = None
            plan: list[tuple[int, str, Build]] = []
            for round_ in range(opts.rounds):
                for step in steps:
                    if step in ("sqlite", "postgres"):
                        plan += [
                            (round_, step, b)
                            for b in builds
                            if b is THIS or round_ < baseline_rounds
                        ]
                    elif step == "wget2" or (step == "kill" and round_ == 0):
                        plan.append((round_, step, THIS))
            for n, (round_, step, build) in enumerate(plan, 1):
                print(
                    f"[{n}/{len(plan)}] round {round_ + 1}: {step}"
                    f"{' ' + build.label if build.label else ''} …",
                    end=" ",
                    file=sys.stderr,
                    flush=True,
                )
                if step in ("sqlite", "postgres"):
                    with contextlib.ExitStack() as dbs:
                        db = (
                            dbs.enter_context(pg.database(opts.keep))
                            if pg and step == "postgres"
                            else None
                        )
                        tag = f"-r{round_ + 1}" + ("-base" if build.pythonpath else "")
                        row, statuses = bench.clean(step, db, build, tag)
                    rows.append(row)
                    assert row.check is not None
                    problems += [f"{row.tool}: {p}" for p in row.check.problems]
                    if clean_statuses is None and build is THIS:
                        clean_statuses = statuses
                    print(
                        f"{row.requests} results in {row.usage.seconds:.1f} s ({row.rate:.0f}/s,"
                        f" {row.cpu_ms:.2f} CPU ms each), load {row.load:.2f}",
                        file=sys.stderr,
                    )
                elif step == "kill":
                    with contextlib.ExitStack() as dbs:
                        db = (
                            dbs.enter_context(pg.database(opts.keep))
                            if pg and opts.kill_backend == "postgres"
                            else None
                        )
                        kill = bench.kill_test(
                            db, opts.kill_backend, clean_statuses or _statuses_of(site)
                        )
                    problems += [f"kill test: {p}" for p in kill.problems]
                    print("done", file=sys.stderr)
                else:
                    row = run_wget2(site, server, work, opts.workers, opts.timeout)
                    rows.append(row)
                    print(
                        f"{row.requests} URLs in {row.usage.seconds:.1f} s ({row.rate:.0f}/s),"
                        f" load {row.load:.2f}",
                        file=sys.stderr,
                    )
                if not opts.keep:
                    for home in work.glob("home-*"):
                        shutil.rmtree(home, ignore_errors=True)
            nginx_version = subprocess.run(
                [server.binary, "-v"], capture_output=True, text=True
            ).stderr.strip()
            pg_describe = pg.describe if pg else None
        load_after = os.getloadavg()
        run.status = report(
            opts,
            site,
            medians(rows),
            kill,
            problems,
            load_before[0],
            load_after[0],
            nginx_version,
            pg_describe,
            [b.label for b in builds[1:]],
        )
    return run.status


def _statuses_of(site: Site) -> dict[str, str]:
    return {url: site.status(i) for i, url in enumerate(site.urls)}


def report(
    opts: argparse.Namespace,
    site: Site,
    rows: list[Row],
    kill: KillTest | None,
    problems: list[str],
    load_before: float,
    load_after: float,
    nginx_version: str,
    pg_describe: str | None,
    baselines: Sequence[str] = (),
) -> int:
    now = datetime.datetime.now().astimezone()
    wget2 = next((r for r in rows if r.tool == "wget2"), None)
    own_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    wget2_version = ""
    if shutil.which("wget2"):
        out = subprocess.run(["wget2", "--version"], capture_output=True, text=True).stdout
        wget2_version = out.split("\n", 1)[0].removeprefix("GNU Wget2 ").split(" - ")[0]
    print(
        f"\nIngest benchmark, {now:%Y-%m-%d %H:%M %Z}: {len(site.urls)} requests on {site.hosts}"
        f" hosts, -w {opts.workers}, --delay 0; {os.cpu_count()} CPUs,"
        f" {python_build()}, SQLite {sqlite3.sqlite_version}, {nginx_version},"
        f" wget2 {wget2_version or '-'}; thresher {thresher_version()}"
        + "".join(f"; baseline thresher{b}" for b in baselines)
        + f"; {opts.rounds} round(s), --shards {opts.shards}"
    )
    print(f"CPU: {cpu_model()}")
    if pg_describe:
        print(pg_describe)
    expected = site.expected_statuses()
    print(
        f"site: {site.pdfs} PDFs ({site.pdf_bytes / 2**20:.0f} MiB), {site.html_pages} HTML pages,"
        f" {len(site.bodies)} distinct bodies, {site.fetches} fetches for a clean ingest;"
        f" expected statuses {json.dumps(expected, sort_keys=True)}"
    )
    print(
        f"load average (1 min) before: {load_before:.2f}, after: {load_after:.2f};"
        f" this script's own peak RSS {own_rss:.0f} MiB\n"
    )
    print(table(rows, wget2, [kill.first, kill.second] if kill is not None else []))
    print()
    for line in targets(rows):
        print(line)
    print()
    if wget2 is not None:
        for r in rows:
            if r is not wget2:
                print(
                    f"{r.tool} / wget2 requests/s: {r.rate / wget2.rate:.2f} — raw fetch of the"
                    " base URLs only; wget2 does not follow landing pages or sniff"
                )
    for r in rows:
        if r.check is not None:
            c = r.check
            same = c.statuses == expected
            print(
                f"{r.tool}: {c.results} results, statuses {json.dumps(c.statuses, sort_keys=True)}"
                f" ({'= the site' if same else 'NOT the site'}), {c.file_meta} file_meta rows"
                f" (site: {len(site.bodies)})"
                + (f", {c.warc_records} WARC response records" if c.warc_records else "")
                + f"; nginx served {r.nginx_requests} (a clean ingest: {site.fetches}"
                f" + {site.hosts} robots.txt); checked in {c.seconds:.1f} s"
            )
        for note in r.notes:
            print(f"{r.tool}: {note}")
    if kill is not None:
        print(kill.line())
    for problem in problems:
        print(f"PROBLEM: {problem}")
    opts.results.write_text(
        json.dumps(
            {
                "date": now.isoformat(timespec="seconds"),
                "requests": len(site.urls),
                "hosts": site.hosts,
                "workers": opts.workers,
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "nginx": nginx_version,
                "wget2": wget2_version,
                "postgres": pg_describe,
                "load_before": load_before,
                "load_after": load_after,
                "rounds": opts.rounds,
                "shards": opts.shards,
                "baselines": list(baselines),
                "cpu_model": cpu_model(),
                "targets": targets(rows),
                "site": {
                    "kinds": dict(collections.Counter(site.kinds)),
                    "expected_statuses": expected,
                    "pdfs": site.pdfs,
                    "pdf_bytes": site.pdf_bytes,
                    "html_pages": site.html_pages,
                    "html_bytes": site.html_bytes,
                    "distinct_bodies": len(site.bodies),
                    "fetches": site.fetches,
                },
                "rows": [_row_json(r) for r in rows],
                "kill_test": None
                if kill is None
                else {
                    "backend": kill.label,
                    "at_kill": kill.at_kill,
                    "first": _row_json(kill.first),
                    "second": _row_json(kill.second),
                    "fetched_twice": kill.fetched_twice,
                    "fetched_twice_base": kill.fetched_twice_base,
                    "more_than_twice": kill.more_than_twice,
                    "problems": kill.problems,
                },
                "problems": problems,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"\nwritten to {opts.results}", file=sys.stderr)
    return 1 if problems else 0


def _row_json(r: Row) -> dict[str, Any]:
    return {
        "tool": r.tool,
        "requests": r.requests,
        "requests_per_second": r.rate,
        "cpu_ms_per_request": r.cpu_ms,
        "load": r.load,
        "rounds_requests_per_second": [x.rate for x in r.rounds],
        "rounds_seconds": [x.usage.seconds for x in r.rounds],
        "usage": asdict(r.usage),
        "cpu_seconds": r.usage.cpu,
        "peak_rss_mib": r.usage.peak_rss_kib / 1024,
        "nginx_requests": r.nginx_requests,
        "nginx_cpu": r.nginx_cpu,
        "db_cpu": r.db_cpu,
        "report": r.report,
        "check": asdict(r.check) if r.check else None,
        "notes": r.notes,
    }


if __name__ == "__main__":
    sys.exit(main())
