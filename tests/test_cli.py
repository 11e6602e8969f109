"""The command line as users and their scripts see it: help, exit codes, JSON shapes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from cli_proc import Home
from thresher.cli.main import cli, main


def all_commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [prefix]
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        if isinstance(cmd, click.Group):
            found += all_commands(cmd, (*prefix, name))
        else:
            found.append((*prefix, name))
    return found


@pytest.mark.parametrize("command", all_commands(cli), ids=" ".join)
def test_every_command_has_help(command: tuple[str, ...]) -> None:
    result = CliRunner().invoke(cli, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output and len(result.output.splitlines()) > 3


def test_python_dash_m_works() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "thresher", "--version"], capture_output=True, text=True
    )
    assert proc.returncode == 0 and "thresher" in proc.stdout


def test_the_commands_do_not_import_the_demo_server() -> None:
    # Every command pays for what the CLI imports at start; the demo's web server and
    # message generator are imported only when the demo runs.
    code = (
        "import sys, thresher.cli.main; "
        "print(sorted(m for m in sys.modules if m == 'aiohttp.web' or 'demo' in m))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['thresher.cli.demo']"


def test_source_add_list_show_remove(store_url: str, tmp_path: Path) -> None:
    home = Home(tmp_path, None if store_url.startswith("sqlite") else store_url)
    out = home.run("source", "add", "b", "synthetic:x", "-o", "jobs=5")
    assert "added source b (synthetic)" in out.stdout
    home.run("source", "add", "a", "https://example.org/urls.txt", "--type", "urls")
    listed = json.loads(home.run("source", "list", "--json").stdout)
    assert [s["name"] for s in listed] == ["a", "b"]
    b = listed[1]
    assert set(b) == {"name", "type", "url", "options", "created", "updated"}
    assert b["type"] == "synthetic" and b["url"] == "synthetic:x" and b["options"]["jobs"] == 5
    shown = home.run("source", "show", "b").stdout
    assert "jobs = 5" in shown and "Number of leaf jobs" in shown
    home.run("source", "remove", "b")
    assert [s["name"] for s in json.loads(home.run("source", "list", "--json").stdout)] == ["a"]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["source", "show", "nope"], 2, "no source named 'nope'"),
        (["source", "remove", "nope"], 2, "no source named 'nope'"),
        (["run", "nope"], 2, "no source named 'nope'"),
        (["source", "add", "x", "ftp://host/list", "--type", "urls"], 2, "unsupported URL scheme"),
        (["source", "add", "x", "http:///nohost", "--type", "urls"], 2, "has no host"),
        (["source", "add", "x", "https://h/list"], 2, "give --type"),
        (["source", "add", "x", "synthetic:", "-t", "nope"], 2, "unknown source type 'nope'"),
        (["source", "add", "x", "synthetic:", "-o", "jobs=many"], 2, "expected int"),
        (["source", "add", "x", "synthetic:", "-o", "colour=red"], 2, "has no option 'colour'"),
        (["source", "add", "bad name!", "synthetic:"], 2, "bad source name"),
        (["run", "--every", "soon"], 2, "bad duration"),
        (["--db", "postgresql://u@127.0.0.1:1/x", "status"], 3, "cannot connect to PostgreSQL"),
        (["--db", "mysql://x", "status"], 2, "must be a postgresql:// URL"),
    ],
)
def test_user_errors_are_one_line_with_an_exit_code(
    tmp_path: Path, args: list[str], code: int, message: str
) -> None:
    home = Home(tmp_path)
    proc = home.run(*args, check=False, timeout=60)
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and lines[0].startswith("thresher: error:")


def test_duplicate_source_name(tmp_path: Path) -> None:
    home = Home(tmp_path)
    home.run("source", "add", "x", "synthetic:")
    proc = home.run("source", "add", "x", "synthetic:", check=False)
    assert proc.returncode == 2 and "exists already" in proc.stderr


def test_bad_config_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "thresher.toml").write_text("workers = 'many'\n")
    proc = Home(tmp_path).run("status", check=False)
    assert proc.returncode == 2 and "workers = 'many' is not a valid value" in proc.stderr


def test_run_and_status_json(store_url: str, tmp_path: Path) -> None:
    home = Home(tmp_path, None if store_url.startswith("sqlite") else store_url)
    home.run("source", "add", "good", "synthetic:", "-o", "jobs=10")
    home.run("source", "add", "bad", "synthetic:", "-o", "jobs=10", "-o", "fail_every=3")
    proc = home.run("run", "--json", check=False)
    assert proc.returncode == 4, "a failed source makes a one-shot run exit 4"
    report = json.loads(proc.stdout.splitlines()[0])
    outcomes = {s["source"]: s["outcome"] for s in report["sources"]}
    assert outcomes == {"good": "ok", "bad": "failed"} and report["interrupted"] is False

    status = json.loads(home.run("status", "--json").stdout)
    assert set(status) == {"store", "sources", "jobs", "running", "workers"}
    assert status["store"]["backend"] == ("sqlite" if home.db is None else "postgres")
    assert status["store"]["schema_version"] >= 1
    by_name = {s["name"]: s for s in status["sources"]}
    assert set(by_name["good"]) == {
        "name",
        "type",
        "url",
        "last_run",
        "last_error",
        "last_error_at",
    }
    good, bad = by_name["good"], by_name["bad"]
    assert good["last_run"]["outcome"] == "ok" and good["last_error"] is None
    assert set(good["last_run"]) == {
        "id", "started", "finished", "outcome", "counts", "error", "shortfall"
    }  # fmt: skip
    assert good["last_run"]["shortfall"] is None  # a synthetic source counts nothing
    assert bad["last_run"]["outcome"] == "failed"
    assert "leaf 2 fails by design" in bad["last_error"]
    assert status["jobs"]["failed"] == 3 + 1 + 1 and status["jobs"]["leased"] == 0
    assert status["running"] == [] and status["workers"] == []


def test_password_is_not_printed(tmp_path: Path) -> None:
    proc = Home(tmp_path).run("--db", "postgresql://u:secret@127.0.0.1:1/x", "status", check=False)
    assert "secret" not in proc.stderr + proc.stdout


def test_config_shows_settings_and_precedence(tmp_path: Path) -> None:
    (tmp_path / "thresher.toml").write_text("workers = 7\nmax_attempts = 9\n")
    home = Home(tmp_path, THRESHER_MAX_ATTEMPTS="2")
    out = home.run("config").stdout
    assert "workers = 7" in out and "max_attempts = 2" in out and "THRESHER_LEASE_SECONDS" in out


def test_main_returns_exit_codes_in_process(tmp_path: Path) -> None:
    assert main(["--home", str(tmp_path), "source", "show", "x"]) == 2
    assert main(["--home", str(tmp_path), "source", "list"]) == 0


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["search", "word", "--limit", str(2**63)], "--limit"),
        (["search", "word", "--limit", "10001"], "--limit"),
        (["run", "--workers", "1000000"], "--workers"),
        (["run", "--grace", "nan"], "--grace"),
        (["worker", "--concurrency", "5000"], "--concurrency"),
        (["crawl", "http://example.org/", "--concurrency", "100000"], "--concurrency"),
        (["crawl", "http://example.org/", "--max-pages", str(2**63)], "--max-pages"),
        (["crawl", "http://example.org/", "--max-depth", "100000"], "--max-depth"),
        (["crawl", "http://example.org/", "--delay", "nan"], "--delay"),
        (["crawl", "http://example.org/", "--delay", "inf"], "--delay"),
        (["crawl", "http://example.org/", "--shards", "1000"], "--shards"),
        (["ingest", "run", "--workers", "1000000"], "--workers"),
        (["ingest", "run", "--limit", str(2**63)], "--limit"),
        (["ingest", "run", "--max-bytes", str(2**40)], "--max-bytes"),
        (["ingest", "run", "--max-hops", "1000"], "--max-hops"),
        (["demo", "--port", "70000"], "--port"),
    ],
)
def test_numbers_out_of_range_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], option: str
) -> None:
    assert main(["--home", str(tmp_path), *args]) == 2
    err = capsys.readouterr().err
    assert "Invalid value for '" in err and f"{option}'" in err and "Traceback" not in err
    assert not (tmp_path / "thresher.db").exists()  # refused before anything ran
