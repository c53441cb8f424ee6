"""The order rules of `ReplicaChangeQueue`: scenarios, and a property against sequential
application (applying what the queue hands out, in rounds with holds, ends where applying every
change one by one ends, and its length is always the changes that wait)."""

from __future__ import annotations

from uuid import UUID

from hypothesis import given, settings
from hypothesis import strategies as st

from replog.quorum.metadata.local_changes import LocalChanges, LocalPartition
from replog.quorum.metadata.partition_registration import PartitionRegistration
from replog.server.data_plane.replica_change_queue import (
    DELETE,
    FOLLOWER,
    LEADER,
    ReplicaChange,
    ReplicaChangeQueue,
    stage_in_steps,
)

IDS = [UUID(int=n) for n in range(1, 4)]
KINDS = (DELETE, LEADER, FOLLOWER)


def local(partition: int, topic_id: UUID, leader_epoch: int = 0) -> LocalPartition:
    registration = PartitionRegistration(
        replicas=(1, 2), isr=(1, 2), leader=1, leader_epoch=leader_epoch, partition_epoch=0
    )
    return LocalPartition("t", topic_id, partition, registration, None)


def changes(*items: tuple[str, LocalPartition]) -> LocalChanges:
    return LocalChanges(
        deletes=tuple(p for kind, p in items if kind == DELETE),
        leaders=tuple(p for kind, p in items if kind == LEADER),
        followers=tuple(p for kind, p in items if kind == FOLLOWER),
    )


def test_a_later_change_of_the_same_topic_id_overtakes_a_waiting_one() -> None:
    queue = ReplicaChangeQueue()
    queue.add(changes((LEADER, local(0, IDS[0], 1))))
    queue.add(changes((FOLLOWER, local(0, IDS[0], 2))))
    [taken] = queue.take(10)
    assert (taken.kind, taken.local.registration.leader_epoch) == (FOLLOWER, 2)
    assert queue.idle


def test_a_delete_of_an_old_topic_id_stays_ahead_of_the_new_one() -> None:
    queue = ReplicaChangeQueue()
    queue.add(changes((DELETE, local(0, IDS[0]))))
    queue.add(changes((LEADER, local(0, IDS[1]))))
    assert [c.kind for c in queue.take(10)] == [DELETE]  # one change per partition per round
    assert [c.kind for c in queue.take(10)] == [LEADER]


def test_a_round_stopped_early_leaves_the_rest_queued_in_order() -> None:
    queue = ReplicaChangeQueue()
    queue.add(changes(*((DELETE, local(p, IDS[0])) for p in range(5))))
    queue.add(changes((LEADER, local(0, IDS[1]))))
    taking = queue.taking(10)
    first = [next(taking), next(taking)]
    taking.close()
    assert [c.local.partition_id for c in first] == [0, 1]
    assert len(queue) == 4
    rest = queue.take(10)
    assert [(c.kind, c.local.partition_id) for c in rest] == [
        (LEADER, 0),  # partition 0's next change, after its delete, in its partition's place
        (DELETE, 2),
        (DELETE, 3),
        (DELETE, 4),
    ]
    assert queue.idle


def test_a_held_partition_gives_nothing_until_released() -> None:
    queue = ReplicaChangeQueue()
    queue.add(changes((LEADER, local(0, IDS[0])), (LEADER, local(1, IDS[0]))))
    first = queue.take(1)
    queue.hold(first[0].key)
    queue.add(changes((DELETE, local(0, IDS[0]))))
    assert [c.key for c in queue.take(10)] == [("t", 1)]
    assert queue.take(10) == [] and not queue.idle
    queue.release(first[0].key)
    assert [c.kind for c in queue.take(10)] == [DELETE]
    assert queue.idle


def test_a_hurried_leadership_is_taken_first_and_keeps_its_partitions_order() -> None:
    """A follower fetches partition 2 before its leader's log exists: its leadership goes
    first; a follower change is never hurried; partition 2's later change still comes after it."""
    queue = ReplicaChangeQueue()
    queue.add(changes(*((LEADER, local(p, IDS[0])) for p in range(4))))
    queue.add(changes((FOLLOWER, local(5, IDS[0]))))
    queue.add(changes((DELETE, local(2, IDS[0]))))
    assert queue.hurry(("t", 2)) and not queue.hurry(("t", 2))
    assert not queue.hurry(("t", 5)) and not queue.hurry(("t", 9))
    assert [c.key for c in queue.take(2)] == [("t", 2), ("t", 0)]
    assert len(queue) == 4
    assert [(c.key, c.kind) for c in queue.take(10)] == [
        (("t", 1), LEADER),
        (("t", 2), DELETE),  # at its partition's place, after its hurried change
        (("t", 3), LEADER),
        (("t", 5), FOLLOWER),
    ]
    assert queue.idle and len(queue) == 0


def test_a_hurried_partition_under_way_waits_for_its_release() -> None:
    queue = ReplicaChangeQueue()
    queue.add(changes((LEADER, local(0, IDS[0])), (LEADER, local(1, IDS[0]))))
    [first] = queue.take(1)
    queue.hold(first.key)
    queue.add(changes((LEADER, local(0, IDS[1]))))  # a new topic id: stays behind the first
    assert queue.hurry(("t", 0))
    assert [c.key for c in queue.take(10)] == [("t", 1)]
    queue.release(first.key)
    [again] = queue.take(10)
    assert (again.key, again.local.topic_id) == (("t", 0), IDS[1]) and queue.idle


def sequential(all_changes: list[ReplicaChange]) -> dict[tuple[str, int], UUID | None]:
    """Where applying every change one by one ends: per partition, the topic id of its replica
    (None: none). A delete removes a replica of its own topic id only, as the manager does."""
    state: dict[tuple[str, int], UUID | None] = {}
    for change in all_changes:
        if change.kind == DELETE:
            if state.get(change.key) == change.local.topic_id:
                state[change.key] = None
        else:
            state[change.key] = change.local.topic_id
    return {k: v for k, v in state.items() if v is not None}


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(
            st.tuples(
                st.sampled_from([DELETE, LEADER, FOLLOWER]),
                st.integers(0, 3),
                st.sampled_from(IDS),
            ),
            max_size=6,
        ),
        max_size=8,
    ),
    st.integers(1, 4),
    st.randoms(use_true_random=False),
)
def test_rounds_with_holds_end_where_sequential_application_ends(
    deltas: list[list[tuple[str, int, UUID]]], limit: int, rnd: object
) -> None:
    queue = ReplicaChangeQueue()
    everything: list[ReplicaChange] = []
    state: dict[tuple[str, int], UUID | None] = {}
    in_flight: list[ReplicaChange] = []

    def apply(change: ReplicaChange) -> None:
        if change.kind == DELETE:
            if state.get(change.key) == change.local.topic_id:
                state[change.key] = None
        else:
            state[change.key] = change.local.topic_id

    def step() -> None:
        for partition in range(4):
            if rnd.random() < 0.2:  # type: ignore[attr-defined]
                queue.hurry(("t", partition))  # a follower fetched it
        for change in queue.take(limit):
            if change.kind != DELETE and state.get(change.key) != change.local.topic_id:
                queue.hold(change.key)  # a new log: off the loop, finished later
                in_flight.append(change)
            else:
                apply(change)
        if in_flight and rnd.random() < 0.5:  # type: ignore[attr-defined]
            done = in_flight.pop(0)
            apply(done)
            queue.release(done.key)
        # The count kept as changes come and go is what waits.
        assert len(queue) == sum(len(entries) for entries in queue._waiting.values())

    for delta in deltas:
        # One delta holds at most one change per partition.
        seen: dict[int, tuple[str, int, UUID]] = {}
        for kind, partition, tid in delta:
            seen.setdefault(partition, (kind, partition, tid))
        items = [(kind, local(partition, tid)) for kind, partition, tid in seen.values()]
        # The queue sees a delta's deletes first, then leaders, then followers.
        ordered = [
            ReplicaChange(kind, p)
            for wanted in (DELETE, LEADER, FOLLOWER)
            for kind, p in items
            if kind == wanted
        ]
        everything.extend(ordered)
        queue.add(changes(*items))
        step()
    while not queue.idle or in_flight:
        step()
        if in_flight and queue.take(0) == []:
            done = in_flight.pop(0)
            apply(done)
            queue.release(done.key)
    assert {k: v for k, v in state.items() if v is not None} == sequential(everything)


def test_staging_yields_every_step_and_leaves_the_queue_alone_until_added() -> None:
    queue = ReplicaChangeQueue()
    queue.add(changes((LEADER, local(9, IDS[0]))))
    delta = changes(*((FOLLOWER, local(p, IDS[1])) for p in range(7)))
    steps = stage_in_steps(delta, per_step=3)
    assert [next(steps), next(steps)] == [None, None]  # 3, then 3 more, then the last one
    try:
        next(steps)
        raise AssertionError("a step of 3 more")
    except StopIteration as done:
        staged = done.value
    assert len(queue) == 1 and list(queue._waiting) == [("t", 9)]
    queue.add_staged(staged)
    assert len(queue) == 8
    assert [c.key for c in queue.take(10)] == [("t", p) for p in (9, *range(7))]


def delta_items(delta: list[tuple[int, int, int]]) -> list[tuple[str, LocalPartition]]:
    """One change per partition (a delta holds at most one), leader epochs told apart."""
    seen: dict[int, tuple[str, LocalPartition]] = {}
    for index, (kind, partition, tid) in enumerate(delta):
        seen.setdefault(partition, (KINDS[kind], local(partition, IDS[tid], index)))
    return list(seen.values())


def contents(queue: ReplicaChangeQueue) -> list[tuple[tuple[str, int], list[ReplicaChange]]]:
    return [(key, list(entries)) for key, entries in queue._waiting.items()]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.lists(
            st.tuples(st.integers(0, 2), st.integers(0, 5), st.integers(0, 2)),
            max_size=7,
        ),
        min_size=1,
        max_size=6,
    ),
    st.integers(1, 4),
    st.lists(st.integers(0, 3), max_size=4),
)
def test_staged_changes_queue_as_added_ones(
    deltas: list[list[tuple[int, int, int]]], per_step: int, rounds: list[int]
) -> None:
    """Staging a delta and adding it leaves the queue as `add` would have: the same sequences
    in the same partition order, the same count, whatever waits already (a first image, or
    partitions with changes of their own waiting), with rounds taken between deltas."""
    added, staged_queue = ReplicaChangeQueue(), ReplicaChangeQueue()
    for index, delta in enumerate(deltas):
        items = changes(*delta_items(delta))
        added.add(items)
        staged = stage_in_steps(items, per_step=per_step)
        try:
            while True:
                next(staged)
        except StopIteration as done:
            staged_queue.add_staged(done.value)
        assert contents(staged_queue) == contents(added)
        assert len(staged_queue) == len(added)
        if index < len(rounds):
            assert staged_queue.take(rounds[index]) == added.take(rounds[index])
