"""Property: replog consumers on the consumer protocol (`ConsumerProtocolMember`, the real
core) and the real coordinator core, through random joins, leaves, kills, stalls past
max.poll.interval.ms and the passing of time, never let two live, polling members read one
partition (`ConsumerGroupSim.check`, after every step), and once the churn stops every
partition is read by exactly one member, evenly."""

from __future__ import annotations

from consumer_member_sim import ConsumerGroupSim
from hypothesis import given, settings
from hypothesis import strategies as st

PARTITIONS = 7

operations = st.lists(
    st.tuples(
        st.sampled_from(["join", "join", "leave", "kill", "stall", "wait"]), st.integers(0, 4)
    ),
    max_size=25,
)


@settings(max_examples=40, deadline=None)
@given(operations)
def test_members_never_share_a_partition_and_end_evenly_split(ops: list[tuple[str, int]]) -> None:
    sim = ConsumerGroupSim({"t": PARTITIONS}, session_ms=1_000, heartbeat_ms=100)
    names = [f"m{i}" for i in range(5)]
    for op, index in ops:
        name = names[index]
        member = sim.members.get(name)
        if op == "join" and (member is None or not member.alive):
            sim.members.pop(name, None)
            sim.add(name, max_poll_ms=2_000, member_id=f"{name}-{sim.now}")
        elif op == "leave" and member is not None and member.alive:
            member.core.leave_events()
            outgoing = member.core.leave(sim.now)
            if outgoing is not None:
                sim.coordinator.heartbeat(outgoing.request, sim.now)  # type: ignore[arg-type]
            del sim.members[name]
        elif op == "kill" and member is not None:
            member.alive = False
        elif op == "stall" and member is not None:
            member.polling = not member.polling
        sim.run(150 * (index + 1))
    for member in sim.members.values():
        member.polling = True
    sim.run(6_000)  # sessions, rebalance timeouts and rejoins settle
    reads = sim.reads()
    if not reads:
        return
    every = sorted(p for parts in reads.values() for p in parts)
    assert every == sorted(f"t-{i}" for i in range(PARTITIONS)), reads
    counts = [len(parts) for parts in reads.values()]
    assert max(counts) - min(counts) <= 1, reads
