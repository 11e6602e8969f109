"""Shards of a crawl run: which shard owns a host, how a limit is split, and the protocol
of their commits (URLs sent through inboxes, idle shards, the end of the run), on a real
store of each backend — step by step, and with shards in threads crawling a random web
at once."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter, defaultdict

import pytest
from hypothesis import given
from hypothesis import strategies as st

from thresher.crawl.ledger import Batch, CrawlLedger, Shard, ShardState, Unowned, from_signed
from thresher.frontier import host_of, url_hash
from thresher.store import Store, open_store

SOURCE = "web"
RUN = 1


def url(host: int, page: int) -> str:
    return f"http://h{host}.example/{page}"


@given(st.integers(min_value=0, max_value=10_000), st.integers(min_value=1, max_value=64))
def test_shares_of_a_limit_add_up_and_differ_by_one_at_most(limit: int, count: int) -> None:
    shares = [Shard(i, count).share(limit) for i in range(count)]
    assert sum(shares) == limit
    assert max(shares) - min(shares) <= 1


def commit(
    store: Store,
    ledger: CrawlLedger,
    batch: Batch | None = None,
    *,
    idle: bool,
    unowned: Unowned | None = None,
) -> ShardState:
    with store.transaction() as tx:
        state = ledger.commit(
            tx,
            Batch() if batch is None else batch,
            None,
            queued=0,
            hosts=0,
            now=1.0,
            idle=idle,
            unowned=unowned,
        )
    assert state is not None
    return state


def test_the_run_ends_only_when_every_shard_is_idle_and_no_url_waits(store: Store) -> None:
    a = CrawlLedger(SOURCE, RUN, job=None, owner=None, shard=Shard(0, 2))
    b = CrawlLedger(SOURCE, RUN, job=None, owner=None, shard=Shard(1, 2))
    with store.transaction() as tx:
        a.load(tx, 1.0)
    # B has not started: A, idle, does not end the run.
    assert commit(store, a, idle=True) == ShardState([], done=False, siblings_waiting=False)

    # A meets two new hosts: each gets an owner, the one with the fewest hosts (A, then
    # B), and the URL of B's host is sent to B in the same commit.
    ua, ub = "http://a.example/1", "http://b.example/1"
    batch = Batch()
    for u, host in ((ua, "a.example"), (ub, "b.example")):
        a.insert(batch, u, url_hash(u), host, 3, 1)
    unowned = {"a.example": [(ua, url_hash(ua), 3, 0)], "b.example": [(ub, url_hash(ub), 3, 0)]}
    state = commit(store, a, batch, idle=False, unowned=unowned)
    assert state.owners == {"a.example": 0, "b.example": 1} and not state.done
    # A finds the URL again, nearer a seed, and sends it too.
    batch = Batch()
    a.send(batch, 1, ub, url_hash(ub), 2)
    assert not commit(store, a, batch, idle=True).done

    with store.transaction() as tx:
        loaded = b.load(tx, 1.0)
    # B's pending URLs are those of its hosts; each shard knows every host's owner.
    assert [p.url for p in loaded.pending] == [ub]
    assert loaded.owners == {"a.example": 0, "b.example": 1}
    with store.transaction() as tx:
        assert [p.url for p in a.load(tx, 1.0).pending] == [ua]
    assert not commit(store, a, idle=False).done  # A restarted, with a URL in hand
    # B takes its inbox, once, at the lesser depth, and is busy in the same commit.
    state = commit(store, b, idle=True)
    assert [(p.url, p.depth) for p in state.received] == [(ub, 2)] and not state.done
    assert not commit(store, a, idle=True).done
    assert commit(store, b, idle=True).done  # nothing came: the run is over
    assert commit(store, a, idle=True).done
    with store.transaction() as tx:
        shards = tx.all("crawl_shard_rows", run=RUN)
    assert [(r["shard"], r["idle"]) for r in shards] == [(0, 1), (1, 1)]


def test_a_new_run_gives_known_hosts_owners_the_busiest_first(store: Store) -> None:
    """The second run of a crawl: its shards split the hosts of the URLs to revisit."""
    first = CrawlLedger(SOURCE, RUN, job=None, owner=None)
    with store.transaction() as tx:
        first.load(tx, 1.0)
    batch = Batch()
    sizes = {"big.example": 5, "mid.example": 3, "small.example": 2, "tiny.example": 1}
    for host, n in sizes.items():
        for i in range(n):
            u = f"http://{host}/{i}"
            first.insert(batch, u, url_hash(u), host, 0, 0)
    with store.transaction() as tx:
        first.commit(tx, batch, None, queued=0, hosts=0, now=1.0)
    shards = [CrawlLedger(SOURCE, RUN + 1, job=None, owner=None, shard=Shard(i, 2)) for i in (0, 1)]
    with store.transaction() as tx:
        zero = shards[0].load(tx, 2.0)
    with store.transaction() as tx:
        one = shards[1].load(tx, 2.0)
    expected = {"big.example": 0, "mid.example": 1, "small.example": 0, "tiny.example": 1}
    assert zero.owners == one.owners == expected
    assert len(zero.pending) == 7 and len(one.pending) == 4


def test_a_commit_writes_every_row_of_a_big_batch_as_the_rows_say(store: Store) -> None:
    """A commit writes each kind of row in one statement (a JSON array): hashes across
    the whole 64-bit range, a URL met twice, validators kept or replaced, text no
    database takes as it is, and a URL sent twice, all as one row at a time would."""
    ledger = CrawlLedger(SOURCE, RUN, job=None, owner=None, shard=Shard(0, 2))
    with store.transaction() as tx:
        ledger.load(tx, 1.0)
    rng = random.Random(7)
    hashes = [0, 1, (1 << 63) - 1, 1 << 63, (1 << 64) - 1] + [
        rng.getrandbits(64) for _ in range(3000)
    ]
    urls = {h: f"http://h{h % 5}.example/{h}" for h in hashes}
    batch = Batch()
    for seq, h in enumerate(hashes):
        ledger.insert(batch, urls[h], h, f"h{h % 5}.example", seq % 7, seq)
    ledger.insert(batch, urls[hashes[0]], hashes[0], "h0.example", 99, 99)  # kept: depth 0
    odd = "bad \udcff byte, NUL \x00 and \u00e9"
    for h in hashes[:2000]:
        ledger.finish(
            batch, h, "done", now=2.5, status=200, replace=True, etag=f'"{h}"', digest="d"
        )
    with store.transaction() as tx:
        ledger.commit(tx, batch, None, queued=0, hosts=0, now=1.0)

    later = CrawlLedger(SOURCE, RUN + 1, job=None, owner=None, shard=Shard(0, 2))
    with store.transaction() as tx:
        later.load(tx, 3.0)
    batch = Batch()
    later.finish(batch, hashes[0], "error", now=4.0, error=odd)  # keeps etag and digest
    later.finish(batch, hashes[1], "done", now=4.0, status=200, replace=True, etag=odd)
    later.send(batch, 1, urls[hashes[2]], hashes[2], 5)
    later.send(batch, 1, urls[hashes[2]], hashes[2], 2)
    later.send(batch, 1, urls[hashes[3]], hashes[3], 4)
    with store.transaction() as tx:
        later.commit(tx, batch, None, queued=0, hosts=0, now=4.0)
        rows = {r["url"]: r for r in tx.all("crawl_url_states", source=SOURCE)}
        etags = {
            r["url"]: (r["etag"], r["last_modified"])
            for r in tx.all("crawl_pending", source=SOURCE, run=RUN + 2)
        }
        inbox = tx.all("drain_crawl_inbox", run=RUN + 1, shard=1)

    assert len(rows) == len(hashes)
    assert rows[urls[hashes[0]]]["depth"] == 0
    assert {rows[urls[h]]["state"] for h in hashes[2:2000]} == {"done"}
    assert {rows[urls[h]]["state"] for h in hashes[2000:]} == {"queued"}
    first, second = rows[urls[hashes[0]]], rows[urls[hashes[1]]]
    stored = "bad ? byte, NUL \ufffd and \u00e9"  # what neither database takes, replaced
    assert (first["state"], first["error"], first["fetched_run"], first["digest"]) == (
        "error",
        stored,
        RUN + 1,
        "d",
    )
    assert etags[urls[hashes[0]]] == (f'"{hashes[0]}"', None)
    assert etags[urls[hashes[1]]] == (stored, None)
    assert second["digest"] is None  # a new body without a digest replaces the old one
    assert sorted((from_signed(r["hash"]), r["depth"]) for r in inbox) == sorted(
        [(hashes[2], 2), (hashes[3], 4)]
    )


@pytest.mark.parametrize("shards", [2, 3])
def test_shards_in_threads_crawl_a_random_web_once_and_agree_when_it_is_over(
    store: Store, store_url: str, shards: int
) -> None:
    """Each thread is one shard with its own store connection: it fetches its hosts' URLs
    a few per commit, in random order and at random speeds, starting late or not, and
    gives hosts owners as the engine does (a link to a new host waits for a commit)."""
    rng = random.Random(shards)
    hosts, pages = 7, 40
    web = {
        url(h, p): [url(rng.randrange(hosts), rng.randrange(pages)) for _ in range(4)]
        for h in range(hosts)
        for p in range(pages)
    }
    seeds = [url(0, 0), url(1, 0)]
    reachable, todo = set(seeds), list(seeds)
    while todo:
        for link in web[todo.pop()]:
            if link not in reachable:
                reachable.add(link)
                todo.append(link)

    fetched: list[tuple[int, str]] = []
    ended: list[set[str]] = []  # what had been fetched when each shard saw the end
    owner_of: dict[str, set[int]] = defaultdict(set)  # as each shard saw it
    errors: list[BaseException] = []
    lock = threading.Lock()

    def crawl_shard(index: int) -> None:
        r = random.Random(index)
        time.sleep(r.random() * 0.2)
        own = open_store(store_url)
        try:
            shard = Shard(index, shards)
            ledger = CrawlLedger(SOURCE, RUN, job=None, owner=None, shard=shard)
            with own.transaction() as tx:
                loaded = ledger.load(tx, 1.0)
            sieve, queue = loaded.sieve, [p.url for p in loaded.pending]
            owners = loaded.owners
            unowned: dict[str, list[tuple[str, int, int, int]]] = defaultdict(list)

            def discover(batch: Batch, links: list[str]) -> None:
                for link, h in sieve.offer_hashed((x, url_hash(x)) for x in links):
                    host = host_of(link)
                    ledger.insert(batch, link, h, host, 0, 0)
                    owner = owners.get(host)
                    if owner is None:
                        unowned[host].append((link, h, 0, 0))
                    elif owner == index:
                        queue.append(link)
                    else:
                        ledger.send(batch, owner, link, h, 0)

            batch = Batch()
            discover(batch, seeds)
            while True:
                r.shuffle(queue)
                for _ in range(min(len(queue), r.randrange(1, 6))):
                    page = queue.pop()
                    with lock:
                        fetched.append((index, page))
                    ledger.finish(batch, url_hash(page), "done", now=1.0)
                    batch.counts["pages"] += 1
                    discover(batch, web[page])
                asked = dict(unowned)
                unowned.clear()
                state = commit(own, ledger, batch, idle=not queue and not asked, unowned=asked)
                batch = Batch()
                owners.update(state.owners)
                for host, urls in asked.items():
                    if owners[host] == index:
                        queue.extend(u for u, _, _, _ in urls)
                for link, _ in sieve.offer_hashed((p.url, p.hash) for p in state.received):
                    queue.append(link)
                if state.done:
                    with lock:
                        ended.append({p for _, p in fetched})
                        for host, o in owners.items():
                            owner_of[host].add(o)
                    return
                if not queue:
                    time.sleep(0.002)
        except BaseException as exc:
            errors.append(exc)
        finally:
            own.close()

    threads = [threading.Thread(target=crawl_shard, args=(i,)) for i in range(shards)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert len(ended) == shards
    # Every reachable page fetched once, by the one owner of its host; none ended early.
    assert Counter(p for _, p in fetched) == Counter(reachable)
    assert all(len(o) == 1 for o in owner_of.values())
    assert all(owner_of[host_of(p)] == {i} for i, p in fetched)
    counts = Counter(next(iter(o)) for o in owner_of.values())
    assert max(counts.values()) - min(counts.values()) <= 1  # hosts split evenly
    assert all(seen == reachable for seen in ended)
    with store.transaction() as tx:
        run = tx.one("get_crawl_run", run=RUN)
        assert run is not None and run["pages"] == len(reachable)
        assert not tx.all("drain_crawl_inbox", run=RUN, shard=0)
