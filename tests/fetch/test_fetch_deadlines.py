"""The fetcher's read and total timeouts (`thresher.fetch.deadlines`): one timer for every
exchange in flight, cancelling exactly the silent or overlong ones, and never mistaking
someone else's cancellation for a timeout."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest
from aiohttp import web
from fetch_servers import RawServer, raw_server, serve

from thresher.fetch import Fetcher, FetchSettings, FetchTimeout
from thresher.fetch.deadlines import PATIENCE_BYTES, READ_EXPIRED, TOTAL_EXPIRED, Deadlines


async def _exchange(
    deadlines: Deadlines, send_after: float = 0, hear_every: float = 60, received: int = 0
) -> str:
    """An exchange whose request goes out after `send_after` seconds (as one waiting for
    a pooled connection), which then receives `received` bytes of body at once and hears
    from the server every `hear_every` seconds; why it expired. Run as a task of its
    own, or awaited by the task it times."""
    exchange = deadlines.start()
    try:
        await asyncio.sleep(send_after)
        exchange.hear()
        if received:
            exchange.hear(received)
        while True:
            await asyncio.sleep(hear_every)
            exchange.hear()
    except asyncio.CancelledError:
        if exchange.expired is None:
            raise
        return exchange.expired
    finally:
        deadlines.finish(exchange)


def test_silence_and_length_are_cancelled_each_for_its_reason() -> None:
    async def body() -> None:
        # Bounds wide enough for a loaded machine's late timers; the reasons tell the
        # two deadlines apart.
        deadlines = Deadlines(asyncio.get_running_loop(), read_timeout=0.2, total_timeout=1.0)
        started = time.monotonic()
        silent = asyncio.create_task(_exchange(deadlines))
        chatty = asyncio.create_task(_exchange(deadlines, hear_every=0.05))
        assert (await silent).startswith(READ_EXPIRED)
        assert 0.19 < time.monotonic() - started < 30
        assert await chatty == TOTAL_EXPIRED
        assert 0.99 < time.monotonic() - started < 30
        # Nothing in flight: the timer's next check is its last.
        await asyncio.sleep(0.3)
        assert not deadlines.armed

    asyncio.run(body())


def test_a_finished_exchange_is_not_cancelled_and_the_timer_stops() -> None:
    async def body() -> None:
        deadlines = Deadlines(asyncio.get_running_loop(), read_timeout=0.5, total_timeout=5)
        for _ in range(3):
            exchange = deadlines.start()
            deadlines.heard(asyncio.current_task())
            assert deadlines.armed
            await asyncio.sleep(0.01)
            deadlines.finish(exchange)
        await asyncio.sleep(0.7)  # past every read deadline: this task is not cancelled
        assert exchange.expired is None
        assert not deadlines.armed

    asyncio.run(body())


def test_an_unsent_request_is_not_silent_but_counts_towards_the_total() -> None:
    async def body() -> None:
        deadlines = Deadlines(asyncio.get_running_loop(), read_timeout=0.05, total_timeout=0.3)
        started = time.monotonic()
        assert await _exchange(deadlines, send_after=60) == TOTAL_EXPIRED
        assert time.monotonic() - started > 0.25

    asyncio.run(body())


def test_silence_is_caught_in_time_while_an_unsent_request_waits() -> None:
    # Once only unsent exchanges are in flight, the timer is set for their total; an
    # exchange sent later, or another starting, must still be cut read_timeout after
    # its last news, not when the long total comes.
    async def body() -> None:
        deadlines = Deadlines(asyncio.get_running_loop(), read_timeout=0.2, total_timeout=30)
        started = time.monotonic()
        late = asyncio.create_task(_exchange(deadlines, send_after=0.4))
        waiting = asyncio.create_task(_exchange(deadlines, send_after=60))
        await asyncio.sleep(0.5)
        other = asyncio.create_task(_exchange(deadlines, send_after=0))
        # Silence ended them (the reason), not the 30 s total.
        assert (await late).startswith(READ_EXPIRED)
        assert 0.59 < time.monotonic() - started < 15
        assert (await other).startswith(READ_EXPIRED)
        assert 0.69 < time.monotonic() - started < 15
        waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiting

    asyncio.run(body())


def test_closing_stops_the_timer() -> None:
    async def body() -> None:
        deadlines = Deadlines(asyncio.get_running_loop(), read_timeout=0.05, total_timeout=1)
        deadlines.start()
        deadlines.close()
        assert not deadlines.armed
        await asyncio.sleep(0.1)  # not cancelled: nothing watches it any more

    asyncio.run(body())


def test_waiting_for_a_pooled_connection_is_not_silence() -> None:
    # One connection, six requests each answered after 0.2 s: the last waits 1 s for
    # the connection, longer than read_timeout, but the server is never silent for
    # longer than 0.2 s once it has the request.
    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(0.2)
        return web.Response(text="late but fine")

    async def body() -> None:
        settings = FetchSettings(allow_private=True, limit=1, read_timeout=0.6, total_timeout=9)
        async with serve(slow) as base, Fetcher(settings) as fetcher:
            answers = await asyncio.gather(*(fetcher.get(f"{base}/{n}") for n in range(6)))
        assert [a.status for a in answers] == [200] * 6

    asyncio.run(body())


async def _hang(writer: asyncio.StreamWriter, server: RawServer) -> None:
    """A raw server's answer: nothing, until the server stops."""
    await server.stop.wait()


def test_someone_elses_cancellation_stays_a_cancellation() -> None:
    async def body() -> None:
        settings = FetchSettings(allow_private=True, read_timeout=1, total_timeout=9)
        async with raw_server(_hang) as server, Fetcher(settings) as fetcher:
            task = asyncio.create_task(fetcher.get(server.base + "/"))
            await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # The fetcher goes on timing the next exchange.
            with pytest.raises(FetchTimeout, match="read_timeout"):
                await fetcher.get(server.base + "/again")
            server.stop.set()

    asyncio.run(body())


def test_the_fetcher_leaves_no_timer_behind() -> None:
    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="hello")

    async def body() -> None:
        async with serve(hello) as base:
            fetcher = Fetcher(FetchSettings(allow_private=True))
            async with fetcher:
                await fetcher.get(base + "/")
                deadlines = fetcher._deadlines
                assert deadlines is not None and deadlines.armed
            assert not deadlines.armed

    asyncio.run(body())


def test_a_timed_out_fetch_leaves_its_task_as_it_found_it() -> None:
    # The deadline's cancellation is taken back: later timeouts in the same task (a
    # worker's loop, say) still raise TimeoutError instead of cancelling the task.
    async def body() -> None:
        settings = FetchSettings(allow_private=True, read_timeout=0.1, total_timeout=5)
        async with raw_server(_hang) as server, Fetcher(settings) as fetcher:
            for _ in range(2):
                with pytest.raises(FetchTimeout):
                    await fetcher.get(server.base + "/")
                task = asyncio.current_task()
                assert task is not None and task.cancelling() == 0
                with pytest.raises(TimeoutError):
                    async with asyncio.timeout(0.01):
                        await asyncio.sleep(1)
            server.stop.set()

    asyncio.run(body())


# -- Silence allowed, scaled to what the server has sent ---------------------------------


def test_the_silence_allowed_grows_with_the_body_received() -> None:
    """Nothing of the body: given up after stall_timeout. Each PATIENCE_BYTES of body
    buys a second more, up to read_timeout."""

    async def body() -> None:
        deadlines = Deadlines(
            asyncio.get_running_loop(), read_timeout=1.5, total_timeout=30, stall_timeout=0.2
        )
        started = time.monotonic()
        nothing = asyncio.create_task(_exchange(deadlines))
        some = asyncio.create_task(_exchange(deadlines, received=PATIENCE_BYTES // 2))
        plenty = asyncio.create_task(_exchange(deadlines, received=100 * PATIENCE_BYTES))
        # Each reason says how much silence it was allowed; the times only that none
        # came early (late timers on a busy machine are no failure).
        reason = await nothing
        assert time.monotonic() - started > 0.19
        assert reason.startswith(READ_EXPIRED) and "after 0 bytes" in reason
        assert "for 0.2 s" in reason
        reason = await some
        assert time.monotonic() - started > 0.69
        assert f"after {PATIENCE_BYTES // 2} bytes" in reason and "for 0.7 s" in reason
        reason = await plenty
        assert 1.49 < time.monotonic() - started < 29
        assert "for 1.5 s" in reason

    asyncio.run(body())


def test_without_a_stall_timeout_the_read_timeout_holds_throughout() -> None:
    async def body() -> None:
        loop = asyncio.get_running_loop()
        deadlines = Deadlines(loop, read_timeout=3, total_timeout=9)
        assert deadlines.first_patience == deadlines.stall_timeout == 3
        longer = Deadlines(loop, 3, 9, stall_timeout=10)
        assert longer.first_patience == 3  # never more than read_timeout

    asyncio.run(body())


def _stalls_after(sent: bytes):  # type: ignore[no-untyped-def]
    async def answer(writer: asyncio.StreamWriter, server: RawServer) -> None:
        writer.write(sent)
        await writer.drain()
        await server.stop.wait()

    return answer


@pytest.mark.parametrize(
    ("sent", "least", "allowed"),
    [
        (b"", 0.29, "0.3"),  # accepted, then nothing: not even the head
        (b"HTTP/1.1 200 OK\r\nContent-Length: 900000\r\n\r\n", 0.29, "0.3"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 900000\r\n\r\n" + b"x" * 300_000, 2.4, "2.5"),
    ],
    ids=["nothing", "head-only", "mid-body"],
)
def test_a_stalled_fetch_is_given_up_sooner_the_less_it_received(
    sent: bytes, least: float, allowed: str
) -> None:
    """A real loopback server that stalls: after nothing, or after the head alone, the
    fetch ends after stall_timeout; mid-way through a large body, after read_timeout."""
    settings = FetchSettings(
        allow_private=True, stall_timeout=0.3, read_timeout=2.5, total_timeout=30
    )

    async def body() -> None:
        async with raw_server(_stalls_after(sent)) as server, Fetcher(settings) as fetcher:
            started = time.monotonic()
            with pytest.raises(FetchTimeout) as caught:
                await fetcher.get(server.base + "/month.txt")
            # The silence allowed is in the reason: the times only that it was not
            # less, nor the 30 s total.
            assert least < time.monotonic() - started < 29
            assert READ_EXPIRED in str(caught.value)
            said = str(caught.value)
            assert f"for {allowed} s" in said or f"within {allowed} s" in said, said
            server.stop.set()

    asyncio.run(body())
