"""A node runs its tasks in one TaskGroup: any task's failure stops the node cleanly.

The stall monitor, the Raft driver and the Kafka listeners' start run as tasks of the node's
group; one that raises stops the node with exit code 1 (roles stopped, the gRPC server stopped,
the metadata log closed) and its cause is logged once, with the traceback.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from replog.server.node import Node
from replog.server.node_config import NodeConfig
from tests.local_ports import free_port


def controller_node(tmp_path: Path) -> NodeConfig:
    port = free_port()
    return NodeConfig.from_properties(
        {
            "process.roles": "controller",
            "node.id": "1",
            "cluster.id": "node-tasks",
            "controller.quorum.voters": f"1@127.0.0.1:{port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "log.dirs": str(tmp_path / "logs"),
        }
    )


@pytest.mark.asyncio
async def test_a_background_task_that_raises_stops_the_node_and_logs_the_cause_once(
    tmp_path: Path,
    storage_events: list[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    node = Node(controller_node(tmp_path))
    leader = asyncio.Event()

    async def failing_monitor() -> None:
        # Once the node runs (its single voter elected itself), as a bug would strike.
        while node.driver.status().leader_id != 1:
            await asyncio.sleep(0.01)
        leader.set()
        raise RuntimeError("a bug in the stall monitor")

    node.stall_monitor.run = failing_monitor  # type: ignore[method-assign]
    with caplog.at_level(logging.INFO, logger="replog.server"):
        assert await asyncio.wait_for(node.serve(), 30) == 1
    assert leader.is_set()
    causes = [r for r in caplog.records if "a bug in the stall monitor" in _text(r)]
    assert len(causes) == 1, [r.getMessage() for r in caplog.records]
    assert causes[0].levelno == logging.CRITICAL
    assert "the event loop stall monitor failed on an unexpected error" in causes[0].getMessage()
    assert storage_events == ["opened", "closed"]
    assert "node 1: stopped" in caplog.text


def _text(record: logging.LogRecord) -> str:
    error = record.exc_info[1] if record.exc_info else None
    return f"{record.getMessage()} {error}"
