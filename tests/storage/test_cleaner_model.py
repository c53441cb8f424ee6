"""A model of a compacted log: any sequence of appends (keys, tombstones, idempotent producers),
cleaning passes (with key maps too small for the log, so passes stop part-way), time passing,
truncations and crash-reopens keeps Kafka's guarantees against a plain list of what was
appended (replog/storage/cleaner/log_cleaning.py)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from storage_helpers import NO_SYNC_FS, T0, open_log

from replog.record import RecordBatch, build_batch
from replog.storage import Log, LogConfig
from replog.storage.cleaner.batch_filter import ProducerLastBatch
from replog.storage.cleaner.log_cleaning import clean_log
from replog.storage.cleaner.offset_map import OffsetMap

CONFIG = LogConfig(segment_bytes=400, index_interval_bytes=100, cleanup_policy="compact")
RETENTION = 1_000
_dirs = itertools.count()

# Operations: ("append", [(key, value, producer id or None), ...]), ("clean", key-map entries),
# ("wait", ms), ("truncate", where as a fraction of the log end), ("crash",).

records = st.tuples(
    st.sampled_from([b"a", b"b", b"c", b"d", b"e", b"f"]),
    st.one_of(st.none(), st.binary(min_size=1, max_size=6)),
    # Producers write now and then: their last batches end up behind later writes.
    st.sampled_from([None, None, None, None, None, 1, 2]),
)
# Appends come in runs of one-record batches: enough segments to clean.
operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.lists(records, min_size=1, max_size=10)),
        st.tuples(st.just("clean"), st.sampled_from([2, 4, 100])),
        st.tuples(st.just("wait"), st.sampled_from([10, RETENTION])),
        st.tuples(st.just("truncate"), st.floats(0.7, 1.0)),
        st.tuples(st.just("crash")),
    ),
    min_size=5,
    max_size=30,
)


@dataclass
class Model:
    """What was appended and not truncated, by offset; the producers' offsets; when a pass
    first reached each offset (its tombstone's horizon starts then)."""

    records: dict[int, tuple[bytes, bytes | None]] = field(default_factory=dict)
    producers: dict[int, list[int]] = field(default_factory=dict)
    reached_at: dict[int, int] = field(default_factory=dict)
    sequences: dict[int, int] = field(default_factory=dict)

    def truncate(self, offset: int) -> None:
        self.records = {o: r for o, r in self.records.items() if o < offset}
        self.reached_at = {o: t for o, t in self.reached_at.items() if o < offset}
        for offsets in self.producers.values():
            offsets[:] = [o for o in offsets if o < offset]

    def latest(self) -> dict[bytes, int]:
        return {key: offset for offset, (key, _) in sorted(self.records.items())}

    def last_batches(self) -> dict[int, ProducerLastBatch]:
        return {p: ProducerLastBatch(max(o), 0) for p, o in self.producers.items() if o}


def read_log(log: Log) -> dict[int, tuple[bytes | None, bytes | None]]:
    out = {}
    for _, batch in log.read_batches(log.log_start_offset):
        for record in RecordBatch.parse(batch, sparse=True).records():
            out[record.offset] = (record.key, record.value)
    return out


def check(log: Log, model: Model, now: int, end: int) -> None:
    content = read_log(log)
    assert log.log_end_offset == end
    # Nothing changed or renumbered: every record read is the one appended at its offset.
    for offset, record in content.items():
        assert model.records.get(offset) == record, offset
    latest = model.latest()
    for offset, (key, value) in model.records.items():
        if offset in content:
            continue
        # Gone only when superseded, or a tombstone whose horizon has passed.
        superseded = latest[key] != offset
        expired = value is None and offset in model.reached_at
        assert superseded or (expired and now >= model.reached_at[offset] + RETENTION), offset


def batch_ends(log: Log) -> dict[int, int]:
    """The producer id of each batch, by its last offset."""
    return {h.last_offset: h.producer_id for h in log.batch_headers(log.log_start_offset)}


def check_producers(
    log: Log, before: dict[int, int], last_batches: dict[int, ProducerLastBatch]
) -> None:
    """A pass keeps (emptied or not) the batch holding each producer's last data, if the log
    held it when the pass began. (After a truncation an earlier batch of the producer, which a
    pass may have removed when it was not the last, can be the last.)"""
    after = batch_ends(log)
    for producer, last in last_batches.items():
        if before.get(last.last_data_offset) == producer:  # type: ignore[arg-type]
            assert after.get(last.last_data_offset) == producer, (producer, last)  # type: ignore[arg-type]


@settings(max_examples=40, deadline=None)
@given(ops=operations)
def test_a_compacted_log_keeps_kafkas_guarantees_against_a_model(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[object, ...]]
) -> None:
    directory: Path = tmp_path_factory.mktemp("model") / f"m-{next(_dirs)}"
    log = open_log(directory, CONFIG, fs=NO_SYNC_FS)
    model = Model()
    now = T0
    checkpoint = 0
    end = 0
    try:
        for op in ops:
            kind = op[0]
            if kind == "append":
                for key, value, producer in op[1]:  # type: ignore[attr-defined]
                    options: dict[str, object] = {}
                    if producer is not None:
                        sequence = model.sequences.get(producer, 0)
                        options = {
                            "producer_id": producer,
                            "producer_epoch": 0,
                            "base_sequence": sequence,
                        }
                        model.sequences[producer] = sequence + 1
                    batch = build_batch([(now, key, value, ())], **options)  # type: ignore[arg-type]
                    offset = log.append_as_leader(batch, 0).first_offset
                    model.records[offset] = (key, value)
                    end = offset + 1
                    if producer is not None:
                        model.producers.setdefault(producer, []).append(offset)
                log.high_watermark = log.log_end_offset
            elif kind == "clean":
                first_dirty = (
                    checkpoint
                    if log.log_start_offset <= checkpoint <= log.log_end_offset
                    else log.log_start_offset
                )
                last_batches = model.last_batches()
                before = batch_ends(log)
                result = clean_log(
                    log,
                    OffsetMap(24 * op[1]),  # type: ignore[operator]
                    first_dirty=first_dirty,
                    first_uncleanable=min(log.active_segment.base_offset, log.high_watermark),
                    now_ms=now,
                    delete_retention_ms=RETENTION,
                    last_batches=last_batches,
                )
                assert not result.abandoned
                check_producers(log, before, last_batches)
                for offset in model.records:
                    if offset < result.end_offset:
                        model.reached_at.setdefault(offset, now)
                checkpoint = result.end_offset
            elif kind == "wait":
                now += op[1]  # type: ignore[operator]
            elif kind == "truncate":
                # Only what no pass reached, as replication truncates only above the high
                # watermark, which bounds every pass: a record superseded by one truncated
                # away would otherwise be the latest of its key again, after its removal.
                target = max(checkpoint, log.log_start_offset, int(end * op[1]))  # type: ignore[operator]
                log.truncate_to(target)
                model.truncate(target)
                # Into a gap (an expired tombstone, the last batch a pass reached), the log
                # ends after its last batch left, as at a reopening.
                assert not [o for o in model.records if log.log_end_offset <= o]
                end = min(end, log.log_end_offset)
                log.high_watermark = log.log_end_offset
            else:  # a crash, then a reopening that recovers from the persisted recovery point
                log.close_without_flush()
                log = open_log(directory, CONFIG, fs=NO_SYNC_FS)
                log.high_watermark = log.log_end_offset
            check(log, model, now, end)
        # Finally: a crash, recovery of everything, and the same records.
        content = read_log(log)
        log.close_without_flush()
        log = open_log(directory, CONFIG, fs=NO_SYNC_FS, recovery_point=0)
        assert read_log(log) == content
    finally:
        log.close_without_flush()
