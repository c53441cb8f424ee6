"""A consumer group of replog's own consumers through a kill -9 of its coordinator's node, on a
real 3-node cluster: another broker takes the group's `__consumer_offsets` partition and
replays the group from it, so the members keep their partitions (no new assignment) and go on
from their commits: no record committed before the kill is given again, and every record
written after it is given.

Why a test of its own: the coordinator test (`test_cluster_group_coordinator.py`) moves
committed offsets through a failover without members; this one runs members through it, as an
application's consumers would be."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterable
from pathlib import Path

import pytest
from client_cluster import ClientCluster, client_cluster

from replog import Consumer
from replog.client.records import TopicPartition
from replog.errors import ReplogError
from replog.wire.kafka_coordinator_client import KafkaCoordinatorClient

pytestmark = pytest.mark.slow

GROUP = "failover-readers"
TOPIC = "events"
PARTITIONS = 4
PER_PARTITION = 50  # records per partition before the kill, and again after it


def produce(cluster: ClientCluster, first: int) -> None:
    """PER_PARTITION records into every partition, values `p-<partition>-<n>` from `first`."""
    with cluster.producer(linger_ms=5) as producer:
        futures = [
            producer.send(TOPIC, b"p-%d-%d" % (p, n), partition=p)
            for n in range(first, first + PER_PARTITION)
            for p in range(PARTITIONS)
        ]
        producer.flush(timeout=60)
        for future in futures:
            future.get(timeout=60)


def read(
    members: Iterable[Consumer], given: dict[int, list[int]], until: int, what: str
) -> list[str]:
    """Poll every member in turn, committing after each poll that gave records, until every
    partition was given offsets up to `until` - 1 and every member holds partitions; the
    commit failures met (during a failover a commit may fail, and the member goes on as an
    application would)."""
    members = list(members)
    failures: list[str] = []
    deadline = time.monotonic() + 60
    while any(max(given.get(p, [-1])) < until - 1 for p in range(PARTITIONS)) or not all(
        member.assignment() for member in members
    ):
        assert time.monotonic() < deadline, (
            f"{what}: not every partition read up to {until} (or a member without partitions) "
            f"within 60 s: last offsets { {p: max(o) for p, o in given.items()} }; assignments "
            f"{[m.assignment() for m in members]}; commit failures {failures[:5]}"
        )
        for member in members:
            batches = member.poll(timeout_ms=200)
            for tp, records in batches.items():
                given.setdefault(tp.partition, []).extend(r.offset for r in records)
            if batches:
                try:
                    member.commit()
                except ReplogError as exc:
                    failures.append(f"{type(exc).__name__}: {exc}")
    return failures


async def coordinator_of(cluster: ClientCluster, asked: int) -> int:
    """The group's coordinator, as broker `asked` names it on its Kafka listener."""
    (address,) = [n.kafka_address for n in cluster.loopback.layout.nodes if n.node_id == asked]
    assert address is not None
    client = KafkaCoordinatorClient(address)
    try:
        node_id, _address = await client.find_coordinator(GROUP)
        return node_id
    finally:
        await client.close()


def test_members_keep_their_partitions_and_read_nothing_committed_again_after_a_coordinator_kill(
    tmp_path: Path,
) -> None:
    overrides = ("broker.session.timeout.ms=4000", "group.initial.rebalance.delay.ms=0")
    start_args = [arg for o in overrides for arg in ("--override", o)]
    with client_cluster(tmp_path / "c", 3, *start_args) as cluster:
        cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
        produce(cluster, 0)
        members = [
            cluster.consumer(
                group_id=GROUP,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                fetch_max_wait_ms=100,
                session_timeout_ms=10_000,
                heartbeat_interval_ms=500,
            )
            for _ in range(2)
        ]
        try:
            for member in members:
                member.subscribe([TOPIC])
            before: dict[int, list[int]] = {}
            read(members, before, PER_PARTITION, "before the kill")
            assignments = [member.assignment() for member in members]
            assert all(assignments) and not assignments[0] & assignments[1], assignments
            assert assignments[0] | assignments[1] == {
                TopicPartition(TOPIC, p) for p in range(PARTITIONS)
            }
            committed = {
                p: members[0].committed(TopicPartition(TOPIC, p)) for p in range(PARTITIONS)
            }
            assert committed == dict.fromkeys(range(PARTITIONS), PER_PARTITION), (
                f"the commits before the kill: {committed}"
            )

            coordinator = asyncio.run(coordinator_of(cluster, 1))
            cluster.loopback.signal(coordinator, signal.SIGKILL)
            produce(cluster, PER_PARTITION)
            after: dict[int, list[int]] = {}
            failures = read(members, after, 2 * PER_PARTITION, "after the kill")
            survivor = next(n for n in cluster.addresses if n != coordinator)
            moved_to = asyncio.run(coordinator_of(cluster, survivor))
            assert moved_to != coordinator, f"the group stayed on killed node {coordinator}"
            print(f"coordinator {coordinator} killed, {moved_to} took over; {failures=}")

            again = {p: sorted(o for o in got if o < PER_PARTITION) for p, got in after.items()}
            assert not any(again.values()), f"committed records given again: {again}"
            for p in range(PARTITIONS):
                assert set(after[p]) == set(range(PER_PARTITION, 2 * PER_PARTITION)), (
                    f"{TOPIC}-{p}: given after the kill {sorted(set(after[p]))}"
                )
            # The group was replayed, not rebuilt: the same members hold the same partitions.
            assert [member.assignment() for member in members] == assignments
        finally:
            for member in members:
                member.close(autocommit=False, timeout_ms=5_000)
