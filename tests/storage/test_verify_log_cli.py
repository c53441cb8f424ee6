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
    open_log,
    small_config,
)

from replog.cli.main import main
from replog.record import RECORD_BATCH_OVERHEAD
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
