"""`replog cluster start` returns only when the quorum has a committed leader and every node
answers: a leader needs only a majority, and a command run right after `start` may name any
node. Checked against scripted answers (no processes), so each case is exact."""

from __future__ import annotations

from pathlib import Path

import pytest

from replog.cli import cluster as cluster_cli
from replog.cli.local_cluster import LocalCluster
from replog.cli.quorum import NodeUnreachable, QuorumDescription
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
    return LocalCluster.plan(str(tmp_path / "cluster"), 3, 39092)


def _script(monkeypatch: pytest.MonkeyPatch, layout: LocalCluster, silent_rounds: int) -> list[int]:
    """Node 3 refuses connections for `silent_rounds` polls, then answers; returns the count of
    polls made so far (a one-item list, updated in place)."""
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
    monkeypatch.setattr(cluster_cli, "ask_each", ask_each)
    monkeypatch.setattr(cluster_cli, "exit_status", lambda pid: None)
    monkeypatch.setattr(cluster_cli, "POLL_INTERVAL_S", 0.001)
    return polls


def test_start_waits_for_a_node_that_is_not_listening_yet(
    monkeypatch: pytest.MonkeyPatch, layout: LocalCluster
) -> None:
    polls = _script(monkeypatch, layout, silent_rounds=3)
    description = cluster_cli.wait_until_up(layout, {1: 11, 2: 12, 3: 13}, timeout_s=10)
    assert description.leader_id == 1
    assert polls[0] == 4  # three rounds with node 3 silent, then the one where it answered


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
