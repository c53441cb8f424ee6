"""BrokerLifecycleDriver and BrokerRuntime against in-process fake controllers (grpc.aio servers
on 127.0.0.1:0): registration, heartbeats, NOT_CONTROLLER redirects, unreachable controllers,
fencing and unfencing, lost registrations, controlled shutdown, the registration timeout."""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import grpc
import pytest
import pytest_asyncio

from replog.checkpoints import CLEAN_SHUTDOWN_MARKER
from replog.errors import (
    BrokerLifecycleError,
    DuplicateBrokerRegistrationError,
    InconsistentClusterIdError,
    KafkaStorageError,
    NotControllerError,
    StaleBrokerEpochError,
)
from replog.pb import common_pb2, controller_pb2_grpc
from replog.pb import controller_pb2 as pb
from replog.quorum.metadata.broker_lifecycle import BrokerLifecycleConfig, LifecycleState
from replog.quorum.metadata.record_codec import encode_record
from replog.quorum.metadata.records import (
    METADATA_VERSION_FEATURE,
    TRANSACTION_VERSION_FEATURE,
    Endpoint,
    FeatureLevelRecord,
    MetadataRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from replog.quorum.raft.ready import CommittedBatch, LeaderChange
from replog.record import build_batch
from replog.server.broker.broker_lifecycle_driver import BrokerLifecycleDriver
from replog.server.broker.broker_runtime import BrokerRuntime
from replog.server.config.data_plane_config import DataPlaneConfig
from replog.server.data_plane.data_plane_host import DataPlaneHost
from replog.storage.log_manager import LogManager, LogManagerConfig
from replog.testing import LoopTasks
from tests.open_descriptors import descriptors_under

BROKER_ID = 7
INCARNATION = uuid.UUID(int=0x7)
# Only a broken test waits this long: on a loaded 2-core machine (load 10-20) a step of a
# second of CPU takes ten of wall.
TIMEOUT_S = 60


@dataclass
class Cluster:
    """What the fake controllers share: who is active, and the one broker's registration."""

    active: int = 1
    next_offset: int = 100
    broker_epoch: int = -1
    fenced: bool = True
    controlled_shutdown_beats: int = 2  # heartbeats in controlled shutdown before letting go
    refuse_registration: int = 0  # an error code every registration gets (0: none)
    registrations: list[tuple[int, pb.BrokerRegistrationRequest]] = field(default_factory=list)
    heartbeats: list[tuple[int, pb.BrokerHeartbeatRequest]] = field(default_factory=list)


def error(cls: Any, message: str = "") -> common_pb2.ErrorStatus:
    return common_pb2.ErrorStatus(code=cls.code, error_name=cls.error_name, message=message)


class FakeController(controller_pb2_grpc.ControllerServicer):
    """Kafka's rules for one broker, reduced: epoch = offset of its registration, caught up
    once the broker reports that offset, unfenced on request once caught up, controlled
    shutdown granted after a few heartbeats."""

    def __init__(self, node_id: int, cluster: Cluster) -> None:
        self.node_id = node_id
        self.cluster = cluster

    async def BrokerRegistration(
        self, request: pb.BrokerRegistrationRequest, context: Any
    ) -> pb.BrokerRegistrationResponse:
        cluster = self.cluster
        cluster.registrations.append((self.node_id, request))
        if self.node_id != cluster.active:
            return pb.BrokerRegistrationResponse(
                controller_id=cluster.active, error=error(NotControllerError)
            )
        if cluster.refuse_registration:
            return pb.BrokerRegistrationResponse(
                controller_id=cluster.active,
                error=common_pb2.ErrorStatus(code=cluster.refuse_registration, message="no"),
            )
        cluster.broker_epoch = cluster.next_offset
        cluster.next_offset += 1
        cluster.fenced = True
        return pb.BrokerRegistrationResponse(
            controller_id=cluster.active, broker_epoch=cluster.broker_epoch
        )

    async def BrokerHeartbeat(
        self, request: pb.BrokerHeartbeatRequest, context: Any
    ) -> pb.BrokerHeartbeatResponse:
        cluster = self.cluster
        cluster.heartbeats.append((self.node_id, request))
        if self.node_id != cluster.active:
            return pb.BrokerHeartbeatResponse(
                controller_id=cluster.active, error=error(NotControllerError)
            )
        if request.broker_epoch != cluster.broker_epoch:
            return pb.BrokerHeartbeatResponse(
                controller_id=cluster.active,
                error=error(StaleBrokerEpochError, f"broker epoch {request.broker_epoch}"),
            )
        caught_up = request.current_metadata_offset >= cluster.broker_epoch
        should_shut_down = False
        if request.want_shut_down:
            if cluster.fenced or request.want_fence:
                should_shut_down = True
            else:
                cluster.controlled_shutdown_beats -= 1
                should_shut_down = cluster.controlled_shutdown_beats <= 0
        elif request.want_fence:
            cluster.fenced = True
        elif caught_up:
            cluster.fenced = False
        return pb.BrokerHeartbeatResponse(
            controller_id=cluster.active,
            is_caught_up=caught_up,
            is_fenced=cluster.fenced or should_shut_down,
            should_shut_down=should_shut_down,
        )


@dataclass
class Controllers:
    cluster: Cluster
    addresses: dict[int, str]
    servers: list[Any]


@pytest_asyncio.fixture
async def controllers() -> AsyncIterator[Controllers]:
    cluster = Cluster()
    servers, addresses = [], {}
    for node_id in (1, 2, 3):
        server = grpc.aio.server()
        controller_pb2_grpc.add_ControllerServicer_to_server(  # type: ignore[no-untyped-call]
            FakeController(node_id, cluster), server
        )
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        servers.append(server)
        addresses[node_id] = f"127.0.0.1:{port}"
    yield Controllers(cluster, addresses, servers)
    for server in servers:
        await server.stop(grace=None)


def config(**changes: Any) -> BrokerLifecycleConfig:
    base = BrokerLifecycleConfig(
        broker_id=BROKER_ID,
        cluster_id="test-cluster",
        controller_ids=(1, 2, 3),
        listeners=(Endpoint("PLAINTEXT", "127.0.0.1", 9192),),
        heartbeat_interval_ms=50,
        request_timeout_ms=1000,
    )
    return replace(base, **changes)


def driver(addresses: dict[int, str], **changes: Any) -> BrokerLifecycleDriver:
    return BrokerLifecycleDriver(
        config(**changes), addresses, incarnation_id=INCARNATION, tasks=LoopTasks()
    )


async def until(condition: Any, what: str) -> None:
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.01)

    try:
        await asyncio.wait_for(poll(), TIMEOUT_S)
    except TimeoutError:
        raise AssertionError(f"timed out waiting until {what}") from None


def dead_address() -> str:
    """A loopback port nobody listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


# --- registration, heartbeats, unfencing -------------------------------------------------------


@pytest.mark.asyncio
async def test_register_catch_up_unfence_and_run(controllers: Controllers) -> None:
    cluster = controllers.cluster
    lifecycle = driver(controllers.addresses)
    lifecycle.start()
    await until(lambda: cluster.broker_epoch >= 0, "the broker registered")
    (node, registration) = cluster.registrations[0]
    assert node == 1
    assert registration.broker_id == BROKER_ID
    assert registration.cluster_id == "test-cluster"
    assert uuid.UUID(bytes=registration.incarnation_id) == INCARNATION
    assert [
        (f.name, f.min_supported_version, f.max_supported_version) for f in registration.features
    ] == [
        (METADATA_VERSION_FEATURE, 1, 12),
        (TRANSACTION_VERSION_FEATURE, 0, 2),
        ("eligible.leader.replicas.version", 0, 1),
    ]
    assert [(lst.name, lst.host, lst.port) for lst in registration.listeners] == [
        ("PLAINTEXT", "127.0.0.1", 9192)
    ]
    assert not registration.HasField("rack")
    assert registration.previous_broker_epoch == -1

    # Fenced heartbeats, 10 ms apart, until the broker reports its registration offset.
    await until(lambda: len(cluster.heartbeats) >= 3, "heartbeats while catching up")
    assert all(beat.want_fence for _, beat in cluster.heartbeats)
    assert lifecycle.state is LifecycleState.STARTING
    lifecycle.update_metadata_offset(cluster.broker_epoch)
    await asyncio.wait_for(lifecycle.wait_until_caught_up(), TIMEOUT_S)
    assert lifecycle.state is LifecycleState.RECOVERY
    assert cluster.fenced

    lifecycle.set_ready_to_unfence()
    await asyncio.wait_for(lifecycle.wait_until_running(), TIMEOUT_S)
    assert not cluster.fenced and not lifecycle.is_fenced
    assert lifecycle.broker_epoch == cluster.broker_epoch
    last = cluster.heartbeats[-1][1]
    assert not last.want_fence and last.current_metadata_offset == cluster.broker_epoch
    await lifecycle.stop()


@pytest.mark.asyncio
async def test_not_controller_redirects_to_the_named_controller(controllers: Controllers) -> None:
    cluster = controllers.cluster
    cluster.active = 3
    lifecycle = driver(controllers.addresses)
    lifecycle.start()
    lifecycle.update_metadata_offset(1000)
    await until(lambda: lifecycle.state is LifecycleState.RECOVERY, "caught up")
    assert [node for node, _ in cluster.registrations] == [1, 3]
    assert {node for node, _ in cluster.heartbeats} == {3}

    # The active controller moves to 2: heartbeats follow the redirect.
    cluster.active = 2
    lifecycle.set_ready_to_unfence()
    await asyncio.wait_for(lifecycle.wait_until_running(), TIMEOUT_S)
    assert cluster.heartbeats[-1][0] == 2
    await lifecycle.stop()


@pytest.mark.asyncio
async def test_an_unreachable_controller_is_skipped(controllers: Controllers) -> None:
    cluster = controllers.cluster
    cluster.active = 2
    addresses = {**controllers.addresses, 1: dead_address()}
    # The refused connection fails the call at once; a request timeout that a loaded machine
    # can outlast would fail it as "no answer" instead, which is not what this test checks.
    lifecycle = driver(addresses, request_timeout_ms=TIMEOUT_S * 1000)
    lifecycle.start()
    await until(lambda: cluster.broker_epoch >= 0, "registered via the next voter")
    assert [node for node, _ in cluster.registrations] == [2]
    assert "BrokerRegistration to controller 1: UNAVAILABLE" in lifecycle.core.last_error
    await lifecycle.stop()


@pytest.mark.asyncio
async def test_a_fenced_running_broker_asks_to_be_unfenced_again(controllers: Controllers) -> None:
    cluster = controllers.cluster
    lifecycle = driver(controllers.addresses)
    lifecycle.start()
    lifecycle.update_metadata_offset(1000)
    lifecycle.set_ready_to_unfence()
    await asyncio.wait_for(lifecycle.wait_until_running(), TIMEOUT_S)
    # The controller fenced the broker (a missed session): it stays RUNNING and is unfenced at
    # its next heartbeat, which still says want_fence = false.
    cluster.fenced = True
    seen = len(cluster.heartbeats)
    await until(lambda: len(cluster.heartbeats) > seen + 1, "two more heartbeats")
    assert not cluster.fenced
    assert lifecycle.state is LifecycleState.RUNNING
    assert not any(beat.want_fence for _, beat in cluster.heartbeats[seen:])
    await lifecycle.stop()


@pytest.mark.asyncio
async def test_a_stale_broker_epoch_makes_the_broker_register_again(
    controllers: Controllers,
) -> None:
    cluster = controllers.cluster
    lifecycle = driver(controllers.addresses)
    lifecycle.start()
    lifecycle.update_metadata_offset(1000)
    lifecycle.set_ready_to_unfence()
    await asyncio.wait_for(lifecycle.wait_until_running(), TIMEOUT_S)
    first_epoch = cluster.broker_epoch
    cluster.broker_epoch = 555  # another registration replaced ours
    await until(lambda: len(cluster.registrations) == 2, "a second registration")
    assert uuid.UUID(bytes=cluster.registrations[1][1].incarnation_id) == INCARNATION
    await until(
        lambda: lifecycle.broker_epoch == cluster.broker_epoch and not cluster.fenced,
        "unfenced under the new epoch",
    )
    assert cluster.broker_epoch == first_epoch + 1
    assert lifecycle.state is LifecycleState.RUNNING
    await lifecycle.stop()


# --- shutdown ----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_controlled_shutdown_waits_for_the_controller(controllers: Controllers) -> None:
    cluster = controllers.cluster
    cluster.controlled_shutdown_beats = 3
    lifecycle = driver(controllers.addresses)
    lifecycle.start()
    lifecycle.update_metadata_offset(1000)
    lifecycle.set_ready_to_unfence()
    await asyncio.wait_for(lifecycle.wait_until_running(), TIMEOUT_S)
    seen = len(cluster.heartbeats)
    assert await lifecycle.controlled_shutdown(timeout_ms=TIMEOUT_S * 1000)
    assert lifecycle.state is LifecycleState.SHUTTING_DOWN
    asked = [beat for _, beat in cluster.heartbeats[seen:]]
    assert len(asked) == 3 and all(b.want_shut_down and not b.want_fence for b in asked)
    assert [change.state for change in lifecycle.state_changes] == [
        LifecycleState.RECOVERY,
        LifecycleState.RUNNING,
        LifecycleState.PENDING_CONTROLLED_SHUTDOWN,
        LifecycleState.SHUTTING_DOWN,
    ]
    await lifecycle.stop()
    # Nothing goes out after the shutdown: its loop ended and no call is left to send.
    assert lifecycle._task is not None and lifecycle._task.done()
    assert not lifecycle._calls


@pytest.mark.asyncio
async def test_a_controlled_shutdown_the_controller_never_grants_times_out(
    controllers: Controllers,
) -> None:
    controllers.cluster.controlled_shutdown_beats = 1_000_000
    lifecycle = driver(controllers.addresses)
    lifecycle.start()
    lifecycle.update_metadata_offset(1000)
    lifecycle.set_ready_to_unfence()
    await asyncio.wait_for(lifecycle.wait_until_running(), TIMEOUT_S)
    assert not await lifecycle.controlled_shutdown(timeout_ms=200)
    await until(lambda: lifecycle.state is LifecycleState.SHUTTING_DOWN, "stopped anyway")
    await lifecycle.stop()


@pytest.mark.asyncio
async def test_a_controlled_shutdown_with_nothing_to_hand_over_ends_without_the_grant(
    controllers: Controllers,
) -> None:
    controllers.cluster.controlled_shutdown_beats = 1_000_000  # never granted
    moot = False
    lifecycle = BrokerLifecycleDriver(
        config(), controllers.addresses, leaves_nothing_to_hand_over=lambda: moot, tasks=LoopTasks()
    )
    lifecycle.start()
    lifecycle.update_metadata_offset(1000)
    lifecycle.set_ready_to_unfence()
    await asyncio.wait_for(lifecycle.wait_until_running(), TIMEOUT_S)
    shutdown = asyncio.create_task(lifecycle.controlled_shutdown(timeout_ms=TIMEOUT_S * 1000))
    await until(lambda: lifecycle.state is LifecycleState.PENDING_CONTROLLED_SHUTDOWN, "pending")
    beats = len(controllers.cluster.heartbeats)
    await until(lambda: len(controllers.cluster.heartbeats) >= beats + 2, "two more heartbeats")
    assert lifecycle.state is LifecycleState.PENDING_CONTROLLED_SHUTDOWN
    # The next published image shows the broker leads nothing and no other broker is active.
    moot = True
    lifecycle.update_metadata_offset(1001)
    assert await asyncio.wait_for(shutdown, TIMEOUT_S)  # ended on its own, not timed out
    assert "nothing to hand over" in lifecycle.state_changes[-1].reason
    await lifecycle.stop()


@pytest.mark.asyncio
async def test_a_controlled_shutdown_with_no_controller_left_ends_after_the_session_timeout(
    controllers: Controllers,
) -> None:
    lifecycle = driver(controllers.addresses, session_timeout_ms=800, request_timeout_ms=200)
    lifecycle.start()
    lifecycle.update_metadata_offset(1000)
    lifecycle.set_ready_to_unfence()
    await asyncio.wait_for(lifecycle.wait_until_running(), TIMEOUT_S)
    for server in controllers.servers:  # every controller leaves
        await server.stop(grace=None)
    assert await asyncio.wait_for(
        lifecycle.controlled_shutdown(timeout_ms=TIMEOUT_S * 1000), TIMEOUT_S
    )
    assert "no controller answered for broker.session.timeout.ms (800 ms)" in (
        lifecycle.state_changes[-1].reason
    )
    await lifecycle.stop()


@pytest.mark.asyncio
async def test_no_registration_in_time_fails_wait_until_running(controllers: Controllers) -> None:
    controllers.cluster.refuse_registration = InconsistentClusterIdError.code
    lifecycle = driver(controllers.addresses, initial_registration_timeout_ms=400)
    lifecycle.start()
    with pytest.raises(BrokerLifecycleError, match="did not register within"):
        await asyncio.wait_for(lifecycle.wait_until_running(), TIMEOUT_S)
    assert len(controllers.cluster.registrations) >= 2  # it retried with backoff meanwhile
    await lifecycle.stop()


@pytest.mark.asyncio
async def test_a_refused_registration_is_said_once_with_its_cause(
    controllers: Controllers, caplog: pytest.LogCaptureFixture
) -> None:
    controllers.cluster.refuse_registration = DuplicateBrokerRegistrationError.code
    lifecycle = driver(controllers.addresses, initial_registration_timeout_ms=600)
    with caplog.at_level("INFO", logger="replog.server.broker"):
        lifecycle.start()
        with pytest.raises(BrokerLifecycleError):
            await asyncio.wait_for(lifecycle.wait_until_running(), TIMEOUT_S)
        await lifecycle.stop()
    said = [r.getMessage() for r in caplog.records if "registration refused" in r.getMessage()]
    assert len(controllers.cluster.registrations) >= 2, "it retried"
    assert said == [f"broker {BROKER_ID}: registration refused by controller 1 (no); retrying"]


@pytest.mark.asyncio
async def test_a_redirect_to_the_controller_is_not_said(
    controllers: Controllers, caplog: pytest.LogCaptureFixture
) -> None:
    controllers.cluster.active = 3
    lifecycle = driver(controllers.addresses)
    with caplog.at_level("INFO", logger="replog.server.broker"):
        lifecycle.start()
        lifecycle.update_metadata_offset(1000)
        await until(lambda: lifecycle.state is LifecycleState.RECOVERY, "caught up")
        await lifecycle.stop()
    assert [node for node, _ in controllers.cluster.registrations] == [1, 3]  # redirected
    assert not [r for r in caplog.records if "registration refused" in r.getMessage()]


@pytest.mark.asyncio
async def test_a_lifecycle_that_never_ran_shuts_down_at_once() -> None:
    lifecycle = driver({1: dead_address(), 2: dead_address(), 3: dead_address()})
    assert await lifecycle.controlled_shutdown(timeout_ms=TIMEOUT_S * 1000)
    assert lifecycle.state is LifecycleState.SHUTTING_DOWN
    with pytest.raises(BrokerLifecycleError, match="not running"):
        await lifecycle.wait_until_running()
    await lifecycle.stop()


# --- the whole broker role over a Raft feed ----------------------------------------------------


def committed(base_offset: int, *records: MetadataRecord, quorum_epoch: int = 1) -> CommittedBatch:
    batch = build_batch(
        [(0, None, encode_record(r), ()) for r in records],
        base_offset=base_offset,
        partition_leader_epoch=quorum_epoch,
    )
    return CommittedBatch(base_offset, base_offset + len(records) - 1, quorum_epoch, False, batch)


def runtime_of(
    addresses: dict[int, str],
    high_watermark: Callable[[], int | None],
    log_dir: Path | None = None,
    host: DataPlaneHost | None = None,
) -> BrokerRuntime:
    """A broker runtime of this test's broker asking `addresses`' controllers, with a data
    plane in `log_dir` if given, on `host`."""
    return BrokerRuntime(
        config(),
        addresses,
        read_snapshot=lambda snapshot_id: b"",
        high_watermark=high_watermark,
        incarnation_id=INCARNATION,
        tasks=LoopTasks(),
        data_plane=(
            None if log_dir is None else DataPlaneConfig(log_dirs=(str(log_dir),), properties={})
        ),
        host=host,
    )


@pytest.mark.asyncio
async def test_the_broker_runtime_replays_metadata_and_runs(controllers: Controllers) -> None:
    cluster = controllers.cluster
    cluster.active = 2
    high_watermark = 0
    runtime = runtime_of(controllers.addresses, lambda: high_watermark)
    # The Raft leader is node 2: the first registration goes there, no redirect.
    runtime.listener(LeaderChange(2, 1))
    await runtime.start()
    await until(lambda: cluster.broker_epoch >= 0, "registered")
    assert [node for node, _ in cluster.registrations] == [2]
    epoch = cluster.broker_epoch
    topic_id = uuid.uuid4()

    # The metadata log up to and including our own registration record commits.
    log: list[MetadataRecord] = [
        FeatureLevelRecord(METADATA_VERSION_FEATURE, 7),
        RegisterBrokerRecord(BROKER_ID, INCARNATION, epoch),
        TopicRecord("orders", topic_id),
        PartitionRecord(topic_id, 0, (BROKER_ID,), (BROKER_ID,), BROKER_ID),
    ]
    high_watermark = epoch + 3
    runtime.listener(committed(0, *[FeatureLevelRecord(METADATA_VERSION_FEATURE, 7)] * epoch))
    assert runtime.image is not None and runtime.image.provenance.last_offset == -1  # catching up
    runtime.listener(committed(epoch, *log[1:]))
    assert runtime.image.provenance.last_offset == epoch + 2
    assert runtime.image.topics.by_name["orders"].partitions[0].leader == BROKER_ID

    await asyncio.wait_for(runtime.wait_until_running(), TIMEOUT_S)
    assert runtime.state is LifecycleState.RUNNING
    assert cluster.heartbeats[-1][1].current_metadata_offset == epoch + 2

    await runtime.stop(graceful=True)
    assert runtime.state is LifecycleState.SHUTTING_DOWN
    assert cluster.heartbeats[-1][1].want_shut_down


@pytest.mark.asyncio
async def test_the_logs_open_while_the_broker_catches_up_and_close_cleanly_at_a_stop(
    tmp_path: Path,
) -> None:
    """Nothing in the metadata log changes how a log opens: a starting broker opens them
    before it has caught up (here it never does: no controller answers), and a stop shuts
    the log manager it opened down cleanly."""
    log_dir = tmp_path / "logs"
    made = LogManager([str(log_dir)], LogManagerConfig())
    made.get_or_create_log("orders", 0)
    made.shutdown(broker_epoch=7)
    runtime = runtime_of(
        {1: dead_address(), 2: dead_address(), 3: dead_address()}, lambda: None, log_dir
    )
    await runtime.start()
    await until(lambda: "logs_loaded" in runtime.start_phases, "the logs are open")
    assert "metadata_caught_up" not in runtime.start_phases
    assert runtime.log_manager is not None and len(runtime.log_manager.all_logs()) == 1
    assert not (log_dir / CLEAN_SHUTDOWN_MARKER).exists()  # an open log dir is not clean
    await runtime.stop(graceful=False)
    assert (log_dir / CLEAN_SHUTDOWN_MARKER).exists()


@pytest.mark.asyncio
async def test_the_data_plane_starts_with_every_replica_of_a_large_first_image(
    controllers: Controllers, tmp_path: Path
) -> None:
    """The replica manager joins after the first image (a restart): its catch-up, thousands
    of local changes found in steps between the loop's other tasks, leaves it with every
    replica of the image once the broker runs."""
    cluster = controllers.cluster
    cluster.active = 2
    high_watermark = 0
    runtime = runtime_of(controllers.addresses, lambda: high_watermark, tmp_path / "logs")
    runtime.listener(LeaderChange(2, 1))
    await runtime.start()
    await until(lambda: cluster.broker_epoch >= 0, "registered")
    epoch = cluster.broker_epoch
    topics = [(f"t{n}", uuid.UUID(int=n + 1)) for n in range(12)]
    log: list[MetadataRecord] = [RegisterBrokerRecord(BROKER_ID, INCARNATION, epoch)]
    for name, topic_id in topics:
        log.append(TopicRecord(name, topic_id))
        log += [
            PartitionRecord(topic_id, p, (BROKER_ID,), (BROKER_ID,), BROKER_ID) for p in range(100)
        ]
    high_watermark = epoch + len(log)
    runtime.listener(committed(0, *[FeatureLevelRecord(METADATA_VERSION_FEATURE, 7)] * epoch))
    runtime.listener(committed(epoch, *log))
    await asyncio.wait_for(runtime.wait_until_running(), TIMEOUT_S)
    assert runtime.replica_manager is not None
    assert len(runtime.replica_manager.partitions()) == 12 * 100
    assert runtime.replica_manager.image is runtime.image
    await runtime.stop(graceful=False)


@pytest.mark.asyncio
async def test_a_stop_after_a_storage_error_releases_the_logs_without_a_clean_marker(
    tmp_path: Path,
) -> None:
    """A failed disk stops the broker: no clean-shutdown marker (the next start recovers), but
    the log files are closed all the same, as an embedding application lives on."""
    log_dir = tmp_path / "logs"
    made = LogManager([str(log_dir)], LogManagerConfig())
    made.get_or_create_log("orders", 0).append_as_leader(build_batch([(0, None, b"v", ())]), 0)
    made.shutdown(broker_epoch=7)
    runtime = runtime_of(
        {1: dead_address(), 2: dead_address(), 3: dead_address()}, lambda: None, log_dir
    )
    await runtime.start()
    await until(lambda: "logs_loaded" in runtime.start_phases, "the logs are open")
    assert descriptors_under(log_dir) == 1
    runtime._on_storage_error(KafkaStorageError("log dir failed"))
    await runtime.stop(graceful=False)
    assert not (log_dir / CLEAN_SHUTDOWN_MARKER).exists()
    assert descriptors_under(log_dir) == 0
