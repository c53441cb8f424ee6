"""The driver's side of the source against a scripted cluster view: no cluster, no Spark.

- A micro-batch planned after a partition's HW fell below its start (topic re-created, log
  truncated) reports data loss as Spark's Kafka source does: `DataLossError` naming the
  partition and both offsets, or with `failOnDataLoss=false` a warning and an end at the new
  HW with no range planned, the next micro-batch reading on from there. An HW low for a
  moment (a new leader's) is read again and is not data loss, in an availableNow run too.
- Offsets by timestamp are looked up before the bounds are read, so records written in
  between cannot put a start above the end it is planned with.
- `minOffsetsPerTrigger` holds micro-batches back until enough offsets are available or
  `maxTriggerDelay` has passed, then `maxOffsetsPerTrigger` limits them, as in Spark's Kafka
  source, in an availableNow run too (which then ends with the rest left for the next run);
  Spark's "everything" limit (`Trigger.Once`) is not held back.
"""

from __future__ import annotations

import logging

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows
from pyspark.sql.types import StructType

from replog.common import TopicPartitionKey
from replog.spark import source
from replog.spark.errors import DataLossError
from replog.spark.options import Mode, Subscription, parse_options
from replog.spark.planning import Bounds, OffsetRange
from replog.spark.source import RangePartition, ReplogBatchReader, ReplogStreamReader

T0 = ("t", 0)


class ScriptedView:
    """`ClusterView`'s surface: partition t-0, whose HW is the next of `high_watermarks` at
    each read (the last one stays); a timestamp lookup finds `found` and, as records are
    written meanwhile, raises the HW to `found + 3`."""

    def __init__(self, *high_watermarks: int, found: int = 0) -> None:
        self.high_watermarks = list(high_watermarks)
        self.found = found
        self.reads = 0
        self.closed_keeping: bool | None = None  # None: not closed; else close's `keep`

    def partitions(self, subscription: Subscription) -> list[TopicPartitionKey]:
        return [T0]

    def bounds(self, partitions: list[TopicPartitionKey]) -> dict[TopicPartitionKey, Bounds]:
        self.reads += 1
        latest = self.high_watermarks.pop(0) if len(self.high_watermarks) > 1 else None
        return {T0: Bounds(0, self.high_watermarks[0] if latest is None else latest)}

    def offsets_for_times(
        self, times: dict[TopicPartitionKey, int]
    ) -> dict[TopicPartitionKey, int]:
        self.high_watermarks = [self.found + 3]
        return {T0: self.found}

    def close(self, keep: bool = False) -> None:
        self.closed_keeping = keep


def stream(
    monkeypatch: pytest.MonkeyPatch,
    view: ScriptedView,
    *,
    fail_on_data_loss: bool = True,
    **extra: str,
) -> ReplogStreamReader:
    monkeypatch.setattr(source, "HW_RECHECK_INTERVAL_S", 0)
    options = {"bootstrap.servers": "scripted:9092", "subscribe": "t", **extra}
    options["failOnDataLoss"] = str(fail_on_data_loss).lower()
    reader = ReplogStreamReader(parse_options(options, Mode.STREAMING), StructType())
    reader._view = view  # type: ignore[assignment]
    return reader


def ranges(reader: ReplogStreamReader, start: dict, end: dict) -> list[OffsetRange]:  # type: ignore[type-arg]
    return [p.piece for p in reader.partitions(start, end) if isinstance(p, RangePartition)]


AT_100 = {"t": {"0": 100}}


def test_an_hw_below_the_start_fails_the_query(monkeypatch: pytest.MonkeyPatch) -> None:
    view = ScriptedView(5)  # re-created with 5 records since the checkpoint at 100
    with pytest.raises(
        DataLossError, match=r"t-0's offset was changed from 100 to 5 .* some data may have"
    ):
        stream(monkeypatch, view).latestOffset(AT_100, ReadAllAvailable())
    assert view.reads == 1 + source.HW_RECHECKS  # read again first: it might have been brief


def test_without_fail_on_data_loss_the_next_batch_reads_from_the_new_hw(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    view = ScriptedView(5)
    reader = stream(monkeypatch, view, fail_on_data_loss=False)
    with caplog.at_level(logging.WARNING, "replog.spark"):
        end = reader.latestOffset(AT_100, ReadAllAvailable())
    assert end == {"t": {"0": 5}}
    assert "t-0's offset was changed from 100 to 5" in caplog.text
    assert "reading on from there (failOnDataLoss=false)" in caplog.text
    assert ranges(reader, AT_100, end) == []  # nothing read in this micro-batch
    view.high_watermarks = [130]
    later = reader.latestOffset(end, ReadAllAvailable())
    assert later == {"t": {"0": 130}}
    assert ranges(reader, end, later) == [OffsetRange("t", 0, 5, 130)]


def test_an_hw_low_for_a_moment_is_read_again_and_is_no_loss(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reader = stream(monkeypatch, ScriptedView(5, 120))
    assert reader.latestOffset(AT_100, ReadAllAvailable()) == {"t": {"0": 120}}
    # availableNow: a snapshot taken at the low HW reads nothing more of t-0 in this run
    reader = stream(monkeypatch, ScriptedView(5, 120))
    reader.prepareForTriggerAvailableNow()
    assert reader.latestOffset(AT_100, ReadAllAvailable()) == AT_100
    assert reader.latestOffset(AT_100, ReadAllAvailable()) == AT_100
    # and a snapshot below the start that stays so is data loss
    reader = stream(monkeypatch, ScriptedView(5))
    reader.prepareForTriggerAvailableNow()
    with pytest.raises(DataLossError, match="t-0's offset was changed from 100 to 5"):
        reader.latestOffset(AT_100, ReadAllAvailable())


def test_timestamps_are_looked_up_before_the_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    # HW 10 until the lookup, which finds offset 12 (written meanwhile; the HW is then 15).
    options = {"bootstrap.servers": "scripted:9092", "subscribe": "t", "startingTimestamp": "7"}
    view = ScriptedView(10, found=12)
    monkeypatch.setattr(
        source, "ClusterView", lambda settings, strict, sessions=None, isolation_level="": view
    )
    batch = ReplogBatchReader(parse_options(options, Mode.BATCH), StructType())
    assert [p.piece for p in batch.partitions()] == [OffsetRange("t", 0, 12, 15)]  # type: ignore[attr-defined]
    reader = stream(monkeypatch, ScriptedView(10, found=12))
    reader.options = parse_options(options, Mode.STREAMING)
    assert reader.initialOffset() == {"t": {"0": 12}}


def test_a_new_available_now_query_snapshots_after_resolving_its_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Spark calls prepareForTriggerAvailableNow (HW 100) before initialOffset, which resolves
    # "latest" against an HW that moved meanwhile (130): the run ends at 130, at once, with
    # no re-read of an HW that looked as if it went back.
    view = ScriptedView(100, 130)
    reader = stream(monkeypatch, view)
    reader.options = parse_options(
        {"bootstrap.servers": "scripted:9092", "subscribe": "t", "startingOffsets": "latest"},
        Mode.STREAMING,
    )
    reader.prepareForTriggerAvailableNow()
    start = reader.initialOffset()
    assert start == {"t": {"0": 130}}
    assert reader.latestOffset(start, ReadAllAvailable()) == start
    assert view.reads == 2  # the snapshot and the start: nothing read again


class Clock:
    """The driver's monotonic ms, moved by the test."""

    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def at(offset: int) -> dict[str, dict[str, int]]:
    return {"t": {"0": offset}}


def test_min_offsets_wait_for_enough_records_or_the_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(source, "monotonic_ms", clock)
    view = ScriptedView(103)
    reader = stream(monkeypatch, view, minOffsetsPerTrigger="10", maxTriggerDelay="30s")
    assert reader.getDefaultReadLimit() == ReadMinRows(10)
    limit = reader.getDefaultReadLimit()
    # The first ask after a start passes, as in Spark's Kafka source: 3 records are read.
    assert reader.latestOffset(AT_100, limit) == at(103)
    view.high_watermarks = [112]  # 9 new: not enough, no micro-batch (the start comes back)
    clock.now += 29_999
    assert reader.latestOffset(at(103), limit) == at(103)
    view.high_watermarks = [113]  # 10 new: enough, and the delay starts again
    clock.now += 1
    assert reader.latestOffset(at(103), limit) == at(113)
    view.high_watermarks = [114]
    clock.now += 29_999
    assert reader.latestOffset(at(113), limit) == at(113)
    clock.now += 1  # maxTriggerDelay since the last micro-batch: whatever is there
    assert reader.latestOffset(at(113), limit) == at(114)
    clock.now += 60_000  # past the delay with nothing new: still no micro-batch
    assert reader.latestOffset(at(114), limit) == at(114)


def test_min_and_max_offsets_together(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(source, "monotonic_ms", clock)
    view = ScriptedView(100)
    options = {"minOffsetsPerTrigger": "5", "maxOffsetsPerTrigger": "8", "maxTriggerDelay": "1m"}
    reader = stream(monkeypatch, view, **options)
    limit = reader.getDefaultReadLimit()
    assert limit == ReadMaxRows(8)  # Spark gets the maximum; the minimum is the source's
    assert reader.latestOffset(at(100), limit) == at(100)  # nothing yet
    view.high_watermarks = [104]
    clock.now += 1
    assert reader.latestOffset(at(100), limit) == at(100)  # 4 < 5
    view.high_watermarks = [130]
    clock.now += 1
    assert reader.latestOffset(at(100), limit) == at(108)  # enough: at most 8
    clock.now += 1
    assert reader.latestOffset(at(108), limit) == at(116)  # 22 available: 8 more


def test_everything_is_not_held_back(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(source, "monotonic_ms", clock)
    view = ScriptedView(100, 102)
    reader = stream(monkeypatch, view, minOffsetsPerTrigger="50", maxTriggerDelay="1h")
    reader.latestOffset(at(90), reader.getDefaultReadLimit())  # the first ask passes
    # Spark's ReadAllAvailable (Trigger.Once) reads the 2 records the minimum would hold back
    assert reader.latestOffset(at(100), ReadAllAvailable()) == at(102)


def test_an_available_now_run_is_held_back_as_kafkas_is(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Spark's Kafka source applies the minimum in an availableNow run too (its latestOffset
    gets Spark's default limit, min and max): the run ends at the first micro-batch held back,
    and the next run's first micro-batch passes. bench/spark_kafka_source_check.py checks the
    same run through format("kafka") and format("replog")."""
    clock = Clock()
    monkeypatch.setattr(source, "monotonic_ms", clock)
    options = {"minOffsetsPerTrigger": "3", "maxOffsetsPerTrigger": "4", "maxTriggerDelay": "1h"}
    reader = stream(monkeypatch, ScriptedView(10), **options)
    reader.prepareForTriggerAvailableNow()
    limit = reader.getDefaultReadLimit()
    assert reader.latestOffset(at(0), limit) == at(4)  # the first ask passes
    clock.now += 1
    assert reader.latestOffset(at(4), limit) == at(8)  # 6 left of the snapshot: enough
    clock.now += 1
    with caplog.at_level(logging.INFO, logger="replog.spark"):
        assert reader.latestOffset(at(8), limit) == at(8)  # 2 < 3: held back, the run ends
    assert "2 records left are fewer than minOffsetsPerTrigger (3)" in caplog.text
    clock.now += 3_600_000  # a run that lasts past maxTriggerDelay reads the rest
    assert reader.latestOffset(at(8), limit) == at(10)
    # The next run (a new reader) reads the rest at its first micro-batch.
    following = stream(monkeypatch, ScriptedView(10), **options)
    following.prepareForTriggerAvailableNow()
    assert following.latestOffset(at(8), following.getDefaultReadLimit()) == at(10)
