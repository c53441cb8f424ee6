"""What `replog quorum describe` computes from a DescribeQuorum answer (no processes)."""

from __future__ import annotations

from dataclasses import asdict

import pytest
from cluster_helpers import REPLICATION_HEADER

from replog.admin.bootstrap import parse_bootstrap
from replog.admin.quorum_description import QuorumDescription
from replog.cli.quorum import print_replication_table
from replog.errors import ReplogError
from replog.pb import raft_pb2 as pb
from replog.server.raft.raft_service import _on_wall_clock

NOW = 1_700_000_000_000


def answer() -> pb.DescribeQuorumResponse:
    """Leader 2 at end offset 50; voter 1 lags 8 and caught up 900 ms ago; voter 3 never
    fetched in this epoch; observer 7 lags 20."""
    return pb.DescribeQuorumResponse(
        quorum_epoch=4,
        leader_id=2,
        high_watermark=42,
        voters=[
            pb.ReplicaState(replica_id=1, log_end_offset=42, last_fetch_ms=NOW - 5,
                            last_caught_up_ms=NOW - 900),
            pb.ReplicaState(replica_id=2, log_end_offset=50, last_fetch_ms=NOW,
                            last_caught_up_ms=NOW),
            pb.ReplicaState(replica_id=3, log_end_offset=-1, last_fetch_ms=-1,
                            last_caught_up_ms=-1),
        ],
        observers=[
            pb.ReplicaState(replica_id=7, log_end_offset=30, last_fetch_ms=NOW - 10,
                            last_caught_up_ms=NOW - 5000),
        ],
    )  # fmt: skip


def test_rows_lags_and_status_fields() -> None:
    quorum = QuorumDescription.from_answer(answer(), "127.0.0.1:1")
    assert [(r.node_id, r.status, r.lag) for r in quorum.replicas] == [
        (2, "Leader", 0),
        (1, "Follower", 8),
        (3, "Follower", None),
        (7, "Observer", 20),
    ]
    assert quorum.max_follower_lag == 8  # observers do not count; unknown is not a lag
    assert quorum.max_follower_lag_time_ms is None  # voter 3 never caught up in this epoch
    status = quorum.status({2: "127.0.0.1:2"})
    assert status["current_voters"][1] == {"id": 2, "endpoints": ["CONTROLLER://127.0.0.1:2"]}
    assert status["current_voters"][0] == {"id": 1, "endpoints": []}
    assert status["current_observers"] == [{"id": 7, "endpoints": []}]


def test_max_follower_lag_time_is_the_oldest_catch_up_of_a_voter() -> None:
    message = answer()
    del message.voters[2]
    quorum = QuorumDescription.from_answer(message, "127.0.0.1:1")
    assert quorum.max_follower_lag_time_ms == 900


def test_the_node_reports_wall_clock_timestamps_and_itself_as_caught_up() -> None:
    message = answer()
    message.voters[1].last_fetch_ms = message.voters[1].last_caught_up_ms = -1
    converted = _on_wall_clock(message, now_ms=NOW, wall_now_ms=NOW + 1_000_000)
    voters = {r.replica_id: r for r in converted.voters}
    assert voters[2].last_fetch_ms == voters[2].last_caught_up_ms == NOW + 1_000_000
    assert voters[1].last_caught_up_ms == NOW - 900 + 1_000_000
    assert voters[3].last_fetch_ms == -1
    assert converted.observers[0].last_fetch_ms == NOW - 10 + 1_000_000


def test_bootstrap_servers() -> None:
    parsed = parse_bootstrap("a:1, 2@b:2,[::1]:3", what="--bootstrap-server")
    assert (parsed.addresses, parsed.node_addresses) == (("a:1", "b:2", "[::1]:3"), {2: "b:2"})
    for bad in ("", "a", "a:x", "x@a:1", ":1", "a:1,"):
        with pytest.raises(ReplogError, match="--bootstrap-server"):
            parse_bootstrap(bad, what="--bootstrap-server")


def test_unknown_is_minus_one_in_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    quorum = QuorumDescription.from_answer(answer(), "127.0.0.1:1")
    print_replication_table([asdict(r) for r in quorum.replicas])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == REPLICATION_HEADER
    assert lines[3].split() == ["3", "-1", "-1", "-1", "-1", "Follower"]
    assert lines[4].split() == ["7", "30", "20", str(NOW - 10), str(NOW - 5000), "Observer"]
