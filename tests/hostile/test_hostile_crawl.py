"""Hostile sites against `thresher crawl` and `run` of a web source, in child processes:
bounded time and memory, clear outcomes, signals obeyed (see scenarios.py)."""

from __future__ import annotations

import json
from pathlib import Path

from hostile_server import Hostile, hostile_fixture  # noqa: F401 (a fixture)
from scenarios import (
    crawl_bombs_on_16_hosts,
    crawl_error_reasons,
    crawl_gzip_members,
    crawl_million_links,
    crawl_redirect_chain,
    crawl_sigterm_while_decoding,
)

# Peak RSS bound: generous for a busy machine, far below what these inputs took before
# (1.5 GB for 16 bombs).
MAX_RSS_MIB = 400


def test_a_page_of_six_megabytes_of_gzip_members(hostile: Hostile, tmp_path: Path) -> None:
    # Before: no progress in 400 s (quadratic), and deaf to SIGTERM.
    result = crawl_gzip_members(6_000_000)(hostile, tmp_path, None)
    assert result.probe.returncode == 0, result.probe.stderr
    assert result.summary()["pages"] == 1 and result.summary()["errors"] == 0
    assert result.probe.seconds < 60


def test_sigterm_stops_a_crawl_in_the_middle_of_decoding(hostile: Hostile, tmp_path: Path) -> None:
    result = crawl_sigterm_while_decoding(hostile, tmp_path, None)
    probe = result.probe
    assert not probe.killed and probe.term_seconds is not None, probe.stderr
    assert probe.term_seconds < 20  # the grace second, a commit, the decoding thread's stop
    assert "Traceback" not in probe.stderr
    assert result.summary().get("status") == "interrupted", probe.stdout


def test_bombs_on_sixteen_hosts_cost_the_body_cap_each(hostile: Hostile, tmp_path: Path) -> None:
    result = crawl_bombs_on_16_hosts(hostile, tmp_path, None)
    probe = result.probe
    assert probe.returncode == 0, probe.stderr
    assert probe.rss_mib < MAX_RSS_MIB, probe.rss_mib
    report = json.loads(probe.stdout.splitlines()[-1])
    assert report["sources"][0]["outcome"] == "ok"
    assert result.facts["errors"] == 16 and result.facts["reasons"] == ["too large"]


def test_a_redirect_chain_is_cut_after_ten(hostile: Hostile, tmp_path: Path) -> None:
    # Before: 400 hops (and more) with --max-depth 0.
    result = crawl_redirect_chain(hostile, tmp_path, None)
    assert result.probe.returncode == 0, result.probe.stderr
    assert result.facts["hops_fetched"] == 11
    summary = result.summary()
    assert summary["redirects"] == 10 and summary["errors"] == 1
    assert summary["error_reasons"] == {"too many redirects": 1}


def test_crawl_errors_are_reported_by_reason(hostile: Hostile, tmp_path: Path) -> None:
    result = crawl_error_reasons(hostile, tmp_path, None)
    assert result.probe.returncode == 0, result.probe.stderr
    summary = result.summary()
    assert summary["errors"] == 3
    assert summary["error_reasons"] == {"HTTP 404": 1, "HTTP 500": 1, "too many redirects": 1}
    assert "3 errors (HTTP 404 1, HTTP 500 1, too many redirects 1)" in result.facts["text"]


def test_a_page_of_a_million_links_is_cut_at_max_links_per_page(
    hostile: Hostile, tmp_path: Path
) -> None:
    # Before: 1.45 GB and 124 s, every link parsed and queued.
    result = crawl_million_links(hostile, tmp_path, None)
    probe = result.probe
    assert probe.returncode == 0, probe.stderr
    summary = result.summary()
    assert summary["pages"] == 1 and summary["errors"] == 2  # the two links are 404s
    assert summary["links_dropped"] == 990_000  # 10,000 kept, the default
    assert summary["queued"] == 10_000 - 2
    assert probe.rss_mib < MAX_RSS_MIB, probe.rss_mib
    assert probe.seconds < 60, probe.seconds
