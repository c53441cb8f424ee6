"""`replog consumer-groups`: list consumer groups and describe one, like
kafka-consumer-groups.sh.

    replog consumer-groups --list [--json] [--bootstrap-server HOST:PORT,... | --data-dir DIR]
    replog consumer-groups --describe --group G [--offsets | --members | --state] [--json] [...]
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
`--members`: GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS ({"group", "consumerId", "host",
"clientId", "partitions"}); `--state`: GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE
#MEMBERS ({"group", "coordinator", "coordinatorId", "assignmentStrategy", "state",
"members"}). `--delete` deletes
an Empty group and its committed offsets: Kafka's "Deletion of requested consumer groups ('G')
was successful.", or the error (NON_EMPTY_GROUP while it has members; exit code 1); with
`--json`, [{"group", "error"}]. `--reset-offsets` moves an inactive group's committed offsets:
to the earliest or latest offset, a given one, the first at a time, or shifted by N, shown
with `--dry-run` (the default) and written with `--execute`; refused while the group has
members.

Rules:
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
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from replog.cli.arguments import add_documented_command
from replog.cli.client_connection import add_client_connection_arguments, client_config
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
from replog.errors import GroupIdNotFoundError, KafkaError, ReplogError

REQUEST_TIMEOUT_MS = 10_000
HEADER = (
    "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
    "HOST", "CLIENT-ID",
)  # fmt: skip
JSON_KEYS = (
    "group", "topic", "partition", "currentOffset", "logEndOffset", "lag", "consumerId", "host",
    "clientId",
)  # fmt: skip
MEMBERS_HEADER = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
STATE_HEADER = ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")
# A member as the tables show it: member id, host, client id, owned (topic, partition)s.
Member = tuple[str, str, str, list[tuple[str, int]]]
Row = tuple[str, str | None, int | None, int | None, int | None, int | None, str | None,
            str | None, str | None]  # fmt: skip


def describe_rows(
    group_id: str,
    members: Sequence[tuple[str, str, str, Sequence[tuple[str, int]]]],
    committed: Mapping[tuple[str, int], int | None],
    log_end: Mapping[tuple[str, int], int | None],
) -> list[Row]:
    """The describe table's lines (module docstring): `members` as (member id, host, client id,
    owned partitions); partitions in (topic, partition) order, then members owning none."""
    owner = {tp: (m, h, c) for m, h, c, owned in members for tp in owned}
    rows: list[Row] = []
    for tp in sorted(set(committed) | set(owner)):
        current = committed.get(tp)
        end = log_end.get(tp)
        lag = None if current is None or end is None else max(0, end - current)
        member, host, client = owner.get(tp, (None, None, None))
        rows.append((group_id, tp[0], tp[1], current, end, lag, member, host, client))
    for member_id, host, client_id, owned in members:
        if not owned:
            rows.append((group_id, None, None, None, None, None, member_id, host, client_id))
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


async def list_groups(config: Mapping[str, object]) -> tuple[list[Any], list[str]]:
    """Every group of every unfenced broker, by id, and a line per broker that failed."""
    from replog.wire.coordinator_client import CoordinatorClient

    groups: list[Any] = []
    failures: list[str] = []
    for broker_id, address in await _brokers(config):
        async with CoordinatorClient(address, request_timeout_ms=REQUEST_TIMEOUT_MS) as client:
            try:
                groups += await client.list_groups()
            except ReplogError as error:
                failures.append(f"broker {broker_id} at {address}: {error}")
    return sorted(groups, key=lambda g: g.group_id), failures


@dataclass(frozen=True)
class Described:
    group: Any  # classic_group_messages.DescribedGroup
    coordinator: tuple[int, str]  # node id, host:port
    members: list[Member]
    rows: list[Row]


async def _coordinator(config: Mapping[str, object], group_id: str) -> tuple[int, str]:
    from replog.wire.coordinator_client import CoordinatorClient

    brokers = await _brokers(config)
    if not brokers:
        raise ReplogError("the cluster has no unfenced broker to ask")
    async with CoordinatorClient(brokers[0][1], request_timeout_ms=REQUEST_TIMEOUT_MS) as any_:
        return await any_.find_coordinator(group_id)


async def describe(config: Mapping[str, object], group_id: str) -> Described:
    """The group, its coordinator, its members and the offsets table's lines."""
    from replog.client.admin import Admin
    from replog.client.admin_results import OffsetSpec
    from replog.common import TopicPartition
    from replog.coordinator.consumer_protocol import CONSUMER_PROTOCOL_TYPE, assigned_partitions
    from replog.wire.coordinator_client import CoordinatorClient

    coordinator = await _coordinator(config, group_id)
    async with CoordinatorClient(coordinator[1], request_timeout_ms=REQUEST_TIMEOUT_MS) as client:
        group = await client.describe_group(group_id)
        modern = None
        if group.state == "Dead":
            try:
                modern = await client.describe_consumer_group(group_id)
            except GroupIdNotFoundError:
                raise ReplogError(f"consumer group {group_id!r} does not exist") from None
        offsets = await client.offset_fetch(group_id, None)
    if modern is not None:
        group, members = _consumer_protocol_group(modern)
    else:
        members = [
            (
                m.member_id,
                f"/{m.client_host}" if m.client_host else "",
                m.client_id,
                assigned_partitions(m.assignment)
                if group.protocol_type == CONSUMER_PROTOCOL_TYPE
                else [],
            )
            for m in group.members
        ]
    committed = {
        (tp.topic, tp.partition): None if o is None else o.offset for tp, o in offsets.items()
    }
    wanted = sorted(set(committed) | {tp for m in members for tp in m[3]})
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
    return Described(group, coordinator, members, rows)


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
    members: list[Member] = [
        (
            m.member_id,
            m.client_host,
            m.client_id,
            [(name, p) for _, name, ps in m.assignment for p in ps],
        )
        for m in described.members
    ]
    return group, members


async def delete(
    config: Mapping[str, object], group_id: str
) -> list[tuple[str, KafkaError | None]]:
    from replog.wire.coordinator_client import CoordinatorClient

    _, address = await _coordinator(config, group_id)
    async with CoordinatorClient(address, request_timeout_ms=REQUEST_TIMEOUT_MS) as client:
        return await client.delete_groups([group_id])


def members_rows(group_id: str, members: Sequence[Member]) -> list[list[str]]:
    """`--members`: one line per member, header first."""
    return [list(MEMBERS_HEADER)] + [
        [group_id, m, h or "-", c or "-", str(len(owned))] for m, h, c, owned in members
    ]


def state_row(described: Described) -> list[str]:
    """`--state`: the group's one line (Kafka's columns)."""
    node_id, address = described.coordinator
    group = described.group
    return [
        group.group_id,
        f"{address} ({node_id})",
        group.protocol_data or "-",
        group.state,
        str(len(group.members)),
    ]


def run(args: argparse.Namespace) -> int:
    config = client_config(
        args,
        file_option="command_config",
        props_option="command_property",
        defaults={"client.id": "replog-consumer-groups"},
    )
    if args.list:
        groups, failures = asyncio.run(list_groups(config))
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
        return run_delete(config, args.group, args.json)
    if args.reset_offsets:
        return run_reset(config, args)
    described = asyncio.run(describe(config, args.group))
    group = described.group
    if args.state:
        row = state_row(described)
        if args.json:
            node_id, address = described.coordinator
            state = {
                "group": group.group_id,
                "coordinator": address,
                "coordinatorId": node_id,
                "assignmentStrategy": group.protocol_data or None,
                "state": group.state,
                "members": len(group.members),
            }
            print(json.dumps(state))
        else:
            print()
            print_table([list(STATE_HEADER), row])
        return 0
    if args.json:
        if args.members:
            members = [
                {
                    "group": group.group_id,
                    "consumerId": m,
                    "host": h or None,
                    "clientId": c or None,
                    "partitions": len(owned),
                }
                for m, h, c, owned in described.members
            ]
            print(json.dumps(members))
        else:
            print(json.dumps([dict(zip(JSON_KEYS, r, strict=True)) for r in described.rows]))
        return 0
    if not group.members:
        print(f"\nConsumer group '{group.group_id}' has no active members.\n")
    else:
        print()
    print_table(
        members_rows(group.group_id, described.members) if args.members else table(described.rows)
    )
    return 0


def run_delete(config: Mapping[str, object], group_id: str, as_json: bool) -> int:
    results = asyncio.run(delete(config, group_id))
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

    offsets = asyncio.run(reset())
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
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--command-config",
        dest="command_config",
        metavar="FILE",
        help="a properties file of admin client configs",
    )
    add_client_connection_arguments(parser)
