"""The Spark source over a compacted topic: a log cleaned by the storage layer's pass (sparse
batches, an empty producer batch, gaps between offsets; `tests/compacted_log.py`).

- The columnar decoders take the dense batches of an answer and the strict decoder its sparse
  ones, the rows joined in offset order: the same rows as the strict decoder gives for all.
- A task's range read over the cleaned log returns every record the range holds, once, and
  ends: the offsets the cleaner removed (inside the range, at its start, at its end) are not
  data loss and are never asked for again; an answer of only an empty batch moves the read on.
"""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import BinaryType, LongType, StructField, StructType

from replog.record import RecordBatch, build_batch
from replog.record.header import read_header
from replog.spark import range_reader
from replog.spark.batch_columns import decode_batches
from replog.spark.options import Mode, parse_options
from replog.spark.partition_fetcher import FetchAnswer
from replog.spark.planning import OffsetRange
from tests.compacted_log import CleanedLog, Entry, cleaned_log

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
            check_crcs=True, request_timeout_ms=30_000, max_partition_fetch_bytes=8 << 20
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
