"""metadata_staleness: how old a node's committed metadata may be, from what its Raft driver
last heard (a leader, a follower, a node campaigning with the quorum lost)."""

from __future__ import annotations

from replog.server.raft.metadata_staleness import QuorumContact, metadata_staleness

SESSION_MS = 9_000


def contact(role: str, now_ms: int, leader_ms: int | None, **heard: int) -> QuorumContact:
    return QuorumContact(
        node_id=1,
        now_ms=now_ms,
        started_ms=0,
        role=role,
        fetch_timeout_ms=2_000,
        leader_contact_ms=leader_ms,
        heard_ms={int(k.removeprefix("n")): v for k, v in heard.items()},
    )


def test_a_leader_or_follower_is_current_and_judges_no_broker() -> None:
    leading = metadata_staleness(contact("leader", 50_000, 50_000), [1, 2, 3], SESSION_MS)
    assert (leading.stale, leading.age_ms, leading.unreachable) == (False, 0, frozenset())
    following = metadata_staleness(contact("follower", 50_000, 49_800), [1, 2, 3], SESSION_MS)
    assert (following.stale, following.age_ms, following.unreachable) == (False, 200, frozenset())


def test_a_follower_not_heard_from_its_leader_for_the_fetch_timeout_is_stale() -> None:
    """With the quorum lost a node goes back from campaigning to following its last leader
    (KIP-996) and on: its role alone would say "current" half of the time."""
    found = metadata_staleness(contact("follower", 50_000, 45_000), [1, 2, 3], SESSION_MS)
    assert (found.stale, found.age_ms) == (True, 5_000)


def test_a_campaigning_node_is_stale_and_counts_silent_brokers_once_past_the_timeout() -> None:
    # Voters 2 and 3 died at 40 s; node 1 campaigns. Followers never talk to each other, so
    # node 3's silence before the loss says nothing: nobody is judged within the window.
    early = metadata_staleness(
        contact("prospective", 45_000, 40_000, n2=40_000, n3=20_000), [1, 2, 3], SESSION_MS
    )
    assert (early.stale, early.age_ms, early.unreachable) == (True, 5_000, frozenset())
    late = metadata_staleness(
        contact("candidate", 60_000, 40_000, n2=40_000, n3=20_000, n4=59_000),
        [1, 2, 3, 4, 5],
        SESSION_MS,
    )
    # 4 answered a vote request a second ago; 5 (a broker-only node) never spoke to node 1.
    assert (late.stale, late.age_ms) == (True, 20_000)
    assert late.unreachable == {2, 3, 5}
    assert late.ever_reached


def test_a_node_that_never_reached_the_quorum_counts_from_its_start() -> None:
    found = metadata_staleness(contact("unattached", 12_000, None), [1], SESSION_MS)
    assert (found.stale, found.age_ms, found.ever_reached) == (True, 12_000, False)
