"""A run that stores fewer messages than the archive counts says so: outcome
`incomplete`, the shortfall in `run --json` and `status --json`, exit code 5; the next
run, once the archive serves the rest, is `ok` again. The archive is the built-in one's
HyperKitty, made to withhold a message from its exports while its listing counts it."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from cli_proc import Home
from thresher.archives.demo import DemoArchive, generate_messages
from thresher.archives.demo_files import ArchiveFiles

ADDR = "dev@example.org"


class Withholding(DemoArchive):
    """A HyperKitty whose exports leave out the messages in `withheld`, which its
    `emails` listing still counts (as when exporting a message fails on the server)."""

    withheld: frozenset[bytes] = frozenset()

    def _new_files(self) -> ArchiveFiles:
        return WithheldFiles(self)


class WithheldFiles(ArchiveFiles):
    """The files of a `Withholding` archive: its exports rendered without `withheld`."""

    def __init__(self, server: Withholding) -> None:
        super().__init__()
        self.server = server

    def render(
        self, address: str, key: str, version: int, messages: Sequence[bytes], kind: str
    ) -> tuple[bytes, str]:
        if key.startswith("export:"):
            kept = tuple(m for m in messages if m not in self.server.withheld)
            return super().render(address, key, hash((version, kept)), kept, kind)
        return super().render(address, key, version, messages, kind)


@pytest.fixture
def server() -> Iterator[Withholding]:
    archive = Withholding()
    with archive:
        yield archive


def test_a_run_short_of_the_archives_total_is_incomplete_and_says_by_how_much(
    server: Withholding, store_url: str, tmp_path: Path
) -> None:
    months = generate_messages(ADDR, ["2024-01", "2024-02", "2024-03"], 5, seed=3)
    server.add_list(ADDR, "2024-01", months)
    server.withheld = frozenset({months["2024-02"][2]})
    home = Home(tmp_path, None if store_url.startswith("sqlite") else store_url)
    url = server.url("hyperkitty", ADDR)
    home.run("source", "add", "dev", url, "-o", "allow_private=true", "-o", "delay=0")

    proc = home.run("run", "--json", check=False)
    assert proc.returncode == 5, proc.stderr
    [report] = json.loads(proc.stdout)["sources"]
    assert (report["outcome"], report["shortfall"], report["error"]) == ("incomplete", 1, None)
    assert "1 messages the archive counts are not stored" in home.run("run", check=False).stdout
    status = json.loads(home.run("status", "--json").stdout)
    [source] = status["sources"]
    assert source["last_run"]["outcome"] == "incomplete"
    assert source["last_run"]["shortfall"] == 1
    assert source["archive"]["messages"] == 14
    events = home.query("SELECT kind, detail FROM archive_events WHERE kind = 'total_mismatch'")
    assert json.loads(events[0]["detail"]) == {"archive_total": 15, "months_sum": 14}

    server.withheld = frozenset()
    proc = home.run("run", "--json")  # exit 0
    [report] = json.loads(proc.stdout)["sources"]
    assert (report["outcome"], report["shortfall"]) == ("ok", 0)
    assert home.query("SELECT count(*) AS n FROM messages")[0]["n"] == 15
