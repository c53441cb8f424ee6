"""What leader and follower appends accept and reject; a rejected append changes nothing
(docs/design/storage.md#leader-validation-on-produce; issue #2, item 8)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from crc32c import crc32c
from storage_helpers import (
    T0,
    append_batches,
    dir_contents,
    epoch_pairs,
    files_with_suffix,
    make_batch,
    open_log,
    read_all,
    small_config,
    split_batches,
)

from replog.errors import (
    CorruptRecordError,
    FencedLeaderEpochError,
    InvalidRecordError,
    MessageSizeTooLargeError,
    OffsetsOutOfOrderError,
    RecordBatchTooLargeError,
    ReplogError,
    UnexpectedAppendOffsetError,
)
from replog.record import RecordBatch, read_header
from replog.storage import Log
from replog.testing import ManualClock


def leader_batch(base_offset: int, count: int, epoch: int, tag: int = 0) -> bytes:
    """A batch as a leader wrote it: offsets and leader epoch already stamped."""
    return make_batch(count, base_offset=base_offset, partition_leader_epoch=epoch, tag=tag)


def follower_chain(start: int, counts: list[int], epochs: list[int]) -> list[bytes]:
    batches = []
    offset = start
    for i, (count, epoch) in enumerate(zip(counts, epochs, strict=True)):
        batches.append(leader_batch(offset, count, epoch, tag=i))
        offset += count
    return batches


def assert_rejected_unchanged(
    log: Log, error: type[ReplogError], append: Callable[[], object]
) -> None:
    """`append` raises `error` and leaves the files, offsets and epoch cache as they were."""
    log.flush()
    files_before = dir_contents(log.directory)
    state_before = (log.log_start_offset, log.log_end_offset, log.high_watermark, epoch_pairs(log))
    batches_before = read_all(log)
    with pytest.raises(error, match=log.name):
        append()
    assert (
        log.log_start_offset,
        log.log_end_offset,
        log.high_watermark,
        epoch_pairs(log),
    ) == state_before
    assert read_all(log) == batches_before
    log.flush()
    assert dir_contents(log.directory) == files_before


def corrupt_records(batch: bytes) -> bytes:
    edited = bytearray(batch)
    edited[-3] ^= 0x40  # inside the records: CRC-covered
    return bytes(edited)


def claiming(records: int, *, compressed: bool = False) -> bytes:
    """A one-record batch whose header claims `records` records (count and last offset delta
    agree, the CRC is right): only the records region could tell."""
    edited = bytearray(make_batch(1))
    struct.pack_into(">i", edited, 23, records - 1)  # last_offset_delta
    struct.pack_into(">i", edited, 57, records)  # records_count
    if compressed:
        edited[22] |= 1  # gzip in the attributes' low byte: the region is not decoded
    struct.pack_into(">I", edited, 17, crc32c(bytes(edited[21:])))
    return bytes(edited)


def with_magic(batch: bytes, magic: int) -> bytes:
    edited = bytearray(batch)
    edited[16] = magic  # not CRC-covered, so only the magic check can catch it
    return bytes(edited)


@pytest.fixture
def log(tmp_path: Path) -> Log:
    log = open_log(
        tmp_path / "orders-0", small_config(max_message_bytes=1000), clock=ManualClock(T0)
    )
    append_batches(log, 5, epoch=2)
    return log


@pytest.mark.parametrize(
    ("make", "error"),
    [
        pytest.param(
            lambda: make_batch(2, base_offset=7), InvalidRecordError, id="base-offset-not-0"
        ),
        pytest.param(lambda: make_batch(is_control=True), InvalidRecordError, id="control-batch"),
        pytest.param(lambda: corrupt_records(make_batch(3)), CorruptRecordError, id="bad-crc"),
        pytest.param(lambda: with_magic(make_batch(), 1), CorruptRecordError, id="magic-1"),
        pytest.param(lambda: with_magic(make_batch(), 3), CorruptRecordError, id="magic-3"),
        pytest.param(lambda: make_batch(2)[:-5], CorruptRecordError, id="truncated"),
        pytest.param(lambda: b"", InvalidRecordError, id="empty"),
        pytest.param(
            lambda: make_batch(producer_id=42, producer_epoch=0, base_sequence=-1),
            InvalidRecordError,
            id="idempotent-without-sequence",
        ),
        pytest.param(
            lambda: make_batch(value_size=1000),
            MessageSizeTooLargeError,
            id="over-max-message-bytes",
        ),
        pytest.param(
            lambda: b"".join(make_batch(5, value_size=150, tag=i) for i in range(6)),
            RecordBatchTooLargeError,
            id="append-over-segment-bytes",
        ),
        pytest.param(
            lambda: make_batch(tag=1) + make_batch(base_offset=1, tag=2),
            InvalidRecordError,
            id="second-batch-bad",
        ),
        pytest.param(lambda: claiming(1000), InvalidRecordError, id="more-records-than-bytes"),
        pytest.param(
            lambda: claiming(2**30 + 1, compressed=True) * 2,
            InvalidRecordError,
            id="more-offsets-than-a-segment-holds",
        ),
    ],
)
def test_bad_leader_appends_are_rejected_and_change_nothing(
    log: Log, make: Callable[[], bytes], error: type[ReplogError]
) -> None:
    assert_rejected_unchanged(log, error, lambda: log.append_as_leader(make(), 2))
    # The log still works afterwards.
    assert log.append_as_leader(make_batch(), 2).first_offset == 5


def test_a_batch_larger_than_a_segment_is_record_batch_too_large(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-1", small_config(segment_bytes=1024, max_message_bytes=1 << 20))
    assert_rejected_unchanged(
        log, RecordBatchTooLargeError, lambda: log.append_as_leader(make_batch(value_size=1100), 0)
    )


def test_an_older_leader_epoch_is_fenced(log: Log) -> None:
    log.append_as_leader(make_batch(), 5)
    assert_rejected_unchanged(
        log, FencedLeaderEpochError, lambda: log.append_as_leader(make_batch(), 4)
    )
    assert log.append_as_leader(make_batch(), 5).first_offset == 6
    assert epoch_pairs(log) == [(2, 0), (5, 5)]


def test_control_batches_are_accepted_when_allowed(log: Log) -> None:
    info = log.append_as_leader(make_batch(is_control=True), 2, allow_control=True)
    assert read_header(log.read(info.first_offset, 100)).is_control


def test_several_batches_in_one_append_get_consecutive_offsets(log: Log) -> None:
    info = log.append_as_leader(make_batch(3, tag=1) + make_batch(2, tag=2), 2)
    assert (info.first_offset, info.last_offset) == (5, 9)
    assert [h.base_offset for h in info.batches] == [5, 8]


def test_log_append_time_stamps_the_clock_and_recomputes_the_crc(tmp_path: Path) -> None:
    clock = ManualClock(T0 + 777_000)
    log = open_log(
        tmp_path / "t-0", small_config(message_timestamp_type="LogAppendTime"), clock=clock
    )
    client = make_batch(3, timestamp=T0)
    info = log.append_as_leader(client, 1)
    assert info.log_append_time_ms == clock.now_ms
    assert info.max_timestamp == clock.now_ms

    (segment_file,) = files_with_suffix(log.directory, ".log")
    on_disk = RecordBatch.parse(segment_file.read_bytes())  # raises if the CRC were stale
    assert on_disk.is_log_append_time
    assert on_disk.attributes & 0x08
    assert on_disk.max_timestamp == clock.now_ms
    assert on_disk.base_timestamp == T0  # left alone, as Kafka does
    assert on_disk.crc != RecordBatch.parse(client).crc
    assert [r.timestamp for r in on_disk.records()] == [clock.now_ms] * 3


# --- follower appends ----------------------------------------------------------------------------


@pytest.fixture
def follower(tmp_path: Path) -> Log:
    return open_log(
        tmp_path / "orders-1",
        small_config(segment_bytes=2048, max_message_bytes=100),
        clock=ManualClock(T0),
    )


def test_follower_appends_write_the_leaders_bytes_verbatim(follower: Log) -> None:
    counts = [3, 1, 4, 1, 5, 9, 2, 6] * 3
    epochs = [0, 0, 1, 1, 1, 1, 4, 4] + [4] * 8 + [6] * 8
    batches = follower_chain(0, counts, epochs)
    for chunk in (batches[:8], batches[8:16], batches[16:]):
        info = follower.append_as_follower(b"".join(chunk))
        assert info.first_offset == read_header(chunk[0]).base_offset
        assert info.last_offset == read_header(chunk[-1]).last_offset
    assert follower.log_end_offset == sum(counts)
    assert read_all(follower) == batches
    firsts: dict[int, int] = {}
    for batch in batches:
        firsts.setdefault(read_header(batch).partition_leader_epoch, read_header(batch).base_offset)
    assert epoch_pairs(follower) == sorted(firsts.items()) == [(0, 0), (1, 4), (4, 23), (6, 62)]
    assert follower.segment_count > 1
    data = b"".join(p.read_bytes() for p in files_with_suffix(follower.directory, ".log"))
    assert split_batches(data) == batches  # larger than max.message.bytes: no size limit


def test_follower_append_records_every_epoch_in_the_cache(follower: Log) -> None:
    batches = follower_chain(0, [2, 2, 2, 2, 2], [1, 1, 3, 3, 7])
    for batch in batches:
        follower.append_as_follower(batch)
    assert epoch_pairs(follower) == [(1, 0), (3, 4), (7, 8)]
    assert follower.log_end_offset == 10
    assert read_all(follower) == batches


@pytest.mark.parametrize("first", [3, 5, 100], ids=["overlap", "gap", "far-gap"])
def test_follower_append_not_at_the_log_end_is_unexpected(follower: Log, first: int) -> None:
    follower.append_as_follower(b"".join(follower_chain(0, [2, 2], [0, 0])))
    assert_rejected_unchanged(
        follower,
        UnexpectedAppendOffsetError,
        lambda: follower.append_as_follower(leader_batch(first, 2, 0)),
    )


@pytest.mark.parametrize(
    "chain",
    [
        pytest.param([(0, 2), (3, 2)], id="gap-between-batches"),
        pytest.param([(0, 2), (1, 2)], id="overlap-between-batches"),
        pytest.param([(0, 2), (0, 2)], id="repeated-batch"),
    ],
)
def test_follower_batches_must_be_contiguous(follower: Log, chain: list[tuple[int, int]]) -> None:
    data = b"".join(leader_batch(base, count, 0, tag=i) for i, (base, count) in enumerate(chain))
    assert_rejected_unchanged(
        follower, OffsetsOutOfOrderError, lambda: follower.append_as_follower(data)
    )


def test_follower_rejects_corrupt_batches_and_falling_epochs(follower: Log) -> None:
    follower.append_as_follower(leader_batch(0, 2, 3))
    assert_rejected_unchanged(
        follower,
        CorruptRecordError,
        lambda: follower.append_as_follower(corrupt_records(leader_batch(2, 2, 3))),
    )
    falling = leader_batch(2, 2, 3, tag=1) + leader_batch(4, 1, 2, tag=2)
    assert_rejected_unchanged(
        follower, InvalidRecordError, lambda: follower.append_as_follower(falling)
    )


def test_follower_rejects_epochs_after_the_sending_leaders(follower: Log) -> None:
    # The epoch field is outside the CRC: a flipped bit there passes every other check.
    follower.append_as_follower(leader_batch(0, 2, 3), leader_epoch=3)
    later = leader_batch(2, 2, 3, tag=1) + leader_batch(4, 1, 4 | 1 << 20, tag=2)
    assert_rejected_unchanged(
        follower,
        InvalidRecordError,
        lambda: follower.append_as_follower(later, leader_epoch=4),
    )
    assert epoch_pairs(follower) == [(3, 0)]
    # Up to the leader's own epoch is the leader's log: accepted, as without a bound.
    follower.append_as_follower(leader_batch(2, 2, 3) + leader_batch(4, 1, 4), leader_epoch=4)
    assert epoch_pairs(follower) == [(3, 0), (4, 4)]


def test_follower_restarts_at_a_batch_straddling_its_empty_log_start(follower: Log) -> None:
    # DeleteRecords moved the leader's log start to 15, inside the batch holding 10-19.
    follower.truncate_fully_and_start_at(15)
    assert (follower.log_start_offset, follower.log_end_offset) == (15, 15)
    batch = leader_batch(10, 10, 4)
    info = follower.append_as_follower(batch)
    assert (info.first_offset, info.last_offset) == (10, 19)
    assert (follower.log_start_offset, follower.log_end_offset) == (10, 20)
    assert read_all(follower) == [batch]
    assert epoch_pairs(follower) == [(4, 10)]
    assert [p.name for p in files_with_suffix(follower.directory, ".log")] == [f"{10:020d}.log"]


def test_the_straddling_exception_needs_an_empty_log_and_a_straddling_batch(follower: Log) -> None:
    follower.truncate_fully_and_start_at(15)
    # Ends below the log start: not straddling.
    assert_rejected_unchanged(
        follower,
        UnexpectedAppendOffsetError,
        lambda: follower.append_as_follower(leader_batch(5, 10, 4)),
    )
    follower.append_as_follower(leader_batch(15, 2, 4))
    # Not empty any more: an overlapping batch is an error even if it covers the log end.
    assert_rejected_unchanged(
        follower,
        UnexpectedAppendOffsetError,
        lambda: follower.append_as_follower(leader_batch(16, 3, 4)),
    )


def test_follower_batch_header_fields_are_not_rewritten(follower: Log) -> None:
    batch = make_batch(
        2,
        base_offset=0,
        partition_leader_epoch=9,
        producer_id=77,
        producer_epoch=1,
        base_sequence=5,
    )
    follower.append_as_follower(batch)
    (segment_file,) = files_with_suffix(follower.directory, ".log")
    assert segment_file.read_bytes() == batch
    assert struct.unpack_from(">i", batch, 12)[0] == 9
