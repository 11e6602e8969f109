"""News URLs and what a session with a news server is given: `news_url` checks a URL
(RFC 5538) into the `NewsAddress` of its server and its group; `NewsSettings` are one
session's manners and time limits.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from ..errors import SourceError

__all__ = ["NEWS_SCHEMES", "NewsAddress", "NewsSettings", "news_url", "server_url"]

# Scheme → (TLS, default port). RFC 5538 names news: and nntp:; nntps: and the older
# snews: are the same over TLS (port 563, RFC 4642).
NEWS_SCHEMES = {
    "nntp": (False, 119),
    "news": (False, 119),
    "nntps": (True, 563),
    "snews": (True, 563),
}

# RFC 3977 §4.1 newsgroup names: printable US-ASCII but for the wildmat characters.
_GROUP = re.compile(r"^[!-)+\-.0-9:-Z^-~]+$")


@dataclass(frozen=True)
class NewsAddress:
    """Where a group is served: the host's name, its port, and whether over TLS."""

    host: str
    port: int
    tls: bool

    @property
    def lease_key(self) -> str:
        # The host, whatever the port: one connection to a news host at a time.
        return f"nntp:{self.host}"


def news_url(url: str) -> tuple[NewsAddress, str, str]:
    """A news URL checked: its address, its group, and the URL to keep (`nntp://` or
    `nntps://`, host in lower case, the default port left out). `nntp://host:port/group`,
    `news://host/group` (RFC 5538), `nntps://host/group` (TLS). SourceError otherwise,
    also for a user or password in the URL: they go in options, not in a URL that is
    shown everywhere."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in NEWS_SCHEMES:
        raise SourceError(f"a news URL is nntp://, news:// or nntps://HOST/GROUP, not {url!r}")
    if "@" in parts.netloc:
        raise SourceError(
            "a news URL takes no user or password: give them as options"
            " (-o user=NAME -o password=SECRET)"
        )
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        raise SourceError(f"bad port in {url!r}") from None
    if not host:
        raise SourceError(f"a news URL needs a host (news://HOST/GROUP), not {url!r}")
    tls, default = NEWS_SCHEMES[scheme]
    # An article number after the group (RFC 5538 nntp: URLs) names the group still.
    segments = [s for s in parts.path.split("/") if s]
    group = unquote(segments[0]) if segments else ""
    if not group or not _GROUP.match(group) or len(segments) > 2 or "@" in group:
        raise SourceError(f"a news URL names one newsgroup (HOST/GROUP), not {url!r}")
    if len(segments) == 2 and not segments[1].isdigit():
        raise SourceError(f"a news URL names one newsgroup (HOST/GROUP), not {url!r}")
    port = port or default
    shown = f"[{host}]" if ":" in host else host
    netloc = shown if port == default else f"{shown}:{port}"
    kept = f"{'nntps' if tls else 'nntp'}://{netloc}/{group}"
    return NewsAddress(host.lower(), port, tls), group, kept


def server_url(address: NewsAddress) -> str:
    """The server as errors name it: scheme, host and port."""
    host = f"[{address.host}]" if ":" in address.host else address.host
    return f"{'nntps' if address.tls else 'nntp'}://{host}:{address.port}"


@dataclass(frozen=True)
class NewsSettings:
    """How one session behaves: the source's manners and the config's time limits."""

    connect_timeout: float = 10.0  # one connection attempt (and TLS), name resolution
    read_timeout: float = 30.0  # the longest silence while waiting for an answer
    command_timeout: float = 120.0  # one command and its whole answer
    delay: float = 1.0  # seconds between two batches of commands, and two sessions
    batch: int = 100  # commands per batch
    allow_private: bool = False
    user: str | None = None
    password: str | None = None
    max_wait: float = 30.0  # longest wait for the host's turn before handing the job back
    max_defer: float = 3600.0  # a turn further off is a failed attempt

    def __post_init__(self) -> None:
        for name in ("user", "password"):
            value = getattr(self, name)
            if value is not None and re.search(r"[\x00-\x20\x7f]", value):
                raise SourceError(f"the {name} option must not hold spaces or control characters")
