from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from thresher.config import _RANGES, Config, describe, load_config
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
        ("workers = 0\n", "workers = 0 must be from 1 to 1024"),
        ("workers = 1000000\n", "workers = 1000000 must be from 1 to 1024"),
        ("http_timeout = nan\n", "http_timeout = nan must be a finite number"),
        ("http_timeout = -5\n", "http_timeout = -5 must be above 0"),
        ("http_timeout = 0\n", "http_timeout = 0 must be above 0"),
        ("delay = -1\n", "delay = -1 must be from 0 to 86400"),
        ("delay = nan\n", "delay = nan must be a finite number"),
        ("lease_seconds = 0\n", "lease_seconds = 0 must be above 0"),
        ("max_attempts = 0\n", "max_attempts = 0 must be from 1"),
        ("defer_max = -1\n", "defer_max = -1 must be from 0"),
        ("grace_seconds = inf\n", "grace_seconds = inf must be a finite number"),
        ("grace_seconds = 1e9\n", "grace_seconds = 1000000000.0 must be from 0 to 86400"),
        ("max_links_per_page = 0\n", "max_links_per_page = 0 must be from 1 to 10000000"),
        ("db = 'mysql://a:S3cr3t@h/d'\n", "not 'mysql://a:\\*\\*\\*@h/d'"),
        ("db = 'host=h password=S3cr3t'\n", "not 'host=h password=\\*\\*\\*'"),
        ("colour = 'red'\n", "unknown setting 'colour'"),
        ("home = '/x'\n", "unknown setting 'home'"),
        ("workers = 1.5\n", "workers = 1.5 must be a whole number"),
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


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("delay", "-1", "delay = '-1' must be from 0 to 86400, not -1"),
        ("delay", "nan", "delay = 'nan' must be a finite number"),
        ("delay", "inf", "delay = 'inf' must be a finite number"),
        ("http_timeout", "-5", "http_timeout = '-5' must be above 0 and at most 86400"),
        ("read_timeout", "0", "read_timeout = '0' must be above 0"),
        ("workers", "0", "workers = '0' must be from 1 to 1024"),
        ("backoff_max", "1e400", "backoff_max = '1e400' must be a finite number"),
    ],
)
def test_every_number_is_checked_where_it_comes_from(
    tmp_path: Path, name: str, value: str, message: str
) -> None:
    """The environment, the file and flags alike: each error names where the value came
    from and what it must be."""
    env = f"THRESHER_{name.upper()}"
    with pytest.raises(ConfigError, match=f"^{env}: {message}"):
        load_config({"home": tmp_path}, {env: value})
    with pytest.raises(ConfigError, match=f"^--{name.replace('_', '-')}: {message}"):
        load_config({"home": tmp_path, name: value}, {})
    (tmp_path / "thresher.toml").write_text(f"{name} = '{value}'\n")
    with pytest.raises(ConfigError, match=f"thresher.toml: {message}"):
        load_config({"home": tmp_path}, {})


def test_negative_keep_jobs_days_means_for_ever() -> None:
    assert load_config({}, {"THRESHER_KEEP_JOBS_DAYS": "-1"}).keep_jobs_days == -1


def test_every_setting_is_documented() -> None:
    rows = describe(Config())
    assert {r[0] for r in rows} == {f.name for f in dataclasses.fields(Config)}
    assert all(doc for *_, doc in rows)


@pytest.mark.parametrize("name", sorted(_RANGES))
def test_each_numeric_setting_refuses_what_is_out_of_range(name: str) -> None:
    """Every numeric setting, not only the ones named above: nan, a value past its
    largest and one under its least are each one clear error naming the variable."""
    least, most, inclusive = _RANGES[name]
    env = f"THRESHER_{name.upper()}"
    bad = ["nan", "inf", str(int(most) * 10 + 1)]
    if not math.isinf(least):
        bad.append(str(int(least) - 1 if inclusive else int(least)))
    for value in bad:
        with pytest.raises(ConfigError, match=f"^{env}: {name} = '{value}' must be "):
            load_config({}, {env: value})
