"""The Spark source over a compacted topic: a log cleaned by the storage layer's pass (sparse
batches, an empty producer batch, gaps between offsets; `tests/compacted_log.py`).

- The columnar decoders take the dense batches of an answer and the numpy decoder's
  record-by-record step its sparse ones (offsets from their deltas), the rows joined in offset
  order: the same rows as the strict decoder gives for all, over batches the cleaner's own
  filter rewrote (a Hypothesis property); deltas that do not increase are left to the strict
  decoder, which names them.
- A task's range read over the cleaned log returns every record the range holds, once, and
  ends: the offsets the cleaner removed (inside the range, at its start, at its end) are not
  data loss and are never asked for again; an answer of only an empty batch moves the read on.
- A task's real fetcher against a leader that cleaned its own log, through the leader's Kafka
  listener: each range gives exactly the records the cleaned log holds in it.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import BinaryType, LongType, StructField, StructType

from replog.errors import InvalidRecordError
from replog.record import RecordBatch, build_batch
from replog.record.header import compute_crc, read_header
from replog.spark import batch_columns, range_reader
from replog.spark.batch_columns import decode_batches
from replog.spark.fetch_sessions import SessionPool
from replog.spark.options import Mode, parse_options
from replog.spark.partition_fetcher import FetchAnswer
from replog.spark.planning import OffsetRange
from replog.storage.cleaner.log_cleaning import clean_log
from replog.storage.cleaner.offset_map import OffsetMap
from replog.testing import ManualClock
from tests.compacted_log import T0, CleanedLog, Entry, cleaned_log, sparse_batch
from tests.server.data_plane.test_replica_manager import produce
from tests.server.kafka.compacted_listener import compacted_listener

SCHEMA = to_arrow_schema(
    StructType(
        [
            StructField("offset", LongType()),
            StructField("key", BinaryType()),
            StructField("value", BinaryType()),
        ]
    ),
    timezone="UTC",
)


@pytest.fixture
def log(tmp_path: Path) -> CleanedLog:
    return cleaned_log(tmp_path / "t-0")


def test_an_answer_mixing_dense_and_sparse_batches_decodes_as_the_strict_decoder(
    log: CleanedLog,
) -> None:
    # A dense batch past the log's end, so the answer has dense, sparse, dense runs.
    extra = build_batch([(0, b"x", b"y" * 10, ())] * 3, base_offset=log.end_offset)
    data = b"".join([*log.batches, extra])
    batches, at = [], 0
    while at < len(data):
        header = read_header(data, at)
        batches.append((at, header))
        at += header.size_in_bytes
    columns = decode_batches(memoryview(data), batches, where="t-0")
    expected = [
        (record.offset, record.key, record.value)
        for _, header in batches
        for record in RecordBatch.parse(data, _position(batches, header), sparse=True).records()
    ]
    rows = list(
        zip(
            columns.offsets.tolist(),
            columns.keys.to_pylist(),
            columns.values.to_pylist(),
            strict=True,
        )
    )
    assert rows == expected
    assert len(columns.timestamps_us) == len(columns.timestamp_types) == len(expected)


def _position(batches: list[tuple[int, Any]], header: Any) -> int:
    return next(at for at, h in batches if h is header)


class CleanedFetcher:
    """`PartitionFetcher`'s surface over `log`: `per_answer` batches from each position."""

    def __init__(self, log: CleanedLog, per_answer: int) -> None:
        self.log = log
        self.per_answer = per_answer
        self.config = SimpleNamespace(
            check_crcs=True,
            request_timeout_ms=30_000,
            max_partition_fetch_bytes=8 << 20,
            isolation_level="read_committed",
        )
        self.asked: list[int] = []
        self.last_failure: str | None = None

    def submit(self, position: int, deadline_ms: int, max_bytes: int | None = None) -> Any:
        return position

    def wait(self, future: Any, deadline_ms: int) -> FetchAnswer | None:
        self.asked.append(future)
        data = self.log.answer_from(future, self.per_answer)
        return FetchAnswer(memoryview(data), self.log.end_offset, 0)

    def log_start_offset(self, timeout_ms: int) -> int:
        return 0

    def high_watermark(self, timeout_ms: int) -> int:
        return self.log.end_offset

    def close(self, keep: bool = False) -> None:
        pass


def read(
    monkeypatch: pytest.MonkeyPatch, fetcher: CleanedFetcher, start: int, end: int
) -> list[Entry]:
    monkeypatch.setattr(range_reader, "PartitionFetcher", lambda tp, settings, sessions: fetcher)
    options = parse_options(
        {
            "bootstrap.servers": "scripted:9092",
            "subscribe": "t",
            "pollTimeoutMs": "2000",
            "failOnDataLoss": "true",
        },
        Mode.BATCH,
    )
    return range_entries(options, start, end)


def range_entries(options: Any, start: int, end: int) -> list[Entry]:
    """What a task reading t-0's offsets [start, end) returns, as entries."""
    found: list[Entry] = []
    for batch in range_reader.read_range(OffsetRange("t", 0, start, end), options, SCHEMA):
        found += zip(
            batch.column("offset").to_pylist(),
            batch.column("key").to_pylist(),
            batch.column("value").to_pylist(),
            strict=True,
        )
    return found


@pytest.mark.parametrize("per_answer", [1, 3])
def test_a_range_over_a_cleaned_log_reads_what_it_holds_and_ends(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    log: CleanedLog,
    per_answer: int,
) -> None:
    caplog.set_level(logging.WARNING)
    # The whole log; from inside the removed offsets to inside a sparse batch; a range that
    # holds only removed offsets and the empty batch.
    empty_end = read_header(log.batches[0]).next_offset
    for start, end in [(0, log.end_offset), (5, 33), (0, empty_end + 3)]:
        fetcher = CleanedFetcher(log, per_answer)
        found = read(monkeypatch, fetcher, start, end)
        assert found == [e for e in log.entries if start <= e[0] < end]
        assert len(fetcher.asked) == len(set(fetcher.asked))  # never the same offset twice
    assert not [r for r in caplog.records if "lost" in r.getMessage()]


def walk(data: bytes) -> list[tuple[int, Any]]:
    found, at = [], 0
    while at < len(data):
        header = read_header(data, at)
        found.append((at, header))
        at += header.size_in_bytes
    return found


def rows(columns: Any) -> list[tuple[int, int, bytes | None, bytes | None]]:
    return list(
        zip(
            columns.offsets.tolist(),
            columns.timestamps_us.tolist(),
            columns.keys.to_pylist(),
            columns.values.to_pylist(),
            strict=True,
        )
    )


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.lists(
            st.tuples(st.one_of(st.none(), st.binary(max_size=200)), st.booleans()),
            min_size=1,
            max_size=120,
        ).filter(lambda rows: any(keep for _, keep in rows)),
        min_size=1,
        max_size=4,
    )
)
def test_sparse_batches_decode_with_numpy_as_the_strict_decoder_decodes_them(
    answer: list[list[tuple[bytes | None, bool]]],
) -> None:
    batches, base = [], 0
    for spec in answer:
        batches.append(sparse_batch([v for v, _ in spec], [k for _, k in spec], base_offset=base))
        base += len(spec) + 3
    data = b"".join(batches)
    found = walk(data)
    expected = [
        (r.offset, r.timestamp * 1000, r.key, r.value)
        for at, _ in found
        for r in RecordBatch.parse(data, at, sparse=True).records()
    ]
    sparse = [(at, h) for at, h in found if h.records_count != h.last_offset_delta + 1]
    if sparse:
        assert rows(batch_columns._sparse_vectorised(data, sparse, "t-0")) == [
            e for e in expected if any(h.base_offset <= e[0] <= h.last_offset for _, h in sparse)
        ]
    assert rows(decode_batches(memoryview(data), found, where="t-0")) == expected


def test_sparse_deltas_that_do_not_increase_are_the_strict_decoder_s_error() -> None:
    batch = bytearray(sparse_batch([b"a", b"b", b"c", b"d"], [True, False, True, True]))
    at, deltas = 61, []
    while at < len(batch):
        deltas.append(at + 3)  # after the length, attributes and timestamp delta bytes
        at += 1 + (batch[at] >> 1)
    batch[deltas[2]] = 2 << 1  # deltas 0, 2, 2
    batch[17:21] = compute_crc(batch, 0, len(batch)).to_bytes(4, "big")
    found = walk(bytes(batch))
    with pytest.raises(batch_columns._NotVectorised):
        batch_columns._sparse_vectorised(bytes(batch), found, "t-0")
    with pytest.raises(InvalidRecordError, match="offset delta 2, expected 3 to 3"):
        decode_batches(bytes(batch), found, where="t-0")


# --- a Spark task against a real leader that cleaned its log ---------------------------------


def test_a_task_reads_a_partition_its_leader_cleaned_through_the_kafka_listener(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The leader (a node behind its own Kafka listener, on a loop of its own thread) holds
    300 keyed records, rolled and cleaned by `clean_log`; the task's real fetcher reads ranges
    of it (the whole log, from inside removed offsets, one ending in removed offsets) and gets
    exactly the records the cleaned log holds in each."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="compacted-leader", daemon=True)
    thread.start()
    listening = compacted_listener(tmp_path, ManualClock())
    pool = SessionPool()
    monkeypatch.setattr(range_reader, "worker_sessions", lambda: pool)

    def on_loop(call: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(call, loop).result(30)

    try:
        node, address = on_loop(listening.__aenter__())
        for start in range(0, 300, 30):  # batches of 30 records over 40 keys, in random order
            rows_ = [
                (T0 + i, b"k%d" % random.Random(7 * i).randrange(40), b"v%d" % i, ())
                for i in range(start, start + 30)
            ]
            on_loop(produce(node, build_batch(rows_), acks=1))
        kept = on_loop(_cleaned(node))
        end = node.log().log_end_offset
        options = parse_options(
            {"bootstrap.servers": address, "subscribe": "t", "pollTimeoutMs": "5000"}, Mode.BATCH
        )
        first_gap = next(b[0] - 1 for a, b in itertools.pairwise(kept) if b[0] - a[0] > 1)
        for start, stop in [(0, end), (first_gap, end), (0, first_gap)]:
            assert range_entries(options, start, stop) == [e for e in kept if start <= e[0] < stop]
    finally:
        pool.close()
        on_loop(listening.__aexit__(None, None, None))
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


async def _cleaned(node: Any) -> list[Entry]:
    """Roll and clean the node's log of t-0; the records it then holds."""
    log = node.log()
    log.roll()
    clean_log(
        log,
        OffsetMap(24 * 100),
        first_dirty=0,
        first_uncleanable=log.active_segment.base_offset,
        now_ms=T0,
        delete_retention_ms=1 << 40,
    )
    return [
        (r.offset, r.key, r.value)
        for _, batch in log.read_batches(0)
        for r in RecordBatch.parse(batch, sparse=True).records()
    ]
