"""The driver's planning requests (`cluster_view`) against a counting fake Admin: no cluster.

- A subscription's partitions come from one metadata request (every topic with its
  partitions), not a topic list and then a description; missing topics are still named.
- A batch query's planning takes its Admin from the planning worker's kept sessions and gives
  it back once planned, so the next planning uses the same Admin; a planning that fails
  closes it. A view Spark pickles carries no Admin and no pool.
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from pyspark.sql.types import StructType

from replog.client.admin_results import OffsetSpec
from replog.client.records import OffsetAndTimestamp, TopicPartition
from replog.spark import cluster_view, source
from replog.spark.cluster_view import ClusterView
from replog.spark.errors import SourceOptionError
from replog.spark.fetch_sessions import SessionPool
from replog.spark.options import Assign, Mode, Subscribe, parse_options
from replog.spark.planning import Bounds, OffsetRange
from replog.spark.source import ReplogBatchReader

TOPICS = {"a": 2, "b": 1}  # name -> partitions


class _Partition:
    def __init__(self, partition: int) -> None:
        self.partition = partition


class CountingAdmin:
    """The Admin calls `ClusterView` makes, counted; topics TOPICS, each partition's log
    [2, 10)."""

    made: list[CountingAdmin] = []

    def __init__(self, config: Any) -> None:
        self.calls: list[str] = []
        self.closed = False
        CountingAdmin.made.append(self)

    def list_topics(self) -> list[str]:
        self.calls.append("list_topics")
        return sorted(TOPICS)

    def describe_topics(self, names: list[str] | None = None) -> dict[str, Any]:
        self.calls.append("describe_topics")
        wanted = sorted(TOPICS) if names is None else names
        return {n: _Described(TOPICS[n]) for n in wanted}

    def list_offsets(
        self, specs: dict[TopicPartition, int], isolation_level: str = "read_uncommitted"
    ) -> dict[TopicPartition, Any]:
        self.calls.append("list_offsets")
        # The last stable offset below the high watermark, as with a transaction open.
        latest = 8 if isolation_level == "read_committed" else 10
        return {
            tp: OffsetAndTimestamp(2 if spec == OffsetSpec.EARLIEST else latest, -1, 0)
            for tp, spec in specs.items()
        }

    def close(self) -> None:
        self.closed = True


class _Described:
    def __init__(self, partitions: int) -> None:
        self.partitions = [_Partition(p) for p in range(partitions)]


@pytest.fixture
def admins(monkeypatch: pytest.MonkeyPatch) -> list[CountingAdmin]:
    CountingAdmin.made = []
    monkeypatch.setattr(cluster_view, "Admin", CountingAdmin)
    return CountingAdmin.made


def test_partitions_come_from_one_metadata_request(admins: list[CountingAdmin]) -> None:
    view = ClusterView({"bootstrap.servers": "x:1"}, strict=True)
    assert view.partitions(Subscribe(("b", "a"))) == [("a", 0), ("a", 1), ("b", 0)]
    assert view.partitions(Assign((("a", 1),))) == [("a", 1)]
    assert admins[0].calls == ["describe_topics", "describe_topics"]
    with pytest.raises(SourceOptionError, match="option 'subscribe': topic 'c' does not exist"):
        view.partitions(Subscribe(("a", "c")))
    with pytest.raises(SourceOptionError, match=r"partition a-5 does not exist \(topic 'a' has 2"):
        view.partitions(Assign((("a", 5),)))
    loose = ClusterView({"bootstrap.servers": "x:1"}, strict=False)
    assert loose.partitions(Subscribe(("a", "c"))) == [("a", 0), ("a", 1)]
    # Latest is the last stable offset (read_committed, the source's default) unless told.
    assert view.bounds([("a", 0)]) == {("a", 0): Bounds(2, 8)}
    uncommitted = ClusterView(
        {"bootstrap.servers": "x:1"}, strict=True, isolation_level="read_uncommitted"
    )
    assert uncommitted.bounds([("a", 0)]) == {("a", 0): Bounds(2, 10)}


def _batch_reader(**extra: str) -> ReplogBatchReader:
    options = {"bootstrap.servers": "x:1", "subscribe": "a", **extra}
    return ReplogBatchReader(parse_options(options, Mode.BATCH), StructType())


def test_a_planning_worker_keeps_its_admin_for_the_next_planning(
    admins: list[CountingAdmin], monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = SessionPool()
    monkeypatch.setattr(source, "worker_sessions", lambda: pool)
    planned = [p.piece for p in _batch_reader().partitions()]  # type: ignore[attr-defined]
    # Planned to the last stable offset: the source reads read_committed.
    assert planned == [OffsetRange("a", 0, 2, 8), OffsetRange("a", 1, 2, 8)]
    assert len(admins) == 1 and not admins[0].closed and pool.kept() == 1
    _batch_reader().partitions()
    assert len(admins) == 1 and admins[0].calls.count("describe_topics") == 2
    # Other settings: another Admin.
    _batch_reader(**{"bootstrap.servers": "y:1"}).partitions()
    assert len(admins) == 2 and pool.kept() == 2
    # A planning that fails closes the Admin it used.
    with pytest.raises(SourceOptionError, match="topic 'c' does not exist"):
        _batch_reader(subscribe="c").partitions()
    assert admins[0].closed and pool.kept() == 1
    pool.close()
    assert admins[1].closed


def test_a_pickled_view_carries_no_admin_nor_pool(admins: list[CountingAdmin]) -> None:
    view = ClusterView({"bootstrap.servers": "x:1"}, strict=False, sessions=SessionPool())
    view.partitions(Subscribe(("a",)))
    copy = pickle.loads(pickle.dumps(view))
    assert copy._admin is None and copy._sessions is None
