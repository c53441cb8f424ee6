"""`replog.sim.synced_data.first_lost`: a batch a replica had synced must be on its crashed
disk at its offset with its bytes; a batch missing or changed is found, a torn tail after the
synced batches is not a loss."""

from __future__ import annotations

from replog.record import build_batch
from replog.sim.synced_data import first_lost
from replog.storage.memory_fs import MemoryFileSystem

DIRECTORY = "/data/data-flushed-0"


def _batch(base_offset: int, value: bytes) -> bytes:
    return build_batch([(1_000, None, value, ())], producer_id=-1, base_offset=base_offset)


def _disk(*segments: tuple[str, bytes]) -> MemoryFileSystem:
    disk = MemoryFileSystem()
    disk.make_dirs(DIRECTORY)
    for name, data in segments:
        disk.write_bytes(f"{DIRECTORY}/{name}", data)
    return disk


SYNCED = {0: _batch(0, b"a"), 1: _batch(1, b"b"), 2: _batch(2, b"c")}


def test_every_synced_batch_kept_across_segments_with_a_torn_tail_is_no_loss() -> None:
    first = SYNCED[0] + SYNCED[1]
    second = SYNCED[2] + _batch(3, b"unsynced")[:20]  # a torn tail
    disk = _disk(("00000000000000000000.log", first), ("00000000000000000002.log", second))
    assert first_lost(disk, DIRECTORY, SYNCED) is None
    assert first_lost(disk, DIRECTORY, {}) is None


def test_a_synced_batch_missing_is_found() -> None:
    disk = _disk(("00000000000000000000.log", SYNCED[0] + SYNCED[1][:30]))
    assert first_lost(disk, DIRECTORY, SYNCED) == (1, "missing")
    assert first_lost(MemoryFileSystem(), DIRECTORY, SYNCED) == (0, "missing")


def test_a_synced_batch_changed_is_found() -> None:
    disk = _disk(("00000000000000000000.log", SYNCED[0] + _batch(1, b"B") + SYNCED[2]))
    assert first_lost(disk, DIRECTORY, SYNCED) == (1, "changed")


def test_only_segment_files_are_read() -> None:
    disk = _disk(("00000000000000000000.log", SYNCED[0]), ("00000000000000000000.index", SYNCED[1]))
    assert first_lost(disk, DIRECTORY, {0: SYNCED[0], 1: SYNCED[1]}) == (1, "missing")
