"""A standby controller's replay: CPU per 1,000 partitions created and per 1,000 changes.

On a combined node every committed metadata batch is replayed by the standby controllers into
their timeline state, on the event loop (issue #50). This builds the records once with the
active controller of `tests/controller/controller_harness.py` (CreateTopics of `--topics`
topics x 10 partitions, RF 3, 50 topics a request; then the three brokers' sessions expire,
which writes a PartitionChangeRecord for each partition a fencing moves), then replays them
into a fresh standby `--runs` times, timing each phase in thread CPU time.

With `--base COMMIT` the same runs go against that commit's code too (its packages and its
tests/controller harness), each run in a fresh process per side, the sides alternating
(bench/base_commit.py); each phase prints both sides' min / median / max and working tree /
base per run pair.

    .venv/bin/python bench/controller_replay.py --topics 1000 --runs 7
    .venv/bin/python bench/controller_replay.py --topics 1000 --runs 7 --base e0bbb74
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import random
import sys
import time

# The side's tree: the working directory (bench/base_commit.py runs a base's side in its own).
ROOT = os.getcwd()
sys.path.insert(0, ROOT)
HARNESS = os.path.join(ROOT, "tests", "controller", "controller_harness.py")
TOPICS_PER_REQUEST = 50
PARTITIONS_PER_TOPIC = 10

from base_commit import add_arguments, against_lines, runs_against, spread  # noqa: E402

from replog.quorum.controller.controller import QuorumController  # noqa: E402
from replog.quorum.controller.controller_config import ControllerConfig  # noqa: E402
from replog.quorum.controller.replication_control import CreatableTopic  # noqa: E402
from replog.quorum.metadata.log_batches import CommittedRecords  # noqa: E402
from replog.quorum.metadata.records import PartitionChangeRecord, PartitionRecord  # noqa: E402


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


CASES = ("ms per 1,000 partitions created", "ms per 1,000 PartitionChangeRecords")


def measure(topics: int, runs: int) -> tuple[str, dict[str, list[float]]]:
    """What was replayed, and each phase's figures (`CASES`), one a run, in this process."""
    harness = load_harness()
    cluster, created = build(harness, topics)
    batches: list[CommittedRecords] = [b.committed() for b in cluster.log.batches]  # type: ignore[attr-defined]
    creation, changes = batches[:created], batches[created:]
    partitions = sum(isinstance(r, PartitionRecord) for b in creation for r in b.records)
    changed = sum(isinstance(r, PartitionChangeRecord) for b in changes for r in b.records)
    per_creation: list[float] = []
    per_change: list[float] = []
    for _ in range(runs):
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
    replayed = (
        f"{partitions} partitions in {len(creation)} batches, {changed} changes in "
        f"{len(changes)} batches"
    )
    return replayed, dict(zip(CASES, (per_creation, per_change), strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=7)
    add_arguments(parser)
    args = parser.parse_args()
    if args.base:
        child_args = ["--topics", str(args.topics)]
        # The base's tests too: the records come from its tests/controller harness.
        work, base = runs_against(__file__, child_args, args.runs, args.base, ("tests",))
        print(f"thread CPU, min / median / max of {args.runs} runs a side")
        print("\n".join(against_lines(work, base, args.base)))
        return
    replayed, results = measure(args.topics, args.runs)
    if args.emit_json:
        print(json.dumps(results))
        return
    print(f"{replayed}; {args.runs} runs, thread CPU, min / median / max")
    for case, times in results.items():
        print(f"{case}: {spread(times)}")


if __name__ == "__main__":
    main()
