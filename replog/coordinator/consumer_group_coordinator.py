"""The consumer group protocol's (KIP-848) decisions for the groups of one `__consumer_offsets`
partition: Kafka's `GroupMetadataManager` consumer-group handlers.

Pure: time comes in as `now_ms`, member ids from an injected uuid source, the topics as the
shell's last metadata image (`set_topics`); every call returns its answer and the records to
append. Each record is applied to the group as it is written (`ConsumerGroup.apply`), exactly as
`replay` applies it when another coordinator loads the partition, so no state exists that the
records do not hold. Every check that can refuse a request runs before its first record.

A heartbeat (ConsumerGroupHeartbeat, docs/groups.md walks an example):
1. Checks (Kafka's): INVALID_REQUEST for an empty group id, instance id or rack id, a v1+
   request without member id (the member makes its own, KIP-1082), a join (epoch 0) without
   rebalance timeout or subscription or with owned partitions, an unknown epoch;
   UNSUPPORTED_ASSIGNOR; INVALID_REGULAR_EXPRESSION. A join for a group id held by a classic
   group with members upgrades it (`group_migration`) when `group.consumer.migration.policy`
   allows it, the group's protocol type is `consumer`, it has at most
   `group.consumer.max.size` members and their JoinGroup metadata and assignments parse; else
   GROUP_ID_NOT_FOUND, naming why (an Empty classic group is deleted and replaced). A group
   caught mid-rebalance converts too: its waiting JoinGroup and SyncGroup requests are
   answered REBALANCE_IN_PROGRESS (`take_classic_answers`), and its members rejoin. A group
   that does not exist is GROUP_ID_NOT_FOUND unless the request joins; GROUP_MAX_SIZE_REACHED
   for a new member of a full group.
2. The member: a new one (epoch 0) is created with the given (or a generated) id; an existing
   one must send its epoch, or its previous epoch with owned partitions among its assigned ones
   (its last answer was lost), or 0 (it rejoins); else FENCED_MEMBER_EPOCH. A static member
   (instance id) joining while another member holds the instance id is UNRELEASED_INSTANCE_ID
   unless that member left with epoch -2: it is then replaced, keeping its assignment.
3. A changed subscription, or a change of the subscribed topics' partitions, bumps the group
   epoch; a group epoch ahead of the target assignment epoch runs the group's server assignor
   (the one most members name, else `uniform`) and writes the changed targets.
4. The member is reconciled towards its target (`current_assignment`): partitions are revoked
   before they are given to another member. A member that must revoke has its rebalance timeout
   to do so, else it is fenced (removed).
5. The answer: member id and epoch, the heartbeat interval, and the assigned partitions when the
   request was a full one (a join, or every field set) or they changed. A member still
   reconciling (partitions to revoke, or target partitions another member has not released
   yet) is told a tenth of `group.consumer.heartbeat.interval.ms` (at least 1 ms), so it takes
   released partitions soon after their release instead of up to a whole interval later; Kafka
   answers every member with the configured interval (docs/groups.md).
Leaving: epoch -1 removes the member (its partitions become free, the group epoch goes up);
epoch -2 (static members) keeps it at epoch -2, to be replaced when its instance rejoins. A
member without a heartbeat for `group.consumer.session.timeout.ms` (a classic member: its own
session timeout) is removed. When the removed member is the last consumer-protocol one and
the others all use the classic protocol, the group is written back as a classic group that
rebalances (`group_migration`'s downgrade), if the policy allows it and the classic
`group.max.size` holds them.
A static classic member joining without a member id replaces its instance's member, whatever
that member's protocol; when it replaced the last consumer-protocol member, the group is
written back as a classic group that stays Stable (the joining member syncs into it).
Records are applied as they are written; the shell tells which were appended (`appended`) and
which failed (`append_failed`, records the log refused): each group a failed record changes
goes back to the state it had before the batch that record came in (both protocols' sides of
the group id), keeping the batches written before it, as Kafka's coordinator reverts to the
offset written before the failed batch.
"""

from __future__ import annotations

import re
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, TypeVar
from uuid import UUID

from replog.common import TopicPartition
from replog.coordinator import consumer_group_records as rec
from replog.coordinator.classic_group_messages import (
    GroupRecord,
    GroupResult,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeaveMemberResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from replog.coordinator.consumer_group import ConsumerGroup
from replog.coordinator.consumer_group_messages import (
    CLASSIC_MEMBER,
    CONSUMER_MEMBER,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DescribedConsumerGroup,
    DescribedConsumerMember,
    NamedTopicPartitions,
)
from replog.coordinator.consumer_member import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    TP,
    ConsumerMember,
    MemberState,
    Partitions,
    by_topic,
    flatten,
)
from replog.coordinator.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    assignment_to_bytes,
    subscription_from_bytes,
)
from replog.coordinator.current_assignment import reconcile
from replog.coordinator.group_migration import (
    DEFAULT_MIGRATION_POLICY,
    MIGRATION_POLICY_PROPERTY,
    check_policy,
    downgrade_enabled,
    downgrade_tombstones,
    downgrade_value,
    upgrade_enabled,
    upgrade_records,
)
from replog.coordinator.offsets_records import GroupMetadataKey
from replog.coordinator.server_assignors import (
    ASSIGNORS,
    UNIFORM,
    AssignorMember,
    PartitionRacks,
)
from replog.errors import (
    FencedInstanceIdError,
    FencedMemberEpochError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidConfigError,
    InvalidRegularExpressionError,
    InvalidRequestError,
    KafkaError,
    MemberIdRequiredError,
    NonEmptyGroupError,
    RebalanceInProgressError,
    StaleMemberEpochError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
    UnsupportedAssignorError,
    UnsupportedVersionError,
)
from replog.quorum.controller.config_definitions import (
    GROUP_HEARTBEAT_INTERVAL,
    GROUP_SESSION_TIMEOUT,
)

if TYPE_CHECKING:
    from replog.coordinator.classic_group import ClassicGroup
    from replog.coordinator.classic_group_coordinator import ClassicGroupCoordinator

Record = rec.ConsumerGroupRecord | GroupRecord
T = TypeVar("T")
# OffsetCommit's first version carrying the member epoch (KIP-848).
COMMIT_MEMBER_EPOCH_VERSION = 9
# A reconciling member heartbeats this many times as often (module docstring, step 5).
RECONCILING_HEARTBEAT_DIVISOR = 10
_SESSION = "session"
_REBALANCE = "rebalance"
# A classic member's JoinGroup expected (after REBALANCE_IN_PROGRESS) and SyncGroup expected
# (after its JoinGroup), each within its rebalance timeout, else it is removed (Kafka's).
_JOIN = "join"
_SYNC = "sync"


@dataclass(frozen=True, slots=True)
class ConsumerGroupConfig:
    """Kafka's broker settings for consumer-protocol groups, with Kafka's defaults and Kafka's
    checks: the session timeout and the heartbeat interval lie within their min/max settings,
    and the interval is shorter than the session (a member told to heartbeat less often than
    its session lasts would be removed between two heartbeats)."""

    session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.consumer.heartbeat.interval.ms
    max_size: int = (1 << 31) - 1  # group.consumer.max.size
    assignors: tuple[str, ...] = (UNIFORM, "range")  # group.consumer.assignors; first: default
    min_session_timeout_ms: int = 45_000  # group.consumer.min.session.timeout.ms
    max_session_timeout_ms: int = 60_000  # group.consumer.max.session.timeout.ms
    min_heartbeat_interval_ms: int = 5_000  # group.consumer.min.heartbeat.interval.ms
    max_heartbeat_interval_ms: int = 15_000  # group.consumer.max.heartbeat.interval.ms
    migration_policy: str = DEFAULT_MIGRATION_POLICY  # group.consumer.migration.policy

    def __post_init__(self) -> None:
        check_policy(self.migration_policy)
        for name, value in (
            ("group.consumer.session.timeout.ms", self.session_timeout_ms),
            ("group.consumer.heartbeat.interval.ms", self.heartbeat_interval_ms),
            ("group.consumer.max.size", self.max_size),
            ("group.consumer.min.session.timeout.ms", self.min_session_timeout_ms),
            ("group.consumer.max.session.timeout.ms", self.max_session_timeout_ms),
            ("group.consumer.min.heartbeat.interval.ms", self.min_heartbeat_interval_ms),
            ("group.consumer.max.heartbeat.interval.ms", self.max_heartbeat_interval_ms),
        ):
            if value < 1:
                raise InvalidConfigError(f"{name} is {value}; must be >= 1")
        for what, value, low, high in (
            (
                "session.timeout.ms",
                self.session_timeout_ms,
                self.min_session_timeout_ms,
                self.max_session_timeout_ms,
            ),
            (
                "heartbeat.interval.ms",
                self.heartbeat_interval_ms,
                self.min_heartbeat_interval_ms,
                self.max_heartbeat_interval_ms,
            ),
        ):
            if low > high:
                raise InvalidConfigError(
                    f"group.consumer.min.{what} ({low}) must be <= group.consumer.max.{what} "
                    f"({high})"
                )
            if not low <= value <= high:
                raise InvalidConfigError(
                    f"group.consumer.{what} is {value}; must be within "
                    f"group.consumer.min.{what} ({low}) and group.consumer.max.{what} ({high})"
                )
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise InvalidConfigError(
                f"group.consumer.heartbeat.interval.ms ({self.heartbeat_interval_ms}) must be "
                f"less than group.consumer.session.timeout.ms ({self.session_timeout_ms})"
            )
        unknown = [name for name in self.assignors if name not in ASSIGNORS]
        if unknown or not self.assignors or len(set(self.assignors)) != len(self.assignors):
            raise InvalidConfigError(
                f"group.consumer.assignors is {list(self.assignors)}; each must be one of "
                f"{sorted(ASSIGNORS)}, at most once"
            )


def _random_uuid() -> str:
    return str(uuid.uuid4())


@dataclass(slots=True, eq=False)
class _Durable:
    """A group as it was before one batch of its records (both protocols' sides of the id),
    kept while that batch is being appended (`append_failed` puts it back)."""

    batch: list[Record]  # the list the call wrote the batch's records into
    consumer: ConsumerGroup | None
    classic: ClassicGroup | None
    unwritten: int = 0  # its records not yet acknowledged


class ConsumerGroupCoordinator:
    """The consumer-protocol groups of one `__consumer_offsets` partition (module docstring)."""

    def __init__(
        self,
        config: ConsumerGroupConfig | None = None,
        new_uuid: Callable[[], str] = _random_uuid,
        classic: ClassicGroupCoordinator | None = None,
    ) -> None:
        self.config = config or ConsumerGroupConfig()
        self._new_uuid = new_uuid
        self._classic = classic
        self.groups: dict[str, ConsumerGroup] = {}
        self._topics: dict[str, rec.TopicMetadata] = {}
        self._racks: dict[TP, frozenset[str]] = {}
        self._group_configs: dict[str, dict[str, str]] = {}
        # (kind, group, member) -> (deadline, member epoch for the rebalance timeout)
        self._timers: dict[tuple[str, str, str], tuple[int, int]] = {}
        self._now_ms = 0
        self.rebalances = 0  # group epoch bumps
        # Answers owed to a converted classic group's waiting requests (`take_classic_answers`).
        self._classic_answers = GroupResult()
        # Records written and not yet acknowledged, by identity, with the state before their
        # batch; each group's batches in flight, oldest first.
        self._unwritten: dict[int, tuple[Record, _Durable]] = {}
        self._durable: dict[str, list[_Durable]] = {}

    # --- topics, records -------------------------------------------------------------------------

    def set_topics(
        self, topics: Mapping[str, tuple[UUID, int]], racks: PartitionRacks | None = None
    ) -> None:
        """The cluster's topics (name -> topic id, partition count), from the shell's image;
        groups see a change at their members' next heartbeat. `racks`: each partition's
        replicas' racks (the brokers' `broker.rack`), which the assignors use at the next
        assignment (a change of racks alone does not start one)."""
        self._topics = {
            name: rec.TopicMetadata(topic_id, name, count)
            for name, (topic_id, count) in topics.items()
        }
        self._racks = dict(racks or {})

    def set_group_configs(self, configs: Mapping[str, Mapping[str, str]]) -> None:
        """Each group's own settings (KIP-848's GroupConfig, group id -> key -> value, from
        the metadata log's GROUP config resources, which the controller checked against its
        bounds): `consumer.session.timeout.ms` and `consumer.heartbeat.interval.ms` replace
        the broker's for that group, from each member's next heartbeat on."""
        self._group_configs = {
            group_id: {k: v for k, v in keys.items() if k in _GROUP_KEYS}
            for group_id, keys in configs.items()
        }

    def session_timeout_ms(self, group_id: str) -> int:
        return self._group_setting(group_id, GROUP_SESSION_TIMEOUT, self.config.session_timeout_ms)

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self._group_setting(
            group_id, GROUP_HEARTBEAT_INTERVAL, self.config.heartbeat_interval_ms
        )

    def _group_setting(self, group_id: str, key: str, default: int) -> int:
        value = self._group_configs.get(group_id, {}).get(key)
        if value is None:
            return default
        try:
            return max(1, int(value.strip()))
        except ValueError:  # the controller writes only valid values
            return default

    def replay(self, key: rec.ConsumerGroupKey, value: rec.ConsumerGroupValue | None) -> None:
        """Apply a record read back from `__consumer_offsets` (or just written)."""
        group = self.groups.get(key.group)
        if group is None:
            if value is None:
                return
            group = self.groups[key.group] = ConsumerGroup(key.group)
        group.apply(key, value)
        if group.removed:
            del self.groups[key.group]
            self._drop_timers(key.group)

    def _write(self, records: list[Record], record: Record) -> None:
        group_id = record.key.group
        batches = self._durable.setdefault(group_id, [])
        if not batches or batches[-1].batch is not records:
            classic = None if self._classic is None else self._classic.snapshot(group_id)
            group = self.groups.get(group_id)
            batches.append(_Durable(records, None if group is None else group.copy(), classic))
        durable = batches[-1]
        durable.unwritten += 1
        self._unwritten[id(record)] = (record, durable)
        records.append(record)
        if isinstance(record, GroupRecord):
            assert self._classic is not None
            self._classic.replay(record.key, record.value)
        else:
            self.replay(record.key, record.value)

    def take_classic_answers(self) -> GroupResult:
        """The JoinGroup and SyncGroup answers owed since the last call: the waiting requests
        of classic groups that heartbeats converted (REBALANCE_IN_PROGRESS). The shell sends
        them with the heartbeat's records, like any GroupResult's answers."""
        owed, self._classic_answers = self._classic_answers, GroupResult()
        return owed

    def appended(self, records: Sequence[object]) -> None:
        """The shell appended `records` (ones this core returned): they are durable."""
        for record in records:
            entry = self._unwritten.get(id(record))
            if entry is None or entry[0] is not record:
                continue
            assert isinstance(record, (rec.ConsumerGroupRecord, GroupRecord))
            del self._unwritten[id(record)]
            durable = entry[1]
            durable.unwritten -= 1
            if not durable.unwritten:
                batches = self._durable[record.key.group]
                batches.remove(durable)
                if not batches:
                    del self._durable[record.key.group]

    def append_failed(self, records: Sequence[object], now_ms: int) -> None:
        """The log refused `records` (the shell answered their requests with its error): each
        group they change goes back to what it was before the first batch they came in, as
        Kafka's coordinator reverts to the offset written before the failed batch; batches
        written before it stay (they are in the log). Batches of those groups written after
        it are dropped too (they were decided on the reverted state; the shell fails a batch
        before any later one is appended). The restored members' sessions start now; a classic
        group restored mid-rebalance rebalances."""
        self._now_ms = max(self._now_ms, now_ms)
        failed: dict[str, set[int]] = {}
        for record in records:
            entry = self._unwritten.get(id(record))
            if entry is not None and entry[0] is record:
                assert isinstance(record, (rec.ConsumerGroupRecord, GroupRecord))
                failed.setdefault(record.key.group, set()).add(id(entry[1]))
        for group_id in sorted(failed):
            batches = self._durable[group_id]
            first = next(i for i, b in enumerate(batches) if id(b) in failed[group_id])
            durable, dropped = batches[first], batches[first:]
            del batches[first:]
            if not batches:
                del self._durable[group_id]
            gone = {id(b) for b in dropped}
            for key in [k for k, (_, b) in self._unwritten.items() if id(b) in gone]:
                del self._unwritten[key]
            self._drop_timers(group_id)
            if durable.consumer is None:
                self.groups.pop(group_id, None)
            else:
                self.groups[group_id] = durable.consumer
                self._start_timers(durable.consumer)
            if self._classic is not None:
                self._classic.restore(group_id, durable.classic, self._now_ms)

    # --- timers ----------------------------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        return min((deadline for deadline, _ in self._timers.values()), default=None)

    def timers(self) -> list[tuple[int, str, str, str]]:
        """(deadline, group, kind, member) of every timer, earliest first (for inspection)."""
        return sorted((d, g, kind, m) for (kind, g, m), (d, _) in self._timers.items())

    def _drop_timers(self, group_id: str, member_id: str | None = None) -> None:
        for key in [k for k in self._timers if k[1] == group_id and member_id in (None, k[2])]:
            del self._timers[key]

    def tick(self, now_ms: int) -> list[Record]:
        """Fire every timer due at `now_ms`, earliest first: expired sessions and rebalance
        timeouts remove their members."""
        records: list[Record] = []
        while True:
            due = sorted((d, k) for k, (d, _) in self._timers.items() if d <= now_ms)
            if not due:
                self._now_ms = max(self._now_ms, now_ms)
                return records
            deadline, key = due[0]
            _, epoch = self._timers.pop(key)
            self._now_ms = max(self._now_ms, deadline)
            kind, group_id, member_id = key
            group = self.groups.get(group_id)
            member = None if group is None else group.members.get(member_id)
            if group is None or member is None:
                continue
            if kind != _REBALANCE or member.member_epoch == epoch:
                self._fence(group, member, records)

    # --- ConsumerGroupHeartbeat ------------------------------------------------------------------

    def heartbeat(
        self, request: ConsumerGroupHeartbeatRequest, now_ms: int
    ) -> tuple[ConsumerGroupHeartbeatResponse, list[Record]]:
        """Handle a ConsumerGroupHeartbeat: its answer and the records it wrote."""
        self._now_ms = max(self._now_ms, now_ms)
        records: list[Record] = []
        try:
            self._check_request(request)
            if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(request, records), records
            return self._join_or_heartbeat(request, records), records
        except KafkaError as error:
            assert not records, "a refusal after records were written"
            return ConsumerGroupHeartbeatResponse(error), []

    def _check_request(self, request: ConsumerGroupHeartbeatRequest) -> None:
        def invalid(why: str) -> InvalidRequestError:
            return InvalidRequestError(f"group {request.group_id!r}: {why}")

        if not request.group_id:
            raise InvalidRequestError("ConsumerGroupHeartbeat: the group id is empty")
        if request.instance_id == "":
            raise invalid("the instance id is empty (null: no instance id)")
        if request.rack_id == "":
            raise invalid("the rack id is empty (null: no rack id)")
        epoch = request.member_epoch
        if request.api_version >= 1 and not request.member_id:
            raise invalid("the member id is empty: a v1+ member generates its own")
        if epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if not request.member_id:
                raise invalid(f"member epoch {epoch} needs a member id")
        elif epoch == 0:
            if request.rebalance_timeout_ms == -1:
                raise invalid("a join (member epoch 0) must set the rebalance timeout")
            if request.owned is None or request.owned:
                raise invalid("a join (member epoch 0) must send an empty owned partitions list")
            if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
                raise invalid("a join (member epoch 0) must set the topic names or a regex")
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if request.instance_id is None:
                raise invalid("member epoch -2 (a static member's leave) needs an instance id")
        else:
            raise invalid(f"member epoch {epoch} is invalid")
        if request.server_assignor is not None and (
            request.server_assignor not in self.config.assignors
        ):
            raise UnsupportedAssignorError(
                f"group {request.group_id!r}: server assignor {request.server_assignor!r} is not "
                f"one of {list(self.config.assignors)} (group.consumer.assignors)"
            )
        if request.subscribed_topic_regex is not None:
            try:
                re.compile(request.subscribed_topic_regex)
            except re.error as error:
                raise InvalidRegularExpressionError(
                    f"group {request.group_id!r}: topic regex "
                    f"{request.subscribed_topic_regex!r} does not compile: {error}"
                ) from None

    def _group_for(
        self, request: ConsumerGroupHeartbeatRequest
    ) -> tuple[ConsumerGroup, list[rec.ConsumerGroupRecord]]:
        """The group a join or heartbeat acts on (a new, unwritten one for a first join; for
        an upgrade, the group its records build) and the upgrade's records to write."""
        group_id = request.group_id
        classic = None if self._classic is None else self._classic.groups.get(group_id)
        if classic is not None and (classic.members or request.member_epoch != 0):
            upgrade = self._upgrade(request, classic)
            converted = ConsumerGroup(group_id)
            for record in upgrade:
                converted.apply(record.key, record.value)
            return self._check_size(converted, request), upgrade
        group = self.groups.get(group_id)
        if group is None:
            if request.member_epoch != 0:
                raise GroupIdNotFoundError(f"consumer group {group_id!r} does not exist")
            group = ConsumerGroup(group_id)
        return self._check_size(group, request), []

    def _check_size(
        self, group: ConsumerGroup, request: ConsumerGroupHeartbeatRequest
    ) -> ConsumerGroup:
        if len(group.members) >= self.config.max_size and (request.member_id not in group.members):
            raise GroupMaxSizeReachedError(
                f"group {group.group_id!r} has group.consumer.max.size ({self.config.max_size}) "
                "members"
            )
        return group

    def _upgrade(
        self, request: ConsumerGroupHeartbeatRequest, classic: ClassicGroup
    ) -> list[rec.ConsumerGroupRecord]:
        """The records converting `classic` (with members) to a consumer group for a join;
        GROUP_ID_NOT_FOUND (Kafka's answer) naming why it may not be converted."""
        group_id = classic.group_id
        why = None
        if request.member_epoch != 0:
            why = "only a join (member epoch 0) converts it"
        elif not upgrade_enabled(self.config.migration_policy):
            why = (
                f"{MIGRATION_POLICY_PROPERTY} is {self.config.migration_policy!r}, which does "
                "not allow converting it (online upgrade)"
            )
        elif classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
            why = (
                f"its protocol type is {classic.protocol_type!r}, not "
                f"{CONSUMER_PROTOCOL_TYPE!r}: only consumers' groups convert"
            )
        elif len(classic.members) > self.config.max_size:
            why = f"it has more members than group.consumer.max.size ({self.config.max_size})"
        if why is None:
            try:
                return upgrade_records(
                    classic, {name: t.topic_id for name, t in self._topics.items()}
                )
            except ValueError as error:
                why = f"its members' consumer protocol does not parse: {error}"
        raise GroupIdNotFoundError(
            f"group {group_id!r} is a classic group with {len(classic.members)} members "
            f"(they use JoinGroup), not a consumer group; {why}"
        )

    def _member_for(
        self, group: ConsumerGroup, request: ConsumerGroupHeartbeatRequest, member_id: str
    ) -> tuple[ConsumerMember, ConsumerMember | None]:
        """The member a join or heartbeat acts on, and the static member it replaces."""
        epoch, owned = request.member_epoch, _owned(request)
        if request.instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if epoch != 0:
                    raise UnknownMemberIdError(
                        f"group {group.group_id!r} has no member {member_id!r}"
                    )
                return ConsumerMember(member_id), None
            _check_epoch(group, member, epoch, owned)
            return member, None
        existing = group.static_member(request.instance_id)
        if epoch == 0:
            if existing is None:
                return group.members.get(member_id) or ConsumerMember(member_id), None
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise UnreleasedInstanceIdError(
                    f"group {group.group_id!r}: instance {request.instance_id!r} is held by "
                    f"member {existing.member_id!r}, which has not left"
                )
            return replace(
                existing, member_id=member_id, member_epoch=0, previous_member_epoch=0
            ), existing
        if existing is None:
            raise UnknownMemberIdError(
                f"group {group.group_id!r} has no static member {request.instance_id!r}"
            )
        if existing.member_id != member_id:
            raise FencedInstanceIdError(
                f"group {group.group_id!r}: instance {request.instance_id!r} is member "
                f"{existing.member_id!r} now, not {member_id!r}"
            )
        _check_epoch(group, existing, epoch, owned)
        return existing, None

    def _join_or_heartbeat(
        self, request: ConsumerGroupHeartbeatRequest, records: list[Record]
    ) -> ConsumerGroupHeartbeatResponse:
        group, upgrade = self._group_for(request)
        member_id = request.member_id or self._new_uuid()
        member, replaced = self._member_for(group, request, member_id)
        owned = _owned(request)
        if member.state is MemberState.UNKNOWN and (owned is None or owned):
            raise FencedMemberEpochError(
                f"group {group.group_id!r}: member {member_id!r} is in an unknown state: it "
                "must give up all its partitions and rejoin"
            )
        # Every check passed: from here on, records are written.
        group_id = group.group_id
        classic = None if self._classic is None else self._classic.groups.get(group_id)
        if classic is not None:  # an Empty classic group gives way, or converts (_group_for)
            # A rebalancing classic group's waiting JoinGroup and SyncGroup requests are told to
            # rejoin: they rejoin the consumer group (Kafka's `convertToConsumerGroup`).
            assert self._classic is not None
            owed = self._classic.answer_waiting(
                group_id,
                RebalanceInProgressError(
                    f"group {group_id!r} became a consumer group (a member joined with the "
                    "consumer protocol): rejoin"
                ),
            )
            self._classic_answers.joins += owed.joins
            self._classic_answers.syncs += owed.syncs
            self._write(records, GroupRecord(GroupMetadataKey(group_id), None))
        if upgrade:
            for record in upgrade:
                self._write(records, record)
            group = self.groups[group_id]
            for converted in group.members.values():
                self._start_session(group_id, converted)
        if replaced is not None:
            group = self._replace_static(group, replaced, member, records)
        updated = replace(
            member,
            instance_id=_or(request.instance_id, member.instance_id),
            rack_id=_or(request.rack_id, member.rack_id),
            rebalance_timeout_ms=(
                member.rebalance_timeout_ms
                if request.rebalance_timeout_ms == -1
                else request.rebalance_timeout_ms
            ),
            server_assignor=_or(request.server_assignor, member.server_assignor),
            subscribed_topic_names=_or(
                request.subscribed_topic_names, member.subscribed_topic_names
            ),
            # An empty regex clears it (a member gone back to topic names).
            subscribed_topic_regex=_or(
                request.subscribed_topic_regex, member.subscribed_topic_regex
            )
            or None,
            client_id=request.client_id,
            client_host=request.client_host,
        )
        current = self._update_and_reconcile(group, member, updated, owned, records)
        self._start_session(group_id, current)
        full = request.member_epoch == 0 or (
            request.rebalance_timeout_ms != -1
            and request.subscribed_topic_names is not None
            and request.owned is not None
        )
        interval = self.heartbeat_interval_ms(group_id)
        if current.state is not MemberState.STABLE:
            interval = max(1, interval // RECONCILING_HEARTBEAT_DIVISOR)
        return ConsumerGroupHeartbeatResponse(
            None,
            member_id,
            current.member_epoch,
            interval,
            by_topic(current.assigned) if full or current.assigned != member.assigned else None,
        )

    def _update_and_reconcile(
        self,
        group: ConsumerGroup,
        member: ConsumerMember,
        updated: ConsumerMember,
        owned: Partitions | None,
        records: list[Record],
    ) -> ConsumerMember:
        """Steps 3 and 4 (module docstring) for `member`, now `updated`: the member after."""
        group_id, member_id = group.group_id, member.member_id
        bump = False
        if updated != member or member_id not in group.members:
            self._write(records, _member_record(group_id, updated))
            group = self.groups[group_id]
            bump = not updated.same_subscription(member)
        bump = self._refresh_topics(group, records) or bump
        if bump:
            self._bump(group, records)
        if group.group_epoch > group.assignment_epoch:
            self._assign(group, records)
        current = group.members[member_id]
        target = group.target(member_id)
        if not current.is_reconciled_to(group.assignment_epoch):
            reconciled = reconcile(
                current,
                group.assignment_epoch,
                target,
                lambda tp: group.holder(tp) not in (None, member_id),
                owned,
            )
            if reconciled != current:
                self._write(records, _assignment_record(group_id, reconciled))
                timer = (_REBALANCE, group_id, member_id)
                if reconciled.state is MemberState.UNREVOKED_PARTITIONS:
                    self._timers[timer] = (
                        self._now_ms + max(0, reconciled.rebalance_timeout_ms),
                        reconciled.member_epoch,
                    )
                else:
                    self._timers.pop(timer, None)
            current = reconciled
        return current

    def _leave(
        self, request: ConsumerGroupHeartbeatRequest, records: list[Record]
    ) -> ConsumerGroupHeartbeatResponse:
        group = self.groups.get(request.group_id)
        if group is None:
            raise GroupIdNotFoundError(f"consumer group {request.group_id!r} does not exist")
        answer = ConsumerGroupHeartbeatResponse(None, request.member_id, request.member_epoch)
        if request.instance_id is None:
            member = group.members.get(request.member_id)
            if member is None:
                raise UnknownMemberIdError(
                    f"group {group.group_id!r} has no member {request.member_id!r}"
                )
        else:
            found = group.static_member(request.instance_id)
            if found is None:
                raise UnknownMemberIdError(
                    f"group {group.group_id!r} has no static member {request.instance_id!r}"
                )
            if found.member_id != request.member_id:
                raise FencedInstanceIdError(
                    f"group {group.group_id!r}: instance {request.instance_id!r} is member "
                    f"{found.member_id!r} now, not {request.member_id!r}"
                )
            member = found
            if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # Kept (its assignment too) until its instance rejoins or its session ends.
                away = replace(
                    member,
                    member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                    pending_revocation=frozenset(),
                )
                self._write(records, _assignment_record(group.group_id, away))
                return answer
        self._fence(group, member, records)
        return answer

    # --- group changes ---------------------------------------------------------------------------

    def _replace_static(
        self,
        group: ConsumerGroup,
        replaced: ConsumerMember,
        member: ConsumerMember,
        records: list[Record],
    ) -> ConsumerGroup:
        """`member` (a new member id) takes over the static member `replaced`: its
        subscription, target and assignment move to the new id (Kafka's `replaceMember`)."""
        group_id = group.group_id
        old_target = group.targets.get(replaced.member_id)
        self._remove_member_records(group_id, replaced.member_id, records)
        self._drop_timers(group_id, replaced.member_id)
        self._write(records, _member_record(group_id, member))
        if old_target is not None:
            self._write(records, _target_record(group_id, member.member_id, old_target))
        self._write(records, _assignment_record(group_id, member))
        return self.groups[group_id]

    def _remove_member_records(self, group_id: str, member_id: str, records: list[Record]) -> None:
        for kind in (
            rec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
            rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
            rec.CONSUMER_GROUP_MEMBER_METADATA,
        ):
            self._write(
                records,
                rec.ConsumerGroupRecord(rec.ConsumerGroupKey(kind, group_id, member_id), None),
            )

    def _start_session(self, group_id: str, member: ConsumerMember) -> None:
        timeout = self.session_timeout_ms(group_id)
        if member.classic is not None:
            timeout = member.classic.session_timeout_ms
        self._timers[(_SESSION, group_id, member.member_id)] = (self._now_ms + timeout, 0)

    def _fence(self, group: ConsumerGroup, member: ConsumerMember, records: list[Record]) -> None:
        """Remove `member`: its partitions are free at once; the group epoch goes up. Or,
        when only classic members remain, write the group back as a classic one."""
        if self._may_downgrade(group, member):
            self._downgrade(group, member, records)
            return
        group_id = group.group_id
        self._remove_member_records(group_id, member.member_id, records)
        self._refresh_topics(group, records)
        self._bump(group, records)
        self._drop_timers(group_id, member.member_id)

    def _may_downgrade(self, group: ConsumerGroup, leaving: ConsumerMember | None) -> bool:
        """Kafka's `validateOnlineDowngradeWithFencedMember` (`leaving` removed), and with
        None its check after a static member's replacement: every member is classic."""
        leaving_id = None if leaving is None else leaving.member_id
        others = [m for m in group.members.values() if m.member_id != leaving_id]
        return (
            self._classic is not None
            and (leaving is None or leaving.classic is None)
            and bool(others)
            and all(m.classic is not None for m in others)
            and downgrade_enabled(self.config.migration_policy)
            and len(others) <= self._classic.config.max_size
        )

    def _downgrade(
        self,
        group: ConsumerGroup,
        leaving: ConsumerMember | None,
        records: list[Record],
        *,
        rebalance: bool = True,
    ) -> None:
        assert self._classic is not None
        group_id = group.group_id
        names = {t.topic_id: t.name for t in self._topics.values()}
        leaving_id = "" if leaving is None else leaving.member_id
        value = downgrade_value(group, leaving_id, names, self._classic.wall_clock())
        for tombstone in downgrade_tombstones(group):
            self._write(records, tombstone)
        self._write(records, GroupRecord(GroupMetadataKey(group_id), value))
        self._classic.start_converted(group_id, self._now_ms, rebalance=rebalance)

    def _bump(self, group: ConsumerGroup, records: list[Record]) -> None:
        self.rebalances += 1
        self._write(
            records,
            rec.ConsumerGroupRecord(
                rec.ConsumerGroupKey(rec.CONSUMER_GROUP_METADATA, group.group_id),
                rec.GroupEpochValue(group.group_epoch + 1),
            ),
        )

    def subscribed_topics(self, group_id: str) -> frozenset[str]:
        """The existing topics the members of `group_id` subscribe to, by name or regex (none
        if the group is not here): those whose offsets an OffsetDelete keeps."""
        group = self.groups.get(group_id)
        return frozenset() if group is None else frozenset(self._group_subscribed(group))

    def _group_subscribed(self, group: ConsumerGroup) -> set[str]:
        names: set[str] = set()
        for member in group.members.values():
            names |= self._subscribed(member)
        return names

    def _subscribed(self, member: ConsumerMember) -> set[str]:
        """The existing topics `member` subscribes to, by name or regex."""
        names = {n for n in member.subscribed_topic_names if n in self._topics}
        if member.subscribed_topic_regex is not None:
            # Every topic the metadata has, internal ones included, as Kafka's coordinator
            # matches (a client that wants them out says so in its pattern).
            pattern = re.compile(member.subscribed_topic_regex)
            names |= {n for n in self._topics if pattern.fullmatch(n)}
        return names

    def _refresh_topics(self, group: ConsumerGroup, records: list[Record]) -> bool:
        """Write the group's subscribed topics if they changed (names, ids or partition
        counts): whether they did."""
        names = self._group_subscribed(group)
        topics = {name: self._topics[name] for name in names}
        if topics == group.topics:
            return False
        self._write(
            records,
            rec.ConsumerGroupRecord(
                rec.ConsumerGroupKey(rec.CONSUMER_GROUP_PARTITION_METADATA, group.group_id),
                rec.PartitionMetadataValue(tuple(topics[name] for name in sorted(topics))),
            ),
        )
        return True

    def preferred_assignor(self, group: ConsumerGroup) -> str:
        """The server assignor most members name (ties: the first in configuration order),
        else the configured default."""
        votes = Counter(m.server_assignor for m in group.members.values() if m.server_assignor)
        if not votes:
            return self.config.assignors[0]
        return max(votes, key=lambda name: (votes[name], -self.config.assignors.index(name)))

    def _assign(self, group: ConsumerGroup, records: list[Record]) -> None:
        """Compute the target assignment at the group epoch; write what changed."""
        group_id = group.group_id
        counts = {t.topic_id: t.partitions for t in group.topics.values()}
        ids = {t.name: t.topic_id for t in group.topics.values()}
        members = [
            AssignorMember(
                m.member_id,
                frozenset(ids[name] for name in self._subscribed(m) if name in ids),
                group.target(m.member_id),
                m.rack_id,
            )
            for m in group.members.values()
        ]
        targets = ASSIGNORS[self.preferred_assignor(group)](members, counts, self._racks)
        for member_id in sorted(targets):
            if member_id not in group.targets or targets[member_id] != group.targets[member_id]:
                self._write(records, _target_record(group_id, member_id, targets[member_id]))
        self._write(
            records,
            rec.ConsumerGroupRecord(
                rec.ConsumerGroupKey(rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, group_id),
                rec.TargetAssignmentEpochValue(group.group_epoch),
            ),
        )

    # --- classic members (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) ------------------------

    def holds(self, group_id: str) -> bool:
        """Whether `group_id` is a consumer group with members: a classic member's requests
        for it come here (Kafka's, whatever the migration policy)."""
        group = self.groups.get(group_id)
        return group is not None and bool(group.members)

    def _classic_member(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None
    ) -> ConsumerMember:
        """The classic member a SyncGroup, Heartbeat or LeaveGroup names (Kafka's
        `validateConsumerGroupMember`, then the member must use the classic protocol)."""
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise UnknownMemberIdError(f"group {group.group_id!r} has no member {member_id!r}")
        else:
            found = group.static_member(instance_id)
            if found is None:
                raise UnknownMemberIdError(
                    f"group {group.group_id!r} has no static member {instance_id!r}"
                )
            if member_id and found.member_id != member_id:
                raise FencedInstanceIdError(
                    f"group {group.group_id!r}: instance {instance_id!r} is member "
                    f"{found.member_id!r} now, not {member_id!r}"
                )
            member = found
        if member.classic is None:
            raise UnknownMemberIdError(
                f"group {group.group_id!r}: member {member.member_id!r} uses the consumer "
                "protocol (ConsumerGroupHeartbeat), not JoinGroup"
            )
        return member

    def classic_join(self, request: JoinGroupRequest, request_id: int, now_ms: int) -> GroupResult:
        """A JoinGroup for a consumer group with members (Kafka's
        `classicGroupJoinToConsumerGroup`): the member's subscription comes from its protocol
        metadata, the group's assignor assigns it, and the answer (at once, after the records)
        carries its member epoch as the generation; it has no leader, so the member syncs
        without assigning."""
        self._now_ms = max(self._now_ms, now_ms)
        result = GroupResult()
        try:
            answer = self._classic_join(request, request_id, result)
        except KafkaError as error:
            assert not result.records, "a refusal after records were written"
            answer = JoinGroupResponse(request_id, error, request.member_id)
        result.joins.append(answer)
        return result

    def _classic_join(
        self, request: JoinGroupRequest, request_id: int, result: GroupResult
    ) -> JoinGroupResponse:
        group = self.groups[request.group_id]
        group_id = group.group_id
        unknown = not request.member_id
        member_id = request.member_id or self._new_uuid()
        if len(group.members) >= self.config.max_size and member_id not in group.members:
            raise GroupMaxSizeReachedError(
                f"group {group_id!r} has group.consumer.max.size ({self.config.max_size}) members"
            )
        names = {name for name, _ in request.protocols}
        classic = [m.classic for m in group.members.values() if m.classic is not None]
        shared = set(names)
        for metadata in classic:
            shared &= {name for name, _ in metadata.protocols}
        if request.protocol_type != CONSUMER_PROTOCOL_TYPE or not names or not shared:
            raise InconsistentGroupProtocolError(
                f"group {group_id!r} is a consumer group: a classic member joins it with "
                f"protocol type {CONSUMER_PROTOCOL_TYPE!r} and a protocol its classic members "
                f"all support (got {request.protocol_type!r}, {sorted(names)})"
            )
        if unknown and request.api_version >= 4 and request.group_instance_id is None:
            return JoinGroupResponse(
                request_id,
                MemberIdRequiredError(f"group {group_id!r}: rejoin with member id {member_id!r}"),
                member_id,
            )
        try:
            subscription = subscription_from_bytes(request.protocols[0][1])
        except ValueError as error:
            raise InconsistentGroupProtocolError(
                f"group {group_id!r}: member {member_id!r}'s protocol metadata: {error}"
            ) from None
        member = group.members.get(member_id)
        replaced = None
        if request.group_instance_id is not None:
            holder = group.static_member(request.group_instance_id)
            if holder is not None and holder.member_id != member_id:
                if not unknown:
                    raise FencedInstanceIdError(
                        f"group {group_id!r}: instance {request.group_instance_id!r} is member "
                        f"{holder.member_id!r} now, not {member_id!r}"
                    )
                # A restarted static member (no member id) takes its instance over, whichever
                # protocol the holder used and whether or not it left (Kafka's classic path).
                replaced = holder
                member = replace(
                    holder, member_id=member_id, member_epoch=0, previous_member_epoch=0
                )
        if member is None:
            member = ConsumerMember(member_id)
        elif member.classic is None and replaced is None:
            raise UnknownMemberIdError(
                f"group {group_id!r}: member {member_id!r} uses the consumer protocol"
            )
        ids = {name: t.topic_id for name, t in self._topics.items()}
        owned = frozenset(
            (ids[tp.topic], tp.partition) for tp in subscription.owned if tp.topic in ids
        )
        updated = replace(
            member,
            instance_id=request.group_instance_id,
            rack_id=_or(subscription.rack, member.rack_id),
            rebalance_timeout_ms=_rebalance_timeout(request),
            server_assignor=None,
            subscribed_topic_names=subscription.topics,
            subscribed_topic_regex=None,
            client_id=request.client_id,
            client_host=request.client_host,
            classic=rec.ClassicMemberMetadata(request.session_timeout_ms, request.protocols),
        )
        records: list[Record] = []
        if replaced is not None:
            group = self._replace_static(group, replaced, member, records)
        current = self._update_and_reconcile(group, member, updated, owned, records)
        group = self.groups[group_id]
        if replaced is not None and replaced.classic is None and self._may_downgrade(group, None):
            # It replaced the last consumer-protocol member: the group becomes classic again,
            # Stable with the joining member in it (no rebalance), as Kafka's
            # `convertToClassicGroup` with a joining member.
            generation = group.group_epoch
            self._downgrade(group, None, records, rebalance=False)
            result.records.extend(records)
            return JoinGroupResponse(
                request_id,
                None,
                member_id,
                generation,
                CONSUMER_PROTOCOL_TYPE,
                request.protocols[0][0],
            )
        result.records.extend(records)
        self._timers.pop((_JOIN, group_id, member_id), None)
        self._start_session(group_id, current)
        self._timers[(_SYNC, group_id, member_id)] = (
            self._now_ms + current.rebalance_timeout_ms,
            0,
        )
        return JoinGroupResponse(
            request_id,
            None,
            member_id,
            current.member_epoch,
            CONSUMER_PROTOCOL_TYPE,
            request.protocols[0][0],
        )

    def classic_sync(self, request: SyncGroupRequest, request_id: int, now_ms: int) -> GroupResult:
        """A SyncGroup of a classic member (Kafka's `classicGroupSyncToConsumerGroup`): its
        assigned partitions as ConsumerProtocolAssignment bytes; REBALANCE_IN_PROGRESS when
        the group moved on and the member has nothing to revoke first (it rejoins)."""
        self._now_ms = max(self._now_ms, now_ms)
        result = GroupResult()
        try:
            group = self.groups[request.group_id]
            member = self._classic_member(group, request.member_id, request.group_instance_id)
            _check_generation(group, member, request.generation_id)
            assert member.classic is not None
            protocols = {name for name, _ in member.classic.protocols}
            if request.protocol_type not in (None, CONSUMER_PROTOCOL_TYPE) or (
                request.protocol_name is not None and request.protocol_name not in protocols
            ):
                raise InconsistentGroupProtocolError(
                    f"group {group.group_id!r}: member {member.member_id!r} syncs with "
                    f"{request.protocol_type!r}/{request.protocol_name!r}, not its JoinGroup's"
                )
            self._check_rejoin(group, member, sync=True)
        except KafkaError as error:
            result.syncs.append(SyncGroupResponse(request_id, error))
            return result
        self._timers.pop((_SYNC, group.group_id, member.member_id), None)
        self._start_session(group.group_id, member)
        names = {t.topic_id: t.name for t in self._topics.values()}
        assignment = assignment_to_bytes(
            TopicPartition(names[t], p) for t, p in sorted(member.assigned) if t in names
        )
        result.syncs.append(
            SyncGroupResponse(
                request_id,
                None,
                CONSUMER_PROTOCOL_TYPE,
                request.protocol_name or member.classic.protocols[0][0],
                assignment,
            )
        )
        return result

    def classic_heartbeat(self, request: HeartbeatRequest, now_ms: int) -> KafkaError | None:
        """A Heartbeat of a classic member (Kafka's `classicGroupHeartbeatToConsumerGroup`):
        REBALANCE_IN_PROGRESS while it must rejoin: the group epoch is ahead of its epoch, it
        has partitions to revoke, or partitions it waits for were released."""
        self._now_ms = max(self._now_ms, now_ms)
        try:
            group = self.groups[request.group_id]
            member = self._classic_member(group, request.member_id, request.group_instance_id)
            _check_generation(group, member, request.generation_id)
            self._start_session(group.group_id, member)
            self._check_rejoin(group, member, sync=False)
        except KafkaError as error:
            return error
        return None

    def _check_rejoin(self, group: ConsumerGroup, member: ConsumerMember, sync: bool) -> None:
        if sync:
            # A member revoking has rejoined already: it syncs, revokes, and rejoins later.
            rejoin = group.group_epoch > member.member_epoch and (
                member.state is not MemberState.UNREVOKED_PARTITIONS
            )
        else:
            waiting = any(
                group.holder(tp) not in (None, member.member_id)
                for tp in group.target(member.member_id) - member.assigned
            )
            rejoin = (
                member.member_epoch < group.group_epoch
                or member.state is MemberState.UNREVOKED_PARTITIONS
                or (member.state is MemberState.UNRELEASED_PARTITIONS and not waiting)
            )
        if rejoin:
            key = (_JOIN, group.group_id, member.member_id)
            if key not in self._timers:
                self._timers[key] = (self._now_ms + member.rebalance_timeout_ms, 0)
            raise RebalanceInProgressError(
                f"group {group.group_id!r}: member {member.member_id!r} (epoch "
                f"{member.member_epoch}, group epoch {group.group_epoch}) must rejoin"
            )

    def classic_leave(
        self, request: LeaveGroupRequest, now_ms: int
    ) -> tuple[LeaveGroupResponse, list[Record]]:
        """A LeaveGroup for a consumer group: each classic member named is removed."""
        self._now_ms = max(self._now_ms, now_ms)
        group = self.groups[request.group_id]
        records: list[Record] = []
        answers: list[LeaveMemberResponse] = []
        for who in request.members:
            try:
                member = self._classic_member(group, who.member_id, who.group_instance_id)
            except KafkaError as error:
                answers.append(LeaveMemberResponse(who.member_id, who.group_instance_id, error))
                continue
            self._fence(group, member, records)
            answers.append(LeaveMemberResponse(member.member_id, who.group_instance_id, None))
            group = self.groups.get(request.group_id) or group
        return LeaveGroupResponse(None, tuple(answers)), records

    # --- ConsumerGroupDescribe, listing, deleting ------------------------------------------------

    def describe(self, group_ids: Iterable[str]) -> list[DescribedConsumerGroup]:
        """Each consumer group's epochs and members (with their current and target
        assignments); GROUP_ID_NOT_FOUND for one that is not here or is a classic group."""
        described: list[DescribedConsumerGroup] = []
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is None:
                described.append(
                    DescribedConsumerGroup(
                        group_id,
                        GroupIdNotFoundError(f"consumer group {group_id!r} does not exist"),
                    )
                )
                continue
            described.append(
                DescribedConsumerGroup(
                    group_id,
                    None,
                    group.state.value,
                    group.group_epoch,
                    group.assignment_epoch,
                    self.preferred_assignor(group),
                    tuple(
                        DescribedConsumerMember(
                            m.member_id,
                            m.instance_id,
                            m.rack_id,
                            m.member_epoch,
                            m.client_id,
                            m.client_host,
                            m.subscribed_topic_names,
                            m.subscribed_topic_regex,
                            self._named(m.assigned),
                            self._named(group.target(m.member_id)),
                            CONSUMER_MEMBER if m.classic is None else CLASSIC_MEMBER,
                        )
                        for m in group.members.values()
                    ),
                )
            )
        return described

    def _named(self, partitions: Partitions) -> NamedTopicPartitions:
        names = {t.topic_id: t.name for t in self._topics.values()}
        return tuple((t, names.get(t, ""), ps) for t, ps in by_topic(partitions))

    def list_groups(self, states: Iterable[str] = ()) -> list[tuple[str, str]]:
        """(group id, state) of every group, only those in `states` (case-insensitive)."""
        wanted = {state.lower() for state in states}
        return [
            (group_id, group.state.value)
            for group_id, group in sorted(self.groups.items())
            if not wanted or group.state.value.lower() in wanted
        ]

    def delete(self, group_id: str) -> tuple[KafkaError | None, list[Record]]:
        """Delete an Empty group (NON_EMPTY_GROUP otherwise): its tombstones."""
        group = self.groups.get(group_id)
        if group is None:
            return GroupIdNotFoundError(f"group {group_id!r} does not exist"), []
        if group.members:
            return NonEmptyGroupError(
                f"group {group_id!r} is {group.state.value} with {len(group.members)} members: "
                "only an Empty group can be deleted"
            ), []
        records: list[Record] = []
        for member_id in sorted(group.targets):
            self._write(records, _target_record(group_id, member_id, None))
        for kind in (
            rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
            rec.CONSUMER_GROUP_PARTITION_METADATA,
            rec.CONSUMER_GROUP_METADATA,
        ):
            self._write(
                records, rec.ConsumerGroupRecord(rec.ConsumerGroupKey(kind, group_id), None)
            )
        return None, records

    def yield_to_classic(self, group_id: str) -> tuple[KafkaError | None, list[Record]]:
        """A classic JoinGroup for `group_id` that no classic group holds: an Empty consumer
        group is deleted (its tombstones). One with members takes the member in
        (`classic_join`, which the classic core calls first when wired to this core);
        without that wiring it is INCONSISTENT_GROUP_PROTOCOL."""
        group = self.groups.get(group_id)
        if group is None:
            return None, []
        if group.members:
            return InconsistentGroupProtocolError(
                f"group {group_id!r} is a consumer group with {len(group.members)} members "
                "(they use ConsumerGroupHeartbeat): replog does not take classic members into "
                "it (Kafka's online migration); join with group.protocol=classic once its "
                "members have left"
            ), []
        return self.delete(group_id)

    # --- offsets fencing -------------------------------------------------------------------------

    def commit_error(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        api_version: int | None,
        *,
        transactional: bool = False,
    ) -> KafkaError | None:
        """Whether an OffsetCommit may commit for the group (Kafka's `validateOffsetCommit`):
        without a member epoch only while the group is Empty; else the member's current epoch,
        through OffsetCommit v9+ (`api_version` None: not the Kafka wire); a classic member
        commits with its member epoch as the generation (ILLEGAL_GENERATION otherwise). A
        TxnOffsetCommit (`transactional`) names no member at all, or any version's member
        epoch: its API has no version with the new protocol's fields to require."""
        group = self.groups[group_id]
        if member_epoch < 0 and not group.members:
            return None
        if transactional and member_epoch < 0 and not member_id:
            return None
        member = group.members.get(member_id)
        if member is None:
            return UnknownMemberIdError(f"group {group_id!r} has no member {member_id!r}")
        if member.classic is not None:
            # A classic member commits with its generation: its member epoch (any version).
            if member_epoch == member.member_epoch:
                return None
            return IllegalGenerationError(
                f"group {group_id!r}: member {member_id!r} is at generation "
                f"{member.member_epoch}, not {member_epoch}"
            )
        if (
            not transactional
            and api_version is not None
            and api_version < COMMIT_MEMBER_EPOCH_VERSION
        ):
            return UnsupportedVersionError(
                f"group {group_id!r}: members of a consumer group commit with OffsetCommit "
                f"v{COMMIT_MEMBER_EPOCH_VERSION}+ (got v{api_version})"
            )
        return _stale(group_id, member, member_epoch)

    def fetch_error(
        self, group_id: str, member_id: str | None, member_epoch: int
    ) -> KafkaError | None:
        """Whether an OffsetFetch (v9+) of a member may read the group's offsets."""
        group = self.groups.get(group_id)
        if group is None or (member_id is None and member_epoch < 0):
            return None
        member = group.members.get(member_id or "")
        if member is None:
            return UnknownMemberIdError(f"group {group_id!r} has no member {member_id!r}")
        return _stale(group_id, member, member_epoch)

    # --- loading, unloading ----------------------------------------------------------------------

    def loaded(self, now_ms: int) -> None:
        """The partition was replayed: every member's session (and a revoking member's
        rebalance timeout) starts now."""
        self._now_ms = max(self._now_ms, now_ms)
        for group in self.groups.values():
            self._start_timers(group)

    def _start_timers(self, group: ConsumerGroup) -> None:
        for member in group.members.values():
            self._start_session(group.group_id, member)
            if member.state is MemberState.UNREVOKED_PARTITIONS:
                self._timers[(_REBALANCE, group.group_id, member.member_id)] = (
                    self._now_ms + max(0, member.rebalance_timeout_ms),
                    member.member_epoch,
                )

    def unload(self) -> None:
        self.groups.clear()
        self._timers.clear()
        self._classic_answers = GroupResult()
        self._unwritten.clear()
        self._durable.clear()


_GROUP_KEYS = frozenset({GROUP_SESSION_TIMEOUT, GROUP_HEARTBEAT_INTERVAL})


def _or(value: T | None, default: T) -> T:
    return default if value is None else value


def _owned(request: ConsumerGroupHeartbeatRequest) -> Partitions | None:
    return None if request.owned is None else flatten(request.owned)


def _check_epoch(
    group: ConsumerGroup, member: ConsumerMember, epoch: int, owned: Partitions | None
) -> None:
    """FENCED_MEMBER_EPOCH unless `epoch` is the member's, 0 (a rejoin), or its previous one
    with owned partitions among its assigned ones (the answer that moved it on was lost)."""
    if epoch == 0 or epoch == member.member_epoch:
        return
    lost_answer = epoch < member.member_epoch and epoch == member.previous_member_epoch
    if lost_answer and owned is not None and owned <= member.assigned:
        return
    relation = "newer" if epoch > member.member_epoch else "older"
    raise FencedMemberEpochError(
        f"group {group.group_id!r}: member {member.member_id!r} sent epoch {epoch}, {relation} "
        f"than its epoch {member.member_epoch}: it must give up its partitions and rejoin"
    )


def _check_generation(group: ConsumerGroup, member: ConsumerMember, generation: int) -> None:
    if generation != member.member_epoch:
        raise IllegalGenerationError(
            f"group {group.group_id!r}: member {member.member_id!r} is at generation "
            f"{member.member_epoch} (its member epoch), not {generation}"
        )


def _rebalance_timeout(request: JoinGroupRequest) -> int:
    # JoinGroup v0 has no rebalance timeout: the session timeout stands in (Kafka's).
    if request.rebalance_timeout_ms < 0:
        return request.session_timeout_ms
    return request.rebalance_timeout_ms


def _stale(group_id: str, member: ConsumerMember, epoch: int) -> KafkaError | None:
    if epoch == member.member_epoch:
        return None
    return StaleMemberEpochError(
        f"group {group_id!r}: member {member.member_id!r} is at epoch {member.member_epoch}, "
        f"not {epoch}"
    )


def _member_record(group_id: str, member: ConsumerMember) -> rec.ConsumerGroupRecord:
    return rec.ConsumerGroupRecord(
        rec.ConsumerGroupKey(rec.CONSUMER_GROUP_MEMBER_METADATA, group_id, member.member_id),
        rec.MemberMetadataValue(
            member.instance_id,
            member.rack_id,
            member.client_id,
            member.client_host,
            member.subscribed_topic_names,
            member.subscribed_topic_regex,
            member.rebalance_timeout_ms,
            member.server_assignor,
            member.classic,
        ),
    )


def _target_record(
    group_id: str, member_id: str, target: Partitions | None
) -> rec.ConsumerGroupRecord:
    return rec.ConsumerGroupRecord(
        rec.ConsumerGroupKey(rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, group_id, member_id),
        None if target is None else rec.TargetAssignmentMemberValue(by_topic(target)),
    )


def _assignment_record(group_id: str, member: ConsumerMember) -> rec.ConsumerGroupRecord:
    return rec.ConsumerGroupRecord(
        rec.ConsumerGroupKey(
            rec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, group_id, member.member_id
        ),
        rec.CurrentAssignmentValue(
            member.member_epoch,
            member.previous_member_epoch,
            member.state.value,
            by_topic(member.assigned),
            by_topic(member.pending_revocation),
        ),
    )
