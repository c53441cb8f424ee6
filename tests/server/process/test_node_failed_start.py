"""A node whose `serve()` fails to start (a port in use) leaves nothing open behind it.

An application embedding the node may build another in the same process, so a failed start
must release the gRPC listener, the metrics endpoint, the Raft Fetch and metadata append
listeners and the metadata log, and give back the SIGTERM/SIGINT handlers `serve()` installed
(left behind, Ctrl-C would set an event nobody waits for). The process-level checks (the CLI
exits 1 naming the setting) are in test_node_process.py and test_metrics_endpoint.py.

A broker whose data plane fails to start for a reason other than a disk (a bug, a setting
nothing checked) stops the node with exit code 1, logging why, instead of staying in recovery
with the node looking alive.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from replog.server.broker import broker_runtime
from replog.server.config.node_config import NodeConfig
from replog.server.process.node import Node
from tests.local_ports import free_port


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


def assert_free(port: int) -> None:
    with socket.socket() as again:
        again.bind(("127.0.0.1", port))


def combined_node(tmp_path: Path, **extra: str) -> NodeConfig:
    port = free_port()
    return NodeConfig.from_properties(
        {
            "process.roles": "broker,controller",
            "node.id": "1",
            "cluster.id": "failed-start",
            "controller.quorum.voters": f"1@127.0.0.1:{port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "log.dirs": str(tmp_path / "logs"),
            **extra,
        }
    )


@pytest.mark.asyncio
async def test_a_metrics_port_in_use_closes_everything_the_node_opened(
    tmp_path: Path, storage_events: list[str], taken_port: int
) -> None:
    built = Node(combined_node(tmp_path, **{"metrics.port": str(taken_port)}))
    with pytest.raises(OSError, match=f"metrics endpoint cannot listen on 127.0.0.1:{taken_port}"):
        await built.serve()
    assert storage_events == ["opened", "closed"]
    assert_free(built.listener_port)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.asyncio
async def test_a_fetch_port_in_use_also_releases_the_metrics_endpoint(
    tmp_path: Path, storage_events: list[str], taken_port: int
) -> None:
    metrics_port = free_port()
    config = combined_node(
        tmp_path,
        **{"metrics.port": str(metrics_port), "controller.quorum.fetch.port": str(taken_port)},
    )
    built = Node(config)
    refused = rf"controller\.quorum\.fetch\.port: cannot listen on 127\.0\.0\.1:{taken_port}"
    with pytest.raises(OSError, match=refused):
        await built.serve()
    assert storage_events == ["opened", "closed"]
    assert_free(metrics_port)
    assert_free(built.listener_port)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.asyncio
async def test_a_metadata_append_port_in_use_is_named_and_the_fetch_listener_closed(
    tmp_path: Path, storage_events: list[str], taken_port: int
) -> None:
    raft_fetch_port = free_port()
    config = combined_node(
        tmp_path,
        **{
            "controller.quorum.fetch.port": str(raft_fetch_port),
            "controller.quorum.append.port": str(taken_port),
        },
    )
    built = Node(config)
    refused = rf"controller\.quorum\.append\.port: cannot listen on 127\.0\.0\.1:{taken_port}"
    with pytest.raises(OSError, match=refused):
        await built.serve()
    assert storage_events == ["opened", "closed"]
    assert_free(raft_fetch_port)
    assert_free(built.listener_port)


@pytest.mark.asyncio
async def test_a_data_plane_that_fails_to_start_stops_the_node_saying_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken_log_manager(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(broker_runtime, "LogManager", broken_log_manager)
    node = Node(combined_node(tmp_path))
    with caplog.at_level(logging.INFO):
        # Before the fix the start-up task died silently and this never returned.
        assert await asyncio.wait_for(node.serve(), 30) == 1
    assert "the data plane did not start, stopping: RuntimeError: boom" in caplog.text
    assert "stopping: the data plane did not start: RuntimeError: boom" in caplog.text
