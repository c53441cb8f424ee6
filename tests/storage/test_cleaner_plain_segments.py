"""Plain segments (replog/storage/cleaner/log_cleaning.py, module Rules): a pass that copies
them without scanning their records again writes the same bytes, with the same figures, as a
pass that scans every record; on random logs (keys written once or again, tombstones, records
without a key, an idempotent producer, compression, key maps too small for the log so passes
stop part-way, time passing so horizons come and pass). A log all dirty whose keys appear once
is plain throughout: its records are scanned once a pass, not twice."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st
from storage_helpers import NO_SYNC_FS, T0, open_log

from replog.record import build_batch
from replog.record.compression import COMPRESSION_GZIP, COMPRESSION_NONE
from replog.storage import Log, LogConfig
from replog.storage.cleaner import log_cleaning
from replog.storage.cleaner.batch_filter import BatchFilter, ProducerLastBatch
from replog.storage.cleaner.log_cleaning import CleaningPass, clean_log
from replog.storage.cleaner.offset_map import OffsetMap

CONFIG = LogConfig(segment_bytes=500, index_interval_bytes=100, cleanup_policy="compact")
RETENTION = 1_000
PRODUCER = 5
_dirs = itertools.count()
_unique = itertools.count()

records = st.tuples(
    # a key of a few (written again), one written once, or none
    st.one_of(st.sampled_from([b"a", b"b", b"c"]), st.just(b"unique"), st.none()),
    st.one_of(st.none(), st.binary(min_size=1, max_size=8)),
)
batches = st.lists(
    st.tuples(
        st.lists(records, min_size=1, max_size=4),
        st.sampled_from([COMPRESSION_NONE, COMPRESSION_NONE, COMPRESSION_GZIP]),
        st.sampled_from([False, False, False, True]),  # the idempotent producer's
    ),
    min_size=1,
    max_size=30,
)


def build(
    directory: Path,
    chosen: list[tuple[list[tuple[bytes | None, bytes | None]], int, bool]],
    plain_share: int,
) -> tuple[Log, dict[int, ProducerLastBatch]]:
    """The log: `plain_share` batches of keys written once first (plain segments to find),
    then `chosen`'s; the producer's last batch."""
    log = open_log(directory, CONFIG, fs=NO_SYNC_FS)
    sequence = 0
    last: dict[int, ProducerLastBatch] = {}
    written_once = [([(b"unique", b"v")] * 3, COMPRESSION_NONE, False)] * plain_share
    for chosen_records, codec, idempotent in written_once + chosen:
        records = [
            (T0 + log.log_end_offset, b"u%d" % next(_unique) if k == b"unique" else k, v, ())
            for k, v in chosen_records
        ]
        options: dict[str, int] = {"compression": codec}
        if idempotent:
            options.update(producer_id=PRODUCER, producer_epoch=0, base_sequence=sequence)
            sequence += len(records)
        info = log.append_as_leader(build_batch(records, **options), 0)  # type: ignore[arg-type]
        if idempotent:
            last[PRODUCER] = ProducerLastBatch(info.last_offset, 0)
    log.roll()
    log.high_watermark = log.log_end_offset
    return log, last


def passes(log: Log, entries: int, last: dict[int, ProducerLastBatch]) -> list[CleaningPass]:
    """Passes from the log's start to its end (or to where nothing is left to read), a key
    map of `entries` entries, then again past the tombstones' horizon."""
    done = []
    for now in (T0, T0 + RETENTION + 1):
        first_dirty = 0
        while first_dirty < log.active_segment.base_offset:
            result = clean_log(
                log,
                OffsetMap(24 * entries),
                first_dirty=first_dirty,
                first_uncleanable=log.active_segment.base_offset,
                now_ms=now,
                delete_retention_ms=RETENTION,
                last_batches=last,
            )
            assert not result.abandoned
            done.append(result)
            if result.end_offset == first_dirty:
                break  # nothing left below the active segment to read
            first_dirty = result.end_offset
    return done


def log_bytes(log: Log) -> list[tuple[int, bytes]]:
    return [(s.base_offset, Path(s.log_path).read_bytes()) for s in log.segments()]


def scanning_every_record(*args: object) -> set[int]:
    """`_build_offset_map` finding no plain segment: the filter scans every record."""
    build_map(*args)
    return set()


build_map = log_cleaning._build_offset_map


@settings(max_examples=40, deadline=None)
@given(
    chosen=batches,
    plain_share=st.sampled_from([0, 10, 30]),
    entries=st.sampled_from([8, 1_000]),
)
def test_plain_segments_copied_as_they_are_clean_as_scanned_ones(
    tmp_path_factory: object,
    chosen: list[tuple[list[tuple[bytes | None, bytes | None]], int, bool]],
    plain_share: int,
    entries: int,
) -> None:
    root: Path = tmp_path_factory.mktemp("plain")  # type: ignore[attr-defined]
    scanned_dir = root / f"scanned-{next(_dirs)}"
    log, last = build(root / "plain-0", chosen, plain_share)
    log.flush()
    shutil.copytree(log.directory, scanned_dir)
    scanned = open_log(scanned_dir, CONFIG, fs=NO_SYNC_FS)
    scanned.high_watermark = scanned.log_end_offset
    with mock.patch.object(log_cleaning, "_build_offset_map", scanning_every_record):
        expected = passes(scanned, entries, last)
    assert passes(log, entries, last) == expected
    assert log_bytes(log) == log_bytes(scanned)


def test_a_log_all_dirty_of_keys_written_once_is_plain_throughout(tmp_path: Path) -> None:
    log, _ = build(tmp_path / "t-0", [], 60)
    assert len(log.segments()) > 5
    before = log_bytes(log)  # one segment a group: nothing to merge
    scans = 0
    filter_spans = BatchFilter.filter

    def counting(self: BatchFilter, batch: bytes, plain: bool = False) -> bytes | None:
        nonlocal scans
        scans += not plain
        return filter_spans(self, batch, plain)

    with mock.patch.object(BatchFilter, "filter", counting):
        results = passes(log, 1_000, {})
    assert scans == 0
    assert [r.stats.records_kept for r in results] == [r.stats.records_read for r in results]
    assert results[0].stats.records_read == 180
    assert log_bytes(log) == before
