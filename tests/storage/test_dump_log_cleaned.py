"""`replog dump-log` over a compacted log's cleaned segments (`tests/compacted_log.py`: a log
cleaned by the storage layer's pass): each batch line keeps Kafka's fields, a batch holding
fewer records than offsets ends with `cleaned: true offsets: N`, offsets no batch holds are a
`gap:` line before the next batch, a batch with a delete horizon shows `deleteHorizonMs`,
`--print-data` prints a sparse batch's records at their offsets, and none of it is damage."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from replog.cli.main import main
from replog.record import RecordBatch, build_batch
from replog.record.header import DELETE_HORIZON_FLAG_MASK, compute_crc, read_header
from tests.compacted_log import CleanedLog, cleaned_log

LINE = re.compile(r"baseOffset: (\d+) lastOffset: (\d+) count: (\d+) ")


@pytest.fixture
def log(tmp_path: Path) -> tuple[Path, CleanedLog]:
    directory = tmp_path / "t-0"
    return directory, cleaned_log(directory)


def dump(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    code = main(["dump-log", *args])
    return code, capsys.readouterr().out.splitlines()


def test_cleaned_batches_and_gaps_are_shown_and_are_not_damage(
    log: tuple[Path, CleanedLog], capsys: pytest.CaptureFixture[str]
) -> None:
    directory, cleaned = log
    first = sorted(directory.glob("*.log"))[0]
    code, lines = dump(capsys, str(first))
    assert code == 0
    batches = [line for line in lines if LINE.match(line)]
    headers = [read_header(b) for b in cleaned.batches]
    shown = [h for h in headers if h.base_offset < _next_base(directory, first)]
    assert len(batches) == len(shown)
    for line, header in zip(batches, shown, strict=True):
        span = header.last_offset_delta + 1
        sparse = header.records_count != span
        assert (f"cleaned: true offsets: {span}" in line) == sparse, line
        assert line.startswith(
            f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} "
            f"count: {header.records_count} "
        )
    gaps = [line for line in lines if line.startswith("gap:")]
    # From the segment's base (its name), then from each batch's next offset.
    ends = [int(first.stem), *(h.next_offset for h in shown)]
    expected = [
        f"gap: offsets {end} to {b.base_offset - 1} ({b.base_offset - end}) not in the segment"
        for end, b in zip(ends, shown, strict=False)
        if b.base_offset > end
    ]
    assert gaps == expected and expected  # the fixture's log has a gap in its first segment


def _next_base(directory: Path, segment: Path) -> int:
    names = sorted(directory.glob("*.log"))
    following = names[names.index(segment) + 1 :]
    return int(following[0].stem) if following else 1 << 62


def test_print_data_prints_a_sparse_batch_s_records_at_their_offsets(
    log: tuple[Path, CleanedLog], capsys: pytest.CaptureFixture[str]
) -> None:
    directory, cleaned = log
    code, lines = dump(capsys, "--print-data", *map(str, sorted(directory.glob("*.log"))))
    assert code == 0
    offsets = [int(line.split()[2]) for line in lines if line.startswith("| offset:")]
    assert offsets == [entry[0] for entry in cleaned.entries]
    assert not [line for line in lines if "cannot decode" in line]


def test_a_delete_horizon_is_shown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    batch = bytearray(build_batch([(1_000, b"k", None, ())]))
    attributes = int.from_bytes(batch[21:23], "big") | DELETE_HORIZON_FLAG_MASK
    batch[21:23] = attributes.to_bytes(2, "big")
    batch[17:21] = compute_crc(batch, 0, len(batch)).to_bytes(4, "big")
    RecordBatch.parse(bytes(batch))  # still a valid batch
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(bytes(batch))
    code, lines = dump(capsys, str(path))
    assert code == 0
    assert "deleteHorizonMs: 1000" in lines[1]
    assert "cleaned:" not in lines[1]
