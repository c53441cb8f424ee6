"""`replog cluster start` returns only when the quorum has a committed leader, every node
answers and every broker is active: a leader needs only a majority, a command run right after
`start` may name any node, and a topic created right after it needs every broker unfenced.
Checked against scripted answers (no processes), so each case is exact."""

from __future__ import annotations

import argparse
import dataclasses
import functools
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from replog.admin.cluster_metadata import Broker, ClusterDescription
from replog.admin.quorum import NodeUnreachable
from replog.admin.quorum_description import QuorumDescription
from replog.cli import cluster as cluster_cli
from replog.cli.local_cluster import LocalCluster
from replog.cli.start_progress import StartProgress
from replog.errors import ReplogError
from replog.pb import raft_pb2 as pb


def _committed_leader(address: str) -> QuorumDescription:
    return QuorumDescription(
        leader_id=1,
        leader_epoch=1,
        high_watermark=5,
        voters=(1, 2, 3),
        observers=(),
        replicas=(),
        answered_by=address,
    )


@pytest.fixture
def layout(tmp_path: Path) -> LocalCluster:
    cluster = LocalCluster.plan(str(tmp_path / "cluster"), 3, 39092)
    cluster.write()
    return cluster


def _script(
    monkeypatch: pytest.MonkeyPatch,
    layout: LocalCluster,
    silent_rounds: int,
    brokers_waiting: list[str] | None = None,
    brokers_starting: list[str] | None = None,
) -> list[int]:
    """Node 3 refuses connections for `silent_rounds` polls, then answers; once all answer,
    `brokers_not_active` says each of `brokers_waiting` in turn, then "" (all active); then
    `brokers_not_running` each of `brokers_starting` (what the nodes say of themselves).
    Returns the count of polls made so far (a one-item list, updated in place)."""
    waiting = list(brokers_waiting or [])
    starting = list(brokers_starting or [])
    addresses = layout.controller_addresses()
    polls = [0]

    def ask_each(
        asked: object, timeout_s: float
    ) -> dict[str, pb.DescribeQuorumResponse | NodeUnreachable]:
        polls[0] += 1
        answers: dict[str, pb.DescribeQuorumResponse | NodeUnreachable] = {
            address: pb.DescribeQuorumResponse() for address in addresses.values()
        }
        if polls[0] <= silent_rounds:
            answers[addresses[3]] = NodeUnreachable(addresses[3], "connection refused")
        return answers

    monkeypatch.setattr(cluster_cli, "describe_quorum", lambda b, a, t: _committed_leader(b[0]))
    monkeypatch.setattr(cluster_cli, "accepts_connections", lambda address: True)
    monkeypatch.setattr(cluster_cli, "ask_each", ask_each)
    monkeypatch.setattr(cluster_cli, "exit_status", lambda pid: None)
    monkeypatch.setattr(cluster_cli, "POLL_INTERVAL_S", 0.001)
    monkeypatch.setattr(
        cluster_cli, "brokers_not_active", lambda c, a, r: waiting.pop(0) if waiting else ""
    )
    monkeypatch.setattr(
        cluster_cli,
        "brokers_not_running",
        lambda nodes: starting.pop(0) if starting else "",
    )
    return polls


def test_start_waits_for_a_node_that_is_not_listening_yet(
    monkeypatch: pytest.MonkeyPatch, layout: LocalCluster
) -> None:
    polls = _script(monkeypatch, layout, silent_rounds=3)
    description = cluster_cli.wait_until_up(layout, {1: 11, 2: 12, 3: 13}, timeout_s=10)
    assert description.leader_id == 1
    assert polls[0] == 4  # three rounds with node 3 silent, then the one where it answered


def test_start_asks_no_node_over_grpc_until_one_listens(
    monkeypatch: pytest.MonkeyPatch, layout: LocalCluster
) -> None:
    """While the nodes import their runtime a plain connect says they do not listen yet: no
    gRPC channel is made meanwhile (its CPU is the starting nodes')."""
    _script(monkeypatch, layout, silent_rounds=0)
    listening = iter([False, False, False] * 3 + [True] * 1000)
    asked: list[str] = []
    monkeypatch.setattr(cluster_cli, "accepts_connections", lambda address: next(listening))
    monkeypatch.setattr(
        cluster_cli,
        "describe_quorum",
        lambda b, a, t: asked.append(b[0]) or _committed_leader(b[0]),  # type: ignore[func-returns-value]
    )
    description = cluster_cli.wait_until_up(layout, {1: 11, 2: 12, 3: 13}, timeout_s=10)
    assert description.leader_id == 1
    assert len(asked) == 1  # the three rounds before a node listened asked nothing


def test_start_names_the_node_that_never_answers(
    monkeypatch: pytest.MonkeyPatch, layout: LocalCluster
) -> None:
    _script(monkeypatch, layout, silent_rounds=10**9)
    with pytest.raises(ReplogError) as raised:
        cluster_cli.wait_until_up(layout, {1: 11, 2: 12, 3: 13}, timeout_s=0.2)
    message = str(raised.value)
    assert message == (
        "the cluster was not up within 0.2 s (node 1 leads; no answer yet from "
        "node 3 (127.0.0.1:39094: connection refused))"
    )


def test_start_waits_until_every_broker_is_active(
    monkeypatch: pytest.MonkeyPatch, layout: LocalCluster
) -> None:
    polls = _script(
        monkeypatch, layout, silent_rounds=1, brokers_waiting=["brokers 2, 3 not active yet"] * 2
    )
    cluster_cli.wait_until_up(layout, {1: 11, 2: 12, 3: 13}, timeout_s=10)
    assert polls[0] == 4  # node 3 silent once, then two rounds of brokers not yet active


def test_start_waits_for_a_broker_the_controller_lists_from_before_a_crash(
    monkeypatch: pytest.MonkeyPatch, layout: LocalCluster
) -> None:
    # Until the killed process's session expires the controller lists its registration as
    # active; the restarted node says its broker is still starting.
    polls = _script(
        monkeypatch, layout, silent_rounds=0, brokers_starting=["broker 2 is starting"] * 3
    )
    cluster_cli.wait_until_up(layout, {1: 11, 2: 12, 3: 13}, timeout_s=10)
    assert polls[0] == 4


def test_start_names_the_brokers_that_never_become_active(
    monkeypatch: pytest.MonkeyPatch, layout: LocalCluster
) -> None:
    _script(
        monkeypatch, layout, silent_rounds=0, brokers_waiting=["broker 3 not active yet"] * 10**6
    )
    with pytest.raises(ReplogError, match=r"within 0.2 s \(broker 3 not active yet\)$"):
        cluster_cli.wait_until_up(layout, {1: 11, 2: 12, 3: 13}, timeout_s=0.2)


def test_start_says_each_phase_and_what_a_slow_one_waits_for(
    monkeypatch: pytest.MonkeyPatch, layout: LocalCluster
) -> None:
    """Every phase once as it passes; a phase past the silent bound (0 here) says what it
    waits for: nodes that do not listen yet, a node that does not answer, a broker."""
    _script(monkeypatch, layout, silent_rounds=1, brokers_waiting=["broker 3 not active yet"])
    listening = iter([False] * 6 + [True] * 1000)  # two polls before a node listens
    monkeypatch.setattr(cluster_cli, "accepts_connections", lambda address: next(listening))
    quick = functools.partial(StartProgress, silent_s=0, repeat_s=3600)
    monkeypatch.setattr(cluster_cli, "StartProgress", quick)
    said: list[str] = []
    cluster_cli.wait_until_up(layout, {1: 11, 2: 12, 3: 13}, timeout_s=10, say=said.append)
    assert [line.replace(" (0 s so far)", "") for line in said] == [
        "waiting for the nodes to listen at 127.0.0.1:39092, 127.0.0.1:39093, 127.0.0.1:39094 "
        "(each imports its runtime and opens its logs first)",
        "quorum: node 1 elected leader (epoch 1)",
        "waiting for every node to answer (none yet from node 3 (127.0.0.1:39094: connection "
        "refused))",
        "all 3 nodes answer",
        "waiting for every broker to register and be unfenced (broker 3 not active yet)",
        "brokers 1, 2, 3 registered and unfenced",
    ]


def _broker(broker_id: int, *, fenced: bool = False, leaving: bool = False) -> Broker:
    return Broker(broker_id, "127.0.0.1", 9092, None, fenced, leaving, broker_epoch=broker_id)


class _Controllers:
    """A ControllerClient stand-in answering DescribeCluster with `brokers`, or raising."""

    answer: tuple[Broker, ...] | ReplogError = ()
    asked = 0

    def __init__(self, bootstrap: Any, *, node_addresses: Any) -> None:
        assert sorted(node_addresses) == [1, 2, 3]

    def __enter__(self) -> _Controllers:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def describe_cluster(self, *, timeout_s: float) -> ClusterDescription:
        _Controllers.asked += 1
        if isinstance(self.answer, ReplogError):
            raise self.answer
        return ClusterDescription("c", 1, self.answer, metadata_offset=9)


@pytest.mark.parametrize(
    ("brokers", "expected"),
    [
        ((_broker(1), _broker(2), _broker(3)), ""),
        ((_broker(1), _broker(2, fenced=True)), "brokers 2, 3 not active yet"),
        ((_broker(1), _broker(2), _broker(3, leaving=True)), "broker 3 not active yet"),
        (ReplogError("no active controller"), "DescribeCluster: no active controller"),
    ],
)
def test_brokers_not_active_names_unregistered_fenced_and_leaving_brokers(
    monkeypatch: pytest.MonkeyPatch,
    layout: LocalCluster,
    brokers: tuple[Broker, ...] | ReplogError,
    expected: str,
) -> None:
    monkeypatch.setattr(_Controllers, "answer", brokers)
    controllers: Any = _Controllers(None, node_addresses=layout.controller_addresses())
    assert cluster_cli.broker_node_ids(layout) == [1, 2, 3]
    assert cluster_cli.brokers_not_active([1, 2, 3], controllers) == expected


def test_a_restarted_broker_counts_only_once_registered_at_a_later_epoch(
    monkeypatch: pytest.MonkeyPatch, layout: LocalCluster
) -> None:
    # Until its session expires, the controller still lists a killed broker's last
    # registration (epoch 3 here) as active: that is not the restarted node.
    controllers: Any = _Controllers(None, node_addresses=layout.controller_addresses())
    monkeypatch.setattr(_Controllers, "answer", (_broker(1), _broker(2), _broker(3)))
    assert cluster_cli.brokers_not_active([1, 2, 3], controllers, {3: 3}) == (
        "broker 3 not active yet (not registered again since the restart: 3)"
    )
    registered_again = Broker(3, "127.0.0.1", 9092, None, False, False, broker_epoch=40)
    monkeypatch.setattr(_Controllers, "answer", (_broker(1), _broker(2), registered_again))
    assert cluster_cli.brokers_not_active([1, 2, 3], controllers, {3: 3}) == ""


@pytest.mark.parametrize(
    ("roles", "overrides"),
    [
        (("controller",), {}),
        # Combined roles on a bare Raft log (the failover tests' nodes): no broker runs.
        (("broker", "controller"), {"metadata.log.raw.append.enable": "true"}),
    ],
)
def test_a_quorum_without_brokers_has_no_broker_to_wait_for(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    roles: tuple[str, ...],
    overrides: dict[str, str],
) -> None:
    monkeypatch.setattr(_Controllers, "asked", 0)
    quorum = LocalCluster.plan(str(tmp_path / "quorum"), 3, 39092, roles=roles)
    quorum.write(overrides)
    controllers: Any = _Controllers(None, node_addresses=quorum.controller_addresses())
    assert cluster_cli.broker_node_ids(quorum) == []
    assert cluster_cli.brokers_not_active([], controllers) == ""
    assert _Controllers.asked == 0


def test_a_restart_whose_node_exits_leaves_no_pid_file(
    monkeypatch: pytest.MonkeyPatch, layout: LocalCluster
) -> None:
    # A node that dies at start (a bad property, a held port) must not stay on record as
    # running: `status` would show its dead pid.
    node = layout.node(2)

    def spawned(n: Any, *, verbose: bool = False) -> int:
        Path(n.pid_path).write_text("4242\n")
        return 4242

    monkeypatch.setattr(cluster_cli, "running_pid", lambda n: None)
    monkeypatch.setattr(cluster_cli, "check_ports_free", lambda nodes, remedy: None)
    monkeypatch.setattr(cluster_cli, "spawn", spawned)
    monkeypatch.setattr(cluster_cli, "exit_status", lambda pid: 1)
    monkeypatch.setattr(cluster_cli, "POLL_INTERVAL_S", 0.001)
    args = argparse.Namespace(data_dir=layout.directory, node_id=2, verbose=False, timeout=5.0)
    with pytest.raises(ReplogError, match="exited with code 1"):
        cluster_cli.run_restart(args)
    assert not Path(node.pid_path).exists()


@pytest.mark.parametrize("action", [("start",), ("stop",), ("restart", "2")])
@pytest.mark.parametrize("timeout", ["-1", "0", "nan"])
def test_cluster_timeouts_must_be_positive(action: tuple[str, ...], timeout: str) -> None:
    # `stop --timeout -1` SIGKILLed every node at once; `nan` never reached the deadline.
    from cli_runner import replog

    outcome = replog("cluster", *action, "--timeout", timeout)
    assert outcome.returncode == 2
    assert "must be more than 0" in outcome.stderr


def test_brokers_not_running_names_what_each_node_says_of_its_broker(
    monkeypatch: pytest.MonkeyPatch, layout: LocalCluster
) -> None:
    from replog.cli import broker_states
    from replog.cli.cluster_status import NoAnswer

    metrics = {i: str(layout.node(i).metrics_address) for i in (1, 2, 3)}
    said: dict[str, int | NoAnswer] = {
        metrics[1]: 3,
        metrics[2]: 1,
        metrics[3]: NoAnswer("no answer within 1 s"),
    }

    def scrape(address: str, names: tuple[str, ...], timeout_s: float) -> dict[str, int]:
        answer = said[address]
        if isinstance(answer, NoAnswer):
            raise answer
        return {names[0]: answer}

    monkeypatch.setattr(broker_states, "scrape_gauges", scrape)
    nodes = [layout.node(i) for i in (1, 2, 3)]
    assert broker_states.brokers_not_running(nodes) == (
        "broker 2 is starting: not registered yet; one restarted after a crash registers once "
        "the killed process's session expires, broker.session.timeout.ms; broker 3 "
        f"({layout.node(3).metrics_url}: no answer within 1 s)"
    )
    said[metrics[2]] = 2
    assert "broker 2 is registered, waiting to be unfenced" in broker_states.brokers_not_running(
        nodes
    )
    # A node without a metrics endpoint is left to the controller's view: none in cluster.json,
    # or one that refuses while the node answers (a metrics.port=0 override).
    bare = dataclasses.replace(layout.node(3), metrics_address=None)
    said[metrics[2]] = 3
    assert broker_states.brokers_not_running([*nodes[:2], bare]) == ""
    said[metrics[3]] = NoAnswer("connection refused", refused=True)
    assert broker_states.brokers_not_running(nodes) == ""


@pytest.mark.parametrize(
    ("running_before", "waits"),
    [
        ((), False),  # node 2 alone of three: no quorum yet, the note says so
        ((1,), True),  # node 2 beside node 1 makes a majority: its broker registers
    ],
)
def test_a_restart_that_makes_a_majority_of_controllers_run_waits_for_its_broker(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    layout: LocalCluster,
    running_before: tuple[int, ...],
    waits: bool,
) -> None:
    # No quorum leader answers before the restart (a cluster restarted node by node after a
    # crash); a 1-node cluster is the case of a majority of one.
    running = set(running_before)
    waited: list[int] = []

    def spawned(node: Any, *, verbose: bool = False) -> int:
        running.add(node.node_id)
        return 4242

    monkeypatch.setattr(cluster_cli, "running_pid", lambda n: 7 if n.node_id in running else None)
    monkeypatch.setattr(cluster_cli, "check_ports_free", lambda nodes, remedy: None)
    monkeypatch.setattr(cluster_cli, "has_quorum_leader", lambda addresses: False)
    monkeypatch.setattr(cluster_cli, "spawn", spawned)
    monkeypatch.setattr(cluster_cli, "wait_for_node_answer", lambda node, pid, timeout_s: None)
    monkeypatch.setattr(
        cluster_cli, "ControllerClient", lambda *a, **k: SimpleNamespace(close=lambda: None)
    )
    monkeypatch.setattr(
        cluster_cli,
        "wait_for_registration",
        lambda node, pid, controllers, epoch_before, deadline: waited.append(node.node_id),
    )
    args = argparse.Namespace(data_dir=layout.directory, node_id=2, verbose=False, timeout=5.0)
    assert cluster_cli.run_restart(args) == 0
    assert waited == ([2] if waits else [])
    note = "(no quorum leader before the restart: broker 2 registers once a majority"
    assert (note in capsys.readouterr().out) is not waits


@pytest.mark.parametrize(
    ("running", "said"),
    [
        ([1, 2, 3], "(nodes 1, 2, 3 alive); stop it first with `replog cluster stop`"),
        (
            [1, 3],
            "(nodes 1, 3 alive, node 2 not); `replog cluster restart 2` starts what is not "
            "running; to start the cluster whole, stop it first with `replog cluster stop`",
        ),
    ],
)
def test_start_refuses_a_running_cluster_and_names_a_node_that_died(
    layout: LocalCluster, monkeypatch: pytest.MonkeyPatch, running: list[int], said: str
) -> None:
    monkeypatch.setattr(cluster_cli, "running_node_ids", lambda cluster: running)
    args = argparse.Namespace(data_dir=layout.directory, override=[], fresh=False, base_port=None)
    with pytest.raises(ReplogError, match="already running") as refused:
        cluster_cli._cluster_to_start(args)
    assert str(refused.value).endswith(said)
