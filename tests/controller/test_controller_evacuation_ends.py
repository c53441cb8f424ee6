"""Every evacuation's mark lives exactly as long as the chain of steps that set it.

A broker is evacuating while some chain (a fencing it asked for, a new incarnation's
registration, an unregistration) has moves left for it; each chain holds its own mark and ends
it through one path: its last step, a refused step, a dropped batch, or the controller's
renounce. A session-expiry fencing fences at once and leaves its moves to the sweep of fenced
brokers, which a new active controller goes on with after a failover. A chain ending never
clears another's mark, a fencing asked for during a session-expiry fencing gives nothing back,
an unregistration overtaken by a new incarnation says so, and a new active controller starts
from the metadata alone (docs/controller.md, "Evacuating brokers"). Pure-core scenarios with a
step of 4 changes.
"""

from __future__ import annotations

from controller_harness import Cluster, fenced

from replog.errors import RequestTimedOutError, StaleBrokerEpochError
from replog.quorum.metadata.records import (
    NO_LEADER,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    UnregisterBrokerRecord,
)

STEP = 4
SOLO = 40  # RF 1 on two brokers: about 20 led by broker 1 alone


def solo_cluster() -> Cluster:
    cluster = Cluster.with_brokers((1, 2), max_partition_changes_per_step=STEP)
    cluster.create_topic("solo", SOLO, 1)
    return cluster


def records_since(cluster: Cluster, start: int) -> list[MetadataRecord]:
    return [r for b in cluster.log.batches[start:] for r in b.records]


def elected(cluster: Cluster, start: int, broker_id: int) -> list[PartitionChangeRecord]:
    return [
        r
        for r in records_since(cluster, start)
        if isinstance(r, PartitionChangeRecord) and r.leader == broker_id
    ]


def moves_left(cluster: Cluster, broker_id: int) -> int:
    """Partitions a fencing of `broker_id` would still change."""
    return sum(
        broker_id in r.isr and not (r.isr == (broker_id,) and r.leader == NO_LEADER)
        for r in cluster.active.replication.snapshot_records()
        if isinstance(r, PartitionRecord)
    )


def turn(cluster: Cluster) -> None:
    """One loop turn: broker 2 heartbeats, a tick, then Raft commits what was written."""
    cluster.heartbeat(2)
    cluster.advance(10)
    cluster.log.commit()


def expire(cluster: Cluster, broker_id: int) -> None:
    """Let `broker_id`'s session expire (broker 2 keeps heartbeating): the tick runs the first
    step of its session-expiry fencing, which fences it with its first moves."""
    for _ in range(9):
        cluster.heartbeat(2)
        cluster.advance(1000)
        cluster.log.commit()
    assert fenced(cluster, broker_id) and moves_left(cluster, broker_id) > 0
    assert not cluster.active.cluster.is_evacuating(broker_id)  # fenced: no mark needed


def test_a_session_expiry_fencing_cut_short_by_a_failover_goes_on_under_the_new_controller() -> (
    None
):
    # A dead broker's fencing is nobody's to ask for again: the new active controller finds
    # what is left in the metadata (a fenced broker still leading, or in an ISR beside
    # others) and goes on at once, not one more session timeout later, and never gives the
    # dead broker back a leadership in between.
    cluster = solo_cluster()
    cluster.create_topic("pair", 8, 2)
    expire(cluster, 1)
    start = len(cluster.log.batches)
    cluster.elect(2)
    turns = 0
    while moves_left(cluster, 1) and turns <= SOLO // STEP + 2:
        turn(cluster)
        turns += 1
    assert moves_left(cluster, 1) == 0, f"{moves_left(cluster, 1)} moves left after {turns}"
    assert turns <= SOLO // STEP + 2  # ticks of 10 ms, against a session timeout of 9 s
    assert fenced(cluster, 1) and not elected(cluster, start, 1)
    assert cluster.active.replication.partitions_led_by(1) == 0
    assert cluster.active.replication.fenced_brokers_named() == []


def test_the_sweep_after_a_session_expiry_fencing_is_ticked_at_once() -> None:
    # Its moves after the first step are the sweep of fenced brokers, which no queued step
    # stands for; the node ticks the controller only when `next_wake_ms` says, which must be
    # now, not at the next no-op record (500 ms) or periodic election.
    cluster = solo_cluster()
    expire(cluster, 1)
    active = cluster.active
    turns = 0
    while moves_left(cluster, 1) and turns <= SOLO // STEP + 2:
        wake = active.next_wake_ms(cluster.now_ms)
        assert wake == cluster.now_ms, (turns, wake, cluster.now_ms)
        active.tick(cluster.now_ms)
        cluster.log.commit()
        cluster.now_ms += 10
        cluster.heartbeat(2)
        turns += 1
    assert moves_left(cluster, 1) == 0, f"{moves_left(cluster, 1)} moves left after {turns}"


def test_a_fencing_asked_for_during_a_session_expiry_fencing_gives_nothing_back() -> None:
    cluster = solo_cluster()
    led = cluster.active.replication.partitions_led_by(1)
    assert led >= 3 * STEP
    start = len(cluster.log.batches)
    expire(cluster, 1)
    # The broker is heard from again, asking to be fenced: the session-expiry fencing is given
    # up, and the request's fencing goes on from what it left, with no sweep in between
    # electing the broker again where the first steps left it the last ISR member.
    # It is fenced already: asked again, it is answered at once, and the moves go on.
    reply = cluster.heartbeat(1, want_fence=True)
    assert reply.result().is_fenced
    turns = 0
    while moves_left(cluster, 1) and turns <= led // STEP + 2:
        turn(cluster)
        turns += 1
    assert fenced(cluster, 1) and moves_left(cluster, 1) == 0
    assert not elected(cluster, start, 1)
    changes = [r for r in records_since(cluster, start) if isinstance(r, PartitionChangeRecord)]
    assert len(changes) == led  # each leadership moved once
    assert not cluster.active.cluster.is_evacuating(1)


def test_a_chain_keeps_its_mark_when_an_older_chain_of_the_broker_ends() -> None:
    cluster = solo_cluster()
    expire(cluster, 1)
    while moves_left(cluster, 1) >= STEP:
        turn(cluster)
    assert not cluster.active.cluster.is_evacuating(1) and fenced(cluster, 1)
    # A new incarnation takes over what is left in one step, then unfences and asks to be
    # fenced again before the next tick: that fencing holds its own mark.
    registered = cluster.register(1)
    assert registered.done and fenced(cluster, 1)
    assert not cluster.heartbeat(1).result().is_fenced
    assert cluster.active.replication.partitions_led_by(1) == STEP  # its first elections
    start = len(cluster.log.batches)
    reply = cluster.heartbeat(1, want_fence=True)
    assert not reply.done and cluster.active.cluster.is_evacuating(1)
    turns = 0
    while not reply.done and turns <= SOLO // STEP + 2:
        assert cluster.active.cluster.is_evacuating(1)
        turn(cluster)
        turns += 1
    assert reply.result().is_fenced
    assert not elected(cluster, start, 1)
    assert not cluster.active.cluster.is_evacuating(1)


def test_an_unregistration_overtaken_by_a_new_incarnation_says_so() -> None:
    cluster = solo_cluster()
    cluster.active._fence_stale_brokers = lambda now_ms: None  # type: ignore[method-assign]
    for _ in range(9):  # broker 1's incarnation dies: its session expires, unfenced
        cluster.heartbeat(2)
        cluster.advance(1000)
    assert cluster.active.replication.partitions_led_by(1) >= 2 * STEP
    old_epoch = cluster.active.cluster.broker_epoch(1)
    start = len(cluster.log.batches)
    registered = cluster.register(1)  # a new incarnation moves the old one out, in steps
    assert not registered.done and cluster.active.cluster.is_evacuating(1)
    unregistered = cluster.active.unregister_broker(1, cluster.now_ms)  # waits for that chain
    turns = 0
    while not (registered.done and unregistered.done) and turns <= SOLO // STEP + 2:
        turn(cluster)
        turns += 1
    new_epoch = registered.result().broker_epoch
    assert new_epoch != old_epoch
    # Neither success for a broker id still registered, nor the new incarnation removed.
    assert isinstance(unregistered.error, StaleBrokerEpochError), unregistered.error
    assert "registered meanwhile" in str(unregistered.error)
    assert cluster.active.cluster.broker_epoch(1) == new_epoch
    assert not [r for r in records_since(cluster, start) if isinstance(r, UnregisterBrokerRecord)]
    assert not cluster.active.cluster.is_evacuating(1)


def test_a_step_whose_batch_is_refused_ends_its_evacuation() -> None:
    cluster = solo_cluster()
    reply = cluster.heartbeat(1, want_fence=True)
    assert not reply.done and cluster.active.cluster.is_evacuating(1)
    cluster.log.fail_next_append = RequestTimedOutError("the log refused the step")
    turn(cluster)
    assert isinstance(reply.error, RequestTimedOutError)
    # The chain is dropped, and its mark with it: the broker can lead again, and its next
    # fencing request is not left waiting for a chain that no longer runs.
    assert not cluster.active.cluster.is_evacuating(1)
    assert cluster.active.cluster.is_active(1)
    # What the first step left leaderless (broker 1 their only ISR member) is led again at
    # once, not at the next periodic sweep 10 s later.
    for _ in range(SOLO // STEP):
        turn(cluster)
    assert not cluster.active.replication.has_leaderless_partitions()
    again = cluster.heartbeat(1, want_fence=True)
    turns = 0
    while not again.done and turns <= SOLO // STEP + 2:
        turn(cluster)
        turns += 1
    assert again.result().is_fenced


def test_a_new_active_controller_starts_with_no_evacuation_under_way() -> None:
    cluster = solo_cluster()
    reply = cluster.heartbeat(1, want_fence=True)
    turn(cluster)
    assert cluster.controller(1).cluster.is_evacuating(1)
    cluster.elect(2)
    assert reply.done and reply.error is not None
    for node_id in (1, 2):
        assert not cluster.controller(node_id).cluster.is_evacuating(1)
    # Node 1 comes back as the active controller: nothing of its old chain is left.
    cluster.elect(1)
    assert not cluster.active.cluster.is_evacuating(1)
    assert cluster.active.cluster.is_active(1)
    # What it re-derives from the metadata: the leaderless partitions the dropped chain left
    # with broker 1, still unfenced, as their only ISR member are elected again.
    assert [pending.description for _, pending in cluster.active._steps] == [
        "elect leaders for leaderless partitions"
    ]
    for _ in range(SOLO // STEP):
        turn(cluster)
    assert not cluster.active.replication.has_leaderless_partitions()


def test_the_sweep_goes_quiet_when_no_broker_is_left_to_move_to() -> None:
    # Every broker dies: broker 2 is the last ISR member of what it leads, and nobody can take
    # over broker 1's partitions. The sweep asks for a tick at once only while it has moves to
    # make; once the fenced brokers lead nothing and stand alone in their ISRs, `next_wake_ms`
    # must go back to the deadlines, or the node would tick the controller every loop turn
    # forever. The loop below ticks only when due, as the node's timer does.
    cluster = solo_cluster()
    cluster.create_topic("pair", 8, 2)
    active = cluster.active
    quiet_ticks = 0
    for turn_index in range(2_000):  # 20 s of 10 ms turns: both sessions (9 s) expire at once
        cluster.now_ms += 10
        wake = active.next_wake_ms(cluster.now_ms)
        if wake is not None and wake <= cluster.now_ms:
            active.tick(cluster.now_ms)
            quiet_ticks += turn_index >= 1_500  # the last 5 s, long after the sweep ended
        cluster.log.commit()
    assert fenced(cluster, 1) and fenced(cluster, 2)
    assert active.replication.fenced_brokers_named() == []
    assert moves_left(cluster, 1) == 0 and moves_left(cluster, 2) == 0
    wake = active.next_wake_ms(cluster.now_ms)
    assert wake is not None and wake > cluster.now_ms, (wake, cluster.now_ms)
    # The no-op record's 500 ms only: not a tick per turn.
    assert quiet_ticks <= 5_000 // 500 + 1, quiet_ticks
