"""The Controller service on 3 real controller-only processes (`--roles controller`), with
brokers registered and heartbeating from the test, so that every answer is one the test can
predict: topics created, described and deleted, invalid requests answered with Kafka's codes
and a message naming the cause, standbys pointing at the active controller, and a kill -9 of
the active controller that loses nothing acknowledged.

"Nothing unacknowledged visible" is checked in its strongest testable form: the writer retries
each topic until it gets a definitive answer (created, or TOPIC_ALREADY_EXISTS when an earlier
attempt whose answer was lost did commit), so afterwards the topics every node shows, the
restarted old controller included, are exactly the acknowledged ones: none lost, none extra.
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from collections.abc import Iterator

import grpc
import pytest
from cluster_helpers import FETCH_TIMEOUT_MS, Background, LoopbackCluster, wait_for
from controller_helpers import ControllerClient, FakeBrokers, eventually

from replog.pb import controller_pb2 as pb

BROKERS = (101, 102, 103)


def create(
    name: str, partitions: int = 6, replication_factor: int = 3, **configs: str
) -> pb.CreateTopicsRequest:
    return pb.CreateTopicsRequest(
        topics=[
            pb.CreatableTopic(
                name=name,
                num_partitions=partitions,
                replication_factor=replication_factor,
                configs={key.replace("_", "."): value for key, value in configs.items()},
            )
        ],
        timeout_ms=2000,
    )


def topic_names(client: ControllerClient, node_id: int) -> set[str]:
    answer = client.call(node_id, "Metadata", pb.MetadataRequest())
    return {topic.name for topic in answer.topics}


@pytest.fixture
def started(cluster: LoopbackCluster) -> Iterator[tuple[LoopbackCluster, ControllerClient]]:
    cluster.start("--roles", "controller")
    client = ControllerClient(cluster.addresses)
    try:
        yield cluster, client
    finally:
        client.close()


class TopicWriter(Background):
    """Creates topics w-0001, w-0002, ... one at a time, each until a definitive answer."""

    def __init__(self, client: ControllerClient) -> None:
        self.client = client
        self.acked: list[str] = []
        self.acked_by: list[tuple[str, int, float]] = []  # (name, controller, when)
        self.outcomes: Counter[str] = Counter()

    def _run(self) -> None:
        sequence = 0
        while not self._stop.is_set():
            sequence += 1
            name = f"w-{sequence:04d}"
            while True:
                answer = self.client.write("CreateTopics", create(name, 2, 3), timeout_s=30)
                error = answer.error.error_name or answer.topics[0].error.error_name
                self.outcomes[error or "OK"] += 1
                if error in ("", "TOPIC_ALREADY_EXISTS"):
                    break
                time.sleep(0.05)  # REQUEST_TIMED_OUT and the like: its fate is unknown; again
            self.acked.append(name)
            self.acked_by.append((name, answer.controller_id, time.monotonic()))


def test_topics_through_the_active_controller(
    started: tuple[LoopbackCluster, ControllerClient],
) -> None:
    cluster, client = started
    cluster_id = cluster.layout.cluster_id
    assert cluster_id
    active = client.active_id()
    with FakeBrokers(client, cluster_id, BROKERS) as brokers:
        brokers.wait_unfenced()
        described = client.call(active, "DescribeCluster", pb.DescribeClusterRequest())
        assert described.cluster_id == cluster_id
        assert [(b.broker_id, b.fenced) for b in described.brokers] == [(b, False) for b in BROKERS]

        created = client.write("CreateTopics", create("orders"))
        assert created.controller_id == active
        (result,) = created.topics
        assert not result.HasField("error"), result
        assert (result.num_partitions, result.replication_factor) == (6, 3)

        metadata = client.call(active, "Metadata", pb.MetadataRequest(topics=["orders"]))
        (orders,) = metadata.topics
        partitions = orders.partitions
        assert [p.partition_index for p in partitions] == list(range(6))
        assert all(sorted(p.replicas) == list(BROKERS) for p in partitions)
        assert all(sorted(p.isr) == list(BROKERS) for p in partitions)
        assert Counter(p.leader_id for p in partitions) == {b: 2 for b in BROKERS}
        assert Counter(p.replicas[0] for p in partitions) == {b: 2 for b in BROKERS}
        assert [b.broker_id for b in metadata.brokers] == list(BROKERS)
        # Every node serves the committed metadata, standbys too (they may lag a little).
        for node_id in client.node_ids:
            eventually(
                lambda node_id=node_id: topic_names(client, node_id),
                lambda names: "orders" in names,
                10,
                f"node {node_id} to show topic orders",
            )

        # Invalid requests: Kafka's codes, and messages naming the cause.
        (again,) = client.write("CreateTopics", create("orders")).topics
        assert again.error.error_name == "TOPIC_ALREADY_EXISTS"
        assert "'orders'" in again.error.message
        (too_many,) = client.write("CreateTopics", create("wide", 1, 4)).topics
        assert too_many.error.error_name == "INVALID_REPLICATION_FACTOR"
        assert "replication factor 4" in too_many.error.message
        assert "(3)" in too_many.error.message
        (bad_value,) = client.write("CreateTopics", create("c1", 1, 1, retention_ms="soon")).topics
        assert bad_value.error.error_name == "INVALID_CONFIG"
        assert "retention.ms" in bad_value.error.message and "'soon'" in bad_value.error.message
        (bad_key,) = client.write("CreateTopics", create("c2", 1, 1, no_such_key="1")).topics
        assert bad_key.error.error_name == "INVALID_CONFIG"
        assert "no.such.key" in bad_key.error.message
        assert "c1" not in topic_names(client, active)

        # A standby refuses writes and names the active controller.
        standby = next(i for i in client.node_ids if i != active)
        refused = client.call(standby, "CreateTopics", create("elsewhere"))
        assert refused.error.error_name == "NOT_CONTROLLER"
        assert refused.controller_id == active
        assert f"the active controller is node {active}" in refused.error.message

        deleted = client.write("DeleteTopics", pb.DeleteTopicsRequest(topic_names=["orders"]))
        assert not deleted.topics[0].HasField("error"), deleted
        (gone,) = client.call(active, "Metadata", pb.MetadataRequest(topics=["orders"])).topics
        assert gone.error.error_name == "UNKNOWN_TOPIC_OR_PARTITION"
        assert brokers.errors == [], brokers.errors[:3]


def test_kill_9_of_the_active_controller_loses_nothing_acknowledged(
    started: tuple[LoopbackCluster, ControllerClient],
) -> None:
    cluster, client = started
    old = client.active_id()
    with FakeBrokers(client, cluster.layout.cluster_id or "", BROKERS) as brokers:
        brokers.wait_unfenced()
        with TopicWriter(client) as writer:
            eventually(lambda: len(writer.acked), lambda n: n >= 5, 30, "5 topics created")
            killed_at = time.monotonic()
            cluster.signal(old, signal.SIGKILL)
            eventually(
                lambda: [c for _, c, when in list(writer.acked_by) if when > killed_at],
                lambda controllers: any(c != old for c in controllers),
                30,
                "a topic created by a new active controller",
            )
            first_new = next(
                when for _, c, when in list(writer.acked_by) if when > killed_at and c != old
            )
            count = len(writer.acked)
            eventually(lambda: len(writer.acked), lambda n: n >= count + 2, 30, "2 more topics")
        acked = set(writer.acked)
        print(
            f"kill -9 of controller {old}: next CreateTopics answered after "
            f"{(first_new - killed_at) * 1000:.0f} ms; outcomes {dict(writer.outcomes)}"
        )
        survivors = [i for i in client.node_ids if i != old]
        new = client.active_id()
        assert new != old
        for node_id in survivors:
            eventually(
                lambda node_id=node_id: topic_names(client, node_id),
                lambda names: names == acked,
                10,
                f"node {node_id} to show exactly the {len(acked)} acknowledged topics",
            )
        # The old controller comes back as a standby: its uncommitted writes (if any) were
        # reverted or committed by the new leader; it shows exactly the same topics.
        restarted = cluster.cli("restart", str(old))
        assert restarted.returncode == 0, restarted.stderr
        eventually(
            lambda: topic_names_or_none(client, old),
            lambda names: names == acked,
            20,
            f"restarted node {old} to show exactly the acknowledged topics",
        )
        refused = client.call(old, "CreateTopics", create("late"))
        assert refused.error.error_name == "NOT_CONTROLLER" and refused.controller_id == new
        created = client.write("CreateTopics", create("after-restart"))
        assert not created.topics[0].HasField("error"), created


def test_graceful_sigterm_of_the_active_controller_hands_over_at_once(
    started: tuple[LoopbackCluster, ControllerClient],
) -> None:
    """SIGTERM makes the active controller resign its Raft leadership: the next controller
    answers writes well within a follower's fetch timeout, and the old process exits cleanly."""
    cluster, client = started
    old = client.active_id()
    old_pid = cluster.pid(old)
    terminated_at = time.monotonic()
    cluster.signal(old, signal.SIGTERM)
    created = client.write("CreateTopics", create("after-sigterm", 1, 1, retention_ms="1000"))
    handover_s = time.monotonic() - terminated_at
    print(f"SIGTERM of controller {old}: next write answered after {handover_s * 1000:.0f} ms")
    assert created.controller_id != old
    # No brokers: the new controller answers, and with the error naming why.
    assert created.topics[0].error.error_name == "INVALID_REPLICATION_FACTOR"
    assert handover_s < FETCH_TIMEOUT_MS / 1000
    wait_for(lambda: old_pid not in cluster.node_pids(), 10, "the old controller to exit")
    log = (cluster.data_dir / f"node-{old}" / "node.log").read_text()
    assert f"node {old}: stopped" in log


def topic_names_or_none(client: ControllerClient, node_id: int) -> set[str] | None:
    try:
        return topic_names(client, node_id)
    except grpc.RpcError:  # not serving yet
        return None
