"""The storage engine's fast paths (docs/benchmarks.md) keep the slow paths' results.

- `OsSegmentFile.append` of several buffers (the gather write of a stamped prefix and the
  caller's bytes) writes their concatenation, across short writes and more buffers than one
  system call takes.
- A leader append never changes the caller's buffer, yet writes the stamped batch; a byte
  view of `bytes` (a produce request's records) is written as it is, a view of anything else
  (or a strided one) copied first.
- `Log.read` finds where its whole batches end from the offset index; it returns exactly what
  framing the bytes would return, for every start and budget, and an index entry that passes
  the load checks but points inside a batch is caught and the indexes rebuilt.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from storage_helpers import (
    append_batches,
    files_with_suffix,
    make_batch,
    open_log,
    read_all,
    small_config,
    stamped,
)

from replog.record import read_header
from replog.storage.fs import OsSegmentFile


def test_a_gather_append_writes_the_buffers_back_to_back(tmp_path: Path) -> None:
    file = OsSegmentFile(str(tmp_path / "a.log"), create=True)
    assert file.append(b"head") == 0
    parts = [b"abc", bytearray(b"defg"), memoryview(b"xxhij")[2:]]
    assert file.append(parts) == 4
    assert file.size == 14
    file.close()
    assert (tmp_path / "a.log").read_bytes() == b"headabcdefghij"


def test_a_gather_append_survives_short_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_pwritev = os.pwritev
    calls = []

    def at_most_5_bytes(fd: int, buffers: list[bytes], offset: int) -> int:
        joined = b"".join(bytes(b) for b in buffers)[:5]
        calls.append(joined)
        return real_pwritev(fd, [joined], offset)

    monkeypatch.setattr(os, "pwritev", at_most_5_bytes)
    file = OsSegmentFile(str(tmp_path / "a.log"), create=True)
    data = [bytes([i]) * (i + 1) for i in range(8)]  # 36 bytes in 8 buffers
    assert file.append(data) == 0
    file.close()
    assert (tmp_path / "a.log").read_bytes() == b"".join(data)
    assert len(calls) == 8  # 36 bytes, 5 at a time


def test_a_gather_append_of_more_buffers_than_one_call_takes(tmp_path: Path) -> None:
    file = OsSegmentFile(str(tmp_path / "a.log"), create=True)
    data = [struct.pack(">I", i) for i in range(5000)]
    file.append(data)
    file.close()
    assert (tmp_path / "a.log").read_bytes() == b"".join(data)


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_a_leader_append_leaves_the_callers_buffer_alone(tmp_path: Path, kind: type) -> None:
    log = open_log(tmp_path / "t-0")
    append_batches(log, 3)
    client = make_batch(4, tag=9)
    buffer = kind(bytearray(client))
    info = log.append_as_leader(buffer, 5)
    assert bytes(buffer) == client
    assert read_all(log)[-1] == stamped(client, info.first_offset, 5)
    assert info.batches == (read_header(stamped(client, info.first_offset, 5)),)


def reads_by_framing(log_batches: list[bytes], start: int, max_bytes: int) -> bytes:
    """What `Log.read(start, max_bytes)` returns, from the batches alone (one segment)."""
    out: list[bytes] = []
    size = 0
    for batch in log_batches:
        header = read_header(batch)
        if header.last_offset < start:
            continue
        if out and size + len(batch) > max_bytes:
            break
        if not out and len(batch) > max_bytes:
            return batch  # min_one_message
        out.append(batch)
        size += len(batch)
    return b"".join(out)


@pytest.mark.parametrize("interval", [0, 300, 4096])
def test_every_start_and_budget_reads_what_framing_says(tmp_path: Path, interval: int) -> None:
    config = small_config(segment_bytes=1 << 20, index_interval_bytes=interval)
    log = open_log(tmp_path / "t-0", config)
    batches = append_batches(log, 40, records=[1, 3, 7, 2], value_size=90)
    multi = [make_batch(2, tag=t) for t in range(3)]  # one append of three batches
    info = log.append_as_leader(b"".join(multi), 0)
    offset = info.first_offset
    for batch in multi:
        batches.append(stamped(batch, offset, 0))
        offset += read_header(batch).records_count
    for start in range(0, log.log_end_offset, 3):
        for max_bytes in (0, 100, 700, 1500, 5000, 1 << 20):
            assert log.read(start, max_bytes) == reads_by_framing(batches, start, max_bytes), (
                start,
                max_bytes,
            )


def test_an_index_entry_pointing_inside_a_batch_is_caught_and_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = small_config(segment_bytes=1 << 20, index_interval_bytes=0)
    directory = tmp_path / "t-0"
    log = open_log(directory, config)
    batches = append_batches(log, 30, records=2, value_size=60)
    log.close()
    (index,) = files_with_suffix(directory, ".index")
    raw = bytearray(index.read_bytes())
    entries = [struct.unpack_from(">ii", raw, i) for i in range(0, len(raw), 8)]
    # Still increasing and inside the file (so loading accepts it), but 7 bytes into a batch.
    relative, position = entries[10]
    struct.pack_into(">ii", raw, 80, relative, position + 7)
    index.write_bytes(bytes(raw))

    reopened = open_log(directory, config)
    for batch in batches:
        header = read_header(batch)
        for start in range(header.base_offset, header.last_offset + 1):
            for max_bytes in (1, 1000, 1 << 20):
                data = reopened.read(start, max_bytes)
                assert data == reads_by_framing(batches, start, max_bytes), (start, max_bytes)
    assert "rebuilding indexes" in caplog.text
    assert read_all(reopened) == batches


def test_a_view_of_bytes_is_written_without_a_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(tmp_path / "t-0")
    written: list[list[object]] = []
    real_append = OsSegmentFile.append

    def spy(self: OsSegmentFile, data: object, *args: object, **kwargs: object) -> int:
        written.append(list(data) if isinstance(data, list) else [data])
        return real_append(self, data, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(OsSegmentFile, "append", spy)
    request = b"header" + make_batch(4, tag=9)
    log.append_as_leader(memoryview(request)[6:], 5)
    assert any(isinstance(p, memoryview) and p.obj is request for p in written[-1])
    changeable = bytearray(make_batch(4, tag=8))
    log.append_as_leader(memoryview(changeable), 5)
    assert not any(isinstance(p, memoryview) and p.obj is changeable for p in written[-1])
    assert read_all(log)[-2:] == [stamped(request[6:], 0, 5), stamped(bytes(changeable), 4, 5)]


def test_a_strided_view_of_bytes_is_copied_and_written_whole(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    batch = make_batch(3, tag=7)
    doubled = bytes(b for byte in batch for b in (byte, 0))
    log.append_as_leader(memoryview(doubled)[::2], 5)
    assert read_all(log) == [stamped(batch, 0, 5)]
