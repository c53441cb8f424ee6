"""LoopThread: results and exceptions cross unchanged (an exception keeps no reference cycle to
the caller's frame), timeouts and Ctrl-C cancel the coroutine, a call from the loop thread is
refused, and close stops everything (idempotently)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
import threading
import weakref
from collections.abc import Iterator

import pytest

from replog.client.loop_thread import LoopThread
from replog.errors import (
    ClientClosedError,
    IllegalStateError,
    KafkaTimeoutError,
    UnknownTopicOrPartitionError,
)


@pytest.fixture
def loop_thread() -> Iterator[LoopThread]:
    thread = LoopThread("test-client")
    yield thread
    thread.close()


def test_runs_a_coroutine_on_its_own_thread(loop_thread: LoopThread) -> None:
    async def where() -> str:
        return threading.current_thread().name

    assert loop_thread.run(where(), timeout_s=5, what="where") == "test-client"
    assert loop_thread.in_loop_thread() is False


def test_exceptions_propagate_unchanged(loop_thread: LoopThread) -> None:
    async def fail() -> None:
        raise UnknownTopicOrPartitionError("topic 'x' does not exist")

    with pytest.raises(UnknownTopicOrPartitionError, match="topic 'x' does not exist"):
        loop_thread.run(fail(), timeout_s=5, what="fail")

    async def builtin_timeout() -> None:
        raise TimeoutError("the coroutine's own")  # not to be mistaken for run's timeout

    with pytest.raises(TimeoutError, match="the coroutine's own"):
        loop_thread.run(builtin_timeout(), timeout_s=5, what="t")


def test_an_exception_raised_through_it_keeps_no_cycle_to_the_callers_frame(
    loop_thread: LoopThread,
) -> None:
    class Held:
        """What a caller's frame holds."""

    async def fail() -> None:
        raise UnknownTopicOrPartitionError("topic 'x' does not exist")

    def caller() -> weakref.ref[Held]:
        held = Held()
        with contextlib.suppress(UnknownTopicOrPartitionError):
            loop_thread.run(fail(), timeout_s=5, what="fail")
        return weakref.ref(held)

    gc.disable()  # only reference counting frees: what a cycle holds stays
    try:
        held = caller()
        assert held() is None, "the caller's frame is kept alive by a reference cycle"
    finally:
        gc.enable()


def test_timeout_cancels_the_coroutine_and_names_the_operation(loop_thread: LoopThread) -> None:
    cancelled = threading.Event()

    async def forever() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(KafkaTimeoutError, match=r"send to 'orders' did not finish within 200 ms"):
        loop_thread.run(forever(), timeout_s=0.2, what="send to 'orders'")
    assert cancelled.wait(5)
    # The loop still serves later calls.
    assert loop_thread.run(asyncio.sleep(0, "ok"), timeout_s=5, what="x") == "ok"


def test_ctrl_c_interrupts_the_wait_and_cancels_the_coroutine(loop_thread: LoopThread) -> None:
    assert threading.current_thread() is threading.main_thread()
    cancelled = threading.Event()
    main_ident = threading.main_thread().ident
    assert main_ident is not None

    async def interrupted() -> None:
        # Ctrl-C arrives while the user's thread waits on this call (no timeout).
        signal.pthread_kill(main_ident, signal.SIGINT)
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            loop_thread.run(interrupted(), timeout_s=None, what="poll")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert cancelled.wait(5)


def test_a_blocking_call_from_the_loop_thread_is_refused(loop_thread: LoopThread) -> None:
    async def nested() -> str:
        inner = asyncio.sleep(0, "never")
        try:
            loop_thread.run(inner, timeout_s=1, what="flush from a callback")
        except IllegalStateError as exc:
            return str(exc)
        return "ran"

    message = loop_thread.run(nested(), timeout_s=5, what="outer")
    assert "flush from a callback" in message and "own event loop thread" in message


def test_call_soon_runs_on_the_loop(loop_thread: LoopThread) -> None:
    seen: list[str] = []
    done = threading.Event()

    def note(text: str) -> None:
        seen.append(f"{text} on {threading.current_thread().name}")
        done.set()

    loop_thread.call_soon(note, "hello")
    assert done.wait(5)
    assert seen == ["hello on test-client"]


def test_close_cancels_running_work_joins_and_is_idempotent() -> None:
    thread = LoopThread("closing")
    started = threading.Event()
    cancelled = threading.Event()

    async def background() -> None:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    future = thread.submit(background())
    assert started.wait(5)
    thread.close()
    assert cancelled.is_set()
    assert future.cancelled()
    assert thread.loop.is_closed()
    thread.close()  # again: nothing happens
    coro = asyncio.sleep(0)
    with pytest.raises(ClientClosedError):
        thread.run(coro, timeout_s=1, what="after close")
    with pytest.raises(ClientClosedError):
        thread.call_soon(print)


def test_close_from_another_thread_ends_a_waiting_call() -> None:
    thread = LoopThread("closed-under")
    started = threading.Event()

    async def long_call() -> None:
        started.set()
        await asyncio.sleep(3600)

    closer = threading.Thread(target=lambda: (started.wait(5), thread.close()))
    closer.start()
    with pytest.raises(ClientClosedError, match="closed during the call"):
        thread.run(long_call(), timeout_s=10, what="poll")
    closer.join()
