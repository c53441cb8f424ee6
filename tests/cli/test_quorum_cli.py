"""`replog quorum describe` against a scripted fake Kafka listener: Kafka's DescribeQuorum (and
for the status its DescribeCluster, whose cluster id is the first line), the status and
replication views as kafka-metadata-quorum.sh prints them, `--bootstrap-server` or
`--bootstrap-controller` (not both), and a quorum without a leader retried until `--timeout`."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from cli_runner import replog
from fake_kafka_listener import FakeKafkaListener, listening

from replog.errors import NotLeaderOrFollowerError
from replog.kafka.messages import describe_cluster_response as dcr
from replog.kafka.messages import describe_quorum_response as dqr

CLUSTER_ID = "8sSZhjkhR8eNOfqSeZK-Fg"


@pytest.fixture(autouse=True)
def no_debug(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REPLOG_DEBUG", raising=False)


@pytest.fixture
def node() -> Iterator[FakeKafkaListener]:
    with listening() as (listener,):
        listener.script("DescribeQuorum", quorum())
        listener.script("DescribeCluster", dcr.DescribeClusterResponse(cluster_id=CLUSTER_ID))
        yield listener


def quorum(error_code: int = 0) -> dqr.DescribeQuorumResponse:
    def replica(node: int, end: int, at: int) -> dqr.ReplicaState:
        return dqr.ReplicaState(
            replica_id=node,
            log_end_offset=end,
            last_fetch_timestamp=at,
            last_caught_up_timestamp=at,
        )

    partition = dqr.PartitionData(
        error_code=error_code,
        error_message="no quorum leader answered" if error_code else None,
        leader_id=1,
        leader_epoch=3,
        high_watermark=50,
        current_voters=[replica(1, 50, 2_000), replica(2, 48, 1_500), replica(3, 50, 2_000)],
        observers=[replica(4, -1, -1)],
    )
    return dqr.DescribeQuorumResponse(
        topics=[dqr.TopicData(topic_name="__cluster_metadata", partitions=[partition])],
        nodes=[
            dqr.Node(
                node_id=n,
                listeners=[dqr.Listener(name="CONTROLLER_KAFKA", host="127.0.0.1", port=9192 + n)],
            )
            for n in (1, 2, 3)
        ],
    )


STATUS = (
    f"ClusterId:            {CLUSTER_ID}\n"
    "LeaderId:             1\n"
    "LeaderEpoch:          3\n"
    "HighWatermark:        50\n"
    "MaxFollowerLag:       2\n"
    "MaxFollowerLagTimeMs: 500\n"
    'CurrentVoters:        [{"id": 1, "endpoints": ["CONTROLLER_KAFKA://127.0.0.1:9193"]}, '
    '{"id": 2, "endpoints": ["CONTROLLER_KAFKA://127.0.0.1:9194"]}, '
    '{"id": 3, "endpoints": ["CONTROLLER_KAFKA://127.0.0.1:9195"]}]\n'
    'CurrentObservers:     [{"id": 4, "endpoints": []}]\n'
)


@pytest.mark.parametrize("flag", ["--bootstrap-server", "--bootstrap-controller"])
def test_status_and_replication_as_kafkas_tool_prints_them(
    node: FakeKafkaListener, flag: str
) -> None:
    status = replog("quorum", "describe", flag, node.address)
    assert (status.returncode, status.stdout, status.stderr) == (0, STATUS, "")
    (asked,) = node.asked("DescribeCluster")
    controllers = flag == "--bootstrap-controller"
    assert asked.endpoint_type == (2 if controllers else 1)  # KIP-919: a controller's own kind
    (request,) = node.asked("DescribeQuorum")
    assert [(t.topic_name, [p.partition_index for p in t.partitions]) for t in request.topics] == [
        ("__cluster_metadata", [0])
    ]
    rows = replog("quorum", "describe", "--replication", flag, node.address).stdout.splitlines()
    assert [row.split() for row in rows] == [
        ["NodeId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status"],
        ["1", "50", "0", "2000", "2000", "Leader"],
        ["2", "48", "2", "1500", "1500", "Follower"],
        ["3", "50", "0", "2000", "2000", "Follower"],
        ["4", "-1", "-1", "-1", "-1", "Observer"],
    ]
    as_json = json.loads(replog("quorum", "describe", "--json", flag, node.address).stdout)
    assert (as_json["cluster_id"], as_json["leader_id"], as_json["max_follower_lag"]) == (
        CLUSTER_ID,
        1,
        2,
    )
    assert len(node.asked("DescribeCluster")) == 2  # not for --replication


def test_no_leader_is_retried_until_one_answers_or_the_timeout(node: FakeKafkaListener) -> None:
    node.script("DescribeQuorum", quorum(NotLeaderOrFollowerError.code), quorum())
    found = replog("quorum", "describe", "--bootstrap-server", node.address)
    assert (found.returncode, found.stdout) == (0, STATUS), found.stderr
    node.script("DescribeQuorum", quorum(NotLeaderOrFollowerError.code))
    lost = replog("quorum", "describe", "--bootstrap-server", node.address, "--timeout", "0.5")
    assert lost.returncode == 1
    assert lost.stderr == (
        f"replog quorum: DescribeQuorum: no answer within 0.5 s: {node.address}: "
        "NotLeaderOrFollowerError: no quorum leader answered\n"
    )


def test_a_server_and_a_controller_bootstrap_are_exclusive(node: FakeKafkaListener) -> None:
    both = replog(
        "quorum", "describe", "--bootstrap-server", node.address,
        "--bootstrap-controller", node.address,
    )  # fmt: skip
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
    assert node.asked("DescribeQuorum") == []
