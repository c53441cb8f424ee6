"""Snapshot file names and the LeaderChange control batch."""

from __future__ import annotations

import pytest

from replog.quorum.raft import SnapshotId, parse_snapshot_file_name
from replog.quorum.raft.control_records import (
    LeaderChangeRecord,
    decode_leader_change,
    encode_leader_change,
    leader_change_batch,
)
from replog.record import RecordBatch


def test_snapshot_file_names_have_fixed_widths() -> None:
    name = SnapshotId(12345, 7).file_name()
    assert name == "00000000000000012345-0000000007.checkpoint"
    assert parse_snapshot_file_name(name) == SnapshotId(12345, 7)


@pytest.mark.parametrize(
    "name",
    [
        "00000000000000012345-0000000007.checkpoint.part",
        "00000000000000012345-0000000007.checkpoint.deleted",
        "0000000000000012345-0000000007.checkpoint",
        "00000000000000012345-000000007.checkpoint",
        "quorum-state",
    ],
)
def test_other_names_are_not_snapshots(name: str) -> None:
    assert parse_snapshot_file_name(name) is None


def test_the_documented_leader_change_value() -> None:
    _, value = encode_leader_change(LeaderChangeRecord(1, (1, 2, 3), (1, 2)))
    assert value.hex() == "00000000000100000003000000010000000200000003000000020000000100000002"


def test_leader_change_batch_is_a_stamped_control_batch() -> None:
    record = LeaderChangeRecord(2, (1, 2, 3), (2, 3))
    batch = RecordBatch.parse(
        leader_change_batch(record, base_offset=40, quorum_epoch=6, timestamp_ms=99)
    )
    assert (batch.base_offset, batch.partition_leader_epoch, batch.is_control) == (40, 6, True)
    (stored,) = batch.records()
    assert stored.key is not None and stored.value is not None
    assert decode_leader_change(stored.key, stored.value) == record


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        (b"\x00\x00\x00\x03", b"", "is not LeaderChange"),
        (b"\x00\x00\x00\x02", b"\x00\x01\x00\x00\x00\x01", "version 1 is not supported"),
        (b"\x00\x00\x00\x02", b"\x00\x00\x00\x00\x00\x01\x00\x00\x00\x05", "truncated"),
        (
            b"\x00\x00\x00\x02",
            encode_leader_change(LeaderChangeRecord(1, (), ()))[1] + b"x",
            "1 trailing bytes",
        ),
    ],
)
def test_malformed_leader_change_records(key: bytes, value: bytes, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        decode_leader_change(key, value)
