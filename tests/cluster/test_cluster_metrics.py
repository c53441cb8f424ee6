"""Prometheus metrics of a real 3-node cluster (issue #9), scraped over HTTP.

`replog cluster start` gives node i a metrics endpoint on base port + 100 + i - 1 and records
its URL in cluster.json; these tests read the URLs from there and scrape them while they provoke
what the metrics must show:

- a follower frozen with SIGSTOP, behind by one record, drops out of the ISR after
  `replica.lag.time.max.ms` (set to 2 s here; well below the 9 s broker session timeout, so
  the leader's own ISR shrink is what is measured, not the controller fencing): the leader's
  `replog_under_replicated_partitions` becomes 1 (and its ISR shrink counter moves); after
  SIGCONT the follower catches up and it goes back to 0 (an ISR expansion);
- exactly one node reports `replog_active_controller 1`, the quorum leader every node names;
- a broker frozen past the broker session timeout is fenced, and the partitions only it
  hosts lose their leader: the active controller's `replog_offline_partitions` counts them
  (from its committed state), every other node reports 0, and after SIGCONT it is 0 again;
- producing N value bytes raises the leader's `replog_bytes_in_total{topic}` by at least N and
  `replog_messages_in_total` by the record count, followers count replication bytes, each
  replica reports its log size, the Produce request counter grows, and the Raft leader has
  observed commit latencies;
- `replog cluster status` shows each node's metrics URL.

How these can fail: a gauge computed from the wrong ISR, a counter not hooked (or hooked per
record: the message count would still pass, the byte count would be off), a registry shared
between nodes, an endpoint not started with the node.
"""

from __future__ import annotations

import json
import signal
import time
import urllib.error
from collections.abc import Iterator

import pytest
from client_cluster import ClientCluster, client_cluster
from cluster_helpers import wait_for
from metrics_scrape import get, scrape

from replog import Admin, NewTopic, Producer

pytestmark = pytest.mark.slow

LAG_MS = 2000
REPLICA_FETCH_WAIT_MAX_MS = 500  # Kafka's default, which these nodes keep


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClientCluster]:
    overrides = ("--override", f"replica.lag.time.max.ms={LAG_MS}")
    with client_cluster(tmp_path_factory.mktemp("metrics"), 3, *overrides) as started:
        yield started


def urls(cluster: ClientCluster) -> dict[int, str]:
    found = {node.node_id: node.metrics_url for node in cluster.loopback.layout.nodes}
    assert all(found.values()), found
    return {node_id: url for node_id, url in found.items() if url is not None}


def leader_of(cluster: ClientCluster, topic: str) -> tuple[int, tuple[int, ...]]:
    with Admin(bootstrap_servers=cluster.bootstrap) as admin:
        (partition,) = admin.describe_topics([topic])[topic].partitions
    assert partition.leader is not None
    return partition.leader, partition.replicas


def active_controller(cluster: ClientCluster) -> int:
    description = cluster.loopback.describe()
    return description.leader_id


# First in the module: with one single-partition topic, the leader's count is exactly 1.
def test_under_replicated_partitions_follow_a_frozen_follower(cluster: ClientCluster) -> None:
    cluster.create_topic("urp", partitions=1, replication_factor=3)
    leader, replicas = leader_of(cluster, "urp")
    controller = active_controller(cluster)
    # Freeze a follower, and not the active controller when there is a choice (no failover).
    candidates = [r for r in replicas if r != leader]
    frozen = next((r for r in candidates if r != controller), candidates[0])
    metrics = urls(cluster)
    before = scrape(metrics[leader])
    assert get(before, "replog_under_replicated_partitions") == 0
    shrinks_before = get(before, "replog_isr_shrinks_total")
    # The producer has its metadata and connections before the freeze: a busy machine then
    # cannot turn its set-up into lag the frozen follower built up before the append.
    with Producer(bootstrap_servers=cluster.bootstrap, acks=1) as producer:
        producer.send("urp", b"caught up").get(timeout=10)
        frozen_at = time.monotonic()
        cluster.loopback.signal(frozen, signal.SIGSTOP)
        try:
            # A follower is out of sync only once it is behind (Kafka's rule: one at the
            # leader's log end is caught up however long ago it fetched): append a record.
            producer.send("urp", b"behind").get(timeout=10)
            wait_for(
                lambda: get(scrape(metrics[leader]), "replog_under_replicated_partitions") == 1,
                LAG_MS / 1000 * 3,
                f"node {leader} to report the partition under-replicated",
            )
            took_s = time.monotonic() - frozen_at
            frozen_view = scrape(metrics[leader])
            assert get(frozen_view, "replog_isr_shrinks_total") >= shrinks_before + 1
            for node_id, url in metrics.items():
                if node_id not in (leader, frozen):
                    assert get(scrape(url), "replog_under_replicated_partitions") == 0
        finally:
            cluster.loopback.signal(frozen, signal.SIGCONT)
    print(f"under-replicated reported {took_s:.1f} s after the freeze (lag max {LAG_MS} ms)")
    # Not before the lag passed the limit: the follower's last caught-up fetch was at most one
    # long poll (replica.fetch.wait.max.ms) before the freeze.
    assert took_s >= (LAG_MS - REPLICA_FETCH_WAIT_MAX_MS) / 1000
    wait_for(
        lambda: get(scrape(metrics[leader]), "replog_under_replicated_partitions") == 0,
        40,
        f"node {leader} to report the partition fully replicated again",
    )
    assert get(scrape(metrics[leader]), "replog_isr_expands_total") >= 1


def test_exactly_one_active_controller_and_every_node_names_the_quorum_leader(
    cluster: ClientCluster,
) -> None:
    def agreed() -> bool:
        views = {node_id: scrape(url) for node_id, url in urls(cluster).items()}
        actives = [n for n, s in views.items() if get(s, "replog_active_controller") == 1]
        leaders = {get(s, "replog_raft_current_leader") for s in views.values()}
        return len(actives) == 1 and leaders == {float(actives[0])}

    wait_for(agreed, 15, "one active controller that every node names as the leader")
    views = {node_id: scrape(url) for node_id, url in urls(cluster).items()}
    (active,) = [n for n, s in views.items() if get(s, "replog_active_controller") == 1]
    assert active == active_controller(cluster)
    # The Raft leader measured how long its appends took to commit.
    assert get(views[active], "replog_raft_commit_latency_seconds_count") > 0
    for samples in views.values():
        assert get(samples, "replog_offline_partitions") == 0
        assert get(samples, "replog_raft_high_watermark") > 0
        assert get(samples, "replog_raft_current_epoch") >= 1


def test_produce_raises_bytes_messages_and_request_counters(cluster: ClientCluster) -> None:
    topic = "metered"
    cluster.create_topic(topic, partitions=1, replication_factor=3)
    leader, replicas = leader_of(cluster, topic)
    metrics = urls(cluster)
    labels = {"topic": topic}
    # The producer speaks Kafka's protocol to the brokers' Kafka listeners: each Produce
    # request a listener answers is one observation of its request-duration histogram (the gRPC
    # interceptor's `replog_requests_total` counts gRPC calls only, which clients no longer make).
    produce_calls = {"api": "Produce"}
    produce_count = "replog_kafka_request_duration_seconds_count"
    before = {node_id: scrape(url) for node_id, url in metrics.items()}
    values = [f"value-{i:04d}-".encode() * 8 for i in range(200)]
    with Producer(bootstrap_servers=cluster.bootstrap, linger_ms=20) as producer:
        futures = [producer.send(topic, value, key=b"k") for value in values]
        for future in futures:
            future.get(timeout=30)
    value_bytes = sum(len(v) for v in values)

    def replicated() -> bool:
        return all(
            get(scrape(metrics[r]), "replog_log_size_bytes", topic=topic, partition="0")
            >= value_bytes
            for r in replicas
        )

    wait_for(replicated, 15, "every replica's log to hold the records")
    after = {node_id: scrape(url) for node_id, url in metrics.items()}
    grown_in = get(after[leader], "replog_bytes_in_total", **labels) - get(
        before[leader], "replog_bytes_in_total", **labels
    )
    assert grown_in >= value_bytes
    assert grown_in < value_bytes * 2  # batches, not a multiple of the data
    assert get(after[leader], "replog_messages_in_total", **labels) == len(values)
    produced = sum(
        get(after[n], produce_count, **produce_calls)
        - get(before[n], produce_count, **produce_calls)
        for n in metrics
    )
    assert produced >= 1
    assert get(after[leader], produce_count, **produce_calls) > get(
        before[leader], produce_count, **produce_calls
    )
    for follower in (r for r in replicas if r != leader):
        assert (
            get(after[follower], "replog_replication_bytes_in_total")
            - get(before[follower], "replog_replication_bytes_in_total")
            >= value_bytes
        )
        assert get(after[follower], "replog_bytes_in_total", **labels) == 0


def test_cluster_status_shows_each_nodes_metrics_url(cluster: ClientCluster) -> None:
    metrics = urls(cluster)
    table = cluster.loopback.ask("status")
    assert table.returncode == 0, table.stderr
    # Lines: the cluster's directory, its bootstrap.servers, then the table.
    lines = table.stdout.splitlines()
    assert lines[1].startswith("bootstrap.servers: "), lines
    header, *rows = [line.split() for line in lines[2:]]
    assert header[0] == "NODE"
    assert header[-1] == "METRICS"
    assert {int(row[0]): row[-1] for row in rows} == metrics
    as_json = cluster.loopback.ask("status", "--json")
    assert as_json.returncode == 0, as_json.stderr
    document = json.loads(as_json.stdout)
    assert {node["node_id"]: node["metrics"] for node in document["nodes"]} == metrics
    for url in metrics.values():
        try:
            scrape(url)
        except urllib.error.URLError as exc:  # pragma: no cover - the failure message
            raise AssertionError(f"{url}: {exc}") from None


# Last in the module: it freezes a broker past its session timeout (about 10 s).
def test_the_active_controller_counts_the_partitions_a_fenced_broker_took_offline(
    cluster: ClientCluster,
) -> None:
    metrics = urls(cluster)
    controller = active_controller(cluster)
    frozen = next(node_id for node_id in sorted(metrics) if node_id != controller)
    with Admin(bootstrap_servers=cluster.bootstrap) as admin:
        (created,) = admin.create_topics(
            [NewTopic("offline", assignments={0: [frozen], 1: [frozen]})]
        )
    assert created.error is None, created.error
    cluster.loopback.signal(frozen, signal.SIGSTOP)
    try:
        wait_for(
            lambda: get(scrape(metrics[controller]), "replog_offline_partitions") == 2,
            40,
            f"the active controller (node {controller}) to count node {frozen}'s partitions",
        )
        for node_id, url in metrics.items():
            if node_id not in (controller, frozen):
                assert get(scrape(url), "replog_offline_partitions") == 0
    finally:
        cluster.loopback.signal(frozen, signal.SIGCONT)
    wait_for(
        lambda: get(scrape(metrics[controller]), "replog_offline_partitions") == 0,
        40,
        f"node {frozen}'s partitions to be led again",
    )
