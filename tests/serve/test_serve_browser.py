"""`thresher serve` in a real browser: headless Chromium from Debian, through Selenium.

The pages show what the store holds (compared with `status --json`, `ingest stats
--json`, `search --json` and the harvests' own summaries), nothing in the browser's
console says an error, harvested script never runs, and the dashboard follows a run
live. Screenshots of the main pages go to the test's temporary folder.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from chromium import severe_logs
from serve_harvest import XSS_LIST, Served

pytestmark = pytest.mark.usefixtures("served")


def _open(browser: Any, served: Served, path: str, shots: Path | None = None) -> None:
    browser.get(served.url.rstrip("/") + path)
    if shots is not None:
        name = path.strip("/").replace("/", "_").replace("?", "_") or "dashboard"
        browser.save_screenshot(str(shots / f"{name[:80]}.png"))
    assert severe_logs(browser) == [], path


def _text(browser: Any, css: str) -> str:
    """The element's rendered text, found and read in one script: live.js may swap the
    element out between a find and a read (a stale element), as it does during a run."""
    text = browser.execute_script(
        "const e = document.querySelector(arguments[0]); return e ? e.innerText : null;", css
    )
    assert text is not None, f"no element {css!r} on the page"
    return str(text)


def _all(browser: Any, css: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return list(browser.find_elements(By.CSS_SELECTOR, css))


def _num(text: str) -> int:
    return int(text.replace(",", "").strip())


def _api(served: Served, path: str) -> Any:
    import urllib.request

    with urllib.request.urlopen(served.url.rstrip("/") + path, timeout=30) as resp:
        return json.loads(resp.read())


def test_main_pages_show_the_stores_numbers(browser: Any, served: Served, tmp_path: Path) -> None:
    shots = tmp_path / "screenshots"
    shots.mkdir()
    status = served.status()
    home = served.filled.home

    # The dashboard: jobs per state and each source's outcome, as status --json says.
    _open(browser, served, "/", shots)
    for state, n in status["jobs"].items():
        assert _num(_text(browser, f"#jobs-{state}")) == n, state
    rows = {r.get_attribute("data-source"): r for r in _all(browser, "#sources-table tbody tr")}
    assert set(rows) == {s["name"] for s in status["sources"]}
    for s in status["sources"]:
        row = rows[s["name"]]
        assert s["last_run"]["outcome"] in row.text
        if "archive" in s:
            messages = row.find_element("css selector", ".messages").text
            assert _num(messages) == s["archive"]["messages"]

    # A list's month grid: one cell per month with its numbers and state.
    archive = next(s for s in status["sources"] if s["name"] == "demo-ponymail")["archive"]
    _open(browser, served, "/lists/demo-ponymail", shots)
    assert _num(_text(browser, "#list-messages")) == archive["messages"]
    cells = {c.get_attribute("data-month"): c for c in _all(browser, "#calendar td.cell")}
    for m in archive["months"]:
        cell = cells[m["month"]]
        assert _num(cell.find_element("css selector", ".c-stored").text) == m["stored"]
        assert cell.get_attribute("data-state") == (
            "complete" if m["state"] == "complete" else "open"
        )
    assert len(_all(browser, "#calendar td.s-complete")) == sum(
        m["state"] == "complete" for m in archive["months"]
    )

    # A month: its messages in threads, as many as the store holds for it.
    month = archive["months"][-3]["month"]
    stored = home.query(
        f"SELECT count(*) AS n FROM messages WHERE source = 'demo-ponymail' AND month = '{month}'"
    )[0]["n"]
    _open(browser, served, f"/lists/demo-ponymail/{month}", shots)
    assert _num(_text(browser, "#month-messages")) == stored
    threads = _all(browser, "#threads > li.thread")
    assert sum(
        _num(t.find_element("css selector", ".t-size").text.split()[0]) for t in threads
    ) == (stored)
    big = next(
        t for t in threads if _num(t.find_element("css selector", ".t-size").text.split()[0]) > 1
    )
    size = _num(big.find_element("css selector", ".t-size").text.split()[0])
    big.find_element("css selector", "a.t-subject").click()

    # The thread: every message of it, replies under their parents.
    assert severe_logs(browser) == []
    browser.save_screenshot(str(shots / "thread.png"))
    assert _num(_text(browser, "#thread-size")) >= size
    items = _all(browser, "#thread > li")
    assert len(items) == _num(_text(browser, "#thread-size"))
    assert "d0" in (items[0].get_attribute("class") or "")
    assert any("d1" in (i.get_attribute("class") or "") for i in items[1:])
    items[1].find_element("css selector", "a").click()

    # A message: headers and text.
    assert severe_logs(browser) == []
    browser.save_screenshot(str(shots / "message.png"))
    headers = {
        r.find_element("css selector", "th").text: r.find_element("css selector", "td").text
        for r in _all(browser, "#headers tr")
    }
    assert headers["Subject"] == _text(browser, "#message-subject")
    assert "From" in headers and "Date" in headers and "Message-ID" in headers
    assert _text(browser, "#body")

    # Search: the hits of `thresher search`, the same engine.
    cli = json.loads(home.run("search", "release", "notes", "--json", "--limit", "50").stdout)
    _open(browser, served, "/search?q=release+notes", shots)
    shown = [a.get_attribute("href") for a in _all(browser, "#hits > li > a.t-subject")]
    assert [int(h.rsplit("/", 1)[1]) for h in shown] == [h["id"] for h in cli][: len(shown)]
    assert len(shown) == min(len(cli), 50) and shown
    assert _all(browser, "#hits mark")

    # A crawl: its pages, errors and hosts, as its summary said.
    crawl = served.filled.crawl
    _open(browser, served, f"/crawls/{crawl['source']}", shots)
    assert _num(_text(browser, "#crawl-pages")) == crawl["pages"]
    assert _num(_text(browser, "#crawl-errors")) == crawl["errors"]
    assert _num(_text(browser, "#crawl-hosts")) == crawl["hosts"]
    assert len(_all(browser, "#urls tbody tr")) == crawl["pages"]
    assert {r.text for r in _all(browser, "#warcs tbody a")} == set(crawl["warc_files"])

    # Ingest: the counts of `ingest stats`.
    stats = json.loads(home.run("ingest", "stats", "--json").stdout)
    _open(browser, served, "/ingest", shots)
    for key in ("requests", "urls", "results", "hits"):
        assert _num(_text(browser, f"#ingest-{key}")) == stats[key], key
    by_status = {
        r.get_attribute("data-status"): _num(r.find_elements("css selector", "td")[1].text)
        for r in _all(browser, "#by-status tbody tr")
    }
    assert by_status == stats["by_status"]
    _open(browser, served, "/ingest?status=success")
    assert len(_all(browser, "#results tbody tr")) == stats["by_status"]["success"]

    for name in ("dashboard", "lists_demo-ponymail", "thread", "message", "ingest"):
        assert (shots / f"{name}.png").stat().st_size > 10_000, name


def _live_dom(browser: Any) -> dict[str, int]:
    """Dangerous things in the page: script elements not ours, event-handler
    attributes, javascript: links, frames and objects."""
    found = browser.execute_script(
        """
        const out = {scripts: 0, handlers: 0, js_links: 0, frames: 0};
        for (const s of document.scripts) {
          if (s.getAttribute("src") !== "/static/live.js") out.scripts++;
        }
        for (const el of document.querySelectorAll("*")) {
          for (const a of el.attributes) {
            if (a.name.toLowerCase().startsWith("on")) out.handlers++;
            if (/^\\s*javascript:/i.test(a.value) && ["href", "src", "action"].includes(a.name))
              out.js_links++;
          }
        }
        out.frames = document.querySelectorAll("iframe, frame, object, embed").length;
        return out;
        """
    )
    return dict(found)


def test_harvested_script_never_runs(browser: Any, served: Served) -> None:
    from selenium.common.exceptions import NoAlertPresentException

    month = served.filled.xss_month
    page = _api(served, f"/api/lists/xss/{month}")
    ids = [m["id"] for t in page["items"] for m in t["messages"]]
    assert len(ids) == 4
    crawl = _api(served, f"/api/crawls/{served.filled.crawl['source']}")
    evil = next(u for u in crawl["urls"] if u["url"].endswith("/evil.html"))
    paths = [
        "/lists/xss",
        f"/lists/xss/{month}",
        f"/lists/xss/thread/{ids[0]}",
        *(f"/lists/xss/message/{i}" for i in ids),
        f"/lists/xss/message/{ids[0]}/raw",
        "/search?q=alert",
        f"/search?q=alert&list={XSS_LIST.split('@')[0]}",
        f"/crawls/{crawl['name']}",
        f"/crawls/{crawl['name']}?state=error",
        f"/crawls/{crawl['name']}/capture/{evil['hash']}/payload",
        "/ingest",
    ]
    for path in paths:
        _open(browser, served, path)
        with pytest.raises(NoAlertPresentException):
            browser.switch_to.alert.text  # noqa: B018
        if not path.endswith(("/raw", "/payload")):
            assert _live_dom(browser) == {"scripts": 0, "handlers": 0, "js_links": 0, "frames": 0}
    # The script is there, as text: shown, never run.
    _open(browser, served, f"/lists/xss/message/{ids[0]}")
    assert "<script>alert('xss-subject')</script>" in _text(browser, "#message-subject")
    assert "onerror=alert(1)" in _text(browser, "#body")
    _open(browser, served, f"/crawls/{crawl['name']}/capture/{evil['hash']}/payload")
    assert "<script>alert('crawl')</script>" in _text(browser, "body")


def test_the_dashboard_follows_a_run_live(browser: Any, served: Served) -> None:
    """A run started while the dashboard is open shows up on it without a reload."""
    home = served.filled.home
    _open(browser, served, "/")
    marker = browser.execute_script("window.__thresher_marker = 1; return 1;")
    assert marker == 1
    done_before = _num(_text(browser, "#jobs-done"))
    home.run("source", "add", "live", "synthetic:", "-o", "jobs=30", "-o", "fanout=10")
    home.run("run", "live", "--no-progress")
    expected = served.status()["jobs"]["done"]
    assert expected > done_before
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if _num(_text(browser, "#jobs-done")) == expected and _all(browser, "tr[data-source=live]"):
            break
        time.sleep(0.2)
    assert _num(_text(browser, "#jobs-done")) == expected
    # The same page, not a reload: live.js swapped the sections in.
    assert browser.execute_script("return window.__thresher_marker;") == 1
    assert severe_logs(browser) == []
