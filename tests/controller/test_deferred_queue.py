"""DeferredQueue (the purgatory) and PendingResponse."""

from __future__ import annotations

import pytest

from replog.quorum.controller.deferred_queue import DeferredQueue
from replog.quorum.controller.pending_response import PendingResponse


class Waiter:
    def __init__(self, name: str, log: list[tuple[str, Exception | None]]) -> None:
        self.name = name
        self.log = log

    def complete(self, error: Exception | None) -> None:
        self.log.append((self.name, error))


def test_complete_up_to_completes_in_offset_then_arrival_order() -> None:
    log: list[tuple[str, Exception | None]] = []
    queue = DeferredQueue()
    assert queue.highest_pending_offset() is None
    queue.add(3, Waiter("a", log))
    queue.add(3, Waiter("b", log))
    queue.add(7, Waiter("c", log))
    queue.add(9, Waiter("d", log))
    assert (len(queue), queue.highest_pending_offset()) == (4, 9)
    assert queue.complete_up_to(2) == 0
    assert queue.complete_up_to(7) == 3
    assert log == [("a", None), ("b", None), ("c", None)]
    assert (len(queue), queue.highest_pending_offset()) == (1, 9)


def test_adds_must_not_go_back() -> None:
    queue = DeferredQueue()
    queue.add(5, Waiter("a", []))
    with pytest.raises(ValueError, match="offset 4: a waiter already waits for the later offset 5"):
        queue.add(4, Waiter("b", []))


def test_fail_all_fails_everything_in_order_and_empties() -> None:
    log: list[tuple[str, Exception | None]] = []
    queue = DeferredQueue()
    queue.add(1, Waiter("a", log))
    queue.add(2, Waiter("b", log))
    error = RuntimeError("gone")
    assert queue.fail_all(error) == 2
    assert log == [("a", error), ("b", error)]
    assert len(queue) == 0 and queue.highest_pending_offset() is None


def test_a_waiter_may_add_more_work_while_being_completed() -> None:
    queue = DeferredQueue()
    seen: list[int] = []

    class Chained:
        def complete(self, error: Exception | None) -> None:
            seen.append(len(queue))
            queue.add(10, Waiter("later", []))

    queue.add(1, Chained())
    queue.complete_up_to(1)
    assert seen == [0]
    assert queue.highest_pending_offset() == 10


def test_pending_response_settles_once_and_runs_callbacks() -> None:
    pending: PendingResponse[int] = PendingResponse("test write")
    calls: list[str] = []
    pending.add_done_callback(lambda p: calls.append(f"first {p.result()}"))
    with pytest.raises(RuntimeError, match="not known yet"):
        pending.result()
    pending.succeed(7)
    pending.add_done_callback(lambda p: calls.append("late"))
    assert calls == ["first 7", "late"]
    assert pending.done and pending.error is None and pending.result() == 7
    with pytest.raises(RuntimeError, match="already settled"):
        pending.fail(ValueError("x"))


def test_pending_response_failure_raises_its_error() -> None:
    pending: PendingResponse[int] = PendingResponse("test write")
    pending.fail(KeyError("k"))
    assert isinstance(pending.error, KeyError)
    with pytest.raises(KeyError):
        pending.result()
    assert "failed" in repr(pending)
