from __future__ import annotations

from collections.abc import Iterator

import pytest
from hostile_server import Hostile


@pytest.fixture
def hostile() -> Iterator[Hostile]:
    """A hostile server on 16 loopback hosts."""
    with Hostile(hosts=16) as server:
        yield server
