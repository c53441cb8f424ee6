"""Consumer-protocol (KIP-848) groups driven by text commands, for the scripts in
testdata/consumer_groups/.

A script is blocks separated by blank lines: `#` comment lines, one command, ``----`` and the
lines the command prints. One `ConsumerGroupCoordinator` (beside a classic one, for the
protocol clashes) runs on a manual clock. Topic ids are shown by topic name; partitions as
`t0 t1 u0`. Every record written is printed, and goes through its bytes into the log that
`failover` replays. After each command the groups whose state or members changed print one
line each: `state epoch=E target=T` and `member:epoch:STATE[assigned|revoking]`.

Commands (G a group, M a member id, "-" for the empty member id):
    topics NAME=PARTITIONS...      the cluster's topics (replaces them)
    group-configs [G session=MS interval=MS]
                                   G's own settings as the metadata log has them (no other
                                   group has any; none: no group has any)
    racks NAME=R,R,...             partition p of NAME has its replicas in rack R number p
                                   (`a+b`: in both; no racks until given)
    config session=MS interval=MS max-size=N assignors=a,b min-session=MS max-session=MS
           min-interval=MS max-interval=MS   (a refused one prints its error, nothing changes)
    hb G M E [instance=I] [topics=t,u] [regex=R] [assignor=A] [owned=t0,t1|none]
          [rebalance=MS] [rack=R] [v=V] [why=1]  (a join, E=0, sends owned= empty by default;
                                   why=1 prints a refusal's message)
    advance MS                     move the clock, fire the timers due
    describe G... / list / delete G / timers
    commit G member=M epoch=E [v=N] / fetch G member=M epoch=E
    classic-join G                 a classic JoinGroup (v3) for G: a member at once
    classic-group G gen=N [type=consumer] [protocol=range] [topics=t,u] [session=MS]
                  [subscription=junk] [userdata=TEXT] M=t0,t1 ...
                                   a Stable classic group as its record loads it: members
                                   subscribed to `topics` (default all), with assignments
    classic-describe G             the classic group: state, generation, members' assignments
    cjoin G M [topics=t,u] [owned=t0,t1] [protocols=range,x] [session=MS] [v=V]
          [instance=I] [id=N]
    csync G M gen=N [assign=M:t0,t1/M2:t2] [instance=I] [id=N]
    cheartbeat G M gen=N [instance=I] / cleave G M...
                                   a classic member's JoinGroup (v5 by default; M "-" for
                                   none), SyncGroup, Heartbeat, LeaveGroup, to either core;
                                   `id` is the request id (join 1, sync 2 by default): answers
                                   to other waiting requests print as `classic join #N: ...`
    failover                       a new coordinator replays every record written
    fail                           the append of the previous command's records failed: they
                                   leave the log and both cores undo them (`append_failed`);
                                   any other command first acknowledges the previous records
"""

from __future__ import annotations

import dataclasses
from uuid import NAMESPACE_OID, UUID, uuid5

from replog.common import TopicPartition
from replog.coordinator import consumer_group_records as rec
from replog.coordinator.classic_group_coordinator import ClassicGroupConfig, ClassicGroupCoordinator
from replog.coordinator.classic_group_messages import (
    GroupRecord,
    GroupResult,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    LeaveMember,
    SyncGroupRequest,
)
from replog.coordinator.consumer_group import ConsumerGroup
from replog.coordinator.consumer_group_coordinator import (
    ConsumerGroupConfig,
    ConsumerGroupCoordinator,
    Record,
)
from replog.coordinator.consumer_group_messages import (
    CONSUMER_MEMBER,
    ConsumerGroupHeartbeatRequest,
    NamedTopicPartitions,
)
from replog.coordinator.consumer_member import TP, ConsumerMember, by_topic, flatten
from replog.coordinator.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    Subscription,
    assigned_partitions,
    assignment_to_bytes,
    subscription_to_bytes,
)
from replog.coordinator.group_records import (
    GroupMetadataValue,
    MemberMetadata,
    decode_group_value,
    encode_group_value,
)
from replog.coordinator.offsets_records import GroupMetadataKey
from replog.errors import InvalidConfigError, KafkaError

# The `config` command's short names.
_CONFIG_FIELDS = {
    "session": "session_timeout_ms",
    "interval": "heartbeat_interval_ms",
    "min-session": "min_session_timeout_ms",
    "max-session": "max_session_timeout_ms",
    "min-interval": "min_heartbeat_interval_ms",
    "max-interval": "max_heartbeat_interval_ms",
}


def topic_id(name: str) -> UUID:
    """A fixed id per topic name, so scripts can name topics."""
    return uuid5(NAMESPACE_OID, name)


class ConsumerGroupScenario:
    def __init__(self) -> None:
        self.now_ms = 0
        self._uuid = 0
        self.config = ConsumerGroupConfig()
        self.topics: dict[str, int] = {}
        self.racks: dict[TP, frozenset[str]] = {}
        self.group_configs: dict[str, dict[str, str]] = {}
        self.names: dict[UUID, str] = {}
        self.log: list[Record] = []
        self.out: list[str] = []
        # The previous command's records, not yet acknowledged, and where they start in the log.
        self.inflight: list[Record] = []
        self.inflight_at = 0
        self._new()

    def _new_uuid(self) -> str:
        self._uuid += 1
        return f"gen{self._uuid}"

    def _new(self) -> None:
        self.classic = ClassicGroupCoordinator(
            ClassicGroupConfig(initial_rebalance_delay_ms=0), self._new_uuid
        )
        self.core = ConsumerGroupCoordinator(self.config, self._new_uuid, self.classic)
        self.classic.other_protocol = self.core.yield_to_classic
        self.classic.consumer_groups = self.core
        self.core.set_topics({n: (topic_id(n), c) for n, c in self.topics.items()}, self.racks)
        self.core.set_group_configs(self.group_configs)

    # --- formatting ------------------------------------------------------------------------------

    def parts(self, partitions: frozenset[TP] | rec.TopicPartitions | None) -> str:
        if partitions is None:
            return "-"
        flat = partitions if isinstance(partitions, frozenset) else flatten(partitions)
        shown = sorted(f"{self.names.get(t, str(t))}{p}" for t, p in flat)
        return ",".join(shown) or "none"

    def member_line(self, m: ConsumerMember) -> str:
        revoking = f"|{self.parts(m.pending_revocation)}" if m.pending_revocation else ""
        return f"{m.member_id}:{m.member_epoch}:{m.state.name}[{self.parts(m.assigned)}{revoking}]"

    def summary(self, g: ConsumerGroup) -> str:
        members = " ".join(self.member_line(m) for m in g.members.values())
        return f"{g.state.value} epoch={g.group_epoch} target={g.assignment_epoch} [{members}]"

    def record_line(self, record: Record) -> str:
        if isinstance(record, GroupRecord):
            if record.value is None:
                return f"record classic {record.key.group}: tombstone"
            g = record.value
            members = " ".join(
                f"{m.member_id}[{','.join(f'{t}{p}' for t, p in assigned_partitions(m.assignment))}"
                f" session={m.session_timeout_ms}]"
                for m in g.members
            )
            return (
                f"record classic {record.key.group}: type={g.protocol_type} "
                f"generation={g.generation} protocol={g.protocol} leader={g.leader} {members}"
            )
        key, v = record.key, record.value
        where = key.group + (f"/{key.member}" if key.member else "")
        if v is None:
            kind = {
                3: "epoch",
                4: "topics",
                5: "member",
                6: "target-epoch",
                7: "target",
                8: "current",
            }
            return f"record {kind[key.record_type]} {where}: tombstone"
        if isinstance(v, rec.GroupEpochValue):
            return f"record epoch {where}: {v.epoch}"
        if isinstance(v, rec.PartitionMetadataValue):
            return f"record topics {where}: " + " ".join(
                f"{t.name}={t.partitions}" for t in v.topics
            )
        if isinstance(v, rec.MemberMetadataValue):
            extra = "".join(
                f" {name}={value}"
                for name, value in (
                    ("instance", v.instance_id),
                    ("regex", v.subscribed_topic_regex),
                    ("assignor", v.server_assignor),
                )
                if value is not None
            )
            if v.classic is not None:
                names = ",".join(name for name, _ in v.classic.protocols)
                extra += f" classic=session:{v.classic.session_timeout_ms},protocols:{names}"
            return (
                f"record member {where}: topics={','.join(v.subscribed_topic_names) or '-'} "
                f"rebalance={v.rebalance_timeout_ms}{extra}"
            )
        if isinstance(v, rec.TargetAssignmentEpochValue):
            return f"record target-epoch {where}: {v.assignment_epoch}"
        if isinstance(v, rec.TargetAssignmentMemberValue):
            return f"record target {where}: {self.parts(v.partitions)}"
        revoking = f" revoking={self.parts(v.pending_revocation)}" if v.pending_revocation else ""
        return (
            f"record current {where}: epoch={v.member_epoch} previous={v.previous_member_epoch} "
            f"state={v.state} assigned={self.parts(v.assigned)}{revoking}"
        )

    def show(self, records: list[Record]) -> None:
        for record in records:
            self.log.append(_through_bytes(record))
            self.inflight.append(record)
            self.out.append(self.record_line(record))

    def show_classic_answers(self, result: GroupResult) -> None:
        """Answers to classic requests other than the command's own, by request id."""
        for join in result.joins:
            self.out.append(f"classic join #{join.request_id}: {_error(join.error)}")
        for sync in result.syncs:
            self.out.append(f"classic sync #{sync.request_id}: {_error(sync.error)}")

    # --- commands --------------------------------------------------------------------------------

    def run(self, line: str) -> list[str]:
        words = line.split()
        args = [w for w in words[1:] if "=" not in w]
        options = dict(w.split("=", 1) for w in words[1:] if "=" in w)
        before = {gid: self.summary(g) for gid, g in self.core.groups.items()}
        self.out = []
        if words[0] != "fail":
            self.classic.appended(self.inflight)
            self.core.appended(self.inflight)
            self.inflight, self.inflight_at = [], len(self.log)
        getattr(self, "cmd_" + words[0].replace("-", "_"))(args, options)
        for gid, group in sorted(self.core.groups.items()):
            now = self.summary(group)
            if before.get(gid) != now:
                self.out.append(f"{gid}: {now}")
        for gid in sorted(set(before) - set(self.core.groups)):
            self.out.append(f"{gid}: gone")
        return self.out or ["ok"]

    def cmd_topics(self, args: list[str], options: dict[str, str]) -> None:
        self.topics = {name: int(count) for name, count in options.items()}
        self.names = {topic_id(name): name for name in self.topics}
        self.core.set_topics({n: (topic_id(n), c) for n, c in self.topics.items()}, self.racks)

    def cmd_group_configs(self, args: list[str], options: dict[str, str]) -> None:
        keys = {
            "session": "consumer.session.timeout.ms",
            "interval": "consumer.heartbeat.interval.ms",
        }
        self.group_configs = {args[0]: {keys[k]: v for k, v in options.items()}} if args else {}
        self.core.set_group_configs(self.group_configs)

    def cmd_racks(self, args: list[str], options: dict[str, str]) -> None:
        self.racks = {
            (topic_id(name), p): frozenset(where.split("+"))
            for name, listed in options.items()
            for p, where in enumerate(listed.split(","))
        }
        self.core.set_topics({n: (topic_id(n), c) for n, c in self.topics.items()}, self.racks)

    def cmd_config(self, args: list[str], options: dict[str, str]) -> None:
        fields: dict[str, object] = {}
        for key, value in options.items():
            if key == "assignors":
                fields["assignors"] = tuple(value.split(","))
            elif key == "migration":
                fields["migration_policy"] = value
            else:
                fields[_CONFIG_FIELDS.get(key, key.replace("-", "_"))] = int(value)
        try:
            self.config = dataclasses.replace(self.config, **fields)  # type: ignore[arg-type]
        except InvalidConfigError as error:
            self.out.append(f"config: {error.error_name}: {error}")
            return
        self._new()

    def owned(self, text: str | None, epoch: int) -> rec.TopicPartitions | None:
        if text is None:
            return () if epoch == 0 else None
        if text == "none":
            return ()
        pairs = []
        for item in text.split(","):
            name, partition = item[:-1], int(item[-1])
            pairs.append((topic_id(name), partition))
        return by_topic(pairs)

    def cmd_hb(self, args: list[str], options: dict[str, str]) -> None:
        epoch = int(args[2])
        topics = options.get("topics")
        request = ConsumerGroupHeartbeatRequest(
            group_id=args[0] if args[0] != "-" else "",
            member_id=args[1] if args[1] != "-" else "",
            member_epoch=epoch,
            instance_id=options.get("instance"),
            rack_id=options.get("rack"),
            rebalance_timeout_ms=int(options.get("rebalance", "30000" if epoch == 0 else "-1")),
            subscribed_topic_names=None if topics is None else tuple(topics.split(",")),
            subscribed_topic_regex=options.get("regex"),
            server_assignor=options.get("assignor"),
            owned=self.owned(options.get("owned"), epoch),
            client_id="c",
            client_host="h",
            api_version=int(options.get("v", "1")),
        )
        answer, records = self.core.heartbeat(request, self.now_ms)
        self.show(records)
        self.show_classic_answers(self.core.take_classic_answers())
        if answer.error is not None:
            why = f": {answer.error}" if "why" in options else ""
            self.out.append(f"hb: {answer.error.error_name}{why}")
            return
        shown = "" if answer.assignment is None else f" assignment={self.parts(answer.assignment)}"
        self.out.append(
            f"hb: ok member={answer.member_id} epoch={answer.member_epoch} "
            f"interval={answer.heartbeat_interval_ms}{shown}"
        )

    def cmd_advance(self, args: list[str], options: dict[str, str]) -> None:
        self.now_ms += int(args[0])
        for record in self.classic.tick(self.now_ms).records:
            assert isinstance(record, GroupRecord)
            self.log.append(record)
            self.inflight.append(record)
            self.out.append(f"record classic {record.key.group}: written")
        self.show(self.core.tick(self.now_ms))

    def cmd_timers(self, args: list[str], options: dict[str, str]) -> None:
        for deadline, group, kind, member in self.core.timers():
            self.out.append(f"{kind} {group}/{member} at {deadline}")

    def cmd_describe(self, args: list[str], options: dict[str, str]) -> None:
        for g in self.core.describe(args):
            if g.error is not None:
                self.out.append(f"describe {g.group_id}: {g.error.error_name}")
                continue
            self.out.append(
                f"describe {g.group_id}: {g.state} epoch={g.group_epoch} "
                f"target={g.assignment_epoch} assignor={g.assignor_name}"
            )
            for m in g.members:
                kind = "" if m.member_type == CONSUMER_MEMBER else f" type={m.member_type}"
                self.out.append(
                    f"  {m.member_id}{kind} epoch={m.member_epoch} "
                    f"topics={','.join(m.subscribed_topic_names)} "
                    f"assigned={_named(m.assignment)} target={_named(m.target_assignment)}"
                )

    def cmd_list(self, args: list[str], options: dict[str, str]) -> None:
        for group_id, state in self.core.list_groups():
            self.out.append(f"list {group_id}: {state}")

    def cmd_delete(self, args: list[str], options: dict[str, str]) -> None:
        error, records = self.core.delete(args[0])
        self.show(records)
        self.out.append(f"delete: {_error(error)}")

    def cmd_commit(self, args: list[str], options: dict[str, str]) -> None:
        error = self.core.commit_error(
            args[0],
            options.get("member", ""),
            int(options.get("epoch", "-1")),
            int(options["v"]) if "v" in options else None,
        )
        self.out.append(f"commit: {_error(error)}")

    def cmd_fetch(self, args: list[str], options: dict[str, str]) -> None:
        member = options.get("member")
        error = self.core.fetch_error(args[0], member, int(options.get("epoch", "-1")))
        self.out.append(f"fetch: {_error(error)}")

    def cmd_classic_join(self, args: list[str], options: dict[str, str]) -> None:
        result = self.classic.join(
            # v3: joins at once (no MEMBER_ID_REQUIRED round), so the group has a member.
            JoinGroupRequest(
                args[0], "", "consumer", (("range", b""),), 10_000, 30_000, api_version=3
            ),
            1,
            self.now_ms,
        )
        for record in result.records:
            if isinstance(record, GroupRecord):
                self.log.append(record)
                self.inflight.append(record)
                self.out.append(f"record classic {record.key.group}: written")
            else:
                self.show([record])
        for join in result.joins:
            self.out.append(f"classic join: {_error(join.error)}")
        if not result.joins:
            self.out.append("classic join: waits")

    def cmd_classic_group(self, args: list[str], options: dict[str, str]) -> None:
        generation = int(options.pop("gen"))
        protocol_type = options.pop("type", CONSUMER_PROTOCOL_TYPE)
        protocol = options.pop("protocol", "range")
        topics = tuple(options.pop("topics", ",".join(self.topics)).split(","))
        session_ms = int(options.pop("session", "10000"))
        subscription = subscription_to_bytes(Subscription(topics))
        if options.pop("subscription", None) == "junk":
            subscription = b"\x00"
        user_data = options.pop("userdata", "").encode() or None
        members = tuple(
            MemberMetadata(
                member_id,
                None,
                "c",
                "h",
                30_000,
                session_ms,
                subscription,
                assignment_to_bytes(
                    (
                        TopicPartition(item[:-1], int(item[-1]))
                        for item in assigned.split(",")
                        if assigned != "none"
                    ),
                    user_data,
                ),
            )
            for member_id, assigned in options.items()
        )
        value = GroupMetadataValue(
            protocol_type, generation, protocol, members[0].member_id, 0, members
        )
        record = GroupRecord(GroupMetadataKey(args[0]), value)
        self.classic.replay(record.key, record.value)
        self.log.append(record)
        self.out.append(self.record_line(record))

    def cmd_classic_describe(self, args: list[str], options: dict[str, str]) -> None:
        group = self.classic.groups.get(args[0])
        if group is None:
            self.out.append(f"classic {args[0]}: none")
            return
        self.out.append(
            f"classic {args[0]}: {group.state.value} generation={group.generation} "
            f"protocol={group.protocol_name} leader={group.leader_id}"
        )
        for m in group.members.values():
            assigned = ",".join(f"{t}{p}" for t, p in assigned_partitions(m.assignment))
            self.out.append(
                f"  {m.member_id} session={m.session_timeout_ms} "
                f"protocols={','.join(n for n, _ in m.protocols)} assigned={assigned or 'none'}"
            )
        for deadline, group_id, kind, member in self.classic.timers():
            if group_id == args[0]:
                self.out.append(f"  timer {kind} {member or '-'} at {deadline}")

    def cmd_cjoin(self, args: list[str], options: dict[str, str]) -> None:
        topics = tuple(options.get("topics", ",".join(self.topics)).split(","))
        owned = tuple(
            TopicPartition(item[:-1], int(item[-1]))
            for item in options.get("owned", "").split(",")
            if item
        )
        metadata = subscription_to_bytes(Subscription(topics, owned))
        protocols = tuple((n, metadata) for n in options.get("protocols", "range").split(","))
        request = JoinGroupRequest(
            args[0],
            "" if args[1] == "-" else args[1],
            options.get("type", CONSUMER_PROTOCOL_TYPE),
            protocols,
            int(options.get("session", "10000")),
            30_000,
            client_id="c",
            client_host="h",
            group_instance_id=options.get("instance"),
            api_version=int(options.get("v", "5")),
        )
        request_id = int(options.get("id", "1"))
        result = self.classic.join(request, request_id, self.now_ms)
        self.show(result.records)
        self.show_classic_answers(
            GroupResult(
                [j for j in result.joins if j.request_id != request_id],
                [s for s in result.syncs if s.request_id != request_id],
            )
        )
        for join in (j for j in result.joins if j.request_id == request_id):
            if join.error is not None:
                self.out.append(f"cjoin: {join.error.error_name} member={join.member_id}")
            else:
                self.out.append(
                    f"cjoin: ok member={join.member_id} generation={join.generation_id} "
                    f"protocol={join.protocol_type}/{join.protocol_name} "
                    f"leader={join.leader or '-'}"
                )
        if not any(j.request_id == request_id for j in result.joins):
            self.out.append("cjoin: waits")

    def cmd_csync(self, args: list[str], options: dict[str, str]) -> None:
        assignments = tuple(
            (
                member,
                assignment_to_bytes(
                    TopicPartition(i[:-1], int(i[-1])) for i in parts.split(",") if i
                ),
            )
            for member, parts in (
                item.split(":", 1) for item in options.get("assign", "").split("/") if item
            )
        )
        request = SyncGroupRequest(
            args[0],
            args[1],
            int(options["gen"]),
            options.get("instance"),
            CONSUMER_PROTOCOL_TYPE,
            "range",
            assignments,
        )
        request_id = int(options.get("id", "2"))
        result = self.classic.sync(request, request_id, self.now_ms)
        self.show(result.records)
        self.show_classic_answers(
            GroupResult(
                [j for j in result.joins if j.request_id != request_id],
                [s for s in result.syncs if s.request_id != request_id],
            )
        )
        if not any(s.request_id == request_id for s in result.syncs):
            self.out.append("csync: waits")
        for sync in (s for s in result.syncs if s.request_id == request_id):
            if sync.error is not None:
                self.out.append(f"csync: {sync.error.error_name}")
            else:
                parts = ",".join(f"{t}{p}" for t, p in assigned_partitions(sync.assignment))
                self.out.append(f"csync: ok assignment={parts or 'none'}")

    def cmd_cheartbeat(self, args: list[str], options: dict[str, str]) -> None:
        error = self.classic.heartbeat(
            HeartbeatRequest(args[0], args[1], int(options["gen"]), options.get("instance")),
            self.now_ms,
        )
        self.out.append(f"cheartbeat: {_error(error)}")

    def cmd_cleave(self, args: list[str], options: dict[str, str]) -> None:
        answer, result = self.classic.leave(
            LeaveGroupRequest(args[0], tuple(LeaveMember(m) for m in args[1:])), self.now_ms
        )
        self.show(result.records)
        members = " ".join(f"{m.member_id}:{_error(m.error)}" for m in answer.members)
        self.out.append(f"cleave: {_error(answer.error)} {members}")

    def cmd_fail(self, args: list[str], options: dict[str, str]) -> None:
        failed, self.inflight = self.inflight, []
        del self.log[self.inflight_at :]
        self.out.append(f"failed {len(failed)} records")
        undone = self.classic.append_failed(failed, self.now_ms)
        self.core.append_failed(failed, self.now_ms)
        self.show_classic_answers(undone)

    def cmd_failover(self, args: list[str], options: dict[str, str]) -> None:
        self._new()
        for record in self.log:
            if isinstance(record, GroupRecord):
                self.classic.replay(record.key, record.value)
            else:
                self.core.replay(record.key, record.value)
        self.core.loaded(self.now_ms)
        self.out.append(f"replayed {len(self.log)} records")


def _named(partitions: NamedTopicPartitions) -> str:
    """Partitions as described, by the names the coordinator gives them."""
    return ",".join(f"{name}{p}" for _, name, ps in partitions for p in ps) or "none"


def _error(error: KafkaError | None) -> str:
    return "ok" if error is None else error.error_name


def _through_bytes(record: Record) -> Record:
    """The record as the log keeps it: encoded, then decoded."""
    if isinstance(record, GroupRecord):
        value = (
            None if record.value is None else decode_group_value(encode_group_value(record.value))
        )
        return GroupRecord(record.key, value)
    key_bytes = rec.encode_consumer_group_key(record.key)
    key = rec.decode_consumer_group_key(record.key.record_type, key_bytes)
    if record.value is None:
        return rec.ConsumerGroupRecord(key, None)
    decoded = rec.decode_consumer_group_value(
        key.record_type, rec.encode_consumer_group_value(record.value)
    )
    assert decoded == record.value, (decoded, record.value)
    return rec.ConsumerGroupRecord(key, decoded)
