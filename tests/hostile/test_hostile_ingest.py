"""Hostile bodies, addresses and dumps against `thresher ingest` (see scenarios.py)."""

from __future__ import annotations

import json
from pathlib import Path

from hostile_server import Hostile, hostile_fixture  # noqa: F401 (a fixture)
from scenarios import ingest_gzip_bomb, ingest_load_blank_lines, ingest_loopback_urls


def test_a_gzip_bomb_is_body_too_large_at_max_bytes(hostile: Hostile, tmp_path: Path) -> None:
    result = ingest_gzip_bomb(hostile, tmp_path, None)
    assert result.probe.returncode == 0, result.probe.stderr
    assert result.facts["statuses"] == {"body-too-large": 1}
    assert result.probe.rss_mib < 400, result.probe.rss_mib  # before: 4.2 GB


def test_every_loopback_url_is_blocked_address(hostile: Hostile, tmp_path: Path) -> None:
    # Before: the first few were blocked-address, the rest host-backoff, and the run
    # waited out the backoff.
    result = ingest_loopback_urls(hostile, tmp_path, None)
    assert result.probe.returncode == 0, result.probe.stderr
    assert result.facts["statuses"] == {"blocked-address": 12}
    assert result.facts["server_hits"] == 0
    assert result.probe.seconds < 60


def test_a_gigabyte_of_blank_lines_loads_in_seconds(hostile: Hostile, tmp_path: Path) -> None:
    result = ingest_load_blank_lines(hostile, tmp_path, None)
    assert result.probe.returncode == 0, result.probe.stderr
    report = json.loads(result.probe.stdout)
    assert (report["new"], report["rejected"]) == (1, 0)
    assert result.probe.seconds < 60  # before: 589 s
