"""A stop whose snapshot is cut short between two batches of its encoding (a kill, or the
stop's timeout) leaves no snapshot file at all, and the next start replays the log (issue #50's
review). The encoding runs a batch a loop turn (`snapshot_before_stop`); nothing reaches the
disk before the stored step (`create_snapshot`: `.part`, fsync, rename)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from replog.server.raft.metadata_snapshots import snapshot_before_stop
from tests.server.controller.test_controller_driver import (
    count_encoded,
    create_wide,
    lone_controller,
    wide_after_restart,
)


def test_a_stop_snapshot_cut_short_while_encoded_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    encoded = count_encoded(monkeypatch)
    metadata_dir = tmp_path / "__cluster_metadata-0"

    async def scenario() -> None:
        async with lone_controller(tmp_path, metadata_max_idle_interval_ms=0) as node:
            await create_wide(node)
            files_before = sorted(os.listdir(metadata_dir))
            encoded[0] = 0
            stopping = asyncio.create_task(
                snapshot_before_stop(node.raft, node.driver, timeout_s=10)
            )
            while encoded[0] == 0:
                await asyncio.sleep(0)
            assert encoded[0] < len(node.driver.controller.snapshot_records())
            stopping.cancel()  # killed half way through the encoding
            with pytest.raises(asyncio.CancelledError):
                await stopping
            await asyncio.sleep(0.05)  # the loop goes on: nothing of it is stored later
            assert sorted(os.listdir(metadata_dir)) == files_before
            assert node.raft.storage.snapshot_ids() == ()
        await wide_after_restart(tmp_path, snapshots_loaded=0)

    asyncio.run(scenario())
