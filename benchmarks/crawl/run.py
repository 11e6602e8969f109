"""Crawl throughput: Thresher, Scrapy and wget2 side by side on one synthetic site.

Builds a deterministic site on loopback (by default 20 000 HTML pages of 10-20 KB with
10-30 links each, spread over 20 host names 127.0.0.1 … 127.0.0.20), serves it with a
private nginx, then crawls it with each crawler in turn from the same seeds (every host's
root page), with no politeness delay and the same concurrency, and prints pages/s, CPU
seconds, peak RSS and pages fetched, and how Thresher compares. That site has no page
requisites: Thresher crawls it with --no-requisites (and --no-sitemaps), as wget2
without --page-requisites.

With --site requisites the pages also embed what real pages do: per host a stylesheet
(that imports another and loads a font and images), a script, a favicon and a logo; a
"CDN" host outside the crawl's scope (127.0.0.21) with a library script and a
stylesheet of icons; and an image of its own on every page (with a 2x srcset candidate
on every fourth). Thresher crawls it with its requisites on, wget2 with
--page-requisites; Scrapy, which fetches no requisites, is left out by default. pages/s
counts the HTML pages; the requisites fetched are shown beside them.

    python3 benchmarks/crawl/run.py                       # 20000 pages, concurrency 32
    python3 benchmarks/crawl/run.py --pages 2000          # a quick run
    python3 benchmarks/crawl/run.py --only scrapy,wget2 --concurrency 16
    python3 benchmarks/crawl/run.py --site requisites --pages 5000

Needs nginx and wget2 (Debian packages `nginx`, `wget2`). Scrapy is installed from PyPI
into a venv of its own (benchmarks/crawl/.venv-peers) on first use; it is never a
dependency of Thresher. The results also go to benchmarks/crawl/results.json.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gzip
import json
import multiprocessing
import os
import platform
import random
import re
import resource
import shlex
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

# The modules shared by the benchmark scripts, from the folder above.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchlib import (
    BenchError,
    bench_run,
    child_env,
    find_program,
    free_port,
    measure_tree,
    nginx_process,
    peer_venv,
    python_build,
    thresher_version,
)
from procstats import tree_cpu_seconds

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PEERS_VENV = HERE / ".venv-peers"
SCRAPY_REQUIREMENT = "scrapy>=2.11,<3"
SPIDER_TEMPLATE = HERE / "scrapy_spider.py.in"
RESULTS = HERE / "results.json"
RESULTS_REQUISITES = HERE / "results-requisites.json"
CRAWLERS = ("thresher", "thresher-1shard", "scrapy", "wget2")
HOSTS = 20
SEED = 20261130  # of the site's random generator: the same site on every run
USER_AGENT = "thresher-crawl-bench/1"


# --- the site ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Site:
    """Page i lives on host 127.0.0.(i % hosts + 1): pages 0 … hosts-1 are the hosts'
    root pages (``/``, the seeds), every other page is ``/p/{i}.html``."""

    docroot: Path  # one folder per host address, as nginx's root is docroot/$server_addr
    port: int
    pages: int
    hosts: int = HOSTS
    requisites: bool = False  # pages embed stylesheets, scripts, images (see the docstring)

    def host(self, i: int) -> str:
        return f"127.0.0.{i % self.hosts + 1}"

    def path(self, i: int) -> str:
        return "/" if i < self.hosts else f"/p/{i}.html"

    def url(self, i: int) -> str:
        return f"http://{self.host(i)}:{self.port}{self.path(i)}"

    def file(self, i: int) -> Path:
        return self.docroot / self.host(i) / ("index.html" if i < self.hosts else f"p/{i}.html")

    @property
    def seeds(self) -> list[str]:
        return [self.url(i) for i in range(self.hosts)]

    @property
    def cdn(self) -> str:
        """The address of the host of shared assets (outside the crawl's scope)."""
        return f"127.0.0.{self.hosts + 1}"

    def addresses(self) -> list[str]:
        return [f"127.0.0.{h}" for h in range(1, self.hosts + 1 + self.requisites)]

    def page_urls(self) -> set[str]:
        return {self.url(i) for i in range(self.pages)}

    def asset_urls(self) -> set[str]:
        """The requisites of the pages (none unless `requisites`)."""
        if not self.requisites:
            return set()
        urls = {
            f"http://{self.host(h)}:{self.port}{path}"
            for h in range(self.hosts)
            for path in HOST_ASSETS
        }
        urls |= {f"http://{self.cdn}:{self.port}{path}" for path in CDN_ASSETS}
        for i in range(self.pages):
            base = f"http://{self.host(i)}:{self.port}"
            urls.add(f"{base}/img/p{i}.png")
            if i % 4 == 0:
                urls.add(f"{base}/img/p{i}@2x.png")
        return urls

    def all_urls(self) -> set[str]:
        return self.page_urls() | self.asset_urls()


_SYLLABLES = (
    "ka", "ro", "mi", "ten", "sa", "lo", "ve", "dur", "an", "is", "pel", "tho", "rin", "gar",
    "mu", "ne", "sol", "vi", "qua", "bes", "tor", "ly", "fen",
)  # fmt: skip


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 4)))


# Each host's shared requisites, and the CDN's (paths -> contents, {cdn} filled in).
HOST_ASSETS: dict[str, str | None] = {
    "/static/site.css": (
        '@import "theme.css";\nbody { background: #fdfdf8 url(/img/bg.png) repeat-x; }\n'
        "@font-face { font-family: Body; src: url(/static/body.woff2) format('woff2'); }\n"
        "main { font: 16px/1.5 Body, serif; max-width: 48em; margin: auto; }\n"
    ),
    "/static/theme.css": "h1 { background: url(../img/rule.png) bottom repeat-x; }\n",
    "/static/app.js": "document.documentElement.classList.add('js');\n",
    "/favicon.ico": None,
    "/img/logo.svg": '<svg xmlns="http://www.w3.org/2000/svg" width="8" height="8"/>',
    "/img/bg.png": None,
    "/img/rule.png": None,
    "/static/body.woff2": None,
}
CDN_ASSETS: dict[str, str | None] = {
    "/lib/lib.js": "window.lib = {};\n",
    "/lib/icons.css": ".icon { background: url(icons.svg) no-repeat; }\n",
    "/lib/icons.svg": '<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16"/>',
}


def _write_asset(path: Path, content: str | None, rng: random.Random, size: int) -> int:
    data = content.encode() if content is not None else b"\x89PNG\r\n\x1a\n" + rng.randbytes(size)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return len(data)


def build_site(
    docroot: Path, port: int, pages: int, hosts: int = HOSTS, requisites: bool = False
) -> tuple[Site, int]:
    """Write the site's files; (the site, total bytes of HTML and requisites).

    Deterministic for a given (pages, hosts, port). Every page is reachable from the seeds:
    page i links to page i+1, and to 9-29 others picked at random (40 % on its own host,
    written as a path, the rest anywhere, written as absolute URLs; one link in ten has a
    #fragment). Every page also links to one page outside the site, which each crawler
    must leave alone.
    """
    if pages < hosts:
        raise BenchError(f"--pages must be at least {hosts} (one root page per host)")
    site = Site(docroot, port, pages, hosts, requisites)
    rng = random.Random(SEED)
    vocabulary = [_word(rng) for _ in range(4000)]
    paragraphs = [
        " ".join(rng.choice(vocabulary) for _ in range(rng.randint(30, 120))).capitalize() + "."
        for _ in range(600)
    ]
    for h in range(hosts):
        (docroot / site.host(h) / "p").mkdir(parents=True, exist_ok=True)
        (docroot / site.host(h) / "robots.txt").write_text("User-agent: *\nAllow: /\n")
    total = 0
    if requisites:
        assets = random.Random(SEED + 1)
        (docroot / site.cdn).mkdir(parents=True, exist_ok=True)
        (docroot / site.cdn / "robots.txt").write_text("User-agent: *\nAllow: /\n")
        for path, content in CDN_ASSETS.items():
            total += _write_asset(docroot / site.cdn / path[1:], content, assets, 0)
        for h in range(hosts):
            for path, content in HOST_ASSETS.items():
                total += _write_asset(docroot / site.host(h) / path[1:], content, assets, 3000)
        for i in range(pages):
            img = docroot / site.host(i) / "img"
            total += _write_asset(img / f"p{i}.png", None, assets, 2000)
            if i % 4 == 0:
                total += _write_asset(img / f"p{i}@2x.png", None, assets, 6000)
    for i in range(pages):
        html = _page(site, i, rng, vocabulary, paragraphs)
        data = html.encode()
        site.file(i).write_bytes(data)
        total += len(data)
    return site, total


def _page(
    site: Site, i: int, rng: random.Random, vocabulary: list[str], paragraphs: list[str]
) -> str:
    hosts, pages = site.hosts, site.pages
    targets = [(i + 1) % pages]
    for _ in range(rng.randint(10, 30) - 1):
        if rng.random() < 0.4:  # same host
            h = i % hosts
            targets.append(h + hosts * rng.randrange((pages - h + hosts - 1) // hosts))
        else:
            targets.append(rng.randrange(pages))
    links = []
    for j in targets:
        href = site.path(j) if site.host(j) == site.host(i) else site.url(j)
        if rng.random() < 0.1:
            href += f"#s{rng.randint(1, 9)}"
        text = " ".join(rng.choice(vocabulary) for _ in range(rng.randint(1, 4)))
        links.append(f'<a href="{href}">{text}</a>')
    title = " ".join(rng.choice(vocabulary) for _ in range(rng.randint(3, 7))).capitalize()
    embeds, logo, figure = "", "", ""
    if site.requisites:
        cdn = f"http://{site.cdn}:{site.port}"
        embeds = (
            '<link rel="stylesheet" href="/static/site.css">\n'
            f'<link rel="stylesheet" href="{cdn}/lib/icons.css">\n'
            '<link rel="icon" href="/favicon.ico">\n'
            f'<script src="{cdn}/lib/lib.js"></script>\n'
            '<script src="/static/app.js" defer></script>\n'
        )
        srcset = f' srcset="/img/p{i}@2x.png 2x"' if i % 4 == 0 else ""
        logo = '<img src="/img/logo.svg" alt="" class="logo">'
        figure = f'<figure><img src="/img/p{i}.png"{srcset} alt="figure {i}"></figure>\n'
    head = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{title} — page {i}</title>\n"
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"{embeds}</head>\n<body>\n<header>{logo}<nav>{' | '.join(links[:3])}</nav></header>\n"
        f"<main>\n<h1>{title}</h1>\n{figure}"
    )
    # The requisites site has no link out of it: with --page-requisites, wget2 1.99 asks
    # the hosts of links it will not follow for robots.txt, retrying for minutes where
    # there is no answer (this machine has no DNS, nothing listens elsewhere).
    elsewhere = (
        ""
        if site.requisites
        else 'Elsewhere: <a href="http://www.example.org/elsewhere.html">example</a>. '
    )
    foot = f"</main>\n<footer><p>{elsewhere}Page {i} of {pages}.</p></footer>\n</body>\n</html>\n"
    target = rng.randint(10_000, 20_000)
    rest = links[3:]
    body: list[str] = []
    size = len(head) + len(foot)
    while size < target or rest:
        text = rng.choice(paragraphs)
        if size + len(text) > target and not rest:
            text = text[: max(0, target - size - 8)] + "."
        if rest:
            cut = rng.randrange(len(text))
            cut = text.rfind(" ", 0, cut) + 1
            text = f"{text[:cut]}{rest.pop()} {text[cut:]}"
        block = f"<p>{text}</p>\n"
        body.append(block)
        size += len(block)
        if rng.random() < 0.1:
            heading = f'<h2 id="s{len(body)}">{rng.choice(vocabulary).capitalize()}</h2>\n'
            body.append(heading)
            size += len(heading)
    return head + "".join(body) + foot


# --- nginx ------------------------------------------------------------------------------


@contextlib.contextmanager
def nginx(site: Site, work: Path) -> Iterator[Nginx]:
    """A private nginx serving `site` on every host address; its own config and files in
    `work`. Its workers run as `nobody` when we are root, so the site is world-readable."""
    for path in (work, site.docroot):
        path.chmod(0o755)
    status_port = free_port()
    listens = "".join(f"        listen {address}:{site.port};\n" for address in site.addresses())
    http = f"""    access_log off;
    types {{
        text/html html; text/plain txt; text/css css; text/javascript js; image/png png;
        image/svg+xml svg; image/x-icon ico; font/woff2 woff2;
    }}
    default_type application/octet-stream;
    charset utf-8;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    keepalive_timeout 60s;
    server {{
{listens}        root {site.docroot}/$server_addr;
        index index.html;
    }}
    server {{
        listen 127.0.0.1:{status_port};
        location / {{ stub_status; }}
    }}
"""

    def ready() -> None:
        served(status_port)
        for address in site.addresses():
            socket.create_connection((address, site.port), timeout=1).close()

    with nginx_process(work / "nginx", http, ready, connections=4096) as (proc, binary):
        yield Nginx(proc, status_port, binary)


def served(status_port: int) -> int:
    """Requests nginx has served so far (stub_status), not counting this one."""
    with socket.create_connection(("127.0.0.1", status_port), timeout=5) as s:
        s.sendall(b"GET / HTTP/1.0\r\nHost: status\r\n\r\n")
        data = b""
        while chunk := s.recv(4096):
            data += chunk
    m = re.search(rb"\n\s*(\d+)\s+(\d+)\s+(\d+)\s*\n", data)
    if not m:
        raise OSError(f"unexpected stub_status answer: {data!r}")
    return int(m.group(3)) - 1


@dataclass
class Nginx:
    proc: subprocess.Popen[bytes]
    status_port: int
    binary: str

    def requests(self) -> int:
        return served(self.status_port)

    def cpu_seconds(self) -> float:
        """User + system CPU of the master and its workers (from /proc)."""
        return tree_cpu_seconds(self.proc.pid)


# --- measuring a crawler process tree ---------------------------------------------------
@dataclass
class Usage:
    seconds: float  # wall time, process start to exit
    cpu_user: float  # of the process and every descendant it waited for
    cpu_system: float
    maxrss_kib: int  # ru_maxrss from wait4: at least this script's RSS (see measure_tree)
    hwm_kib: int  # the largest VmHWM of a process of the tree, sampled every 0.05 s
    tree_rss_kib: int  # peak of the summed RSS of the live tree, sampled likewise
    tree_pss_kib: int  # peak of the summed PSS of the live tree, sampled likewise
    processes: int  # most processes alive at once in the tree (sampled)
    returncode: int

    @property
    def cpu(self) -> float:
        return self.cpu_user + self.cpu_system

    @property
    def peak_rss_kib(self) -> int:
        """The largest process's peak RSS or, when the tree had several processes at once
        and they needed more together, their peak summed PSS (shared pages counted once)."""
        return max(self.hwm_kib, self.tree_pss_kib)


def run_measured(
    cmd: Sequence[str], cwd: Path, log: Path, timeout: float, env: dict[str, str] | None = None
) -> Usage:
    """Run `cmd` to its end, its output in `log`; wall time, CPU and memory of it and its
    descendants (see benchlib.measure_tree)."""
    with open(log, "wb") as out:
        started = time.perf_counter()
        proc = subprocess.Popen(
            list(cmd), cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env,
            start_new_session=True,
        )  # fmt: skip
    too_long = f"{cmd[0]} took longer than {timeout:.0f} s; see {log}"
    m = measure_tree(proc, started, timeout, too_long)
    return Usage(
        seconds=m.seconds,
        cpu_user=m.rusage.ru_utime,
        cpu_system=m.rusage.ru_stime,
        maxrss_kib=m.rusage.ru_maxrss,
        hwm_kib=m.hwm_kib,
        tree_rss_kib=m.tree_rss_kib,
        tree_pss_kib=m.tree_pss_kib,
        processes=m.processes,
        returncode=m.returncode,
    )


# --- the crawlers -----------------------------------------------------------------------


@dataclass
class Row:
    crawler: str
    version: str
    command: list[str]
    usage: Usage
    pages: int  # pages of the site fetched with status 200, as the crawler reports them
    requests: int  # requests nginx served during the crawl (robots.txt included)
    server_cpu: float  # nginx's CPU seconds during the crawl
    missing: list[str] = field(default_factory=list)  # site pages the crawler did not get
    extra: list[str] = field(default_factory=list)  # fetched URLs that are not site pages
    notes: list[str] = field(default_factory=list)
    urls_compared: bool = False  # whether the fetched URLs were checked, not just counted
    requisites: int = 0  # the site's page requisites fetched (--site requisites)

    @property
    def rate(self) -> float:
        return self.pages / self.usage.seconds if self.usage.seconds else 0.0


@dataclass
class Fetched:
    pages: int
    urls: set[str] | None  # the URLs, when the crawler's output lets us list them
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Crawl:
    site: Site
    concurrency: int
    out: Path  # an empty folder for the crawler's output
    timeout: float


class Crawler:
    name = ""

    def available(self) -> str | None:
        """None when the crawler can run, else why not."""
        return None

    def version(self) -> str:
        raise NotImplementedError

    def command(self, crawl: Crawl) -> tuple[list[str], dict[str, str] | None]:
        raise NotImplementedError

    def fetched(self, crawl: Crawl, log: Path) -> Fetched:
        raise NotImplementedError


class Thresher(Crawler):
    extra_args: ClassVar[list[str]] = []  # --thresher-args, for experiments

    name = "thresher"
    # One shard per core: hosts split over processes, as the issue allows for using both.
    shards = os.cpu_count() or 1

    help = ""

    def available(self) -> str | None:
        proc = subprocess.run(
            [sys.executable, "-m", "thresher", "crawl", "--help"],
            capture_output=True,
            text=True,
            env=child_env(),
            timeout=120,
        )
        self.help = proc.stdout
        return None if proc.returncode == 0 else "this thresher has no `crawl` command yet"

    def version(self) -> str:
        return thresher_version()

    def command(self, crawl: Crawl) -> tuple[list[str], dict[str, str] | None]:
        pages = crawl.site.pages
        cmd = [
            sys.executable, "-m", "thresher", "--home", str(crawl.out / "home"), "crawl",
            *crawl.site.seeds,
            "--scope", "host",  # the seeds' hosts: all 20
            "--max-pages", str(10 * pages),
            "--max-depth", str(min(pages, 10_000)),  # the i -> i+1 chain bounds depth
            "--max-per-host", str(10 * pages),
            "--delay", "0",
            "--concurrency", str(crawl.concurrency),
            "--user-agent", USER_AGENT,
            "--allow-private",
            "--json",
        ]  # fmt: skip
        if "--host-connections" in self.help:  # as Scrapy's CONCURRENT_REQUESTS_PER_DOMAIN
            cmd += ["--host-connections", str(crawl.concurrency)]
        if "--no-progress" in self.help:
            cmd.append("--no-progress")
        if "--shards" in self.help:
            cmd += ["--shards", str(self.shards)]
        if "--no-requisites" in self.help:
            # On for the site with requisites; the site without has none, and asking for
            # them would only cost the parse of elements that are not there.
            cmd.append("--requisites" if crawl.site.requisites else "--no-requisites")
        if "--no-sitemaps" in self.help:
            cmd.append("--no-sitemaps")  # the site has none: no /sitemap.xml 404s to count
        return cmd + self.extra_args, child_env()

    def fetched(self, crawl: Crawl, log: Path) -> Fetched:
        summary: dict[str, Any] | None = None
        for line in reversed(log.read_text(errors="replace").splitlines()):
            if line.startswith("{"):
                with contextlib.suppress(ValueError):
                    summary = json.loads(line)
                    break
        if summary is None:
            raise BenchError(f"thresher printed no JSON summary; see {log}")
        flat = {k: v for k, v in summary.items() if not isinstance(v, dict | list)}
        notes = [f"summary: {', '.join(f'{k} {v}' for k, v in flat.items())}"]
        urls = warc_urls(crawl.out / "home")
        if urls is None:
            notes.append("no readable WARC file: page URLs not checked")
        return Fetched(int(summary["pages"]), urls, notes)


def warc_urls(home: Path) -> set[str] | None:
    """Target URIs of the status-200 response (and revisit) records of every WARC file
    under `home`."""
    files = sorted(p for p in home.rglob("*.warc*") if p.is_file())
    if not files:
        return None
    urls: set[str] = set()
    for path in files:
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rb") as f:
            while True:
                line = f.readline()
                if not line:
                    break
                if not line.startswith(b"WARC/"):
                    continue
                headers: dict[bytes, bytes] = {}
                while (line := f.readline()).strip():
                    name, _, value = line.partition(b":")
                    headers[name.strip().lower()] = value.strip()
                length = int(headers.get(b"content-length", b"0"))
                block = f.read(length)
                # A revisit is a capture too: its payload equals an earlier record's (the
                # same logo on every host of the requisites site).
                if headers.get(b"warc-type") in (b"response", b"revisit"):
                    status = block.split(b"\r\n", 1)[0].split()
                    uri = headers.get(b"warc-target-uri", b"").strip(b"<>").decode()
                    if len(status) > 1 and status[1] == b"200" and not uri.endswith("/robots.txt"):
                        urls.add(uri)
    return urls


class Scrapy(Crawler):
    name = "scrapy"

    @property
    def python(self) -> Path:
        return PEERS_VENV / "bin" / "python"

    def available(self) -> str | None:
        return peer_venv(PEERS_VENV, SCRAPY_REQUIREMENT, "import scrapy")

    def version(self) -> str:
        out = subprocess.run(
            [self.python, "-c", "import scrapy, twisted, sys; print(scrapy.__version__,"
             " 'Twisted', twisted.__version__, 'Python', sys.version.split()[0])"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        return out.stdout.strip()

    def command(self, crawl: Crawl) -> tuple[list[str], dict[str, str] | None]:
        spider = crawl.out / "spider.py"
        shutil.copyfile(SPIDER_TEMPLATE, spider)
        seeds = crawl.out / "seeds.txt"
        seeds.write_text("".join(f"{u}\n" for u in crawl.site.seeds))
        n = str(crawl.concurrency)
        settings = {
            "CONCURRENT_REQUESTS": n,
            "CONCURRENT_REQUESTS_PER_DOMAIN": n,
            "CONCURRENT_REQUESTS_PER_IP": "0",  # 0: the per-domain limit applies
            "DOWNLOAD_DELAY": "0",
            "RANDOMIZE_DOWNLOAD_DELAY": "False",
            "AUTOTHROTTLE_ENABLED": "False",
            "ROBOTSTXT_OBEY": "True",
            "HTTPCACHE_ENABLED": "False",
            "DEPTH_LIMIT": "0",
            "LOG_LEVEL": "INFO",
            "TELNETCONSOLE_ENABLED": "False",
            "REMOTE_CONTROL_ENABLED": "False",  # Scrapy 2.19+; older ones ignore it
            "USER_AGENT": USER_AGENT,
        }
        cmd = [str(PEERS_VENV / "bin" / "scrapy"), "runspider", str(spider)]
        cmd += ["-a", f"seeds={seeds}", "-a", f"out={crawl.out / 'scrapy.json'}"]
        for key, value in settings.items():
            cmd += ["-s", f"{key}={value}"]
        return cmd, None

    def fetched(self, crawl: Crawl, log: Path) -> Fetched:
        try:
            report = json.loads((crawl.out / "scrapy.json").read_text())
        except (OSError, ValueError) as exc:
            raise BenchError(f"the spider wrote no report ({exc}); see {log}") from None
        stats = report["stats"]
        notes = [
            f"finish_reason {report['reason']}, responses {stats.get('response_received_count')},"
            f" robots.txt {stats.get('robotstxt/request_count')},"
            f" duplicates filtered {stats.get('dupefilter/filtered')},"
            f" offsite filtered {stats.get('offsite/filtered')},"
            f" memusage/max {stats.get('memusage/max', 0) // 2**20} MiB"
        ]
        urls = set(report["urls"])
        twice = int(report["pages"]) - len(urls)
        if twice:
            notes.append(
                f"{twice} pages fetched twice: start_urls are requested with dont_filter=True, so"
                " the duplicate filter does not record them and links back to them fetch them again"
            )
        return Fetched(int(report["pages"]), urls, notes)


class Wget2(Crawler):
    name = "wget2"

    def available(self) -> str | None:
        return None if shutil.which("wget2") else "wget2 is not installed: apt-get install wget2"

    def version(self) -> str:
        out = subprocess.run(["wget2", "--version"], capture_output=True, text=True)
        return out.stdout.split("\n", 1)[0].removeprefix("GNU Wget2 ").split(" - ")[0]

    def command(self, crawl: Crawl) -> tuple[list[str], dict[str, str] | None]:
        hosts = ",".join(sorted({crawl.site.host(h) for h in range(crawl.site.hosts)}))
        extra = ["--no-parent"]
        if crawl.site.requisites:
            # wget2 keeps requisites to --domains too: the CDN is named (it has no page to
            # crawl). --no-parent goes: wget2 1.99 applies it to requisites of a host
            # without a seed ("parent ascending not allowed"), and the seeds are roots.
            hosts += f",{crawl.site.cdn}"
            extra = ["--page-requisites"]
        cmd = [
            "wget2", "--recursive", "--level=inf", "--span-hosts", f"--domains={hosts}",
            "--robots=on", f"--max-threads={crawl.concurrency}",
            "--no-verbose", f"--user-agent={USER_AGENT}", "-P", str(crawl.out / "files"),
            *extra, *crawl.site.seeds,
        ]  # fmt: skip
        return cmd, None

    def fetched(self, crawl: Crawl, log: Path) -> Fetched:
        """The saved pages, mapped back to URLs (robots.txt files left out)."""
        base = crawl.out / "files"
        urls: set[str] = set()
        for path in base.rglob("*"):
            if path.is_file() and path.name != "robots.txt":
                rel = path.relative_to(base).as_posix()
                host, _, rest = rel.partition("/")
                if ":" not in host:
                    host += f":{crawl.site.port}"
                rest = "" if rest == "index.html" else rest
                urls.add(f"http://{host}/{rest}")
        return Fetched(len(urls), urls)


class ThresherOneShard(Thresher):
    """Thresher in one process: what a single core of it does."""

    name = "thresher-1shard"
    shards = 1


ALL: dict[str, Crawler] = {c.name: c for c in (Thresher(), ThresherOneShard(), Scrapy(), Wget2())}


def run_crawler(
    crawler: Crawler, site: Site, server: Nginx, work: Path, concurrency: int, timeout: float
) -> Row:
    out = work / crawler.name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    crawl = Crawl(site, concurrency, out, timeout)
    cmd, env = crawler.command(crawl)
    version = crawler.version()
    requests0, cpu0 = server.requests(), server.cpu_seconds()
    log = out / "crawler.log"
    usage = run_measured(cmd, out, log, timeout, env)
    requests = server.requests() - requests0 - 1  # our own status request in between
    server_cpu = server.cpu_seconds() - cpu0
    if usage.returncode not in (0, 8) or (usage.returncode == 8 and crawler.name != "wget2"):
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        raise BenchError(f"{crawler.name} exited {usage.returncode}; last lines of {log}:\n{tail}")
    got = crawler.fetched(crawl, log)
    row = Row(crawler.name, version, cmd, usage, got.pages, requests, server_cpu, notes=got.notes)
    if usage.returncode:
        row.notes.append(f"exit status {usage.returncode}")
    if got.urls is not None:
        want = site.all_urls()
        row.missing = sorted(want - got.urls)
        row.extra = sorted(got.urls - want)
        # Each page once, however often it was fetched; requisites apart.
        row.pages = len(site.page_urls() & got.urls)
        row.requisites = len(site.asset_urls() & got.urls)
        row.urls_compared = True
        if got.pages != row.pages:
            row.notes.append(f"it counts {got.pages} pages fetched, {len(got.urls)} distinct URLs")
    return row


# --- report -----------------------------------------------------------------------------


def _mib(kib: int) -> str:
    return f"{kib / 1024:.0f}"


def table(rows: Sequence[Row], pages: int, requisites: int = 0) -> str:
    """The results; with `requisites` (the site's count of them), a column for those."""
    extra = " requisites fetched |" if requisites else ""
    lines = [
        f"| crawler | pages fetched |{extra} requests | seconds | pages/s | CPU s (user+sys)"
        " | CPU ms/page | peak RSS MiB | processes | nginx CPU s |",
        "|---|--:|" + ("--:|" if requisites else "") + "--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in rows:
        u = r.usage
        got = f" {r.requisites} of {requisites} |" if requisites else ""
        lines.append(
            f"| {r.crawler} | {r.pages} of {pages} |{got} {r.requests}"
            f" | {u.seconds:.1f} | {r.rate:.0f} | {u.cpu:.1f} ({u.cpu_user:.1f}+{u.cpu_system:.1f})"
            f" | {1000 * u.cpu / max(1, r.pages):.2f} | {_mib(u.peak_rss_kib)}"
            f" | {u.processes} | {r.server_cpu:.1f} |"
        )
    by_name = {r.crawler: r for r in rows}
    ours = by_name.get("thresher")
    if ours is not None:
        for peer in ("scrapy", "wget2"):
            other = by_name.get(peer)
            if other is None:
                continue
            lines.append(
                f"| **Thresher / {peer}** | |{' |' if requisites else ''}"
                f" | {ours.usage.seconds / other.usage.seconds:.2f}"
                f" | **{ours.rate / other.rate:.2f}** | {ours.usage.cpu / other.usage.cpu:.2f} |"
                f" | **{ours.usage.peak_rss_kib / other.usage.peak_rss_kib:.2f}** | | |"
            )
    return "\n".join(lines)


def rounds(runs: Mapping[str, Sequence[Row]], peer: str) -> str | None:
    """How Thresher did against `peer` round by round (each round runs them one after the
    other, so a slow moment of the machine falls on both), and best run against best run."""
    ours, theirs = runs.get("thresher", ()), runs.get(peer, ())
    if len(ours) < 2 or len(ours) != len(theirs):
        return None
    won = sum(a.usage.seconds < b.usage.seconds for a, b in zip(ours, theirs, strict=True))
    best = min(r.usage.seconds for r in ours)
    their_best = min(r.usage.seconds for r in theirs)
    return (
        f"faster than {peer} in {won} of {len(ours)} rounds; best runs {best:.1f} s against"
        f" {their_best:.1f} s ({their_best / best:.2f}x its pages/s)"
    )


def targets(rows: Sequence[Row], runs: Mapping[str, Sequence[Row]]) -> list[str]:
    by_name = {r.crawler: r for r in rows}
    ours, scrapy, wget2 = (by_name.get(n) for n in ("thresher", "scrapy", "wget2"))
    if ours is None:
        return []
    out = []
    if scrapy is not None:
        ratio = ours.rate / scrapy.rate
        out.append(f"pages/s >= 5x Scrapy's: {ratio:.2f}x, {'met' if ratio >= 5 else 'NOT met'}")
        rss = ours.usage.peak_rss_kib / scrapy.usage.peak_rss_kib
        out.append(f"peak RSS <= Scrapy's: {rss:.2f}x, {'met' if rss <= 1 else 'NOT met'}")
    if wget2 is not None:
        ratio = ours.rate / wget2.rate
        verdict = "met" if ratio >= 1 else "NOT met"
        line = f"pages/s >= wget2's: {ratio:.2f}x, {verdict} by the medians"
        paired = rounds(runs, "wget2")
        out.append(f"{line}; {paired}" if paired else line)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pages", type=int, default=20000, help="pages in the site (20000)")
    parser.add_argument(
        "--concurrency", type=int, default=32, help="requests in flight, every crawler (32)"
    )
    parser.add_argument(
        "--site",
        choices=("pages", "requisites"),
        default="pages",
        help="pages: HTML pages only; requisites: pages that embed images, stylesheets and"
        " scripts, some on a host outside the scope (pages)",
    )
    parser.add_argument(
        "--only",
        default=None,
        help="crawlers to run, in order (all; thresher,wget2 for --site requisites)",
    )
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per crawler (1800)")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="crawl this many rounds, the crawlers in turn; each one's median run is shown (1)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work folder, print it")
    parser.add_argument(
        "--thresher-args", default="", help="more arguments for 'thresher crawl' (experiments)"
    )
    parser.add_argument(
        "--results",
        type=Path,
        default=None,
        help=f"JSON results file ({RESULTS.name}; {RESULTS_REQUISITES.name} for requisites)",
    )
    opts = parser.parse_args(argv)
    requisites = opts.site == "requisites"
    if opts.only is None:
        opts.only = "thresher,wget2" if requisites else ",".join(CRAWLERS)
    if opts.results is None:
        opts.results = RESULTS_REQUISITES if requisites else RESULTS
    Thresher.extra_args = shlex.split(opts.thresher_args)
    names = [n.strip() for n in opts.only.split(",") if n.strip()]
    if not names or any(n not in ALL for n in names):
        parser.error(f"--only takes a comma-separated list of {', '.join(CRAWLERS)}")
    if opts.concurrency < 1:
        parser.error("--concurrency must be positive")

    rows: list[Row] = []
    skipped: dict[str, str] = {}
    with bench_run("thresher-crawl-bench-", opts.keep) as run:
        work = run.work
        crawlers = []
        for name in names:
            why = ALL[name].available()
            if why:
                skipped[name] = why
                print(f"skipping {name}: {why}", file=sys.stderr)
            else:
                crawlers.append(ALL[name])
        find_program("nginx", "nginx")
        started = time.perf_counter()
        # In a child process, so that this one stays small (it forks the crawlers).
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            site, size = pool.submit(
                build_site,
                work / "site",
                free_port(HOSTS + requisites),
                opts.pages,
                HOSTS,
                requisites,
            ).result()
        print(
            f"site: {site.pages} pages, {size / 2**20:.0f} MiB on {site.hosts} hosts"
            f" (127.0.0.1-{site.hosts}, port {site.port}), built in"
            f" {time.perf_counter() - started:.1f} s",
            file=sys.stderr,
        )
        load_before = os.getloadavg()
        runs: dict[str, list[Row]] = {c.name: [] for c in crawlers}
        with nginx(site, work) as server:
            # Round after round, each crawler in turn: the machine's slow moments (wget2's
            # 20 000 file creations vary 3x here) fall on every crawler alike.
            for round_ in range(1, opts.repeat + 1):
                for n, crawler in enumerate(crawlers, 1):
                    print(
                        f"[{round_}.{n}/{opts.repeat}.{len(crawlers)}] {crawler.name} …",
                        end=" ",
                        file=sys.stderr,
                    )
                    sys.stderr.flush()
                    row = run_crawler(crawler, site, server, work, opts.concurrency, opts.timeout)
                    print(
                        f"{row.pages} pages in {row.usage.seconds:.1f} s ({row.rate:.0f}/s)",
                        file=sys.stderr,
                    )
                    runs[crawler.name].append(row)
                    if not opts.keep:
                        shutil.rmtree(work / crawler.name, ignore_errors=True)
            nginx_version = subprocess.run(
                [server.binary, "-v"], capture_output=True, text=True
            ).stderr.strip()
        load_after = os.getloadavg()
        for done in runs.values():
            ranked = sorted(done, key=lambda r: r.usage.seconds)
            row = ranked[len(ranked) // 2]  # of two middle rounds, the slower
            if len(done) > 1:
                each = ", ".join(f"{r.usage.seconds:.1f}" for r in done)
                row.notes.append(f"the median of {len(done)} runs: {each} s")
            rows.append(row)
        own_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        assets = len(site.asset_urls())
        now = datetime.datetime.now().astimezone()
        print(
            f"\nCrawl benchmark, {now:%Y-%m-%d %H:%M %Z}: {site.pages} pages"
            + (f" and {assets} requisites (on {site.hosts + 1} hosts)" if assets else "")
            + f" ({size / 2**20:.0f} MiB) on {site.hosts} hosts, concurrency {opts.concurrency},"
            " no delays;"
            f" {os.cpu_count()} CPUs, {python_build()}, {nginx_version}"
        )
        print(
            f"Load average (1 min) before: {load_before[0]:.2f}, after: {load_after[0]:.2f};"
            f" this script's own peak RSS {own_rss:.0f} MiB"
        )
        for r in rows:
            print(f"  {r.crawler}: {r.version}")
        print()
        print(table(rows, site.pages, assets))
        print()
        for r in rows:
            if r.pages != site.pages or r.requisites != assets or r.missing or r.extra:
                run.status = 1
                print(
                    f"{r.crawler} did not fetch exactly the site's pages: {r.pages} fetched"
                    + (f", {r.requisites} of {assets} requisites" if assets else "")
                )
                if r.missing:
                    print(f"  {len(r.missing)} missing, e.g. {', '.join(r.missing[:3])}")
                if r.extra:
                    print(f"  {len(r.extra)} not in the site, e.g. {', '.join(r.extra[:3])}")
            else:
                how = "its URLs compared" if r.urls_compared else "counted, URLs not listed"
                what = f" and {assets} requisites" if assets else ""
                print(f"{r.crawler}: fetched exactly the site's {site.pages} pages{what} ({how})")
            for note in r.notes:
                print(f"{r.crawler}: {note}")
        for line in targets(rows, runs):
            print(f"target: {line}")
        for name, why in skipped.items():
            print(f"{name}: not run, {why}")
        opts.results.write_text(
            json.dumps(
                {
                    "date": now.isoformat(timespec="seconds"),
                    "site": opts.site,
                    "pages": site.pages,
                    "requisites": assets,
                    "site_bytes": size,
                    "hosts": site.hosts,
                    "concurrency": opts.concurrency,
                    "cpus": os.cpu_count(),
                    "python": platform.python_version(),
                    "nginx": nginx_version,
                    "load_before": load_before[0],
                    "load_after": load_after[0],
                    "script_peak_rss_mib": own_rss,
                    "skipped": skipped,
                    "targets": targets(rows, runs),
                    "rounds_seconds": {
                        name: [r.usage.seconds for r in done] for name, done in runs.items()
                    },
                    "rows": [
                        {
                            **{k: v for k, v in asdict(r).items() if k not in ("missing", "extra")},
                            "pages_per_second": r.rate,
                            "cpu_seconds": r.usage.cpu,
                            "peak_rss_mib": r.usage.peak_rss_kib / 1024,
                            "missing": len(r.missing),
                            "missing_sample": r.missing[:10],
                            "extra": len(r.extra),
                            "extra_sample": r.extra[:10],
                        }
                        for r in rows
                    ],
                },
                indent=2,
            )
            + "\n"
        )
        print(f"\nwritten to {opts.results}", file=sys.stderr)
    return run.status


if __name__ == "__main__":
    sys.exit(main())
