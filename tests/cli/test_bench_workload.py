"""`replog bench` workload files: the shipped ones parse, OpenMessaging Benchmark's spellings
are taken, and every bad file is a WorkloadError naming the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cli_runner import replog

from replog.cli.bench.workload import CATCH_UP_LIMIT_S, MAX_RATE, load_workload, parse_workload
from replog.errors import WorkloadError

WORKLOADS = Path(__file__).resolve().parents[2] / "bench" / "workloads"

GOOD: dict[str, Any] = {
    "name": "one topic",
    "topics": 1,
    "partitionsPerTopic": 3,
    "messageSize": 1024,
    "keyDistributor": "KEY_ROUND_ROBIN",
    "producersPerTopic": 2,
    "subscriptionsPerTopic": 1,
    "consumerPerSubscription": 3,
    "producerRate": 5000,
    "warmupDurationSeconds": 2,
    "testDurationSeconds": 10,
    "producerConfig": {"linger.ms": 5, "enable.idempotence": False},
}


def test_a_good_workload_is_read_into_its_fields() -> None:
    workload = parse_workload(GOOD)
    assert (workload.topics, workload.partitions_per_topic, workload.message_size) == (1, 3, 1024)
    assert workload.producers == 2 and workload.consumers == 3
    assert workload.rate_per_producer() == 2500
    assert (workload.warmup_s, workload.duration_s) == (2, 10)
    assert workload.producer_config == {"linger.ms": "5", "enable.idempotence": "false"}
    assert workload.kill_leader_at_s is None
    assert parse_workload({**GOOD, "killLeaderAtSeconds": 6}).kill_leader_at_s == 6
    assert parse_workload(workload.to_json()) == workload


@pytest.mark.parametrize("rate", ["max", 0])
def test_max_or_zero_rate_is_unthrottled_and_minutes_are_omb_durations(rate: object) -> None:
    document = {k: v for k, v in GOOD.items() if not k.endswith("Seconds")}
    document.update(producerRate=rate, testDurationMinutes=0.5)
    workload = parse_workload(document)
    assert workload.unthrottled and workload.producer_rate == MAX_RATE
    assert (workload.warmup_s, workload.duration_s) == (0, 30)


def test_every_shipped_workload_parses() -> None:
    files = sorted(WORKLOADS.glob("*.yaml"))
    assert len(files) >= 3
    for path in files:
        assert load_workload(str(path)).name


@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        ({"partitionsPerTopc": 3}, "partitionsPerTopc", "unknown field"),
        ({"topics": None}, "topics", "whole number"),
        ({"topics": 0}, "topics", "must be >= 1"),
        ({"partitionsPerTopic": "3"}, "partitionsPerTopic", "whole number"),
        ({"messageSize": 4}, "messageSize", "the send time"),
        ({"producersPerTopic": True}, "producersPerTopic", "whole number"),
        ({"keyDistributor": "RANDOM"}, "keyDistributor", "NO_KEY"),
        ({"producerRate": -1}, "producerRate", "or max"),
        ({"producerRate": "fast"}, "producerRate", "or max"),
        ({"testDurationSeconds": 0}, "testDurationSeconds", "must be > 0"),
        ({"testDurationMinutes": 1}, "testDurationMinutes", "give one of them"),
        ({"warmupDurationSeconds": "5s"}, "warmupDurationSeconds", "a number"),
        ({"name": ""}, "name", "non-empty string"),
        ({"producerConfig": ["linger.ms=5"]}, "producerConfig", "a mapping"),
        ({"producerConfig": {"acks": None}}, "producerConfig.acks", "scalar"),
        ({"killLeaderAtSeconds": 0}, "killLeaderAtSeconds", r"in \(0, 12\)"),
        ({"killLeaderAtSeconds": 12}, "killLeaderAtSeconds", "warm-up"),
    ],
)
def test_a_bad_field_is_named(change: dict[str, Any], field: str, says: str) -> None:
    with pytest.raises(WorkloadError, match=says) as raised:
        parse_workload({**GOOD, **change}, source="w.yaml")
    assert raised.value.field == field
    assert str(raised.value).startswith("w.yaml: ")
    assert field.split(".")[-1] in str(raised.value)


@pytest.mark.parametrize("key", ["topics", "messageSize", "producerRate", "testDurationSeconds"])
def test_a_missing_field_is_named(key: str) -> None:
    document = {k: v for k, v in GOOD.items() if k != key}
    with pytest.raises(WorkloadError, match="missing") as raised:
        parse_workload(document)
    assert raised.value.field == key


@pytest.mark.parametrize(
    ("text", "says"),
    [("topics: [1\n", "not YAML"), ("- 1\n- 2\n", "expected a mapping"), ("", "got nothing")],
)
def test_a_file_that_is_no_workload_says_so(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(text)
    with pytest.raises(WorkloadError, match=says):
        load_workload(str(path))


def test_a_missing_file_names_its_path(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match=r"nope\.yaml: unreadable"):
        load_workload(str(tmp_path / "nope.yaml"))


def test_a_backlog_makes_a_catch_up_run_without_warm_up_or_test_duration() -> None:
    document = {k: v for k, v in GOOD.items() if not k.endswith("Seconds")}
    workload = parse_workload({**document, "consumerBacklogSizeGB": 2})
    # 2 GiB of 1 KiB records; the writing and the reading are each bounded by the default.
    assert workload.backlog_gib == 2 and workload.backlog_records == 2 * 1024 * 1024
    assert (workload.warmup_s, workload.duration_s) == (0, CATCH_UP_LIMIT_S)
    assert parse_workload(workload.to_json()) == workload
    odd = parse_workload({**document, "consumerBacklogSizeGB": 0.001, "messageSize": 1000})
    assert odd.backlog_records == 1074  # rounded up: the backlog is at least its size
    assert parse_workload(GOOD).backlog_records == 0


@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        ({"consumerBacklogSizeGB": 0}, "consumerBacklogSizeGB", "a number > 0"),
        ({"consumerBacklogSizeGB": "2G"}, "consumerBacklogSizeGB", "GiB of backlog"),
        ({"consumerBacklogSizeGB": 1}, "warmupDurationSeconds", "has no warm-up"),
        (
            {"consumerBacklogSizeGB": 1, "warmupDurationSeconds": 0, "killLeaderAtSeconds": 5},
            "killLeaderAtSeconds",
            "not in a catch-up run",
        ),
    ],
)
def test_a_catch_up_run_refuses_what_it_cannot_do(
    change: dict[str, Any], field: str, says: str
) -> None:
    with pytest.raises(WorkloadError, match=says) as raised:
        parse_workload({**GOOD, **change}, source="w.yaml")
    assert raised.value.field == field


def test_idle_partitions_default_to_none_and_must_be_a_count() -> None:
    assert parse_workload(GOOD).idle_partitions == 0
    assert parse_workload({**GOOD, "idlePartitions": 1000}).idle_partitions == 1000
    for bad in (-1, "1000", 1.5, True):
        with pytest.raises(WorkloadError, match="idlePartitions") as raised:
            parse_workload({**GOOD, "idlePartitions": bad})
        assert raised.value.field == "idlePartitions"


def test_a_run_with_idle_partitions_kills_no_leader() -> None:
    """The killed node is started again only after the run: the idle topic made between its
    two phases could never be led everywhere (replog's and Kafka's waits would time out)."""
    with pytest.raises(WorkloadError, match="not in a run with idle partitions") as raised:
        parse_workload({**GOOD, "idlePartitions": 100, "killLeaderAtSeconds": 5}, "w.yaml")
    assert raised.value.field == "killLeaderAtSeconds"
    assert parse_workload({**GOOD, "idlePartitions": 0, "killLeaderAtSeconds": 5})


def test_a_metadata_run_takes_its_own_fields_only() -> None:
    document = {
        "name": "m",
        "metadataClients": 8,
        "partitionsPerTopic": 1,
        "warmupDurationSeconds": 5,
        "testDurationSeconds": 20,
    }
    workload = parse_workload(document)
    assert (workload.metadata_clients, workload.topics_per_request) == (8, 1)
    assert workload.producers == workload.consumers == 0
    assert parse_workload(workload.to_json()) == workload
    with pytest.raises(WorkloadError, match="not in a metadata run") as raised:
        parse_workload({**document, "producerRate": 100})
    assert raised.value.field == "producerRate"
    with pytest.raises(WorkloadError, match="only in a metadata or controller run") as raised:
        parse_workload({**GOOD, "topicsPerRequest": 2})
    with pytest.raises(WorkloadError, match="metadataClients"):
        parse_workload({**document, "metadataClients": 0})


def test_a_backlog_that_cannot_fit_the_disk_is_refused_before_anything_starts(
    tmp_path: Path,
) -> None:
    workload = tmp_path / "w.yaml"
    workload.write_text(
        "name: big\ntopics: 1\npartitionsPerTopic: 1\nmessageSize: 1024\nproducersPerTopic: 1\n"
        "subscriptionsPerTopic: 1\nconsumerPerSubscription: 1\nproducerRate: max\n"
        "consumerBacklogSizeGB: 1000000\n"
    )
    outcome = replog(
        "bench",
        str(workload),
        "--systems",
        "replog",
        "--work-dir",
        str(tmp_path / "work"),
        "--output",
        str(tmp_path / "out"),
    )
    assert outcome.returncode != 0
    assert "1e+06 GiB backlog needs 3300000.0 GiB free in --work-dir" in outcome.stderr
    assert not (tmp_path / "out").exists()


CONTROLLER: dict[str, Any] = {
    "name": "controller",
    "createPartitions": 10_000,
    "partitionsPerTopic": 10,
    "failoverPartitions": 100_000,
}


def test_a_controller_run_takes_its_own_fields_only() -> None:
    workload = parse_workload(CONTROLLER)
    assert workload.controller and not workload.metadata_clients
    assert (workload.create_partitions, workload.failover_partitions) == (10_000, 100_000)
    assert workload.topics_per_request == 100  # the default
    assert workload.producers == workload.consumers == 0
    assert parse_workload(workload.to_json()) == workload
    assert not parse_workload({**CONTROLLER, "failoverPartitions": 0}).failover_partitions
    for change, field, says in (
        ({"producerRate": 10}, "producerRate", "not in a controller run"),
        ({"createPartitions": 10_005}, "createPartitions", "multiple of partitionsPerTopic"),
        ({"topicsPerRequest": 900}, "topicsPerRequest", "10,800 metadata records"),
        ({"failoverPartitions": 5_000}, "failoverPartitions", ">= createPartitions"),
        ({"failoverPartitions": True}, "failoverPartitions", "or 0 for none"),
    ):
        with pytest.raises(WorkloadError, match=says) as raised:
            parse_workload({**CONTROLLER, **change})
        assert raised.value.field == field
    assert parse_workload({**CONTROLLER, "topicsPerRequest": 833}).topics_per_request == 833


def test_clients_name_distinct_known_clients() -> None:
    workload = parse_workload({**GOOD, "clients": ["replog", "kafka-python"]})
    assert workload.clients == ("replog", "kafka-python")
    assert parse_workload(workload.to_json()) == workload
    assert parse_workload(GOOD).clients == ()
    for bad in (["replog", "replog"], ["librdkafka"], "replog"):
        with pytest.raises(WorkloadError, match="distinct clients of") as raised:
            parse_workload({**GOOD, "clients": bad})
        assert raised.value.field == "clients"
