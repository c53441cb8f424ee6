"""The controller shell in one process: a lone-voter Raft driver, the ControllerDriver on its
loop and the Controller service called directly (no network). Writes answer after they commit,
reads come from committed state, snapshots are written and loaded after a restart, a write
that never commits times out, a node that leads nothing answers NOT_CONTROLLER, and raw
appends are refused where the controller owns the log."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from replog.errors import CorruptMetadataRecordError
from replog.pb import controller_pb2 as pb
from replog.pb import raft_pb2
from replog.quorum.controller.controller_config import ControllerConfig
from replog.quorum.controller.pending_response import PendingResponse
from replog.quorum.metadata import record_batches
from replog.quorum.metadata.partition_registration import PartitionRegistration
from replog.quorum.metadata.record_batches import encode_snapshot
from replog.quorum.metadata.steps import run_to_end
from replog.quorum.raft import RaftConfig, VoterAddress
from replog.quorum.raft.snapshot_id import SnapshotId
from replog.server.controller.controller_driver import ControllerDriver
from replog.server.controller.controller_service import ControllerService
from replog.server.raft.metadata_snapshots import StopState, snapshot_before_stop
from replog.server.raft.raft_driver import RaftDriver
from replog.server.raft.raft_service import MetadataLogService
from replog.server.raft.raft_storage import RaftStorage
from replog.storage.log import Log
from replog.storage.log_config import LogConfig
from replog.testing import LoopTasks

CLUSTER_ID = "test-cluster"
T = TypeVar("T")


@dataclass
class LoneController:
    raft: RaftDriver
    driver: ControllerDriver
    service: ControllerService
    loop: asyncio.Task[None]
    failure_expected: bool = False


@asynccontextmanager
async def lone_controller(
    directory: Path,
    *,
    voters: tuple[VoterAddress, ...] = (VoterAddress(1, "127.0.0.1", 1),),
    snapshot_bytes_max: int = 1 << 30,
    retention_bytes: int = 1 << 30,
    **config: object,
) -> AsyncIterator[LoneController]:
    raft = RaftDriver(
        1, RaftConfig(voters=voters), RaftStorage(str(directory), [1]), tasks=LoopTasks()
    )
    driver = ControllerDriver(
        raft,
        ControllerConfig(node_id=1, cluster_id=CLUSTER_ID, **config),  # type: ignore[arg-type]
        read_snapshot=raft.storage.read_whole_snapshot,
        snapshot_bytes_max=snapshot_bytes_max,
        snapshot_interval_ms=0,
        retention_bytes=retention_bytes,
    )
    node = LoneController(raft, driver, ControllerService(driver), asyncio.create_task(raft.run()))
    try:
        yield node
    finally:
        await raft.stop(graceful=False)
        await asyncio.wait({node.loop}, timeout=5)
        failure = node.loop.exception() if node.loop.done() else None
        await raft.transport.close()
        raft.storage.close()
        if failure is not None and not node.failure_expected:
            raise failure


async def eventually(probe: Callable[[], Awaitable[T]], check: Callable[[T], bool]) -> T:
    for _ in range(500):
        value = await probe()
        if check(value):
            return value
        await asyncio.sleep(0.01)
    raise AssertionError(f"never held; last value: {value}")


async def active(node: LoneController) -> None:
    """Wait until the lone voter leads and its controller wrote the bootstrap records."""
    await eventually(
        lambda: node.service.DescribeCluster(pb.DescribeClusterRequest(), None),
        lambda answer: answer.controller_id == 1 and answer.metadata_offset >= 1,
    )


async def start_brokers(node: LoneController, broker_ids: tuple[int, ...]) -> dict[int, int]:
    """Register and unfence the brokers; their broker epochs."""
    epochs: dict[int, int] = {}
    for broker_id in broker_ids:
        registered = await node.service.BrokerRegistration(
            pb.BrokerRegistrationRequest(
                broker_id=broker_id,
                cluster_id=CLUSTER_ID,
                incarnation_id=uuid.uuid4().bytes,
                listeners=[pb.Listener(name="PLAINTEXT", host="localhost", port=9000 + broker_id)],
                features=[
                    pb.SupportedFeature(
                        name="metadata.version", min_supported_version=1, max_supported_version=12
                    ),
                    pb.SupportedFeature(
                        name="transaction.version", min_supported_version=0, max_supported_version=2
                    ),
                ],
            ),
            None,
        )
        assert not registered.HasField("error"), registered
        beat = await node.service.BrokerHeartbeat(
            pb.BrokerHeartbeatRequest(
                broker_id=broker_id,
                broker_epoch=registered.broker_epoch,
                current_metadata_offset=registered.broker_epoch,
                want_fence=False,
            ),
            None,
        )
        assert not beat.HasField("error") and not beat.is_fenced, beat
        epochs[broker_id] = registered.broker_epoch
    return epochs


def create_request(name: str, partitions: int, replication_factor: int) -> pb.CreateTopicsRequest:
    return pb.CreateTopicsRequest(
        topics=[
            pb.CreatableTopic(
                name=name, num_partitions=partitions, replication_factor=replication_factor
            )
        ]
    )


def test_writes_answer_after_commit_and_reads_see_them(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with lone_controller(
            tmp_path, static_broker_configs={"min.insync.replicas": "2"}
        ) as node:
            await active(node)
            await start_brokers(node, (1, 2, 3))
            created = await node.service.CreateTopics(create_request("orders", 6, 3), None)
            assert created.controller_id == 1
            (result,) = created.topics
            assert not result.HasField("error"), result
            metadata = await node.service.Metadata(pb.MetadataRequest(topics=["orders"]), None)
            (topic,) = metadata.topics
            leaders = sorted(p.leader_id for p in topic.partitions)
            assert leaders == [1, 1, 2, 2, 3, 3]
            assert [b.broker_id for b in metadata.brokers] == [1, 2, 3]
            again = await node.service.CreateTopics(create_request("orders", 1, 1), None)
            assert again.topics[0].error.error_name == "TOPIC_ALREADY_EXISTS"
            assert "'orders'" in again.topics[0].error.message
            configs = await node.service.DescribeConfigs(
                pb.DescribeConfigsRequest(
                    resources=[
                        pb.ConfigResourceKeys(
                            resource_type=2,
                            resource_name="orders",
                            configuration_keys=["min.insync.replicas"],
                        )
                    ]
                ),
                None,
            )
            (entry,) = configs.results[0].configs
            assert (entry.value, entry.source) == ("2", "STATIC_BROKER_CONFIG")
            checked = await node.service.IncrementalAlterConfigs(
                pb.IncrementalAlterConfigsRequest(
                    validate_only=True,
                    resources=[
                        pb.AlterConfigsResource(
                            resource_type=2,
                            resource_name="orders",
                            configs=[pb.AlterableConfig(name="retention.ms", value="5")],
                        )
                    ],
                ),
                None,
            )
            assert not checked.results[0].HasField("error")
            deleted = await node.service.DeleteTopics(
                pb.DeleteTopicsRequest(topic_names=["orders"]), None
            )
            assert not deleted.topics[0].HasField("error")
            gone = await node.service.Metadata(pb.MetadataRequest(topics=["orders"]), None)
            assert gone.topics[0].error.error_name == "UNKNOWN_TOPIC_OR_PARTITION"
            bad = await node.service.DeleteTopics(pb.DeleteTopicsRequest(topic_ids=[b"x"]), None)
            assert (bad.error.error_name, bad.controller_id) == ("INVALID_REQUEST", 1)

    asyncio.run(scenario())


def test_unregister_broker_removes_a_registration_and_refuses_an_unknown_id(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with lone_controller(tmp_path) as node:
            await active(node)
            await start_brokers(node, (1, 2))
            done = await node.service.UnregisterBroker(
                pb.UnregisterBrokerRequest(broker_id=2), None
            )
            assert not done.HasField("error") and done.controller_id == 1, done
            cluster = await node.service.DescribeCluster(pb.DescribeClusterRequest(), None)
            assert [b.broker_id for b in cluster.brokers] == [1]
            unknown = await node.service.UnregisterBroker(
                pb.UnregisterBrokerRequest(broker_id=2), None
            )
            assert unknown.error.error_name == "BROKER_ID_NOT_REGISTERED"
            assert "broker 2" in unknown.error.message

    asyncio.run(scenario())


def test_no_op_records_move_the_committed_offset(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with lone_controller(tmp_path, metadata_max_idle_interval_ms=20) as node:
            await active(node)
            first = await node.service.DescribeCluster(pb.DescribeClusterRequest(), None)
            await eventually(
                lambda: node.service.DescribeCluster(pb.DescribeClusterRequest(), None),
                lambda answer: answer.metadata_offset >= first.metadata_offset + 3,
            )

    asyncio.run(scenario())


async def create_kept(node: LoneController) -> None:
    """Topic "kept" (2 partitions, broker 1) created once the controller is active."""
    await active(node)
    await start_brokers(node, (1,))
    created = await node.service.CreateTopics(create_request("kept", 2, 1), None)
    assert not created.topics[0].HasField("error")


async def snapshot_a_kept_topic(node: LoneController) -> None:
    """Topic "kept" (2 partitions) created on an active controller, and two snapshots taken,
    the latest holding the topic."""
    await create_kept(node)
    created_end = node.driver.controller.last_committed_offset + 1
    await eventually(
        lambda: _value(node.raft.storage.snapshot_ids()),
        lambda ids: len(ids) >= 2 and ids[-1].end_offset >= created_end,
    )


async def kept_after_restart(node: LoneController) -> None:
    """A restarted controller is active and holds topic "kept" and broker 1."""
    await active(node)
    metadata = await node.service.Metadata(pb.MetadataRequest(topics=["kept"]), None)
    assert [p.partition_index for p in metadata.topics[0].partitions] == [0, 1]
    cluster = await node.service.DescribeCluster(pb.DescribeClusterRequest(), None)
    assert [b.broker_id for b in cluster.brokers] == [1]


def test_a_snapshot_is_written_and_loaded_after_a_restart(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with lone_controller(tmp_path, snapshot_bytes_max=1) as node:
            await snapshot_a_kept_topic(node)
        metadata_dir = tmp_path / "__cluster_metadata-0"
        assert any(name.endswith(".checkpoint") for name in os.listdir(metadata_dir))
        async with lone_controller(tmp_path) as node:
            await kept_after_restart(node)
            assert node.driver.snapshots_loaded == 1

    asyncio.run(scenario())


def test_a_snapshot_written_at_a_clean_stop_is_loaded_at_the_next_start(tmp_path: Path) -> None:
    # The schedule never fires here (1 GiB between snapshots): only the stop writes one, and
    # the next start loads it instead of replaying the log.
    async def scenario() -> None:
        async with lone_controller(tmp_path, metadata_max_idle_interval_ms=0) as node:
            await create_kept(node)
            assert node.driver.snapshots_taken == 0
            end_offset = node.driver.controller.last_committed_offset + 1
            taken = await snapshot_before_stop(node.raft, node.driver, timeout_s=10)
            assert taken is not None and taken.end_offset == end_offset
            assert node.raft.storage.snapshot_ids() == (taken,)  # on disk once it returns
            # Nothing committed since: a second stop writes nothing.
            assert await snapshot_before_stop(node.raft, node.driver, timeout_s=10) is None
        async with lone_controller(tmp_path) as node:
            await kept_after_restart(node)
            assert node.driver.snapshots_loaded == 1

    asyncio.run(scenario())


def count_encoded(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A counter (its one item) of the metadata records encoded from now on."""
    encoded = [0]
    real = record_batches.encode_record

    def counting(record: object) -> bytes:
        encoded[0] += 1
        return real(record)  # type: ignore[arg-type]

    monkeypatch.setattr(record_batches, "encode_record", counting)
    return encoded


async def create_wide(node: LoneController) -> None:
    """Topic "wide" (1,200 partitions, broker 1: two batches of snapshot records)."""
    await active(node)
    await start_brokers(node, (1,))
    created = await node.service.CreateTopics(create_request("wide", 1_200, 1), None)
    assert not created.topics[0].HasField("error")


async def wide_after_restart(directory: Path, *, snapshots_loaded: int) -> None:
    """A restart in `directory` holds topic "wide" (1,200 partitions), having loaded
    `snapshots_loaded` snapshots."""
    async with lone_controller(directory) as node:
        await active(node)
        assert node.driver.snapshots_loaded == snapshots_loaded
        metadata = await node.service.Metadata(pb.MetadataRequest(topics=["wide"]), None)
        assert len(metadata.topics[0].partitions) == 1_200


@asynccontextmanager
async def ticking(tick: Callable[[], None]) -> AsyncIterator[None]:
    """A task calling `tick` at every loop turn while the block runs."""

    async def ticker() -> None:
        while True:
            tick()
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    try:
        yield
    finally:
        task.cancel()


async def snapshot_before_stop_ticking(
    node: LoneController, tick: Callable[[], None]
) -> SnapshotId | None:
    """`snapshot_before_stop` while a task calls `tick` at every loop turn."""
    async with ticking(tick):
        return await snapshot_before_stop(node.raft, node.driver, timeout_s=10)


def test_the_stop_snapshot_is_encoded_a_batch_a_loop_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 1,200 partitions make two batches of records: the loop's other tasks run between the
    # two batches' encoding (a ticker sees the first encoded, not the second), and the
    # snapshot written is the whole state all the same.
    encoded = count_encoded(monkeypatch)

    async def scenario() -> None:
        async with lone_controller(tmp_path, metadata_max_idle_interval_ms=0) as node:
            await create_wide(node)
            expected = len(node.driver.controller.snapshot_records())
            assert expected > record_batches.SNAPSHOT_RECORDS_PER_BATCH
            seen: list[int] = []
            taken = await snapshot_before_stop_ticking(node, lambda: seen.append(encoded[0]))
            assert taken is not None
            assert encoded[0] == expected
            assert any(0 < n < expected for n in seen), sorted(set(seen))
        await wide_after_restart(tmp_path, snapshots_loaded=1)

    asyncio.run(scenario())


def test_the_stop_snapshot_state_is_taken_without_making_its_partition_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The state is taken in one loop turn (a record a partition made there held the loop
    # 56-83 ms at 10,000 partitions): each PartitionRecord is made with the batch that encodes
    # it, and the snapshot is the one the state's records make.
    made = [0]
    to_record = PartitionRegistration.to_record

    def counting(self: PartitionRegistration, topic_id: uuid.UUID, partition_id: int) -> object:
        made[0] += 1
        return to_record(self, topic_id, partition_id)

    monkeypatch.setattr(PartitionRegistration, "to_record", counting)

    async def scenario() -> None:
        async with lone_controller(tmp_path, metadata_max_idle_interval_ms=0) as node:
            await create_wide(node)
            made[0] = 0
            states: list[StopState | None] = []
            await node.raft.run_persisted(
                lambda now_ms: states.append(run_to_end(node.driver.state_at_stop_in_steps()))
            )
            (state,) = states
            assert state is not None
            assert made[0] == 0
            whole = node.driver.controller.snapshot_records(
                node.driver.controller.last_stable_offset
            )
            assert list(state.records) == whole and len(state.records) == len(whole)
            assert encode_snapshot(state.records, quorum_epoch=1, timestamp_ms=0) == (
                encode_snapshot(whole, quorum_epoch=1, timestamp_ms=0)
            )

    asyncio.run(scenario())


def test_a_stop_snapshot_overtaken_while_it_was_encoded_is_not_written(tmp_path: Path) -> None:
    # The stop's snapshot is encoded over several loop turns: a snapshot taken or loaded at its
    # end meanwhile holds as much, and writing it again would fail (`create_snapshot`).
    async def scenario() -> None:
        async with lone_controller(tmp_path, metadata_max_idle_interval_ms=0) as node:
            await create_kept(node)
            states: list[StopState | None] = []
            await node.raft.run_persisted(
                lambda now_ms: states.append(run_to_end(node.driver.state_at_stop_in_steps()))
            )
            (state,) = states
            assert state is not None
            node.driver.snapshots.schedule.taken(state.end_offset, node.raft.clock())
            data = encode_snapshot(state.records, quorum_epoch=state.quorum_epoch, timestamp_ms=0)
            stored: list[SnapshotId | None] = []
            await node.raft.run_persisted(
                lambda now_ms: stored.append(state.writer.store_at_stop(state, data, now_ms))
            )
            assert stored == [None]
            assert node.raft.storage.snapshot_ids() == ()

    asyncio.run(scenario())


def test_the_steps_of_a_write_go_at_the_loops_pace_not_the_ticks(tmp_path: Path) -> None:
    # Six topics of 200 partitions are written in steps of whole topics, 250 partitions at
    # most (CreateTopics' steps); with the driver's ticks doing nothing, only the steps posted
    # as inputs (`_pace_steps`) can finish the write: left to the ticks, a step per tick (10 ms
    # apart at best) made steps of 250 changes four times slower than steps of 1,000. A tick
    # may still come due meanwhile on a loaded machine; it is recorded and does nothing.
    async def scenario() -> None:
        async with lone_controller(tmp_path) as node:
            await active(node)
            await start_brokers(node, (1,))
            ticks: list[int] = []
            node.driver.tick = ticks.append  # type: ignore[method-assign]
            names = [f"wide{i}" for i in range(6)]
            request = pb.CreateTopicsRequest(
                topics=[
                    pb.CreatableTopic(name=name, num_partitions=200, replication_factor=1)
                    for name in names
                ]
            )
            created = await asyncio.wait_for(node.service.CreateTopics(request, None), 5)
            assert [t.HasField("error") for t in created.topics] == [False] * 6
            metadata = await node.service.Metadata(pb.MetadataRequest(topics=names), None)
            assert [len(t.partitions) for t in metadata.topics] == [200] * 6

    asyncio.run(scenario())


def test_a_snapshot_left_partial_by_a_crash_is_removed_and_the_log_replayed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A crash while the stop's snapshot was written leaves its `.part` file (written, fsynced,
    # then renamed): the next start removes it, naming it, and replays the log, which still
    # holds every record the snapshot would have held.
    async def scenario() -> str:
        async with lone_controller(tmp_path, metadata_max_idle_interval_ms=0) as node:
            await create_kept(node)
            end_offset = node.driver.controller.last_committed_offset + 1
            state = node.driver.controller.snapshot_records()
        data = encode_snapshot(state, quorum_epoch=1, timestamp_ms=0)
        part = SnapshotId(end_offset, 1).file_name() + ".part"
        (tmp_path / "__cluster_metadata-0" / part).write_bytes(data[: len(data) // 2])
        with caplog.at_level(logging.INFO, logger="replog.server.raft"):
            async with lone_controller(tmp_path) as node:
                await kept_after_restart(node)
                assert node.driver.snapshots_loaded == 0
                assert not node.raft.storage.snapshot_ids()
        return part

    part = asyncio.run(scenario())
    assert not (tmp_path / "__cluster_metadata-0" / part).exists()
    assert f"removing partial snapshot {part}" in caplog.text


def test_a_restart_whose_log_ends_before_its_latest_snapshot_starts_from_the_snapshot(
    tmp_path: Path,
) -> None:
    # The core installs the snapshot it already holds when the log ends before it (a crash
    # lost the log's unflushed tail); a storage that wanted a `.part` download to freeze then
    # would fail the start (KafkaStorageError) for good.
    async def scenario() -> None:
        async with lone_controller(tmp_path, snapshot_bytes_max=1) as node:
            await snapshot_a_kept_topic(node)
            latest = node.raft.storage.snapshot_ids()[-1]
        metadata_dir = str(tmp_path / "__cluster_metadata-0")
        log = Log.open(metadata_dir, LogConfig(retention_ms=-1))
        log.truncate_to(latest.end_offset - 1)  # the tail the crash lost
        assert log.log_end_offset < latest.end_offset
        log.close()
        # Bounded: before the fix the node's start-up failed and the test hung.
        async with asyncio.timeout(30), lone_controller(tmp_path) as node:
            await active(node)
            assert node.driver.snapshots_loaded == 1
            assert node.raft.storage.log.log_start_offset >= latest.end_offset  # restarted at it
            metadata = await node.service.Metadata(pb.MetadataRequest(topics=["kept"]), None)
            assert [p.partition_index for p in metadata.topics[0].partitions] == [0, 1]

    asyncio.run(scenario())


def test_past_the_retention_size_the_log_start_moves_to_the_newest_snapshot(
    tmp_path: Path,
) -> None:
    """metadata.max.retention.bytes: a snapshot after every commit and a 1-byte limit move the
    log start up to the newest snapshot; a restart still loads every topic."""

    async def scenario() -> None:
        async with lone_controller(tmp_path, snapshot_bytes_max=1, retention_bytes=1) as node:
            await active(node)
            await start_brokers(node, (1,))
            for name in ("a", "b", "c"):
                created = await node.service.CreateTopics(create_request(name, 1, 1), None)
                assert not created.topics[0].HasField("error")
            log_start = await eventually(
                lambda: _value(node.raft.storage.log.log_start_offset), lambda start: start > 0
            )
            assert log_start in {s.end_offset for s in node.raft.storage.snapshot_ids()}
        async with lone_controller(tmp_path) as node:
            await active(node)
            metadata = await node.service.Metadata(pb.MetadataRequest(), None)
            assert sorted(t.name for t in metadata.topics) == ["a", "b", "c"]

    asyncio.run(scenario())


def test_a_write_that_never_commits_times_out(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with lone_controller(tmp_path) as node:
            await active(node)
            answer = await node.driver.write(
                lambda controller, now_ms: PendingResponse[None]("wait for ever"), timeout_ms=30
            )
            assert answer.error is not None
            assert answer.error.error_name == "REQUEST_TIMED_OUT"
            assert "wait for ever" in str(answer.error)
            assert "did not commit within 30 ms" in str(answer.error)
            assert answer.controller_id == 1

    asyncio.run(scenario())


def test_without_a_leader_writes_get_not_controller_and_reads_still_work(tmp_path: Path) -> None:
    async def scenario() -> None:
        # Voter 2 never answers: node 1 can lead nothing.
        voters = (VoterAddress(1, "127.0.0.1", 1), VoterAddress(2, "127.0.0.1", 2))
        async with lone_controller(tmp_path, voters=voters) as node:
            created = await node.service.CreateTopics(create_request("t", 1, 1), None)
            assert created.error.error_name == "NOT_CONTROLLER"
            assert "no active controller is known" in created.error.message
            assert created.controller_id == -1
            described = await node.service.DescribeCluster(pb.DescribeClusterRequest(), None)
            assert not described.HasField("error")
            assert (described.cluster_id, described.metadata_offset) == (CLUSTER_ID, -1)

    asyncio.run(scenario())


def test_raw_appends_are_refused_where_the_controller_runs(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with lone_controller(tmp_path) as node:
            service = MetadataLogService(node.raft, raw_appends=False)
            answer = await service.Append(raft_pb2.AppendRequest(values=[b"raw"]), None)
            assert answer.error_code == 42  # INVALID_REQUEST
            assert "metadata.log.raw.append.enable" in answer.error_message

    asyncio.run(scenario())


def test_a_record_the_controller_cannot_decode_stops_the_node(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with lone_controller(tmp_path) as node:
            await active(node)
            node.failure_expected = True
            # Bypasses the controller, as only a bug or a corrupt log could.
            node.raft.post(lambda now_ms: node.raft.node.propose([b"junk"], now_ms))
            with pytest.raises(CorruptMetadataRecordError, match="record at offset"):
                await asyncio.wait_for(asyncio.shield(node.loop), 5)

    asyncio.run(scenario())


def test_the_active_controller_publishes_its_committed_offline_partition_count(
    tmp_path: Path,
) -> None:
    """`offline_partitions` counts the committed leaderless partitions (replog_offline_partitions
    on any controller node, controller-only included): a fenced broker's single-replica
    partitions go offline, and come back when it is unfenced."""

    async def heartbeat(node: LoneController, epoch: int, *, want_fence: bool) -> None:
        beat = await node.service.BrokerHeartbeat(
            pb.BrokerHeartbeatRequest(
                broker_id=1,
                broker_epoch=epoch,
                current_metadata_offset=1 << 40,
                want_fence=want_fence,
            ),
            None,
        )
        assert not beat.HasField("error") and beat.is_fenced == want_fence, beat

    async def scenario() -> None:
        async with lone_controller(tmp_path) as node:
            await active(node)
            epochs = await start_brokers(node, (1,))
            created = await node.service.CreateTopics(create_request("solo", 3, 1), None)
            assert not created.topics[0].HasField("error")
            assert node.driver.offline_partitions == 0
            await heartbeat(node, epochs[1], want_fence=True)
            await eventually(lambda: _value(node.driver.offline_partitions), lambda n: n == 3)
            await heartbeat(node, epochs[1], want_fence=False)
            await eventually(lambda: _value(node.driver.offline_partitions), lambda n: n == 0)

    asyncio.run(scenario())


def test_the_controller_logs_each_broker_it_fences_or_unfences_with_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        async with lone_controller(tmp_path) as node:
            await active(node)
            with caplog.at_level(logging.INFO, logger="replog.server.controller"):
                epochs = await start_brokers(node, (1,))
                beat = await node.service.BrokerHeartbeat(
                    pb.BrokerHeartbeatRequest(
                        broker_id=1,
                        broker_epoch=epochs[1],
                        current_metadata_offset=1 << 40,
                        want_fence=True,
                    ),
                    None,
                )
                assert beat.is_fenced, beat
            lines = [
                r.getMessage() for r in caplog.records if "fenced at broker epoch" in r.message
            ]
            assert lines == [
                f"controller 1: broker 1 unfenced at broker epoch {epochs[1]}: its heartbeat "
                "asked to be unfenced, caught up with the metadata log (offset "
                f"{epochs[1]}, registered at {epochs[1]})",
                f"controller 1: broker 1 fenced at broker epoch {epochs[1]}: its heartbeat "
                "asked to be fenced (want_fence)",
            ]

    asyncio.run(scenario())


class Deadline:
    def __init__(self, remaining_s: float | None) -> None:
        self.remaining_s = remaining_s

    def time_remaining(self) -> float | None:
        return self.remaining_s


def test_the_write_timeout_is_the_requests_within_the_callers_deadline(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with lone_controller(tmp_path) as node:
            service = node.service
            assert service._timeout_ms(0, None) == 30_000
            assert service._timeout_ms(500, Deadline(None)) == 500
            assert service._timeout_ms(5000, Deadline(1.0)) == 980
            assert service._timeout_ms(5000, Deadline(0.001)) == 0

    asyncio.run(scenario())


async def _value(value: T) -> T:
    return value


@pytest.mark.parametrize("gone", ["timed out", "cancelled"])
def test_a_write_whose_caller_is_gone_leaves_no_unretrieved_exception_at_stop(
    tmp_path: Path, gone: str
) -> None:
    """A write still queued in the Raft driver when its caller stops waiting (timed out, or
    cancelled), then the node stops: the NodeStoppingError of the input never run has no
    reader, so it must not be left on a future for asyncio to report at garbage collection
    ("Future exception was never retrieved")."""

    async def scenario() -> list[str]:
        reported: list[str] = []
        asyncio.get_running_loop().set_exception_handler(
            lambda loop, context: reported.append(context["message"])
        )
        raft = RaftDriver(
            1,
            RaftConfig(voters=(VoterAddress(1, "127.0.0.1", 1),)),
            RaftStorage(str(tmp_path), [1]),
            tasks=LoopTasks(),
        )
        driver = ControllerDriver(
            raft,
            ControllerConfig(node_id=1, cluster_id=CLUSTER_ID),
            read_snapshot=raft.storage.read_whole_snapshot,
            snapshot_bytes_max=1 << 30,
            snapshot_interval_ms=0,
        )

        def never_run(controller: object, now_ms: int) -> PendingResponse[None]:
            raise AssertionError("the Raft loop never runs: the write stays queued")

        # The Raft loop is not running: the write's input stays queued in its inbox.
        if gone == "timed out":
            answer = await driver.write(never_run, timeout_ms=30)
            assert answer.error is not None and answer.error.error_name == "REQUEST_TIMED_OUT"
            assert "controller did not get to it within 30 ms" in str(answer.error)
        else:
            caller = asyncio.create_task(driver.write(never_run, timeout_ms=60_000))
            await asyncio.sleep(0.01)
            caller.cancel()
            with pytest.raises(asyncio.CancelledError):
                await caller
            del caller
        assert len(raft._inbox) == 1  # the write, which the stop fails unrun
        await raft.stop(graceful=False)
        await asyncio.wait_for(raft.run(), 5)  # ends at once: the queued write fails unrun
        await raft.transport.close()
        raft.storage.close()
        del driver, raft
        gc.collect()
        return reported

    assert asyncio.run(scenario()) == []
