"""Loop CPU per 1,000 new replicas in process (issue #50): the replica managers' install and
take-role path, and the fetch traffic the new empty partitions cause.

Three real `ReplicaManager`s (tests/replication/scenario_harness.py's `Cluster`, fetch
sessions on: the leader answers through `BrokerCores.replica_fetch`) hold `--base-topics`
topics of 10 partitions (RF 3); then `--topics` more are created at once. Timed with
`time.thread_time`, per 1,000 replicas created (3 per partition):
- `install`: the three brokers' `apply_image` of the creation, less their `_open_logs` (the
  file work, a worker thread's in a node);
- `open (user)`: the user CPU of their `_open_logs` (a node's bulk thread; Linux
  `RUSAGE_THREAD`): the Python it runs holding the GIL, without the file work's system time;
- `fetch`: replication rounds (every follower fetching once from each source, answered, the
  ISR changes answered) until nothing moves: the leaders serving, the followers fetching and
  processing the empty answers; less the harness's check after each round that nothing moved
  (a sorted walk over every log, about a fifth of what was timed before).

    python bench/replica_creation_cpu.py --runs 5
    python bench/replica_creation_cpu.py --runs 5 --base COMMIT
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from base_commit import add_arguments, against_lines, runs_against

PER_TOPIC = 10  # as metadata_apply_cpu's


def _records(first: int, topics: int) -> list[Any]:
    """`metadata_apply_cpu`'s topics (10 partitions, RF 3 over brokers 1-3), without its
    brokers' records: the harness registers its own."""
    from metadata_apply_cpu import cluster_records, topic_records

    return topic_records(first, topics)[len(cluster_records()) if first == 0 else 0 :]


def _user_cpu() -> float:
    """This thread's user CPU, s (its thread CPU where Linux's per-thread usage is missing)."""
    rusage_thread = getattr(resource, "RUSAGE_THREAD", None)
    if rusage_thread is None:
        return time.thread_time()
    return resource.getrusage(rusage_thread).ru_utime


async def _settle(cluster: Any) -> int:
    rounds = 0
    idle = 0
    while idle < 2:
        before = cluster._fingerprint()
        await cluster.replicate_round()
        rounds += 1
        idle = idle + 1 if cluster._fingerprint() == before else 0
    return rounds


def one_run(base_topics: int, topics: int) -> dict[str, list[float]]:
    _records(0, 0)  # imported from this folder first, which holds a timeline.py: then
    # the folder leaves the path, or that module would shadow the package.
    sys.path[:] = [p for p in sys.path if p != os.path.dirname(os.path.abspath(__file__))]
    sys.path.insert(0, os.path.join(os.getcwd(), "tests", "replication"))
    from scenario_harness import Cluster

    with tempfile.TemporaryDirectory(prefix="replica-creation-", dir=os.environ.get("TMP")) as root:
        cluster = Cluster(Path(root), [1, 2, 3], fetch_sessions=True)
        opening = [0.0, 0.0]
        for broker in cluster.brokers.values():
            manager = broker.rm
            original = manager._open_logs

            def timed_open(creations: Any, original: Any = original) -> Any:
                started = time.thread_time()
                user = _user_cpu()
                try:
                    return original(creations)
                finally:
                    opening[0] += time.thread_time() - started
                    opening[1] += _user_cpu() - user

            manager._open_logs = timed_open  # type: ignore[method-assign]
        # The harness's check that a round moved nothing (every log of every broker, sorted,
        # twice a round): the bench's own cost, not the fetch traffic's.
        checking = [0.0]
        fingerprint = cluster._fingerprint

        def timed_fingerprint() -> Any:
            started = time.thread_time()
            try:
                return fingerprint()
            finally:
                checking[0] += time.thread_time() - started

        cluster._fingerprint = timed_fingerprint  # type: ignore[method-assign]
        if base_topics:
            cluster._replay(*_records(0, base_topics))
            cluster.publish()
            asyncio.run(_settle(cluster))
        cluster._replay(*_records(base_topics, topics))
        per_thousand = 1000 / (topics * PER_TOPIC * 3)
        gc.collect()
        gc.disable()
        opening[:] = [0.0, 0.0]
        started = time.thread_time()
        cluster.publish()
        install = time.thread_time() - started - opening[0]
        checking[0] = 0.0
        started = time.thread_time()
        asyncio.run(_settle(cluster))
        fetch = time.thread_time() - started - checking[0]
        gc.enable()
        for broker_id in cluster.brokers:
            assert len(cluster.rm(broker_id).partitions()) == (base_topics + topics) * PER_TOPIC
        return {
            "install": [install * 1000 * per_thousand],
            "open (user)": [opening[1] * 1000 * per_thousand],
            "fetch": [fetch * 1000 * per_thousand],
        }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--base-topics", type=int, default=100)
    parser.add_argument("--topics", type=int, default=100)
    add_arguments(parser)
    args = parser.parse_args()
    if args.emit_json:
        print(json.dumps(one_run(args.base_topics, args.topics)))
        return
    child_args = ["--base-topics", str(args.base_topics), "--topics", str(args.topics)]
    # The base's tests too: the runs use tests/replication/scenario_harness.py.
    work, base = runs_against(__file__, child_args, args.runs, args.base, extra_paths=("tests",))
    print(f"ms of thread CPU per 1,000 replicas created, min / median / max of {args.runs} runs")
    print("\n".join(against_lines(work, base, args.base)))


if __name__ == "__main__":
    main()
