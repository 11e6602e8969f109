"""The crawl frontier's core: what is fetched, when, and never twice — as decisions.

A URL goes as two things: the URL to fetch (as linked, resolved as browsers resolve it:
`thresher.weburl`) and its key (the canonical form: `canonicalize`, `key_of`). In scope?
(`Scope`, by the key) → new? (`Sieve`, by the key's hash) → allowed by robots.txt?
(`RobotsCache`, the URL as fetched) → queued per host with its key (`Workbench.add`) →
handed out politely (`Workbench.next_fetch`) → reported back (`Workbench.on_done`).
Nothing here does I/O or reads a clock: every event carries `now`, so the same core
serves every kind of source and is tested with plain floats. Persistence, DNS and fetching
belong to the shell around it.
"""

from __future__ import annotations

from thresher.frontier.canonical import canonicalize, host_of, key_of, url_hash
from thresher.frontier.errors import FrontierError, InvalidScope, InvalidURL
from thresher.frontier.politeness import HostState, Politeness
from thresher.frontier.robots import RobotsCache, robots_url, site_of
from thresher.frontier.scope import Hop, Scope, ScopeKind
from thresher.frontier.sieve import Sieve
from thresher.frontier.workbench import Fetch, Workbench, WorkbenchStats

__all__ = [
    "Fetch",
    "FrontierError",
    "Hop",
    "HostState",
    "InvalidScope",
    "InvalidURL",
    "Politeness",
    "RobotsCache",
    "Scope",
    "ScopeKind",
    "Sieve",
    "Workbench",
    "WorkbenchStats",
    "canonicalize",
    "host_of",
    "key_of",
    "robots_url",
    "site_of",
    "url_hash",
]
