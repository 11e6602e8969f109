"""Hostile month files against a mail source's run: the source's max_bytes bounds the
decoding, whatever the encoding (see scenarios.py)."""

from __future__ import annotations

import json
from pathlib import Path

from hostile_server import Hostile, hostile_fixture  # noqa: F401 (a fixture)
from scenarios import (
    mail_big_message,
    mail_gzip_encoded_bomb,
    mail_gzip_file_bomb,
    mail_gzip_members,
)

MAX_RSS_MIB = 400  # max_bytes is 64 MiB; before, 4.2 GB


def _error(stdout: str) -> str:
    return str(json.loads(stdout.splitlines()[-1])["sources"][0]["error"])


def test_a_gzip_encoded_bomb_stops_at_max_bytes(hostile: Hostile, tmp_path: Path) -> None:
    probe = mail_gzip_encoded_bomb(hostile, tmp_path, None).probe
    assert probe.returncode == 4, probe.stderr  # the source failed, clearly
    assert "gzip-decoded content exceeds max_body=67108864" in _error(probe.stdout)
    assert probe.rss_mib < MAX_RSS_MIB, probe.rss_mib
    assert "Traceback" not in probe.stderr


def test_a_gzip_file_bomb_stops_at_max_bytes(hostile: Hostile, tmp_path: Path) -> None:
    probe = mail_gzip_file_bomb(hostile, tmp_path, None).probe
    assert probe.returncode == 4, probe.stderr
    assert "archive decompresses to more than 67108864 bytes" in _error(probe.stdout)
    assert probe.rss_mib < MAX_RSS_MIB, probe.rss_mib


def test_a_month_file_of_empty_gzip_members(hostile: Hostile, tmp_path: Path) -> None:
    result = mail_gzip_members(hostile, tmp_path, None)
    assert result.probe.returncode == 0, result.probe.stderr
    assert result.facts["messages"] == 1
    assert result.probe.seconds < 60


def test_a_200_mib_message_is_stored_cut_and_kept_whole(hostile: Hostile, tmp_path: Path) -> None:
    # Before: 651 MB (865 MiB measured here) to store it, whole, in its row.
    result = mail_big_message(hostile, tmp_path, None)
    probe = result.probe
    assert probe.returncode == 0, probe.stderr
    one, big, two = result.facts["rows"]
    assert one[1:] == (0, None) and two[1:] == (0, None)
    assert big[0] == "big@b.c" and big[1] == 32  # max_message_bytes, MiB
    assert big[2].startswith("truncated-in-index: 209715")
    assert result.facts["whole_file"] and result.facts["export_has_whole"]
    # The month file (200 MiB) is in memory once, with the row's 32 MiB and its parsing.
    assert probe.rss_mib < MAX_RSS_MIB, probe.rss_mib
