"""The `replog` Spark data source: batch and streaming reads of committed records.

    spark.read.format("replog").option("bootstrap.servers", "...").option("subscribe", "t").load()
    spark.readStream.format("replog")...load()

`ReplogDataSource` is the Python Data Source (pyspark >= 4.2) named `replog`; the options and
the schema are those of Spark's Kafka source (`replog.spark.options`, `replog.spark.arrow`).

- Batch (`ReplogBatchReader`): at the first action, the driver resolves start and end per
  partition ("latest" = the high watermark then) and plans one task per range
  (`replog.spark.planning`); the DataFrame is a snapshot of that plan.
- Streaming (`ReplogStreamReader`, with `Trigger.AvailableNow` support): offsets are
  `{"topic": {"partition": next_offset}}` (`replog.spark.offsets`); the initial offset comes
  from `startingOffsets`; each micro-batch ends at the high watermarks (limited by
  `maxOffsetsPerTrigger`, or by the snapshot taken when an availableNow run starts), and waits
  for `minOffsetsPerTrigger` new offsets unless `maxTriggerDelay` has passed
  (`replog.spark.trigger_delay`; not when Spark asks for everything available, as for
  `Trigger.Once`). As in Spark's Kafka source, the wait applies in an availableNow run too: a
  run whose rest (up to its snapshot) is below the minimum ends there, and the next run, whose
  first micro-batch always passes, reads it. Partitions created later are read from offset 0
  (records already deleted there count as data loss, as in Spark's Kafka source). A restarted
  query resumes from the offsets Spark checkpointed, and a replayed micro-batch reads exactly
  its logged range.
- Data loss seen when a micro-batch is planned, as Spark's Kafka source sees it: partitions no
  longer in the cluster, and an HW below the partition's start (the topic re-created, or its
  log truncated: "offset was changed from A to B"). With `failOnDataLoss=true` that fails the
  query (`DataLossError`); with false it is logged, a gone partition stays where it was, and
  a moved-back one ends the micro-batch at its new HW (no range for it), so the next one reads
  from there. An HW below the start is read again first (`HW_RECHECKS` times, as Spark's
  Kafka source asks again): a new leader's HW can start lower for a moment.
- Tasks (`read`) run on executors with raw fetches of one partition (`replog.spark.range_reader`
  over `replog.spark.partition_fetcher`) and yield Arrow record batches.

Rules:
- Every object Spark pickles (data source, readers, partitions) holds plain data only; clients
  are opened lazily where they are used (the driver's `ClusterView`, a task's
  `PartitionFetcher`).
- Options are checked when a reader is built, i.e. at planning, with errors naming the option.
- Offsets by timestamp are looked up before the bounds are read, so a record written in
  between cannot put a start above the end it is planned with.
- `read` accepts the plain `InputPartition(None)` Spark substitutes for an empty plan.
- The sink classes live in `replog.spark.sink` and are imported when a write is planned.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from replog.clock import monotonic_ms
from replog.common import TopicPartitionKey
from replog.spark.arrow import schema_ddl
from replog.spark.cluster_view import ClusterView
from replog.spark.errors import log, report_data_loss
from replog.spark.fetch_sessions import worker_sessions
from replog.spark.offsets import describe, from_offset_dict, to_offset_dict
from replog.spark.options import (
    ByTimestamp,
    Mode,
    SourceOptions,
    parse_options,
)
from replog.spark.planning import (
    Bounds,
    OffsetRange,
    check_covers,
    check_order,
    moved_back,
    next_end,
    plan_ranges,
    rate_limit,
    resolve_end,
    resolve_start,
)
from replog.spark.range_reader import read_range
from replog.spark.trigger_delay import TriggerDelay

if TYPE_CHECKING:
    from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter

NAME = "replog"
HW_RECHECKS = 3  # Spark's Kafka source: fetchOffset.numRetries
HW_RECHECK_INTERVAL_S = 1.0  # and fetchOffset.retryIntervalMs


class RangePartition(InputPartition):
    """One task: one offset range of one partition (picklable)."""

    def __init__(self, piece: OffsetRange) -> None:
        super().__init__(piece)
        self.piece = piece

    def __repr__(self) -> str:
        p = self.piece
        return f"RangePartition({p.topic}-{p.partition} [{p.start}, {p.end}))"


class ReplogDataSource(DataSource):
    """`format("replog")` (module docstring)."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        # Only includeHeaders matters here; the full check happens when a reader is built, so
        # a write (whose options are the sink's) never trips over read options.
        flag = str(self.options.get("includeHeaders", "false")).strip().lower()
        return schema_ddl(flag == "true")

    def reader(self, schema: StructType) -> ReplogBatchReader:
        return ReplogBatchReader(parse_options(self.options, Mode.BATCH), schema)

    def streamReader(self, schema: StructType) -> ReplogStreamReader:
        return ReplogStreamReader(parse_options(self.options, Mode.STREAMING), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from replog.spark.sink import ReplogWriter

        return ReplogWriter(dict(self.options), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from replog.spark.sink import ReplogStreamWriter

        return ReplogStreamWriter(dict(self.options), schema, overwrite)


def _arrow_schema(schema: StructType) -> pa.Schema:
    return to_arrow_schema(schema, timezone="UTC")


def _start_positions(
    options: SourceOptions, view: ClusterView, partitions: Sequence[TopicPartitionKey]
) -> tuple[dict[TopicPartitionKey, int], dict[TopicPartitionKey, Bounds]]:
    """Where `partitions` start, and the bounds read to resolve it (module docstring: offsets
    by timestamp first, then the bounds, whose HW is then at or above any offset found)."""
    spec = options.starting
    found: dict[TopicPartitionKey, int | None] | None = None
    if isinstance(spec, ByTimestamp):
        check_covers(spec, partitions)
        times = {
            tp: spec.everywhere if spec.per_partition is None else spec.per_partition[tp]
            for tp in partitions
        }
        found = view.offsets_for_times({tp: t for tp, t in times.items() if t is not None})
    bounds = view.bounds(partitions)
    return resolve_start(spec, bounds, found), bounds


def _read(
    partition: InputPartition, options: SourceOptions, schema: StructType
) -> Iterator[pa.RecordBatch]:
    if not isinstance(partition, RangePartition):
        return iter(())  # Spark's stand-in for an empty plan
    return read_range(partition.piece, options, _arrow_schema(schema))


class ReplogBatchReader(DataSourceReader):
    """A batch read: one planned snapshot of committed offsets (module docstring)."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def partitions(self) -> list[InputPartition]:
        # The planning worker keeps its Admin for the next planning (`cluster_view`).
        view = ClusterView(
            self.options.admin_settings(),
            strict=True,
            sessions=worker_sessions(),
            isolation_level=self.options.isolation_level,
        )
        planned = False
        try:
            start, bounds = _start_positions(
                self.options, view, view.partitions(self.options.subscription)
            )
            planned = True
        finally:
            view.close(keep=planned)
        end = resolve_end(self.options.ending, bounds)
        check_order(start, end)
        ranges = plan_ranges(start, end, self.options.min_partitions)
        return [RangePartition(piece) for piece in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition, self.options, self.schema)


class ReplogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A streaming read (module docstring). One instance lives on the driver for the whole
    query; executors get pickled copies that only `read`."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self._view = ClusterView(
            options.admin_settings(), strict=False, isolation_level=options.isolation_level
        )
        self._target: dict[TopicPartitionKey, int] | None = None  # availableNow snapshot
        self._latest: dict[TopicPartitionKey, int] | None = None  # last HWs seen
        minimum = options.min_offsets_per_trigger
        self._delay = (
            None if minimum is None else TriggerDelay(minimum, options.max_trigger_delay_ms)
        )

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_view"] = ClusterView(
            self.options.admin_settings(),
            strict=False,
            isolation_level=self.options.isolation_level,
        )
        return state

    def _high_watermarks(self) -> dict[TopicPartitionKey, int]:
        bounds = self._view.bounds(self._view.partitions(self.options.subscription))
        self._latest = {tp: b.latest for tp, b in bounds.items()}
        return self._latest

    def initialOffset(self) -> dict[str, dict[str, int]]:
        partitions = self._view.partitions(self.options.subscription)
        start, bounds = _start_positions(self.options, self._view, partitions)
        if self._target is not None:
            # A new availableNow query: Spark asks for the snapshot first, then for the start,
            # which may be resolved against HWs that moved meanwhile ("latest" above the
            # snapshot). Spark's Kafka source reads its snapshot after the start; so does
            # this, from the bounds just read, rather than taking the start above the
            # snapshot for an HW gone back and re-reading it for seconds.
            self._target = self._latest = {tp: b.latest for tp, b in bounds.items()}
        return to_offset_dict(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        # The API has no composite limit (Kafka's source gives Spark min and max together):
        # the maximum is Spark's limit, the minimum and its delay come from the options. A
        # minimum alone is ReadMinRows, so Spark's "everything" (ReadAllAvailable, as for
        # Trigger.Once) still tells the two apart.
        options = self.options
        if options.max_offsets_per_trigger is not None:
            return ReadMaxRows(options.max_offsets_per_trigger)
        if options.min_offsets_per_trigger is not None:
            return ReadMinRows(options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._high_watermarks()

    def _ends_from(self, begin: Mapping[TopicPartitionKey, int]) -> dict[TopicPartitionKey, int]:
        """The HWs the next micro-batch may end at: the availableNow snapshot or the HWs now,
        an HW below its start read again first (module docstring)."""
        latest = dict(self._target) if self._target is not None else self._high_watermarks()
        for _ in range(HW_RECHECKS):
            behind = moved_back(begin, latest)
            if not behind:
                break
            time.sleep(HW_RECHECK_INTERVAL_S)
            fresh = self._high_watermarks()
            if self._target is None:
                latest = fresh
                continue
            for tp in behind:
                if fresh.get(tp, -1) >= begin[tp]:
                    # The snapshot caught an HW low for a moment: nothing more of this
                    # partition in this run (the next run reads on from its start).
                    latest[tp] = self._target[tp] = begin[tp]
        return latest

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, dict[str, int]]:
        begin = from_offset_dict(start, "start offset")
        latest = self._ends_from(begin)
        gone = sorted(tp for tp in begin if tp not in latest)
        if gone and self._target is None:
            message = (
                f"partitions {describe({tp: begin[tp] for tp in gone})} are no longer in the "
                "cluster (topic deleted?)"
            )
            report_data_loss(message, self.options.fail_on_data_loss)
        behind = moved_back(begin, latest)
        if behind:
            changes = ", ".join(
                f"{t}-{p}'s offset was changed from {begin[(t, p)]} to {hw}"
                for (t, p), hw in behind.items()
            )
            message = (
                f"partition {changes} (the topic re-created, or its log truncated): some data "
                "may have been missed"
            )
            report_data_loss(
                message, self.options.fail_on_data_loss, instead="reading on from there"
            )
        end = next_end(begin, latest)
        delay = self._delay
        if (
            delay is not None
            and not isinstance(limit, ReadAllAvailable)
            and not delay.admits(begin, end, monotonic_ms())
        ):
            if self._target is not None:
                # Spark ends an availableNow run at the first trigger that makes no
                # micro-batch; say why records below its snapshot are left for the next run.
                log.info(
                    "availableNow run ends before its snapshot: %d records left are fewer "
                    "than minOffsetsPerTrigger (%d) and maxTriggerDelay has not passed; the "
                    "next run reads them",
                    sum(max(0, end[tp] - begin.get(tp, 0)) for tp in end),
                    delay.min_offsets,
                )
            return to_offset_dict(begin)  # no micro-batch yet (trigger_delay)
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(begin, end, limit.max_rows)
        return to_offset_dict(end)

    def reportLatestOffset(self) -> dict[str, dict[str, int]] | None:
        return None if self._latest is None else to_offset_dict(self._latest)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin = from_offset_dict(start, "start offset")
        finish = from_offset_dict(end, "end offset")
        ranges = plan_ranges(begin, finish, self.options.min_partitions)
        return [RangePartition(piece) for piece in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition, self.options, self.schema)

    def commit(self, end: dict[str, Any]) -> None:
        # Progress lives in Spark's checkpoint; nothing to record in replog (and commit is
        # lazy: it arrives one batch late).
        pass

    def stop(self) -> None:
        self._view.close()
