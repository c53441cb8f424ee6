"""Transactions in the partition, through the replica manager on real logs: transactional
batches open transactions, WriteTxnMarkers closes them (acks=all, Kafka's checks), ABORTs fill
the segment's `.txnindex` on the leader and on its followers alike, read_committed fetches stop
at the last stable offset and name the aborted transactions, ListOffsets answers the LSO, and a
crash's recovery rebuilds the index."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from replog.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    NotLeaderOrFollowerError,
    TransactionCoordinatorFencedError,
    UnknownTopicOrPartitionError,
)
from replog.record import RecordBatch, build_batch, iter_frames
from replog.replication.messages import (
    LATEST_TIMESTAMP,
    FetchPartition,
    FetchRequest,
    IsolationLevel,
    ListOffsetsPartition,
    ListOffsetsRequest,
    TxnMarker,
    WriteTxnMarkersRequest,
)
from replog.storage.aborted_transactions import AbortedTransaction, encode
from replog.testing import ManualClock
from tests.server.data_plane.test_replica_manager import (
    DONE_S,
    T0,
    Node,
    produce,
    replicate,
    settle,
    two_nodes,
)

SEGMENT_INDEX = "00000000000000000000.txnindex"


def txn(producer_id: int, sequence: int, count: int = 1, epoch: int = 0) -> bytes:
    records = [(T0 + i, b"k", f"{producer_id}-{sequence + i}".encode(), ()) for i in range(count)]
    return build_batch(
        records,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        is_transactional=True,
    )


def marker(
    producer_id: int,
    *,
    committed: bool,
    epoch: int = 0,
    coordinator_epoch: int = 5,
    partitions: tuple[tuple[str, int], ...] = (("t", 0),),
    version: int = 0,
) -> TxnMarker:
    return TxnMarker(producer_id, epoch, committed, coordinator_epoch, partitions, version)


async def write(node: Node, *markers: TxnMarker, timeout_ms: int = 1000) -> list[object]:
    """Each partition's error of a WriteTxnMarkers to `node`, in request order."""
    response = await asyncio.wait_for(
        node.rm.write_txn_markers(WriteTxnMarkersRequest(markers, timeout_ms)), DONE_S
    )
    return [p.error for m in response.markers for p in m.partitions]


async def committed_fetch(node: Node, offset: int = 0):
    response = await asyncio.wait_for(
        node.rm.fetch(
            FetchRequest(
                (FetchPartition("t", 0, offset),),
                max_wait_ms=0,
                isolation_level=IsolationLevel.READ_COMMITTED,
            )
        ),
        DONE_S,
    )
    return response.partitions[0]


def values(records: bytes) -> list[str]:
    out = []
    for position, _ in iter_frames(records):
        batch = RecordBatch.parse(records, position)
        if not batch.is_control:
            out += [r.value.decode() for r in batch.records()]
    return out


async def replicated(leader: Node, follower: Node) -> None:
    """Two rounds: the follower fetches what is new, then its next fetch moves the HW."""
    await replicate(follower, leader)
    await replicate(follower, leader)


async def write_replicated(leader: Node, follower: Node, *markers: TxnMarker) -> list[object]:
    """`write`, answered once the follower has the markers (acks=all waits for it)."""
    task = asyncio.create_task(write(leader, *markers))
    await settle()
    assert not task.done()
    await replicated(leader, follower)
    return await asyncio.wait_for(task, DONE_S)


@pytest.mark.asyncio
async def test_markers_end_transactions_and_read_committed_skips_the_aborted(
    tmp_path: Path,
) -> None:
    leader, follower, _ = two_nodes(tmp_path, ManualClock())
    assert (await produce(leader, txn(7, 0, count=2))).error is None  # offsets 0-1
    assert (await produce(leader, txn(8, 0))).error is None  # offset 2
    await replicated(leader, follower)
    assert leader.leader().high_watermark == 3
    # The cleaner stops at the first open transaction (`LogCleaner.first_unstable_offset`).
    assert leader.log_manager.cleaner.first_unstable_offset(("t", 0)) == 0
    nothing = await committed_fetch(leader)
    assert (nothing.last_stable_offset, nothing.records, nothing.high_watermark) == (0, b"", 3)

    # acks=all: the ABORT is answered once the follower has it.
    assert await write_replicated(leader, follower, marker(7, committed=False)) == [None]
    partition = leader.rm.partition("t", 0)
    assert partition is not None and not partition.producer_state.entry(7).in_transaction
    entry = AbortedTransaction(7, 0, 3, 2)  # producer 8's open transaction bounds the LSO
    index = tmp_path / "broker1" / "t-0" / SEGMENT_INDEX
    assert index.read_bytes() == encode([entry])
    assert (await committed_fetch(leader)).last_stable_offset == 2

    assert await write_replicated(leader, follower, marker(8, committed=True)) == [None]
    assert leader.log_manager.cleaner.first_unstable_offset(("t", 0)) is None
    read = await committed_fetch(leader)
    assert (read.last_stable_offset, read.high_watermark) == (5, 5)
    # Every record up to the LSO, with the aborted transaction named for the consumer to skip.
    assert read.aborted_transactions == ((7, 0),)
    assert values(read.records) == ["7-0", "7-1", "8-0"]
    # The follower replicated the markers byte for byte, and wrote the same index.
    assert (tmp_path / "broker2" / "t-0" / SEGMENT_INDEX).read_bytes() == index.read_bytes()
    replica = follower.rm.partition("t", 0)
    assert replica is not None and replica.producer_state.entry(8).coordinator_epoch == 5
    # A fetch past the aborted transaction is told of none.
    assert (await committed_fetch(leader, 4)).aborted_transactions == ()


@pytest.mark.asyncio
async def test_list_offsets_latest_is_the_lso_for_read_committed(tmp_path: Path) -> None:
    leader, follower, _ = two_nodes(tmp_path, ManualClock())
    await produce(leader, build_batch([(T0, b"k", b"plain", ())]))
    await produce(leader, txn(7, 0))
    await replicated(leader, follower)

    def latest(level: IsolationLevel) -> int:
        request = ListOffsetsRequest(
            (ListOffsetsPartition("t", 0, LATEST_TIMESTAMP),), isolation_level=level
        )
        return leader.rm.list_offsets(request).partitions[0].offset

    assert (latest(IsolationLevel.READ_UNCOMMITTED), latest(IsolationLevel.READ_COMMITTED)) == (
        2,
        1,
    )


@pytest.mark.asyncio
async def test_markers_are_checked_as_kafka_checks_them(tmp_path: Path) -> None:
    leader, follower, _ = two_nodes(tmp_path, ManualClock())
    await produce(leader, txn(7, 0, epoch=2))
    await replicated(leader, follower)
    # A plain batch of a producer whose transaction is open.
    plain = build_batch([(T0, b"k", b"v", ())], producer_id=7, producer_epoch=2, base_sequence=1)
    assert isinstance((await produce(leader, plain)).error, InvalidTxnStateError)
    errors = await write(
        leader,
        marker(7, committed=True, epoch=2, version=2),  # version 2 needs a bumped epoch
        marker(7, committed=True, epoch=1),  # an older epoch
        marker(7, committed=True, epoch=2, partitions=(("nope", 0),)),
        timeout_ms=0,
    )
    assert [type(e) for e in errors] == [
        InvalidProducerEpochError,
        InvalidProducerEpochError,
        UnknownTopicOrPartitionError,
    ]
    bumped = marker(7, committed=True, epoch=3, version=2)
    assert await write_replicated(leader, follower, bumped) == [None]
    # A coordinator that lost its partition writes with an older coordinator epoch.
    await produce(leader, txn(7, 0, epoch=3))
    (fenced,) = await write(leader, marker(7, committed=False, epoch=3, coordinator_epoch=4))
    assert isinstance(fenced, TransactionCoordinatorFencedError) and fenced.code == 52
    # Only the leader writes markers.
    (not_leader,) = await write(follower, marker(7, committed=False, epoch=3))
    assert isinstance(not_leader, NotLeaderOrFollowerError)


@pytest.mark.asyncio
async def test_recovery_rebuilds_the_index_and_the_open_transactions(tmp_path: Path) -> None:
    clock = ManualClock()
    leader, follower, image = two_nodes(tmp_path, clock)
    await produce(leader, txn(7, 0))
    await produce(leader, txn(8, 0))
    await replicated(leader, follower)
    assert await write_replicated(leader, follower, marker(7, committed=False)) == [None]
    index = tmp_path / "broker1" / "t-0" / SEGMENT_INDEX
    written = index.read_bytes()
    index.write_bytes(written[:-5])  # torn by the crash
    leader.log_manager.close_after_failure()  # no flush, no clean-shutdown marker

    again = Node(tmp_path, 1, clock)
    again.rm.preload_producer_states()
    again.rm.apply_image(image)
    assert index.read_bytes() == written
    partition = again.rm.partition("t", 0)
    assert partition is not None and partition.producer_state.entry(8).in_transaction
    assert partition.last_stable_offset(3) == 1


@pytest.mark.asyncio
async def test_a_damaged_index_is_rebuilt_by_the_read_that_finds_it(tmp_path: Path) -> None:
    leader, follower, _ = two_nodes(tmp_path, ManualClock())
    await produce(leader, txn(7, 0, count=2))
    assert await write_replicated(leader, follower, marker(7, committed=False)) == [None]
    index = tmp_path / "broker1" / "t-0" / SEGMENT_INDEX
    written = index.read_bytes()
    index.write_bytes(written[:-1])
    partition = leader.rm.partition("t", 0)
    assert partition is not None
    # As after a restart: the segment's index is read from its file on first use.
    del partition.log.segments()[0].txn_index
    read = await committed_fetch(leader)
    assert read.aborted_transactions == ((7, 0),)
    assert index.read_bytes() == written
