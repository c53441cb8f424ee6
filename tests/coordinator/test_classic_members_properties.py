"""Property: a classic group upgraded by consumer-protocol members (KIP-848's online
migration), its classic members staying, through random heartbeats, joins, leaves and kills of
the consumer-protocol members and the passing of time, never has one partition owned by two
members at once; once the churn stops every subscribed partition is owned exactly once.

The classic clients behave as eager consumers (the `range` protocol): on REBALANCE_IN_PROGRESS
they give up everything and rejoin, then own what their SyncGroup returns; an unknown or
fenced one forgets its id and joins afresh. Their sessions are long, so they stay members and
the group stays a consumer group (the policy is `upgrade`: no downgrade here; the scenario
scripts cover the downgrade). The consumer-protocol clients are the ones of
`test_consumer_group_properties`.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from replog.common import TopicPartition
from replog.coordinator.classic_group_coordinator import ClassicGroupConfig, ClassicGroupCoordinator
from replog.coordinator.classic_group_messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    SyncGroupRequest,
)
from replog.coordinator.consumer_group_coordinator import ConsumerGroupCoordinator
from replog.coordinator.consumer_member import TP
from replog.coordinator.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    Subscription,
    assigned_partitions,
    assignment_to_bytes,
    subscription_to_bytes,
)
from replog.coordinator.group_records import GroupMetadataValue, MemberMetadata
from replog.coordinator.offsets_records import GroupMetadataKey
from tests.coordinator.test_consumer_group_properties import (
    SESSION_MS,
    TOPICS,
    Client,
    new_core,
    step,
)

CLASSIC_SESSION_MS = 600_000  # longer than any run: the classic clients stay members
SUBSCRIPTION = subscription_to_bytes(Subscription(("t", "u")))
IDS = {name: topic_id for name, (topic_id, _) in TOPICS.items()}
EVERY = frozenset((topic_id, p) for topic_id, count in TOPICS.values() for p in range(count))


@dataclass
class ClassicClient:
    member_id: str
    generation: int
    owned: frozenset[TP]
    joined: bool = True
    synced: bool = True

    def step(self, classic: ClassicGroupCoordinator, now_ms: int) -> None:
        if not self.joined:
            self._join(classic, now_ms)
        elif not self.synced:
            self._sync(classic, now_ms)
        else:
            error = classic.heartbeat(
                HeartbeatRequest("g", self.member_id, self.generation), now_ms
            )
            if error is not None:
                self._rejoin(error.error_name)

    def _rejoin(self, why: str) -> None:
        self.owned, self.joined, self.synced = frozenset(), False, False
        if why != "REBALANCE_IN_PROGRESS":
            self.member_id = ""

    def _join(self, classic: ClassicGroupCoordinator, now_ms: int) -> None:
        self.owned = frozenset()  # eager: everything is given up before joining
        request = JoinGroupRequest(
            "g",
            self.member_id,
            CONSUMER_PROTOCOL_TYPE,
            (("range", SUBSCRIPTION),),
            CLASSIC_SESSION_MS,
            60_000,
            api_version=3,
        )
        (answer,) = classic.join(request, 1, now_ms).joins
        assert answer.error is None, answer.error
        self.member_id, self.generation, self.joined = answer.member_id, answer.generation_id, True

    def _sync(self, classic: ClassicGroupCoordinator, now_ms: int) -> None:
        request = SyncGroupRequest("g", self.member_id, self.generation)
        (answer,) = classic.sync(request, 2, now_ms).syncs
        if answer.error is not None:
            self._rejoin(answer.error.error_name)
            return
        self.synced = True
        self.owned = frozenset((IDS[t], p) for t, p in assigned_partitions(answer.assignment))


def _no_shared_partitions(
    core: ConsumerGroupCoordinator, clients: list[Client], classics: list[ClassicClient]
) -> None:
    group = core.groups.get("g")
    members = set() if group is None else set(group.members)
    seen: dict[TP, str] = {}
    owners = [(c.member_id, c.owned) for c in clients if c.joined and not c.dead]
    owners += [(c.member_id, c.owned) for c in classics if c.synced]
    for member_id, owned in owners:
        if member_id not in members:
            continue
        for tp in owned:
            assert tp not in seen, f"{tp} owned by {seen[tp]} and {member_id}"
            seen[tp] = member_id


def _classic_group(classic: ClassicGroupCoordinator) -> list[ClassicClient]:
    """A Stable classic group of two members splitting every partition, at generation 5."""
    halves = (sorted(EVERY)[::2], sorted(EVERY)[1::2])
    names = {topic_id: name for name, topic_id in IDS.items()}
    members = tuple(
        MemberMetadata(
            f"k{i}",
            None,
            "c",
            "h",
            60_000,
            CLASSIC_SESSION_MS,
            SUBSCRIPTION,
            assignment_to_bytes(TopicPartition(names[t], p) for t, p in half),
        )
        for i, half in enumerate(halves)
    )
    classic.replay(
        GroupMetadataKey("g"),
        GroupMetadataValue(CONSUMER_PROTOCOL_TYPE, 5, "range", "k0", 0, members),
    )
    return [ClassicClient(f"k{i}", 5, frozenset(half)) for i, half in enumerate(halves)]


operations = st.lists(
    st.tuples(
        st.sampled_from(["hb", "hb", "classic", "classic", "leave", "kill", "wait"]),
        st.integers(0, 3),
    ),
    max_size=80,
)


@settings(max_examples=100, deadline=None)
@given(operations)
def test_classic_and_consumer_members_never_share_a_partition(
    ops: list[tuple[str, int]],
) -> None:
    classic = ClassicGroupCoordinator(ClassicGroupConfig(initial_rebalance_delay_ms=0))
    core = new_core(classic, migration_policy="upgrade")
    classic.other_protocol = core.yield_to_classic
    classic.consumer_groups = core
    classics = _classic_group(classic)
    clients = [Client(f"m{i}", ("t", "u"), None) for i in range(4)]
    now_ms = 0
    for op, index in ops:
        if op == "classic":
            classics[index % 2].step(classic, now_ms)
        else:
            now_ms = step(core, clients[index], op, now_ms)
            classic.tick(now_ms)
        _no_shared_partitions(core, clients, classics)
    # The churn stops: the dead are removed, everyone else steps until the group is Stable.
    now_ms += SESSION_MS + 1
    core.tick(now_ms)
    alive = [c for c in clients if not c.dead]
    for _ in range(12):
        for client in alive:
            client.heartbeat(core, now_ms)
            _no_shared_partitions(core, clients, classics)
        for member in classics:
            member.step(classic, now_ms)
            _no_shared_partitions(core, clients, classics)
    owned = [c.owned for c in alive if c.joined] + [c.owned for c in classics]
    if any(c.joined for c in clients) or "g" in core.groups:
        group = core.groups["g"]
        assert group.state.value == "Stable", group.state
        assert frozenset().union(*owned) == EVERY
        assert sum(len(o) for o in owned) == len(EVERY)  # each exactly once
