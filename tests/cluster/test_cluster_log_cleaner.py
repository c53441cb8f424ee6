"""The log cleaner on a real 3-node cluster (issue #78): a compacted topic with small segments,
written with replog's Producer, is cleaned by each replica on its own, and every replica then
holds exactly the latest value of each key, at the offset its acknowledgement named.

Each replica's segment files are read directly (whole batches only, as a dump tool would), not
through a Fetch: the check is on what each broker's cleaner left on its disk. Its
`cleaner-offset-checkpoint` says how far it cleaned (read once it has cleaned up to its active
segment, so that no pass is running); below that offset no key may appear twice and no
superseded value may remain, above it the records are as produced.

Then the Fetch path: the leader serves its cleaned batches (fewer records than offsets), and once
it is killed the next leader, which cleaned on its own, serves the same latest values at the
same offsets.

How this can fail: a cleaner that does not run on some broker (no checkpoint entry, or a log
that did not shrink), one that drops a latest value or keeps a superseded one, one that
renumbers offsets (a value at another offset than its acknowledgement's), or a follower that
refuses the leader's cleaned batches or its own (the replicas would stop matching).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from client_cluster import ClientCluster, client_cluster, kafka_metadata, run_blocking
from replica_files import replica_records, wait_until_cleaned

from replog.errors import ReplogError
from replog.record import iter_batches
from replog.replication import messages as m
from tests.kafka_broker_clients import kafka_broker_client

pytestmark = pytest.mark.slow

TOPIC = "compacted"
KEYS = 12
UPDATES = 3000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClientCluster]:
    overrides = ("--override", "log.cleaner.backoff.ms=200")
    with client_cluster(tmp_path_factory.mktemp("c"), 3, *overrides) as started:
        yield started


def test_each_replica_cleans_to_the_latest_value_of_each_key(cluster: ClientCluster) -> None:
    cluster.create_topic(
        TOPIC,
        configs={
            "cleanup.policy": "compact",
            "segment.bytes": "4096",
            "min.cleanable.dirty.ratio": "0.01",
        },
    )
    acked: dict[bytes, int] = {}  # value -> the offset its acknowledgement named
    latest: dict[bytes, bytes] = {}
    with cluster.producer(linger_ms=2, acks="all") as producer:
        futures = []
        for key, value in keys_of_values():
            futures.append((value, producer.send(TOPIC, value, key=key, partition=0)))
            latest[key] = value
        producer.flush(timeout=60)
        for value, future in futures:
            acked[value] = future.get(timeout=60).offset
    assert sorted(acked.values()) == list(range(UPDATES))

    nodes = sorted(cluster.kafka_addresses)
    reached = wait_until_cleaned(cluster, nodes, TOPIC)
    assert all(r >= UPDATES * 3 // 4 for r in reached.values()), reached

    key_of = {value: key for key, value in keys_of_values()}
    latest_offsets = {key: acked[value] for key, value in latest.items()}
    for node in nodes:
        records = replica_records(cluster, node, TOPIC)
        end = reached[node]
        assert end is not None
        # Offsets unchanged: every record where its acknowledgement put it, in order.
        offsets = [offset for offset, _, _ in records]
        assert offsets == sorted(set(offsets)), f"node {node}: offsets out of order"
        for offset, key, value in records:
            assert (acked[value], key_of[value]) == (offset, key), f"node {node}: {value!r}"
        # Below the cleaned offset: exactly the latest record of each key below it.
        latest_below: dict[bytes, int] = {}
        for value, offset in acked.items():
            if offset < end and offset > latest_below.get(key_of[value], -1):
                latest_below[key_of[value]] = offset
        assert sorted(o for o in offsets if o < end) == sorted(latest_below.values()), node
        # At or past it: everything, as produced.
        assert [o for o in offsets if o >= end] == list(range(end, UPDATES)), node
        # Read latest-per-key, the replica holds exactly the producer's latest values, where
        # their acknowledgements put them.
        read_latest = {key: (offset, value) for offset, key, value in records}
        assert {k: v for k, (_, v) in read_latest.items()} == latest, node
        assert {k: o for k, (o, _) in read_latest.items()} == latest_offsets, node
    check_the_leaders_serve_the_latest_values(cluster)


def keys_of_values() -> Iterator[tuple[bytes, bytes]]:
    for i in range(UPDATES):
        yield f"key-{i % KEYS}".encode(), f"value-{i}".encode()


def leader_of(cluster: ClientCluster, alive: set[int]) -> int:
    """The partition's leader as a live broker's metadata names it (once it names a live one)."""
    deadline = time.monotonic() + 30
    while True:
        for node in alive:
            try:
                answer = run_blocking(kafka_metadata(cluster.kafka_addresses[node], TOPIC))
            except ReplogError:
                continue
            for topic in answer.topics:
                for p in topic.partitions if topic.name == TOPIC else ():
                    if p.leader_id in alive:
                        return int(p.leader_id)
        assert time.monotonic() < deadline, "no live leader after 30 s"
        time.sleep(0.1)


async def fetch_all(address: str) -> list[tuple[int, bytes, bytes]]:
    """(offset, key, value) of every record the broker at `address` serves below UPDATES,
    through Kafka's Fetch; its batches may hold fewer records than offsets. A new leader's high
    watermark reaches its log end only once the other follower fetched from it: a read stopped
    below UPDATES waits for it (the fetch's long poll) up to 30 s. Another broker's metadata may
    name it leader before its own does: a retriable error (NOT_LEADER_OR_FOLLOWER) is asked
    again within that time, as a client would."""
    records: list[tuple[int, bytes, bytes]] = []
    offset = 0
    deadline = time.monotonic() + 30
    error = None
    async with kafka_broker_client(address) as client:
        while offset < UPDATES:
            assert time.monotonic() < deadline, (
                f"{address} served up to offset {offset} only (last error: {error})"
            )
            response = await client.fetch(
                m.FetchRequest((m.FetchPartition(TOPIC, 0, offset, 1 << 20),), max_wait_ms=500)
            )
            (result,) = response.partitions
            error = result.error
            if error is not None and error.retriable:
                await asyncio.sleep(0.1)
                continue
            assert error is None, error
            for batch in iter_batches(result.records, sparse=True):
                for record in batch.records():
                    assert record.key is not None and record.value is not None
                    records.append((record.offset, record.key, record.value))
                offset = batch.next_offset
    return records


def check_the_leaders_serve_the_latest_values(cluster: ClientCluster) -> None:
    """The leader, cleaned on its own, serves the latest value of each key through Fetch;
    killed, the next leader (a replica that cleaned on its own) serves them too, at the same
    offsets."""
    alive = set(cluster.kafka_addresses)
    key_of = {value: key for key, value in keys_of_values()}
    latest = {key: value for key, value in keys_of_values()}
    first = leader_of(cluster, alive)
    served = run_blocking(fetch_all(cluster.kafka_addresses[first]))
    assert {k: v for _, k, v in served} == latest
    assert all(key_of[v] == k and f"value-{o}".encode() == v for o, k, v in served)
    cluster.loopback.kill(first)
    alive.discard(first)
    second = leader_of(cluster, alive)
    assert second != first
    served = run_blocking(fetch_all(cluster.kafka_addresses[second]))
    assert {k: v for _, k, v in served} == latest
    assert all(key_of[v] == k and f"value-{o}".encode() == v for o, k, v in served)
    assert len(served) < UPDATES // 2  # cleaned on its own before it led
