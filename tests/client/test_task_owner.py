"""`TaskOwner`, the one TaskGroup of a client engine: the first task to fail is the engine's
failure (logged once, handed to the engine), the others are cancelled, later spawns refused
naming the cause; `close` cancels everything and returns once it ended."""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
from pathlib import Path

import pytest

from replog.client.task_owner import TaskOwner
from replog.errors import IllegalStateError
from tests.task_starts import task_starts

log = logging.getLogger("tests.task_owner")


@pytest.mark.asyncio
async def test_the_first_failure_stops_the_others_and_refuses_later_spawns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    failures: list[BaseException] = []
    owner = TaskOwner("the test engine", failures.append, log)
    await owner.open()
    sibling = owner.spawn(asyncio.sleep(3600))

    async def bug() -> None:
        raise RuntimeError("a bug")

    owner.spawn(bug())
    await asyncio.wait({sibling})
    assert sibling.cancelled()
    assert [str(f) for f in failures] == ["a bug"]
    assert [r.getMessage() for r in caplog.records] == [
        "the test engine stopped on an unexpected error"
    ]
    refused = r"^start a task: the test engine stopped .*a bug\)$"
    with pytest.raises(IllegalStateError, match=refused):
        owner.spawn(asyncio.sleep(0), name="late")
    await owner.close()


@pytest.mark.asyncio
async def test_close_cancels_the_body_and_every_task_and_waits_for_them() -> None:
    ended: list[str] = []

    async def runs(name: str) -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            ended.append(name)

    owner = TaskOwner("the test engine", lambda _: None, log)
    owner.start(runs("body"))
    await asyncio.sleep(0)  # the holder enters its group
    owner.spawn(runs("task"))
    await owner.close()
    assert sorted(ended) == ["body", "task"]
    with pytest.raises(RuntimeError, match="after close"):
        owner.spawn(asyncio.sleep(0))


@pytest.mark.asyncio
async def test_a_task_spawned_right_after_start_joins_the_group_at_its_first_step() -> None:
    """A first send starts the producer and queues work in the same step, before the holder
    entered its group: that work runs in the group all the same (a failure is the engine's),
    and a close that comes before the holder ran cancels it without running it."""
    failures: list[BaseException] = []
    owner = TaskOwner("the test engine", failures.append, log)
    owner.start()
    assert owner.running

    async def bug() -> None:
        raise RuntimeError("a bug")

    early = owner.spawn(bug(), name="early")
    await asyncio.wait({early})
    assert [str(f) for f in failures] == ["a bug"] and not owner.running
    await owner.close()

    closed_first = TaskOwner("the test engine", failures.append, log)
    closed_first.start()
    ran: list[str] = []

    async def work() -> None:
        ran.append("work")

    never = closed_first.spawn(work())
    await closed_first.close()
    await asyncio.wait({never})
    assert never.cancelled() and ran == []


def test_an_owner_left_running_when_its_loop_goes_away_ends_quietly() -> None:
    """An unclosed client's engine: its loop is closed and the holding coroutine is destroyed
    with it. Closing the coroutine must end it with GeneratorExit, not a group holding one
    (which Python reports as an exception it had to ignore)."""
    loop = asyncio.new_event_loop()
    owner = TaskOwner("left-running", lambda _: None, logging.getLogger("test"))

    async def body() -> None:
        await asyncio.sleep(3600)

    async def start() -> None:
        owner.start(body())
        await asyncio.sleep(0.01)

    loop.run_until_complete(start())
    holder = owner._holder
    assert holder is not None and not holder.done()
    unraisable: list[object] = []
    previous, sys.unraisablehook = sys.unraisablehook, unraisable.append
    try:
        holder.get_coro().close()
        loop.close()
        gc.collect()
    finally:
        sys.unraisablehook = previous
    assert unraisable == []


# Where a client starts a task outside its engine's group: each belongs to the call that
# starts it, which awaits or cancels it (task_owner Rules).
CALL_OWNED_TASKS = {
    ("task_owner.py", "TaskOwner.start"),  # the holder of the group itself
    ("task_owner.py", "TaskOwner.spawn"),  # work spawned before the holder's first step
    ("cluster_metadata.py", "ClusterMetadata.refresh"),  # a pass its callers share; close ends it
    ("consumer.py", "Consumer._commit_in_background"),  # commit_async: the caller's future
    ("producer.py", "Producer.close"),  # one close that concurrent callers await
    ("sync_producer.py", "Producer.close"),  # a close from a callback, which stops the loop
    ("loop_thread.py", "LoopThread._start"),  # a blocking call's coroutine, which it awaits
}
ROOT = Path(__file__).resolve().parents[2]


def test_clients_start_tasks_only_in_their_group_or_where_a_call_owns_them() -> None:
    starts = {
        (path.name, where)
        for package in ("client", "admin", "aio", "spark")
        for path in sorted((ROOT / "replog" / package).rglob("*.py"))
        for where in task_starts(path)
    }
    assert starts - CALL_OWNED_TASKS == set(), "start these in the engine's TaskOwner"
    assert CALL_OWNED_TASKS - starts == set(), "no longer started there: drop from the list"
