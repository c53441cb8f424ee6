"""Metadata snapshots of a node without a controller, and a restarted broker's catch-up.

A broker-only node snapshots the image its broker published (`BrokerMetadataSnapshots`) on the
controller's schedule and retention (`SnapshotWriter`); a restart starts from the snapshot. A
restarted broker publishes nothing before the leader told it the high watermark.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from replog.quorum.metadata.broker_lifecycle import LifecycleState
from replog.quorum.metadata.delta import MetadataDelta
from replog.quorum.metadata.image import MetadataImage, MetadataProvenance
from replog.quorum.metadata.loader import LoaderManifest, ManifestKind
from replog.quorum.metadata.record_batches import decode_snapshot, encode_snapshot
from replog.quorum.metadata.record_codec import encode_record
from replog.quorum.metadata.records import (
    METADATA_VERSION_FEATURE,
    FeatureLevelRecord,
    MetadataRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from replog.quorum.metadata.snapshot import image_from_records
from replog.quorum.raft import RaftConfig, RaftNode, VoterAddress
from replog.quorum.raft.messages import ErrorCode, FetchRequest, FetchResponse, Message
from replog.quorum.raft.ready import LoadSnapshot
from replog.quorum.raft.snapshot_id import SnapshotId
from replog.server.broker.broker_runtime import BrokerRuntime
from replog.server.config.node_config import NodeConfig
from replog.server.process.node import Node
from replog.server.raft.metadata_snapshots import BrokerMetadataSnapshots
from replog.server.raft.raft_driver import RaftDriver
from replog.server.raft.raft_metadata_log import snapshot_records
from replog.server.raft.raft_storage import RaftStorage
from replog.testing import LoopTasks
from tests.eventually import eventually
from tests.local_ports import free_port

BROKER = 1
VOTER = VoterAddress(1, "127.0.0.1", 19093)


def broker_config(directory: Path, node_id: int = BROKER, **extra: str) -> NodeConfig:
    return NodeConfig.from_properties(
        {
            "process.roles": "broker",
            "node.id": str(node_id),
            "cluster.id": "c1",
            "controller.quorum.voters": "1@127.0.0.1:19093,2@127.0.0.1:19094,3@127.0.0.1:19095",
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(directory / "logs"),
            **extra,
        }
    )


def topic(name: str, number: int) -> list[MetadataRecord]:
    topic_id = uuid.UUID(int=number)
    return [
        TopicRecord(name, topic_id),
        PartitionRecord(topic_id, 0, (BROKER,), (BROKER,), BROKER),
    ]


BOOTSTRAP: list[MetadataRecord] = [
    FeatureLevelRecord(METADATA_VERSION_FEATURE, 7),
    RegisterBrokerRecord(BROKER, uuid.UUID(int=9), 1),
]


class Manifests:
    """A publisher that keeps every manifest it is given."""

    name = "manifests"

    def __init__(self) -> None:
        self.seen: list[LoaderManifest] = []

    def on_metadata_update(
        self, delta: MetadataDelta, image: MetadataImage, manifest: LoaderManifest
    ) -> None:
        self.seen.append(manifest)


@dataclass
class LoneBroker:
    """A lone voter's Raft driver with the broker role of a node without a controller on it,
    wired as `Node` wires a broker-only node (the raw values are the controller's records)."""

    raft: RaftDriver
    broker: BrokerRuntime
    snapshots: BrokerMetadataSnapshots
    manifests: Manifests

    async def commit(self, records: Sequence[MetadataRecord]) -> None:
        await self.raft.append_and_wait([encode_record(r) for r in records])


@asynccontextmanager
async def lone_broker(directory: Path, **extra: str) -> AsyncIterator[LoneBroker]:
    config = broker_config(directory, **extra)
    raft = RaftDriver(
        BROKER, RaftConfig(voters=(VOTER,)), RaftStorage(str(directory), [1]), tasks=LoopTasks()
    )
    broker = BrokerRuntime.for_node(config, raft, bound_port=9092, tasks=LoopTasks())
    manifests = Manifests()
    broker.install(manifests)
    snapshots = BrokerMetadataSnapshots.for_node(config, raft, broker.metadata)
    loop = asyncio.create_task(raft.run())
    try:
        yield LoneBroker(raft, broker, snapshots, manifests)
    finally:
        await raft.stop(graceful=False)
        await asyncio.wait({loop}, timeout=5)
        await raft.transport.close()
        raft.storage.close()
        if loop.done() and loop.exception() is not None:
            raise loop.exception()  # type: ignore[misc]


def snapshot_image(storage: RaftStorage) -> MetadataImage:
    """The image the newest snapshot file holds, decoded as a restart would load it."""
    newest = storage.snapshot_ids()[-1]
    records = decode_snapshot(storage.read_whole_snapshot(newest), where=str(newest))
    provenance = MetadataProvenance(newest.end_offset - 1, newest.quorum_epoch)
    return image_from_records(records, provenance)


# --- a node without a controller snapshots its published image --------------------------------


@pytest.mark.asyncio
async def test_a_broker_only_node_snapshots_its_image_trims_its_log_and_restarts_from_it(
    tmp_path: Path,
) -> None:
    # A broker-only node snapshots too: otherwise its metadata log grows without bound and
    # every restart replays it from offset 0.
    settings = {
        "metadata.log.max.record.bytes.between.snapshots": "1",
        "metadata.max.retention.bytes": "1",
    }
    async with lone_broker(tmp_path, **settings) as node:
        await node.commit(BOOTSTRAP)
        for number, name in enumerate(("a", "b", "c"), start=1):
            await node.commit(topic(name, number))
        storage = node.raft.storage

        def snapshot_of_the_image() -> bool:
            image = node.broker.image
            ids = storage.snapshot_ids()
            return bool(ids) and ids[-1].end_offset == image.provenance.last_offset + 1

        await eventually(snapshot_of_the_image, "a snapshot of the published image")
        published = node.broker.image
        assert sorted(published.topics.by_name) == ["a", "b", "c"]
        assert snapshot_image(storage) == published
        assert node.snapshots.writer.snapshots_taken >= 2
        # Past the retention size the log starts at a snapshot (the newest it could be).
        await eventually(lambda: storage.log.log_start_offset > 0, "the log start moved")
        assert storage.log.log_start_offset in {s.end_offset for s in storage.snapshot_ids()}
    async with lone_broker(tmp_path) as node:
        await eventually(lambda: bool(node.manifests.seen), "a publication after the restart")
        first = node.manifests.seen[0]
        assert first.kind is ManifestKind.SNAPSHOT
        assert node.snapshots.writer.snapshots_loaded == 1
        restarted = node.broker.image
        # The same state; only the provenance moved on (the lone voter's new LeaderChange).
        assert replace(restarted, provenance=published.provenance) == published


@pytest.mark.asyncio
async def test_with_the_default_schedule_nothing_is_snapshotted_and_the_log_is_kept(
    tmp_path: Path,
) -> None:
    async with lone_broker(tmp_path) as node:
        await node.commit(BOOTSTRAP)
        await node.commit(topic("a", 1))
        await eventually(lambda: "a" in node.broker.image.topics.by_name, "the topic published")
        assert not node.raft.storage.snapshot_ids()
        assert node.raft.storage.log.log_start_offset == 0


@pytest.mark.asyncio
async def test_only_a_node_without_a_controller_snapshots_from_its_broker(tmp_path: Path) -> None:
    broker_only = Node(broker_config(tmp_path / "broker"))
    try:
        assert broker_only.controller is None and broker_only.broker_snapshots is not None
    finally:
        await broker_only._close_unstarted()
    port = free_port()
    combined = Node(
        broker_config(
            tmp_path / "combined",
            **{
                "process.roles": "broker,controller",
                "controller.quorum.voters": f"1@127.0.0.1:{port}",
                "listeners": f"PLAINTEXT://127.0.0.1:{port}",
            },
        )
    )
    try:
        # The controller snapshots its own state; a second writer would race it.
        assert combined.controller is not None and combined.broker_snapshots is None
    finally:
        await combined._close_unstarted()


# --- a clean stop snapshots, the next start loads it -------------------------------------------


@pytest.mark.asyncio
async def test_a_node_stopped_cleanly_snapshots_and_its_next_start_loads_the_snapshot(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The default schedule (20 MiB) never fires here: only the graceful shutdown, after the
    # broker's controlled shutdown, writes the snapshot the next start loads.
    port = free_port()
    config = broker_config(
        tmp_path,
        **{
            "process.roles": "broker,controller",
            "controller.quorum.voters": f"1@127.0.0.1:{port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        },
    )
    metadata_dir = tmp_path / "logs" / "__cluster_metadata-0"
    with caplog.at_level(logging.INFO, logger="replog.server"):
        for run in (1, 2):
            node = Node(config)
            serving = asyncio.create_task(node.serve())
            broker = node.broker
            assert broker is not None
            await eventually(
                lambda: broker.lifecycle.state is LifecycleState.RUNNING,  # noqa: B023
                f"the broker runs (start {run})",
            )
            if run == 2:
                assert node.controller is not None and node.controller.snapshots_loaded == 1
            node.tasks.end()
            assert await asyncio.wait_for(serving, 30) == 0
            assert [r for r in caplog.messages if "at a clean stop" in r], caplog.messages
            caplog.clear()
    assert len([n for n in os.listdir(metadata_dir) if n.endswith(".checkpoint")]) == 2


def test_a_snapshot_is_decoded_once_for_both_listeners_of_a_combined_node() -> None:
    # A restart's snapshot of 10,000 partitions is 11,000 records: about 0.3 s of CPU each time
    # it is decoded, and a combined node's controller and broker both load it.
    data = encode_snapshot([*BOOTSTRAP, *topic("a", 1)], quorum_epoch=2, timestamp_ms=0)
    item = LoadSnapshot(SnapshotId(5, 2))
    first = snapshot_records(item, data, node_id=BROKER)
    assert first.records == (*BOOTSTRAP, *topic("a", 1))
    assert (first.last_contained_offset, first.quorum_epoch) == (4, 2)
    assert snapshot_records(item, data, node_id=BROKER) is first  # the other listener
    assert snapshot_records(item, data, node_id=BROKER) is not first  # a later load decodes
    assert snapshot_records(item, data, node_id=2) == first  # another node decodes its own


def test_a_remembered_decode_is_never_handed_out_for_other_bytes() -> None:
    # A controller-only node's decode is remembered with nobody to take it; a node of another
    # cluster in the same process (an embedding, a test run) with the same id may load a
    # snapshot of the same id holding other records: it must get its own.
    item = LoadSnapshot(SnapshotId(5, 2))
    mine = encode_snapshot([*BOOTSTRAP, *topic("a", 1)], quorum_epoch=2, timestamp_ms=0)
    theirs = encode_snapshot([*BOOTSTRAP, *topic("b", 1)], quorum_epoch=2, timestamp_ms=0)
    snapshot_records(item, mine, node_id=7)
    assert snapshot_records(item, theirs, node_id=7).records == (*BOOTSTRAP, *topic("b", 1))


# --- a restarted broker waits for the leader's high watermark ---------------------------------


def write_metadata_log(
    directory: Path, batches: list[list[MetadataRecord]], snapshot_at: int
) -> int:
    """A metadata log a lone voter (node 1) committed: `batches` in order, and a snapshot of
    the first `snapshot_at` of them; returns the log end offset."""
    storage = RaftStorage(str(directory), [1])
    raft = RaftNode(
        node_id=1,
        config=RaftConfig(voters=(VOTER,), append_linger_ms=0),
        log=storage,
        election_state=storage.read_election_state(),
        rng=random.Random(1),
        now_ms=1000,
    )

    def drive() -> None:
        while raft.has_ready():
            ready = raft.ready()
            raft.advance(ready, flushed_end_offset=storage.apply(ready))

    drive()
    snapshot: list[MetadataRecord] = []
    for number, records in enumerate(batches, start=1):
        raft.propose([encode_record(r) for r in records], 1000)
        drive()
        if number <= snapshot_at:
            snapshot += records
        if number == snapshot_at:
            end_offset = raft.status().log_end_offset
            data = encode_snapshot(snapshot, quorum_epoch=1, timestamp_ms=0)
            raft.create_snapshot(end_offset, data, 1000)
            drive()
    end = raft.status().log_end_offset
    storage.close()
    return end


def test_a_restarted_broker_publishes_nothing_before_the_leader_tells_the_high_watermark(
    tmp_path: Path,
) -> None:
    # At start-up the high watermark is unknown until the leader answers: taking the latest
    # snapshot's end for it, the loader would count itself caught up on the snapshot alone and
    # the broker would publish (and serve) a possibly stale image as current.
    end = write_metadata_log(tmp_path, [BOOTSTRAP, topic("a", 1), topic("b", 2)], snapshot_at=2)
    # Restarted as a broker-only observer (node 4) of a three-voter quorum led by node 1.
    storage = RaftStorage(str(tmp_path), [1, 2, 3])
    try:
        config = broker_config(tmp_path, node_id=4)
        raft = RaftDriver(4, config.raft, storage, tasks=LoopTasks())
        broker = BrokerRuntime.for_node(config, raft, bound_port=9092, tasks=LoopTasks())

        def drive() -> list[FetchRequest]:
            sent: list[FetchRequest] = []
            while raft.node.has_ready():
                ready = raft.node.ready()
                raft.node.advance(ready, flushed_end_offset=storage.apply(ready))
                sent += [m.body for m in ready.messages if isinstance(m.body, FetchRequest)]
                for item in ready.to_apply:
                    broker.listener(item)
            return sent

        (request,) = drive()  # the snapshot loaded, the first Fetch to the leader sent
        assert broker.metadata.loader.last_loaded_offset >= 0
        assert broker.image is MetadataImage.EMPTY  # before: the snapshot's image, topic "a"
        epoch = raft.status().quorum_epoch
        answer = FetchResponse(
            request.correlation_id,
            ErrorCode.NONE,
            epoch,
            1,
            request.fetch_offset,
            request.last_fetched_epoch,
            high_watermark=end,
        )
        raft.node.step(Message(1, 4, answer), raft.node.now_ms)
        drive()
        assert sorted(broker.image.topics.by_name) == ["a", "b"]
        assert broker.image.provenance.last_offset == end - 1
    finally:
        storage.close()
