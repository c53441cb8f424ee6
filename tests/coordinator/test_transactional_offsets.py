"""Transactional offset commits in `__consumer_offsets`: staged per producer, applied on the
COMMIT marker as of their own record offsets, dropped on ABORT; require_stable's pending check."""

from __future__ import annotations

from test_offsets_cache import T0, commit_record, value

from replog.coordinator.offsets_cache import OffsetsCache, ReplayStats, replay_batches
from replog.coordinator.offsets_records import OffsetCommitKey
from replog.coordinator.transactional_offsets import PendingTransactionalOffsets
from replog.record.builder import build_batch
from replog.record.control_record import EndTxnMarker, encode_marker


def txn_batch(producer_id, base_offset, *records):
    return build_batch(
        list(records),
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )


def marker(producer_id, base_offset, aborted):
    key, val = encode_marker(EndTxnMarker(aborted, coordinator_epoch=1))
    return build_batch(
        [(T0, key, val, ())],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=0,
        is_transactional=True,
        is_control=True,
    )


def replay(*batches):
    cache, pending, stats = OffsetsCache(), PendingTransactionalOffsets(), ReplayStats()
    replay_batches(cache, b"".join(batches), stats, "__consumer_offsets-3", pending=pending)
    return cache, pending, stats


def test_a_committed_transaction_applies_its_offsets_at_the_marker():
    cache, pending, _ = replay(
        txn_batch(5, 0, commit_record("g", "t", 0, 10)),
    )
    assert cache.committed("g") == {} and pending.pending("g", "t", 0)
    cache, pending, _ = replay(
        txn_batch(5, 0, commit_record("g", "t", 0, 10)),
        marker(5, 1, aborted=False),
    )
    assert cache.committed("g") == {("t", 0): value(10)} and not pending.pending("g", "t", 0)


def test_an_aborted_transaction_leaves_the_committed_offset():
    cache, pending, _ = replay(
        build_batch([commit_record("g", "t", 0, 3)]),
        txn_batch(5, 1, commit_record("g", "t", 0, 10)),
        marker(5, 2, aborted=True),
    )
    assert cache.committed("g") == {("t", 0): value(3)} and pending.producers() == []


def test_a_plain_commit_written_after_the_transactional_one_wins():
    cache, _, _ = replay(
        txn_batch(5, 0, commit_record("g", "t", 0, 10)),
        build_batch([commit_record("g", "t", 0, 20)], base_offset=1),
        marker(5, 2, aborted=False),
    )
    assert cache.committed("g") == {("t", 0): value(20)}


def test_a_transactional_commit_written_after_a_plain_one_wins():
    cache, _, _ = replay(
        build_batch([commit_record("g", "t", 0, 20)]),
        txn_batch(5, 1, commit_record("g", "t", 0, 10)),
        marker(5, 2, aborted=False),
    )
    assert cache.committed("g") == {("t", 0): value(10)}


def test_two_producers_are_kept_apart():
    pending = PendingTransactionalOffsets()
    key = OffsetCommitKey("g", "t", 0)
    pending.stage(5, key, value(1), 0)
    pending.stage(6, key, value(2), 1)
    assert [s.value for s in pending.end(5, commit=True)] == [value(1)]
    assert pending.pending("g", "t", 0)  # producer 6 still holds it
    assert pending.end(6, commit=False) == [] and not pending.pending("g", "t", 0)
    assert pending.end(7, commit=True) == []


def test_a_corrupt_marker_is_skipped_and_named():
    bad = build_batch(
        [(T0, b"\x00\x00\x00\x09", b"\x00\x00", ())],
        base_offset=1,
        producer_id=5,
        producer_epoch=0,
        is_transactional=True,
        is_control=True,
    )
    cache, pending, stats = replay(txn_batch(5, 0, commit_record("g", "t", 0, 10)), bad)
    assert pending.pending("g", "t", 0) and cache.committed("g") == {}
    assert any("offset 1" in r and "no COMMIT or ABORT" in r for r in stats.reasons)
