"""Messages into threads (thresher.serve.threads), on rows as the store gives them."""

from __future__ import annotations

from typing import Any

from thresher.serve.threads import MAX_DEPTH, build_threads


def row(i: int, mid: str | None, reply: str | None = None, refs: str = "", date: float = 0) -> Any:
    return {"id": i, "message_id": mid, "in_reply_to": reply, "refs": refs or None,
            "date": date or float(i)}  # fmt: skip


def shape(rows: list[Any]) -> list[list[tuple[int, int]]]:
    return [[(d, r["id"]) for d, r in t.messages] for t in build_threads(rows)]


def test_replies_hang_under_their_parents_in_date_order() -> None:
    rows = [row(1, "a"), row(3, "c", "a", "a"), row(2, "b", "a", "a"), row(4, "d", "b", "a b")]
    assert shape(rows) == [[(0, 1), (1, 2), (2, 4), (1, 3)]]


def test_references_alone_and_missing_parents_keep_the_thread_together() -> None:
    # d replies to c, which the archive lost; its References still reach a.
    rows = [row(1, "a"), row(2, "d", None, "a c")]
    assert shape(rows) == [[(0, 1), (1, 2)]]
    # Nothing of the thread stored but two replies: each starts its own thread.
    assert shape([row(1, "x", "gone"), row(2, "y", "gone")]) == [[(0, 1)], [(0, 2)]]


def test_cycles_shared_ids_and_undated_mail_do_not_break_it() -> None:
    rows = [row(1, "a", "b"), row(2, "b", "a")]
    assert sorted(i for t in shape(rows) for _, i in t) == [1, 2]
    dup = [row(1, "a"), row(2, "a"), row(3, "r", "a")]
    assert shape(dup) == [[(0, 1), (1, 3)], [(0, 2)]]
    undated = [{**row(1, "a"), "date": None}, row(2, "b", "a")]
    assert shape(undated) == [[(0, 1), (1, 2)]]


def test_a_deep_chain_is_capped_in_depth_not_in_length() -> None:
    rows = [row(0, "m0")] + [row(i, f"m{i}", f"m{i - 1}") for i in range(1, 40)]
    [thread] = build_threads(rows)
    assert thread.size == 40 and max(d for d, _ in thread.messages) == MAX_DEPTH
