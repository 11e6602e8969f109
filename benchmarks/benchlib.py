"""What the benchmark scripts share besides the /proc readers of procstats.py: their
error, the environment and version of the thresher they run, ports and programs, a
private nginx, measuring a process tree, a peer's venv and the end of main().

Imported as procstats is, with this folder on sys.path (the scripts are run as scripts).
"""

from __future__ import annotations

import contextlib
import os
import platform
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from procstats import cpu_times, descendants, hwm_kib, pss_kib, rss_kib


class BenchError(Exception):
    pass


def cpu_model() -> str:
    """The CPU as /proc/cpuinfo names it: every benchmark's figures say where they ran."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def python_build() -> str:
    """The interpreter every Thresher row runs on (a venv's base interpreter, not the
    venv's link to it). Builds differ: on the project's machine, pyenv's CPython 3.11.7
    (built without PGO or LTO) ran a loop of dict and str calls 1.3-1.7 times slower than
    Debian's /usr/bin/python3.11 (3.11.2), though the ingest and crawl benchmarks' CPU per
    request differed by less than their noise (4 pairs each, 2026-12-06)."""
    base = getattr(sys, "_base_executable", sys.executable)
    return (
        f"{platform.python_implementation()} {platform.python_version()} ({os.path.realpath(base)})"
    )


def child_env() -> dict[str, str]:
    # Settings come from our flags only, not from the THRESHER_* variables of this shell.
    return {k: v for k, v in os.environ.items() if not k.startswith("THRESHER_")}


@dataclass(frozen=True)
class Build:
    """Which Thresher a row runs: the one `python3` imports (`pythonpath` None), or one
    exported from git (`baseline`), imported first through PYTHONPATH."""

    label: str  # "" for this checkout's, else "@REV (commit)"
    pythonpath: str | None = None

    def env(self) -> dict[str, str]:
        env = child_env()
        if self.pythonpath is not None:
            env["PYTHONPATH"] = self.pythonpath
        return env


THIS = Build("")


def precompile(folder: str) -> None:
    """Compile a Thresher's modules to bytecode, as installing it does. Where the scripts
    run with PYTHONDONTWRITEBYTECODE set (as in CI), a source checkout has none, and each
    `thresher` process compiled every module it imported again: 0.4-0.5 s of CPU, in
    every row, not the program's cost. Those of installed packages are compiled already."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", folder], env=env, check=True, timeout=600
    )


@contextlib.contextmanager
def baseline(rev: str, work: Path) -> Iterator[Build]:
    """The Thresher of git revision `rev` of this checkout (its `src/`), exported into
    `work` and compiled, for rows side by side with this one's (same venv, same
    dependencies)."""
    root = Path(__file__).resolve().parent.parent
    commit = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--short", f"{rev}^{{commit}}"],
        capture_output=True,
        text=True,
    )
    if commit.returncode != 0:
        raise BenchError(f"--baseline {rev}: not a revision of {root}: {commit.stderr.strip()}")
    folder = work / f"baseline-{commit.stdout.strip()}"
    folder.mkdir(parents=True, exist_ok=True)
    archive = subprocess.Popen(
        ["git", "-C", str(root), "archive", rev, "src"], stdout=subprocess.PIPE
    )
    subprocess.run(["tar", "-x", "-C", str(folder)], stdin=archive.stdout, check=True)
    if archive.wait() != 0:
        raise BenchError(f"git archive {rev} failed")
    precompile(str(folder / "src"))
    try:
        yield Build(f"@{rev} ({commit.stdout.strip()})", str(folder / "src"))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def median_of(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def verdict(met: bool) -> str:
    return "met" if met else "NOT met"


def thresher_cmd(home: Path, db: str | None, *args: str) -> list[str]:
    cmd = [sys.executable, "-m", "thresher", "--home", str(home)]
    if db:
        cmd += ["--db", db]
    return [*cmd, *args]


def thresher_folder() -> str:
    """The folder of the thresher package the children import."""
    found = subprocess.run(
        [sys.executable, "-c", "import os, thresher; print(os.path.dirname(thresher.__file__))"],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    if found.returncode != 0:
        raise BenchError(f"cannot import thresher:\n{found.stderr}")
    return found.stdout.strip()


def thresher_version(untracked: bool = False) -> str:
    """The commit of the thresher the children import, "+ changes" when its folder has
    uncommitted ones (new files too if `untracked`), or where it is outside git."""
    where = thresher_folder()
    commit = subprocess.run(
        ["git", "-C", where, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    dirty = subprocess.run(
        ["git", "-C", where, "status", "--porcelain"]
        + ([] if untracked else ["--untracked-files=no"])
        + ["--", "."],
        capture_output=True,
        text=True,
    )
    if commit.returncode != 0:
        return f"from {where}"
    return f"commit {commit.stdout.strip()}" + (" + changes" if dirty.stdout.strip() else "")


def peer_venv(venv: Path, requirement: str, check: str) -> str | None:
    """Install `requirement` into `venv` unless its python can run `check` already and
    is this one's interpreter (a peer on another build of Python would not be compared
    fairly); None when done, else why not."""
    python = venv / "bin" / "python"
    made_by = venv / "made-by"
    build = python_build()
    if (
        not python.exists()
        or subprocess.run([python, "-c", check], capture_output=True).returncode
        or (made_by.read_text() if made_by.exists() else "") != build
    ):
        print(f"installing {requirement} into {venv} ({build}) …", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q", requirement]
        if subprocess.run(pip).returncode:
            return f"could not install {requirement} into {venv}"
        made_by.write_text(build)
    return None


# --- ports, programs and nginx ----------------------------------------------------------


def free_port(hosts: int = 1) -> int:
    """A TCP port that is free on every one of the addresses 127.0.0.1 … 127.0.0.`hosts`."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        try:
            for h in range(2, hosts + 1):
                with socket.socket() as s:
                    s.bind((f"127.0.0.{h}", port))
        except OSError:
            continue
        return port
    raise BenchError("found no port free on all the loopback addresses")


def find_program(name: str, package: str) -> str:
    found = shutil.which(name) or (
        f"/usr/sbin/{name}" if Path(f"/usr/sbin/{name}").exists() else None
    )
    if found is None:
        raise BenchError(f"{name} is not installed: apt-get install {package}")
    return found


@contextlib.contextmanager
def nginx_process(
    conf_dir: Path, http: str, ready: Callable[[], object], connections: int
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """A private nginx (master and one worker) with the `http` block given, its config,
    pid, logs and temporary files in `conf_dir`; (the process, the binary) once `ready()`
    no longer raises OSError. Its workers run as `nobody` when we are root: what it serves
    must be world-readable."""
    binary = find_program("nginx", "nginx")
    (conf_dir / "tmp").mkdir(parents=True, exist_ok=True)
    conf_dir.chmod(0o755)
    temp = "".join(
        f"    {kind}_temp_path {conf_dir / 'tmp' / kind};\n"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    (conf_dir / "nginx.conf").write_text(
        f"""# written by benchmarks/benchlib.py
daemon off;
master_process on;
worker_processes 1;
pid {conf_dir / "nginx.pid"};
error_log {conf_dir / "error.log"} warn;
events {{ worker_connections {connections}; }}
http {{
{temp}{http}}}
"""
    )
    log = open(conf_dir / "stderr.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [binary, "-p", str(conf_dir), "-c", str(conf_dir / "nginx.conf"), "-e", "stderr"],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            if proc.poll() is not None:
                logs = [conf_dir / "stderr.log", conf_dir / "error.log"]
                text = "".join(p.read_text(errors="replace") for p in logs if p.exists())
                raise BenchError(f"nginx exited {proc.returncode}:\n{text}")
            try:
                ready()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise BenchError("nginx did not start listening within 20 s") from None
                time.sleep(0.05)
        yield proc, binary
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGQUIT)  # graceful stop of master and workers
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()


# --- measuring a process tree -----------------------------------------------------------


@dataclass
class Measured:
    seconds: float  # wall time, from `started` to the process's exit
    rusage: resource.struct_rusage  # from wait4: of the process and the descendants it reaped
    returncode: int
    hwm_kib: int  # the largest VmHWM of a process of the tree, sampled every 0.05 s
    tree_rss_kib: int  # peak of the summed RSS of the live tree, sampled likewise
    tree_pss_kib: int  # peak of the summed PSS of the live tree, when it had several
    processes: int  # most processes alive at once in the tree (sampled)
    killed: bool  # we sent SIGKILL because kill_when() said so
    # CPU of the descendants alive when we killed the group: they die with it, and
    # nobody reaps them, so wait4's rusage never counts them.
    orphan_user: float = 0.0
    orphan_system: float = 0.0


def measure_tree(
    proc: subprocess.Popen[bytes],
    started: float,
    timeout: float,
    too_long: str,
    kill_when: Callable[[], bool] | None = None,
) -> Measured:
    """Wait for `proc` (started in a session of its own at perf_counter `started`),
    sampling its process tree every 0.05 s; BenchError(`too_long`) after `timeout` s.

    A thread waits for the process (wait4 gives its rusage and stops the clock at once)
    while this one samples the tree and, if `kill_when()` turns true, kills the process
    group with SIGKILL.

    Memory is the sampled VmHWM, not wait4's ru_maxrss: Linux's ru_maxrss of an exec'd
    child starts from the RSS of the process it was forked from (the high-water mark
    survives exec), so it would report this script's RSS for any smaller program. VmHWM
    is the running program's own peak; sampling misses only growth in the last 0.05 s."""
    ended: list[tuple[float, int, resource.struct_rusage]] = []

    def reap() -> None:
        _, status, usage = os.wait4(proc.pid, 0)
        ended.append((time.perf_counter(), status, usage))

    waiter = threading.Thread(target=reap, daemon=True)
    waiter.start()
    tree_rss = tree_pss = hwm = 0
    most = 1
    killed = False
    orphans = (0.0, 0.0)
    try:
        while waiter.is_alive():
            if time.perf_counter() - started > timeout:
                raise BenchError(too_long)
            tree = [proc.pid, *descendants(proc.pid)]
            hwm = max(hwm, *(hwm_kib(p) for p in tree))
            tree_rss = max(tree_rss, sum(rss_kib(p) for p in tree))
            if len(tree) > 1:  # one process: its VmHWM is its peak, no need for PSS
                tree_pss = max(tree_pss, sum(pss_kib(p) for p in tree))
            most = max(most, len(tree))
            if kill_when is not None and not killed and kill_when():
                orphans = cpu_times(descendants(proc.pid))
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                killed = True
            waiter.join(0.05)
    finally:
        if waiter.is_alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            waiter.join()
    end, status, usage = ended[0]
    proc.returncode = os.waitstatus_to_exitcode(status)
    # Descendants that outlive the process (none should) would escape the CPU figure.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    return Measured(
        end - started, usage, proc.returncode, hwm, tree_rss, tree_pss, most, killed, *orphans
    )


# --- the end of main() ------------------------------------------------------------------


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def raise_on_sigterm() -> None:
    """Clean up on SIGTERM as on Ctrl-C: it raises KeyboardInterrupt."""
    signal.signal(signal.SIGTERM, _terminate)


@dataclass
class Run:
    work: Path
    status: int = 0  # main()'s exit status


@contextlib.contextmanager
def bench_run(prefix: str, keep: bool) -> Iterator[Run]:
    """A new work folder, removed at the end unless `keep`; a BenchError or an interrupt
    (Ctrl-C, SIGTERM) inside is reported and sets the status to 1 or 130."""
    raise_on_sigterm()
    run = Run(Path(tempfile.mkdtemp(prefix=prefix)))
    try:
        yield run
    except BenchError as exc:
        print(f"\nbenchmark failed: {exc}", file=sys.stderr)
        run.status = 1
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        run.status = 130
    finally:
        if keep:
            print(f"work folder kept: {run.work}", file=sys.stderr)
        else:
            shutil.rmtree(run.work, ignore_errors=True)
