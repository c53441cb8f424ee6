"""Property: consumer-protocol (KIP-848) members that behave like Kafka clients, through random
joins, heartbeats, leaves, kills and the passing of time, never own one partition at once, and
once the churn stops every subscribed partition is owned by exactly one member, evenly.

Each simulated client owns what its last answer assigned (dropping what the answer no longer
lists, at once, as a client revokes before its next heartbeat) and sends that in every
heartbeat; a fenced or unknown client forgets its partitions and joins again. A killed client
stops for good; the coordinator removes it after the session timeout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from hypothesis import given, settings
from hypothesis import strategies as st

from replog.coordinator.classic_group_coordinator import ClassicGroupCoordinator
from replog.coordinator.consumer_group_coordinator import (
    ConsumerGroupConfig,
    ConsumerGroupCoordinator,
)
from replog.coordinator.consumer_group_messages import ConsumerGroupHeartbeatRequest
from replog.coordinator.consumer_member import TP, by_topic, flatten

TOPICS = {"t": (UUID(int=1), 7), "u": (UUID(int=2), 3)}
SESSION_MS = 1000
EVERY = frozenset((topic_id, p) for topic_id, count in TOPICS.values() for p in range(count))


@dataclass
class Client:
    member_id: str
    topics: tuple[str, ...]
    assignor: str | None
    epoch: int = 0
    joined: bool = False
    owned: frozenset[TP] = frozenset()
    dead: bool = False

    def heartbeat(self, core: ConsumerGroupCoordinator, now_ms: int) -> None:
        request = ConsumerGroupHeartbeatRequest(
            "g",
            self.member_id,
            self.epoch if self.joined else 0,
            rebalance_timeout_ms=-1 if self.joined else 60_000,
            subscribed_topic_names=None if self.joined else self.topics,
            server_assignor=None if self.joined else self.assignor,
            owned=by_topic(self.owned),
        )
        answer, _ = core.heartbeat(request, now_ms)
        if answer.error is not None:
            self.joined, self.epoch, self.owned = False, 0, frozenset()
            return
        self.joined, self.epoch = True, answer.member_epoch
        if answer.assignment is not None:
            self.owned = flatten(answer.assignment)

    def leave(self, core: ConsumerGroupCoordinator, now_ms: int) -> None:
        if self.joined:
            core.heartbeat(ConsumerGroupHeartbeatRequest("g", self.member_id, -1), now_ms)
        self.joined, self.epoch, self.owned = False, 0, frozenset()


def _no_shared_partitions(core: ConsumerGroupCoordinator, clients: list[Client]) -> None:
    group = core.groups.get("g")
    members = set() if group is None else set(group.members)
    seen: dict[TP, str] = {}
    for client in clients:
        if client.dead or not client.joined or client.member_id not in members:
            continue
        for tp in client.owned:
            assert tp not in seen, f"{tp} owned by {seen[tp]} and {client.member_id}"
            seen[tp] = client.member_id


def new_core(
    classic: ClassicGroupCoordinator | None = None, **config: Any
) -> ConsumerGroupCoordinator:
    """A core on the test's topics, with short timeouts."""
    core = ConsumerGroupCoordinator(
        ConsumerGroupConfig(
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=SESSION_MS // 10,
            min_session_timeout_ms=1,
            min_heartbeat_interval_ms=1,
            **config,
        ),
        classic=classic,
    )
    core.set_topics(TOPICS)
    return core


def step(core: ConsumerGroupCoordinator, client: Client, op: str, now_ms: int) -> int:
    """One operation on `client` ("wait" moves the clock and fires the timers): the time."""
    if op == "wait":
        now_ms += 400
        core.tick(now_ms)
    elif client.dead:
        pass
    elif op == "hb":
        client.heartbeat(core, now_ms)
    elif op == "leave":
        client.leave(core, now_ms)
    else:
        client.dead = True
    return now_ms


operations = st.lists(
    st.tuples(st.sampled_from(["hb", "hb", "hb", "leave", "kill", "wait"]), st.integers(0, 5)),
    max_size=80,
)


@settings(max_examples=150, deadline=None)
@given(
    operations,
    st.sampled_from([None, "uniform", "range"]),
    st.lists(st.sampled_from([("t",), ("u",), ("t", "u")]), min_size=6, max_size=6),
    st.booleans(),
)
def test_members_never_share_a_partition_and_end_split(
    ops: list[tuple[str, int]],
    assignor: str | None,
    subscriptions: list[tuple[str, ...]],
    homogeneous: bool,
) -> None:
    core = new_core()
    clients = [
        Client(f"m{i}", ("t", "u") if homogeneous else subscriptions[i], assignor) for i in range(6)
    ]
    now_ms = 0
    for op, index in ops:
        now_ms = step(core, clients[index], op, now_ms)
        _no_shared_partitions(core, clients)
    # The churn stops: the dead are removed, the living heartbeat until the group is Stable.
    now_ms += SESSION_MS + 1
    core.tick(now_ms)
    alive = [c for c in clients if not c.dead]
    for _ in range(8):
        for client in alive:
            client.heartbeat(core, now_ms)
            _no_shared_partitions(core, clients)
    group = core.groups.get("g")
    if not alive:
        assert group is None or not group.members
        return
    assert group is not None and group.state.value == "Stable", group and group.state
    owned = [client.owned for client in alive]
    wanted = frozenset(
        (TOPICS[name][0], p)
        for client in alive
        for name in client.topics
        for p in range(TOPICS[name][1])
    )
    assert frozenset().union(*owned) == wanted
    assert sum(len(o) for o in owned) == len(wanted)  # each exactly once
    if homogeneous and assignor != "range":
        counts = [len(o) for o in owned]
        assert max(counts) - min(counts) <= 1, counts
