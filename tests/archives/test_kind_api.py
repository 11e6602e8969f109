"""The archive kind API, through a kind written for this test.

Its units are not months (they are named like public-inbox's git epochs), it reads a
unit message by message from its stop sign and stores what it read in checkpoints, as
a kind with big units must. The shared jobs must store each message once, file it
under its Date's month, keep each unit's counts, confirm an unchanged unit without a
request, and resume a unit after a crash from its last checkpoint."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from test_archive_runs import Harvester, ShiftedClock, message_id, ts

from thresher.archives.kinds import ArchiveKind, Harvest, Listing, Port, Unit
from thresher.archives.mbox import RawMessage
from thresher.archives.units import Known
from thresher.errors import TransientError
from thresher.sources.archives import register_kind

CHECKPOINT = 2


class Numbered(ArchiveKind):
    """Numbered message files: `index.json` maps each unit to its count, and message n
    of unit U is `U/n.eml`. The stop sign is the last message number stored."""

    name = "test-numbered"
    doc = "Numbered message files (tests only)."

    def __init__(self) -> None:
        self.fetched: list[str] = []
        self.crash_after: int | None = None  # raise once this many messages were fetched

    def check_url(self, url: str) -> str:
        return url

    async def list_units(
        self, port: Port, url: str, known: Mapping[str, Known], grace: float
    ) -> Listing:
        got = await port.get(url)
        got.check(url)
        base = url.rsplit("/", 1)[0]
        counts = json.loads(got.content)
        return Listing(
            [Unit(u, (f"{base}/{u}/",), n, grows=True) for u, n in sorted(counts.items())]
        )

    async def harvest(self, port: Port, unit: Unit, known: Known | None, max_bytes: int) -> Harvest:
        assert unit.expected is not None
        stop = known.stop_offset if known is not None and known.stop_offset is not None else 0
        if known is not None and stop:
            # What vouches for everything before the stop sign came back with it (a git
            # kind would check that its commit is still an ancestor of the new head).
            assert known.tail_sha256 == f"commit-{stop}", known
        batch: list[RawMessage] = []
        for n in range(stop + 1, unit.expected + 1):
            url = f"{unit.urls[0]}{n}.eml"
            got = await port.get(url)
            got.check(url)
            self.fetched.append(url)
            batch.append(RawMessage(n, got.content))
            if len(batch) == CHECKPOINT:
                await port.checkpoint(unit.month, unit.urls[0], batch, n, f"commit-{n}")
                batch = []
                if self.crash_after is not None and len(self.fetched) >= self.crash_after:
                    self.crash_after = None
                    raise TransientError("the connection dropped after a checkpoint")
        return Harvest(
            url=unit.urls[0],
            status=200,
            messages=batch,
            counted=unit.expected,
            stop_offset=unit.expected,
            tail_sha256=f"commit-{unit.expected}",
        )


KIND = Numbered()
register_kind(KIND)


class Archive:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.counts: dict[str, int] = {}

    def add(self, unit: str, raw: bytes) -> None:
        n = self.counts.get(unit, 0) + 1
        (self.root / unit).mkdir(parents=True, exist_ok=True)
        (self.root / unit / f"{n}.eml").write_bytes(raw)
        self.counts[unit] = n
        (self.root / "index.json").write_text(json.dumps(self.counts))

    @property
    def url(self) -> str:
        return str(self.root / "index.json")


def mail(i: int, date: str | None = "Mon, 15 Jan 2024 10:00:00 +0000") -> bytes:
    dated = f"Date: {date}\n" if date else ""
    return (
        f"From: a{i}@example.org\nSubject: m{i}\n{dated}Message-ID: <m{i}@x>\n\nbody {i}\n".encode()
    )


def build(tmp_path: Path) -> Archive:
    archive = Archive(tmp_path / "archive")
    for i in range(5):
        archive.add("epoch-0", mail(i))
    archive.add("epoch-1", mail(5, "Thu, 1 Feb 2024 10:00:00 +0000"))
    archive.add("epoch-1", mail(6, None))
    archive.add("epoch-1", mail(2))  # the same message in two epochs
    return archive


def test_units_that_are_not_months_are_stored_by_date_and_counted_per_unit(
    store_url: str, tmp_path: Path
) -> None:
    archive = build(tmp_path)
    KIND.fetched.clear()
    harvester = Harvester(store_url, tmp_path, ShiftedClock(ts(2024, 3, 15)))
    harvester.add(archive.url, KIND.name)
    harvester.run()
    assert harvester.ids() == {f"m{i}@x" for i in range(7)}
    assert len(KIND.fetched) == 8
    by_month = harvester.query("SELECT month, count(*) AS n FROM messages GROUP BY month")
    assert {r["month"]: r["n"] for r in by_month} == {"2024-01": 5, "2024-02": 1, "undated": 1}
    units = harvester.months()
    assert {u: (r["expected"], r["counted"]) for u, r in units.items()} == {
        "epoch-0": (5, 5),
        "epoch-1": (3, 3),
    }
    # m2 is in both units and counted by whichever stored it first.
    assert sum(r["stored"] for r in units.values()) == 7
    assert units["epoch-1"]["stop_offset"] == 3
    assert units["epoch-1"]["stop_key"] == "m2@x"

    KIND.fetched.clear()
    harvester.run()  # the counts vouch for every unit: nothing is read
    assert KIND.fetched == []

    archive.add("epoch-1", mail(7))
    harvester.run()
    assert [Path(u).name for u in KIND.fetched] == ["4.eml"]
    assert sum(r["stored"] for r in harvester.months().values()) == 8 == harvester.count()


def test_a_unit_interrupted_after_a_checkpoint_resumes_from_it(
    store_url: str, tmp_path: Path
) -> None:
    archive = build(tmp_path)
    KIND.fetched.clear()
    KIND.crash_after = 2
    harvester = Harvester(store_url, tmp_path, ShiftedClock(ts(2024, 3, 15)))
    harvester.add(archive.url, KIND.name)
    harvester.run()
    # Every message was read once: the retry began after the checkpoint.
    assert len(KIND.fetched) == len(set(KIND.fetched)) == 8
    assert harvester.ids() == {f"m{i}@x" for i in range(7)}
    assert {r["message_id"] for r in harvester.query("SELECT message_id FROM messages")} == {
        message_id(mail(i)) for i in range(7)
    }
    jobs = harvester.query("SELECT attempts FROM jobs WHERE kind = 'archive.month'")
    assert sorted(j["attempts"] for j in jobs) == [1, 2]
    assert sum(r["stored"] for r in harvester.months().values()) == 7
