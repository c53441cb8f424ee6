"""`replog topics` against a real default cluster (three combined broker+controller nodes):
the brokers register and unfence by themselves, topics are created, listed, described in
kafka-topics.sh's layout and deleted, user mistakes are one line on stderr with exit 1, and a
broker killed with -9 is fenced and leaves every ISR while its partitions get new leaders."""

from __future__ import annotations

import json
import signal
from typing import Any

from cluster_helpers import LoopbackCluster, replog, wait_for

# Kafka's broker.session.timeout.ms default: how long a silent broker stays unfenced.
SESSION_TIMEOUT_S = 9.0
SHORT_SESSION_S = 3.0
SHORT_SESSION = (
    "--override",
    f"broker.session.timeout.ms={SHORT_SESSION_S * 1000:.0f}",
    "--override",
    "broker.heartbeat.interval.ms=500",
)


def topics(cluster: LoopbackCluster, *args: str) -> Any:
    return replog("topics", *args, "--data-dir", str(cluster.data_dir))


def describe(cluster: LoopbackCluster, topic: str) -> dict[str, Any]:
    result = topics(cluster, "describe", "--topic", topic, "--json")
    assert result.returncode == 0, result.stderr
    (described,) = json.loads(result.stdout)["topics"]
    assert isinstance(described, dict)
    return described


def create_when_registered(cluster: LoopbackCluster, topic: str) -> None:
    """Create `topic` (6 partitions, 3 replicas) once the brokers have registered."""

    def created() -> bool:
        result = topics(
            cluster, "create", "--topic", topic, "--partitions", "6",
            "--replication-factor", "3",
        )  # fmt: skip
        return result.returncode == 0

    wait_for(created, 20, f"topic {topic} to be created")


def test_topics_on_a_default_cluster(cluster: LoopbackCluster) -> None:
    cluster.start()

    def created() -> bool:
        # The brokers register and unfence a moment after the quorum has a leader.
        result = topics(
            cluster, "create", "--topic", "orders", "--partitions", "6",
            "--replication-factor", "3", "--config", "retention.ms=86400000",
        )  # fmt: skip
        return result.returncode == 0 and "Created topic orders." in result.stdout

    wait_for(created, 20, "topic orders to be created")
    listed = topics(cluster, "list")
    assert listed.returncode == 0 and listed.stdout.split() == ["orders"], listed

    text = topics(cluster, "describe", "--topic", "orders")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].startswith("Topic: orders\tTopicId: ")
    assert "\tPartitionCount: 6\tReplicationFactor: 3\tConfigs: retention.ms=86400000" in lines[0]
    assert lines[1] == "\tTopic: orders\tPartition: 0\tLeader: " + lines[1].split("Leader: ")[1]
    orders = describe(cluster, "orders")
    partitions = orders["partitions"]
    assert [p["partition"] for p in partitions] == list(range(6))
    leaders = [p["leader"] for p in partitions]
    assert sorted(leaders) == [1, 1, 2, 2, 3, 3]  # leaders balanced over the three brokers
    assert all(sorted(p["replicas"]) == [1, 2, 3] == sorted(p["isr"]) for p in partitions)

    # User mistakes: one line on stderr, exit 1, no traceback.
    again = topics(cluster, "create", "--topic", "orders")
    assert again.returncode == 1 and "orders" in again.stderr, again
    assert len(again.stderr.strip().splitlines()) == 1, again.stderr
    wide = topics(cluster, "create", "--topic", "wide", "--replication-factor", "4")
    assert wide.returncode == 1 and "replication factor 4" in wide.stderr, wide
    missing = topics(cluster, "describe", "--topic", "nope")
    assert missing.returncode == 1 and "nope" in missing.stderr, missing
    assert "Traceback" not in again.stderr + wide.stderr + missing.stderr

    # kill -9 of broker 1: after the session timeout it is fenced, leaves every ISR, and the
    # partitions it led are led by others; nothing else about the topic changes.
    cluster.signal(1, signal.SIGKILL)

    def broker_1_gone() -> bool:
        after = describe(cluster, "orders")["partitions"]
        return all(1 not in p["isr"] and p["leader"] in (2, 3) for p in after)

    wait_for(broker_1_gone, SESSION_TIMEOUT_S + 15, "broker 1 to leave every ISR")
    after = describe(cluster, "orders")
    assert after["topic_id"] == orders["topic_id"]
    assert [sorted(p["replicas"]) for p in after["partitions"]] == [[1, 2, 3]] * 6

    deleted = topics(cluster, "delete", "--topic", "orders")
    assert deleted.returncode == 0, deleted.stderr
    wait_for(lambda: topics(cluster, "list").stdout.split() == [], 10, "topic orders to be deleted")


def test_sigterm_of_a_broker_moves_its_leaderships_away_first(cluster: LoopbackCluster) -> None:
    """Controlled shutdown on SIGTERM: before the node exits, the controller moves every
    leadership of its broker to another replica and takes it out of the ISRs, so no partition
    waits for a session timeout; the node then exits on its own."""
    cluster.start()
    create_when_registered(cluster, "events")
    assert 3 in [p["leader"] for p in describe(cluster, "events")["partitions"]]
    pid = cluster.pid(3)
    cluster.signal(3, signal.SIGTERM)
    wait_for(lambda: pid not in cluster.node_pids(), 30, "node 3 to exit")
    after = describe(cluster, "events")["partitions"]
    assert all(p["leader"] in (1, 2) and 3 not in p["isr"] for p in after), after
    log = (cluster.data_dir / "node-3" / "node.log").read_text()
    assert "node 3: stopped" in log and "CRITICAL" not in log


def test_describe_with_the_quorum_lost_says_the_metadata_is_stale_and_counts_dead_leaders(
    cluster: LoopbackCluster,
) -> None:
    """2 of 3 controllers killed: the survivor still answers with its last committed metadata
    (dead leaders, full ISRs). Before: no word of how old it is, and
    `--unavailable-partitions` printed nothing. A 3 s session (heartbeats every 0.5 s): the
    test waits for it to pass."""
    cluster.start(*SHORT_SESSION)
    create_when_registered(cluster, "orders")
    healthy = json.loads(topics(cluster, "describe", "--topic", "orders", "--json").stdout)
    assert healthy["stale"] is False and healthy["metadata_age_ms"] < 5_000
    leaders = {p["partition"]: p["leader"] for p in healthy["topics"][0]["partitions"]}
    assert set(leaders.values()) == {1, 2, 3}
    cluster.kill(2)
    cluster.kill(3)

    def stale_for(seconds: float) -> dict[str, Any] | None:
        result = topics(cluster, "describe", "--topic", "orders", "--json")
        assert result.returncode == 0, result.stderr
        document: dict[str, Any] = json.loads(result.stdout)
        stale = document["stale"] and document["metadata_age_ms"] > seconds * 1000
        return document if stale else None

    wait_for(lambda: stale_for(0) is not None, 30, "the metadata to be reported stale")
    text = topics(cluster, "describe", "--topic", "orders")
    assert text.returncode == 0
    warning = text.stderr.strip()
    assert warning.startswith("replog topics: warning: metadata stale: the quorum has not been "
                              "reached for "), warning  # fmt: skip
    assert "(node 1 last heard from the quorum's leader at 20" in warning, warning
    # The leaders are stale: every partition still names its leader, 2 and 3 included.
    assert "Leader: 2" in text.stdout and "Leader: 3" in text.stdout
    # Once nodes 2 and 3 have been silent for the session timeout, their partitions count as
    # unavailable, as an active controller would have fenced them by then; node 1's do not.
    wait_for(
        lambda: stale_for(SHORT_SESSION_S) is not None,
        SHORT_SESSION_S + 15,
        "the metadata to be stale for the session timeout",
    )
    unavailable = topics(
        cluster, "describe", "--topic", "orders", "--unavailable-partitions", "--json"
    )
    assert unavailable.returncode == 0, unavailable.stderr
    (listed,) = json.loads(unavailable.stdout)["topics"]
    shown = {p["partition"] for p in listed["partitions"]}
    assert shown == {p for p, leader in leaders.items() if leader in (2, 3)}
    assert "brokers 2,3 were not heard from within broker.session.timeout.ms" in (
        unavailable.stderr
    )
