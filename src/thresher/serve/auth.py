"""Who may look: loopback by default; anywhere else, only with the token.

Why a token and not a login: the server only reads, and it is one operator's window on
their store. Bound to a loopback address nobody else can connect; bound elsewhere
(`--host 0.0.0.0`), anybody on the network could, so a token is required and the
server will not start without one.

The token is given once as `?token=T` (then kept in an HttpOnly, SameSite=Strict
cookie, so links and live refresh work) or with every request as
`Authorization: Bearer T` (scripts, Prometheus). Tokens are compared in constant time.

Why the Host header is checked when no token is needed: a web page elsewhere can point a
name of its own at 127.0.0.1 (DNS rebinding) and read a loopback server with the
browser's help; such a request names that foreign host, so only loopback names and
addresses are accepted.
"""

from __future__ import annotations

import hmac
import ipaddress
from dataclasses import dataclass

__all__ = ["COOKIE", "Access", "is_loopback"]

COOKIE = "thresher_token"

_LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost")


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address, IPv6 with or without brackets) is loopback."""
    host = host.strip("[]").lower()
    if host in _LOOPBACK_NAMES or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_name(host_header: str) -> str:
    """The host of a Host header without its port."""
    if host_header.startswith("["):
        return host_header[1 : host_header.find("]")] if "]" in host_header else host_header
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


@dataclass(frozen=True)
class Access:
    token: str | None

    @property
    def required(self) -> bool:
        return bool(self.token)

    def token_ok(self, given: str | None) -> bool:
        if not self.token or not given:
            return False
        return hmac.compare_digest(given.encode(), self.token.encode())

    def host_ok(self, host_header: str | None) -> bool:
        """With a token, any Host; without one, loopback names only (see above)."""
        if self.required:
            return True
        return host_header is not None and is_loopback(_host_name(host_header))
