"""The Raft driver outlives callers that give up: a proposal whose caller was cancelled while it
waited in the inbox is dropped, and the loop keeps serving (completing such a caller's future
would kill the loop, and with it the node)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from quorum.raft import RaftConfig, VoterAddress
from replog.server.raft_driver import RaftDriver
from replog.server.raft_storage import RaftStorage
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
