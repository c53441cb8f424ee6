"""A quorum peer failing for a while is said once, and its return too."""

from replog.server.raft.peer_failures import PeerFailures


def test_a_peer_failing_past_the_limit_is_said_once_with_the_last_error() -> None:
    failures = PeerFailures(node_id=3, warn_after_s=5)
    assert failures.failed(1, "UNAVAILABLE: refused", now_s=100.0) is None
    assert failures.failed(1, "UNAVAILABLE: refused", now_s=104.9) is None
    said = failures.failed(1, "DEADLINE_EXCEEDED", now_s=105.0)
    assert said == "node 3: quorum peer 1 unreachable for 5 s (retrying): DEADLINE_EXCEEDED"
    assert failures.failed(1, "UNAVAILABLE: refused", now_s=200.0) is None
    assert failures.answered(1, now_s=210.0) == "node 3: quorum peer 1 reachable again after 110 s"
    assert failures.answered(1, now_s=211.0) is None


def test_a_short_failure_says_nothing_and_peers_are_apart() -> None:
    failures = PeerFailures(node_id=1, warn_after_s=5)
    failures.failed(2, "reset", now_s=0.0)
    failures.failed(3, "reset", now_s=4.0)
    assert failures.answered(2, now_s=3.0) is None
    assert failures.failed(2, "reset", now_s=6.0) is None  # a new failure starts afresh
    assert failures.failed(3, "reset", now_s=9.0) is not None
