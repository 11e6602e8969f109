"""Headless Chromium from Debian's packages, driven through Selenium.

Never a downloaded browser: the driver and the browser are the Debian files, named
explicitly, so Selenium Manager has nothing to look for and downloads nothing (it is
also told not to, by `SE_OFFLINE`). `scripts/test` installs them; without them the
browser tests skip and say why.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1366,900",
)

__all__ = ["CHROMEDRIVER", "CHROMIUM", "FLAGS", "chromium", "missing", "severe_logs"]


def missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        return (
            "Debian's chromium and chromium-driver are not installed (scripts/test installs them)"
        )
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    return None


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium session with a fresh profile, its console log collected."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager: never download anything
    profile = tempfile.mkdtemp(prefix="thresher-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=str(CHROMEDRIVER)))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def severe_logs(driver: Any) -> list[dict[str, Any]]:
    """Console entries at level SEVERE (JavaScript errors, failed loads) since last asked."""
    return [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
