"""`replog bench`'s goal checks and the figures behind them, from stand-ins: the ratios of
replog's medians to Kafka's, etcd's and the other clients', the idle partitions' cost from a
run's two phases, a controller run against a stand-in controller, the workloads each
system is refused, and warm-up runs left out of the results."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Self

import pytest

from replog.cli.bench import base_port_of, check_systems
from replog.cli.bench.controller_failover import Failover
from replog.cli.bench.drivers import kafka_python_settings
from replog.cli.bench.etcd import encode_txn_puts
from replog.cli.bench.goals import check_goals
from replog.cli.bench.report import by_system, series
from replog.cli.bench.runner import Target, idle_figures, run_once
from replog.cli.bench.workload import parse_workload
from replog.errors import BenchSystemError


def metadata(system: str, per_s: float, client: str | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {"system": system, "metadata": {"requests_per_s": per_s}}
    if client is not None:
        result["client"] = client
    return result


def verdicts(grouped: dict[str, list[dict[str, Any]]]) -> dict[tuple[str, str], str]:
    return {(c.goal.text, c.subject): f"{c.row()[3]} {c.verdict}" for c in check_goals(grouped)}


def test_metadata_goals_take_medians_against_kafka_and_etcd() -> None:
    grouped = by_system(
        [
            *(metadata("replog-kafka", v) for v in (90, 100, 400)),
            *(metadata("kafka", v) for v in (40, 50, 60)),
            *(metadata("etcd", v) for v in (150, 200, 210)),
            metadata("jetstream", 1000),  # a peer shown beside them, in no goal
        ]
    )
    assert verdicts(grouped) == {
        ("metadata writes answered per s >= 1.0x Kafka's", "replog-kafka"): "2.00x met",
        ("metadata writes answered per s >= 1.0x etcd's", "replog-kafka"): "0.50x missed",
    }
    del grouped["etcd"]  # a goal whose other side did not run is not checked
    assert len(check_goals(grouped)) == 1


def test_lower_is_better_goals_and_an_undecided_idle_cost() -> None:
    def run(system: str, created_s: float, failover_s: float, idle: float) -> dict[str, Any]:
        return {
            "system": system,
            "controller": {"created_s": created_s, "failover": {"seconds": failover_s}},
            "idle": {"cores_per_1000": idle, "end_to_end_p99_ms_with": 10.0},
        }

    grouped = by_system([run("replog", 12, 3, 0.2), run("kafka", 10, 4, -0.01)])
    got = verdicts(grouped)
    assert got[("partitions created, end to end: <= Kafka's time", "replog")] == "1.20x missed"
    assert got[("controller failover: <= Kafka's time", "replog")] == "0.75x met"
    # Kafka's idle cost measured below 0 (noise): no ratio to judge by.
    assert got[("servers' CPU per 1,000 idle partitions <= Kafka's", "replog")] == "- undecided"
    assert got[("busy topic's end-to-end p99 beside them <= Kafka's", "replog")] == "1.00x met"


def test_a_clients_run_is_one_series_per_client_and_checks_the_client_goals() -> None:
    def run(client: str, produced: float, consumed: float) -> dict[str, Any]:
        return {
            "system": "replog",
            "client": client,
            "produce": {"records_per_s": produced},
            "catch_up": {"records_per_s": consumed},
        }

    results = [
        run("replog", 60_000, 90_000),
        run("kafka-python", 15_000, 40_000),
        run("confluent-kafka", 150_000, 150_000),
        run("aiokafka", 50_000, 100_000),
    ]
    assert [series(r) for r in results][:2] == ["replog [replog]", "replog [kafka-python]"]
    got = verdicts(by_system(results))
    assert got[("Producer records/s >= 3x kafka-python's", "replog [replog]")] == "4.00x met"
    assert got[("Producer records/s >= 0.5x confluent-kafka's", "replog [replog]")] == (
        "0.40x missed"
    )
    assert got[("Consumer records/s >= 3x kafka-python's", "replog [replog]")] == ("2.25x missed")
    assert got[("Consumer records/s >= 1x confluent-kafka's", "replog [replog]")] == (
        "0.60x missed"
    )
    # The issue holds the Producer alone to aiokafka's.
    assert got[("Producer records/s >= 1x aiokafka's", "replog [replog]")] == "1.20x met"
    assert len(got) == 5


def test_a_clients_run_with_the_same_producer_settings_gets_rows_of_its_own() -> None:
    """clients-matched-1kb.yaml answers another question than the goal's (each client's
    defaults): its ratios are labelled so, and never stand in the goal's rows."""
    workload = {"clients": ["replog", "confluent-kafka"], "producerConfig": {"batch.size": 16384}}

    def run(client: str, produced: float) -> dict[str, Any]:
        return {
            "system": "replog",
            "client": client,
            "workload": workload,
            "produce": {"records_per_s": produced},
            "catch_up": {"records_per_s": produced},
        }

    got = verdicts(by_system([run("replog", 20_000), run("confluent-kafka", 6_500)]))
    assert got == {
        (
            "Producer records/s, same producer settings >= 0.5x confluent-kafka's",
            "replog [replog]",
        ): "3.08x met",
        (
            "Consumer records/s, same producer settings >= 1x confluent-kafka's",
            "replog [replog]",
        ): "3.08x met",
    }


def test_the_idle_cost_is_the_cpu_difference_per_1000_idle_partitions() -> None:
    def phase(cores: float, p99: float) -> dict[str, Any]:
        latency = {"latency_ms": {"p99": p99}}
        return {
            "server_cpu_cores": cores,
            "end_to_end": latency,
            "produce": latency,
            "load_average": {"before": [1.0, 1.0, 1.0], "after": [1.0, 1.0, 1.0]},
        }

    idle = idle_figures(phase(0.5, 20), phase(1.3, 35), 5000)
    assert idle["cores_per_1000"] == pytest.approx(0.16)
    assert (idle["server_cpu_cores_without"], idle["server_cpu_cores_with"]) == (0.5, 1.3)
    assert (idle["end_to_end_p99_ms_without"], idle["end_to_end_p99_ms_with"]) == (20, 35)


class FakeController:
    """A controller stand-in: creations and a failover that take no time, recorded."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.created: list[str] = []
        self.deleted: list[str] = []

    def create_led(
        self, names: list[str], partitions: int, per_request: int
    ) -> tuple[float, float]:
        self.calls.append(f"create {len(names)}x{partitions} by {per_request}")
        self.created += names
        return 0.001, 0.004

    def fail_controller(self, probe: str) -> tuple[int, Failover]:
        self.calls.append("fail")
        self.created.append(probe)
        return 2, Failover(1.5, 3, 0.5)

    def restart_killed(self) -> None:
        self.calls.append("restart")

    def delete_topics(self, names: list[str]) -> None:
        self.calls.append(f"delete {len(names)}")
        self.deleted += names

    def target(self) -> Target:
        def no_topics(names: list[str], partitions: int) -> None:
            raise AssertionError("a controller run makes its topics itself")

        return Target(
            driver="fake",
            servers="",
            program=(),
            create_topics=no_topics,
            delete_topics=self.delete_topics,
            server_pids=lambda: [os.getpid()],
            create_led=self.create_led,
            fail_controller=self.fail_controller,
            restart_killed=self.restart_killed,
        )


def test_a_controller_run_creates_grows_fails_over_restarts_and_deletes(tmp_path: Path) -> None:
    fake = FakeController()
    workload = parse_workload(
        {
            "name": "c",
            "createPartitions": 100,
            "partitionsPerTopic": 10,
            "topicsPerRequest": 4,
            "failoverPartitions": 125,
        }
    )
    result = run_once(fake.target(), workload, work_dir=str(tmp_path))
    # 10 topics timed, 3 more (rounded up) to reach the failover's image, the probe; the node
    # restarted before the run's 14 topics are deleted.
    assert fake.calls == ["create 10x10 by 4", "create 3x10 by 4", "fail", "restart", "delete 14"]
    assert sorted(fake.deleted) == sorted(fake.created) and len(set(fake.created)) == 14
    controller = result["controller"]
    assert controller["partitions"] == 100 and controller["topics"] == 10
    assert controller["answered_s"] == 0.001 and controller["created_s"] == 0.004
    assert controller["failover"] == {
        "image_partitions": 130,
        "killed_node": 2,
        "seconds": 1.5,
        "new_controller": 3,
        "known_s": 0.5,
    }
    assert result["produce"]["records"] == 0 and not result["client_bound"]


def test_a_system_without_a_controller_is_refused_a_controller_run(tmp_path: Path) -> None:
    workload = parse_workload({"name": "c", "createPartitions": 10, "partitionsPerTopic": 10})
    bare = Target(
        driver="fake",
        servers="",
        program=(),
        create_topics=lambda names, partitions: None,
        delete_topics=lambda names: None,
    )
    with pytest.raises(BenchSystemError, match="no controller run"):
        run_once(bare, workload, work_dir=str(tmp_path))


def test_each_kind_of_workload_runs_on_its_systems_only() -> None:
    controller = parse_workload({"name": "c", "createPartitions": 10, "partitionsPerTopic": 10})
    meta = parse_workload(
        {"name": "m", "metadataClients": 2, "partitionsPerTopic": 1, "testDurationSeconds": 1}
    )
    data = {
        "name": "d",
        "topics": 1,
        "partitionsPerTopic": 1,
        "messageSize": 100,
        "producersPerTopic": 1,
        "subscriptionsPerTopic": 1,
        "consumerPerSubscription": 1,
        "producerRate": 10,
        "testDurationSeconds": 1,
    }
    check_systems(controller, ["replog", "kafka"], "c.yaml")
    check_systems(meta, ["replog-kafka", "kafka", "etcd", "jetstream"], "m.yaml")
    for workload, systems, says in (
        (controller, ["replog", "etcd"], "c.yaml is a controller run.*etcd cannot run it"),
        (controller, ["kafka", "jetstream"], "controller run.*jetstream cannot"),
        (parse_workload({**data, "clients": ["replog"]}), ["kafka"], "clients run.*kafka cannot"),
        (parse_workload(data), ["etcd"], "produce and consume run.*etcd cannot"),
        (
            parse_workload({**meta.to_json(), "topicsPerRequest": 129}),
            ["etcd"],
            "at most 128 puts",
        ),
    ):
        with pytest.raises(BenchSystemError, match=says):
            check_systems(workload, systems, "c.yaml" if workload is controller else "m.yaml")


def test_a_workload_kafka_could_not_hold_under_this_machines_limits_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import resource

    from replog.cli.bench import systems

    assert systems.kafka_limits_problem(10_001, 12_001, 22_002) is None
    assert systems.kafka_limits_problem(100_001, 20_000, 65_530) == (
        "kafka: 100,001 partitions put a replica of each on every node (RF 3 on 3 nodes), each "
        "an open log file and two mapped indexes: Kafka's nodes need `ulimit -n` (hard) of at "
        "least 102,001 (here 20,000: too low) and vm.max_map_count of at least 202,002 (here "
        "65,530: too low)"
    )
    # One limit short: the message still names both, with the numbers.
    assert systems.kafka_limits_problem(18_001, 20_000, 65_530) == (
        "kafka: 18,001 partitions put a replica of each on every node (RF 3 on 3 nodes), each "
        "an open log file and two mapped indexes: Kafka's nodes need `ulimit -n` (hard) of at "
        "least 20,001 (here 20,000: too low) and vm.max_map_count of at least 38,002 (here "
        "65,530)"
    )
    assert systems.kafka_limits_problem(18_000, 20_000, 65_530) is None
    big = parse_workload(
        {
            "name": "c",
            "createPartitions": 10_000,
            "partitionsPerTopic": 10,
            "failoverPartitions": 100_000,
        }
    )
    assert big.most_partitions == 100_001
    (tmp_path / "max_map_count").write_text("65530\n")
    monkeypatch.setattr(systems, "MAX_MAP_COUNT", str(tmp_path / "max_map_count"))
    monkeypatch.setattr(resource, "getrlimit", lambda which: (1024, 20_000))
    with pytest.raises(BenchSystemError, match=r"100,001 partitions.*`ulimit -n`"):
        check_systems(big, ["replog", "kafka"], "c.yaml")
    check_systems(big, ["replog"], "c.yaml")  # replog keeps no file open per replica
    idle = parse_workload(
        {
            "name": "i",
            "topics": 1,
            "partitionsPerTopic": 3,
            "messageSize": 1024,
            "producersPerTopic": 1,
            "subscriptionsPerTopic": 1,
            "consumerPerSubscription": 1,
            "producerRate": 2000,
            "testDurationSeconds": 30,
            "idlePartitions": 5000,
        }
    )
    assert idle.most_partitions == 5006
    check_systems(idle, ["replog", "kafka"], "i.yaml")


@pytest.mark.parametrize(
    ("name", "refused"),
    [
        ("idle-partitions-1000.yaml", False),
        ("idle-partitions-5000.yaml", False),
        ("controller-10k.yaml", False),
        ("controller-100k.yaml", True),
        ("catch-up-2gb.yaml", False),
    ],
)
def test_the_shipped_workloads_kafka_can_hold_here_pass_the_limit_check(
    name: str, refused: bool
) -> None:
    """Under this machine's limits (`ulimit -n` 20,000 hard, `vm.max_map_count` 65,530) only the
    100,000-partition failover is beyond Kafka's nodes."""
    from replog.cli.bench.systems import kafka_limits_problem
    from replog.cli.bench.workload import load_workload

    path = Path(__file__).resolve().parents[2] / "bench" / "workloads" / name
    problem = kafka_limits_problem(load_workload(str(path)).most_partitions, 20_000, 65_530)
    assert (problem is not None) == refused


def test_base_ports_are_given_per_system_then_step_by_300() -> None:
    assert [base_port_of([27000, 38000], i) for i in range(4)] == [27000, 38000, 38300, 38600]


def test_kafka_settings_become_kafka_python_arguments() -> None:
    assert kafka_python_settings(
        {"bootstrap.servers": "a:1,b:2", "acks": "all", "linger.ms": "5", "batch.size": "16384"}
    ) == {"bootstrap_servers": ["a:1", "b:2"], "acks": "all", "linger_ms": 5, "batch_size": 16384}
    assert kafka_python_settings({"enable.idempotence": "false", "x.y": "true"}) == {
        "enable_idempotence": False,
        "x_y": True,
    }


def test_an_etcd_txn_puts_every_pair_and_holds_at_most_128() -> None:
    # TxnRequest{success: [RequestOp{request_put: PutRequest{key: "k", value: "v"}}]}
    assert encode_txn_puts([(b"k", b"v")]) == b"\x12\x08\x12\x06\x0a\x01k\x12\x01v"
    assert len(encode_txn_puts([(b"k", b"v")] * 128)) == 128 * 10
    with pytest.raises(ValueError, match="1 to 128 puts"):
        encode_txn_puts([(b"k", b"v")] * 129)


def test_kafkas_active_controller_is_the_newest_epochs_leader(tmp_path: Path) -> None:
    import json

    from replog.cli.bench.systems import KafkaSystem

    def write(node: int, epoch: int, leader: int) -> None:
        directory = tmp_path / f"node-{node}" / "data" / "__cluster_metadata-0"
        directory.mkdir(parents=True, exist_ok=True)
        state = {"leaderId": leader, "leaderEpoch": epoch, "votedId": -1}
        (directory / "quorum-state").write_text(json.dumps(state))

    kafka = KafkaSystem(str(tmp_path), 38000, script=None)
    write(1, 4, 2)
    write(2, 5, 3)
    write(3, 5, 3)
    assert kafka.active_controller() == 3
    write(2, 6, -1)  # a candidate of a newer epoch: no leader known yet
    with pytest.raises(BenchSystemError, match=r"no leader named.*\(6, -1\)"):
        kafka.active_controller(timeout_s=0.2)


def test_kafkas_creation_ends_once_every_node_holds_every_replicas_log_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`KafkaSystem.create_led` (a controller run's creation and an idle topic's) against a
    stand-in cluster: the CreateTopics answer and the leaders in Metadata are not the end; each
    node's log directory must hold a directory for every replica."""
    import threading

    from replog.cli.bench import systems

    led: list[tuple[str, ...]] = []
    monkeypatch.setattr(systems, "kafka_create", lambda servers, names, partitions, each, **_: 0.25)
    monkeypatch.setattr(
        systems,
        "wait_for_kafka_metadata",
        lambda servers, names, partitions, **_: led.append(names),
    )
    kafka = systems.KafkaSystem(str(tmp_path), 38000, script=None)
    data = [tmp_path / f"node-{node}" / "data" for node in (1, 2, 3)]
    for directory in data:
        directory.mkdir(parents=True)
        for p in range(4):
            (directory / f"idle-{p}").mkdir()  # node 3 still lacks idle-4
    for directory in data[:2]:
        (directory / "idle-4").mkdir()
    late = threading.Timer(0.5, lambda: (data[2] / "idle-4").mkdir())
    late.start()
    answered_s, led_s = kafka.create_led(["idle"], 5, 1)
    assert answered_s == 0.25 and led_s >= 0.4 and [list(n) for n in led] == [["idle"]]
    late.join()


def test_replogs_creation_is_timed_from_its_first_request_not_from_its_settling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ReplogSystem.create_led` first waits for its nodes' totals to settle (the topics made
    just before, a deletion under way): that wait is neither the creation's answer nor its
    wait for every replica, and Kafka has none, so the times start at the first request."""
    from replog.cli.bench import cluster_metrics, systems

    def settled(urls: list[str], timeout_s: float) -> tuple[int, int]:
        time.sleep(0.5)  # two scrapes 0.5 s apart at least, more while changes are applied
        return (9, 3)

    def answered(servers: str, names: list[str], partitions: int, per_request: int) -> float:
        time.sleep(0.05)
        return 0.05

    waited: list[tuple[int, tuple[int, int]]] = []

    def led(urls: list[str], count: int, rf: int, timeout_s: float, **kw: Any) -> None:
        waited.append((count, kw["before"]))
        time.sleep(0.1)

    monkeypatch.setattr(cluster_metrics, "settled_totals", settled)
    monkeypatch.setattr(cluster_metrics, "wait_replicas", led)
    replog = systems.ReplogSystem("replog", str(tmp_path), 24000)
    monkeypatch.setattr(systems, "kafka_create", answered)
    answered_s, led_s = replog.create_led(["idle"], 1000, 1)
    assert waited == [(1000, (9, 3))]
    assert answered_s == 0.05 and 0.15 <= led_s < 0.5

    def unsettled(urls: list[str], timeout_s: float) -> tuple[int, int]:
        raise RuntimeError("the cluster's replicas did not settle within 60 s (...)")

    monkeypatch.setattr(cluster_metrics, "settled_totals", unsettled)
    with pytest.raises(BenchSystemError, match=r"^replog: before creating idle: the cluster's"):
        replog.create_led(["idle"], 1000, 1)


class _Partition:
    def __init__(self, leader: int) -> None:
        self.leader = leader


class _Topic:
    def __init__(self, leaders: list[int]) -> None:
        self.partitions = {p: _Partition(leader) for p, leader in enumerate(leaders)}


class _Metadata:
    def __init__(self, topics: dict[str, list[int]]) -> None:
        self.topics = {name: _Topic(leaders) for name, leaders in topics.items()}


class FakeAdminClient:
    """confluent-kafka's AdminClient as the bench uses it: made from a config, used in a `with`
    (whose exit destroys the real one)."""

    def __init__(self, config: dict[str, str]) -> None:
        pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        pass


def test_a_wait_for_kafkas_leaders_says_when_metadata_was_never_answered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A wait whose Metadata requests all failed (a broker gone, answers slower than their
    bound) must say so, not that every partition was without a leader; one whose last request
    failed says that beside the last answer. Leader -1 is not a leader."""
    import confluent_kafka.admin

    from replog.cli.bench import systems

    answers: list[Any] = []

    class Admin(FakeAdminClient):
        def list_topics(self, timeout: float) -> _Metadata:
            answer = answers.pop(0) if len(answers) > 1 else answers[0]
            if isinstance(answer, Exception):
                raise answer
            return answer

    clock = [0.0]
    monkeypatch.setattr(confluent_kafka.admin, "AdminClient", Admin)
    monkeypatch.setattr(systems.time, "sleep", lambda s: clock.__setitem__(0, clock[0] + s))
    monkeypatch.setattr(systems.time, "monotonic", lambda: clock[0])

    answers[:] = [confluent_kafka.KafkaException("Local: Timed out")]
    with pytest.raises(BenchSystemError) as raised:
        systems.wait_for_kafka_metadata("b:1", ["t"], 4, timeout_s=10)
    assert str(raised.value) == (
        "waited 10 s for leaders of every partition of t at b:1: no Metadata request was "
        "answered (the last: KafkaException: Local: Timed out)"
    )
    answers[:] = [_Metadata({"t": [1, -1, 2, -1]}), RuntimeError("gone")]
    with pytest.raises(BenchSystemError) as raised:
        systems.wait_for_kafka_metadata("b:1", ["t"], 4, timeout_s=10)
    assert str(raised.value).endswith(
        ": 2 of 4 partitions without a leader in the last answer; the last request failed: "
        "RuntimeError: gone"
    )
    answers[:] = [_Metadata({"t": [1, -1, 2, -1]}), _Metadata({"t": [1, 3, 2, 1]})]
    systems.wait_for_kafka_metadata("b:1", ["t"], 4, timeout_s=10)


def _server(config: str, exited: bool = False) -> subprocess.Popen[bytes]:
    """A stand-in server process with `config` on its command line (as a node's)."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; time.sleep(float(sys.argv[1]))",
            "0" if exited else "60",
            config,
        ]
    )
    if exited:
        process.wait()
    return process


def _refused_at_once(create: Callable[[], object], servers: list[subprocess.Popen[bytes]]) -> str:
    """The `BenchSystemError` `create()` raised within 2 s (its wait is given 3); the stand-in
    servers are stopped after it."""
    try:
        began = time.monotonic()
        with pytest.raises(BenchSystemError) as raised:
            create()
        assert time.monotonic() - began < 2
        return str(raised.value)
    finally:
        for server in servers:
            server.kill()
            server.wait()


def test_a_wait_on_kafkas_nodes_ends_at_once_when_one_of_them_exited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node that died ("Too many open files", an OutOfMemoryError) never makes its replicas:
    the wait names it and the end of its log at once, not after its 900 s."""
    from replog.cli.bench import systems

    monkeypatch.setattr(systems, "kafka_create", lambda servers, names, partitions, each, **_: 0.25)
    monkeypatch.setattr(systems, "wait_for_kafka_metadata", lambda *a, **kw: None)
    monkeypatch.setattr(systems, "create_timeout_s", lambda count: 3.0)
    kafka = systems.KafkaSystem(str(tmp_path), 34000, script=None)
    servers = []
    for node in (1, 2, 3):
        path = tmp_path / f"node-{node}"
        (path / "data").mkdir(parents=True)
        servers.append(_server(str(path / "server.properties"), exited=node == 3))
        (path / "node.pid").write_text(f"{servers[-1].pid}\n")
    (tmp_path / "node-3" / "node.log").write_text(
        "[2026-11-26 17:40:01] INFO making logs\n"
        "[2026-11-26 17:40:02] ERROR java.io.IOException: Too many open files\n"
    )
    kafka._killed = 3  # the harness's own kill (a failover) is not a failure
    kafka._check_running()
    kafka._killed = None
    assert _refused_at_once(lambda: kafka.create_led(["idle"], 5, 1), servers) == (
        f"kafka: node 3 (pid {servers[2].pid}) exited; the end of "
        f"{tmp_path / 'node-3' / 'node.log'}:\n[2026-11-26 17:40:01] INFO making logs\n"
        "[2026-11-26 17:40:02] ERROR java.io.IOException: Too many open files"
    )


def test_a_wait_on_replogs_nodes_ends_at_once_when_one_of_them_exited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from replog.cli.bench import cluster_metrics, systems
    from replog.cli.local_cluster import LocalCluster

    monkeypatch.setattr(cluster_metrics, "settled_totals", lambda urls, timeout_s: (0, 0))
    monkeypatch.setattr(
        cluster_metrics,
        "scrapes",
        lambda urls: (
            [cluster_metrics.Scrape(partitions=5)] * 2 + [cluster_metrics.Scrape(answered=False)]
        ),
    )
    monkeypatch.setattr(systems, "create_timeout_s", lambda count: 3.0)
    replog = systems.ReplogSystem("replog", str(tmp_path), 24000)
    monkeypatch.setattr(systems, "kafka_create", lambda servers, names, partitions, each: 0.05)
    nodes = LocalCluster.plan(str(tmp_path), 3, 24000).nodes
    servers = [_server(n.config_path, exited=n.node_id == 3) for n in nodes]
    replog._started = [(n, p.pid) for n, p in zip(nodes, servers, strict=True)]
    assert _refused_at_once(lambda: replog.create_led(["idle"], 5, 1), servers) == (
        f"replog: node 3 (pid {servers[2].pid}, its log: {nodes[2].log_path}) exited"
    )


def test_kafkas_nodes_are_stopped_when_they_listen_but_never_all_show_in_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run_system` stops a system only once `start` returned: a start that fails after
    kafka.sh started the JVMs must stop them itself."""
    from replog.cli.bench import systems

    ran: list[str] = []

    def script(*args: str, timeout_s: float, pin: bool = False) -> str:
        ran.append(args[0])
        return "127.0.0.1:34000"

    def brokers(settings: dict[str, str], count: int) -> None:
        servers = settings["bootstrap.servers"]
        raise BenchSystemError(f"waited 60 s for {count} brokers at {servers}; metadata lists 2")

    kafka = systems.KafkaSystem(str(tmp_path), 34000, script=None)
    monkeypatch.setattr(kafka, "_script", script)
    monkeypatch.setattr(systems, "wait_for_kafka_brokers", brokers)
    with pytest.raises(BenchSystemError, match="metadata lists 2"):
        kafka.start()
    assert ran == ["start", "bootstrap", "stop"]


def test_a_kafka_run_ends_once_its_deleted_topics_logs_are_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka renames a deleted partition's log `<dir>.<id>-delete` and keeps it open a minute:
    the next run would hold both runs' files (10,000 + 10,000 at `ulimit -n` 20,000 in
    controller-10k's second run) and their removal would land in its measured time."""
    import threading

    import confluent_kafka.admin

    from replog.cli.bench import systems

    class Admin(FakeAdminClient):
        def delete_topics(self, names: list[str], request_timeout: float) -> dict[str, Any]:
            done: Future[None] = Future()
            done.set_result(None)
            return dict.fromkeys(names, done)

    monkeypatch.setattr(confluent_kafka.admin, "AdminClient", Admin)
    kafka = systems.KafkaSystem(str(tmp_path), 34000, script=None)
    kafka.wait_deleted(timeout_s=0)  # nothing deleted: no wait
    data = [tmp_path / f"node-{node}" / "data" for node in (1, 2, 3)]
    for directory in data:
        (directory / "__cluster_metadata-0").mkdir(parents=True)
        (directory / "kept-0").mkdir()
    (data[0] / "gone-0").mkdir()  # not yet renamed by node 1
    (data[1] / "gone-0.5f2c-delete").mkdir()  # renamed, still open
    kafka.delete_topics(["gone"])

    def removed() -> None:
        (data[0] / "gone-0").rename(data[0] / "gone-0.77aa-delete")
        time.sleep(0.3)
        (data[0] / "gone-0.77aa-delete").rmdir()
        (data[1] / "gone-0.5f2c-delete").rmdir()

    remover = threading.Thread(target=removed)
    began = time.monotonic()
    remover.start()
    kafka.wait_deleted()
    assert 0.3 <= time.monotonic() - began < 5
    remover.join()


def test_a_wait_for_kafkas_log_directories_names_the_replicas_missing_per_node(
    tmp_path: Path,
) -> None:
    from replog.cli.bench.systems import wait_replica_dirs

    made, empty = tmp_path / "node-1", tmp_path / "node-2"
    made.mkdir()
    empty.mkdir()
    for p in range(3):
        (made / f"t-{p}").mkdir()
    with pytest.raises(BenchSystemError) as raised:
        wait_replica_dirs([str(made), str(empty)], {"t-0", "t-1", "t-2"}, timeout_s=0.1)
    assert str(raised.value) == (
        f"kafka: 3 of 6 replicas' log directories made after 0.1 s ({empty}: 3 missing, e.g. "
        "t-0, t-1, t-2)"
    )
    wait_replica_dirs([str(made)], {"t-0", "t-1", "t-2"}, timeout_s=0)  # all there: no wait


def test_kafkas_log_directories_are_listed_seldom_far_from_the_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At 100,000 partitions a look lists 100,000 entries on each node: paced by the progress
    (`paced_polls`)."""
    from replog.cli.bench import paced_polls, systems

    node = tmp_path / "node-1"
    node.mkdir()
    wanted = {f"t-{p}" for p in range(1000)}
    clock = [0.0]
    slept: list[float] = []
    made = iter([range(0), range(10), range(1000)])  # the directories made by each look

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock[0] += seconds
        for p in next(made):
            (node / f"t-{p}").mkdir(exist_ok=True)

    monkeypatch.setattr(systems.time, "sleep", sleep)
    monkeypatch.setattr(systems.time, "monotonic", lambda: clock[0])
    # The pace alone (the bound by the time waited: tests/cli/test_bench_paced_polls.py).
    monkeypatch.setattr(paced_polls, "ELAPSED_FRACTION", 1e9)
    systems.wait_replica_dirs([str(node)], wanted, timeout_s=600)
    # No pace at first, none made in the first 0.2 s; then 10 in 0.4 s with 990 left: the
    # longest wait (a quarter of the 39.6 s left would be 9.9 s).
    assert slept == [0.2, 0.2, 5.0]


def test_a_creation_is_given_more_time_past_22500_partitions() -> None:
    from replog.cli.bench.systems import CREATE_TIMEOUT_S, create_timeout_s

    assert create_timeout_s(10_000) == create_timeout_s(22_500) == CREATE_TIMEOUT_S == 900
    assert create_timeout_s(90_000) == 3600


def test_a_failover_whose_node_does_not_come_back_keeps_its_figure(tmp_path: Path) -> None:
    fake = FakeController()

    def restart() -> None:
        fake.calls.append("restart")
        raise BenchSystemError("kafka: node 2 did not start")

    fake.restart_killed = restart  # type: ignore[method-assign]
    workload = parse_workload(
        {"name": "c", "createPartitions": 10, "partitionsPerTopic": 10, "failoverPartitions": 10}
    )
    result = run_once(fake.target(), workload, work_dir=str(tmp_path))
    assert fake.calls == ["create 1x10 by 100", "fail", "restart", "delete 2"]
    assert result["controller"]["failover"]["seconds"] == 1.5
    assert result["controller"]["failover"]["restart_error"] == "kafka: node 2 did not start"


def test_data_path_goals_hold_for_their_shape_of_workload_only() -> None:
    peak = {"producerRate": "max", "producerConfig": {}}
    paced = {"producerRate": 21500.0, "producerConfig": {}}
    kill = {"producerRate": 2000.0, "producerConfig": {}, "killLeaderAtSeconds": 15.0}
    kafka_batching = {
        "producerRate": "max",
        "producerConfig": {"batch.size": "16384", "linger.ms": "5"},
    }
    backlog = {"producerRate": "max", "producerConfig": {}, "consumerBacklogSizeGB": 2.0}

    def run(system: str, workload: dict[str, Any], mb: float, p99: float) -> dict[str, Any]:
        result: dict[str, Any] = {
            "system": system,
            "workload": workload,
            "produce": {"mb_per_s": mb},
            "end_to_end": {"latency_ms": {"p99": p99}},
            "requests": {"per_broker_per_s": mb * 10},
        }
        if "killLeaderAtSeconds" in workload:
            result["failover"] = {"unavailable_s": p99 / 1000}
        if "consumerBacklogSizeGB" in workload:
            result["catch_up"] = {"mb_per_s": mb * 2}
        return result

    def goals_of(workload: dict[str, Any]) -> dict[str, str]:
        grouped = by_system(
            [
                *(run("replog-kafka", workload, mb, 120) for mb in (80, 81, 85)),
                *(run("kafka", workload, mb, 100) for mb in (40, 42, 49)),
            ]
        )
        return {text: verdict for (text, _), verdict in verdicts(grouped).items()}

    assert goals_of(peak) == {"produce MB/s >= 1.0x Kafka's peak": "1.93x met"}
    assert goals_of(paced) == {"end-to-end p99 at a fixed rate <= Kafka's": "1.20x missed"}
    assert goals_of(kill) == {"unavailability after a leader's kill -9 <= Kafka's": "1.20x missed"}
    assert goals_of(kafka_batching) == {
        "produce requests per s per broker >= 1.0x Kafka's": "1.93x met"
    }
    assert goals_of(backlog) == {"catch-up read MB/s >= 1.0x Kafka's": "1.93x met"}
    # A run that recorded no workload (an older result) is held to none of them.
    assert goals_of({}) == {}


def test_each_run_starts_once_the_system_removed_what_was_deleted_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before a run, the harness waits for a system that removes deleted logs later
    (`KafkaSystem.wait_deleted`) to remove what earlier runs deleted; the last run's deletions
    cost no wait (the cluster stops after it)."""
    import argparse

    import replog.cli.bench as bench
    import replog.cli.bench.runner as runner

    calls: list[str] = []

    class FakeSystem:
        driver, bootstrap_servers, program = "fake", "", ()

        def create_topics(self, names: list[str], partitions: int) -> None: ...
        def delete_topics(self, names: list[str]) -> None: ...
        def kill_leader(self, topic: str) -> int:
            return 1

        def server_pids(self) -> list[int]:
            return []

        def restart_killed(self) -> None:
            calls.append("restart")

        def wait_deleted(self) -> None:
            calls.append("wait_deleted")

    monkeypatch.setattr(runner, "run_once", lambda *a, **kw: calls.append("run") or {})
    args = argparse.Namespace(driver_cpus=None)
    workload = parse_workload({"name": "c", "createPartitions": 10, "partitionsPerTopic": 10})
    bench._run_one(FakeSystem(), None, workload, args, str(tmp_path))
    assert calls == ["wait_deleted", "run", "restart"]


def test_warm_up_runs_run_first_and_are_left_out_of_the_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    import replog.cli.bench as bench
    import replog.cli.bench.systems as systems

    class FakeSystem:
        def start(self) -> None:
            calls.append("start")

        def stop(self) -> None:
            calls.append("stop")

        def describe(self) -> dict[str, Any]:
            return {}

    calls: list[str] = []
    monkeypatch.setattr(systems, "make_system", lambda *args: FakeSystem())

    def one_run(*args: Any) -> dict[str, Any]:
        calls.append("run")
        return {"n": len(calls)}

    monkeypatch.setattr(bench, "_run_one", one_run)
    monkeypatch.setattr(bench, "run_text", lambda result: f"figures of call {result['n']}")
    workload = parse_workload({"name": "c", "createPartitions": 10, "partitionsPerTopic": 10})
    args = argparse.Namespace(
        work_dir=str(tmp_path), kafka_script=None, server_cpus=None, runs=2, warm_up_runs=2
    )
    results = bench.run_system("kafka", workload, args, 38000, str(tmp_path))
    assert calls == ["start", "run", "run", "run", "run", "stop"]
    assert [(r["run"], r["n"]) for r in results] == [(1, 4), (2, 5)]
    assert sorted(p.name for p in tmp_path.glob("*.json")) == ["kafka-run1.json", "kafka-run2.json"]
    printed = capsys.readouterr().out
    assert "kafka warm-up run 1/2 (not measured): figures of call 2" in printed
    assert "kafka warm-up run 2/2 (not measured): figures of call 3" in printed
    assert "kafka run 1/2: figures of call 4" in printed
