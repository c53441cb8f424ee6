"""The aborted transaction index files of a log's segments (`<base>.txnindex`,
`transaction_index`): an entry goes to the segment holding its marker, in Kafka's bytes; a
read_committed fetch collects the overlapping entries over segments; truncation, deletion and
recovery keep the files true to the segments."""

from __future__ import annotations

from pathlib import Path

import pytest
from storage_helpers import append_batches, open_log, small_config

from replog.errors import CorruptIndexError
from replog.record import build_batch
from replog.record.control_record import EndTxnMarker, encode_marker
from replog.storage.aborted_transactions import AbortedTransaction, encode
from replog.storage.log import Log
from replog.testing import ManualClock

T0 = 1_700_000_000_000
CONFIG = small_config(segment_bytes=400)  # a few 1-record batches per segment


def txn_index(directory: Path, base: int) -> Path:
    return directory / f"{base:020d}.txnindex"


def log_of_segments(directory: Path) -> Log:
    log = open_log(directory, CONFIG, clock=ManualClock(T0))
    append_batches(log, 12)
    assert len(log.segments()) >= 3
    return log


def test_entries_go_to_the_segment_holding_the_marker_in_kafkas_format(tmp_path: Path) -> None:
    log = log_of_segments(tmp_path / "t-0")
    first, second, third = (s.base_offset for s in log.segments()[:3])
    early = AbortedTransaction(7, first, first + 1, first + 2)
    late = [
        AbortedTransaction(8, first, third, third + 1),
        AbortedTransaction(9, third, third + 1, third + 2),
    ]
    log.append_aborted_transactions([early, *late])
    assert txn_index(log_dir := tmp_path / "t-0", first).read_bytes() == encode([early])
    assert not txn_index(log_dir, second).exists()  # no marker there: no file, as in Kafka
    assert txn_index(log_dir, third).read_bytes() == encode(late)
    # 34 bytes each: version 0, producer id, first, last and last stable offsets, big-endian.
    assert encode([early]).hex() == (
        "0000" + "0000000000000007" + f"{first:016x}{first + 1:016x}{first + 2:016x}"
    )


def test_a_fetch_collects_overlapping_entries_until_one_bounds_the_search(
    tmp_path: Path,
) -> None:
    log = log_of_segments(tmp_path / "t-0")
    first, second, third = (s.base_offset for s in log.segments()[:3])
    a = AbortedTransaction(7, first, first + 1, third + 5)  # its LSO bounds every later search
    b = AbortedTransaction(8, first, third, third + 1)
    log.append_aborted_transactions([a, b])
    assert log.collect_aborted_transactions(first, third) == [a]  # the search ends at `a`
    assert log.collect_aborted_transactions(second, third + 1) == [b]  # `a` ended before
    # Kept across a clean close: the file is the index.
    log.close()
    reopened = open_log(tmp_path / "t-0", CONFIG, clock=ManualClock(T0))
    assert reopened.collect_aborted_transactions(second, third + 1) == [b]


def test_truncation_and_deletion_take_the_entries_with_them(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = log_of_segments(directory)
    first, _, third = (s.base_offset for s in log.segments()[:3])
    kept = AbortedTransaction(7, third, third, third + 1)
    cut = AbortedTransaction(8, third, third + 1, third + 2)
    log.append_aborted_transactions([kept, cut])
    log.truncate_to(third + 1)  # the second marker is gone
    assert txn_index(directory, third).read_bytes() == encode([kept])
    assert log.collect_aborted_transactions(first, third + 1) == [kept]
    log.truncate_to(third)
    assert not txn_index(directory, third).exists()
    log.append_aborted_transactions([AbortedTransaction(9, first, first, first + 1)])
    log.truncate_fully_and_start_at(1000)
    assert not list(directory.glob("*.txnindex"))


def abort_marker(producer_id: int) -> bytes:
    key, value = encode_marker(EndTxnMarker(aborted=True, coordinator_epoch=0))
    return build_batch(
        [(T0, key, value, ())],
        producer_id=producer_id,
        producer_epoch=0,
        is_transactional=True,
        is_control=True,
    )


def test_recovery_empties_the_rescanned_segments_indexes_until_a_replay_rewrites_them(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "t-0"
    log = log_of_segments(directory)
    first = log.segments()[0].base_offset
    marker = log.append_as_leader(abort_marker(8), 0, allow_control=True).first_offset
    last = log.segments()[-1].base_offset
    old = AbortedTransaction(7, first, first + 1, first + 2)
    new = AbortedTransaction(8, last, marker, marker + 1)
    log.append_aborted_transactions([old, new])
    assert log.txn_index_rebuild_from is None
    log.close_without_flush()  # a crash: the active segment, at least, is rescanned

    recovered = open_log(directory, CONFIG, clock=ManualClock(T0))
    start = recovered.txn_index_rebuild_from
    assert start is not None and first <= start <= last
    assert not txn_index(directory, last).exists()
    # A segment below the rescan keeps its index: it was flushed with it.
    assert txn_index(directory, first).exists() == (first < start)
    recovered.rebuild_aborted_transactions(start, [old, new])
    assert recovered.txn_index_rebuild_from is None
    assert txn_index(directory, last).read_bytes() == encode([new])
    assert txn_index(directory, first).read_bytes() == encode([old])


def test_a_rescan_without_a_marker_asks_for_no_rebuild(tmp_path: Path) -> None:
    log = log_of_segments(tmp_path / "t-0")
    log.close_without_flush()
    assert open_log(tmp_path / "t-0", CONFIG, clock=ManualClock(T0)).txn_index_rebuild_from is None


def test_a_damaged_index_is_an_error_naming_its_file(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = log_of_segments(directory)
    first = log.segments()[0].base_offset
    txn_index(directory, first).write_bytes(encode([AbortedTransaction(7, 0, 1, 2)])[:-1])
    with pytest.raises(CorruptIndexError, match=r"00000000000000000000\.txnindex.*34-byte"):
        log.collect_aborted_transactions(first, log.log_end_offset)
