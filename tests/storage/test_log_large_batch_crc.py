"""Large leader appends check their CRC-32C on a worker thread while the bytes are written.

The rule they must still keep: a rejected append leaves the log unchanged (offsets, bytes on
disk, leader epochs), and nothing becomes visible before the check passes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from storage_helpers import dir_contents, epoch_pairs, open_log

from replog.errors import CorruptRecordError, InvalidRecordError
from replog.record import RecordBatch, build_batch
from replog.storage import LogConfig, large_batch_crc
from replog.storage.large_batch_crc import OVERLAPPED_CRC_BYTES_MIN
from replog.storage.memory_fs import MemoryFileSystem

RECORD = b"v" * 1000


def large_batch(records: int = 400) -> bytes:
    batch = build_batch([(1_700_000_000_000 + i, None, RECORD, ()) for i in range(records)])
    assert len(batch) >= OVERLAPPED_CRC_BYTES_MIN
    return batch


def test_a_large_batch_is_appended_and_reads_back(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig())
    small = build_batch([(1, None, b"x", ())])
    log.append_as_leader(small, leader_epoch=3)
    info = log.append_as_leader(large_batch(), leader_epoch=4)
    assert (info.first_offset, info.last_offset) == (1, 400)
    assert epoch_pairs(log) == [(3, 0), (4, 1)]
    batch = RecordBatch.parse(log.read(1, 2 << 20))
    assert (batch.header.base_offset, batch.header.partition_leader_epoch) == (1, 4)
    assert [r.offset for r in batch.records()] == list(range(1, 401))


@pytest.mark.parametrize(
    ("position", "error"),
    [
        (2000, CorruptRecordError),  # inside the records: the CRC fails
        (58, CorruptRecordError),  # records_count is CRC-covered too: corruption first
    ],
)
@pytest.mark.parametrize(
    "first_timestamp",
    [
        1_700_000_000_000,  # same time as the large batch: written while its CRC is checked
        1,  # segment.ms older than the large batch, which must roll: checked before the roll
    ],
)
def test_a_rejected_large_batch_leaves_the_log_unchanged(
    tmp_path: Path, position: int, error: type[Exception], first_timestamp: int
) -> None:
    directory = tmp_path / "t-0"
    log = open_log(directory, LogConfig())
    log.append_as_leader(build_batch([(first_timestamp, None, b"x", ())]), leader_epoch=3)
    log.flush()
    before = dir_contents(directory)
    bad = bytearray(large_batch())
    bad[position] ^= 0x40
    with pytest.raises(error, match=r"t-0 append, batch 0 at byte 0: CRC-32C mismatch"):
        log.append_as_leader(bytes(bad), leader_epoch=4)
    assert log.log_end_offset == 1
    assert epoch_pairs(log) == [(3, 0)]  # the new leader epoch was not recorded
    log.flush()
    assert dir_contents(directory) == before
    assert log.append_as_leader(large_batch(), leader_epoch=4).first_offset == 1


def test_a_count_that_does_not_match_is_an_invalid_record(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig())
    # A batch whose header is self-consistent for the CRC but whose count is wrong can only be
    # built by recomputing the CRC, as a buggy client would.
    from replog.record.header import compute_crc

    bad = bytearray(large_batch())
    bad[57:61] = (399).to_bytes(4, "big")
    bad[17:21] = compute_crc(bad, 0, len(bad)).to_bytes(4, "big")
    with pytest.raises(InvalidRecordError, match="records_count 399"):
        log.append_as_leader(bytes(bad), leader_epoch=0)
    assert log.log_end_offset == 0


def test_more_records_than_the_bytes_hold_is_an_invalid_record_after_the_crc(
    tmp_path: Path,
) -> None:
    log = open_log(tmp_path / "t-0", LogConfig())
    from replog.record.header import compute_crc

    bad = bytearray(large_batch())  # 400 records of about 1 KB
    claimed = 100_000  # at 7 bytes each, more than the batch's 400 KB hold
    bad[23:27] = (claimed - 1).to_bytes(4, "big")  # last_offset_delta
    bad[57:61] = claimed.to_bytes(4, "big")  # records_count
    bad[17:21] = compute_crc(bad, 0, len(bad)).to_bytes(4, "big")
    with pytest.raises(InvalidRecordError, match="claims 100000 records"):
        log.append_as_leader(bytes(bad), leader_epoch=0)
    assert log.log_end_offset == 0
    assert log.append_as_leader(large_batch(), leader_epoch=0).first_offset == 0


def test_on_an_in_memory_disk_the_crc_is_checked_inline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_threads(*args: object, **kwargs: object) -> None:
        raise AssertionError("a log on an in-memory disk started a CRC thread")

    monkeypatch.setattr(large_batch_crc, "ThreadPoolExecutor", no_threads)
    monkeypatch.setattr(large_batch_crc, "_crc_pool", None)
    log = open_log("/t-0", LogConfig(), fs=MemoryFileSystem())
    assert log.append_as_leader(large_batch(), leader_epoch=4).last_offset == 399
    bad = bytearray(large_batch())
    bad[2000] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(bytes(bad), leader_epoch=4)
    assert log.log_end_offset == 400
