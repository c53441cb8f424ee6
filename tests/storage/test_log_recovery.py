"""Crash recovery of a standalone log (docs/design/storage.md#log-recovery, #crash-scenarios, S8):
torn tails, flipped bytes, damaged indexes, the recovery-point scope, clean opens that do not
rescan, the state file and the leader-epoch checkpoint."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from storage_helpers import (
    NO_SYNC_FS,
    T0,
    SimulatedCrash,
    append_batches,
    assert_every_offset_reads_its_batch,
    batches_by_segment,
    dir_contents,
    epoch_pairs,
    expected_indexes,
    files_with_suffix,
    flip_byte,
    loaded_index_entries,
    make_batch,
    next_offset_after,
    open_log,
    read_all,
    record_recoveries,
    recovered_bases,
    restore_dir,
    small_config,
    split_batches,
    stamped,
    with_final_time_entry,
)

from replog.record import RECORD_BATCH_OVERHEAD, read_header
from replog.storage import Log
from replog.storage.fs import OsFileSystem
from replog.storage.log_loader import LEADER_EPOCH_FILE
from replog.storage.standalone_state import STATE_FILE_NAME, StandaloneState, write_state
from replog.testing import ManualClock

CONFIG = small_config(segment_bytes=1500, index_interval_bytes=200)
LOCAL = OsFileSystem()


@dataclass
class CrashedLog:
    """A log that crashed (no clean close) with its files as they were left."""

    directory: Path
    batches: list[bytes]  # every acknowledged batch, in offset order
    segment_bases: list[int]
    snapshot: dict[str, bytes]

    def segment_path(self, base: int, suffix: str = ".log") -> Path:
        return self.directory / f"{base:020d}{suffix}"

    def batches_in(self, base: int) -> list[bytes]:
        following = [b for b in self.segment_bases if b > base]
        end = following[0] if following else next_offset_after(self.batches)
        return [b for b in self.batches if base <= read_header(b).base_offset < end]

    def batches_below(self, offset: int) -> list[bytes]:
        return [b for b in self.batches if read_header(b).base_offset < offset]

    def fresh_copy(self, directory: Path) -> CrashedLog:
        restore_dir(self.snapshot, directory)
        return CrashedLog(directory, self.batches, self.segment_bases, self.snapshot)

    def set_state(self, *, clean: bool, recovery_point: int, high_watermark: int = 0) -> None:
        write_state(
            str(self.directory), LOCAL, StandaloneState(clean, recovery_point, 0, high_watermark)
        )


def crash_log(directory: Path, count: int = 45, epochs: tuple[int, ...] = (0, 1, 2)) -> CrashedLog:
    """Append `count` batches (epochs spread evenly) across several segments, then crash."""
    log = open_log(directory, CONFIG, clock=ManualClock(T0), fs=NO_SYNC_FS)
    batches: list[bytes] = []
    per_epoch = count // len(epochs)
    for i, epoch in enumerate(epochs):
        n = per_epoch if i < len(epochs) - 1 else count - per_epoch * i
        batches += append_batches(
            log, n, epoch=epoch, records=[1, 3, 2, 2], timestamp=T0 + 1000 * i
        )
    bases = [s.base_offset for s in log.segments()]
    assert len(bases) >= 4
    log.close_without_flush()
    return CrashedLog(directory, batches, bases, dir_contents(directory))


@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory) -> CrashedLog:
    return crash_log(tmp_path_factory.mktemp("crash") / "t-0")


@pytest.fixture
def recover_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """(partition dir, base offset) of the segments `LogSegment.recover` ran on, in order."""
    return record_recoveries(monkeypatch)


def reopen(directory: Path, **kwargs: object) -> Log:
    kwargs.setdefault("fs", NO_SYNC_FS)  # process crashes only: the page cache survives
    return open_log(directory, CONFIG, clock=ManualClock(T0), **kwargs)  # type: ignore[arg-type]


def assert_log_equals_prefix(log: Log, batches: list[bytes], lookups_from: int = 0) -> None:
    """The log holds exactly `batches`, with indexes as a clean log of them would have, and
    every offset from `lookups_from` on reads back the batch holding it."""
    assert log.log_end_offset == next_offset_after(batches)
    assert read_all(log) == batches
    grouped = batches_by_segment(log, batches)
    for segment in log.segments():
        group = grouped[segment.base_offset]
        assert segment.size == sum(len(b) for b in group)
        expected = expected_indexes(group, CONFIG.index_interval_bytes)
        offsets, times = loaded_index_entries(segment)
        assert offsets == expected.offset_entries
        # Roll, close, recovery and rebuilds all end a time index with the largest timestamp.
        assert times == with_final_time_entry(expected)
    assert_every_offset_reads_its_batch(
        log, [b for b in batches if read_header(b).last_offset >= lookups_from]
    )


def batch_positions(batches: list[bytes]) -> list[int]:
    """Start positions of `batches` laid out back to back, plus the end."""
    positions = [0]
    for batch in batches:
        positions.append(positions[-1] + len(batch))
    return positions


# --- (a) torn tails ------------------------------------------------------------------------------


def cut_points(crashed: CrashedLog) -> Iterator[tuple[int, int]]:
    """(cut position, number of whole batches kept) in the active segment: every byte inside the
    last two batches, and every batch boundary."""
    active = crashed.batches_in(crashed.segment_bases[-1])
    positions = batch_positions(active)
    assert len(active) >= 4
    for kept, start in enumerate(positions[:-1]):
        yield start, kept
    for kept in (len(active) - 2, len(active) - 1):
        for cut in range(positions[kept] + 1, positions[kept + 1]):
            yield cut, kept
    yield positions[-1], len(active)


def test_a_torn_active_segment_recovers_the_longest_valid_prefix_at_every_cut(
    crashed: CrashedLog, tmp_path: Path
) -> None:
    active_base = crashed.segment_bases[-1]
    earlier = crashed.batches_below(active_base)
    active = crashed.batches_in(active_base)
    cuts = list(cut_points(crashed))
    assert len(cuts) > 2 * RECORD_BATCH_OVERHEAD
    copy = crashed.fresh_copy(tmp_path / "t-0")
    path = copy.segment_path(active_base)
    # An unclean open that ends in another crash writes only these: restore just them per cut.
    rewritten = [STATE_FILE_NAME, LEADER_EPOCH_FILE]
    for cut, kept in cuts:
        for name in rewritten:
            (copy.directory / name).write_bytes(crashed.snapshot[name])
        path.write_bytes(crashed.snapshot[path.name][:cut])
        log = reopen(copy.directory)
        try:
            assert_log_equals_prefix(log, earlier + active[:kept], lookups_from=active_base)
            assert path.stat().st_size == sum(len(b) for b in active[:kept])
        except AssertionError as exc:
            raise AssertionError(f"cut at byte {cut} (keeping {kept} batches): {exc}") from exc
        log.close_without_flush()
    unchanged = {k: v for k, v in crashed.snapshot.items() if k not in [*rewritten, path.name]}
    assert {k: v for k, v in dir_contents(copy.directory).items() if k in unchanged} == unchanged


def test_a_torn_tail_is_cut_and_logged_with_file_offset_and_bytes(
    crashed: CrashedLog, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    copy = crashed.fresh_copy(tmp_path / "t-0")
    active_base = crashed.segment_bases[-1]
    path = copy.segment_path(active_base)
    data = path.read_bytes()
    last = crashed.batches_in(active_base)[-1]
    path.write_bytes(data[: len(data) - len(last) // 2])
    log = reopen(copy.directory)
    torn = len(last) - len(last) // 2
    assert log.log_end_offset == read_header(last).base_offset
    messages = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any(
        path.name in m and f"cut {torn} byte" in m and f"offset {log.log_end_offset}" in m
        for m in messages
    ), messages


def test_a_zero_filled_tail_is_cut(crashed: CrashedLog, tmp_path: Path) -> None:
    """A preallocated-looking tail: zeros after the last batch (batch_length 0 < 14)."""
    copy = crashed.fresh_copy(tmp_path / "t-0")
    path = copy.segment_path(crashed.segment_bases[-1])
    path.write_bytes(path.read_bytes() + bytes(CONFIG.segment_bytes))
    log = reopen(copy.directory)
    assert_log_equals_prefix(log, crashed.batches)


def test_a_clean_state_does_not_save_a_log_with_a_zero_tail(
    crashed: CrashedLog, tmp_path: Path
) -> None:
    """Even after a recorded clean shutdown, an active segment that does not frame is recovered."""
    copy = crashed.fresh_copy(tmp_path / "t-0")
    path = copy.segment_path(crashed.segment_bases[-1])
    path.write_bytes(path.read_bytes() + bytes(100))
    copy.set_state(clean=True, recovery_point=next_offset_after(crashed.batches))
    log = reopen(copy.directory)
    assert_log_equals_prefix(log, crashed.batches)


# --- (b), (c), (i) corrupt batches ---------------------------------------------------------------


def records_byte_of(crashed: CrashedLog, base: int, index: int) -> tuple[int, bytes]:
    """(file position of a byte in the records of a segment's index-th batch, that batch)."""
    batches = crashed.batches_in(base)
    position = batch_positions(batches)[index]
    return position + RECORD_BATCH_OVERHEAD + 3, batches[index]


def test_a_crc_flip_after_the_recovery_point_cuts_there_and_deletes_later_segments(
    crashed: CrashedLog, tmp_path: Path, recover_calls: list[tuple[str, int]]
) -> None:
    copy = crashed.fresh_copy(tmp_path / "t-0")
    bases = crashed.segment_bases
    position, damaged = records_byte_of(crashed, bases[1], 2)
    flip_byte(copy.segment_path(bases[1]), position)
    copy.set_state(clean=False, recovery_point=bases[1])  # crash before the flush of a roll
    log = reopen(copy.directory)
    cut = read_header(damaged).base_offset
    assert recovered_bases(recover_calls) == [bases[1]]
    assert [s.base_offset for s in log.segments()] == bases[:2]
    assert [int(p.name[:20]) for p in files_with_suffix(copy.directory, ".log")] == bases[:2]
    assert files_with_suffix(copy.directory, ".index")[-1].name <= f"{bases[1]:020d}.index"
    assert_log_equals_prefix(log, crashed.batches_below(cut))
    assert log.recovery_point <= bases[1]
    assert all(start < cut for _, start in epoch_pairs(log))


def test_a_flipped_base_offset_is_caught_by_the_dense_offset_check(
    crashed: CrashedLog, tmp_path: Path
) -> None:
    """Bytes 0-7 are outside the CRC: only the offsets' continuity can reveal the damage."""
    copy = crashed.fresh_copy(tmp_path / "t-0")
    active_base = crashed.segment_bases[-1]
    batches = crashed.batches_in(active_base)
    position = batch_positions(batches)[3]
    flip_byte(copy.segment_path(active_base), position + 7)
    log = reopen(copy.directory)
    cut = read_header(batches[3]).base_offset
    assert_log_equals_prefix(log, crashed.batches_below(cut))


def test_a_flipped_base_offset_of_a_segments_first_batch_empties_the_segment(
    crashed: CrashedLog, tmp_path: Path
) -> None:
    copy = crashed.fresh_copy(tmp_path / "t-0")
    bases = crashed.segment_bases
    flip_byte(copy.segment_path(bases[2]), 6)
    copy.set_state(clean=False, recovery_point=bases[2])
    log = reopen(copy.directory)
    assert log.log_end_offset == bases[2]
    assert_log_equals_prefix(log, crashed.batches_below(bases[2]))


def test_corruption_below_the_recovery_point_is_not_rescanned(
    crashed: CrashedLog, tmp_path: Path, recover_calls: list[tuple[str, int]]
) -> None:
    """Kafka trusts segments wholly below the recovery point; the damage surfaces on read."""
    copy = crashed.fresh_copy(tmp_path / "t-0")
    bases = crashed.segment_bases
    position, damaged = records_byte_of(crashed, bases[0], 1)
    path = copy.segment_path(bases[0])
    flip_byte(path, position)
    damaged_file = path.read_bytes()
    log = reopen(copy.directory)
    # Only the active segment held unflushed data.
    assert recovered_bases(recover_calls) == [bases[-1]]
    assert path.read_bytes() == damaged_file
    assert log.log_end_offset == next_offset_after(crashed.batches)
    offset = read_header(damaged).base_offset
    served = split_batches(log.read(offset, 1))[0]
    assert served != damaged and len(served) == len(damaged)


def test_a_crash_just_after_a_roll_rescans_both_segments(
    crashed: CrashedLog, tmp_path: Path, recover_calls: list[tuple[str, int]]
) -> None:
    copy = crashed.fresh_copy(tmp_path / "t-0")
    bases = crashed.segment_bases
    copy.set_state(clean=False, recovery_point=bases[-2])
    log = reopen(copy.directory)
    assert recovered_bases(recover_calls) == bases[-2:]
    assert_log_equals_prefix(log, crashed.batches)
    assert log.recovery_point == bases[-2]  # not advanced: nothing new was fsynced


def test_a_recovery_point_of_zero_rescans_everything(
    crashed: CrashedLog, tmp_path: Path, recover_calls: list[tuple[str, int]]
) -> None:
    copy = crashed.fresh_copy(tmp_path / "t-0")
    copy.set_state(clean=False, recovery_point=0)
    log = reopen(copy.directory)
    assert recovered_bases(recover_calls) == crashed.segment_bases
    assert_log_equals_prefix(log, crashed.batches)


# --- (d) damaged index files ---------------------------------------------------------------------


def delete_file(path: Path) -> None:
    path.unlink()


def cut_to_odd_length(path: Path) -> None:
    data = path.read_bytes()
    assert data
    path.write_bytes(data[:-3])


def fill_with_ones(path: Path) -> None:
    path.write_bytes(b"\xff" * max(24, path.stat().st_size))


def fill_with_noise(path: Path) -> None:
    path.write_bytes(bytes((i * 97 + 13) % 251 for i in range(max(48, path.stat().st_size))))


def reverse_entries(path: Path) -> None:
    """Well-formed entries in the wrong order."""
    size = 8 if path.suffix == ".index" else 12
    data = path.read_bytes()
    entries = [data[i : i + size] for i in range(0, len(data), size)]
    assert len(entries) >= 2
    path.write_bytes(b"".join(reversed(entries)))


INDEX_DAMAGE = [delete_file, cut_to_odd_length, fill_with_ones, fill_with_noise, reverse_entries]


@pytest.fixture(scope="module")
def closed(tmp_path_factory: pytest.TempPathFactory) -> CrashedLog:
    """Like `crashed`, but cleanly closed (every index written, state clean)."""
    directory = tmp_path_factory.mktemp("clean") / "t-0"
    crashed = crash_log(directory)
    log = reopen(directory)
    log.close()
    return CrashedLog(directory, crashed.batches, crashed.segment_bases, dir_contents(directory))


@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
@pytest.mark.parametrize("damage", INDEX_DAMAGE, ids=lambda f: f.__name__)
@pytest.mark.parametrize("clean", [True, False], ids=["clean-open", "unclean-open"])
def test_damaged_index_files_are_rebuilt(
    closed: CrashedLog, tmp_path: Path, suffix: str, damage: Callable[[Path], None], clean: bool
) -> None:
    copy = closed.fresh_copy(tmp_path / "t-0")
    bases = closed.segment_bases
    if not clean:
        copy.set_state(clean=False, recovery_point=bases[-2])
    for base in (bases[0], bases[-2]):  # one segment below the recovery point, one at it
        damage(copy.segment_path(base, suffix))
    log = reopen(copy.directory)
    assert_log_equals_prefix(log, closed.batches)
    log.close()
    # Rebuilt indexes are written back whole.
    for base in (bases[0], bases[-2]):
        assert (
            copy.segment_path(base, suffix).read_bytes() == closed.snapshot[f"{base:020d}{suffix}"]
        )


def test_a_clean_open_does_not_rescan(
    closed: CrashedLog, tmp_path: Path, recover_calls: list[tuple[str, int]]
) -> None:
    copy = closed.fresh_copy(tmp_path / "t-0")
    log = reopen(copy.directory)
    assert recovered_bases(recover_calls) == []
    assert log.log_end_offset == next_offset_after(closed.batches)
    assert log.recovery_point == log.log_end_offset
    assert read_all(log) == closed.batches


# --- (f) the standalone state file ---------------------------------------------------------------


class CrashingFileSystem(OsFileSystem):
    """Dies (raises) the first time the loader lists the partition directory."""

    def list_dir(self, path: str) -> list[str]:
        raise SimulatedCrash(path)


def test_a_crash_during_open_counts_as_unclean(
    closed: CrashedLog, tmp_path: Path, recover_calls: list[tuple[str, int]]
) -> None:
    copy = closed.fresh_copy(tmp_path / "t-0")
    with pytest.raises(SimulatedCrash):
        open_log(copy.directory, CONFIG, fs=CrashingFileSystem())
    assert b'"clean_shutdown": false' in (copy.directory / STATE_FILE_NAME).read_bytes()
    log = reopen(copy.directory)
    # From the recovery point, which a clean close left at the log end.
    assert recovered_bases(recover_calls) == [closed.segment_bases[-1]]
    assert read_all(log) == closed.batches


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"{",
        b"[]",
        b'{"version": 0}',
        b'{"version": 9, "clean_shutdown": true}',
        b"\xff\xfe",
        b'{"version": 0, "clean_shutdown": true, "recovery_point": -1, '
        b'"log_start_offset": 0, "high_watermark": 0}',
    ],
    ids=[
        "empty",
        "truncated-json",
        "not-an-object",
        "missing-keys",
        "future-version",
        "not-utf8",
        "negative",
    ],
)
def test_a_malformed_state_file_means_full_recovery(
    closed: CrashedLog,
    tmp_path: Path,
    recover_calls: list[tuple[str, int]],
    content: bytes,
    caplog: pytest.LogCaptureFixture,
) -> None:
    copy = closed.fresh_copy(tmp_path / "t-0")
    (copy.directory / STATE_FILE_NAME).write_bytes(content)
    log = reopen(copy.directory)
    assert recovered_bases(recover_calls) == closed.segment_bases
    assert read_all(log) == closed.batches
    assert any(
        STATE_FILE_NAME in r.getMessage() for r in caplog.records if r.levelname == "WARNING"
    )


def test_a_closed_log_reopens_with_its_offsets(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = open_log(directory, CONFIG, clock=ManualClock(T0))
    batches = append_batches(log, 30)
    log.high_watermark = 20
    log.increment_log_start_offset(5)
    log.close()
    reopened = reopen(directory)
    assert (reopened.log_start_offset, reopened.high_watermark, reopened.log_end_offset) == (
        5,
        20,
        30,
    )
    assert reopened.recovery_point == 30
    assert read_all(reopened) == batches[5:]


def test_a_high_watermark_beyond_the_recovered_end_is_clamped(
    crashed: CrashedLog, tmp_path: Path
) -> None:
    copy = crashed.fresh_copy(tmp_path / "t-0")
    active_base = crashed.segment_bases[-1]
    copy.set_state(clean=False, recovery_point=active_base, high_watermark=10_000)
    path = copy.segment_path(active_base)
    path.write_bytes(path.read_bytes()[:5])
    log = reopen(copy.directory)
    assert log.log_end_offset == active_base
    assert log.high_watermark == active_base


# --- (g) the leader-epoch checkpoint -------------------------------------------------------------


def test_epoch_entries_beyond_the_recovered_end_are_removed(
    crashed: CrashedLog, tmp_path: Path
) -> None:
    copy = crashed.fresh_copy(tmp_path / "t-0")
    epoch_starts = {}
    for batch in crashed.batches:
        epoch_starts.setdefault(
            read_header(batch).partition_leader_epoch, read_header(batch).base_offset
        )
    assert sorted(epoch_starts) == [0, 1, 2]
    end = next_offset_after(crashed.batches)
    (copy.directory / "leader-epoch-checkpoint").write_text(
        f"0\n5\n0 0\n1 {epoch_starts[1]}\n2 {epoch_starts[2]}\n3 {end}\n4 {end + 50}\n"
    )
    # Tear the log back into epoch 1's range: epoch 2 began after the new end.
    cut_base = epoch_starts[2] - 1
    active = crashed.segment_bases[-1]
    copy.set_state(clean=False, recovery_point=0)
    kept = crashed.batches_below(cut_base)
    owner = max(b for b in crashed.segment_bases if b <= cut_base)
    path = copy.segment_path(owner)
    path.write_bytes(
        path.read_bytes()[: sum(len(b) for b in kept if read_header(b).base_offset >= owner) + 7]
    )
    log = reopen(copy.directory)
    assert log.log_end_offset == next_offset_after(kept)
    assert owner <= active
    assert epoch_pairs(log) == [(0, 0), (1, epoch_starts[1])]
    assert (
        copy.directory / "leader-epoch-checkpoint"
    ).read_text() == f"0\n2\n0 0\n1 {epoch_starts[1]}\n"


@pytest.mark.parametrize("content", [b"0\n2\n0 0\n", b"7\n0\n", b"0\n2\n3 10\n1 20\n", b"garbage"])
def test_a_corrupt_epoch_checkpoint_is_rebuilt_from_the_batch_headers(
    closed: CrashedLog, tmp_path: Path, content: bytes
) -> None:
    copy = closed.fresh_copy(tmp_path / "t-0")
    expected = (copy.directory / "leader-epoch-checkpoint").read_bytes()
    (copy.directory / "leader-epoch-checkpoint").write_bytes(content)
    log = reopen(copy.directory)
    firsts: dict[int, int] = {}
    for batch in closed.batches:
        firsts.setdefault(read_header(batch).partition_leader_epoch, read_header(batch).base_offset)
    assert epoch_pairs(log) == sorted(firsts.items())
    assert (copy.directory / "leader-epoch-checkpoint").read_bytes() == expected


def test_epoch_entries_before_the_log_start_are_clamped(closed: CrashedLog, tmp_path: Path) -> None:
    copy = closed.fresh_copy(tmp_path / "t-0")
    write_state(str(copy.directory), LOCAL, StandaloneState(True, 0, 20, 20))
    log = reopen(copy.directory)
    assert log.log_start_offset == 20
    pairs = epoch_pairs(log)
    assert pairs[0][1] == 20
    assert (
        pairs[0][0]
        == read_header(
            next(b for b in closed.batches if read_header(b).last_offset >= 20)
        ).partition_leader_epoch
    )


def test_a_log_start_the_epoch_checkpoint_saw_is_kept_when_its_own_checkpoint_lags(
    closed: CrashedLog, tmp_path: Path
) -> None:
    """DeleteRecords to 20 wrote the epoch checkpoint (synchronously) but a crash came before
    the periodic log-start checkpoint, which still says 0. Opened at 0, the log would serve
    the deleted records again without the epochs that covered them (a leader then answers a
    follower's older last fetched epoch with a boundary at 20, past its divergent records)."""
    copy = closed.fresh_copy(tmp_path / "t-0")
    deleted = reopen(copy.directory)
    deleted.high_watermark = 30
    deleted.increment_log_start_offset(20)
    epochs = epoch_pairs(deleted)
    deleted.close_without_flush()
    write_state(str(copy.directory), LOCAL, StandaloneState(False, 0, 0, 0))
    log = reopen(copy.directory)
    assert log.log_start_offset == 20
    assert epoch_pairs(log) == epochs and epochs[0][1] == 20
    assert read_all(log) == [b for b in closed.batches if read_header(b).last_offset >= 20]


@pytest.mark.parametrize("damage", ["missing", "empty"])
def test_a_missing_epoch_checkpoint_is_rebuilt_and_witnesses_no_log_start(
    closed: CrashedLog, tmp_path: Path, damage: str
) -> None:
    """Without it, the entry a new leader adds at its log end (5 is the next epoch here)
    would be the cache's first, and the next open would take it for where the log starts."""
    copy = closed.fresh_copy(tmp_path / "t-0")
    expected = (copy.directory / "leader-epoch-checkpoint").read_bytes()
    if damage == "missing":
        (copy.directory / "leader-epoch-checkpoint").unlink()
    else:
        (copy.directory / "leader-epoch-checkpoint").write_text("0\n0\n")
    log = reopen(copy.directory)
    assert (copy.directory / "leader-epoch-checkpoint").read_bytes() == expected
    log.leader_epoch_cache.assign(5, log.log_end_offset)
    log.close()
    again = reopen(copy.directory)
    assert again.log_start_offset == 0
    assert read_all(again) == closed.batches


@pytest.mark.parametrize("clean", [True, False])
def test_records_appended_without_a_leader_epoch_stay_when_a_later_append_has_one(
    tmp_path: Path, clean: bool
) -> None:
    """A standalone log may be written without epochs (-1, which the cache never records),
    then with one: the cache's first entry starts after those records, and is no witness that
    they were deleted."""
    directory = tmp_path / "t-0"
    log = open_log(directory, CONFIG, clock=ManualClock(T0))
    for _ in range(3):
        log.append_as_leader(make_batch(), -1)
    log.append_as_leader(make_batch(), 0)
    log.high_watermark = 4
    if clean:
        log.close()
    else:
        log.close_without_flush()
    again = reopen(directory)
    assert (again.log_start_offset, again.log_end_offset) == (0, 4)
    assert [read_header(b).base_offset for b in read_all(again)] == [0, 1, 2, 3]


def test_recovery_ends_each_time_index_with_the_segments_largest_timestamp(tmp_path: Path) -> None:
    """Kafka's LogSegment.recover appends the final time-index entry, as a roll does."""
    directory = tmp_path / "t-0"
    log = open_log(directory, CONFIG, clock=ManualClock(T0))
    batches = append_batches(log, 30)
    # Make sure the active segment's largest timestamp is not already an index entry.
    while True:
        active = [
            b for b in batches if read_header(b).base_offset >= log.active_segment.base_offset
        ]
        expected = expected_indexes(active, CONFIG.index_interval_bytes)
        if expected.time_entries and expected.time_entries[-1][0] < expected.max_timestamp:
            break
        batches += append_batches(log, 1, timestamp=T0 + len(batches))
    log.close_without_flush()
    write_state(str(directory), LOCAL, StandaloneState(False, 0, 0, 0))
    reopened = reopen(directory)
    grouped = batches_by_segment(reopened, batches)
    for segment in reopened.segments():
        expected = expected_indexes(grouped[segment.base_offset], CONFIG.index_interval_bytes)
        _, times = loaded_index_entries(segment)
        assert times == with_final_time_entry(expected)
        assert times[-1] == (expected.max_timestamp, expected.offset_of_max_timestamp)
    assert len(times) == len(expected.time_entries) + 1  # the active segment got its final entry


def test_a_log_start_beyond_the_log_end_means_the_files_were_lost(
    closed: CrashedLog, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """docs/design/storage.md#log-recovery, step 4: LEO below the checkpointed log start
    deletes every segment."""
    copy = closed.fresh_copy(tmp_path / "t-0")
    end = next_offset_after(closed.batches)
    write_state(str(copy.directory), LOCAL, StandaloneState(True, end, end + 100, end + 100))
    log = reopen(copy.directory)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (end + 100,) * 3
    assert [p.name for p in files_with_suffix(copy.directory, ".log")] == [f"{end + 100:020d}.log"]
    assert epoch_pairs(log) == []
    assert any("below the log start offset" in r.getMessage() for r in caplog.records)


def test_leftovers_of_interrupted_work_are_removed_at_open(
    closed: CrashedLog, tmp_path: Path
) -> None:
    copy = closed.fresh_copy(tmp_path / "t-0")
    leftovers = [
        f"{0:020d}.log.deleted",
        f"{0:020d}.index.deleted",
        f"{9999:020d}.log.cleaned",
        f"{9999:020d}.log.swap",
        f"{8888:020d}.index",  # an index whose .log is gone
        f"{8888:020d}.timeindex",
    ]
    for name in leftovers:
        (copy.directory / name).write_bytes(b"old")
    log = reopen(copy.directory)
    assert not [name for name in leftovers if (copy.directory / name).exists()]
    assert read_all(log) == closed.batches


# --- an idle leader's epoch at a clean open (docs/storage.md, "Leader epochs at a clean open") ----


class EpochWritesFileSystem(type(NO_SYNC_FS)):  # type: ignore[misc]
    """NO_SYNC_FS that counts the leader-epoch checkpoint's replacements."""

    def __init__(self) -> None:
        self.epoch_writes = 0

    def atomic_write(self, path: str, data: bytes) -> None:
        if path.endswith(LEADER_EPOCH_FILE):
            self.epoch_writes += 1
        super().atomic_write(path, data)


def idle_leader(directory: Path) -> Log:
    """Five batches of epoch 0, then leader at epoch 1 at its end with nothing appended."""
    log = open_log(directory, CONFIG, clock=ManualClock(T0), fs=NO_SYNC_FS)
    append_batches(log, 5, epoch=0)
    log.leader_epoch_cache.assign(1, 5)
    return log


def checkpoint_entries(directory: Path) -> str:
    return (directory / LEADER_EPOCH_FILE).read_text()


def test_a_clean_open_keeps_an_idle_leaders_epoch_and_writes_nothing(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    idle_leader(directory).close()
    fs = EpochWritesFileSystem()
    log = reopen(directory, fs=fs)
    assert epoch_pairs(log) == [(0, 0), (1, 5)]
    assert log.log_end_offset == 5
    assert fs.epoch_writes == 0
    assert checkpoint_entries(directory) == "0\n2\n0 0\n1 5\n"


def test_a_clean_open_still_cuts_entries_past_the_log_end(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    idle_leader(directory).close()
    (directory / LEADER_EPOCH_FILE).write_text("0\n3\n0 0\n1 5\n2 9\n")
    log = reopen(directory)
    assert epoch_pairs(log) == [(0, 0), (1, 5)]
    assert checkpoint_entries(directory) == "0\n2\n0 0\n1 5\n"


def test_an_unclean_open_cuts_an_idle_leaders_epoch_from_the_log_end(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = idle_leader(directory)
    log.flush()
    log.close_without_flush()  # a crash: the next open recovers
    reopened = reopen(directory)
    assert epoch_pairs(reopened) == [(0, 0)]
    assert checkpoint_entries(directory) == "0\n1\n0 0\n"


def _lead_again(log: Log) -> None:
    log.leader_epoch_cache.assign(2, 5)
    append_batches(log, 1, epoch=2)


def _truncate_as_a_follower(log: Log) -> None:
    log.truncate_to(5)  # to its high watermark, or to a leader's diverging epoch


def _follow_a_leader_holding_older_epoch_records(log: Log) -> None:
    # The new leader (at epoch 2) never saw epoch 1 used and holds epoch 0 records past offset
    # 5. The follower fetches with its latest epoch, 1, as a running demoted leader does: the
    # answer is the diverging epoch 0, the follower truncates to its log end (which drops the
    # idle entry, durably), then appends the leader's epoch 0 records.
    log.truncate_to(5)
    log.append_as_follower(stamped(make_batch(2), 5, 0), leader_epoch=2)


@pytest.mark.parametrize(
    ("way_out", "expected"),
    [
        pytest.param(_lead_again, [(0, 0), (2, 5)], id="leads-again"),
        pytest.param(_truncate_as_a_follower, [(0, 0)], id="truncates"),
        pytest.param(
            _follow_a_leader_holding_older_epoch_records, [(0, 0)], id="follows-older-epoch"
        ),
    ],
)
def test_each_way_out_of_a_kept_idle_epoch_survives_a_crash_right_after(
    tmp_path: Path, way_out: Callable[[Log], None], expected: list[tuple[int, int]]
) -> None:
    directory = tmp_path / "t-0"
    idle_leader(directory).close()
    log = reopen(directory)
    assert epoch_pairs(log) == [(0, 0), (1, 5)]
    way_out(log)
    assert epoch_pairs(log) == expected
    log.flush()
    log.close_without_flush()  # a crash right after: the next open recovers
    assert epoch_pairs(reopen(directory)) == expected
