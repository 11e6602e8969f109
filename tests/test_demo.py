"""`thresher demo`, the README's main job, as a user runs it: twice, in a subprocess."""

from __future__ import annotations

import json
import re
import socket
import time
from pathlib import Path

from cli_proc import Home
from thresher.archives.kinds import KINDS
from thresher.archives.months import DEFAULT_GRACE_DAYS, is_closed


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rows(stdout: str) -> dict[str, list[str]]:
    """The summary table: source -> its cells."""
    out = {}
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip("│┃ ").split("│")]
        if cells and cells[0].startswith("demo-"):
            out[cells[0]] = cells[1:]
    return out


def test_demo_harvests_five_kinds_then_downloads_no_month_body(tmp_path: Path) -> None:
    home = Home(tmp_path)
    port = str(free_port())
    out = home.run("demo", "--port", port).stdout
    first = rows(out)
    # It ends by saying how to browse what it harvested, as the README shows.
    from thresher.cli.demo import SERVE_HINT

    assert out.splitlines()[-1] == SERVE_HINT
    assert SERVE_HINT in (Path(__file__).parents[1] / "README.md").read_text()
    assert set(first) == {f"demo-{k}" for k in KINDS}
    messages = {cells[1] for cells in first.values()}
    assert len(messages) == 1 and int(messages.pop()) > 400  # every kind stored every message
    assert all(int(cells[5]) > 0 for cells in first.values())  # month bodies were fetched

    second = rows(home.run("demo", "--port", port).stdout)
    assert {name: cells[0] for name, cells in second.items()} == dict.fromkeys(first, "ok")
    assert {name: cells[5] for name, cells in second.items()} == dict.fromkeys(first, "0")
    assert {name: cells[1] for name, cells in second.items()} == {
        name: cells[1] for name, cells in first.items()
    }
    stored = home.query("SELECT source, count(*) AS n FROM messages GROUP BY source")
    assert len({r["n"] for r in stored}) == 1 and len(stored) == len(KINDS)
    assert re.search(r"took [\d.]+ s", home.run("demo", "--port", port).stdout)

    status = json.loads(home.run("status", "--json").stdout)
    archives = {s["name"]: s["archive"] for s in status["sources"]}
    assert set(archives) == set(first)
    months = archives["demo-ponymail"]["months"]
    assert len(months) == 12 and archives["demo-ponymail"]["messages"] == int(
        first["demo-ponymail"][1]
    )
    assert set(months[0]) == {
        "month", "state", "expected", "counted", "stored", "missing", "last_checked", "last_fetched"
    }  # fmt: skip
    # The current month stays open, and the one before while in its grace period.
    now = time.time()
    assert [m["state"] for m in months] == [
        "complete" if is_closed(m["month"], now, DEFAULT_GRACE_DAYS) else "open" for m in months
    ]
    assert months[-1]["state"] == "open"
    assert all(m["expected"] == m["counted"] == m["stored"] for m in months[:9])
