"""The `replog` source reads read_committed unless `kafka.isolation.level` says otherwise:
the tasks' fetchers ask with that level, a range read skips the records of the aborted
transactions each answer names and stops at the answer's last stable offset; with
read_uncommitted it returns the aborted records. Against a scripted fetcher, no cluster."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import LongType, StructField, StructType

from replog.spark import range_reader
from replog.spark.errors import SourceOptionError
from replog.spark.options import Mode, parse_options
from replog.spark.partition_fetcher import FetchAnswer
from replog.spark.planning import OffsetRange
from tests.client.txn_batches import data_batch, marker_batch

SCHEMA = to_arrow_schema(StructType([StructField("offset", LongType())]), timezone="UTC")

# 0-1 aborted (producer 5), 2 plain, 3 ABORT, 4-5 committed (producer 6), 6 COMMIT, 7 plain.
BATCHES = [
    (0, data_batch(0, [b"a", b"a"], pid=5, txn=True)),
    (2, data_batch(2, [b"p"])),
    (3, marker_batch(3, 5, aborted=True)),
    (4, data_batch(4, [b"c", b"c"], pid=6, txn=True)),
    (6, marker_batch(6, 6, aborted=False)),
    (7, data_batch(7, [b"p"])),
]
ABORTED = ((5, 0, 3),)  # producer id, first offset, marker offset


class TwoBatchFetcher:
    """Answers two batches from the position, at the isolation level the task asked for,
    naming the aborted transactions they overlap as a leader does."""

    def __init__(self, settings: Mapping[str, object]) -> None:
        self.isolation = settings["isolation.level"]
        self.config = type(
            "Config",
            (),
            {
                "check_crcs": True,
                "max_partition_fetch_bytes": 1 << 20,
                "isolation_level": self.isolation,
            },
        )

    def submit(self, position: int, deadline_ms: int, max_bytes: int | None = None) -> Any:
        return position

    def wait(self, position: int, deadline_ms: int) -> FetchAnswer:
        chosen = [(base, raw) for base, raw in BATCHES if base + 2 > position][:2]
        last = chosen[-1][0] + 1 if chosen else position
        aborted = None
        if self.isolation == "read_committed":
            # None when no aborted transaction overlaps, as a leader may say it.
            aborted = (
                tuple((p, f) for p, f, end in ABORTED if f <= last and end >= position) or None
            )
        records = b"".join(raw for _, raw in chosen)
        return FetchAnswer(memoryview(records), 8, 0, 8, aborted)

    def close(self, keep: bool = False) -> None:
        pass


def read(monkeypatch: pytest.MonkeyPatch, **extra: str) -> tuple[list[int], str]:
    made: list[TwoBatchFetcher] = []

    def fetcher(tp: object, settings: Mapping[str, object], sessions: object) -> TwoBatchFetcher:
        made.append(TwoBatchFetcher(settings))
        return made[-1]

    monkeypatch.setattr(range_reader, "PartitionFetcher", fetcher)
    options = parse_options(
        {"bootstrap.servers": "scripted:9092", "subscribe": "t", **extra}, Mode.BATCH
    )
    offsets: list[int] = []
    for batch in range_reader.read_range(OffsetRange("t", 0, 0, 8), options, SCHEMA):
        offsets += batch.column("offset").to_pylist()
    return offsets, str(made[0].isolation)


def test_the_source_reads_read_committed_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    assert read(monkeypatch) == ([2, 4, 5, 7], "read_committed")


def test_read_uncommitted_returns_the_aborted_records(monkeypatch: pytest.MonkeyPatch) -> None:
    offsets, isolation = read(monkeypatch, **{"kafka.isolation.level": "read_uncommitted"})
    assert (offsets, isolation) == ([0, 1, 2, 4, 5, 7], "read_uncommitted")


def test_the_options_name_the_isolation_level_and_refuse_a_bad_one() -> None:
    given = {"bootstrap.servers": "b:9092", "subscribe": "t"}
    assert parse_options(given, Mode.BATCH).consumer_settings()["isolation.level"] == (
        "read_committed"
    )
    chosen = parse_options({**given, "kafka.isolation.level": "read_uncommitted"}, Mode.BATCH)
    assert chosen.isolation_level == "read_uncommitted"
    with pytest.raises(SourceOptionError, match=r"isolation\.level"):
        parse_options({**given, "kafka.isolation.level": "dirty"}, Mode.BATCH)
