from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from thresher.config import Config, describe, load_config
from thresher.errors import ConfigError


def test_defaults() -> None:
    config = load_config({}, {})
    assert config == Config()
    assert config.home == Path("thresher-data") and config.db is None
    assert config.store_url.startswith("sqlite:///") and config.store_url.endswith("thresher.db")


def test_file_then_environment_then_flags(tmp_path: Path) -> None:
    (tmp_path / "thresher.toml").write_text("workers = 2\nlease_seconds = 5\ngrace_seconds = 1\n")
    env = {"THRESHER_HOME": str(tmp_path), "THRESHER_LEASE_SECONDS": "7", "THRESHER_WORKERS": "3"}
    config = load_config({"workers": 9}, env)
    assert config.home == tmp_path
    assert config.grace_seconds == 1  # file
    assert config.lease_seconds == 7  # environment over file
    assert config.workers == 9  # flag over both
    assert config.heartbeat_seconds == pytest.approx(7 / 3)


def test_a_thresher_table_is_accepted(tmp_path: Path) -> None:
    (tmp_path / "thresher.toml").write_text("[thresher]\nmax_attempts = 8\n")
    assert load_config({"home": tmp_path}, {}).max_attempts == 8


def test_config_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Config().workers = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("workers = 0\n", "workers must be from 1 to 1024"),
        ("workers = 1000000\n", "workers must be from 1 to 1024"),
        ("http_timeout = nan\n", "http_timeout must be a finite number"),
        ("grace_seconds = inf\n", "grace_seconds must be a finite number"),
        ("grace_seconds = 1e9\n", "grace_seconds must be from 0 to 86400"),
        ("db = 'mysql://a:S3cr3t@h/d'\n", "not 'mysql://a:\\*\\*\\*@h/d'"),
        ("db = 'host=h password=S3cr3t'\n", "not 'host=h password=\\*\\*\\*'"),
        ("colour = 'red'\n", "unknown setting 'colour'"),
        ("home = '/x'\n", "unknown setting 'home'"),
        ("workers = 1.5\n", "not a valid value"),
        ("workers = [\n", "thresher.toml"),
        ("db = 'mysql://x'\n", "postgresql:// URL"),
        ("backoff_base = 10\nbackoff_max = 1\n", "backoff_base <= backoff_max"),
    ],
)
def test_bad_settings_are_clear_errors(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "thresher.toml").write_text(text)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        load_config({"home": tmp_path}, {})


def test_bad_environment_value() -> None:
    with pytest.raises(ConfigError, match="THRESHER_WORKERS"):
        load_config({}, {"THRESHER_WORKERS": "four"})


def test_every_setting_is_documented() -> None:
    rows = describe(Config())
    assert {r[0] for r in rows} == {f.name for f in dataclasses.fields(Config)}
    assert all(doc for *_, doc in rows)
