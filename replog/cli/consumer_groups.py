"""`replog consumer-groups`: list consumer groups and describe one, like
kafka-consumer-groups.sh.

    replog consumer-groups --list [--json] [--bootstrap-server HOST:PORT,... | --data-dir DIR]
    replog consumer-groups --describe --group G [--offsets | --members | --state] [--verbose]
        [--json] [...]
    replog consumer-groups --delete --group G [--json] [...]
    replog consumer-groups --reset-offsets --group G (--topic T[:P,...] ... | --all-topics)
        (--to-earliest | --to-latest | --to-offset N | --to-datetime DT | --shift-by N)
        [--dry-run | --execute] [--json] [...]

`--list` prints each group id on a line of its own (with `--json`: a list of
{"group", "state", "protocolType"}). `--describe` prints Kafka's table, one line per partition
the group committed or a member owns, and one per member that owns none:

    GROUP  TOPIC   PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG  CONSUMER-ID  HOST  CLIENT-ID
    g      orders  0          10              12              2    c1-4f2a...   /h    c1

With `--json`, the lines as a list of {"group", "topic", "partition", "currentOffset",
"logEndOffset", "lag", "consumerId", "host", "clientId"} (null where the table has "-").
`--members`: GROUP CONSUMER-ID [GROUP-INSTANCE-ID] HOST CLIENT-ID #PARTITIONS (the instance
column when a member has one), with `--verbose` Kafka's CURRENT-EPOCH CURRENT-ASSIGNMENT
TARGET-EPOCH TARGET-ASSIGNMENT (a consumer-protocol group's member epochs, assignments as
`t:0,1;u:2`, and the group's target assignment epoch; "-" for a classic group) and UPGRADED
(whether each member uses the consumer protocol) when the group holds members of both
protocols; with `--json` ({"group", "consumerId", "groupInstanceId", "host", "clientId",
"partitions", "memberType"}, `--verbose` adding "currentEpoch", "currentAssignment",
"targetEpoch", "targetAssignment" as [{"topic", "partition"}]). `--state`: GROUP
COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE #MEMBERS, `--verbose` adding GROUP-EPOCH and
TARGET-ASSIGNMENT-EPOCH before #MEMBERS ({"group", "coordinator", "coordinatorId",
"assignmentStrategy", "state", "members"}, `--verbose` adding "groupEpoch",
"targetAssignmentEpoch"). `--delete` deletes
an Empty group and its committed offsets: Kafka's "Deletion of requested consumer groups ('G')
was successful.", or the error (NON_EMPTY_GROUP while it has members; exit code 1); with
`--json`, [{"group", "error"}]. `--reset-offsets` moves an inactive group's committed offsets:
to the earliest or latest offset, a given one, the first at a time, or shifted by N, shown
with `--dry-run` (the default) and written with `--execute`; refused while the group has
members.

Rules:
- `--bootstrap-server` names brokers' Kafka listeners; every group call is one of Kafka's
  group APIs: FindCoordinator to the first bootstrap server that answers, the group's calls
  to the coordinator's Kafka listener it names. A port that is no Kafka listener
  (a gRPC listener, a metrics endpoint) ends the command at once with NotAKafkaListenerError
  naming what answered; only a bootstrap server that is unreachable or silent is skipped.
- `--list` asks every unfenced broker for the groups it coordinates (a group lives on the
  leader of its `__consumer_offsets` partition); a broker that does not answer is one stderr
  line naming it, the others are still listed, and the exit code is 1.
- `--describe` asks the group's coordinator for the group (DescribeGroups, or for a group of
  KIP-848's consumer protocol, which DescribeGroups answers Dead, ConsumerGroupDescribe) and
  its committed offsets (OffsetFetch); the log-end offset is each partition's high watermark
  (ListOffsets latest); LAG is LOG-END-OFFSET - CURRENT-OFFSET, "-" without a commit. Owners
  come from the members' assignments (the "consumer" protocol's bytes, or the partitions the
  consumer protocol's coordinator gives each member); `--state` shows a consumer-protocol
  group's server assignor as its strategy; a group without members prints
  Kafka's line "Consumer group 'G' has no active members." first (not with `--json`).
- A group that does not exist is an error naming it (exit code 1).
- A coordinator not ready yet (COORDINATOR_NOT_AVAILABLE while a fresh cluster creates
  `__consumer_offsets`, COORDINATOR_LOAD_IN_PROGRESS while it loads, NOT_COORDINATOR after a
  move) is asked again, the coordinator found anew, until `--timeout` (ms, default 30000, as
  kafka-consumer-groups.sh's); a wait past a few seconds says on stderr what it waits for.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from replog.cli.arguments import add_documented_command, positive_ms
from replog.cli.client_connection import (
    add_client_connection_arguments,
    client_config,
    keys_named,
)
from replog.cli.coordinator_wait import TIMEOUT_MS_DEFAULT, WAITED_OUT, CoordinatorWait
from replog.cli.reset_offsets import (
    HEADER as RESET_HEADER,
)
from replog.cli.reset_offsets import (
    ResetStrategy,
    parse_datetime,
    parse_topics,
    print_dry_run_note,
    reset_offsets,
)
from replog.cli.table import print_table
from replog.coordinator.consumer_group_messages import CLASSIC_MEMBER, CONSUMER_MEMBER
from replog.errors import (
    GroupIdNotFoundError,
    KafkaError,
    NetworkError,
    ReplogError,
    RequestTimedOutError,
)

if TYPE_CHECKING:
    from replog.wire.kafka_coordinator_client import KafkaCoordinatorClient

REQUEST_TIMEOUT_MS = 10_000
T = TypeVar("T")
HEADER = (
    "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
    "HOST", "CLIENT-ID",
)  # fmt: skip
JSON_KEYS = (
    "group", "topic", "partition", "currentOffset", "logEndOffset", "lag", "consumerId", "host",
    "clientId",
)  # fmt: skip
MEMBERS_HEADER = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
VERBOSE_MEMBERS_HEADER = (
    "CURRENT-EPOCH",
    "CURRENT-ASSIGNMENT",
    "TARGET-EPOCH",
    "TARGET-ASSIGNMENT",
)
STATE_HEADER = ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")
VERBOSE_STATE_HEADER = ("GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH")


class Member(NamedTuple):
    """A member as the tables show it; the epochs and target are a consumer-protocol group's
    (None in a classic group)."""

    member_id: str
    host: str
    client_id: str
    owned: list[tuple[str, int]]
    instance_id: str | None = None
    member_type: str = CLASSIC_MEMBER  # or CONSUMER_MEMBER
    current_epoch: int | None = None
    target: list[tuple[str, int]] | None = None
    target_epoch: int | None = None

    @property
    def upgraded(self) -> bool | None:
        """Kafka's UPGRADED column: whether a consumer-protocol group's member uses that
        protocol (None in a classic group)."""
        return None if self.current_epoch is None else self.member_type == CONSUMER_MEMBER


Row = tuple[str, str | None, int | None, int | None, int | None, int | None, str | None,
            str | None, str | None]  # fmt: skip


def describe_rows(
    group_id: str,
    members: Sequence[Member],
    committed: Mapping[tuple[str, int], int | None],
    log_end: Mapping[tuple[str, int], int | None],
) -> list[Row]:
    """The describe table's lines (module docstring): partitions in (topic, partition) order,
    then members owning none."""
    owner = {tp: (m.member_id, m.host, m.client_id) for m in members for tp in m.owned}
    rows: list[Row] = []
    for tp in sorted(set(committed) | set(owner)):
        current = committed.get(tp)
        end = log_end.get(tp)
        lag = None if current is None or end is None else max(0, end - current)
        member, host, client = owner.get(tp, (None, None, None))
        rows.append((group_id, tp[0], tp[1], current, end, lag, member, host, client))
    for m in members:
        if not m.owned:
            rows.append((group_id, None, None, None, None, None, m.member_id, m.host, m.client_id))
    return rows


def table(rows: Sequence[Row]) -> list[list[str]]:
    return [list(HEADER)] + [["-" if v is None else str(v) for v in row] for row in rows]


# --- the shell -----------------------------------------------------------------------------------


async def _brokers(config: Mapping[str, object]) -> list[tuple[int, str]]:
    from replog.client.admin import Admin
    from replog.net_address import format_host_port

    async with Admin(dict(config)) as admin:
        cluster = await admin.describe_cluster()
    return sorted(
        (b.broker_id, format_host_port(b.host, b.port)) for b in cluster.brokers if not b.fenced
    )


async def list_groups(
    config: Mapping[str, object], timeout_ms: int = TIMEOUT_MS_DEFAULT
) -> tuple[list[Any], list[str]]:
    """Every group of every unfenced broker, by id, and a line per broker that failed."""
    groups: list[Any] = []
    failures: list[str] = []
    for broker_id, address in await _brokers(config):
        async with _client(config, address) as client:
            try:
                groups += await waited_out(
                    f"listing the groups of broker {broker_id}", timeout_ms, client.list_groups
                )
            except ReplogError as error:
                failures.append(f"broker {broker_id} at {address}: {error}")
    return sorted(groups, key=lambda g: g.group_id), failures


async def waited_out(what: str, timeout_ms: int, call: Callable[[], Awaitable[T]]) -> T:
    """`call()`'s answer, asked again while the group coordinator is not ready, until
    `timeout_ms` (`coordinator_wait`)."""
    from replog.clock import monotonic_ms

    wait = CoordinatorWait(what, now_ms=monotonic_ms(), timeout_ms=timeout_ms)
    while True:
        try:
            return await call()
        except ReplogError as error:
            delay_ms = wait.failed(error, monotonic_ms())
        if (note := wait.note(monotonic_ms())) is not None:
            print(f"replog consumer-groups: {note}", file=sys.stderr, flush=True)
        await asyncio.sleep(delay_ms / 1000)


def _client(config: Mapping[str, object], address: str) -> KafkaCoordinatorClient:
    """A coordinator client on the Kafka listener at `address`, named by the command's
    `client.id`."""
    from replog.client.config import security_sasl
    from replog.client.tls_connection import security_ssl_context
    from replog.wire.kafka_coordinator_client import KafkaCoordinatorClient

    return KafkaCoordinatorClient(
        address,
        request_timeout_ms=REQUEST_TIMEOUT_MS,
        client_id=str(config.get("client.id", "replog-consumer-groups")),
        tls=security_ssl_context(config),
        sasl=security_sasl(config),
    )


@dataclass(frozen=True)
class Described:
    group: Any  # classic_group_messages.DescribedGroup
    coordinator: tuple[int, str]  # node id, host:port
    members: list[Member]
    rows: list[Row]
    epochs: tuple[int, int] | None = None  # a consumer-protocol group's (group, target)


async def _coordinator(config: Mapping[str, object], group_id: str) -> tuple[int, str]:
    """(node id, Kafka listener) of the group's coordinator, as the first bootstrap server that
    answers FindCoordinator says; one that is no Kafka listener stops the command at once."""
    from replog.admin.bootstrap import parse_bootstrap

    key = keys_named(config, "bootstrap.servers")[0]
    failures: list[str] = []
    for address in parse_bootstrap(str(config[key]), what=key).addresses:
        async with _client(config, address) as any_:
            try:
                return await any_.find_coordinator(group_id)
            except (NetworkError, RequestTimedOutError) as error:
                failures.append(str(error))
    raise NetworkError("no bootstrap server answered FindCoordinator: " + "; ".join(failures))


async def describe(config: Mapping[str, object], group_id: str) -> Described:
    """The group, its coordinator, its members and the offsets table's lines."""
    from replog.client.admin import Admin
    from replog.client.admin_results import OffsetSpec
    from replog.common import TopicPartition
    from replog.coordinator.consumer_protocol import CONSUMER_PROTOCOL_TYPE, assigned_partitions

    coordinator = await _coordinator(config, group_id)
    async with _client(config, coordinator[1]) as client:
        group = await client.describe_group(group_id)
        modern = None
        if group.state == "Dead":
            try:
                modern = await client.describe_consumer_group(group_id)
            except GroupIdNotFoundError:
                raise ReplogError(f"consumer group {group_id!r} does not exist") from None
        offsets = await client.offset_fetch(group_id, None)
    epochs = None
    if modern is not None:
        group, members = _consumer_protocol_group(modern)
        epochs = (modern.group_epoch, modern.assignment_epoch)
    else:
        members = [
            Member(
                m.member_id,
                f"/{m.client_host}" if m.client_host else "",
                m.client_id,
                assigned_partitions(m.assignment)
                if group.protocol_type == CONSUMER_PROTOCOL_TYPE
                else [],
                m.group_instance_id,
                m.member_type,
            )
            for m in group.members
        ]
    committed = {
        (tp.topic, tp.partition): None if o is None else o.offset for tp, o in offsets.items()
    }
    wanted = sorted(set(committed) | {tp for m in members for tp in m.owned})
    log_end: dict[tuple[str, int], int | None] = {}
    if wanted:
        async with Admin(dict(config)) as admin:
            found = await admin.list_offsets(
                {TopicPartition(t, p): OffsetSpec.LATEST for t, p in wanted}
            )
        log_end = {
            (tp.topic, tp.partition): None if o is None else o.offset for tp, o in found.items()
        }
    rows = describe_rows(group_id, members, committed, log_end)
    return Described(group, coordinator, members, rows, epochs)


def _consumer_protocol_group(described: Any) -> tuple[Any, list[Member]]:
    """A consumer-protocol group (`DescribedConsumerGroup`) in DescribeGroups' shape, with its
    members' owned partitions by topic name."""
    from replog.coordinator import classic_group_messages as gm
    from replog.coordinator.consumer_protocol import CONSUMER_PROTOCOL_TYPE

    group = gm.DescribedGroup(
        described.group_id,
        None,
        described.state,
        CONSUMER_PROTOCOL_TYPE,
        described.assignor_name,
        tuple(
            gm.DescribedMember(
                m.member_id, m.instance_id, m.client_id, m.client_host.lstrip("/"), b"", b""
            )
            for m in described.members
        ),
    )
    members = [
        Member(
            m.member_id,
            m.client_host,
            m.client_id,
            _partitions(m.assignment),
            m.instance_id,
            m.member_type,
            m.member_epoch,
            _partitions(m.target_assignment),
            described.assignment_epoch,
        )
        for m in described.members
    ]
    return group, members


def _partitions(named: Any) -> list[tuple[str, int]]:
    """(topic, partition)s of a described member's assignment (NamedTopicPartitions)."""
    return [(name, p) for _, name, ps in named for p in ps]


async def delete(
    config: Mapping[str, object], group_id: str
) -> list[tuple[str, KafkaError | None]]:
    """The group's deletion; a coordinator error of it is raised (`waited_out` asks again)."""
    _, address = await _coordinator(config, group_id)
    async with _client(config, address) as client:
        results = await client.delete_groups([group_id])
    for _, error in results:
        if isinstance(error, WAITED_OUT):
            raise error
    return results


def assignment_text(partitions: Sequence[tuple[str, int]] | None) -> str:
    """Kafka's assignment column: `t:0,1;u:2` (topics and partitions sorted), "-" if none."""
    if not partitions:
        return "-"
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return ";".join(f"{t}:{','.join(map(str, sorted(ps)))}" for t, ps in sorted(by_topic.items()))


def _text(value: object) -> str:
    return "-" if value is None or value == "" else str(value)


def members_rows(
    group_id: str, members: Sequence[Member], *, verbose: bool = False
) -> list[list[str]]:
    """`--members`: one line per member, header first, in Kafka's columns (module
    docstring): GROUP-INSTANCE-ID when a member has one, UPGRADED (verbose) when the group holds
    members of both protocols."""
    instances = any(m.instance_id for m in members)
    upgraded = {m.upgraded for m in members}
    mixed = verbose and True in upgraded and False in upgraded
    header = list(MEMBERS_HEADER)
    if instances:
        header.insert(2, "GROUP-INSTANCE-ID")
    if verbose:
        header += VERBOSE_MEMBERS_HEADER
    if mixed:
        header.append("UPGRADED")
    lines = [header]
    for m in members:
        line = [group_id, m.member_id, _text(m.host), _text(m.client_id), str(len(m.owned))]
        if instances:
            line.insert(2, _text(m.instance_id))
        if verbose:
            line += [
                _text(m.current_epoch),
                assignment_text(m.owned),
                _text(m.target_epoch),
                assignment_text(m.target),
            ]
        if mixed:
            line.append(_text(None if m.upgraded is None else str(m.upgraded).lower()))
        lines.append(line)
    return lines


def members_json(group_id: str, members: Sequence[Member], *, verbose: bool) -> list[Any]:
    """`--members --json`: the table's lines as objects (module docstring)."""

    def listed(partitions: Sequence[tuple[str, int]] | None) -> list[Any] | None:
        if partitions is None:
            return None
        return [{"topic": t, "partition": p} for t, p in sorted(partitions)]

    found: list[Any] = []
    for m in members:
        member: dict[str, Any] = {
            "group": group_id,
            "consumerId": m.member_id,
            "groupInstanceId": m.instance_id,
            "host": m.host or None,
            "clientId": m.client_id or None,
            "partitions": len(m.owned),
            "memberType": m.member_type,
        }
        if verbose:
            member |= {
                "currentEpoch": m.current_epoch,
                "currentAssignment": listed(m.owned),
                "targetEpoch": m.target_epoch,
                "targetAssignment": listed(m.target),
            }
        found.append(member)
    return found


def state_row(described: Described, *, verbose: bool = False) -> list[str]:
    """`--state`: the group's one line (Kafka's columns)."""
    node_id, address = described.coordinator
    group = described.group
    epochs = [_text(e) for e in described.epochs or (None, None)] if verbose else []
    return [
        group.group_id,
        f"{address} ({node_id})",
        group.protocol_data or "-",
        group.state,
        *epochs,
        str(len(group.members)),
    ]


def run(args: argparse.Namespace) -> int:
    config = client_config(
        args,
        kind="admin",
        props_option="command_property",
        defaults={"client.id": "replog-consumer-groups"},
    )
    timeout_ms = args.timeout
    if args.list:
        groups, failures = asyncio.run(list_groups(config, timeout_ms))
        for failure in failures:
            print(f"replog consumer-groups: {failure}", file=sys.stderr)
        if args.json:
            listed = [
                {"group": g.group_id, "state": g.state, "protocolType": g.protocol_type}
                for g in groups
            ]
            print(json.dumps(listed, separators=(",", ":")))
        else:
            for g in groups:
                print(g.group_id)
        return 1 if failures else 0
    if args.group is None:
        action = "delete" if args.delete else "reset-offsets" if args.reset_offsets else "describe"
        raise ReplogError(f"--{action} needs --group G")
    if args.delete:
        return run_delete(config, args.group, args.json, timeout_ms)
    if args.reset_offsets:
        return run_reset(config, args)
    described = asyncio.run(
        waited_out(
            f"describing group '{args.group}'",
            timeout_ms,
            lambda: describe(config, args.group),
        )
    )
    group = described.group
    verbose = args.verbose_columns
    if args.state:
        row = state_row(described, verbose=verbose)
        if args.json:
            node_id, address = described.coordinator
            state: dict[str, Any] = {
                "group": group.group_id,
                "coordinator": address,
                "coordinatorId": node_id,
                "assignmentStrategy": group.protocol_data or None,
                "state": group.state,
                "members": len(group.members),
            }
            if verbose:
                group_epoch, target_epoch = described.epochs or (None, None)
                state |= {"groupEpoch": group_epoch, "targetAssignmentEpoch": target_epoch}
            print(json.dumps(state))
        else:
            header = list(STATE_HEADER)
            if verbose:
                header[-1:-1] = VERBOSE_STATE_HEADER
            print()
            print_table([header, row])
        return 0
    if args.json:
        if args.members:
            print(json.dumps(members_json(group.group_id, described.members, verbose=verbose)))
        else:
            print(json.dumps([dict(zip(JSON_KEYS, r, strict=True)) for r in described.rows]))
        return 0
    if not group.members:
        print(f"\nConsumer group '{group.group_id}' has no active members.\n")
    else:
        print()
    print_table(
        members_rows(group.group_id, described.members, verbose=verbose)
        if args.members
        else table(described.rows)
    )
    return 0


def run_delete(config: Mapping[str, object], group_id: str, as_json: bool, timeout_ms: int) -> int:
    results = asyncio.run(
        waited_out(f"deleting group '{group_id}'", timeout_ms, lambda: delete(config, group_id))
    )
    failed = [(g, e) for g, e in results if e is not None]
    if as_json:
        print(
            json.dumps(
                [{"group": g, "error": None if e is None else e.error_name} for g, e in results]
            )
        )
    elif failed:
        print("Deletion of some consumer groups failed:")
        for g, e in failed:
            assert e is not None
            print(f"* Group '{g}' could not be deleted due to: {e.error_name}: {e}")
    else:
        names = ", ".join(f"'{g}'" for g, _ in results)
        print(f"Deletion of requested consumer groups ({names}) was successful.")
    return 1 if failed else 0


def _strategy(args: argparse.Namespace) -> ResetStrategy:
    """The one --to-*/--shift-by option given, as a ResetStrategy."""
    if args.to_earliest:
        return ResetStrategy("earliest")
    if args.to_latest:
        return ResetStrategy("latest")
    if args.to_offset is not None:
        return ResetStrategy("offset", args.to_offset)
    if args.to_datetime is not None:
        return ResetStrategy("datetime", parse_datetime(args.to_datetime))
    if args.shift_by is not None:
        return ResetStrategy("shift", args.shift_by)
    raise ReplogError(
        "--reset-offsets needs one of --to-earliest, --to-latest, --to-offset, --to-datetime, "
        "--shift-by"
    )


def run_reset(config: Mapping[str, object], args: argparse.Namespace) -> int:
    strategy = _strategy(args)
    if bool(args.topic) == args.all_topics:
        raise ReplogError("--reset-offsets needs --topic T (repeatable) or --all-topics")
    topics = None if args.all_topics else parse_topics(args.topic)
    if not args.execute and not args.dry_run:
        print_dry_run_note()

    async def reset() -> dict[tuple[str, int], int]:
        coordinator = await _coordinator(config, args.group)
        return await reset_offsets(
            config,
            args.group,
            topics,
            strategy,
            execute=args.execute,
            coordinator=coordinator,
            request_timeout_ms=REQUEST_TIMEOUT_MS,
        )

    offsets = asyncio.run(
        waited_out(f"resetting the offsets of group '{args.group}'", args.timeout, reset)
    )
    if args.json:
        rows = [
            {"group": args.group, "topic": t, "partition": p, "newOffset": o}
            for (t, p), o in sorted(offsets.items())
        ]
        print(json.dumps(rows))
        return 0
    print()
    print_table(
        [list(RESET_HEADER)]
        + [[args.group, t, str(p), str(o)] for (t, p), o in sorted(offsets.items())]
    )
    return 0


def register(commands: Any) -> None:
    parser = add_documented_command(commands, "consumer-groups", __doc__)
    parser.set_defaults(run=run, command_property=None)
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--list", action="store_true", help="list every consumer group")
    what.add_argument("--describe", action="store_true", help="describe the group of --group")
    what.add_argument(
        "--delete", action="store_true", help="delete the group of --group and its offsets"
    )
    what.add_argument(
        "--reset-offsets",
        action="store_true",
        help="move the committed offsets of the group of --group (it must have no members)",
    )
    parser.add_argument("--group", metavar="G", help="the consumer group to act on")
    parser.add_argument(
        "--topic",
        action="append",
        metavar="T[:P,P...]",
        help="--reset-offsets: a topic (all its partitions, or those listed); repeatable",
    )
    parser.add_argument(
        "--all-topics",
        action="store_true",
        help="--reset-offsets: every partition the group has committed offsets for",
    )
    to = parser.add_mutually_exclusive_group()
    to.add_argument("--to-earliest", action="store_true", help="to the log start offsets")
    to.add_argument("--to-latest", action="store_true", help="to the high watermarks")
    to.add_argument("--to-offset", type=int, metavar="N", help="to offset N (clamped)")
    to.add_argument(
        "--to-datetime",
        metavar="DT",
        help="to the first offset at or after DT (YYYY-MM-DDTHH:mm:SS.sss[Z|+hh:mm])",
    )
    to.add_argument("--shift-by", type=int, metavar="N", help="by N from the committed offset")
    run_mode = parser.add_mutually_exclusive_group()
    run_mode.add_argument("--dry-run", action="store_true", help="only show the new offsets")
    run_mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument(
        "--offsets", action="store_true", help="--describe: partitions and lag (the default)"
    )
    shown.add_argument("--members", action="store_true", help="--describe: one line per member")
    shown.add_argument("--state", action="store_true", help="--describe: the group's state")
    parser.add_argument(
        "--verbose",
        dest="verbose_columns",
        action="store_true",
        help="--describe --members/--state: Kafka's epoch and assignment columns",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--timeout",
        type=positive_ms,
        default=TIMEOUT_MS_DEFAULT,
        metavar="MS",
        help="how long to wait for the group coordinator to be ready, in milliseconds "
        f"(a fresh cluster creates and loads __consumer_offsets first; default: "
        f"{TIMEOUT_MS_DEFAULT})",
    )
    add_client_connection_arguments(parser)
