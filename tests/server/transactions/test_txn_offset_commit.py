"""TxnOffsetCommit through the GroupCoordinator over a real ReplicaManager and logs: the
offsets are written as transactional batches of the producer (no sequence, so a second commit
of the transaction is neither a duplicate nor out of order), stay invisible to OffsetFetch
(UNSTABLE_OFFSET_COMMIT with require_stable) until the transaction's COMMIT marker, written
through the broker's WriteTxnMarkers core, applies them; an ABORT drops them, and a broker
loading the partition replays both the same way, a transaction still open staying pending
until its marker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from replog.coordinator import messages as cm
from replog.errors import InvalidProducerEpochError, UnstableOffsetCommitError
from replog.replication import messages as m
from replog.server.data_plane.broker_cores import BrokerCores
from replog.storage.log_config import LogConfig
from replog.topic_names import CONSUMER_OFFSETS_TOPIC
from tests.server.groups.test_group_coordinator import (
    DATA,
    GROUP_IN,
    USERS,
    Broker,
    commit,
    committed,
    fetch,
    image_with,
    loaded,
    offsets_topic,
)

GROUP = GROUP_IN[0]
IMAGE = image_with(*offsets_topic(1, 1, 1), *DATA, *USERS)
PRODUCER = 9


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    node = Broker(tmp_path / "broker1")
    yield node
    node.close()


def txn_commit(*entries: cm.CommitEntry, epoch: int = 0) -> cm.TxnOffsetCommitRequest:
    return cm.TxnOffsetCommitRequest("tx", GROUP, PRODUCER, epoch, tuple(entries))


async def committed_in_txn(broker: Broker, *entries: cm.CommitEntry, epoch: int = 0) -> None:
    answer = await broker.coordinator.txn_offset_commit(txn_commit(*entries, epoch=epoch))
    assert answer.error is None and [p.error for p in answer.partitions] == [None] * len(entries)


async def end_transaction(broker: Broker, *, committed: bool, epoch: int = 0) -> None:
    """The COMMIT or ABORT marker of the producer's transaction, through the broker's core."""
    cores = BrokerCores(
        1, replica_manager=broker.rm, on_markers_written=broker.coordinator.on_markers_written
    )
    marker = m.TxnMarker(PRODUCER, epoch, committed, 0, ((CONSUMER_OFFSETS_TOPIC, 0),))
    answer = await cores.write_txn_markers(m.WriteTxnMarkersRequest((marker,)))
    assert [p.error for p in answer.markers[0].partitions] == [None]


def stable(broker: Broker, *partitions: tuple[str, int]) -> dict[tuple[str, int], str | None]:
    """Each partition's OffsetFetch error with require_stable (None: its offset is stable)."""
    asked = cm.OffsetFetchRequest(GROUP, partitions, require_stable=True)
    answer = broker.coordinator.offset_fetch(asked)
    assert answer.error is None
    return {(f.topic, f.partition): f.error and f.error.error_name for f in answer.partitions}


async def reloaded(root: Path, broker: Broker) -> Broker:
    await broker.coordinator.stop()
    broker.close()
    again = Broker(root, None, LogConfig())
    await loaded(again, IMAGE)
    return again


@pytest.mark.asyncio
async def test_offsets_apply_at_the_commit_marker_and_a_load_reads_them(
    broker: Broker, tmp_path: Path
) -> None:
    await loaded(broker, IMAGE)
    await committed_in_txn(broker, cm.CommitEntry("orders", 0, 5))
    await committed_in_txn(broker, cm.CommitEntry("orders", 1, 6))  # same epoch, no sequence
    assert committed(broker.coordinator.offset_fetch(fetch(GROUP, ("orders", 0)))) == {
        ("orders", 0): -1
    }
    unstable = UnstableOffsetCommitError.error_name
    assert stable(broker, ("orders", 0), ("orders", 1), ("users", 0)) == {
        ("orders", 0): unstable,
        ("orders", 1): unstable,
        ("users", 0): None,
    }
    plog = broker.log_manager.get_log(CONSUMER_OFFSETS_TOPIC, 0)
    (producer,) = broker.rm.describe_producers(CONSUMER_OFFSETS_TOPIC, 0)
    assert producer.in_transaction and producer.last_sequence == -1
    await end_transaction(broker, committed=True)
    assert committed(broker.coordinator.offset_fetch(fetch(GROUP))) == {
        ("orders", 0): 5,
        ("orders", 1): 6,
    }
    assert stable(broker, ("orders", 0)) == {("orders", 0): None}
    # A zombie's commit (an older epoch than the partition has seen) is refused as written.
    await committed_in_txn(broker, cm.CommitEntry("orders", 0, 9), epoch=1)
    stale = await broker.coordinator.txn_offset_commit(txn_commit(cm.CommitEntry("orders", 0, 8)))
    assert isinstance(stale.error, InvalidProducerEpochError), stale
    end = plog.log_end_offset
    again = await reloaded(tmp_path / "broker1", broker)
    try:
        assert again.log_manager.get_log(CONSUMER_OFFSETS_TOPIC, 0).log_end_offset == end
        assert committed(again.coordinator.offset_fetch(fetch(GROUP))) == {
            ("orders", 0): 5,
            ("orders", 1): 6,
        }
        # The epoch-1 transaction is still open: pending after the load, applied at its marker.
        assert stable(again, ("orders", 0)) == {("orders", 0): unstable}
        await end_transaction(again, committed=True, epoch=1)
        assert committed(again.coordinator.offset_fetch(fetch(GROUP, ("orders", 0)))) == {
            ("orders", 0): 9
        }
    finally:
        await again.coordinator.stop()
        again.close()


@pytest.mark.asyncio
async def test_an_abort_drops_the_offsets_and_a_load_drops_them_too(
    broker: Broker, tmp_path: Path
) -> None:
    await loaded(broker, IMAGE)
    plain = await broker.coordinator.offset_commit(commit(GROUP, cm.CommitEntry("orders", 0, 3)))
    assert plain.error is None
    await committed_in_txn(broker, cm.CommitEntry("orders", 0, 5))
    await end_transaction(broker, committed=False)
    assert committed(broker.coordinator.offset_fetch(fetch(GROUP))) == {("orders", 0): 3}
    assert stable(broker, ("orders", 0)) == {("orders", 0): None}
    again = await reloaded(tmp_path / "broker1", broker)
    try:
        assert committed(again.coordinator.offset_fetch(fetch(GROUP))) == {("orders", 0): 3}
    finally:
        await again.coordinator.stop()
        again.close()
