"""`thresher demo`, the README's main job, as a user runs it: twice, in a subprocess."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import socket
import time
from pathlib import Path

from cli_proc import Home
from thresher.archives.kinds import KINDS
from thresher.archives.months import DEFAULT_GRACE_DAYS, is_closed
from thresher.cli.demo import DEMO_KINDS, NOT_SERVED


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rows(stdout: str) -> dict[str, list[str]]:
    """The summary table, tab-separated when piped: source -> its cells."""
    lines = stdout.splitlines()
    assert lines[0].split("\t")[:2] == ["source", "outcome"], stdout
    out = {}
    for line in lines[1:]:
        cells = line.split("\t")
        if cells[0].startswith("demo-"):
            out[cells[0]] = cells[1:]
    return out


def test_demo_harvests_six_kinds_then_downloads_no_month_body(tmp_path: Path) -> None:
    home = Home(tmp_path)
    port = str(free_port())
    out = home.run("demo", "--port", port).stdout
    first = rows(out)
    # It ends by saying how to browse what it harvested, as the README shows.
    from thresher.cli.demo import SERVE_HINT

    assert out.splitlines()[-1] == SERVE_HINT
    # And why it leaves out the kinds that need a server of their own.
    assert "Not in the demo, each needs its own server: publicinbox, git" in out
    assert "nntp, a news server" in out
    assert SERVE_HINT in (Path(__file__).parents[1] / "README.md").read_text()
    assert set(first) == {f"demo-{k}" for k in DEMO_KINDS}
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
    assert len({r["n"] for r in stored}) == 1 and len(stored) == len(DEMO_KINDS)
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


def test_ctrl_c_during_the_demo_exits_0_saying_interrupted(tmp_path: Path) -> None:
    """Nothing failed: the demo says it was interrupted and how to go on, exit 0 (it said
    "a demo source failed", exit 2); run again, it finishes what was left."""
    for attempt in range(3):
        home = Home(tmp_path / f"home{attempt}")
        port = str(free_port())
        proc = home.start("demo", "--port", port)
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
            with contextlib.suppress(Exception):  # the store is being made
                if home.query("SELECT count(*) AS n FROM messages")[0]["n"]:
                    break
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert "Traceback" not in err
        assert proc.returncode == 0, err
        if "interrupted" not in out:
            continue  # it had finished before the signal came: try again
        last = out.strip().splitlines()[-1]
        assert last.startswith("interrupted: what was harvested is stored in"), out
        assert "resume with the same command" in last
        again = rows(home.run("demo", "--port", port).stdout)
        assert {cells[0] for cells in again.values()} == {"ok"}
        return
    raise AssertionError("the demo finished before SIGINT three times")


def test_the_demo_says_where_it_stored(tmp_path: Path, pg_admin_url: str) -> None:
    """With --db, the demo's messages are in PostgreSQL, not in the home folder."""
    from conftest import new_pg_database

    db = new_pg_database(pg_admin_url)
    home = Home(tmp_path / "home", db)
    out = home.run("demo", "--port", str(free_port())).stdout
    where = next(line for line in out.splitlines() if line.startswith("stored in "))
    assert where.startswith(f"stored in {db};"), where
    assert not (tmp_path / "home" / "thresher.db").exists()


def test_the_demo_serves_every_kind_but_those_that_need_their_own_server() -> None:
    """public-inbox is git's smart HTTP from public-inbox-httpd, NNTP a news server."""
    assert set(DEMO_KINDS) == set(KINDS) - {"publicinbox", "nntp"}
    assert set(NOT_SERVED) == {"publicinbox", "nntp"}
