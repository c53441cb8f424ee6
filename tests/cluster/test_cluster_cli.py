"""`replog cluster` and `replog quorum describe` as an operator uses them, on real processes.

Commands that start or signal nodes run in a subprocess, as from a shell; read-only ones and
refusals run in-process through the same `main` (faster; an uncaught exception would fail the
test just as a traceback would). A refusal is one line on stderr, a non-zero exit code and no
traceback.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
from pathlib import Path

import pytest
from cluster_helpers import (
    REPLICATION_HEADER,
    LoopbackCluster,
    Outcome,
    read_committed,
    replog,
    replog_in_process,
    wait_for,
)

from replog.admin.controller_client import ControllerClient
from replog.admin.quorum import ask_each
from replog.cli.cluster_status import BROKER_STATE_GAUGE, BROKER_STATES, scrape_gauges
from replog.cli.local_cluster import LocalCluster, accepts_connections
from replog.cli.node_processes import log_tails
from replog.pb import raft_pb2 as pb
from tests.local_ports import KAFKA_CONTROLLER_PORT_OFFSET, KAFKA_PORT_OFFSET, free_base_port


def assert_refused(result: subprocess.CompletedProcess[str] | Outcome, *fragments: str) -> None:
    lines = result.stderr.splitlines()
    assert result.returncode != 0, result.stdout
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def status(cluster: LoopbackCluster) -> dict[int, dict[str, object]]:
    result = cluster.ask("status", "--json")
    assert result.returncode == 0, result.stderr
    return {node["node_id"]: node for node in json.loads(result.stdout)["nodes"]}


def broker_epochs(cluster: LoopbackCluster) -> dict[int, int]:
    """Broker id -> its epoch, for the brokers the active controller counts as active."""
    with contextlib.closing(ControllerClient(list(cluster.addresses.values()))) as controllers:
        brokers = controllers.describe_cluster(timeout_s=5).brokers
    return {b.broker_id: b.broker_epoch for b in brokers if not b.fenced}


def every_node_follows(cluster: LoopbackCluster, leader_id: int) -> bool:
    """Every node names `leader_id` as its leader, and that leader has seen each voter fetch."""
    addresses = cluster.addresses
    answers = ask_each(addresses.values(), 1.0).values()
    known = [a.leader_id for a in answers if isinstance(a, pb.DescribeQuorumResponse)]
    if known != [leader_id] * len(addresses):
        return False
    quorum = cluster.leader()
    return quorum is not None and all(r.last_fetch_timestamp is not None for r in quorum.replicas)


def test_a_cluster_through_its_lifecycle(cluster: LoopbackCluster) -> None:
    started = cluster.start()
    # Each phase of the start is said on stderr as it passes (the report is stdout's).
    phases = started.stderr.splitlines()
    assert phases[0] == f"starting 3 nodes in {cluster.data_dir} (logs: node-<id>/node.log)..."
    said = [line for line in phases if not line.startswith("waiting for ")]
    assert len(said) == 4, started.stderr
    assert said[1].startswith("quorum: node ") and " elected leader (epoch " in said[1]
    assert said[2:] == ["all 3 nodes answer", "brokers 1, 2, 3 registered and unfenced"]
    # Every broker is unfenced when `start` returns: a topic with a replica on each node can
    # be created at once.
    created = replog_in_process(
        *("topics", "create", "--topic", "orders", "--partitions", "6"),
        *("--replication-factor", "3", "--data-dir", str(cluster.data_dir)),
    )
    assert created.returncode == 0, created.stderr
    leader = cluster.describe()
    # `start` returns once a leader committed its epoch, every node answers and every broker is
    # unfenced. The node that came up last may answer before it has heard of the leader
    # (BeginQuorumEpoch is resent every fetch timeout / 2) and before its first Fetch; the
    # status and replication views below show both, so both are waited for.
    wait_for(
        lambda: every_node_follows(cluster, leader.leader_id),
        10,
        f"every node to follow node {leader.leader_id} and fetch from it",
    )
    ports = [cluster.base_port + i for i in range(3)]
    assert f"leader: node {leader.leader_id}" in started.stdout
    for node_id, port in zip((1, 2, 3), ports, strict=True):
        grpc = f"127.0.0.1:{port} (internal gRPC: broker+controller)"
        assert f"node {node_id}  broker,controller  {grpc}" in started.stdout
        config = (cluster.data_dir / f"node-{node_id}" / "server.properties").read_text()
        assert "process.roles=broker,controller\n" in config
        assert f"node.id={node_id}\n" in config
        kafka_port = port + KAFKA_PORT_OFFSET  # LoopbackCluster.start's --kafka-base-port
        controller_port = port + KAFKA_CONTROLLER_PORT_OFFSET
        listeners = (
            f"CONTROLLER://127.0.0.1:{port},PLAINTEXT://127.0.0.1:{kafka_port},"
            f"CONTROLLER_KAFKA://127.0.0.1:{controller_port}"
        )
        assert f"listeners={listeners}\n" in config
        assert f"log.dirs={cluster.data_dir / f'node-{node_id}' / 'data'}\n" in config
    # It ends with the clients' addresses, the Kafka listeners; the gRPC ones are internal.
    closing = started.stdout.splitlines()[-3:]
    assert closing == [
        f"bootstrap.servers: {','.join(f'127.0.0.1:{p + KAFKA_PORT_OFFSET}' for p in ports)}",
        "bootstrap.controllers: "
        + ",".join(f"127.0.0.1:{p + KAFKA_CONTROLLER_PORT_OFFSET}" for p in ports),
        "internal gRPC listeners (between the nodes, not for clients): "
        + ",".join(f"127.0.0.1:{p}" for p in ports),
    ]

    # status, from a shell: every node alive and answering, all agreeing on the leader.
    shell_status = cluster.cli("status", "--json")
    assert shell_status.returncode == 0, shell_status.stderr
    status_document = json.loads(shell_status.stdout)
    kafka_ports = ",".join(f"127.0.0.1:{p + KAFKA_PORT_OFFSET}" for p in ports)
    assert status_document["bootstrap_servers"] == kafka_ports
    nodes = {n["node_id"]: n for n in status_document["nodes"]}
    assert sorted(nodes) == [1, 2, 3]
    for node_id, node in nodes.items():
        assert node["roles"] == ["broker", "controller"]
        assert node["pid"] == cluster.pid(node_id)
        assert node["listener"] == f"127.0.0.1:{ports[node_id - 1]}"
        assert node["kafka"] == f"127.0.0.1:{ports[node_id - 1] + KAFKA_PORT_OFFSET}"
        assert node["alive"] is True and node["answers"] is True
        assert node["leader_id"] == leader.leader_id
        assert node["is_leader"] is (node_id == leader.leader_id)
    assert "ALIVE  ANSWERS" in cluster.ask("status").stdout

    # quorum describe, asked at the local cluster's Kafka listeners (DescribeQuorum).
    data_dir = ("--data-dir", str(cluster.data_dir))
    text = replog("quorum", "describe", "--status", *data_dir)
    assert text.returncode == 0, text.stderr
    assert f"LeaderId:             {leader.leader_id}\n" in text.stdout
    for label in ("LeaderEpoch:", "HighWatermark:", "MaxFollowerLag:", "CurrentObservers:     []"):
        assert label in text.stdout
    as_json = json.loads(replog_in_process("quorum", "describe", "--json", *data_dir).stdout)
    assert as_json["leader_id"] == leader.leader_id
    assert as_json["high_watermark"] >= 1
    assert [v["id"] for v in as_json["current_voters"]] == [1, 2, 3]
    controllers = [port + KAFKA_CONTROLLER_PORT_OFFSET for port in ports]
    assert as_json["current_voters"][0]["endpoints"] == [
        f"CONTROLLER_KAFKA://127.0.0.1:{controllers[0]}"
    ]
    table = replog_in_process("quorum", "describe", "--replication", *data_dir).stdout
    rows = [line.split() for line in table.splitlines()]
    assert rows[0] == REPLICATION_HEADER
    assert [row[5] for row in rows[1:]] == ["Leader", "Follower", "Follower"]
    assert rows[1][0] == str(leader.leader_id)
    replication = replog_in_process("quorum", "describe", "--replication", "--json", *data_dir)
    replicas = json.loads(replication.stdout)
    assert {r["node_id"] for r in replicas} == {1, 2, 3}
    # Timestamps are wall-clock milliseconds (after 2020), not a process's monotonic clock.
    assert all(r["last_fetch_timestamp"] > 1_577_836_800_000 for r in replicas)

    # Asked at one follower only, a broker's or a controller's Kafka listener: the node asks
    # the leader itself, as a Kafka broker forwards DescribeQuorum.
    follower = next(i for i in (1, 2, 3) if i != leader.leader_id)
    one = f"127.0.0.1:{ports[follower - 1] + KAFKA_PORT_OFFSET}"
    for where in (
        ("--bootstrap-server", one),
        ("--bootstrap-controller", f"127.0.0.1:{controllers[follower - 1]}"),
    ):
        followed = replog_in_process("quorum", "describe", "--json", *where)
        described = json.loads(followed.stdout)
        assert described["leader_id"] == leader.leader_id, followed.stderr
        assert [v["endpoints"] for v in described["current_voters"]] == [
            [f"CONTROLLER_KAFKA://127.0.0.1:{port}"] for port in controllers
        ]
    # The same for a write: a follower's Kafka listener forwards it to the active controller.
    created = replog_in_process(
        "topics", "create", "--topic", "via-standby", "--bootstrap-server", one
    )
    assert created.returncode == 0 and created.stdout == "Created topic via-standby.\n", (
        created.stderr
    )
    # Kept: the stop below stops every node of a cluster with partitions at once, each broker
    # in controlled shutdown while the others' controllers leave.

    # kill the leader: it is reported dead; the others elect a new leader.
    epoch_before = broker_epochs(cluster)[leader.leader_id]
    killed = cluster.cli("kill", str(leader.leader_id))
    assert killed.returncode == 0, killed.stderr
    assert killed.stdout.startswith(f"killed node {leader.leader_id} (pid ")
    nodes = status(cluster)
    assert nodes[leader.leader_id]["alive"] is False
    assert nodes[leader.leader_id]["answers"] is False
    assert_refused(cluster.ask("kill", str(leader.leader_id)), "is not running")
    cluster.wait_for_leader(after_epoch=leader.leader_epoch)

    # restart it: it rejoins, registered again as a broker by the time `restart` returns (the
    # controller lists the killed one's old registration until its session expires); a
    # second restart is refused while it runs, and so is start.
    restarted = cluster.cli("restart", str(leader.leader_id))
    assert restarted.returncode == 0, restarted.stderr
    assert f"restarted node {leader.leader_id}" in restarted.stdout
    assert broker_epochs(cluster)[leader.leader_id] > epoch_before
    assert status(cluster)[leader.leader_id]["alive"] is True
    assert_refused(cluster.ask("restart", str(leader.leader_id)), "still running")
    assert_refused(cluster.ask("start"), "already running", "replog cluster stop")

    # stop: every node exits, pid files are removed; stopping again is no error.
    high_watermark = cluster.describe().high_watermark
    assert high_watermark is not None
    pids = {i: cluster.pid(i) for i in (1, 2, 3)}
    stopped = cluster.cli("stop")
    assert stopped.returncode == 0, stopped.stderr
    # Seen once in ~50 runs (load 8-12), before brokers stopped waiting for a controlled-
    # shutdown grant no quorum was left to give: nodes still ran 10 s after SIGTERM and were
    # killed. Their logs say where they were; the test's directory is gone by the time anyone
    # looks, so they go into the message.
    assert sorted(stopped.stdout.splitlines()) == [
        f"stopped node {i} (pid {pid})" for i, pid in sorted(pids.items())
    ], f"{stopped.stdout}\n{log_tails(cluster.layout.nodes, 40)}"
    assert not cluster.node_pids()
    assert not list(cluster.data_dir.glob("node-*/node.pid"))
    assert all(not n["alive"] and n["pid"] is None for n in status(cluster).values())
    assert "is running" in cluster.ask("stop").stdout

    # start again: the same nodes with their data.
    again = cluster.cli("start")
    assert again.returncode == 0, again.stderr
    # The leader committed in its new epoch before `start` returned, so its high watermark is
    # already past the old one; a follower's is unknown after a restart (Raft does not keep it)
    # until its next Fetch answer brings it, so each follower is waited for.
    addresses = cluster.addresses
    leader_now = cluster.describe().leader_id
    assert read_committed(addresses[leader_now]).high_watermark >= high_watermark
    wait_for(
        lambda: all(read_committed(a).high_watermark >= high_watermark for a in addresses.values()),
        10,
        f"every node's high watermark to reach {high_watermark} again",
    )
    logs = [read_committed(addresses[i]) for i in (1, 2, 3)]
    before = [{o: v for o, v in log.values.items() if o < high_watermark} for log in logs]
    assert before[0] and before[1] == before[0] and before[2] == before[0]


def test_a_crashed_node_serves_kafka_clients_once_restart_or_start_returns(
    tmp_path: Path,
) -> None:
    """A broker restarted after a crash is refused registration until the killed process's
    session expires, while the controller still lists that process's registration as
    active: `restart` and `start` wait for the node's own broker to run, so the next Kafka
    client command is answered (not left waiting 10 s for one, then failing)."""
    cluster = LoopbackCluster(tmp_path / "one", free_base_port(1), node_count=1)
    try:
        cluster.start("--override", "broker.session.timeout.ms=3000")
        for action in ("restart", "start"):
            cluster.kill(1)
            again = cluster.cli(*((action, "1") if action == "restart" else (action,)))
            assert again.returncode == 0, again.stderr
            metrics = cluster.layout.node(1).metrics_address
            assert metrics is not None
            state = scrape_gauges(metrics, (BROKER_STATE_GAUGE,), 5.0)[BROKER_STATE_GAUGE]
            named = BROKER_STATES.get(state)
            assert named == "running", f"after {action}: broker state {state}\n{again.stderr}"
            listed = replog_in_process("topics", "list", "--data-dir", str(cluster.data_dir))
            assert listed.returncode == 0, f"after {action}: {listed.stderr}"
    finally:
        cluster.kill_everything()


def test_start_fresh_replaces_a_stopped_cluster(cluster: LoopbackCluster) -> None:
    LocalCluster.plan(str(cluster.data_dir), 3, cluster.base_port).write()
    (cluster.data_dir / "node-1" / "data" / "old-file").write_text("old")
    assert_refused(cluster.ask("start", "--nodes", "1"), "stopped 3-node cluster", "--fresh")
    single = LoopbackCluster(cluster.data_dir, cluster.base_port, node_count=1)
    result = single.start("--fresh")
    assert "started 1 node in" in result.stdout
    assert not (cluster.data_dir / "node-1" / "data" / "old-file").exists()
    assert not (cluster.data_dir / "node-2").exists()
    assert [n.node_id for n in cluster.layout.nodes] == [1]
    assert cluster.describe().leader_id == 1


def test_a_stopped_cluster_restarts_on_new_ports_with_every_topic_and_record(
    cluster: LoopbackCluster,
) -> None:
    """Its old ports taken, a stopped cluster is refused with the flag that moves it, and
    started with that flag it keeps every topic and record: the nodes' configs are rewritten
    (voters, listeners, metrics), each broker registers its new endpoints, and each
    controller serves Kafka's protocol on its new `CONTROLLER_KAFKA` port."""
    cluster.start()
    data_dir = ("--data-dir", str(cluster.data_dir))
    created = replog_in_process(
        *("topics", "create", "--topic", "kept", "--partitions", "3"),
        *("--replication-factor", "3", *data_dir),
    )
    assert created.returncode == 0, created.stderr
    records = [f"record-{i}" for i in range(30)]
    produced = replog("produce", "--topic", "kept", *data_dir, stdin="\n".join(records) + "\n")
    assert produced.returncode == 0, produced.stderr
    assert cluster.cli("stop").returncode == 0
    with socket.socket() as busy:
        busy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        busy.bind(("127.0.0.1", cluster.base_port + 1))
        busy.listen()
        assert_refused(
            cluster.cli("start"),
            f"port {cluster.base_port + 1} is in use (choose another --base-port)",
        )
        base = free_base_port(3)
        moved = cluster.cli(
            "start", "--base-port", str(base), "--kafka-base-port", str(base + KAFKA_PORT_OFFSET)
        )
    assert moved.returncode == 0, moved.stderr
    assert f"internal gRPC listeners (between the nodes, not for clients): 127.0.0.1:{base}," in (
        moved.stdout
    )
    kafka = ",".join(f"127.0.0.1:{base + KAFKA_PORT_OFFSET + i}" for i in range(3))
    assert f"bootstrap.servers: {kafka}\n" in moved.stdout
    assert [n.controller_address for n in cluster.layout.nodes] == [
        f"127.0.0.1:{base + i}" for i in range(3)
    ]
    # The controllers' Kafka listeners moved with --kafka-base-port, and the nodes serve there.
    controllers = [f"127.0.0.1:{base + KAFKA_CONTROLLER_PORT_OFFSET + i}" for i in range(3)]
    assert f"bootstrap.controllers: {','.join(controllers)}" in moved.stdout
    status = json.loads(cluster.cli("status", "--json").stdout)["nodes"]
    assert [row["kafka_controller"] for row in status] == controllers
    assert all(accepts_connections(address) for address in controllers)
    listed = replog_in_process("topics", "list", *data_dir)
    assert listed.stdout.split() == ["kept"], listed.stderr
    consumed = replog(
        *("consume", "--topic", "kept", "--from-beginning", "--max-messages", "30"),
        *("--timeout-ms", "30000", *data_dir),
    )
    assert sorted(consumed.stdout.splitlines()) == sorted(records), consumed.stderr


def test_start_refuses_a_port_in_use(cluster: LoopbackCluster) -> None:
    with socket.socket() as busy:
        busy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        busy.bind(("127.0.0.1", cluster.base_port + 1))
        busy.listen()
        result = cluster.cli("start", "--base-port", str(cluster.base_port))
    assert_refused(result, f"node 2 cannot listen on 127.0.0.1:{cluster.base_port + 1}", "in use")
    assert not cluster.data_dir.exists()  # nothing written, nothing started


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (("cluster", "status"), ("no cluster in", "replog cluster start")),
        (("cluster", "stop"), ("no cluster in",)),
        (("cluster", "kill", "1"), ("no cluster in",)),
        (("cluster", "restart", "1"), ("no cluster in",)),
        (("quorum", "describe"), ("no cluster in",)),
        (("cluster", "start", "--override", "junk"), ("--override 'junk': expected KEY=VALUE",)),
        (
            ("cluster", "start", "--override", "controller.quorum.fetch.timeout.ms=soon"),
            ("controller.quorum.fetch.timeout.ms", "expected an integer"),
        ),
    ],
)
def test_commands_without_a_cluster_refuse_in_one_line(
    cluster: LoopbackCluster, args: tuple[str, ...], fragments: tuple[str, ...]
) -> None:
    assert_refused(replog_in_process(*args, "--data-dir", str(cluster.data_dir)), *fragments)
    assert not cluster.data_dir.exists()


def test_a_refusal_from_a_shell_is_one_line(cluster: LoopbackCluster) -> None:
    assert_refused(cluster.cli("status"), f"no cluster in {cluster.data_dir}")


def test_unknown_and_stopped_nodes_are_refused(cluster: LoopbackCluster) -> None:
    LocalCluster.plan(str(cluster.data_dir), 3, cluster.base_port).write()
    assert_refused(cluster.ask("kill", "7"), "no node 7", "(nodes: 1, 2, 3)")
    assert_refused(cluster.ask("restart", "7"), "no node 7")
    assert_refused(cluster.ask("kill", "2"), "node 2 is not running")
    nodes = status(cluster)
    assert [n["alive"] for n in nodes.values()] == [False, False, False]
    assert [n["answers"] for n in nodes.values()] == [False, False, False]


@pytest.mark.parametrize(
    ("bootstrap", "fragments"),
    [
        (
            "{a},{b}",
            (
                "DescribeCluster: no answer within 0.5 s: {a}: connection refused; {b}: "
                "connection refused",
            ),
        ),
        ("localhost", ("--bootstrap-server: 'localhost': expected host:port",)),
        ("x@{a}", ("--bootstrap-server: 'x@{a}'",)),
    ],
)
def test_quorum_describe_names_what_it_tried(
    cluster: LoopbackCluster, bootstrap: str, fragments: tuple[str, ...]
) -> None:
    a, b = (f"127.0.0.1:{cluster.base_port + i}" for i in range(2))
    result = replog_in_process(
        "quorum", "describe", "--bootstrap-server", bootstrap.format(a=a, b=b), "--timeout", "0.5"
    )
    assert_refused(result, *(f.format(a=a, b=b) for f in fragments))
