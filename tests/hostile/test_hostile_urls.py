"""A hostile URL list against a `urls` source's run (see scenarios.py)."""

from __future__ import annotations

import json
from pathlib import Path

from hostile_server import Hostile, hostile_fixture  # noqa: F401 (a fixture)
from scenarios import urls_list_bomb


def test_a_gzip_bomb_of_a_url_list_stops_at_max_bytes(hostile: Hostile, tmp_path: Path) -> None:
    # Before: the list was decoded up to the handlers' 2 GiB, whatever max_bytes said.
    probe = urls_list_bomb(hostile, tmp_path, None).probe
    assert probe.returncode == 4, probe.stderr  # the source failed, clearly
    error = str(json.loads(probe.stdout.splitlines()[-1])["sources"][0]["error"])
    assert "URL list http://" in error and "exceeds max_body=67108864" in error, error
    assert probe.rss_mib < 400, probe.rss_mib
    assert "Traceback" not in probe.stderr
