"""Messages into threads, by In-Reply-To and References.

Why the nearest stored ancestor: a message's parent is the message its In-Reply-To names,
or else the last of its References that is stored (clients that drop In-Reply-To keep
References, and a parent missing from the archive should not cut a thread in two: the
reply hangs under the closest ancestor there is, as in JWZ's algorithm, without its
empty placeholders). A message whose ancestors are all missing starts a thread. A
Message-ID shared by several messages names the first of them; a cycle (two messages
naming each other) is broken at the message that closes it.

Pure functions of rows (`id`, `message_id`, `in_reply_to`, `refs`, `date`, …), so the month
view, the thread view and the tests share them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..store import Row

__all__ = ["MAX_DEPTH", "Thread", "build_threads", "first_ref", "flatten"]

# Deeper replies are shown at this depth: an indent per level stops being readable.
MAX_DEPTH = 12


@dataclass
class _Node:
    row: Row
    children: list[_Node] = field(default_factory=list)


@dataclass(frozen=True)
class Thread:
    """A thread: its first message, every message in reading order with its depth, and
    the span of dates."""

    root: Row
    messages: tuple[tuple[int, Row], ...]
    first: float | None
    last: float | None

    @property
    def size(self) -> int:
        return len(self.messages)

    def as_json(self, convert: Any) -> dict[str, Any]:
        return {
            "root": convert(self.root),
            "size": self.size,
            "messages": [{"depth": d, **convert(r)} for d, r in self.messages],
        }


def first_ref(refs: str | None) -> str | None:
    """The first Message-ID of a References value (the thread's root), as the store's
    thread index reads it."""
    if not refs:
        return None
    return refs.split(" ", 1)[0] or None


def _sort_key(row: Row) -> tuple[bool, float, int]:
    date = row.get("date")
    return (date is None, float(date or 0.0), int(row["id"]))


def _parents(row: Row) -> list[str]:
    """The Message-IDs that could be `row`'s parent, nearest first."""
    out = []
    if row.get("in_reply_to"):
        out.append(str(row["in_reply_to"]))
    out += reversed((row.get("refs") or "").split())
    return out


def build_threads(rows: Iterable[Row]) -> list[Thread]:
    """The threads of `rows`, oldest first (by the first message's date)."""
    ordered = sorted(rows, key=_sort_key)
    by_mid: dict[str, _Node] = {}
    nodes = []
    for row in ordered:
        node = _Node(row)
        nodes.append(node)
        mid = row.get("message_id")
        if mid and mid not in by_mid:
            by_mid[mid] = node
    parent: dict[int, _Node] = {}
    for node in nodes:
        for mid in _parents(node.row):
            candidate = by_mid.get(mid)
            if candidate is None or candidate is node or _reaches(candidate, node, parent):
                continue
            parent[id(node)] = candidate
            break
    roots = []
    for node in nodes:
        up = parent.get(id(node))
        if up is None:
            roots.append(node)
        else:
            up.children.append(node)
    threads = []
    for root in roots:
        flat = tuple(flatten(root))
        dates = [float(r["date"]) for _, r in flat if r.get("date") is not None]
        threads.append(
            Thread(root.row, flat, min(dates) if dates else None, max(dates) if dates else None)
        )
    return threads


def _reaches(start: _Node, target: _Node, parent: dict[int, _Node]) -> bool:
    """Whether walking up from `start` meets `target` (linking would close a cycle)."""
    seen = 0
    node: _Node | None = start
    while node is not None and seen <= len(parent):
        if node is target:
            return True
        node = parent.get(id(node))
        seen += 1
    return False


def flatten(root: _Node) -> list[tuple[int, Row]]:
    """The thread under `root` in reading order (each reply after its parent, siblings
    by date), with depths capped at `MAX_DEPTH`."""
    out: list[tuple[int, Row]] = []
    stack: list[tuple[int, _Node]] = [(0, root)]
    while stack:
        depth, node = stack.pop()
        out.append((min(depth, MAX_DEPTH), node.row))
        children: Sequence[_Node] = sorted(node.children, key=lambda n: _sort_key(n.row))
        stack.extend((depth + 1, child) for child in reversed(children))
    return out
