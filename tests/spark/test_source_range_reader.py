"""A task's range read against a scripted fetcher on a fake clock: no cluster, no Spark.

- `pollTimeoutMs` bounds each wait without progress, not the whole range: fetches that each
  take most of it, and a consumer (Spark) that holds every batch for longer than it, still
  read the whole range, and so do fetches that only move the position (control batches); a
  partition that stops answering fails with `ReadTimeoutError` naming partition, range,
  offset reached and the fetcher's last failure.
- Data loss, with `failOnDataLoss` true (`DataLossError` naming the offsets) and false (a
  warning, the rest read): the topic deleted while reading; OFFSET_OUT_OF_RANGE below the log
  start (read on from there) and above the log end (the rest of the range lost); a log that
  ends at the position for a whole poll timeout (a re-created topic).
- The fetcher itself refuses a partition its topic no longer has.
- Fetch sizes: a task's first fetch asks for FIRST_FETCH_BYTES, each next one twice the last,
  up to `max.partition.fetch.bytes`; the fetcher puts the size asked into its request.
- A task keeps its fetcher's session for the worker's next task only after a whole read; a
  failed or stopped task closes it.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import LongType, StructField, StructType

from replog.client.config import consumer_config
from replog.client.records import TopicPartition
from replog.errors import OffsetOutOfRangeError, UnknownTopicOrPartitionError
from replog.record import build_batch
from replog.spark import range_reader
from replog.spark.errors import DataLossError, ReadTimeoutError
from replog.spark.options import Mode, parse_options
from replog.spark.partition_fetcher import FetchAnswer, PartitionFetcher
from replog.spark.planning import OffsetRange

SCHEMA = to_arrow_schema(StructType([StructField("offset", LongType())]), timezone="UTC")
PIECE = OffsetRange("t", 0, 0, 50)
POLL_MS = 1000
FETCH_MS = 300  # each fetch takes this long on the fake clock


class ScriptedFetcher:
    """`PartitionFetcher`'s surface over a log of ten 5-record batches [0, 50), one batch per
    answer. `script(position)` may change the log (log_start, log_end) or raise before each
    answer."""

    def __init__(self, clock: list[int], script: Callable[[ScriptedFetcher, int], None]) -> None:
        self.clock = clock
        self.script = script
        self.config = SimpleNamespace(
            check_crcs=True,
            request_timeout_ms=30_000,
            max_partition_fetch_bytes=8 << 20,
            isolation_level="read_committed",
        )
        self.log_start = 0
        self.log_end = 50  # also the high watermark
        self.control_below = 0  # batches below this offset are control batches
        self.silent = False  # no answer at all: a leader that stopped answering
        self.answered_hw: int | None = None  # a fetch answer's HW other than ListOffsets' one
        self.last_failure: str | None = None  # why the latest attempt got no answer
        self.sizes: list[int | None] = []  # the partition bytes each fetch asked for
        self.closed_keeping: bool | None = None  # None: not closed; else close's `keep`

    def submit(self, position: int, deadline_ms: int, max_bytes: int | None = None) -> Any:
        self.sizes.append(max_bytes)
        return (position, deadline_ms)

    def wait(self, future: Any, deadline_ms: int) -> FetchAnswer | None:
        position, fetch_deadline = future
        self.clock[0] += FETCH_MS
        self.script(self, position)
        if self.silent:  # retried until the fetch's deadline, as the real fetcher does
            self.clock[0] = max(self.clock[0], fetch_deadline)
            self.last_failure = "fetch of t-0 from broker 1 at b1:9092 failed: timed out"
            return None
        self.last_failure = None
        if not self.log_start <= position <= self.log_end:
            raise OffsetOutOfRangeError(f"t-0: fetch offset {position} is out of range")
        base = position - position % 5
        records = b""
        if base + 5 <= self.log_end:
            control = base < self.control_below
            records = build_batch([(0, None, b"v", ())] * 5, base_offset=base, is_control=control)
        high_watermark = self.log_end if self.answered_hw is None else self.answered_hw
        if base + 5 > high_watermark:
            records = b""
        return FetchAnswer(memoryview(records), high_watermark, self.log_start)

    def log_start_offset(self, timeout_ms: int) -> int:
        return self.log_start

    def high_watermark(self, timeout_ms: int) -> int:
        return self.log_end

    def close(self, keep: bool = False) -> None:
        self.closed_keeping = keep


def read(
    monkeypatch: pytest.MonkeyPatch,
    script: Callable[[ScriptedFetcher, int], None] = lambda fetcher, position: None,
    *,
    fail_on_data_loss: bool = True,
    hold_ms: int = 0,
    fetcher: ScriptedFetcher | None = None,
) -> list[int]:
    """The offsets `read_range` gives for PIECE; the consumer holds each batch `hold_ms`."""
    clock = [0] if fetcher is None else fetcher.clock
    fetcher = ScriptedFetcher(clock, script) if fetcher is None else fetcher
    monkeypatch.setattr(range_reader, "PartitionFetcher", lambda tp, settings, sessions: fetcher)
    monkeypatch.setattr(range_reader, "monotonic_ms", lambda: clock[0])
    monkeypatch.setattr(range_reader, "time", SimpleNamespace(sleep=lambda s: _advance(clock, s)))
    options = parse_options(
        {
            "bootstrap.servers": "scripted:9092",
            "subscribe": "t",
            "pollTimeoutMs": str(POLL_MS),
            "failOnDataLoss": str(fail_on_data_loss).lower(),
        },
        Mode.BATCH,
    )
    offsets: list[int] = []
    for batch in range_reader.read_range(PIECE, options, SCHEMA):
        offsets += batch.column("offset").to_pylist()
        clock[0] += hold_ms
    return offsets


def _advance(clock: list[int], seconds: float) -> None:
    clock[0] += int(seconds * 1000)


def test_the_poll_timeout_bounds_each_wait_not_the_whole_range(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Ten fetches of 300 ms, and Spark holding each batch 5 s: 53 s for a 1 s poll timeout.
    assert read(monkeypatch, hold_ms=5 * POLL_MS) == list(range(50))

    # Six fetches in a row that move the position but yield nothing (control batches only).
    def markers_below_30(fetcher: ScriptedFetcher, position: int) -> None:
        fetcher.control_below = 30

    assert read(monkeypatch, markers_below_30) == list(range(30, 50))


def test_a_partition_that_stops_answering_times_out_naming_where_it_got(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def stop_at_25(fetcher: ScriptedFetcher, position: int) -> None:
        fetcher.silent = position >= 25

    with pytest.raises(
        ReadTimeoutError,
        match=r"t-0 offsets \[0, 50\) made no progress within pollTimeoutMs=1000: reached "
        r"offset 25; the latest fetch attempt: fetch of t-0 from broker 1 at b1:9092 failed: "
        r"timed out$",
    ):
        read(monkeypatch, stop_at_25)


def test_a_topic_deleted_while_reading_is_data_loss(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def delete_at_20(fetcher: ScriptedFetcher, position: int) -> None:
        if position >= 20:
            raise UnknownTopicOrPartitionError("topic 't' does not exist")

    with pytest.raises(
        DataLossError,
        match=r"t-0: offsets \[20, 50\) of the planned range \[0, 50\) are no longer in the "
        r"cluster .*topic 't' does not exist; set failOnDataLoss=false",
    ):
        read(monkeypatch, delete_at_20)
    with caplog.at_level(logging.WARNING, "replog.spark"):
        assert read(monkeypatch, delete_at_20, fail_on_data_loss=False) == list(range(20))
    assert "offsets [20, 50) of the planned range [0, 50) are no longer in the cluster" in (
        caplog.text
    )
    assert "skipped (failOnDataLoss=false)" in caplog.text


def test_one_unknown_topic_answer_is_asked_again_not_data_loss(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A broker behind on metadata may not know the topic yet: one answer proves nothing.
    answered = set()

    def lagging_once_at_20(fetcher: ScriptedFetcher, position: int) -> None:
        if position >= 20 and "lag" not in answered:
            answered.add("lag")
            raise UnknownTopicOrPartitionError("topic 't' does not exist")

    assert read(monkeypatch, lagging_once_at_20, fail_on_data_loss=False) == list(range(50))


def test_one_unknown_topic_answer_then_a_silent_leader_is_a_timeout_not_data_loss(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The unknown-topic answer is old news once a later attempt got past it: only one that
    # lasts until the poll timeout counts as a deleted topic.
    answered = set()

    def unknown_once_then_silent(fetcher: ScriptedFetcher, position: int) -> None:
        if position >= 20:
            if "unknown" not in answered:
                answered.add("unknown")
                raise UnknownTopicOrPartitionError("topic 't' does not exist")
            fetcher.silent = True

    with pytest.raises(ReadTimeoutError, match="reached offset 20"):
        read(monkeypatch, unknown_once_then_silent, fail_on_data_loss=False)


def test_a_stalled_read_below_a_stale_fetch_hw_is_a_timeout_not_data_loss(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A new leader's fetch answers carry the lower HW it inherited until its followers catch
    # up; ListOffsets (which refuses to answer that HW) says the records are there: the task
    # fails and Spark retries it, rather than skipping them.
    def stale_hw_from_20(fetcher: ScriptedFetcher, position: int) -> None:
        if position >= 20:
            fetcher.answered_hw = 20

    with pytest.raises(ReadTimeoutError, match="reached offset 20"):
        read(monkeypatch, stale_hw_from_20, fail_on_data_loss=False)


def test_offsets_below_the_log_start_are_skipped_to_it(monkeypatch: pytest.MonkeyPatch) -> None:
    def delete_records_at_20(fetcher: ScriptedFetcher, position: int) -> None:
        if position >= 20:
            fetcher.log_start = 30

    with pytest.raises(DataLossError, match=r"t-0: offsets \[20, 30\) .*\(log start offset 30"):
        read(monkeypatch, delete_records_at_20)
    got = read(monkeypatch, delete_records_at_20, fail_on_data_loss=False)
    assert got == list(range(20)) + list(range(30, 50))


@pytest.mark.parametrize(
    "log_end",
    [
        # An unclean election (or a re-created topic) left a log ending below the position:
        # the fetch says OFFSET_OUT_OF_RANGE.
        15,
        # A topic re-created with 20 records: fetches at 20 answer nothing and an HW of 20; for
        # a moment that could be a new leader's HW, for a whole poll timeout it is the end.
        20,
    ],
    ids=["out-of-range", "no-progress"],
)
def test_a_log_now_ending_at_or_before_the_position_loses_the_rest_of_the_range(
    monkeypatch: pytest.MonkeyPatch, log_end: int
) -> None:
    def truncate_at_20(fetcher: ScriptedFetcher, position: int) -> None:
        if position >= 20:
            fetcher.log_end = log_end

    with pytest.raises(
        DataLossError, match=rf"t-0: offsets \[20, 50\) .*\(its high watermark is now {log_end}"
    ):
        read(monkeypatch, truncate_at_20)
    assert read(monkeypatch, truncate_at_20, fail_on_data_loss=False) == list(range(20))


class _OnePartitionMetadata:
    updates_requested = 0

    async def partitions_for(self, topic: str, *, deadline_ms: int) -> tuple[object, ...]:
        return (object(),)

    def request_update(self) -> None:
        self.updates_requested += 1


def test_the_fetcher_refuses_a_partition_its_topic_no_longer_has() -> None:
    # Re-created with fewer partitions: the fetcher says so at once instead of retrying, and
    # asks for fresh metadata (the cached answer may predate partitions added since).
    fetcher = PartitionFetcher.__new__(PartitionFetcher)
    fetcher.tp = TopicPartition("t", 3)
    metadata = _OnePartitionMetadata()
    fetcher._metadata = metadata  # type: ignore[assignment]
    with pytest.raises(
        UnknownTopicOrPartitionError, match="partition t-3 does not exist: topic 't' has 1"
    ):
        asyncio.run(fetcher._leader(deadline_ms=0))
    assert metadata.updates_requested == 1


def test_a_task_s_fetches_start_small_and_double_up_to_the_configured_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The first answer is the task's start-up latency; later ones arrive while one is decoded.
    fetcher = ScriptedFetcher([0], lambda fetcher, position: None)
    assert read(monkeypatch, fetcher=fetcher) == list(range(50))
    mib = range_reader.FIRST_FETCH_BYTES
    assert mib == 1 << 20
    assert fetcher.sizes == [mib, 2 * mib, 4 * mib] + [8 * mib] * 7


@pytest.mark.parametrize(
    ("limit", "expected"),
    [
        (8 << 20, [1 << 20, 2 << 20, 4 << 20, 8 << 20, 8 << 20]),
        (3 << 20, [1 << 20, 2 << 20, 3 << 20, 3 << 20, 3 << 20]),
        (1 << 20, [1 << 20] * 5),
        (1000, [1000] * 5),  # a limit below the first size: every fetch at the limit
    ],
)
def test_fetch_sizes_double_from_the_first_up_to_the_limit(limit: int, expected: list[int]) -> None:
    assert list(itertools.islice(range_reader.fetch_sizes(limit), 5)) == expected


def test_the_fetcher_asks_for_the_size_it_is_given_else_the_configured_one() -> None:
    asked: list[int] = []

    class _Leader(PartitionFetcher):
        async def _leader(self, deadline_ms: int) -> tuple[int, str, int] | None:
            return 1, "b1:9092", 3

        async def _ask(self, node: int, address: str, ask: Any) -> FetchAnswer | None:
            asked.append(ask.partition_max_bytes)
            return FetchAnswer(memoryview(b""), 0, 0)

    fetcher = _Leader.__new__(_Leader)
    fetcher.tp = TopicPartition("t", 0)
    fetcher.config = consumer_config({"max.partition.fetch.bytes": "5000"})
    asyncio.run(fetcher._fetch(0, deadline_ms=10**12, max_bytes=1234))
    asyncio.run(fetcher._fetch(0, deadline_ms=10**12, max_bytes=None))
    assert asked == [1234, 5000]


def test_a_task_keeps_its_fetcher_s_session_only_after_reading_its_whole_range(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Whole: the session goes back to the worker's pool (`fetch_sessions`) for its next task.
    whole = ScriptedFetcher([0], lambda fetcher, position: None)
    assert read(monkeypatch, fetcher=whole) == list(range(50))
    assert whole.closed_keeping is True

    # Failed: closed, whatever its connections went through.
    def stop_at_25(fetcher: ScriptedFetcher, position: int) -> None:
        fetcher.silent = position >= 25

    failed = ScriptedFetcher([0], stop_at_25)
    with pytest.raises(ReadTimeoutError):
        read(monkeypatch, fetcher=failed)
    assert failed.closed_keeping is False

    # Stopped early by Spark (the generator closed after one batch): closed too.
    stopped = ScriptedFetcher([0], lambda fetcher, position: None)
    monkeypatch.setattr(range_reader, "PartitionFetcher", lambda tp, settings, sessions: stopped)
    options = parse_options({"bootstrap.servers": "scripted:9092", "subscribe": "t"}, Mode.BATCH)
    batches = range_reader.read_range(PIECE, options, SCHEMA)
    assert next(batches).num_rows > 0 and stopped.closed_keeping is None
    batches.close()
    assert stopped.closed_keeping is False
