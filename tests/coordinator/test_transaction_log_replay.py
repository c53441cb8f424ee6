"""Loading `__transaction_state`: the coordinator's view equals the driver's after any run, the
last record wins, tombstones remove, corrupt records are named, Kafka's partition rule."""

from __future__ import annotations

import pytest
from txn_coordinator_driver import Driver, add, end, init

from replog.coordinator.transaction_log_replay import (
    partition_for_transactional_id,
    replay,
    unfinished,
)
from replog.coordinator.transaction_metadata import TxnState
from replog.coordinator.transaction_records import encode_key, encode_value, value_version
from replog.errors import CorruptRecordError


def _records(d: Driver, version: int):
    return [
        (offset, encode_key(r.transactional_id), encode_value(r, value_version(version)))
        for offset, r in enumerate(d.log)
    ]


@pytest.mark.parametrize("version", [0, 2])
def test_a_new_coordinator_loads_what_the_old_one_committed(version):
    d = Driver()
    pid = init(d, version=version).producer_id
    add(d, pid, 0, version=version)
    epoch = d.meta.producer_epoch
    end(d, pid, epoch, True, version=version, write_markers=False)  # fails before the markers
    loaded = replay(_records(d, version))
    (meta,) = loaded.values()
    assert (meta.state, meta.producer_id, meta.producer_epoch) == (
        TxnState.PREPARE_COMMIT,
        pid,
        d.meta.producer_epoch,
    )
    assert meta.partitions == d.meta.partitions
    assert unfinished(loaded) == [meta]  # its markers are written again


def test_the_last_record_wins_and_a_tombstone_removes():
    d = Driver()
    init(d)
    init(d)
    key = encode_key(d.tid)
    records = [(i, key, encode_value(r, 1)) for i, r in enumerate(d.log)]
    assert replay(records)[d.tid].producer_epoch == 1
    assert replay([*records, (len(records), key, None)]) == {}


def test_a_corrupt_record_names_its_offset():
    with pytest.raises(CorruptRecordError, match="offset 41"):
        replay([(41, encode_key("t"), b"\x00\x09")])


@pytest.mark.parametrize(("tid", "partition"), [("hello", 22), ("polygenelubricants", 0)])
def test_kafkas_partition_rule(tid, partition):
    assert partition_for_transactional_id(tid, 50) == partition
