"""What `replog node` tells its operator: unknown settings at start, and why it gave up.

- A key no part of the node reads is warned about with the closest known key (Kafka logs
  "supplied but isn't a known config"); a typo must not leave the node silently on a default.
- A broker that cannot register with the controller quorum within
  `initial.broker.registration.timeout.ms` exits 1, saying why (as Kafka's broker does): a
  process left running would look healthy to a supervisor that only watches the pid.
- `BrokerRuntime.wait_failed`, which the node waits on, returns on any failure, saying
  which (a storage error and a data plane that failed to start the same way, without the
  process).
- A bad broker setting (`log.retention.hours=abc`) is one error line naming the key and exit 1,
  before anything starts; a broker whose data plane fails to start for any other reason stops
  the node with exit 1 and the reason, instead of staying in recovery.
- A node that gave up stops promptly: its log loading ends before the next log (not after all
  of them), and its Raft driver stops first, so it is not elected meanwhile.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from replog.errors import KafkaStorageError
from replog.server.broker.broker_runtime import BrokerRuntime
from replog.server.config.node_config import NodeConfig
from replog.server.process.known_properties import unknown_properties
from replog.server.process.node import Node
from replog.storage import log_manager as log_manager_module
from replog.storage.log import Log
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


@pytest.mark.parametrize(
    ("line", "refusal"),
    [
        ("log.retention.hours=abc", "log.retention.hours='abc': must be an integer"),
        (
            "replica.fetch.wait.max.ms=60000",
            "replica.fetch.wait.max.ms=60000 must not exceed replica.lag.time.max.ms=30000",
        ),
        ("segment.bytes=10", "segment.bytes='10': must be an integer >= 64"),
        (
            "log.page.cache.tail.bytes=-5",
            "log.page.cache.tail.bytes='-5': must be an integer >= -1",
        ),
        (
            "log.flush.offset.checkpoint.interval.ms=x",
            "log.flush.offset.checkpoint.interval.ms='x': must be an integer",
        ),
    ],
)
def test_a_bad_broker_setting_is_one_error_line_and_exit_1(
    tmp_path: Path, line: str, refusal: str
) -> None:
    # The log manager's and replica manager's settings are checked at start-up: read only once
    # the broker caught up, a bad one would leave it in recovery for good, the node alive.
    port = free_port()
    _, node = _run_node(
        tmp_path,
        "process.roles=broker,controller",
        "node.id=1",
        "cluster.id=bad-setting",
        f"controller.quorum.voters=1@127.0.0.1:{port}",
        f"listeners=PLAINTEXT://127.0.0.1:{port}",
        line,
    )
    assert node.returncode == 1, node.stderr
    assert node.stderr.strip().splitlines() == [f"replog node: {refusal}"]
    assert not (tmp_path / "logs").exists()  # nothing started


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
@pytest.mark.parametrize("failure", ["storage", "start", "lifecycle"])
async def test_wait_failed_returns_on_any_failure_saying_which(failure: str) -> None:
    runtime = SimpleNamespace(
        storage_failure=asyncio.Event(),
        storage_error=None,
        start_failure=asyncio.Event(),
        start_error=None,
        lifecycle=_Lifecycle(),
    )
    waiting = asyncio.create_task(BrokerRuntime.wait_failed(runtime))  # type: ignore[arg-type]
    await asyncio.sleep(0)
    assert not waiting.done()
    if failure == "storage":
        runtime.storage_error = KafkaStorageError("log dir /data/1 failed")
        runtime.storage_failure.set()
        expected = "storage error: log dir /data/1 failed"
    elif failure == "start":
        runtime.start_error = "RuntimeError: boom"
        runtime.start_failure.set()
        expected = "the data plane did not start: RuntimeError: boom"
    else:
        runtime.lifecycle.ended.set()
        expected = "the broker lifecycle ended: broker 2 did not register"
    assert await asyncio.wait_for(waiting, 5) == expected


@pytest.mark.asyncio
async def test_a_broker_that_gave_up_while_loading_logs_stops_without_loading_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At 100,000 partitions a restarted node gave up registering (`controller-100k`), said
    "stopping", and ran 12 more minutes loading its logs (and was elected the active
    controller meanwhile). The stop waits for the log being opened, not for the rest."""
    logs = tmp_path / "logs"
    for partition in range(200):
        (logs / f"t-{partition}").mkdir(parents=True)
    opened = Log.open

    def slow_open(*args: object, **kwargs: object) -> Log:
        time.sleep(0.05)  # 200 logs: 10 s of loading
        return opened(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(log_manager_module.Log, "open", staticmethod(slow_open))
    config = NodeConfig.from_properties(
        {
            "process.roles": "broker",
            "node.id": "2",
            "cluster.id": "c1",
            "controller.quorum.voters": f"1@127.0.0.1:{free_port()}",  # nobody answers
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(logs),
            "initial.broker.registration.timeout.ms": "500",
        }
    )
    node = Node(config)
    broker = node.broker
    assert broker is not None
    driver_stopped_first: list[bool] = []
    stop_broker = broker.stop

    async def recording_stop(graceful: bool = True) -> None:
        driver_stopped_first.append(node.driver.stopped)
        await stop_broker(graceful)

    monkeypatch.setattr(broker, "stop", recording_stop)
    began = time.monotonic()
    assert await node.serve() == 1
    assert driver_stopped_first == [True]  # not a candidate while the broker stops
    # The registration timeout, the Raft driver's resignation wait, one log's load, the
    # gRPC grace period: well under the 10 s the whole load takes.
    assert time.monotonic() - began < 5
    assert node.tasks.broker_failure is not None
    assert "did not register" in node.tasks.broker_failure


class _Stops:
    """A data-plane part whose stop is recorded."""

    def __init__(self) -> None:
        self.stopped = False

    async def stop(self) -> None:
        self.stopped = True


@pytest.mark.asyncio
async def test_a_stopped_data_plane_leaves_no_group_coordinator_for_the_kafka_handlers() -> None:
    """The Kafka group and transaction handlers read `group_coordinator` and
    `transaction_coordinator`: None from the stop on, so they answer COORDINATOR_NOT_AVAILABLE
    rather than ask a stopped coordinator."""
    coordinator, transactions = _Stops(), _Stops()
    runtime = SimpleNamespace(
        service=SimpleNamespace(attach=lambda manager: None),
        replica_fetch_service=SimpleNamespace(stop=lambda: None),
        group_coordinator=coordinator,
        transaction_coordinator=transactions,
        _marker_channel=None,
        fetchers=None,
        alter_partition=None,
        replica_manager=None,
        log_manager=None,
        storage_error=None,
    )
    await BrokerRuntime._stop_data_plane(runtime)  # type: ignore[arg-type]
    assert coordinator.stopped and runtime.group_coordinator is None
    assert transactions.stopped and runtime.transaction_coordinator is None
