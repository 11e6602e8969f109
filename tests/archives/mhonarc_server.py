"""A real MHonArc archive, made by Debian's `mhonarc` and served over HTTP on 127.0.0.1.

Laid out as lists.debian.org lays out its lists: a list page `/lists/LIST/` linking each
month's indexes, and one MHonArc archive per month in `/lists/LIST/YYYY/MM/`, made by
`mhonarc -add -outdir` from an mbox as mail arrives (late mail for an old month is
added to that month's archive, as a list's archiver does). The files are served as
they are by aiohttp's file responses (ETag, Last-Modified, 304s), with a log of every
request. `mhonarc` is installed by scripts/test (Debian's package, as root); without
it these tests skip and say so.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from thresher.archives.demo_mbox import render_mbox
from thresher.archives.demo_thread import ThreadedServer

MHONARC = shutil.which("mhonarc")
_MESSAGE_ID = re.compile(rb"<!--X-Message-Id: (.*?) -->")


def missing_reason() -> str | None:
    """Why MHonArc cannot run here, or None when it can."""
    if MHONARC is None:
        return "mhonarc is not installed: scripts/test installs Debian's mhonarc package as root"
    return None


@dataclass(frozen=True)
class Logged:
    path: str
    status: int
    headers: dict[str, str]


class MHonArcList:
    """One list's archive on disk, one MHonArc archive per month."""

    def __init__(self, root: Path, name: str = "dev", *, page_size: int | None = None) -> None:
        self.root = root.resolve()
        self.name = name
        self.page_size = page_size
        self.dir = self.root / "lists" / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self._write_list_page()

    def month_dir(self, month: str) -> Path:
        return self.dir / month[:4] / month[5:]

    def add(self, month: str, messages: Sequence[bytes]) -> None:
        """Archive `messages` into `month`, as `mhonarc -add` does when mail arrives."""
        assert MHONARC is not None
        out = self.month_dir(month)
        out.mkdir(parents=True, exist_ok=True)
        mbox = self.root / "incoming.mbox"
        mbox.write_bytes(render_mbox(list(messages), rd=False))
        paging = ["-idxsize", str(self.page_size), "-multipg"] if self.page_size else []
        self._mhonarc("-add", *paging, str(mbox), out=out)
        mbox.unlink()
        self._write_list_page()

    def remove(self, month: str, number: int) -> None:
        """Delete message `number` from `month`'s archive (`mhonarc -rmm`)."""
        self._mhonarc("-rmm", str(number), out=self.month_dir(month))

    def _mhonarc(self, *args: str, out: Path) -> None:
        assert MHONARC is not None
        # `out` is absolute: MHonArc reads its database back with Perl's `require`,
        # which finds no relative path.
        subprocess.run(
            [MHONARC, "-quiet", "-outdir", str(out), *args],
            check=True,
            capture_output=True,
            timeout=120,
        )

    def months(self) -> list[str]:
        return sorted(
            f"{y.name}-{m.name}"
            for y in self.dir.iterdir()
            if y.is_dir()
            for m in y.iterdir()
            if m.is_dir()
        )

    def pages(self, month: str | None = None) -> list[Path]:
        months = [month] if month else self.months()
        return sorted(p for m in months for p in self.month_dir(m).glob("msg*.html"))

    def message_ids(self) -> set[str]:
        """The Message-IDs the archive holds, as MHonArc wrote them in its pages
        (without the ones it made up for messages that had none)."""
        found = set()
        for page in self.pages():
            match = _MESSAGE_ID.search(page.read_bytes())
            assert match is not None, page
            value = match.group(1).replace(b"&#45;", b"-").decode()
            if not value.endswith("@NO-ID-FOUND.mhonarc.org"):
                found.add(value)
        return found

    def _write_list_page(self) -> None:
        # lists.debian.org's list page: per month a link to each of its indexes.
        rows = []
        if self.dir.exists():
            for month in self.months():
                d = f"{month[:4]}/{month[5:]}/"
                rows.append(
                    f'<li>{month}: <a href="{d}threads.html">threads</a>'
                    f' <a href="{d}maillist.html">date</a></li>'
                )
        page = f"<html><body><h1>{self.name}</h1><ul>{''.join(rows)}</ul></body></html>"
        (self.dir / "index.html").write_text(page)


class StaticServer(ThreadedServer):
    """The archive's files on 127.0.0.1, as a static web server serves them."""

    thread_name = "mhonarc-server"

    def __init__(self, root: Path, *, slow: float = 0.0) -> None:
        super().__init__()
        self.root = root.resolve()
        self.slow = slow  # seconds added to each message page: a harvest long enough to kill
        self.port = 0
        self.requests: list[Logged] = []
        self._runner: web.AppRunner | None = None

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path.lstrip('/')}"

    def reset_log(self) -> None:
        self.requests.clear()

    def message_pages(self) -> list[Logged]:
        return [r for r in self.requests if re.search(r"/msg\d+\.html$", r.path)]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = (self.root / request.path.lstrip("/")).resolve()
        if path.is_dir():
            path = path / "index.html"
        if self.slow and path.name.startswith("msg"):
            await asyncio.sleep(self.slow)
        if not path.is_relative_to(self.root) or not path.is_file():
            response: web.StreamResponse = web.Response(status=404)
        else:
            response = web.FileResponse(path)
        return response

    async def _log(self, request: web.Request, response: web.StreamResponse) -> None:
        # Called as the response is sent: a file response has chosen 200, 206 or 304.
        headers = {k.lower(): v for k, v in request.headers.items()}
        self.requests.append(Logged(request.path, response.status, headers))

    async def _serve(self) -> None:
        app = web.Application()
        app.on_response_prepare.append(self._log)
        app.router.add_get("/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    async def _shutdown(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
