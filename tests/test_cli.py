"""The command line as users and their scripts see it: help, exit codes, JSON shapes."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
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
        "import sys; from thresher.cli.main import cli, main; main(['run', '--help']);"
        " print(sorted(m for m in sys.modules if m == 'aiohttp.web' or 'demo' in m))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


# What no command that only reads or prints needs: the fetcher (aiohttp), the event loop,
# the crawl engine, parsers, the WARC writer, PostgreSQL's driver, rich's tables.
HEAVY = (
    "aiohttp", "asyncio", "psycopg", "rich", "lxml", "selectolax", "warcio", "isal",
    "jinja2", "ada_url", "multiprocessing", "thresher.fetch.client", "thresher.crawl",
    "thresher.jobs.worker", "thresher.jobs.claims", "thresher.jobs.runner",
    "thresher.jobs.resources", "thresher.plan", "thresher.sources.archives", "thresher.parse",
)  # fmt: skip


@pytest.mark.parametrize(
    ("args", "also"),
    [
        (["--version"], ("thresher.store", "sqlite3", "thresher.cli.status")),
        (["--help"], ("thresher.store", "sqlite3", "thresher.cli.crawl", "thresher.cli.status")),
        # Not the archive kinds either (email parsing): 0.16 s of a status's 0.44 s.
        (["status"], ("thresher.archives",)),
    ],
    ids=["version", "help", "status"],
)
def test_start_up_imports_only_what_the_command_needs(
    tmp_path: Path, args: list[str], also: tuple[str, ...]
) -> None:
    """`thresher --help`, `--version` and `status` start in a fraction of a second (0.08,
    0.09 and 0.19 s here, against 1.07, 0.70 and 0.97 s when every command was imported
    at start): what the program imports for them is checked here, not timed."""
    # A store made and migrated first: migration 0013's step (once per store) needs the
    # message parser; a status of a store in use does not.
    made = [sys.executable, "-m", "thresher", "--home", str(tmp_path), "status"]
    subprocess.run(made, capture_output=True, check=True)
    code = (
        "import sys; from thresher.cli.entry import entry; sys.argv[1:] = sys.argv[2:];"
        " code = entry(); print('\\n'.join(sorted(sys.modules)), file=sys.stderr)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "-", "--home", str(tmp_path), *args],
        capture_output=True,
        text=True,
        check=True,
    )
    loaded = set(proc.stderr.split())
    unwanted = sorted(
        m for m in loaded for heavy in (*HEAVY, *also) if m == heavy or m.startswith(heavy + ".")
    )
    assert unwanted == [], f"thresher {' '.join(args)} imported {unwanted}"


@pytest.mark.parametrize("command", all_commands(cli), ids=" ".join)
def test_every_command_ends_its_help_with_examples(command: tuple[str, ...]) -> None:
    """Real command lines a user can copy, after everything else; and no help points to
    a README an installed package does not have."""
    out = CliRunner().invoke(cli, [*command, "--help"], terminal_width=200).output
    tail = out.rstrip().split("Examples:")
    assert len(tail) == 2, out
    lines = [line.strip() for line in tail[1].splitlines() if line.strip()]
    assert lines and all(line.startswith(("thresher ", "THRESHER_")) for line in lines), lines
    assert "see README" not in out and "see docs/" not in out


def test_the_help_listing_is_each_commands_own_summary() -> None:
    """`thresher --help` lists the commands without importing them (`commands.COMMANDS`):
    each summary is the command's own short help."""
    from thresher.cli.commands import COMMANDS

    ctx = click.Context(cli)
    for name, (_, _, summary) in COMMANDS.items():
        command = cli.get_command(ctx, name)
        assert command is not None and command.short_help == summary, name


def test_ctrl_c_while_the_program_loads_prints_no_traceback() -> None:
    """SIGINT while Python imports what a command needs (aiohttp, the crawl engine…):
    one line, exit 130, no KeyboardInterrupt traceback. The signal is sent once the
    program's own code runs (a library it loads is mapped), not during the interpreter's
    start, which no program controls."""
    for marker in ("_ctypes", "_sqlite3", "multidict", "_http_parser", "selectolax"):
        proc = subprocess.Popen(
            [sys.executable, "-m", "thresher", "crawl", "--help"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        maps = Path(f"/proc/{proc.pid}/maps")
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                if marker in maps.read_text():
                    break
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
        if proc.returncode != 0:  # else it ended before the signal came
            # 130, or killed by SIGINT, which a shell shows as 130 too: CPython (3.11,
            # `python -m` only) sometimes re-sends itself the SIGINT after the program
            # has caught it and returned 130 (strace: kill(self, SIGINT) at exit).
            assert proc.returncode in (130, -signal.SIGINT), err
            assert err.strip() == "thresher: interrupted", err


# Sends a Ctrl-C from inside a weakref callback (where CPython's module locks run theirs)
# when the program imports its first module of its own: the callback's KeyboardInterrupt
# cannot propagate, and CPython prints it as "Exception ignored" and goes on.
_CTRL_C_IN_A_CALLBACK = """
import os, signal, sys, weakref

class Lock:
    pass

class SendsCtrlC:
    sent = False

    def find_spec(self, fullname, path=None, target=None):
        if fullname == "thresher.runtime" and not SendsCtrlC.sent:
            SendsCtrlC.sent = True
            lock = Lock()

            def callback(ref):
                os.kill(os.getpid(), signal.SIGINT)
                for _ in range(100_000):  # the handler runs in here
                    pass

            ref = weakref.ref(lock, callback)
            del lock
        return None

# As in a terminal: a process started in the background of a script inherits SIGINT
# ignored, and Python then leaves it so.
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.meta_path.insert(0, SendsCtrlC())
from thresher.cli.entry import entry
sys.argv = ["thresher", "crawl", "--help"]
sys.exit(entry())
"""


def test_a_ctrl_c_python_could_not_raise_still_stops_the_program() -> None:
    """A Ctrl-C whose KeyboardInterrupt CPython swallowed while the program loaded: not
    an "Exception ignored" trace and a program that goes on, but the one line and 130."""
    proc = subprocess.run(
        [sys.executable, "-c", _CTRL_C_IN_A_CALLBACK], capture_output=True, text=True, timeout=60
    )
    assert proc.stderr.strip() == "thresher: interrupted", proc.stderr
    assert proc.returncode in (130, -signal.SIGINT), proc.stderr
    assert "Usage" not in proc.stdout


def test_nothing_is_imported_before_the_program_can_catch_ctrl_c() -> None:
    """The `thresher` package and its entry import next to nothing: all the rest is
    imported inside the entry's Ctrl-C handler. (The package imported its config, clock
    and errors, and the entry `signal`: a Ctrl-C in those 0.1-0.3 s of a loaded
    machine printed a KeyboardInterrupt traceback in 15 of 40 tries.)"""
    code = (
        "import sys; before = set(sys.modules); import thresher.cli.entry;"
        " print(' '.join(sorted(set(sys.modules) - before)))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    bootstrap = {"__future__", "importlib", "importlib._bootstrap", "warnings"}
    bootstrap |= {"importlib._bootstrap_external", "thresher", "thresher.cli", "thresher.cli.entry"}
    assert set(proc.stdout.split()) <= bootstrap, proc.stdout


def test_status_piped_is_tab_separated(tmp_path: Path) -> None:
    """Output to a file or a pipe is plain: a header line and one line per row, cells
    separated by tabs, never a table wrapped at 80 columns."""
    home = Home(tmp_path)
    long = "https://example.org/" + "a" * 120 + "/urls.txt"
    home.run("source", "add", "a-source-with-a-long-name", long, "--type", "urls")
    home.run("source", "add", "syn", "synthetic:", "-o", "jobs=3")
    home.run("run", "syn")
    lines = home.run("status").stdout.splitlines()
    assert not any(ch in "".join(lines) for ch in "┏━│└")
    header = lines.index("source\ttype\tlast run\toutcome\tjobs\tlast error")
    rows = [line.split("\t") for line in lines[header + 1 : header + 3]]
    assert [r[0] for r in rows] == ["a-source-with-a-long-name", "syn"]
    assert all(len(r) == 6 for r in rows) and rows[1][3] == "ok"
    assert rows[0][2] == "never"


def test_every_command_prints_plain_lines_when_piped(tmp_path: Path) -> None:
    """Not a terminal: no table borders, no colours, no progress bar, whatever the
    command (status and demo are checked line by line elsewhere)."""
    home = Home(tmp_path)
    home.run("source", "add", "syn", "synthetic:", "-o", "jobs=3")
    commands = [
        ("run", "syn"), ("status",), ("status", "--json"), ("source", "list"),
        ("source", "show", "syn"), ("search", "anything"), ("ingest", "stats"), ("config",),
        ("export", "syn"),
    ]  # fmt: skip
    for args in commands:
        proc = home.run(*args, check=False)
        said = proc.stdout + proc.stderr
        assert "Traceback" not in said, said
        assert "\x1b[" not in said and not any(ch in said for ch in "┏━┃│└─╭"), (args, said)


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
        (
            ["--db", "postgresql://u@127.0.0.1:1/x", "status"],
            3,
            "cannot connect to PostgreSQL store: connection failed: connection to server at"
            ' "127.0.0.1", port 1 failed: Connection refused; Is the server running',
        ),
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
    assert proc.returncode == 2 and "workers = 'many' must be a whole number" in proc.stderr


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


def test_a_read_only_store_can_be_read(tmp_path: Path) -> None:
    """status, search, export and source list on a store this process may not write (a
    copy on a read-only disk, another user's harvest): read, not "attempt to write a
    readonly database". As root, permissions bind only without CAP_DAC_OVERRIDE."""
    import os
    import shutil

    home = Home(tmp_path / "home")
    home.run("source", "add", "syn", "synthetic:", "-o", "jobs=3")
    home.run("run", "syn")
    prefix: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("root without setpriv (util-linux): permissions cannot bind")
        prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner"]
    for path in (home.path / "thresher.db", home.path):
        path.chmod(0o500 if path.is_dir() else 0o400)
    try:
        for args in (
            ["status"],
            ["status", "--json"],
            ["source", "list"],
            ["search", "word"],
            ["export", "syn"],
        ):
            proc = subprocess.run(
                [*prefix, *home.cmd(*args)], env=home.env, capture_output=True, text=True
            )
            assert proc.returncode == 0, (args, proc.stderr)
        status = subprocess.run(
            [*prefix, *home.cmd("status", "--json")], env=home.env, capture_output=True, text=True
        )
        assert json.loads(status.stdout)["sources"][0]["last_run"]["outcome"] == "ok"
        # Writing says why it cannot, in one line.
        proc = subprocess.run(
            [*prefix, *home.cmd("source", "add", "x", "synthetic:")],
            env=home.env,
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 3 and "readonly" in proc.stderr and "Traceback" not in proc.stderr
    finally:
        home.path.chmod(0o700)
        (home.path / "thresher.db").chmod(0o600)


def test_a_postgresql_url_without_psycopg_says_what_to_install(tmp_path: Path) -> None:
    """psycopg is the `postgres` extra: SQLite users do without it."""
    code = (
        "import sys; sys.modules['psycopg'] = None;"  # as if it were not installed
        " from thresher.cli.main import main;"
        " sys.exit(main(['--db', 'postgresql://u@127.0.0.1:1/x', 'status']))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == (
        "thresher: error: a PostgreSQL store needs psycopg, which is not installed:"
        " run pip install 'thresher[postgres]'"
    )
    assert (
        "psycopg"
        not in Path(__file__)
        .parents[1]
        .joinpath("pyproject.toml")
        .read_text()
        .split("dependencies = [", 1)[1]
        .split("]", 1)[0]
    )
