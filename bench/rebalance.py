"""Rebalance time as a consumer group grows from 1 to 10 members (issue #54's benchmark).

A local 3-node replog cluster (`replog cluster start`, in a temporary directory) and a topic of
100 partitions; consumers (one thread each, all in this process) join one group one after the
other: replog's own consumers, with the classic protocol or with `--protocol consumer`
(KIP-848, `group.protocol=consumer`, the coordinator's `uniform` assignor deciding), or with
`--protocol consumer --client confluent` confluent-kafka consumers through the Kafka
listeners. For each join, the rebalance time is from
the new member's `subscribe` until every member's assignment (from its rebalance listener) is
the group's new one: all 100 partitions, each held by exactly one member, split evenly, and
none of it still to change. With `cooperative-sticky` that is two rounds (revoke, then assign);
with `range` one, every member revoking everything first.

    .venv/bin/python bench/rebalance.py [--members 10] [--runs 3] [--strategy range]
        [--protocol consumer [--client replog|confluent] [--heartbeat-interval-ms 5000]]
        [--base-port 23900] [--kafka-base-port PORT]

The group's `group.initial.rebalance.delay.ms` is 0 (the cluster's brokers are started with it):
Kafka's 3 s default delays only the first join of an empty group, and would be most of the
first figure. Prints min / median / max per join count over the runs, and the p50 over every
join of every run against the goal (p50 <= 500 ms, the consumer protocol's goal, KIP-848; the
classic figure is the one the issue asks for beside it). With the consumer protocol a member
that must give partitions up hears of it in its next heartbeat, so the brokers' heartbeat
interval (`group.consumer.heartbeat.interval.ms`, 5 s as in Kafka, `--heartbeat-interval-ms`)
bounds a join. The baseline, measured in the same run: a lone member's join of an empty group
(the first row), the least a join costs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import confluent_kafka
from replog_cli import KAFKA_PORT_OFFSET, create_topic, running_cluster

from replog import Consumer, TopicPartition

PARTITIONS = 100
TOPIC = "rebalance"
SETTLE_TIMEOUT_S = 60
POLL_S = 0.05
GOAL_P50_MS = 500


class Member:
    """One consumer polling in its own thread; its latest assignment and when it changed.
    replog's consumer with the classic protocol, or (`kafka` set: the Kafka listeners'
    addresses) confluent-kafka's with the consumer protocol."""

    def __init__(
        self,
        bootstrap: str,
        group: str,
        strategy: str,
        index: int,
        kafka: str = "",
        protocol: str = "classic",
    ) -> None:
        self.name = f"member-{index}"
        self.assigned: set[tuple[str, int]] = set()
        self.changed_at = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._consumer: Any
        if kafka:
            self._consumer = confluent_kafka.Consumer(
                {
                    "bootstrap.servers": kafka,
                    "group.id": group,
                    "group.protocol": "consumer",
                    "client.id": self.name,
                    "enable.auto.commit": False,
                }
            )
        else:
            assignment = (
                {"group.protocol": "consumer"}
                if protocol == "consumer"
                else {"partition.assignment.strategy": strategy}
            )
            self._consumer = Consumer(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": group,
                    "client.id": self.name,
                    "enable.auto.commit": False,
                    **assignment,
                }
            )
        self._kafka = bool(kafka)
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)

    def join(self) -> None:
        if self._kafka:
            self._consumer.subscribe(
                [TOPIC],
                on_assign=lambda _, ps: self.on_partitions_assigned(ps),
                on_revoke=lambda _, ps: self.on_partitions_revoked(ps),
                on_lost=lambda _, ps: self.on_partitions_revoked(ps),
            )
        else:
            self._consumer.subscribe([TOPIC], listener=self)
        self._thread.start()

    def on_partitions_revoked(self, partitions: Sequence[Any]) -> None:
        with self._lock:
            self.assigned -= {(p.topic, p.partition) for p in partitions}
            self.changed_at = time.monotonic()

    def on_partitions_assigned(self, partitions: Sequence[Any]) -> None:
        with self._lock:
            self.assigned |= {(p.topic, p.partition) for p in partitions}
            self.changed_at = time.monotonic()

    def on_partitions_lost(self, partitions: Sequence[TopicPartition]) -> None:
        self.on_partitions_revoked(partitions)

    def snapshot(self) -> tuple[frozenset[tuple[str, int]], float]:
        with self._lock:
            return frozenset(self.assigned), self.changed_at

    def _run(self) -> None:
        while not self._stop.is_set():
            self._consumer.poll(POLL_S)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._consumer.close()


def settled(members: list[Member]) -> float | None:
    """When the members' assignments last changed, if together they are the group's even,
    disjoint split of every partition; None while they are not."""
    snapshots = [m.snapshot() for m in members]
    owned = [len(a) for a, _ in snapshots]
    union = set().union(*(a for a, _ in snapshots))
    if sum(owned) != PARTITIONS or len(union) != PARTITIONS:
        return None
    if max(owned) - min(owned) > 1:
        return None
    return max(at for _, at in snapshots)


def one_run(
    bootstrap: str, strategy: str, count: int, run: int, kafka: str, protocol: str
) -> list[float]:
    """Join `count` members one by one; each join's rebalance time in ms."""
    members: list[Member] = []
    times: list[float] = []
    group = f"bench-group-{protocol if protocol == 'consumer' else strategy}-{run}"
    try:
        for index in range(count):
            member = Member(bootstrap, group, strategy, index, kafka, protocol)
            started = time.monotonic()
            member.join()
            members.append(member)
            deadline = started + SETTLE_TIMEOUT_S
            while (done := settled(members)) is None or done < started:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"run {run}: {len(members)} members did not settle in "
                        f"{SETTLE_TIMEOUT_S} s: "
                        + ", ".join(f"{m.name} {len(m.snapshot()[0])}" for m in members)
                    )
                time.sleep(0.01)
            # A last change may still come (a second cooperative round): wait a moment and
            # take the time of the assignment that stayed.
            time.sleep(0.3)
            final = settled(members)
            times.append(((final or done) - started) * 1000)
            print(f"  run {run}: member {index + 1} joined, settled in {times[-1]:.0f} ms")
    finally:
        for member in members:
            member.close()
    return times


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--strategy", default="cooperative-sticky")
    parser.add_argument("--base-port", type=int, default=23900)
    parser.add_argument("--protocol", choices=("classic", "consumer"), default="classic")
    parser.add_argument("--client", choices=("replog", "confluent"), default="replog")
    parser.add_argument("--heartbeat-interval-ms", type=int, default=5000)
    parser.add_argument("--kafka-base-port", type=int, default=None)
    args = parser.parse_args(argv)
    consumer_protocol = args.protocol == "consumer"
    confluent = consumer_protocol and args.client == "confluent"
    kafka_base = (
        args.kafka_base_port
        if args.kafka_base_port is not None
        else args.base_port + KAFKA_PORT_OFFSET
    )
    with tempfile.TemporaryDirectory(prefix="replog-bench-rebalance-") as work:
        data_dir = str(Path(work) / "cluster")
        # An empty group's first join is not held back (module docstring).
        overrides = [
            "--override",
            "group.initial.rebalance.delay.ms=0",
            "--override",
            f"group.consumer.heartbeat.interval.ms={args.heartbeat_interval_ms}",
            # Kafka's bounds on the interval (5-15 s) would refuse other --heartbeat-interval-ms.
            "--override",
            f"group.consumer.min.heartbeat.interval.ms={args.heartbeat_interval_ms}",
            "--override",
            f"group.consumer.max.heartbeat.interval.ms={args.heartbeat_interval_ms}",
            "--kafka-base-port",
            str(kafka_base),
        ]
        with running_cluster(data_dir, args.base_port, *overrides) as bootstrap:
            create_topic(bootstrap, TOPIC, PARTITIONS)
            kafka = ",".join(f"127.0.0.1:{kafka_base + i}" for i in range(3))
            runs = [
                one_run(
                    bootstrap, args.strategy, args.members, r + 1, kafka * confluent, args.protocol
                )
                for r in range(args.runs)
            ]
    client = "confluent-kafka" if confluent else "replog's consumer"
    what = (
        f"consumer protocol, {client} (uniform assignor, heartbeat interval "
        f"{args.heartbeat_interval_ms} ms)"
        if consumer_protocol
        else f"{args.strategy}, classic protocol"
    )
    print(
        f"\nRebalance time, {PARTITIONS} partitions, {what}, "
        f"{args.runs} runs (min / median / max ms):"
    )
    for index in range(args.members):
        joined = [run[index] for run in runs]
        print(
            f"  {index + 1:2d} members  {min(joined):7.0f} / {statistics.median(joined):7.0f} / "
            f"{max(joined):7.0f}" + ("   (baseline: a lone member's join)" if index == 0 else "")
        )
    every = [t for run in runs for t in run[1:]]
    p50 = statistics.median(every)
    baseline = statistics.median(run[0] for run in runs)
    print(
        f"  p50 of the joins to a non-empty group: {p50:.0f} ms ({p50 / baseline:.1f}x the lone "
        f"join); the consumer protocol's goal {GOAL_P50_MS} ms "
        f"{'met' if p50 <= GOAL_P50_MS else 'missed'} by the {args.protocol} protocol"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
