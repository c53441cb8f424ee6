"""Partition: the idempotent-producer table every replica keeps, and its snapshot files, against
a real Log under a real LogManager in tmp_path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from replog.quorum.metadata.records import PartitionChangeRecord
from replog.record import build_batch, read_header
from replog.record.control_record import EndTxnMarker, encode_marker
from replog.record.header import BatchHeader
from replog.replication.producer_snapshot import decode_producer_snapshot
from replog.replication.producer_state import ProducerStateTable
from replog.server.data_plane.partition import Partition
from replog.server.data_plane.producer_state_loader import ProducerExpiry
from replog.storage.log import Log
from replog.storage.log_config import LogConfig
from replog.storage.producer_snapshot_file import ProducerSnapshotFiles
from replog.testing import ManualClock
from tests.metadata.metadata_helpers import replayed
from tests.server.data_plane.test_partition import NOW_MS, T0, lead, make, registration
from tests.server.data_plane.test_replica_manager import (
    TID,
    Node,
    produce,
    replicate,
    two_nodes,
)

DAY_MS = 86_400_000
SMALL = LogConfig(segment_bytes=150)  # two 70-byte single-record batches per segment


def stamped(timestamp: int, count: int, producer_id: int, base_sequence: int) -> bytes:
    records = [(timestamp + i, b"k", b"v", ()) for i in range(count)]
    return build_batch(
        records, producer_id=producer_id, producer_epoch=0, base_sequence=base_sequence
    )


def idempotent(producer_id: int, base_sequence: int, count: int = 1) -> bytes:
    return stamped(T0, count, producer_id, base_sequence)


def record_walk_starts(monkeypatch: pytest.MonkeyPatch, of: Log | None = None) -> list[int]:
    """The start offset of every header walk of the log `of` (of any log when None) from now
    on."""
    walked_from: list[int] = []
    walk = Log.batch_headers_and_markers

    def recording(
        plog: Log, start: int, end: int | None = None
    ) -> Iterator[tuple[BatchHeader, EndTxnMarker | None]]:
        if of is None or plog is of:
            walked_from.append(start)
        return walk(plog, start, end)

    monkeypatch.setattr(Log, "batch_headers_and_markers", recording)
    return walked_from


def last_batches(table: ProducerStateTable) -> dict[int, tuple[int, int, int]]:
    """Per producer: epoch, last sequence and last offset (what a snapshot keeps)."""
    return {
        pid: (e.producer_epoch, e.last_sequence, e.batches[-1].last_offset if e.batches else -1)
        for pid, e in table.entries().items()
    }


def rebuilt(partition: Partition, end: int) -> ProducerStateTable:
    """The table a walk of the log's headers below `end` gives."""
    table = ProducerStateTable("rebuilt")
    table.rebuild(h for h in partition.log.batch_headers(0) if h.base_offset < end)
    return table


def reopened(root: Path, config: LogConfig = SMALL) -> Partition:
    """The same partition directory opened by a new LogManager (a restart)."""
    partition, _ = make(root, config=config)
    return partition


def as_fetched(root: Path, *batches: bytes) -> bytes:
    """`batches` stamped with offsets from 0 and leader epoch 1 by a leader's log under
    `root`, as a follower fetches them."""
    leader, _ = make(root)
    for data in batches:
        leader.log.append_as_leader(data, 1)
    return bytes(leader.log.read(0, 1 << 20, leader.log.log_end_offset))


# --- the table on every replica ----------------------------------------------------------------


def test_a_follower_keeps_the_table_so_a_new_leader_reads_no_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    partition, _ = make(tmp_path / "follower")
    partition.make_follower(registration(leader=2, leader_epoch=1), NOW_MS)
    assert len(partition.producer_state) == 0
    partition.append_as_follower(
        as_fetched(tmp_path / "leader", idempotent(9, 0, count=2), idempotent(9, 2))
    )
    assert last_batches(partition.producer_state) == {9: (0, 2, 2)}
    walked_from = record_walk_starts(monkeypatch, partition.log)
    lead(partition, registration(leader_epoch=2))
    assert walked_from == []  # nothing read: the follower's table is the leader's
    duplicate = partition.producer_state.check(read_header(idempotent(9, 2)))
    assert duplicate is not None and (duplicate.first_offset, duplicate.last_offset) == (2, 2)
    # And back to follower: the table stays.
    partition.make_follower(registration(leader=2, leader_epoch=3), NOW_MS)
    assert last_batches(partition.producer_state) == {9: (0, 2, 2)}


def test_a_stopped_replica_forgets_and_loads_again_on_its_next_role(tmp_path: Path) -> None:
    partition, _ = make(tmp_path)
    lead(partition, registration())
    partition.append_as_leader(idempotent(9, 0), 3)
    partition.stop()
    assert len(partition.producer_state) == 0 and not partition.producer_state_loaded
    partition.log.append_as_leader(idempotent(9, 1), 3)  # appended while it had no role
    partition.make_follower(registration(leader=2, leader_epoch=4), NOW_MS)
    assert last_batches(partition.producer_state) == {9: (0, 1, 1)}


# --- snapshots at rolls, loading from them --------------------------------------------------------


def test_an_append_that_rolls_writes_a_snapshot_as_of_the_new_base(tmp_path: Path) -> None:
    partition, _ = make(tmp_path, config=SMALL)
    lead(partition, registration())
    partition.append_as_leader(idempotent(7, 0), 3)  # 0
    partition.append_as_leader(idempotent(8, 0), 3)  # 1
    assert partition.producer_snapshots.offsets() == []
    partition.append_as_leader(idempotent(7, 1), 3)  # 2: rolls
    assert partition.log.active_segment.base_offset == 2
    assert partition.producer_snapshots.offsets() == [2]
    data = partition.producer_snapshots.read(2)
    assert data is not None
    loaded = ProducerStateTable("loaded")
    loaded.load(decode_producer_snapshot(data, "2"))
    # As of offset 2: producer 7's batch at 2 is not in it.
    assert last_batches(loaded) == {7: (0, 0, 0), 8: (0, 0, 1)}
    assert (tmp_path / "t-0" / "00000000000000000002.snapshot").is_file()


def test_a_follower_append_that_rolls_midway_snapshots_between_its_batches(
    tmp_path: Path,
) -> None:
    partition, _ = make(tmp_path / "follower", config=SMALL)
    partition.make_follower(registration(leader=2, leader_epoch=1), NOW_MS)
    fetched = as_fetched(tmp_path / "leader", idempotent(7, 0), idempotent(7, 1), idempotent(7, 2))
    partition.append_as_follower(fetched)  # 0, 1 in the first segment; 2 rolls
    assert partition.producer_snapshots.offsets() == [2]
    data = partition.producer_snapshots.read(2)
    assert data is not None
    [entry] = decode_producer_snapshot(data, "2")
    assert (entry.last_sequence, entry.batches[-1].last_offset) == (1, 1)
    assert last_batches(partition.producer_state) == {7: (0, 2, 2)}


def fill(partition: Partition, count: int) -> None:
    """`count` single-record batches of producers 5 and 6 alternating, as leader."""
    for i in range(count):
        partition.append_as_leader(idempotent(5 + i % 2, i // 2), 3)


def filled(root: Path, count: int) -> Partition:
    """A leader over two-batch segments after `fill(count)`."""
    partition, _ = make(root, config=SMALL)
    lead(partition, registration())
    fill(partition, count)
    return partition


def restarted(root: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Partition, list[int]]:
    """The partition under `root` opened again (its log closed first) and made a follower;
    with the start of every header walk it made doing so."""
    again = reopened(root)
    walked_from = record_walk_starts(monkeypatch, again.log)
    again.make_follower(registration(leader=2, leader_epoch=4), NOW_MS)
    return again, walked_from


def test_a_restart_replays_only_the_headers_after_the_newest_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    partition = filled(tmp_path, 7)  # segments at 0, 2, 4, 6; snapshots at 2, 4, 6
    assert partition.producer_snapshots.offsets() == [2, 4, 6]
    expected = last_batches(partition.producer_state)
    partition.log.close()
    again, walked_from = restarted(tmp_path, monkeypatch)
    assert walked_from == [6]
    assert last_batches(again.producer_state) == expected == last_batches(rebuilt(again, 7))


def test_a_snapshot_at_the_log_end_loads_with_nothing_to_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    partition = filled(tmp_path, 7)
    partition.write_producer_snapshot_at_stop()  # what the replica manager's stop does
    assert partition.producer_snapshots.offsets() == [2, 4, 6, 7]
    partition.log.close()
    again, walked_from = restarted(tmp_path, monkeypatch)
    assert walked_from == [7]
    assert last_batches(again.producer_state) == last_batches(rebuilt(again, 7))


def test_a_stop_with_nothing_to_replay_writes_no_snapshot(tmp_path: Path) -> None:
    partition, _ = make(tmp_path, config=SMALL)
    lead(partition, registration())
    partition.write_producer_snapshot_at_stop()  # an empty log
    assert partition.producer_snapshots.offsets() == []
    fill(partition, 6)  # the append of 4 rolled: the active segment at 4 holds 4-5
    partition.log.roll()  # an empty active segment at 6, and no snapshot there
    partition.write_producer_snapshot_at_stop()
    assert partition.producer_snapshots.offsets() == [2, 4]


def test_a_corrupt_snapshot_is_deleted_and_an_older_one_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    partition = filled(tmp_path, 7)
    partition.log.close()
    newest = tmp_path / "t-0" / "00000000000000000006.snapshot"
    data = bytearray(newest.read_bytes())
    data[-1] ^= 0x40
    newest.write_bytes(bytes(data))
    (tmp_path / "t-0" / "00000000000000000004.snapshot").write_bytes(b"")  # torn by a crash
    again, walked_from = restarted(tmp_path, monkeypatch)
    assert walked_from == [2]
    assert again.producer_snapshots.offsets() == [2]
    assert "00000000000000000006.snapshot: CRC-32C" in caplog.text
    assert "00000000000000000004.snapshot: 0 bytes" in caplog.text
    assert last_batches(again.producer_state) == last_batches(rebuilt(again, 7))


def test_with_no_snapshot_the_whole_log_is_replayed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    partition = filled(tmp_path, 5)
    partition.log.close()
    for snapshot in (tmp_path / "t-0").glob("*.snapshot"):
        snapshot.unlink()
    again = reopened(tmp_path)
    walked_from = record_walk_starts(monkeypatch, again.log)
    lead(again, registration(leader_epoch=4))
    assert walked_from == [0]
    assert last_batches(again.producer_state) == last_batches(rebuilt(again, 5))


def test_a_transaction_ended_above_the_high_watermark_stays_unstable_after_a_restart(
    tmp_path: Path,
) -> None:
    """A snapshot above the HW has forgotten a transaction whose marker the HW has not
    passed: the load passes it over and replays the log, which sees the transaction close."""
    partition, manager = make(tmp_path)
    lead(partition, registration())
    partition.append_as_leader(
        build_batch(
            [(T0, b"k", b"v", ())],
            producer_id=7,
            producer_epoch=0,
            base_sequence=0,
            is_transactional=True,
        ),
        3,
    )  # 0
    key, value = encode_marker(EndTxnMarker(False, 5))
    partition.append_marker_as_leader(
        build_batch(
            [(T0, key, value, ())],
            producer_id=7,
            producer_epoch=0,
            is_transactional=True,
            is_control=True,
        ),
        3,
    )  # 1: the COMMIT, not yet replicated
    assert partition.log.high_watermark == 0 and partition.last_stable_offset(1) == 0
    partition.write_producer_snapshot_at_stop()  # at 2: no transaction open there
    assert partition.producer_snapshots.offsets() == [2]
    manager.shutdown()  # clean: no recovery at the restart
    again = reopened(tmp_path, LogConfig())
    lead(again, registration(leader_epoch=4))
    assert again.log.high_watermark == 0
    assert again.last_stable_offset(1) == 0  # its marker at 1 is not below the HW
    assert again.last_stable_offset(2) == 2


# --- truncation and retention ---------------------------------------------------------------------


def test_truncation_reloads_from_the_snapshot_below_and_deletes_those_above(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    partition = filled(tmp_path, 7)
    partition.make_follower(registration(leader=2, leader_epoch=4), NOW_MS)
    walked_from = record_walk_starts(monkeypatch, partition.log)
    partition.truncate_to(5)
    assert partition.log.log_end_offset == 5
    assert partition.producer_snapshots.offsets() == [2, 4]
    assert walked_from == [4]
    # Producer 5 wrote at 0, 2, 4, 6; producer 6 at 1, 3, 5: the batches from 5 on are gone.
    assert last_batches(partition.producer_state) == {5: (0, 2, 4), 6: (0, 1, 3)}
    assert last_batches(partition.producer_state) == last_batches(rebuilt(partition, 5))
    # A retry of a batch that was cut is appended again, not answered as a duplicate.
    assert partition.producer_state.check(read_header(idempotent(6, 2))) is None


def test_truncating_fully_forgets_every_producer_and_snapshot(tmp_path: Path) -> None:
    partition = filled(tmp_path, 5)
    partition.make_follower(registration(leader=2, leader_epoch=4), NOW_MS)
    partition.truncate_fully_and_start_at(40)
    assert partition.producer_snapshots.offsets() == []
    assert len(partition.producer_state) == 0 and partition.producer_state_loaded


def test_snapshots_below_the_log_start_go_at_the_next_roll(tmp_path: Path) -> None:
    partition, _ = make(tmp_path, config=SMALL)
    lead(partition, registration(replicas=(1,), isr=(1,)))
    fill(partition, 5)  # snapshots at 2, 4
    partition.log.update_high_watermark(5)
    partition.log.increment_log_start_offset(4, "test")
    assert partition.producer_snapshots.offsets() == [2, 4]
    fill(partition, 2)  # 5, 6: rolls at 6
    assert partition.producer_snapshots.offsets() == [4, 6]


def test_pruning_deletes_below_the_log_start_and_lists_only_when_it_moved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    partition = filled(tmp_path, 7)  # snapshots at 2, 4, 6
    listed: list[str] = []
    list_offsets = ProducerSnapshotFiles.offsets
    monkeypatch.setattr(
        ProducerSnapshotFiles,
        "offsets",
        lambda files: listed.append(files.directory) or list_offsets(files),
    )
    partition.prune_producer_snapshots()  # the log start (0) did not move since the last roll
    assert listed == []
    partition.log.update_high_watermark(7)
    partition.log.increment_log_start_offset(5, "test")
    partition.prune_producer_snapshots()
    partition.prune_producer_snapshots()
    assert len(listed) == 1
    assert list_offsets(partition.producer_snapshots) == [6]


# --- expiry -----------------------------------------------------------------------------------


def test_loading_reads_producers_only_from_the_first_segment_not_expired(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expiry = ProducerExpiry(wall_now_ms=T0, expiration_ms=DAY_MS)
    partition, _ = make(tmp_path, expiry=expiry)
    plog = partition.log
    old, recent = T0 - 2 * DAY_MS, T0 - 1_000
    plog.append_as_leader(stamped(old, 2, producer_id=7, base_sequence=0), 1)  # offsets 0-1
    plog.append_as_leader(stamped(old, 1, producer_id=9, base_sequence=0), 1)  # 2
    plog.roll()
    plog.append_as_leader(stamped(old, 1, producer_id=5, base_sequence=0), 1)  # 3
    plog.append_as_leader(stamped(recent, 2, producer_id=9, base_sequence=1), 1)  # 4-5
    plog.roll()
    plog.append_as_leader(stamped(old, 1, producer_id=9, base_sequence=3), 1)  # 6: 9's last
    plog.append_as_leader(stamped(recent, 1, producer_id=8, base_sequence=0), 1)  # 7
    walked_from = record_walk_starts(monkeypatch, partition.log)
    lead(partition, registration())
    # The first segment (every batch two days old) is not read; the second is (one batch is
    # recent), old batch and all; so is the third, whose last batch for producer 9 is old.
    assert walked_from == [3]
    full = ProducerStateTable("full")
    full.rebuild(partition.log.batch_headers(0))
    full.remove_expired(T0, DAY_MS)
    assert set(full.entries()) == set(partition.producer_state.entries()) == {8}
    # Producer 9's last batch is two days old: forgotten, as a full rebuild's expiry does.


def test_a_producer_last_seen_past_the_skipped_segments_keeps_its_latest_batch(
    tmp_path: Path,
) -> None:
    partition, _ = make(tmp_path, expiry=ProducerExpiry(wall_now_ms=T0, expiration_ms=DAY_MS))
    plog = partition.log
    old, recent = T0 - 2 * DAY_MS, T0 - 1_000
    plog.append_as_leader(stamped(old, 2, producer_id=9, base_sequence=0), 1)  # 0-1
    plog.roll()
    plog.append_as_leader(stamped(recent, 3, producer_id=9, base_sequence=2), 1)  # 2-4
    lead(partition, registration())
    entry = partition.producer_state.entry(9)
    assert entry is not None and entry.last_sequence == 4
    retry = read_header(stamped(recent, 3, producer_id=9, base_sequence=2))
    duplicate = partition.producer_state.check(retry)
    assert duplicate is not None and (duplicate.first_offset, duplicate.last_offset) == (2, 4)


def test_with_every_segment_expired_loading_reads_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    partition, _ = make(tmp_path, expiry=ProducerExpiry(wall_now_ms=T0, expiration_ms=DAY_MS))
    partition.log.append_as_leader(stamped(T0 - 2 * DAY_MS, 2, producer_id=9, base_sequence=0), 1)
    walked_from = record_walk_starts(monkeypatch, partition.log)
    lead(partition, registration())
    assert walked_from == [partition.log.log_end_offset] and len(partition.producer_state) == 0


def test_a_snapshot_older_than_the_expired_prefix_is_passed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    partition, _ = make(
        tmp_path, config=SMALL, expiry=ProducerExpiry(wall_now_ms=T0, expiration_ms=DAY_MS)
    )
    lead(partition, registration())
    old, recent = T0 - 2 * DAY_MS, T0 - 1_000
    for i in range(4):  # 0-3 two days old: segments at 0 and 2, a snapshot at 2
        partition.append_as_leader(stamped(old, 1, producer_id=4, base_sequence=i), 3)
    partition.append_as_leader(stamped(recent, 1, producer_id=4, base_sequence=4), 3)  # 4
    assert partition.producer_snapshots.offsets() == [2, 4]
    (tmp_path / "t-0" / "00000000000000000004.snapshot").unlink()
    partition.log.close()
    again, _ = make(
        tmp_path, config=SMALL, expiry=ProducerExpiry(wall_now_ms=T0, expiration_ms=DAY_MS)
    )
    walked_from = record_walk_starts(monkeypatch, again.log)
    again.make_follower(registration(leader=2, leader_epoch=4), NOW_MS)
    # Snapshot 2 is below the first segment holding a recent batch (4): the walk starts there.
    assert walked_from == [4]
    assert last_batches(again.producer_state) == {4: (0, 4, 4)}


# --- through the replica manager -------------------------------------------------------------


@pytest.mark.asyncio
async def test_an_elected_follower_answers_a_retry_as_a_duplicate_without_reading_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = ManualClock()
    a, b, image = two_nodes(tmp_path, clock)
    for sequence in range(3):
        await produce(a, idempotent(9, sequence))
    await replicate(b, a)
    assert b.log().log_end_offset == 3
    follower = b.rm.partition("t", 0)
    assert follower is not None and last_batches(follower.producer_state) == {9: (0, 2, 2)}
    walked_from = record_walk_starts(monkeypatch, follower.log)
    moved = replayed(image, PartitionChangeRecord(TID, 0, leader=2, isr=(2,)))
    for node in (a, b):
        node.rm.apply_image(moved)
    # The producer never heard back about sequence 2 and retries it on the new leader.
    answer = await produce(b, idempotent(9, 2))
    assert answer.error is None and answer.base_offset == 2
    assert b.log().log_end_offset == 3 and walked_from == []
    assert (await produce(b, idempotent(9, 3))).base_offset == 3
    # A clean stop leaves a snapshot at the LEO for the next start.
    await b.rm.stop()
    assert follower.producer_snapshots.offsets() == [4]


@pytest.mark.asyncio
async def test_a_starting_broker_loads_the_tables_before_its_replicas_take_roles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a crash a table is its last snapshot plus the headers after it: the broker's
    start-up reads them in its log-loading thread (`preload_producer_states`), so taking a role
    walks no log on the event loop, as Kafka loads producer state with its logs."""
    clock = ManualClock()
    a, _, image = two_nodes(tmp_path, clock)
    for sequence in range(3):
        await produce(a, idempotent(9, sequence))
    a.log_manager.shutdown()  # the replica manager never stopped: no snapshot at the LEO
    again = Node(tmp_path, 1, clock)
    walked_from = record_walk_starts(monkeypatch)
    again.rm.preload_producer_states()
    assert walked_from == [0]
    again.rm.apply_image(image)
    await again.rm.start()
    assert walked_from == [0]  # taking the lead read nothing
    leader = again.rm.partition("t", 0)
    assert leader is not None and last_batches(leader.producer_state) == {9: (0, 2, 2)}
    answer = await produce(again, idempotent(9, 2))  # a retry: the duplicate's offset
    assert answer.error is None and answer.base_offset == 2
    assert again.log().log_end_offset == 3
    await again.rm.stop()


@pytest.mark.asyncio
async def test_a_preloaded_table_is_not_used_once_its_log_moved(tmp_path: Path) -> None:
    clock = ManualClock()
    a, _, image = two_nodes(tmp_path, clock)
    await produce(a, idempotent(9, 0))
    a.log_manager.shutdown()
    again = Node(tmp_path, 1, clock)
    again.rm.preload_producer_states()
    # Something appended after the preload (only a replica may; here, by hand): stale.
    again.log().append_as_leader(idempotent(7, 0), leader_epoch=0)
    again.rm.apply_image(image)
    leader = again.rm.partition("t", 0)
    assert leader is not None and sorted(leader.producer_state.entries()) == [7, 9]
    await again.rm.start()
    await again.rm.stop()
