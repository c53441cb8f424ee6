"""DescribeLogDirs: the pure description of a broker's log dirs (real logs in two dirs), and
the broker's core answering it (refused as UNAVAILABLE before the logs are recovered, and as
UNIMPLEMENTED for a replica manager without a log manager)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from replog.record import build_batch
from replog.replication.messages import (
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    LogDirDescription,
    ReplicaLogInfo,
)
from replog.server.data_plane.broker_cores import BrokerCores
from replog.server.data_plane.log_dirs import describe_log_dirs, offset_lag
from replog.server.runtime.tolerant_service import Refused
from replog.storage.log_manager import LogManager


def now_ms() -> int:
    return time.time_ns() // 1_000_000  # current: 7-day retention must not touch them


def batch(count: int) -> bytes:
    return build_batch([(now_ms(), b"k", b"v" * 10, ()) for _ in range(count)])


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[LogManager]:
    """Two log dirs: `a` (first) and `b`; logs go to the dir holding the fewest."""
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    with LogManager(dirs) as logs:
        orders0 = logs.get_or_create_log("orders", 0)  # -> a
        orders0.append_as_leader(batch(3), leader_epoch=0)
        orders0.append_as_leader(batch(2), leader_epoch=0)
        orders0.high_watermark = 4  # one record not yet committed
        orders1 = logs.get_or_create_log("orders", 1)  # -> b
        orders1.append_as_leader(batch(1), leader_epoch=0)
        orders1.high_watermark = 1
        logs.get_or_create_log("audit", 0)  # -> a, empty
        yield logs


def test_each_dir_lists_its_replicas_with_sizes_and_offsets(
    manager: LogManager, tmp_path: Path
) -> None:
    described = describe_log_dirs(manager.log_dirs, manager.all_logs())
    a, b = described.log_dirs
    assert (a.log_dir, b.log_dir) == (str(tmp_path / "a"), str(tmp_path / "b"))
    assert a.error is None and b.error is None
    assert [(r.topic, r.partition) for r in a.replicas] == [("audit", 0), ("orders", 0)]
    assert [(r.topic, r.partition) for r in b.replicas] == [("orders", 1)]
    audit, orders0 = a.replicas
    assert audit == ReplicaLogInfo("audit", 0, 0, 0, False, 0, 0, 0)
    log = manager.get_log("orders", 0)
    assert orders0.size == log.size_in_bytes > 0
    assert (orders0.log_start_offset, orders0.high_watermark, orders0.log_end_offset) == (0, 4, 5)
    assert orders0.offset_lag == 0 and not orders0.is_future
    (orders1,) = b.replicas
    assert (orders1.log_end_offset, orders1.high_watermark) == (1, 1)
    assert orders1.size == manager.get_log("orders", 1).size_in_bytes


def test_topics_filter_and_empty_dirs_stay_listed(manager: LogManager) -> None:
    described = describe_log_dirs(manager.log_dirs, manager.all_logs(), ["audit"])
    a, b = described.log_dirs
    assert [(r.topic, r.partition) for r in a.replicas] == [("audit", 0)]
    assert b.replicas == ()  # listed, with nothing in it
    none = describe_log_dirs(manager.log_dirs, manager.all_logs(), ["missing"])
    assert [d.replicas for d in none.log_dirs] == [(), ()]


def test_relative_dirs_are_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with LogManager(["rel"]) as logs:
        logs.get_or_create_log("t", 0)
        (described,) = describe_log_dirs(logs.log_dirs, logs.all_logs()).log_dirs
    assert described.log_dir == os.path.join(str(tmp_path), "rel")
    assert [r.topic for r in described.replicas] == ["t"]


def test_offset_lag_is_kafkas_formula() -> None:
    assert offset_lag(high_watermark=4, log_end_offset=5) == 0  # never negative
    assert offset_lag(high_watermark=5, log_end_offset=5) == 0
    assert offset_lag(high_watermark=7, log_end_offset=5) == 2  # only if HW ran ahead


# --- the broker's core -----------------------------------------------------------------------


@dataclass
class ReplicaManagerWithLogs:
    log_manager: LogManager


class ReplicaManagerWithoutLogs:
    """A replica manager double that exposes no log manager."""


def test_the_broker_answers_from_the_log_manager(manager: LogManager) -> None:
    service = BrokerCores(1)
    with pytest.raises(Refused) as failure:
        service.describe_log_dirs(DescribeLogDirsRequest())
    assert failure.value.code == grpc.StatusCode.UNAVAILABLE  # logs not recovered yet

    service.attach(ReplicaManagerWithLogs(manager))  # type: ignore[arg-type]
    answer = service.describe_log_dirs(DescribeLogDirsRequest())
    assert answer == describe_log_dirs(manager.log_dirs, manager.all_logs())
    only = service.describe_log_dirs(DescribeLogDirsRequest(topics=("orders",)))
    assert {r.topic for d in only.log_dirs for r in d.replicas} == {"orders"}
    assert only == DescribeLogDirsResponse(
        tuple(
            LogDirDescription(d.log_dir, None, tuple(r for r in d.replicas if r.topic == "orders"))
            for d in describe_log_dirs(manager.log_dirs, manager.all_logs()).log_dirs
        )
    )


def test_a_replica_manager_without_logs_is_refused() -> None:
    service = BrokerCores(1)
    service.attach(ReplicaManagerWithoutLogs())  # type: ignore[arg-type]
    with pytest.raises(Refused) as failure:
        service.describe_log_dirs(DescribeLogDirsRequest())
    assert failure.value.code == grpc.StatusCode.UNIMPLEMENTED
    assert "no log manager" in failure.value.details
