"""Safe by construction: loopback unless told, a token anywhere else, loopback Host names
only, strict headers on every response, harvested bytes never served as a page."""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

from cli_proc import Home
from serve_harvest import Served, start_serve, stop_serve


def request(
    url: str, path: str, headers: dict[str, str] | None = None, method: str = "GET"
) -> tuple[int, http.client.HTTPMessage, bytes]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    try:
        conn.request(method, path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.headers, resp.read()
    finally:
        conn.close()


def test_beyond_loopback_it_will_not_start_without_a_token(served: Served) -> None:
    proc = served.filled.home.run("serve", "--host", "0.0.0.0", "--port", "0", check=False)
    assert proc.returncode == 2
    assert "--token" in proc.stderr and "THRESHER_SERVE_TOKEN" in proc.stderr


def test_with_a_token_nothing_answers_without_it(served: Served) -> None:
    home = served.filled.home
    tokened = Home(home.path, None, THRESHER_SERVE_TOKEN="s3cret-token")
    proc, url = start_serve(tokened, "--host", "0.0.0.0")
    try:
        assert proc.stdout is not None
        assert "a token is required" in proc.stdout.readline()
        local = url.replace("0.0.0.0", "127.0.0.1")
        for path in ("/", "/api/status", "/metrics", "/static/style.css", "/lists/demo-mbox"):
            status, headers, _ = request(local, path)
            assert status == 401, path
        status, _, _ = request(local, "/?token=wrong")
        assert status == 401
        status, _, body = request(local, "/api/status", {"Authorization": "Bearer s3cret-token"})
        assert status == 200 and json.loads(body)["jobs"]
        # ?token= once: a cookie, and the token leaves the address bar.
        status, headers, _ = request(local, "/lists?token=s3cret-token&x=1")
        assert status == 303 and headers["Location"] == "/lists?x=1"
        cookie = headers["Set-Cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        status, _, _ = request(local, "/lists", {"Cookie": cookie.split(";", 1)[0]})
        assert status == 200
    finally:
        stop_serve(proc)


def test_only_loopback_host_names_are_answered(served: Served) -> None:
    """A page elsewhere that points its own name at 127.0.0.1 (DNS rebinding) gets no data."""
    port = urlsplit(served.url).port
    assert request(served.url, "/api/status", {"Host": "evil.example"})[0] == 403
    assert request(served.url, "/api/status", {"Host": f"evil.example:{port}"})[0] == 403
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "[::1]"):
        assert request(served.url, "/api/status", {"Host": host})[0] == 200, host


def test_every_response_carries_the_safe_headers(served: Served) -> None:
    page = json.loads(request(served.url, "/api/lists/xss/2024-03")[2])
    first = page["items"][0]["root"]["id"]
    message = json.loads(request(served.url, f"/api/lists/xss/message/{first}")[2])
    assert message["attachments"] == []
    attached = next(
        m["id"] for t in page["items"] for m in t["messages"] if m["subject"] == "An attachment"
    )
    parts = json.loads(request(served.url, f"/api/lists/xss/message/{attached}")[2])
    assert [a["filename"] for a in parts["attachments"]] == ["evil.html"]
    part = parts["attachments"][0]["part"]
    for path in ("/", "/lists/xss", "/api/status", "/metrics", "/static/live.js", "/nope"):
        status, headers, _ = request(served.url, path)
        assert headers["X-Content-Type-Options"] == "nosniff", path
        assert headers["X-Frame-Options"] == "DENY" and headers["Referrer-Policy"], path
        csp = headers["Content-Security-Policy"]
        assert "script-src 'self'" in csp and "default-src 'none'" in csp, path
        assert "unsafe-inline" not in csp
    harvested = (
        f"/lists/xss/message/{first}/raw",
        f"/lists/xss/message/{attached}/part/{part}",
        f"/lists/xss/message/{first}/raw?download=1",
        "/lists/xss/2024-03.mbox",
        f"/lists/xss/thread/{first}.mbox",
    )
    for path in harvested:
        status, headers, body = request(served.url, path)
        assert status == 200, path
        assert headers["Content-Security-Policy"].startswith("sandbox"), path
        assert headers["X-Content-Type-Options"] == "nosniff"
        # Streamed ones too: sent before the handler returns.
        assert headers["X-Frame-Options"] == "DENY" and headers["Cache-Control"] == "no-store"
        assert not headers["Content-Type"].startswith("text/html"), path
    status, headers, body = request(served.url, harvested[1])
    assert headers["Content-Type"] == "application/octet-stream"
    assert headers["Content-Disposition"] == 'attachment; filename="evil.html"'
    assert b"<script>alert('attachment')</script>" in body
    assert request(served.url, "/", method="POST")[0] == 405
