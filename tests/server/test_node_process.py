"""What `replog node` tells its operator: unknown settings at start, and why it gave up.

- A key no part of the node reads is warned about with the closest known key (Kafka logs
  "supplied but isn't a known config"); a typo must not leave the node silently on a default.
- A broker that cannot register with the controller quorum within
  `initial.broker.registration.timeout.ms` exits 1, saying why (as Kafka's broker does): a
  process left running would look healthy to a supervisor that only watches the pid.
- `BrokerRuntime.wait_failed`, which the node waits on, returns on either failure, saying
  which (a storage error the same way, without the process).
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from replog.errors import KafkaStorageError
from replog.server.broker_runtime import BrokerRuntime
from replog.server.known_properties import unknown_properties
from tests.local_ports import free_port


def _run_node(tmp_path: Path, *lines: str) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """Run `replog node` on a config of `lines` (plus log.dirs) until it exits by itself."""
    config = tmp_path / "server.properties"
    config.write_text("\n".join([*lines, f"log.dirs={tmp_path / 'logs'}", ""]))
    node = subprocess.run(
        [sys.executable, "-m", "replog.cli.main", "node", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return config, node


def test_unknown_keys_are_named_with_the_closest_known_one() -> None:
    known = {"node.id": "1", "min.insync.replicas": "2", "log.retention.hours": "1"}
    assert unknown_properties(known) == []
    assert unknown_properties({"min.insync.replica": "2", "frobnicate": "x"}) == [
        "frobnicate is not a setting replog knows; it is ignored",
        "min.insync.replica is not a setting replog knows; it is ignored "
        "(did you mean min.insync.replicas?)",
    ]


def test_broker_that_cannot_register_exits_1_naming_the_setting(tmp_path: Path) -> None:
    nobody_listens = free_port()  # the only voter: no controller ever answers
    config, node = _run_node(
        tmp_path,
        "process.roles=broker",
        "node.id=2",
        "cluster.id=exit-test",
        f"controller.quorum.voters=1@127.0.0.1:{nobody_listens}",
        f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
        "initial.broker.registration.timeout.ms=1000",
        "min.insync.replica=2",
    )
    assert node.returncode == 1, node.stderr
    assert "did not register within initial.broker.registration.timeout.ms (1000 ms)" in (
        node.stderr
    )
    assert "node 2: stopping: the broker lifecycle ended" in node.stderr
    assert (
        f"{config}: min.insync.replica is not a setting replog knows; it is ignored "
        "(did you mean min.insync.replicas?)"
    ) in node.stderr


def test_a_fetch_port_in_use_stops_the_node_naming_the_setting(tmp_path: Path) -> None:
    listener_port = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        fetch_port = taken.getsockname()[1]
        _, node = _run_node(
            tmp_path,
            "process.roles=controller",
            "node.id=1",
            "cluster.id=fetch-port-test",
            f"controller.quorum.voters=1@127.0.0.1:{listener_port}",
            f"listeners=CONTROLLER://127.0.0.1:{listener_port}",
            f"controller.quorum.fetch.port={fetch_port}",
        )
    assert node.returncode == 1, node.stderr
    assert f"controller.quorum.fetch.port: cannot listen on 127.0.0.1:{fetch_port}" in node.stderr


class _Lifecycle:
    def __init__(self) -> None:
        self.ended = asyncio.Event()

    async def wait_shut_down(self) -> str:
        await self.ended.wait()
        return "broker 2 did not register"


@pytest.mark.asyncio
@pytest.mark.parametrize("failure", ["storage", "lifecycle"])
async def test_wait_failed_returns_on_either_failure_saying_which(failure: str) -> None:
    runtime = SimpleNamespace(
        storage_failure=asyncio.Event(), storage_error=None, lifecycle=_Lifecycle()
    )
    waiting = asyncio.create_task(BrokerRuntime.wait_failed(runtime))  # type: ignore[arg-type]
    await asyncio.sleep(0)
    assert not waiting.done()
    if failure == "storage":
        runtime.storage_error = KafkaStorageError("log dir /data/1 failed")
        runtime.storage_failure.set()
        expected = "storage error: log dir /data/1 failed"
    else:
        runtime.lifecycle.ended.set()
        expected = "the broker lifecycle ended: broker 2 did not register"
    assert await asyncio.wait_for(waiting, 5) == expected
