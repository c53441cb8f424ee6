"""A node runs its tasks in one TaskGroup: any task's failure stops the node cleanly.

The stall monitor, the Raft driver, the Kafka listeners' start and the background tasks of the
parts the node builds (here the replica manager's timers) run as tasks of the node's group
(`replog.server.runtime.node_tasks`); one that raises stops the node with exit code 1 (roles
stopped, the gRPC server stopped, the metadata log closed) and its cause is logged once, with the
traceback. Outside `node_tasks`, the server and the wire start a task only where a call, a
connection or a stream owns it (the last test holds the list).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from replog.server.config.node_config import NodeConfig
from replog.server.data_plane.replica_manager import ReplicaManager
from replog.server.process.node import Node
from replog.server.runtime.node_tasks import NodeTasks
from tests.local_ports import free_port
from tests.task_starts import task_starts

ROOT = Path(__file__).resolve().parents[3]


def node_config(tmp_path: Path, roles: str) -> NodeConfig:
    port = free_port()
    return NodeConfig.from_properties(
        {
            "process.roles": roles,
            "node.id": "1",
            "cluster.id": "node-tasks",
            "controller.quorum.voters": f"1@127.0.0.1:{port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "log.dirs": str(tmp_path / "logs"),
        }
    )


async def serve_until_stopped(node: Node, caplog: pytest.LogCaptureFixture) -> int:
    with caplog.at_level(logging.INFO, logger="replog.server"):
        return await asyncio.wait_for(node.serve(), 30)


def logged_once(caplog: pytest.LogCaptureFixture, cause: str) -> logging.LogRecord:
    causes = [r for r in caplog.records if cause in _text(r)]
    assert len(causes) == 1, [r.getMessage() for r in caplog.records]
    assert causes[0].levelno == logging.CRITICAL
    assert causes[0].exc_info is not None  # with its traceback
    return causes[0]


@pytest.mark.asyncio
async def test_a_background_task_that_raises_stops_the_node_and_logs_the_cause_once(
    tmp_path: Path,
    storage_events: list[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    node = Node(node_config(tmp_path, "controller"))
    leader = asyncio.Event()

    async def failing_monitor() -> None:
        # Once the node runs (its single voter elected itself), as a bug would strike.
        while node.driver.status().leader_id != 1:
            await asyncio.sleep(0.01)
        leader.set()
        raise RuntimeError("a bug in the stall monitor")

    node.stall_monitor.run = failing_monitor  # type: ignore[method-assign]
    assert await serve_until_stopped(node, caplog) == 1
    assert leader.is_set()
    cause = logged_once(caplog, "a bug in the stall monitor")
    assert "the event loop stall monitor failed on an unexpected error" in cause.getMessage()
    assert storage_events == ["opened", "closed"]
    assert "node 1: stopped" in caplog.text


@pytest.mark.asyncio
async def test_a_failing_task_of_a_part_the_node_built_stops_the_node_the_same_way(
    tmp_path: Path,
    storage_events: list[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The replica manager's timers, started by the broker role once its logs are recovered:
    a bug there is the node's failure, not a task that ends unseen."""
    ran = asyncio.Event()

    async def failing_timers(self: ReplicaManager) -> None:
        ran.set()
        raise RuntimeError("a bug in the replica manager's timers")

    monkeypatch.setattr(ReplicaManager, "_run_timers", failing_timers)
    node = Node(node_config(tmp_path, "broker,controller"))
    assert await serve_until_stopped(node, caplog) == 1
    assert ran.is_set()
    cause = logged_once(caplog, "a bug in the replica manager's timers")
    assert "node 1: stopping: the replica manager's timers failed on an unexpected error" in (
        cause.getMessage()
    )
    assert storage_events == ["opened", "closed"]
    assert "node 1: stopped" in caplog.text


@pytest.mark.asyncio
async def test_a_task_started_while_the_node_does_not_run_is_refused() -> None:
    tasks = NodeTasks(1)
    ran: list[str] = []

    async def work() -> None:
        ran.append("ran")

    with pytest.raises(RuntimeError, match="node 1: the work started while the node does not"):
        tasks.spawn(work(), name="the work")  # closed: no "never awaited" warning
    async with tasks.group():
        await tasks.spawn(work(), name="the work")
    with pytest.raises(RuntimeError, match="does not run"):
        tasks.spawn(work(), name="the work")
    assert ran == ["ran"]


# Where the server starts a task that is not the node's: each belongs to the call or the
# connection that starts it, which awaits or cancels it before it ends (node_tasks Rules).
CALL_OWNED_TASKS = {
    ("stream_requests.py", "StreamRequests.__init__"),  # a stream call's request reader
    ("broker_lifecycle_driver.py", "BrokerLifecycleDriver._wait_for"),  # first of two events
    ("broker_runtime.py", "BrokerRuntime.wait_failed"),  # the first of three events
    ("group_coordinator.py", "GroupCoordinator._group_call"),  # awaited by the request
    ("kafka_listener.py", "_Connection._spawn"),  # a request's handler, cancelled on close
    ("kafka_listener.py", "_Connection._pump"),  # a send from files, cancelled on close
    # A metadata append connection's appends waiting to commit, cancelled when it is lost.
    ("metadata_append_server.py", "_InboundConnection.data_received"),
    ("node_tasks.py", "NodeTasks.spawn"),  # the node's group itself
    # A forwarded controller request, awaited while its overdue wait is logged, cancelled in
    # the call's finally.
    ("controller_calls.py", "ControllerCalls._noted"),
    # The AlterPartition requests in flight together, in a TaskGroup the sender awaits.
    ("alter_partition_sender.py", "AlterPartitionSender._send_all"),
    # The wire, which the node and the clients share: a replaced channel's close, cancelled by
    # the channel that owns it.
    ("redialing_channel.py", "RedialingChannel.reconnect"),
    # A Kafka client connection's HTTP/1 probe of a silent peer, awaited or cancelled by the
    # handshake; a dial shared by the callers that wait for it, cancelled by the pool's close.
    ("kafka_connection.py", "KafkaConnection._handshake"),
    ("kafka_connection.py", "KafkaConnections.get"),
    # A framed connection's TLS handshake, held by its listener and cancelled by its close.
    ("tls_accept.py", "TlsAccept.connection_made"),
}


def test_server_and_wire_start_tasks_only_in_the_node_group_or_where_a_call_owns_them() -> None:
    starts = {
        (path.name, where)
        for package in ("server", "wire")
        for path in sorted((ROOT / "replog" / package).rglob("*.py"))
        for where in task_starts(path)
    }
    assert starts - CALL_OWNED_TASKS == set(), "start these in the node's group (node_tasks)"
    assert task_starts(ROOT / "replog" / "testing.py") == {"LoopTasks.spawn"}  # it can fail


def _text(record: logging.LogRecord) -> str:
    error = record.exc_info[1] if record.exc_info else None
    return f"{record.getMessage()} {error}"
