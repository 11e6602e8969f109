"""nntplib, imported on first use, and its client as a session uses it: connected to an
address already checked, with lines as long as an article may be, and a socket another
thread can shut down.
"""

from __future__ import annotations

import socket
import ssl
import warnings
from collections.abc import Callable
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from .news_address import NewsAddress, NewsSettings

if TYPE_CHECKING:
    import nntplib

# `NewsClient`, below, is a type for checkers only (nntplib is imported on first use,
# and `client_class` makes the class then): not in __all__, which lists what exists.
__all__ = ["LINE_MAX", "client_class", "load_nntplib", "tls_context"]

LINE_MAX = 1 << 20  # a response line, but an article's (which may be up to max_bytes)


def load_nntplib() -> Any:
    """The module, imported on first use (most processes never read news). It warns
    that it is deprecated (3.11, 3.12) or separately installed (3.13 on); Thresher
    knows, and depends on `standard-nntplib` where the standard library lacks it."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", r".*nntplib", DeprecationWarning)
        import nntplib
    return nntplib


_CLIENT: type[NewsClient] | None = None


def client_class() -> type[NewsClient]:
    global _CLIENT
    if _CLIENT is None:
        _CLIENT = _make_client(load_nntplib())
    return _CLIENT


if TYPE_CHECKING:

    class NewsClient(nntplib.NNTP):
        line_max: int
        oversized: int

        def __init__(
            self,
            address: str,
            where: NewsAddress,
            settings: NewsSettings,
            tls: ssl.SSLContext | None,
            opened: Callable[[socket.socket], None],
        ) -> None: ...

        def shut_down(self) -> None: ...

        def drop(self) -> None: ...


def _make_client(nntp: Any) -> type[NewsClient]:
    class Client(nntp.NNTP):  # type: ignore[misc]
        """nntplib's client, connected to an address already checked (the name kept
        for TLS and for the server), with a larger limit on the lines of an article."""

        def __init__(
            self,
            address: str,
            where: NewsAddress,
            settings: NewsSettings,
            tls: ssl.SSLContext | None,
            opened: Callable[[socket.socket], None],
        ) -> None:
            self._address = address
            self._opened = opened
            self._connect_timeout = settings.connect_timeout
            self._tls = tls
            self.line_max = LINE_MAX
            self.oversized = 0  # bytes of lines too long, read and dropped
            super().__init__(where.host, where.port, readermode=True, timeout=settings.read_timeout)

        def _create_socket(self, timeout: float) -> socket.socket:
            sock = socket.create_connection((self._address, self.port), self._connect_timeout)
            self._opened(sock)  # so that a cancelled session can shut it down
            sock.settimeout(timeout)
            if self._tls is None:
                return sock
            try:
                return self._tls.wrap_socket(sock, server_hostname=self.host)
            except BaseException:
                sock.close()
                raise

        def _getline(self, strip_crlf: bool = True) -> bytes:
            # nntplib refuses lines over 2048 bytes, which mail has (long HTML lines):
            # an article's line may be as long as the article may be. A longer one is
            # read to its end and dropped, the article marked too large, so the
            # connection stays in step with the server.
            line: bytes = self.file.readline(self.line_max + 1)
            if len(line) > self.line_max:
                self.oversized += len(line)
                while line and not line.endswith(b"\n"):
                    line = self.file.readline(self.line_max + 1)
                    self.oversized += len(line)
                line = b"\r\n"
            if not line:
                raise EOFError
            if strip_crlf:
                if line.endswith(b"\r\n"):
                    line = line[:-2]
                elif line[-1:] in b"\r\n":
                    line = line[:-1]
            return line

        def shut_down(self) -> None:
            # From the event loop's thread, while the session's thread may be blocked
            # in a read: shutdown(2) on the descriptor wakes it. The socket class's own
            # method, not SSLSocket's, which would pull the TLS state from under it.
            with suppress(OSError):
                socket.socket.shutdown(self.sock, socket.SHUT_RDWR)

        def drop(self) -> None:
            with suppress(OSError):
                self._close()

    return Client


def tls_context() -> ssl.SSLContext:
    return ssl.create_default_context()
