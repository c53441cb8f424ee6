"""`replog log-dirs describe` against one real 3-node cluster per module: Kafka's JSON document
(sizes equal to the segment files on each node's disk, offsets equal to what was produced),
the text mode's two Kafka lines, `--broker-list` / `--topic-list`, a broker that is down (one
stderr line, the others still printed, exit 1), and user mistakes; plus the pure helpers."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_runner import Outcome, replog
from client_cluster import ClientCluster, client_cluster

from replog import Producer
from replog.cli.log_dirs import (
    QUERYING,
    TABLE_HEADER,
    chosen_brokers,
    document,
    received_line,
    table,
)
from replog.errors import KafkaStorageError, ReplogError
from replog.replication.messages import DescribeLogDirsResponse, LogDirDescription, ReplicaLogInfo

RECORDS = {0: 30, 1: 12}  # per partition of topic "sized"


# --- pure helpers --------------------------------------------------------------------------------


def test_chosen_brokers() -> None:
    brokers = {2: "h:2", 1: "h:1", 3: "h:3"}
    assert chosen_brokers(brokers, {1, 2}, None) == {1: "h:1", 2: "h:2"}  # unfenced, in order
    assert chosen_brokers(brokers, {1}, [3, 1, 3]) == {1: "h:1", 3: "h:3"}  # fenced if named
    with pytest.raises(ReplogError) as error:
        chosen_brokers(brokers, {1, 2, 3}, [1, 9, 7])
    assert str(error.value) == (
        "--broker-list: the given brokers do not exist: 7,9; current brokers: 1,2,3"
    )


def test_the_document_is_kafkas_plus_three_offsets() -> None:
    answer = DescribeLogDirsResponse(
        (LogDirDescription("/d", None, (ReplicaLogInfo("t", 0, 100, 0, False, 1, 9, 8),)),)
    )
    assert json.dumps(document({2: answer, 1: DescribeLogDirsResponse(())})) == json.dumps(
        {
            "version": 1,
            "brokers": [
                {"broker": 1, "logDirs": []},
                {
                    "broker": 2,
                    "logDirs": [
                        {
                            "logDir": "/d",
                            "error": None,
                            "partitions": [
                                {
                                    "partition": "t-0",
                                    "size": 100,
                                    "offsetLag": 0,
                                    "isFuture": False,
                                    "logStartOffset": 1,
                                    "logEndOffset": 9,
                                    "highWatermark": 8,
                                    "dirtyRatio": None,
                                }
                            ],
                        }
                    ],
                },
            ],
        }
    )
    assert received_line([1, 2, 3]) == "Received log directory information from brokers 1,2,3"


# --- against a real cluster ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClientCluster]:
    with client_cluster(tmp_path_factory.mktemp("logdirs")) as started:
        started.create_topic("sized", partitions=2)
        started.create_topic("other", partitions=1)
        with Producer(bootstrap_servers=started.bootstrap, linger_ms=0) as producer:
            now = int(time.time() * 1000)  # current: retention must not delete them
            for partition, count in RECORDS.items():
                for i in range(count):
                    producer.send(
                        "sized", b"v" * 50, key=b"k%d" % i, partition=partition, timestamp_ms=now
                    ).get(timeout=30)
        yield started


def describe(cluster: ClientCluster, *args: str) -> Outcome:
    """`log-dirs describe` at the brokers' Kafka listeners, named by the bootstrap list."""
    kafka = ",".join(n.kafka_address or "" for n in cluster.loopback.layout.nodes)
    return replog("log-dirs", "describe", "--bootstrap-server", kafka, *args)


def replicas(doc: dict[str, Any]) -> dict[tuple[int, str], dict[str, Any]]:
    """(broker, "topic-partition") -> the partition entry, over every log dir."""
    found: dict[tuple[int, str], dict[str, Any]] = {}
    for broker in doc["brokers"]:
        for log_dir in broker["logDirs"]:
            for entry in log_dir["partitions"]:
                found[(broker["broker"], entry["partition"])] = entry
    return found


def caught_up(cluster: ClientCluster) -> dict[str, Any]:
    """The JSON document once every replica of "sized" has every record below its HW (the
    followers learn the HW on their next fetch)."""
    deadline = time.monotonic() + 30
    while True:
        outcome = describe(cluster, "--json", "--topic-list", "sized")
        assert outcome.returncode == 0, outcome.stderr
        doc: dict[str, Any] = json.loads(outcome.stdout)
        entries = replicas(doc)
        done = len(entries) == 6 and all(
            e["logEndOffset"] == e["highWatermark"] == RECORDS[int(p.rsplit("-", 1)[1])]
            for (_, p), e in entries.items()
        )
        if done:
            return doc
        assert time.monotonic() < deadline, f"replicas never caught up: {entries}"
        time.sleep(0.3)


def test_json_sizes_and_offsets_match_each_nodes_disk(cluster: ClientCluster) -> None:
    doc = caught_up(cluster)
    assert doc["version"] == 1
    assert [b["broker"] for b in doc["brokers"]] == [1, 2, 3]
    layout = cluster.loopback.layout
    for broker in doc["brokers"]:
        (log_dir,) = broker["logDirs"]
        data = Path(layout.node(broker["broker"]).data_path).resolve()
        assert log_dir["logDir"] == str(data)
        assert log_dir["error"] is None
        assert [p["partition"] for p in log_dir["partitions"]] == ["sized-0", "sized-1"]
        for entry in log_dir["partitions"]:
            on_disk = sum(f.stat().st_size for f in (data / entry["partition"]).glob("*.log"))
            assert entry["size"] == on_disk > 0
            assert entry["offsetLag"] == 0 and entry["isFuture"] is False
            assert entry["logStartOffset"] == 0
    sizes = {e["size"] for (_, p), e in replicas(doc).items() if p == "sized-0"}
    assert len(sizes) == 1  # the same batches on every replica


def test_text_mode_prints_kafkas_lines_then_a_table(cluster: ClientCluster) -> None:
    doc = caught_up(cluster)
    outcome = describe(cluster)
    assert outcome.returncode == 0, outcome.stderr
    querying, received, header, *rows = outcome.stdout.splitlines()
    assert querying == QUERYING == "Querying brokers for log directories information"
    assert received == "Received log directory information from brokers 1,2,3"
    assert header.split() == list(TABLE_HEADER)
    cells = {(int(r.split()[0]), r.split()[2]): r.split() for r in rows}
    assert {"sized-0", "sized-1", "other-0"} <= {p for (_, p) in cells}  # every topic by default
    for (broker, partition), entry in replicas(doc).items():
        assert cells[(broker, partition)][3:] == [
            str(entry["size"]), "0", "no", "0", *[str(RECORDS[int(partition[-1])])] * 2, "-", "-"
        ]  # fmt: skip
    json.loads(describe(cluster, "--json").stdout)  # the document is --json's


def test_the_table_has_a_line_per_replica_and_per_empty_or_failed_dir() -> None:
    answer = DescribeLogDirsResponse(
        (
            LogDirDescription(
                "/d",
                None,
                (
                    ReplicaLogInfo("t", 0, 100, 0, False, 1, 9, 8),
                    ReplicaLogInfo("c", 0, 100, 0, False, 0, 9, 9, dirty_ratio=2 / 3),
                ),
            ),
            LogDirDescription("/e", KafkaStorageError(), ()),
        )
    )
    assert table({2: answer, 1: DescribeLogDirsResponse(())}) == [
        list(TABLE_HEADER),
        ["2", "/d", "t-0", "100", "0", "no", "1", "9", "8", "-", "-"],
        ["2", "/d", "c-0", "100", "0", "no", "0", "9", "9", "0.667", "-"],
        ["2", "/e", "-", "-", "-", "-", "-", "-", "-", "-", "KAFKA_STORAGE_ERROR"],
    ]
    compacted = document({2: answer})["brokers"][0]["logDirs"][0]["partitions"][1]
    assert compacted["dirtyRatio"] == 2 / 3


def test_broker_and_topic_lists(cluster: ClientCluster) -> None:
    outcome = describe(cluster, "--json", "--broker-list", "2", "--topic-list", "other,missing")
    assert outcome.returncode == 0, outcome.stderr
    doc = json.loads(outcome.stdout)
    assert [b["broker"] for b in doc["brokers"]] == [2]
    assert list(replicas(doc)) == [(2, "other-0")]


def test_the_local_clusters_brokers_by_default(cluster: ClientCluster) -> None:
    outcome = replog(
        "log-dirs", "describe", "--json", "--data-dir", str(cluster.loopback.data_dir),
        "--topic-list", "other",
    )  # fmt: skip
    assert outcome.returncode == 0, outcome.stderr
    assert [b["broker"] for b in json.loads(outcome.stdout)["brokers"]] == [1, 2, 3]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--broker-list", "1,9"], 1,
         "replog log-dirs: --broker-list: the given brokers do not exist: 9; current brokers: "
         "1,2,3"),
        (["--broker-list", "one"], 2, "expected broker ids like 1,2,3"),
        (["--topic-list", ","], 2, "expected topic names like a,b"),
    ],
)  # fmt: skip
def test_user_mistakes(cluster: ClientCluster, args: list[str], code: int, message: str) -> None:
    outcome = describe(cluster, "--json", *args)
    assert outcome.returncode == code
    assert message in outcome.stderr.splitlines()[-1], outcome.stderr
    if code == 1:
        assert outcome.stderr.count("\n") == 1


def test_no_cluster_is_one_line(tmp_path: Path) -> None:
    outcome = replog("log-dirs", "describe", "--data-dir", str(tmp_path / "none"))
    assert outcome.returncode == 1
    (line,) = outcome.stderr.splitlines()
    assert line.startswith("replog log-dirs: no cluster in ")


def test_help() -> None:
    outcome = replog("log-dirs", "describe", "--help")
    assert outcome.returncode == 0 and "kafka-log-dirs.sh" in outcome.stdout


def test_a_broker_that_is_down_is_one_line_and_exit_1(cluster: ClientCluster) -> None:
    """Last: it kills node 3 (the fixture's teardown stops the rest)."""
    cluster.loopback.signal(3, signal.SIGKILL)
    outcome = describe(cluster, "--json", "--broker-list", "1,2,3", "--topic-list", "sized")
    assert outcome.returncode == 1
    (line,) = outcome.stderr.splitlines()
    assert line.startswith("replog log-dirs: broker 3 at 127.0.0.1:"), line
    # Refused, or (killed a moment ago) accepted and closed unanswered: said either way.
    assert ": NetworkError: " in line or ": NotAKafkaListenerError: " in line, line
    doc = json.loads(outcome.stdout)
    assert [b["broker"] for b in doc["brokers"]] == [1, 2]
