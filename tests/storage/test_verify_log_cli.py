"""`replog verify-log DIR`: every batch's CRC and offsets, and every index entry, of a stopped
node's log dir or of one partition directory; each problem names its file, byte and offset;
exit 0 only when clean; `--json` for tools."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from storage_helpers import (
    T0,
    append_batches,
    files_with_suffix,
    flip_byte,
    make_batch,
    open_log,
    small_config,
    stamped,
)

from replog.cli.main import main
from replog.record import RECORD_BATCH_OVERHEAD, read_header
from replog.record.header import BatchHeader
from replog.testing import ManualClock


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    """A log dir with two partitions; orders-0 has several segments."""
    for name, count in (("orders-0", 12), ("events-0", 3)):
        log = open_log(
            tmp_path / "logs" / name,
            small_config(segment_bytes=600, index_interval_bytes=100),
            clock=ManualClock(T0),
        )
        append_batches(log, count, epoch=1, records=[2, 1, 3], timestamp_step=10)
        log.close()
    return tmp_path / "logs"


def verify(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    code = main(["verify-log", *args])
    return code, capsys.readouterr().out.splitlines()


def segments(directory: Path) -> list[Path]:
    return sorted(files_with_suffix(directory, ".log"))


def test_a_clean_log_dir_and_a_clean_partition_pass(
    log_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert len(segments(log_dir / "orders-0")) > 2
    code, lines = verify(capsys, str(log_dir))
    assert code == 0, lines
    assert lines == [
        f"Checked 2 partition(s), {len(segments(log_dir / 'orders-0')) + 1} segment(s), "
        f"15 batch(es) in {log_dir}: no problems"
    ]
    code, lines = verify(capsys, str(log_dir / "events-0"))
    assert code == 0 and lines[-1].startswith("Checked 1 partition(s), 1 segment(s), 3 batch(es)")


def test_a_corrupt_batch_is_named_by_file_byte_and_offset(
    log_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    second = segments(log_dir / "orders-0")[1]
    first_batch_size = struct.unpack(">i", second.read_bytes()[8:12])[0] + 12
    base = int(second.name.split(".")[0])
    flip_byte(second, first_batch_size + RECORD_BATCH_OVERHEAD + 2)  # the 2nd batch's records
    code, lines = verify(capsys, str(log_dir))
    assert code == 1
    problem = next(line for line in lines if "CRC-32C" in line)
    assert problem.startswith(f"{second} at byte {first_batch_size} (offset {base + 2}): ")
    assert lines[-1].endswith(": 1 problem(s)")
    code, out = main(["verify-log", str(log_dir), "--json"]), capsys.readouterr().out
    document = json.loads(out)
    assert code == 1 and document["clean"] is False
    (found,) = document["problems"]
    assert found["file"] == str(second)
    assert (found["position"], found["offset"]) == (first_batch_size, base + 2)
    assert "CRC-32C mismatch" in found["problem"]


def test_a_gap_between_segments_and_a_torn_tail_are_found(
    log_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    orders = segments(log_dir / "orders-0")
    orders[1].unlink()  # its offsets are missing now
    last = orders[-1]
    last.write_bytes(last.read_bytes()[:-5])
    code, lines = verify(capsys, str(log_dir / "orders-0"))
    assert code == 1
    assert any(
        line.startswith(f"{orders[2]} at byte 0 (offset {orders[2].name.split('.')[0].lstrip('0')}")
        and "the one before it ends at offset" in line
        for line in lines
    ), lines
    assert any(line.startswith(f"{last} at byte ") and "partial batch" in line for line in lines)


def test_index_entries_that_point_nowhere_are_found(
    log_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (log,) = segments(log_dir / "events-0")
    index = log.with_suffix(".index")
    entries = list(struct.iter_unpack(">ii", index.read_bytes()))
    assert entries
    offset, position = entries[0]
    index.write_bytes(struct.pack(">ii", offset, position + 1) + index.read_bytes()[8:])
    code, lines = verify(capsys, str(log_dir / "events-0"))
    assert code == 1
    assert lines[0] == (
        f"{index} at byte 0 (offset {offset}): points at byte {position + 1} of the .log, where "
        "no batch starts"
    )
    timeindex = log.with_suffix(".timeindex")
    timeindex.write_bytes(struct.pack(">qi", 5, 99))
    code, lines = verify(capsys, str(log_dir / "events-0"))
    assert any(
        line == f"{timeindex} at byte 0: offset 99 is beyond the segment, which ends at offset 5"
        for line in lines
    ), lines


def test_a_directory_without_logs_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify-log", str(tmp_path)]) == 1
    assert "holds no segment (.log) files" in capsys.readouterr().err
    assert main(["verify-log", str(tmp_path / "missing")]) == 1
    assert "not a directory" in capsys.readouterr().err


def multi_batch_log(directory: Path, interval: int) -> list[list[bytes]]:
    """A partition written by follower appends of two to four batches each (as replication
    writes them); returns each append's batches as on disk."""
    log = open_log(
        directory,
        small_config(segment_bytes=100_000, index_interval_bytes=interval),
        clock=ManualClock(T0),
    )
    appends: list[list[bytes]] = []
    for i in range(12):
        batches = []
        offset = log.log_end_offset
        for j in range(2 + i % 3):
            batch = make_batch(1 + j % 2, timestamp=T0 + 10 * i + j, tag=i * 10 + j)
            batches.append(stamped(batch, offset, 1))
            offset += read_header(batch).records_count
        log.append_as_follower(b"".join(batches))
        appends.append(batches)
    log.close()
    return appends


def batch_starts(appends: list[list[bytes]]) -> dict[int, BatchHeader]:
    """The header of each batch by the byte where it starts in the segment."""
    found, position = {}, 0
    for batches in appends:
        for batch in batches:
            found[position] = read_header(batch)
            position += len(batch)
    return found


def older_form_entries(appends: list[list[bytes]], interval: int) -> list[tuple[int, int]]:
    """The offset index replog wrote before it indexed per batch: per append, (its last
    offset, its first byte)."""
    entries, since, position = [], 0, 0
    for batches in appends:
        size = sum(len(b) for b in batches)
        if since > interval:
            entries.append((read_header(batches[-1]).last_offset, position))
            since = 0
        since += size
        position += size
    return entries


def test_a_log_of_multi_batch_appends_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    partition = tmp_path / "logs" / "replicated-0"
    appends = multi_batch_log(partition, 100)
    (index,) = files_with_suffix(partition, ".index")
    assert len(index.read_bytes()) // 8 >= 5
    code, lines = verify(capsys, str(partition))
    assert code == 0, lines
    count = sum(len(batches) for batches in appends)
    assert lines == [
        f"Checked 1 partition(s), 1 segment(s), {count} batch(es) in {partition}: no problems"
    ]


def test_an_older_index_of_whole_appends_passes_and_a_misplaced_entry_does_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Entries naming a multi-batch append's last offset at its first byte keep every lookup
    right (they point at or before the batch sought): accepted. An entry whose offset is below
    its batch, or not in the batches before the next entry's byte, is not one."""
    partition = tmp_path / "replicated-0"
    appends = multi_batch_log(partition, 100)
    (index,) = files_with_suffix(partition, ".index")
    starts = batch_starts(appends)
    older = older_form_entries(appends, 100)
    assert len(older) >= 3
    assert all(starts[p].last_offset < o for o, p in older)  # none is Kafka's per-batch form

    def verify_with(entries: list[tuple[int, int]]) -> tuple[int, list[str]]:
        index.write_bytes(b"".join(struct.pack(">ii", o, p) for o, p in entries))
        return verify(capsys, str(partition))

    code, lines = verify_with(older)
    assert code == 0, lines
    (_, p1), (o2, p2) = older[1], older[2]
    # Pointing at the batch after the one holding its offset.
    moved = min(p for p in starts if p > p1)
    code, lines = verify_with([older[0], (starts[p1].base_offset, moved), *older[2:]])
    assert code == 1
    assert lines[0] == (
        f"{index} at byte 8 (offset {starts[p1].base_offset}): points at byte {moved} of the "
        f".log, whose batch holds offsets {starts[moved].base_offset} to "
        f"{starts[moved].last_offset}"
    )
    # An offset held by the batch at the next entry's byte, not by one before it.
    beyond = starts[p2].base_offset
    assert beyond < o2
    code, lines = verify_with([older[0], (beyond, p1), *older[2:]])
    assert code == 1
    assert lines[0] == (
        f"{index} at byte 8 (offset {beyond}): points at byte {p1} of the .log, but no batch "
        f"from there to byte {p2} (the next entry's) holds its offset"
    )
