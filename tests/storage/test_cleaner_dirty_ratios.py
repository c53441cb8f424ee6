"""A compacted log's dirty ratio for DescribeLogDirs (replog/storage/cleaner/dirty_ratios.py),
over real logs in a LogManager's dirs and their cleaner-offset-checkpoint files:

- a log never cleaned has every byte below its active segment dirty; after a pass, with the
  checkpoint at the pass's end, the cleaned segments are clean and only what was appended
  after them is dirty, in Kafka's byte counts;
- only compacted logs get one; a malformed checkpoint counts as none;
- the broker's DescribeLogDirs core carries it for compacted logs only.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from storage_helpers import T0

from replog.record import build_batch
from replog.replication.messages import DescribeLogDirsRequest
from replog.server.data_plane.broker_cores import BrokerCores
from replog.storage import LogConfig
from replog.storage.cleaner.cleaner_checkpoint import CleanerCheckpoint
from replog.storage.cleaner.dirty_ratios import dirty_ratios
from replog.storage.cleaner.log_cleaning import clean_log
from replog.storage.cleaner.offset_map import OffsetMap
from replog.storage.log import Log
from replog.storage.log_manager import LogManager

COMPACT = LogConfig(segment_bytes=700, index_interval_bytes=100, cleanup_policy="compact")
DELETE = LogConfig(segment_bytes=700, index_interval_bytes=100)


def fill(log: Log, count: int) -> None:
    for i in range(count):
        key = f"k{i % 4}".encode()
        log.append_as_leader(build_batch([(T0 + i, key, b"v" * 20, ())]), 0)
    log.high_watermark = log.log_end_offset


def expected_ratio(log: Log, first_dirty: int) -> float:
    """Kafka's ratio by hand: the non-active segments' bytes, those holding offsets from
    `first_dirty` on over all of them."""
    closed = log.segments()[:-1]
    clean = sum(
        s.size
        for i, s in enumerate(closed)
        if i + 1 < len(closed) and closed[i + 1].base_offset <= first_dirty
    )
    total = sum(s.size for s in closed)
    return (total - clean) / total


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[LogManager]:
    with LogManager([str(tmp_path / "a")]) as logs:
        yield logs


def test_a_log_never_cleaned_is_all_dirty_and_a_cleaned_one_only_past_the_pass(
    manager: LogManager,
) -> None:
    log = manager.get_or_create_log("c", 0, COMPACT)
    other = manager.get_or_create_log("d", 0, DELETE)
    assert dirty_ratios(manager.log_dirs, manager.all_logs(), T0) == {("c", 0): 0.0}
    fill(log, 60)
    fill(other, 60)
    assert len(log.segments()) > 3
    assert dirty_ratios(manager.log_dirs, manager.all_logs(), T0) == {("c", 0): 1.0}

    cleaned = clean_log(
        log,
        OffsetMap(24 * 100),
        first_dirty=0,
        first_uncleanable=log.active_segment.base_offset,
        now_ms=T0,
        delete_retention_ms=0,
    )
    CleanerCheckpoint(manager.log_dirs[0]).update(("c", 0), cleaned.end_offset)
    assert dirty_ratios(manager.log_dirs, manager.all_logs(), T0) == {("c", 0): 0.0}

    fill(log, 40)  # new dirty segments after the cleaned ones
    ratio = dirty_ratios(manager.log_dirs, manager.all_logs(), T0)[("c", 0)]
    assert 0.0 < ratio < 1.0
    assert ratio == pytest.approx(expected_ratio(log, cleaned.end_offset))


def test_a_malformed_checkpoint_counts_as_none(manager: LogManager) -> None:
    log = manager.get_or_create_log("c", 0, COMPACT)
    fill(log, 60)
    CleanerCheckpoint(manager.log_dirs[0]).update(("c", 0), log.active_segment.base_offset)
    assert dirty_ratios(manager.log_dirs, manager.all_logs(), T0) == {("c", 0): 0.0}
    Path(CleanerCheckpoint(manager.log_dirs[0]).path).write_text("not a checkpoint\n")
    assert dirty_ratios(manager.log_dirs, manager.all_logs(), T0) == {("c", 0): 1.0}


@dataclass
class ReplicaManagerWithLogs:
    log_manager: LogManager


def test_the_brokers_describe_log_dirs_carries_compacted_logs_ratios(
    manager: LogManager,
) -> None:
    fill(manager.get_or_create_log("c", 0, COMPACT), 60)
    fill(manager.get_or_create_log("d", 0, DELETE), 60)
    service = BrokerCores(1, wall_clock=lambda: T0)
    service.attach(ReplicaManagerWithLogs(manager))  # type: ignore[arg-type]
    (described,) = service.describe_log_dirs(DescribeLogDirsRequest()).log_dirs
    assert {(r.topic, r.dirty_ratio) for r in described.replicas} == {("c", 1.0), ("d", None)}
    (only,) = service.describe_log_dirs(DescribeLogDirsRequest(topics=("d",))).log_dirs
    assert [(r.topic, r.dirty_ratio) for r in only.replicas] == [("d", None)]
