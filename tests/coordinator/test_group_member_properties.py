"""Random member churn against the real coordinator core (`group_member_sim`): members join,
leave, die (kill -9), stop and resume polling, under every assignor, with time passing.
After every simulated step no partition is read by two live, polling members
(`GroupSim.check`); once churn ends and time passes, the live members split the partitions
with no partition left out and no member more than one partition ahead of another."""

from __future__ import annotations

from group_member_sim import GroupSim
from hypothesis import given, settings
from hypothesis import strategies as st

PARTITIONS = 5
ACTIONS = st.lists(
    st.tuples(
        st.sampled_from(["join", "leave", "kill", "stall", "resume", "wait"]),
        st.integers(0, 3),  # which member
        st.integers(10, 1_500),  # how long to run afterwards (ms)
    ),
    max_size=12,
)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["range", "roundrobin", "sticky", "cooperative-sticky"]), ACTIONS)
def test_churn_never_doubles_a_partition_and_ends_in_an_even_split(
    assignor: str, actions: list[tuple[str, int, int]]
) -> None:
    sim = GroupSim({"t": PARTITIONS})
    sim.add("m0", assignors=(assignor,), session_ms=500, max_poll_ms=1_000)
    for action, which, run_ms in actions:
        name = f"m{which}"
        member = sim.members.get(name)
        if action == "join" and (member is None or not member.alive):
            sim.members.pop(name, None)
            sim.add(name, assignors=(assignor,), session_ms=500, max_poll_ms=1_000)
        elif action == "leave" and member is not None and member.alive:
            outgoing = member.core.leave(sim.now)
            member.alive = False
            if outgoing is not None:
                sim._send(name, outgoing)
        elif action == "kill" and member is not None:
            member.alive = False
        elif action == "stall" and member is not None:
            member.polling = False
        elif action == "resume" and member is not None:
            member.polling = True
        sim.run(run_ms)  # GroupSim.check after every step
    for member in sim.members.values():
        member.polling = True
    sim.run(8_000)
    live = {name: parts for name, parts in sim.reads().items()}
    if not live:
        return
    every = [p for parts in live.values() for p in parts]
    assert sorted(every) == [f"t-{i}" for i in range(PARTITIONS)], live
    sizes = [len(parts) for parts in live.values()]
    assert max(sizes) - min(sizes) <= 1, live
