"""A live topic's `cleanup.policy` switched on a real 3-node cluster (issue #78): delete ->
compact starts cleaning (every replica's log shrinks to the latest value of each key, at its
offset) and makes the leader refuse records without a key; compact -> delete stops cleaning
(the cleaner checkpoint stays where it was, new records all stay) and takes keyless records
again. Then the cleaner's dynamic broker settings reach the running brokers (each one's log
says what its cleaner took).

How this can fail: a policy change that a broker's cleaner or its produce path does not see
until a restart, a cleaner that goes on cleaning a log that no longer compacts (new records
above its checkpoint removed, the checkpoint moving), one that drops a latest value, or a
leader that still refuses keyless records once the topic no longer compacts; a broker whose
cleaner does not take a dynamic setting, or takes another broker's.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from client_cluster import ClientCluster, client_cluster
from cluster_helpers import wait_for
from replica_files import cleaned_offset, replica_records, wait_until_cleaned

from replog import Admin, ConfigResource, Producer
from replog.errors import InvalidConfigError, InvalidRecordError

pytestmark = pytest.mark.slow

TOPIC = "switched"
KEYS = 10
UPDATES = 1500


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClientCluster]:
    overrides = ("--override", "log.cleaner.backoff.ms=200")
    with client_cluster(tmp_path_factory.mktemp("c"), 3, *overrides) as started:
        yield started


def produce(cluster: ClientCluster, first: int, count: int) -> dict[int, tuple[bytes, bytes]]:
    """Send `count` keyed updates (values numbered from `first`), acks=all; offset -> (key,
    value) as each acknowledgement named it."""
    with cluster.producer(linger_ms=2, acks="all") as producer:
        sent = []
        for i in range(first, first + count):
            key, value = f"key-{i % KEYS}".encode(), f"value-{i}".encode()
            sent.append((key, value, producer.send(TOPIC, value, key=key, partition=0)))
        producer.flush(timeout=60)
        return {future.get(timeout=60).offset: (key, value) for key, value, future in sent}


def keyless_accepted(cluster: ClientCluster) -> int | None:
    """Send one record without a key: its offset, or None when the leader refused it."""
    with Producer(
        bootstrap_servers=cluster.bootstrap, acks="all", enable_idempotence=False
    ) as producer:
        try:
            return producer.send(TOPIC, b"no key", partition=0).get(timeout=30).offset
        except InvalidRecordError as refused:
            assert "without key" in str(refused)
            return None


def set_policy(cluster: ClientCluster, policy: str) -> None:
    with Admin(bootstrap_servers=cluster.bootstrap, default_api_timeout_ms=20_000) as admin:
        admin.incremental_alter_configs({ConfigResource.topic(TOPIC): {"cleanup.policy": policy}})


def test_switching_the_cleanup_policy_starts_and_stops_cleaning(cluster: ClientCluster) -> None:
    cluster.create_topic(
        TOPIC,
        configs={
            "cleanup.policy": "delete",
            "segment.bytes": "4096",
            "min.cleanable.dirty.ratio": "0.01",
        },
    )
    nodes = sorted(cluster.kafka_addresses)
    written = produce(cluster, 0, UPDATES)
    keyless = keyless_accepted(cluster)
    assert keyless == UPDATES  # not compacted: a record without a key is taken
    time.sleep(1.5)  # several cleaner rounds (a 200 ms backoff): none takes a delete log
    for node in nodes:
        assert cleaned_offset(cluster, node, TOPIC) is None, node
        assert len(replica_records(cluster, node, TOPIC)) >= UPDATES, node

    # delete -> compact: the leader refuses keyless records once it sees the change, and every
    # replica cleans its log down to the latest value of each key.
    set_policy(cluster, "compact")
    wait_for(lambda: keyless_accepted(cluster) is None, 30, "a keyless record refused")
    reached = wait_until_cleaned(cluster, nodes, TOPIC)
    assert all(r >= UPDATES * 3 // 4 for r in reached.values()), reached
    latest = {key: (offset, value) for offset, (key, value) in sorted(written.items())}
    for node in nodes:
        records = replica_records(cluster, node, TOPIC)
        assert len(records) < UPDATES // 2, f"node {node}: {len(records)} records left"
        below = reached[node]
        # Below the cleaned offset: exactly the latest record of each key below it, and no
        # record without a key; at or past it, the records as written.
        latest_below = {k: (o, v) for o, (k, v) in sorted(written.items()) if o < below}
        assert {(o, k, v) for o, k, v in records if o < below} == {
            (o, k, v) for k, (o, v) in latest_below.items()
        }, f"node {node}: below its cleaned offset {below}"
        for offset, key, value in records:
            if offset >= below and offset in written:
                assert written[offset] == (key, value), (node, offset)
        kept = {key: (offset, value) for offset, key, value in records if key is not None}
        assert kept == latest, f"node {node}: not the latest value of each key"

    # compact -> delete: keyless records are taken again, and the cleaner leaves the log
    # alone: its checkpoint stays, every new record stays.
    set_policy(cluster, "delete")
    taken: list[int] = []

    def keyless_taken() -> bool:
        offset = keyless_accepted(cluster)
        if offset is not None:
            taken.append(offset)
        return offset is not None

    wait_for(keyless_taken, 30, "a keyless record taken again")
    first_new = taken[0] + 1
    more = produce(cluster, UPDATES, UPDATES)
    assert min(more) == first_new
    time.sleep(1.5)  # several cleaner rounds, with a log dirtier than its ratio
    for node in nodes:
        assert cleaned_offset(cluster, node, TOPIC) == reached[node], node
        records = replica_records(cluster, node, TOPIC)
        new = [(o, k, v) for o, k, v in records if o >= first_new]
        assert new == [(o, *more[o]) for o in sorted(more)], f"node {node}: new records cleaned"
        assert (taken[0], None, b"no key") in records, f"node {node}: the keyless record"


def test_running_brokers_take_the_cleaners_dynamic_settings(cluster: ClientCluster) -> None:
    """The cluster default's I/O rate and backoff reach every broker's running cleaner, and a
    broker's own thread count only that broker's, without a restart; a count beyond double
    the running one is INVALID_CONFIG (Kafka's answer)."""
    nodes = sorted(cluster.kafka_addresses)
    changes = {
        ConfigResource.broker(): {
            "log.cleaner.io.max.bytes.per.second": "52428800",
            "log.cleaner.backoff.ms": "300",
        },
        ConfigResource.broker(nodes[1]): {"log.cleaner.threads": "2"},
    }
    with Admin(bootstrap_servers=cluster.bootstrap, default_api_timeout_ms=20_000) as admin:
        admin.incremental_alter_configs(changes)
        with pytest.raises(InvalidConfigError, match="more than double the current value 2"):
            admin.incremental_alter_configs(
                {ConfigResource.broker(nodes[1]): {"log.cleaner.threads": "5"}}
            )

    def reconfigured(node: int, threads: int) -> bool:
        text = Path(cluster.loopback.layout.node(node).log_path).read_text(errors="replace")
        return (
            f"log cleaner reconfigured: CleanerConfig(enable=True, threads={threads}, "
            "dedupe_buffer_size=134217728, io_max_bytes_per_second=52428800.0, backoff_ms=300, "
            "idle_max_wait_ms=60000)"
        ) in text

    for node in nodes:
        threads = 2 if node == nodes[1] else 1
        wait_for(lambda n=node, t=threads: reconfigured(n, t), 30, f"node {node}'s cleaner")  # type: ignore[misc]
