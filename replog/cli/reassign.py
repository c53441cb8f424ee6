"""`replog reassign generate|execute|verify|cancel|list`: move partition replicas between
brokers, like `kafka-reassign-partitions.sh`.

The files are Kafka's JSON, as kafka-reassign-partitions.sh reads and writes them:
`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3]}]}`.

- `generate --topics-to-move-json-file F --broker-list 1,2,3`: proposes new replicas for every
  partition of the topics in F (`{"version":1,"topics":[{"topic":"t"}]}`), keeping each
  partition's replica count, spread over the brokers listed (evenly, leaders too, on distinct
  racks where brokers have racks: the controller's own placement, shuffled at random as
  Kafka's is). Prints `Current partition replica assignment`, the current JSON, a blank line,
  `Proposed partition reassignment configuration` and the proposed JSON. Changes nothing.
- `execute --reassignment-json-file F [--additional]`: prints the current assignment of the
  partitions in F (`Save this to use as the --reassignment-json-file option during rollback`)
  and starts the reassignments: `Successfully started partition reassignments for t-0,t-1`.
  Refused while another reassignment is in progress, unless `--additional`.
- `verify --reassignment-json-file F [--json]`: `Status of partition reassignment:`, then per
  partition `Reassignment of partition t-0 is completed.`, `... is still in progress.`, or
  `There is no active reassignment of partition t-0, but replica set is 1,2 rather than 2,3.`
  Exit code 0 only when every reassignment is completed, else 1.
- `cancel --reassignment-json-file F`: cancels the ongoing reassignments of the partitions in
  F (each goes back to its original replicas): `Successfully cancelled partition reassignments
  for: t-0`, or `None of the specified partition reassignments are active.`
- `list [--json]`: `Current partition reassignments:` then `t-0: replicas: 1,2,3,4. adding: 4.
  removing: 1.` per partition, or `No partition reassignments found.`

Every action asks the active controller (as `replog topics` does). A refusal (an unreadable
or malformed file, an unknown topic or partition, a broker that is not registered, a target
the controller refuses) is one line on stderr per failed partition, exit code 1.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from replog.cli.arguments import add_command
from replog.cli.controller_connection import add_connection_arguments, connect
from replog.cli.partition_files import (
    PartitionReplicas,
    load,
    parse_reassignment,
    parse_topics_to_move,
    reassignment_json,
)
from replog.common import TopicPartition
from replog.errors import (
    InvalidReplicationFactorError,
    NoReassignmentInProgressError,
    ReplogError,
    UnknownTopicOrPartitionError,
)

if TYPE_CHECKING:
    # The admin client (gRPC, the generated messages) loads when a subcommand connects, not
    # by `--help`.
    from replog.admin.cluster_metadata import ClusterMetadata
    from replog.admin.controller_results import OngoingReassignment
    from replog.admin.kafka_admin_client import KafkaAdminClient

Assignment = dict[tuple[str, int], tuple[int, ...]]

COMPLETED, IN_PROGRESS, DIFFERENT = "completed", "in progress", "different"


# --- pure parts -------------------------------------------------------------------------------


def tp_text(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_broker_list(text: str) -> list[int]:
    ids: list[int] = []
    for item in text.split(","):
        try:
            broker_id = int(item.strip())
        except ValueError:
            raise ReplogError(
                f"--broker-list {text!r}: {item.strip()!r} is not a broker id"
            ) from None
        if broker_id < 0:
            raise ReplogError(f"--broker-list {text!r}: broker id {broker_id} is negative")
        if broker_id in ids:
            raise ReplogError(f"--broker-list {text!r}: broker {broker_id} is listed twice")
        ids.append(broker_id)
    return ids


def current_assignment(
    metadata: ClusterMetadata, wanted: Iterable[tuple[str, int]] | None = None
) -> Assignment:
    """The replicas of every partition of the topics in `metadata` (or only of `wanted`);
    an unknown topic or partition is an error naming it."""
    topics: dict[str, dict[int, tuple[int, ...]]] = {}
    for info in metadata.topics:
        if isinstance(info.error, UnknownTopicOrPartitionError):
            raise UnknownTopicOrPartitionError(f"topic {info.name!r} does not exist")
        if info.error is not None:
            raise info.error
        topics[info.name] = {p.partition: p.replicas for p in info.partitions}
    if wanted is None:
        return {(t, p): r for t, ps in topics.items() for p, r in ps.items()}
    found: Assignment = {}
    for topic, partition in wanted:
        if topic not in topics:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
        if partition not in topics[topic]:
            raise UnknownTopicOrPartitionError(
                f"partition {tp_text(topic, partition)} does not exist: topic {topic!r} has "
                f"{len(topics[topic])} partitions"
            )
        found[(topic, partition)] = topics[topic][partition]
    return found


def propose(
    current: Mapping[tuple[str, int], Sequence[int]],
    brokers: Sequence[tuple[int, str | None]],
    rng: random.Random,
) -> Assignment:
    """New replicas for every partition of `current` over `brokers` (id, rack), each topic's
    partitions keeping their replica count (partition 0's, as Kafka takes it)."""
    from replog.quorum.controller.placement import place_replicas  # the controller's own rule

    proposed: Assignment = {}
    by_topic: dict[str, list[int]] = {}
    for topic, partition in current:
        by_topic.setdefault(topic, []).append(partition)
    for topic, partitions in sorted(by_topic.items()):
        partitions.sort()
        replication_factor = len(current[(topic, partitions[0])])
        if replication_factor > len(brokers):
            raise InvalidReplicationFactorError(
                f"topic {topic!r} has {replication_factor} replicas per partition, more than "
                f"the {len(brokers)} brokers in --broker-list"
            )
        placed = place_replicas(brokers, len(partitions), replication_factor, rng)
        for partition, replicas in zip(partitions, placed, strict=True):
            proposed[(topic, partition)] = tuple(replicas)
    return proposed


def reassignment_state(target: Sequence[int], replicas: Sequence[int], ongoing: bool) -> str:
    """COMPLETED (no reassignment and the replicas are the target, in order), IN_PROGRESS, or
    DIFFERENT (no reassignment, but other replicas: it was cancelled or replaced)."""
    if ongoing:
        return IN_PROGRESS
    return COMPLETED if tuple(replicas) == tuple(target) else DIFFERENT


def state_line(
    topic: str, partition: int, state: str, replicas: Sequence[int], target: Sequence[int]
) -> str:
    where = tp_text(topic, partition)
    if state == COMPLETED:
        return f"Reassignment of partition {where} is completed."
    if state == IN_PROGRESS:
        return f"Reassignment of partition {where} is still in progress."
    return (
        f"There is no active reassignment of partition {where}, but replica set is "
        f"{_ids(replicas)} rather than {_ids(target)}."
    )


def ongoing_line(reassignment: OngoingReassignment) -> str:
    topic, partition = reassignment.topic_partition
    return (
        f"{tp_text(topic, partition)}: replicas: {_ids(reassignment.replicas)}. "
        f"adding: {_ids(reassignment.adding_replicas)}. "
        f"removing: {_ids(reassignment.removing_replicas)}."
    )


def _ids(ids: Sequence[int]) -> str:
    return ",".join(str(i) for i in ids)


def _joined(partitions: Iterable[tuple[str, int]]) -> str:
    return ",".join(tp_text(t, p) for t, p in partitions)


# --- the shell --------------------------------------------------------------------------------


def _load_reassignment(args: argparse.Namespace) -> list[PartitionReplicas]:
    entries = load(args.reassignment_json_file, "--reassignment-json-file", parse_reassignment)
    if not entries:
        raise ReplogError(f"{args.reassignment_json_file}: names no partition")
    return entries


def _metadata_of(client: KafkaAdminClient, topics: Iterable[str]) -> ClusterMetadata:
    return client.metadata(sorted(set(topics)))


def run_generate(args: argparse.Namespace) -> int:
    topics = load(args.topics_to_move_json_file, "--topics-to-move-json-file", parse_topics_to_move)
    broker_ids = parse_broker_list(args.broker_list)
    with connect(args) as client:
        metadata = _metadata_of(client, topics)
        registered = {b.broker_id: b for b in client.describe_cluster().brokers}
    unknown = [b for b in broker_ids if b not in registered]
    if unknown:
        raise ReplogError(f"--broker-list: broker {unknown[0]} is not registered in the cluster")
    current = current_assignment(metadata)
    brokers = [(b, registered[b].rack) for b in broker_ids]
    proposed = propose(current, brokers, random.Random())
    print("Current partition replica assignment")
    print(reassignment_json(current))
    print()
    print("Proposed partition reassignment configuration")
    print(reassignment_json(proposed))
    return 0


def run_execute(args: argparse.Namespace) -> int:
    entries = _load_reassignment(args)
    with connect(args) as client:
        current = current_assignment(
            _metadata_of(client, (e.topic for e in entries)),
            [(e.topic, e.partition) for e in entries],
        )
        if not args.additional and client.list_partition_reassignments():
            raise ReplogError(
                "cannot execute: a partition reassignment is in progress (see `replog reassign "
                "list`); use --additional to start these as well"
            )
        print("Current partition replica assignment")
        print()
        print(reassignment_json(current))
        print()
        print("Save this to use as the --reassignment-json-file option during rollback")
        results = client.alter_partition_reassignments(
            {TopicPartition(e.topic, e.partition): e.replicas for e in entries}
        )
    started = [r.topic_partition for r in results if r.error is None]
    failed = [r for r in results if r.error is not None]
    if started:
        plural = "s" if len(started) > 1 else ""
        print(f"Successfully started partition reassignment{plural} for {_joined(started)}")
    for result in failed:
        print(f"replog reassign: {result.error}", file=sys.stderr)
    return 1 if failed else 0


def run_verify(args: argparse.Namespace) -> int:
    entries = _load_reassignment(args)
    with connect(args) as client:
        current = current_assignment(
            _metadata_of(client, (e.topic for e in entries)),
            [(e.topic, e.partition) for e in entries],
        )
        ongoing = {
            r.topic_partition
            for r in client.list_partition_reassignments(
                [TopicPartition(e.topic, e.partition) for e in entries]
            )
        }
    states = [
        (
            e,
            reassignment_state(
                e.replicas,
                current[(e.topic, e.partition)],
                TopicPartition(e.topic, e.partition) in ongoing,
            ),
        )
        for e in sorted(entries)
    ]
    if args.json:
        document = {
            "partitions": [
                {
                    "topic": e.topic,
                    "partition": e.partition,
                    "state": state,
                    "replicas": list(current[(e.topic, e.partition)]),
                    "target_replicas": list(e.replicas),
                }
                for e, state in states
            ]
        }
        print(json.dumps(document, indent=2))
    else:
        print("Status of partition reassignment:")
        for e, state in states:
            replicas = current[(e.topic, e.partition)]
            print(state_line(e.topic, e.partition, state, replicas, e.replicas))
    return 0 if all(state == COMPLETED for _, state in states) else 1


def run_cancel(args: argparse.Namespace) -> int:
    entries = _load_reassignment(args)
    with connect(args) as client:
        current_assignment(
            _metadata_of(client, (e.topic for e in entries)),
            [(e.topic, e.partition) for e in entries],
        )
        results = client.alter_partition_reassignments(
            {TopicPartition(e.topic, e.partition): None for e in entries}
        )
    cancelled = [r.topic_partition for r in results if r.error is None]
    failed = [
        r
        for r in results
        if r.error is not None and not isinstance(r.error, NoReassignmentInProgressError)
    ]
    if cancelled:
        plural = "s" if len(cancelled) > 1 else ""
        print(f"Successfully cancelled partition reassignment{plural} for: {_joined(cancelled)}")
    elif not failed:
        print("None of the specified partition reassignments are active.")
    for result in failed:
        print(f"replog reassign: {result.error}", file=sys.stderr)
    return 1 if failed else 0


def run_list(args: argparse.Namespace) -> int:
    with connect(args) as client:
        ongoing = sorted(client.list_partition_reassignments(), key=lambda r: r.topic_partition)
    if args.json:
        document = {
            "reassignments": [
                {
                    "topic": r.topic_partition.topic,
                    "partition": r.topic_partition.partition,
                    "replicas": list(r.replicas),
                    "adding_replicas": list(r.adding_replicas),
                    "removing_replicas": list(r.removing_replicas),
                }
                for r in ongoing
            ]
        }
        print(json.dumps(document, indent=2))
        return 0
    if not ongoing:
        print("No partition reassignments found.")
        return 0
    print("Current partition reassignments:")
    for reassignment in ongoing:
        print(ongoing_line(reassignment))
    return 0


# --- the command ------------------------------------------------------------------------------


def _file_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--reassignment-json-file",
        required=True,
        metavar="FILE",
        help='Kafka\'s reassignment JSON: {"version":1,"partitions":[{"topic":"t",'
        '"partition":0,"replicas":[1,2,3]}]}',
    )


def register(commands: Any) -> None:
    action = add_command(
        commands,
        "reassign",
        __doc__,
        headed=True,
    )
    generate = action("generate", "propose new replicas for the partitions of topics", run_generate)
    generate.add_argument(
        "--topics-to-move-json-file",
        required=True,
        metavar="FILE",
        help='the topics: {"version":1,"topics":[{"topic":"t"}]}',
    )
    generate.add_argument(
        "--broker-list",
        required=True,
        metavar="1,2,3",
        help="the brokers to place the replicas on",
    )
    add_connection_arguments(generate)

    execute = action("execute", "start the reassignments of a file", run_execute)
    _file_argument(execute)
    execute.add_argument(
        "--additional",
        action="store_true",
        help="start them even while other reassignments are in progress",
    )
    add_connection_arguments(execute)

    verify = action("verify", "whether the reassignments of a file are complete", run_verify)
    _file_argument(verify)
    verify.add_argument("--json", action="store_true", help="print JSON")
    add_connection_arguments(verify)

    cancel = action("cancel", "cancel the ongoing reassignments of a file", run_cancel)
    _file_argument(cancel)
    add_connection_arguments(cancel)

    listing = action("list", "list the ongoing reassignments", run_list)
    listing.add_argument("--json", action="store_true", help="print JSON")
    add_connection_arguments(listing)
