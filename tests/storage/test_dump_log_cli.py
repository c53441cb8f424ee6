"""`replog dump-log`: batches, records, damage and index entries of segment files (issue #2, item
7)."""

from __future__ import annotations

import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from storage_helpers import (
    T0,
    append_batches,
    files_with_suffix,
    flip_byte,
    index_file_entries,
    open_log,
    small_config,
)

from replog.cli.main import main
from replog.record import RECORD_BATCH_OVERHEAD, build_batch, read_header
from replog.record.control_record import EndTxnMarker, encode_marker
from replog.replication.producer_snapshot import encode_producer_snapshot
from replog.replication.producer_state import BatchMetadata, ProducerEntry
from replog.storage.aborted_transactions import AbortedTransaction
from replog.testing import ManualClock

BATCH_LINE = re.compile(
    r"baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .*partitionLeaderEpoch: (-?\d+) "
    r".*position: (\d+) CreateTime: (\d+) size: (\d+) magic: 2 compresscodec: none "
    r"crcValid: (true|false)"
)


@pytest.fixture
def segment(tmp_path: Path) -> tuple[Path, list[bytes]]:
    log = open_log(
        tmp_path / "orders-0",
        small_config(segment_bytes=1 << 20, index_interval_bytes=100),
        clock=ManualClock(T0),
    )
    batches = append_batches(log, 6, epoch=3, records=[2, 1, 3], timestamp_step=10)
    log.close()
    (path,) = files_with_suffix(tmp_path / "orders-0", ".log")
    return path, batches


def dump(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    code = main(["dump-log", *args])
    return code, capsys.readouterr().out.splitlines()


def test_each_batch_is_printed_with_position_offsets_count_epoch_and_crc(
    segment: tuple[Path, list[bytes]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, batches = segment
    code, lines = dump(capsys, str(path))
    assert code == 0
    assert lines[0] == f"Dumping {path}"
    found = [BATCH_LINE.search(line) for line in lines[1:]]
    assert all(found) and len(found) == len(batches)
    position = 0
    for match, batch in zip(found, batches, strict=True):
        assert match is not None
        header = read_header(batch)
        assert match.groups() == (
            str(header.base_offset),
            str(header.last_offset),
            str(header.records_count),
            "3",
            str(position),
            str(header.max_timestamp),
            str(len(batch)),
            "true",
        )
        position += len(batch)


def test_print_data_prints_every_record(
    segment: tuple[Path, list[bytes]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, batches = segment
    code, lines = dump(capsys, str(path), "--print-data")
    assert code == 0
    records = [line for line in lines if line.startswith("| offset:")]
    assert len(records) == sum(read_header(b).records_count for b in batches) == 12
    assert records[0].startswith(f"| offset: 0 CreateTime: {T0} keySize: 2 valueSize: 40 ")
    assert "key: k0 payload: 0:0:vvv" in records[0]
    assert records[2].startswith(f"| offset: 2 CreateTime: {T0 + 10} ")
    # Records follow their batch line.
    assert BATCH_LINE.search(lines[1]) and lines[2].startswith("| offset: 0 ")


def test_a_corrupt_batch_is_reported_with_crc_valid_false_and_exit_code_1(
    segment: tuple[Path, list[bytes]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, batches = segment
    second = len(batches[0])
    flip_byte(path, second + RECORD_BATCH_OVERHEAD + 2)
    code, lines = dump(capsys, str(path), "--print-data")
    assert code == 1
    verdicts = [m.group(8) for m in map(BATCH_LINE.search, lines) if m]
    assert verdicts == ["true", "false", "true", "true", "true", "true"]
    assert any("damaged" in line for line in lines)
    assert not any(line.startswith("| offset: 2 ") for line in lines)  # no records of a bad batch


def test_a_torn_tail_is_reported(
    segment: tuple[Path, list[bytes]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, batches = segment
    path.write_bytes(path.read_bytes()[:-7])
    code, lines = dump(capsys, str(path))
    assert code == 1
    assert sum(1 for line in lines if BATCH_LINE.search(line)) == len(batches) - 1
    assert "partial batch" in lines[-1]
    assert str(sum(len(b) for b in batches[:-1])) in lines[-1]


def test_index_files_are_dumped_with_absolute_offsets(
    segment: tuple[Path, list[bytes]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = segment
    index = path.with_suffix(".index")
    entries = index_file_entries(index, ">ii")
    assert entries
    code, lines = dump(capsys, str(index))
    assert code == 0
    assert lines[1:] == [f"offset: {o} position: {p}" for o, p in entries]  # base offset 0
    timeindex = path.with_suffix(".timeindex")
    code, lines = dump(capsys, str(timeindex))
    assert code == 0
    assert lines[1:] == [
        f"timestamp: {t} offset: {o}" for t, o in index_file_entries(timeindex, ">qi")
    ]


def test_a_damaged_index_file_is_reported(
    segment: tuple[Path, list[bytes]], capsys: pytest.CaptureFixture[str]
) -> None:
    index = segment[0].with_suffix(".index")
    index.write_bytes(index.read_bytes() + b"\x00\x01\x02")
    code, lines = dump(capsys, str(index))
    assert code == 1
    assert any("not a multiple of 8" in line for line in lines)


def test_an_unknown_file_kind_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    assert main(["dump-log", str(other)]) == 1
    assert "notes.txt" in capsys.readouterr().err
    assert main(["dump-log", str(tmp_path / "missing.log")]) == 1
    assert "missing.log" in capsys.readouterr().err


def test_a_producer_snapshot_prints_each_producer_or_what_is_wrong(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "00000000000000000042.snapshot"
    path.write_bytes(
        encode_producer_snapshot(
            [
                ProducerEntry(9, 2, (BatchMetadata(10, 14, 37, 41, T0),), T0, 40, 3),
                ProducerEntry(4, 0, (), T0 + 1),
            ]
        )
    )
    code, lines = dump(capsys, str(path))
    assert code == 0
    assert lines[1:] == [
        "producerId: 9 producerEpoch: 2 coordinatorEpoch: 3 currentTxnFirstOffset: 40 "
        f"lastTimestamp: {T0} firstSequence: 10 lastSequence: 14 firstOffset: 37 lastOffset: 41",
        "producerId: 4 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: -1 "
        f"lastTimestamp: {T0 + 1} no data batch",
    ]
    path.write_bytes(path.read_bytes()[:-1])
    code, lines = dump(capsys, str(path))
    assert code == 1 and "does not match the stored" in lines[1]


def test_markers_and_the_aborted_transaction_index_print_as_kafkas_dump_prints_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = open_log(tmp_path / "orders-0", small_config(), clock=ManualClock(T0))
    data = build_batch(
        [(T0, b"k", b"v", ())],
        producer_id=7,
        producer_epoch=1,
        base_sequence=0,
        is_transactional=True,
    )
    log.append_as_leader(data, 0)
    key, value = encode_marker(EndTxnMarker(aborted=True, coordinator_epoch=5))
    control = build_batch(
        [(T0, key, value, ())],
        producer_id=7,
        producer_epoch=1,
        is_transactional=True,
        is_control=True,
    )
    log.append_as_leader(control, 0, allow_control=True)
    log.append_aborted_transactions([AbortedTransaction(7, 0, 1, 2)])
    log.close()
    directory = tmp_path / "orders-0"
    (path,) = files_with_suffix(directory, ".log")
    code, lines = dump(capsys, str(path), "--print-data")
    assert code == 0
    assert "isTransactional: true isControl: true" in lines[3]
    assert lines[4] == (
        f"| offset: 1 CreateTime: {T0} keySize: 4 valueSize: 6 headerKeys: [] "
        "endTxnMarker: ABORT coordinatorEpoch: 5"
    )
    (index,) = files_with_suffix(directory, ".txnindex")
    code, lines = dump(capsys, str(index))
    assert (code, lines[1:]) == (
        0,
        ["version: 0 producerId: 7 firstOffset: 0 lastOffset: 1 lastStableOffset: 2"],
    )
    index.write_bytes(index.read_bytes()[:-1])
    code, lines = dump(capsys, str(index))
    assert code == 1 and "not a whole number of 34-byte entries" in lines[1]


def test_a_reader_that_stops_early_ends_the_dump_quietly(
    segment: tuple[Path, list[bytes]],
) -> None:
    """`replog dump-log ... | head -1`: no "[Errno 32] Broken pipe" line, exit code
    141 as a tool killed by SIGPIPE."""
    path, _ = segment
    command = [sys.executable, "-m", "replog.cli.main", "dump-log", "--print-data"]
    process = subprocess.Popen(
        [*command, *[str(path)] * 200], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stdout is not None and process.stdout.readline().startswith(b"Dumping")
    process.stdout.close()
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 141 and b"Broken pipe" not in stderr, stderr


def test_a_garbage_index_stops_at_its_first_bad_entry_naming_its_byte(
    segment: tuple[Path, list[bytes]], capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: garbage printed as entries (negative offsets, positions past the file), exit 0."""
    path, _ = segment
    index = path.with_suffix(".index")
    good = index_file_entries(index, ">ii")[:2]
    garbage = [(good[1][0] - 1, good[1][1] + 50), (-7, 1 << 30)]
    index.write_bytes(b"".join(struct.pack(">ii", o, p) for o, p in [*good, *garbage]))
    code, lines = dump(capsys, str(index))
    assert code == 1
    assert lines[1:3] == [f"offset: {o} position: {p}" for o, p in good]
    assert lines[3] == (
        f"{index}: bad entry at byte 16 (offset: {good[1][0] - 1} position: {good[1][1] + 50}): "
        f"offset {good[1][0] - 1} does not ascend past the previous entry's {good[1][0]}; stopping"
    )
    assert len(lines) == 4
    index.write_bytes(struct.pack(">ii", 1, path.stat().st_size))  # past the .log's end
    code, lines = dump(capsys, str(index))
    assert code == 1 and f"is beyond the .log's {path.stat().st_size} bytes" in lines[-1]
    index.write_bytes(bytes(range(256)) * 3)  # plain garbage
    code, lines = dump(capsys, str(index))
    assert code == 1 and "bad entry at byte" in lines[-1]


def test_a_time_index_whose_timestamps_go_back_is_reported(
    segment: tuple[Path, list[bytes]], capsys: pytest.CaptureFixture[str]
) -> None:
    timeindex = segment[0].with_suffix(".timeindex")
    timeindex.write_bytes(struct.pack(">qiqi", T0 + 50, 3, T0 + 10, 5))
    code, lines = dump(capsys, str(timeindex))
    assert code == 1
    assert lines[-1].endswith(
        f"bad entry at byte 12 (timestamp: {T0 + 10} offset: 5): timestamp {T0 + 10} is below "
        f"the previous entry's {T0 + 50}; stopping"
    )
