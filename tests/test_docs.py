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
    for doc in ("docs/architecture.md", "docs/configuration.md", "benchmarks/README.md"):
        assert doc in readme and (ROOT / doc).exists(), doc
