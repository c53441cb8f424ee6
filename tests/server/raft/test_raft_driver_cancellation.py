"""The Raft driver outlives callers that give up: a proposal whose caller was cancelled while it
waited in the inbox is dropped, and the loop keeps serving (completing such a caller's future
would kill the loop, and with it the node)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from replog.errors import NodeStoppingError
from replog.quorum.raft import RaftConfig, VoterAddress
from replog.server.raft.raft_driver import RaftDriver
from replog.server.raft.raft_storage import RaftStorage
from replog.testing import LoopTasks


def lone_voter(tmp_path: Path) -> RaftDriver:
    config = RaftConfig(voters=(VoterAddress(1, "127.0.0.1", 1),))
    return RaftDriver(1, config, RaftStorage(str(tmp_path), [1]), tasks=LoopTasks())


def test_a_cancelled_proposal_is_dropped_and_the_loop_survives(tmp_path: Path) -> None:
    async def scenario() -> None:
        driver = lone_voter(tmp_path)
        abandoned = asyncio.create_task(driver.append_and_wait([b"abandoned"]))
        await asyncio.sleep(0)  # its propose closure is now queued in the inbox
        abandoned.cancel()
        await asyncio.sleep(0)
        loop = asyncio.create_task(driver.run())
        try:
            for _ in range(200):  # the lone voter elects itself
                if driver.status().role == "leader":
                    break
                await asyncio.sleep(0.01)
            result = await asyncio.wait_for(driver.append_and_wait([b"kept"]), 5)
            assert not loop.done(), loop
            committed, _, _ = driver.read_committed(0, 1 << 20)
            assert b"kept" in committed
            assert b"abandoned" not in committed
            assert result.base_offset >= 1  # after the LeaderChange control batch
        finally:
            await driver.stop(graceful=False)
            await asyncio.wait_for(loop, 5)
            await driver.transport.close()
            driver.storage.close()

    asyncio.run(scenario())


def test_proposals_queued_at_stop_fail_at_once_with_a_typed_error(tmp_path: Path) -> None:
    """Proposals still queued when the node stops: their callers get a NodeStoppingError
    saying so at once, not at their own timeouts; they were never run. A post after the
    loop ended fails at once too."""

    async def scenario() -> None:
        driver = lone_voter(tmp_path)
        queued = [
            asyncio.create_task(driver.append_and_wait([b"queued-%d" % i], timeout_ms=60_000))
            for i in range(3)
        ]
        await asyncio.sleep(0)  # their proposals are queued
        await driver.stop(graceful=False)
        await asyncio.wait_for(driver.run(), 5)
        outcomes = await asyncio.wait_for(asyncio.gather(*queued, return_exceptions=True), 1)
        for outcome in outcomes:
            assert isinstance(outcome, NodeStoppingError), outcome
            assert "node 1 is stopping: the request was not run" in str(outcome)
        late: list[NodeStoppingError] = []
        driver.post(lambda now: None, late.append)
        assert len(late) == 1 and "is stopping" in str(late[0])
        await driver.transport.close()
        driver.storage.close()

    asyncio.run(scenario())


def test_inputs_left_over_by_a_busy_turn_fail_at_once_when_the_node_stops(
    tmp_path: Path,
) -> None:
    """A running leader with a backlog (inputs left for the next turn) is stopped: the
    inputs it had not run never run, and each caller hears NodeStoppingError at once."""

    async def scenario() -> None:
        driver = lone_voter(tmp_path)
        loop = asyncio.create_task(driver.run())
        ran: list[int] = []
        refused: list[NodeStoppingError] = []
        stopping: list[asyncio.Task[None]] = []

        def head(now: int) -> None:
            for i in range(3):
                driver.post(lambda now, i=i: ran.append(i), refused.append)
            stopping.append(asyncio.ensure_future(driver.stop(graceful=False)))
            time.sleep(driver.apply_turn_s * 2)  # longer than a turn: the three are left over

        try:
            for _ in range(200):  # the lone voter elects itself
                if driver.status().role == "leader":
                    break
                await asyncio.sleep(0.01)
            driver.post(head)
            await asyncio.wait_for(loop, 5)
        finally:
            loop.cancel()
            await asyncio.gather(loop, *stopping, return_exceptions=True)
            await driver.transport.close()
            driver.storage.close()
        assert ran == []
        assert len(refused) == 3 and all("is stopping" in str(e) for e in refused)

    asyncio.run(scenario())


def test_an_input_posted_just_before_stop_never_runs_and_fails_at_once(tmp_path: Path) -> None:
    """The loop waits on an empty inbox; an input and `stop` come in the same step (no await
    between): the loop wakes with `stop` asked, so it runs nothing more; the input's caller is
    told at once."""

    async def scenario() -> None:
        driver = lone_voter(tmp_path)
        loop = asyncio.create_task(driver.run())
        await asyncio.sleep(0.1)  # the loop starts and waits for inputs
        ran: list[int] = []
        failed: list[NodeStoppingError] = []
        driver.post(ran.append, failed.append)
        await driver.stop(graceful=False)  # no await before it asks the stop
        await asyncio.wait_for(loop, 5)
        driver.storage.close()
        assert ran == [] and len(failed) == 1

    asyncio.run(scenario())
