"""A pure simulation of a consumer-protocol (KIP-848) group: the real coordinator core
(`ConsumerGroupCoordinator`) and N real member cores (`ConsumerProtocolMember`), wired in
memory on a simulated clock, as `group_member_sim` does for the classic protocol.

Each polling member's callbacks run as soon as the core has them (as a consumer's poll would)
and change `reads`, the partitions the simulated consumer reads: revoked and lost ones leave
after their callback, assigned ones join before it. `history` lists every callback per member;
`check` runs after every step: no partition is read by two live, polling members.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from uuid import UUID

from group_member_sim import check_no_shared_reads, reads_of, run_callbacks

from replog.common import TopicPartition
from replog.coordinator import consumer_group_messages as cgm
from replog.coordinator.consumer_group_coordinator import (
    ConsumerGroupConfig,
    ConsumerGroupCoordinator,
)
from replog.coordinator.consumer_protocol_member import (
    ConsumerMemberConfig,
    ConsumerProtocolMember,
)

GROUP = "g"


def topic_id(name: str) -> UUID:
    return UUID(int=sum(ord(c) << (8 * i) for i, c in enumerate(name)) + 1)


@dataclass
class SimMember:
    core: ConsumerProtocolMember
    polling: bool = True  # calls poll (liveness) and runs callbacks
    alive: bool = True  # sends anything at all (False: a kill -9)
    reads: set[TopicPartition] = field(default_factory=set)
    history: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    sent: list[cgm.ConsumerGroupHeartbeatRequest] = field(default_factory=list)


class ConsumerGroupSim:
    def __init__(
        self,
        counts: dict[str, int],
        *,
        session_ms: int = 1_000,
        heartbeat_ms: int = 100,
        max_size: int = 1_000,
    ) -> None:
        self.now = 0
        self.coordinator = ConsumerGroupCoordinator(
            ConsumerGroupConfig(
                session_timeout_ms=session_ms,
                heartbeat_interval_ms=heartbeat_ms,
                max_size=max_size,
                min_session_timeout_ms=1,
                min_heartbeat_interval_ms=1,
            )
        )
        self.set_counts(counts)
        self.members: dict[str, SimMember] = {}

    def set_counts(self, counts: dict[str, int]) -> None:
        self.counts = counts
        self.coordinator.set_topics({t: (topic_id(t), n) for t, n in counts.items()})
        for member in getattr(self, "members", {}).values():
            member.core.set_topic_ids({t: topic_id(t) for t in counts}, self.now)

    def add(
        self,
        name: str,
        *,
        topics: Iterable[str] = ("t",),
        max_poll_ms: int = 5_000,
        instance: str | None = None,
        assignor: str | None = None,
        member_id: str | None = None,
    ) -> SimMember:
        core = ConsumerProtocolMember(
            ConsumerMemberConfig(
                GROUP, name, member_id or f"id-{name}", max_poll_ms, 50, assignor, instance
            )
        )
        core.poll_called(self.now)
        core.set_topic_ids({t: topic_id(t) for t in self.counts}, self.now)
        core.subscribe(frozenset(topics), self.now)
        member = self.members[name] = SimMember(core)
        return member

    # --- running ------------------------------------------------------------------------------

    def run(self, ms: int, step_ms: int = 10) -> None:
        """Advance the clock by `ms`, every member acting at each step."""
        end = self.now + ms
        while self.now < end:
            self.now = min(end, self.now + step_ms)
            self.coordinator.tick(self.now)
            for member in list(self.members.values()):
                if not member.alive:
                    continue
                if member.polling:
                    member.core.poll_called(self.now)
                self.callbacks(member)
                for _ in range(10):  # what the member sends at once, one answer at a time
                    outgoing = member.core.next_request(self.now)
                    if outgoing is not None:
                        self._send(member, outgoing.request)  # type: ignore[arg-type]
                    self.callbacks(member)
                    if outgoing is None and not member.core.callbacks_pending:
                        break
            self.check()

    def callbacks(self, member: SimMember) -> None:
        run_callbacks(member)

    def _send(self, member: SimMember, request: cgm.ConsumerGroupHeartbeatRequest) -> None:
        member.sent.append(request)
        answer, _ = self.coordinator.heartbeat(request, self.now)
        if request.member_epoch >= 0:
            member.core.heartbeat_answered(answer, self.now)

    # --- looking ------------------------------------------------------------------------------

    def check(self) -> None:
        """No partition is read by two live, polling members at once."""
        check_no_shared_reads(self.members, self.now)

    def reads(self) -> dict[str, list[str]]:
        return reads_of(self.members)

    def group_members(self) -> list[str]:
        group = self.coordinator.groups.get(GROUP)
        return [] if group is None else sorted(group.members)
