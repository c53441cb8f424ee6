"""A standby controller's replay: CPU per 1,000 partitions created and per 1,000 changes.

On a combined node every committed metadata batch is replayed by the standby controllers into
their timeline state, on the event loop (issue #50). This builds the records once with the
active controller of `tests/controller/controller_harness.py` (CreateTopics of `--topics`
topics x 10 partitions, RF 3, 50 topics a request; then the three brokers' sessions expire,
which writes a PartitionChangeRecord for each partition a fencing moves), then replays them
into a fresh standby `--runs` times, timing each phase in thread CPU time.

    .venv/bin/python bench/controller_replay.py --topics 1000 --runs 7
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import random
import statistics
import sys
import time
from collections.abc import Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
HARNESS = os.path.join(ROOT, "tests", "controller", "controller_harness.py")
TOPICS_PER_REQUEST = 50
PARTITIONS_PER_TOPIC = 10

from quorum.controller.controller import QuorumController  # noqa: E402
from quorum.controller.controller_config import ControllerConfig  # noqa: E402
from quorum.controller.replication_control import CreatableTopic  # noqa: E402
from quorum.metadata.log_batches import CommittedRecords  # noqa: E402
from quorum.metadata.records import PartitionChangeRecord, PartitionRecord  # noqa: E402


def load_harness() -> object:
    spec = importlib.util.spec_from_file_location("controller_harness", HARNESS)
    assert spec is not None and spec.loader is not None
    harness = importlib.util.module_from_spec(spec)
    sys.modules["controller_harness"] = harness  # its dataclasses look their module up
    spec.loader.exec_module(harness)
    return harness


def build(harness: object, topics: int) -> tuple[object, int]:
    """A cluster whose log holds the creation, then the fencings; the creation's batch count."""
    cluster = harness.Cluster.with_brokers([1, 2, 3])  # type: ignore[attr-defined]
    for first in range(0, topics, TOPICS_PER_REQUEST):
        names = range(first, min(first + TOPICS_PER_REQUEST, topics))
        pending = cluster.active.create_topics(
            [CreatableTopic(f"t{i}", PARTITIONS_PER_TOPIC, 3) for i in names], cluster.now_ms
        )
        cluster.log.commit()
        while not pending.done:  # a large request is written in steps, one a tick
            cluster.advance(1)
            cluster.log.commit()
        assert all(result.error is None for result in pending.result())
    created = len(cluster.log.batches)
    for _ in range(3000):  # no heartbeats: every session expires, then the fencings' steps
        cluster.advance(100)
        cluster.log.commit()
    return cluster, created


def figures(values: Sequence[float]) -> str:
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    harness = load_harness()
    cluster, created = build(harness, args.topics)
    batches: list[CommittedRecords] = [b.committed() for b in cluster.log.batches]  # type: ignore[attr-defined]
    creation, changes = batches[:created], batches[created:]
    partitions = sum(isinstance(r, PartitionRecord) for b in creation for r in b.records)
    changed = sum(isinstance(r, PartitionChangeRecord) for b in changes for r in b.records)
    per_creation: list[float] = []
    per_change: list[float] = []
    for _ in range(args.runs):
        standby = QuorumController(
            ControllerConfig(node_id=9, cluster_id=harness.CLUSTER_ID),  # type: ignore[attr-defined]
            cluster.log.for_node(9),  # type: ignore[attr-defined]
            random.Random(9),
        )
        gc.collect()
        start = time.thread_time()
        for batch in creation:
            standby.handle_commit(batch)
        middle = time.thread_time()
        for batch in changes:
            standby.handle_commit(batch)
        end = time.thread_time()
        per_creation.append((middle - start) / partitions * 1e6)
        per_change.append((end - middle) / changed * 1e6)
    print(
        f"{partitions} partitions in {len(creation)} batches, {changed} changes in "
        f"{len(changes)} batches; {args.runs} runs, thread CPU, min / median / max"
    )
    print(f"ms per 1,000 partitions created: {figures(per_creation)}")
    print(f"ms per 1,000 PartitionChangeRecords: {figures(per_change)}")


if __name__ == "__main__":
    main()
