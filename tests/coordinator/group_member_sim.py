"""A pure simulation of a consumer group: the real group coordinator core and N real member
cores (`GroupMember`), wired in memory on a simulated clock. No threads, no sockets: a whole
rebalance is a few loop turns, and every step can be checked.

Each member's callbacks run as soon as the core has them (as a consumer's poll would), and
change `owned`, the partitions the simulated consumer reads: revoked and lost ones leave after
their callback, assigned ones join before it. `history` lists every callback per member.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from replog.common import TopicPartition
from replog.coordinator import classic_group_messages as gm
from replog.coordinator.classic_group_coordinator import (
    ClassicGroupConfig,
    ClassicGroupCoordinator,
)
from replog.coordinator.group_member import (
    ASSIGNED,
    GroupMember,
    MemberConfig,
    RebalanceEvent,
)

GROUP = "g"


@dataclass
class SimMember:
    core: GroupMember
    polling: bool = True  # calls poll (liveness)
    alive: bool = True  # sends anything at all (False: a kill -9)
    reads: set[TopicPartition] = field(default_factory=set)
    history: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)


class GroupSim:
    def __init__(self, counts: dict[str, int], *, initial_delay_ms: int = 0) -> None:
        self.now = 0
        self.counts = counts
        ids = iter(range(1, 1_000_000))
        self.coordinator = ClassicGroupCoordinator(
            ClassicGroupConfig(
                min_session_timeout_ms=10, initial_rebalance_delay_ms=initial_delay_ms
            ),
            new_uuid=lambda: f"u{next(ids)}",
        )
        self.members: dict[str, SimMember] = {}
        self.sent: list[tuple[str, object]] = []  # (member, request) in the order sent
        self._parked: dict[int, tuple[str, str]] = {}  # request id -> (member, kind)
        self._next_id = 0

    def add(
        self,
        name: str,
        *,
        assignors: tuple[str, ...] = ("range",),
        topics: Iterable[str] = ("t",),
        session_ms: int = 1_000,
        max_poll_ms: int = 5_000,
        heartbeat_ms: int = 100,
        instance: str | None = None,
        by_pattern: bool = False,
    ) -> SimMember:
        core = GroupMember(
            MemberConfig(
                GROUP, name, session_ms, max_poll_ms, heartbeat_ms, 50, assignors, instance
            )
        )
        core.poll_called(self.now)
        core.subscribe(frozenset(topics), self.now, by_pattern=by_pattern)
        core.set_partition_counts(self.counts, self.now)
        member = self.members[name] = SimMember(core)
        return member

    def set_counts(self, counts: dict[str, int]) -> None:
        self.counts = counts
        for member in self.members.values():
            member.core.set_partition_counts(counts, self.now)

    # --- running ------------------------------------------------------------------------------

    def run(self, ms: int, step_ms: int = 10) -> None:
        """Advance the clock by `ms`, every member acting at each step."""
        end = self.now + ms
        while self.now < end:
            self.now = min(end, self.now + step_ms)
            self._route(self.coordinator.tick(self.now))
            for name, member in list(self.members.items()):
                if not member.alive:
                    continue
                if member.polling:
                    member.core.poll_called(self.now)
                self._callbacks(name, member)
                for _ in range(10):  # what the member sends at once, one answer at a time
                    outgoing = member.core.next_request(self.now)
                    if outgoing is not None:
                        self._send(name, outgoing)
                    self._callbacks(name, member)
                    if outgoing is None and not member.core.callbacks_pending:
                        break
            self.check()

    def _callbacks(self, name: str, member: SimMember) -> None:
        run_callbacks(member)

    def _send(self, name: str, outgoing: object) -> None:
        core = self.members[name].core
        request = outgoing.request  # type: ignore[attr-defined]
        self.sent.append((name, request))
        if isinstance(request, gm.JoinGroupRequest | gm.SyncGroupRequest):
            self._next_id += 1
            kind = "join" if isinstance(request, gm.JoinGroupRequest) else "sync"
            self._parked[self._next_id] = (name, kind)
            call = self.coordinator.join if kind == "join" else self.coordinator.sync
            self._route(call(request, self._next_id, self.now))  # type: ignore[arg-type]
        elif isinstance(request, gm.HeartbeatRequest):
            core.heartbeat_answered(self.coordinator.heartbeat(request, self.now), self.now)
        else:
            _, result = self.coordinator.leave(request, self.now)
            core.request_failed("leave", self.now)
            self._route(result)

    def _route(self, result: gm.GroupResult) -> None:
        for answer in result.joins:
            name, _ = self._parked.pop(answer.request_id)
            if self.members[name].alive:
                # A leader is given every member's topics' counts, as the shell looks them up.
                core = self.members[name].core
                topics = core.assigns_topics(answer)
                counts = None if topics is None else {t: self.counts.get(t, 0) for t in topics}
                core.join_answered(answer, self.now, counts)
        for sync in result.syncs:
            name, _ = self._parked.pop(sync.request_id)
            if self.members[name].alive:
                self.members[name].core.sync_answered(sync, self.now)
        for request_id in result.superseded:
            name, kind = self._parked.pop(request_id)
            self.members[name].core.request_failed(kind, self.now)

    # --- looking ------------------------------------------------------------------------------

    def check(self) -> None:
        """No partition is read by two live, polling members at once (what cooperative
        rebalancing promises, and eager too since a member revokes before it joins). A member
        that stopped polling processes nothing: it learns that it lost its partitions at its
        next poll, before it reads again."""
        check_no_shared_reads(self.members, self.now)

    def reads(self) -> dict[str, list[str]]:
        return reads_of(self.members)

    def state(self) -> str:
        group = self.coordinator.groups.get(GROUP)
        return "none" if group is None else group.state.value


class Reader(Protocol):
    alive: bool
    polling: bool
    reads: set[TopicPartition]


class CallbackCore(Protocol):
    def take_events(self) -> list[RebalanceEvent]: ...
    def callbacks_done(self) -> None: ...


class PollingMember(Reader, Protocol):
    @property
    def core(self) -> CallbackCore: ...

    history: list[tuple[str, tuple[str, ...]]]


def run_callbacks(member: PollingMember) -> None:
    """A polling member's poll runs its listener's callbacks (of either simulation): what it
    reads follows them, and each is recorded in its history."""
    if not member.polling:
        return
    for event in member.core.take_events():
        if event.kind == ASSIGNED:
            member.reads |= event.partitions
        member.history.append(
            (event.kind, tuple(f"{tp.topic}-{tp.partition}" for tp in sorted(event.partitions)))
        )
        if event.kind != ASSIGNED:
            member.reads -= event.partitions
    member.core.callbacks_done()


def check_no_shared_reads(members: Mapping[str, Reader], now: int) -> None:
    """No partition is read by two live, polling members (of either simulation) at once."""
    seen: dict[TopicPartition, str] = {}
    for name, member in members.items():
        if not member.alive or not member.polling:
            continue
        for tp in member.reads:
            assert tp not in seen, f"{tp} read by {seen[tp]} and {name} at {now} ms"
            seen[tp] = name


def reads_of(members: Mapping[str, Reader]) -> dict[str, list[str]]:
    """What each live member reads, as sorted "topic-partition" names."""
    return {
        name: [f"{tp.topic}-{tp.partition}" for tp in sorted(m.reads)]
        for name, m in members.items()
        if m.alive
    }
