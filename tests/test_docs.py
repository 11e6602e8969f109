"""The documentation says what the code does."""

from __future__ import annotations

from pathlib import Path

from thresher.config import Config, describe

ROOT = Path(__file__).resolve().parent.parent


def test_configuration_table_matches_the_defaults() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text()
    for name, value, env, doc in describe(Config()):
        assert f"| `{name}` | `{env}` | `{value}` | {doc} |" in text, name


def test_readme_commands_exist() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "scripts/test" in readme and (ROOT / "scripts" / "test").exists()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "scripts/test" in ci
    docs = ("docs/architecture.md", "docs/configuration.md", "docs/crawling.md", "docs/serve.md")
    for doc in (*docs, "benchmarks/README.md"):
        assert doc in readme and (ROOT / doc).exists(), doc


def test_crawl_flags_are_documented() -> None:
    """The flags users' scripts rely on (issue 3) exist and are in docs/crawling.md."""
    from click.testing import CliRunner

    from thresher.cli.main import cli

    help_text = CliRunner().invoke(cli, ["crawl", "--help"]).output
    doc = (ROOT / "docs" / "crawling.md").read_text()
    for flag in (
        "--scope", "--max-pages", "--max-depth", "--max-per-host", "--delay",
        "--concurrency", "--user-agent", "--allow-private", "--json",
    ):  # fmt: skip
        assert flag in help_text and f"`{flag}" in doc, flag
    # On by default, each with its --no- form (issue 19).
    for flag in ("--requisites", "--no-requisites", "--sitemaps", "--no-sitemaps"):
        assert flag in help_text and flag in doc, flag


def test_serve_flags_and_pages_are_documented() -> None:
    """`thresher serve`'s flags (issue 24) exist and are in docs/serve.md, and the month
    grid's screenshot the docs show is committed, and small."""
    from click.testing import CliRunner

    from thresher.cli.main import cli

    help_text = CliRunner().invoke(cli, ["serve", "--help"]).output
    doc = (ROOT / "docs" / "serve.md").read_text()
    for flag in ("--host", "--port", "--token", "THRESHER_SERVE_TOKEN"):
        assert flag in help_text and flag in doc, flag
    for path in ("/api/status", "/metrics", "/lists/NAME", "/crawls", "/ingest", "/search"):
        assert f"`{path}" in doc, path
    shot = ROOT / "docs" / "serve-month-grid.png"
    assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size < 150_000
    assert "docs/serve-month-grid.png" in (ROOT / "README.md").read_text()
