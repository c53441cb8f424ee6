"""`RaftDriver.run_persisted`: an input whose writes are on disk when its caller resumes (a
snapshot at a clean stop), and a typed error, never a hang, once the loop has ended."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from replog.errors import KafkaStorageError
from replog.quorum.raft import RaftConfig, VoterAddress
from replog.server.raft.raft_driver import RaftDriver
from replog.server.raft.raft_storage import RaftStorage
from replog.testing import LoopTasks
from tests.eventually import eventually


def test_the_writes_an_event_asked_for_are_on_disk_when_it_returns(tmp_path: Path) -> None:
    async def scenario() -> None:
        config = RaftConfig(voters=(VoterAddress(1, "127.0.0.1", 1),))
        driver = RaftDriver(1, config, RaftStorage(str(tmp_path), [1]), tasks=LoopTasks())
        loop = asyncio.create_task(driver.run())
        await eventually(lambda: driver.status().leader_id == 1, "the lone voter leads")
        proposed: list[int] = []

        def propose(now_ms: int) -> None:
            proposed.append(driver.node.propose([b"x"], now_ms).last_offset)

        await driver.run_persisted(propose)
        assert driver.storage.log.recovery_point > proposed[0]  # flushed
        # One posted before the stop and never run, and one after: both told, neither hangs.
        early = asyncio.create_task(driver.run_persisted(lambda now_ms: None))
        await driver.stop(graceful=False)
        await asyncio.wait_for(loop, 5)
        for call in (early, driver.run_persisted(lambda now_ms: None)):
            with pytest.raises(KafkaStorageError, match="node 1: the Raft driver stopped"):
                await asyncio.wait_for(call, 5)
        await driver.transport.close()
        driver.storage.close()

    asyncio.run(scenario())
