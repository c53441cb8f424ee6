"""`replog transactions`: list, describe and abort transactions and find hanging ones, like
kafka-transactions.sh.

    replog transactions list [--state S ...] [--producer-id ID ...] [--duration-filter MS]
    replog transactions describe --transactional-id ID
    replog transactions describe-producers --topic T --partition P [--broker-id B]
    replog transactions abort --topic T --partition P
        (--start-offset O | --producer-id ID --producer-epoch E --coordinator-epoch C)
    replog transactions find-hanging (--broker-id B | --topic T [--partition P])
        [--max-transaction-timeout MIN]

Each takes `--bootstrap-server HOST:PORT,...` (else the local cluster's in `--data-dir`),
`--timeout SECONDS` and `--json` (the table's lines as objects, keys as its columns).
Output, Kafka's columns:

    list                TransactionalId  Coordinator  ProducerId  TransactionState
    describe            CoordinatorId  TransactionalId  ProducerId  ProducerEpoch
                        TransactionState  TransactionTimeoutMs  CurrentTransactionStartTimeMs
                        TransactionDurationMs  TopicPartitions
    describe-producers  ProducerId  ProducerEpoch  LatestCoordinatorEpoch  LastSequence
                        LastTimestamp  CurrentTransactionStartOffset
    find-hanging        Topic  Partition  ProducerId  ProducerEpoch  CoordinatorEpoch
                        StartOffset  LastTimestamp  Duration(min)

Rules, Kafka's:
- `list` asks every unfenced broker (ListTransactions: each lists the transactional ids it
  coordinates), filtered by state (repeatable), producer id (repeatable) and the minimum
  time a transaction has been open (`--duration-filter`, ms). A broker that does not answer,
  or knows no state of a name given, is a stderr line naming it; the others are still listed,
  exit code 1.
- `describe` asks the id's coordinator (FindCoordinator key type 1, then DescribeTransactions);
  an id the coordinator does not know is TRANSACTIONAL_ID_NOT_FOUND naming it. "None" stands
  for the start time and duration when no transaction is open.
- `abort` writes an ABORT marker on the partition through its leader (WriteTxnMarkers, as
  Kafka's admin abortTransaction): with `--start-offset`, for the producer whose open
  transaction starts at that offset (DescribeProducers; none is NoOpenTransactionError naming
  offset and partition); else with the producer id, epoch and coordinator epoch given (a
  negative coordinator epoch is sent as 0, Kafka's conservative choice).
- `find-hanging` looks at the partitions of `--topic` (one with `--partition`), or every
  partition of a topic not internal with a replica on `--broker-id`: an open transaction whose
  last write is older than `--max-transaction-timeout` minutes (default 15) is hanging when its
  producer id has no transactional id any coordinator lists, the id is unknown, or the id's
  transaction does not hold that partition (the coordinator will write no marker there).
- Exit code 0; 1 with the error on stderr for a failure (unknown id, topic or partition, a
  coordinator or leader not available within `--timeout`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from replog.cli.arguments import add_command, at_least
from replog.cli.controller_connection import add_connection_arguments, connect
from replog.cli.table import print_table
from replog.errors import NoOpenTransactionError, ReplogError

if TYPE_CHECKING:
    from replog.admin.kafka_admin_client import KafkaAdminClient
    from replog.admin.transaction_results import (
        AbortSpec,
        ProducerState,
        TransactionDescription,
        TransactionListing,
    )
    from replog.common import TopicPartition

LIST_HEADER = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_HEADER = (
    "CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
    "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
    "TopicPartitions",
)  # fmt: skip
PRODUCERS_HEADER = (
    "ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
    "CurrentTransactionStartOffset",
)  # fmt: skip
HANGING_HEADER = (
    "Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
    "LastTimestamp", "Duration(min)",
)  # fmt: skip
MAX_TRANSACTION_TIMEOUT_MIN = 15  # kafka-transactions.sh's default
MINUTE_MS = 60_000
NONE = "None"  # Kafka's text for an absent value in these tables

Row = list[str]
Hanging = tuple["TopicPartition", "ProducerState"]


# --- pure parts -------------------------------------------------------------------------------


def list_rows(listings: Iterable[TransactionListing]) -> list[Row]:
    return [
        [t.transactional_id, str(t.coordinator_id), str(t.producer_id), t.state]
        for t in sorted(listings, key=lambda t: (t.coordinator_id, t.transactional_id))
    ]


def describe_row(d: TransactionDescription, now_ms: int) -> Row:
    start = NONE if d.start_time_ms is None else str(d.start_time_ms)
    duration = NONE if d.start_time_ms is None else str(now_ms - d.start_time_ms)
    return [
        str(d.coordinator_id),
        d.transactional_id,
        str(d.producer_id),
        str(d.producer_epoch),
        d.state,
        str(d.timeout_ms),
        start,
        duration,
        ",".join(f"{tp.topic}-{tp.partition}" for tp in d.partitions),
    ]


def _or(value: int | None, absent: str) -> str:
    return absent if value is None else str(value)


def producer_rows(producers: Iterable[ProducerState]) -> list[Row]:
    return [
        [
            str(p.producer_id),
            str(p.producer_epoch),
            _or(p.coordinator_epoch, "-1"),
            str(p.last_sequence),
            str(p.last_timestamp_ms),
            _or(p.current_txn_start_offset, NONE),
        ]
        for p in producers
    ]


def candidates(
    producers: Mapping[TopicPartition, Sequence[ProducerState]], now_ms: int, max_timeout_ms: int
) -> list[Hanging]:
    """Open transactions whose last write is older than `max_timeout_ms`: no coordinator
    would have let them run that long."""
    return [
        (tp, p)
        for tp, states in sorted(producers.items())
        for p in states
        if p.current_txn_start_offset is not None and now_ms - p.last_timestamp_ms > max_timeout_ms
    ]


def hanging(
    open_transactions: Sequence[Hanging],
    ids: Mapping[int, str],
    descriptions: Mapping[str, TransactionDescription | None],
) -> list[Hanging]:
    """Of the candidates, those no coordinator will write a marker for (module docstring):
    `ids` maps producer ids to transactional ids, `descriptions` holds None for an unknown id."""
    found: list[Hanging] = []
    for tp, producer in open_transactions:
        transactional_id = ids.get(producer.producer_id)
        described = None if transactional_id is None else descriptions.get(transactional_id)
        if described is None or tp not in described.partitions:
            found.append((tp, producer))
    return found


def hanging_rows(found: Iterable[Hanging], now_ms: int) -> list[Row]:
    return [
        [
            tp.topic,
            str(tp.partition),
            str(p.producer_id),
            str(p.producer_epoch),
            _or(p.coordinator_epoch, "-1"),
            _or(p.current_txn_start_offset, "-1"),
            str(p.last_timestamp_ms),
            str((now_ms - p.last_timestamp_ms) // MINUTE_MS),
        ]
        for tp, p in found
    ]


def abort_spec_at(
    tp: TopicPartition, producers: Sequence[ProducerState], start_offset: int
) -> AbortSpec:
    """The abort of the transaction open on `tp` since `start_offset` (Kafka's: its
    coordinator epoch, 0 when the partition has seen none)."""
    from replog.admin.transaction_results import AbortSpec

    for p in producers:
        if p.current_txn_start_offset == start_offset:
            epoch = 0 if p.coordinator_epoch is None else max(p.coordinator_epoch, 0)
            return AbortSpec(tp, p.producer_id, p.producer_epoch, epoch)
    raise NoOpenTransactionError(
        f"could not find any open transaction starting at offset {start_offset} on partition "
        f"{tp.topic}-{tp.partition}"
    )


def _print(header: Sequence[str], rows: Sequence[Row], as_json: bool) -> None:
    if as_json:
        print(json.dumps([dict(zip(header, row, strict=True)) for row in rows]))
    else:
        print_table([list(header), *rows])


# --- the shell --------------------------------------------------------------------------------


def _now_ms() -> int:
    from replog.clock import wall_clock_ms

    return wall_clock_ms()


def run_list(args: argparse.Namespace) -> int:
    with connect(args) as client:
        listings, failures = client.list_transactions(
            states=args.state or (),
            producer_ids=args.producer_id or (),
            duration_ms=args.duration_filter,
        )
    for broker_id, error in sorted(failures.items()):
        print(f"replog transactions: broker {broker_id}: {error}", file=sys.stderr)
    _print(LIST_HEADER, list_rows(listings), args.json)
    return 1 if failures else 0


def run_describe(args: argparse.Namespace) -> int:
    with connect(args) as client:
        described = client.describe_transaction(args.transactional_id)
    _print(DESCRIBE_HEADER, [describe_row(described, _now_ms())], args.json)
    return 0


def _producers_of(
    client: KafkaAdminClient, tp: TopicPartition, broker_id: int | None = None
) -> list[ProducerState]:
    (found,) = client.describe_producers([tp], broker_id=broker_id).values()
    if isinstance(found, ReplogError):
        raise found
    return found


def run_describe_producers(args: argparse.Namespace) -> int:
    from replog.common import TopicPartition

    with connect(args) as client:
        producers = _producers_of(
            client, TopicPartition(args.topic, args.partition), args.broker_id
        )
    _print(PRODUCERS_HEADER, producer_rows(producers), args.json)
    return 0


def run_abort(args: argparse.Namespace) -> int:
    from replog.admin.transaction_results import AbortSpec
    from replog.common import TopicPartition

    tp = TopicPartition(args.topic, args.partition)
    given = {
        "--producer-id": args.producer_id,
        "--producer-epoch": args.producer_epoch,
        "--coordinator-epoch": args.coordinator_epoch,
    }
    if args.start_offset is None:
        missing = [flag for flag, value in given.items() if value is None]
        if missing:
            raise ReplogError(
                "abort needs the transaction: --start-offset O, or --producer-id, "
                f"--producer-epoch and --coordinator-epoch (missing {', '.join(missing)})"
            )
    elif any(value is not None for value in given.values()):
        raise ReplogError(
            "abort takes --start-offset or --producer-id/--producer-epoch/--coordinator-epoch, "
            "not both"
        )
    with connect(args) as client:
        if args.start_offset is not None:
            spec = abort_spec_at(tp, _producers_of(client, tp), args.start_offset)
        else:
            # Kafka's tool: a producer that never saw a marker shows -1, which any leader
            # epoch check accepts as 0.
            coordinator_epoch = max(args.coordinator_epoch, 0)
            spec = AbortSpec(tp, args.producer_id, args.producer_epoch, coordinator_epoch)
        client.abort_transaction(spec)
    if args.json:
        print(json.dumps(_spec_json(spec)))
    else:
        print(
            f"Aborted the transaction of producer {spec.producer_id} (epoch "
            f"{spec.producer_epoch}, coordinator epoch {spec.coordinator_epoch}) on "
            f"{tp.topic}-{tp.partition}."
        )
    return 0


def _spec_json(spec: AbortSpec) -> dict[str, Any]:
    return {
        "topic": spec.partition.topic,
        "partition": spec.partition.partition,
        "producerId": spec.producer_id,
        "producerEpoch": spec.producer_epoch,
        "coordinatorEpoch": spec.coordinator_epoch,
    }


def _partitions_to_search(
    client: KafkaAdminClient, args: argparse.Namespace
) -> list[TopicPartition]:
    from replog.common import TopicPartition

    if args.topic is not None and args.partition is not None:
        return [TopicPartition(args.topic, args.partition)]
    from replog.topic_names import INTERNAL_TOPICS

    metadata = client.metadata(None if args.topic is None else [args.topic])
    found: list[TopicPartition] = []
    for topic in metadata.topics:
        if topic.error is not None:
            raise topic.error
        if args.topic is None and topic.name in INTERNAL_TOPICS:
            continue  # Kafka's tool lists topics without the internal ones
        found += [
            TopicPartition(topic.name, p.partition)
            for p in topic.partitions
            if args.broker_id is None or args.broker_id in p.replicas
        ]
    return sorted(found)


def run_find_hanging(args: argparse.Namespace) -> int:
    if args.topic is None and args.broker_id is None:
        raise ReplogError("find-hanging needs --topic or --broker-id to limit the search")
    if args.partition is not None and args.topic is None:
        raise ReplogError("find-hanging --partition needs --topic")
    from replog.errors import TransactionalIdNotFoundError

    with connect(args) as client:
        partitions = _partitions_to_search(client, args)
        producers: dict[TopicPartition, list[ProducerState]] = {}
        for tp, found in client.describe_producers(partitions, broker_id=args.broker_id).items():
            if isinstance(found, ReplogError):
                raise found
            producers[tp] = found
        now_ms = _now_ms()
        open_ones = candidates(producers, now_ms, args.max_transaction_timeout * MINUTE_MS)
        ids: dict[int, str] = {}
        descriptions: dict[str, TransactionDescription | None] = {}
        if open_ones:
            listings, failures = client.list_transactions(
                producer_ids={p.producer_id for _, p in open_ones}
            )
            if failures:
                # A coordinator that did not answer may hold the id: nothing can be called
                # hanging without it.
                broker_id, error = min(failures.items())
                raise ReplogError(f"listing the transactions of broker {broker_id}: {error}")
            ids = {t.producer_id: t.transactional_id for t in listings}
            for transactional_id in sorted(set(ids.values())):
                try:
                    descriptions[transactional_id] = client.describe_transaction(transactional_id)
                except TransactionalIdNotFoundError:
                    descriptions[transactional_id] = None
    _print(HANGING_HEADER, hanging_rows(hanging(open_ones, ids, descriptions), now_ms), args.json)
    return 0


# --- the command ------------------------------------------------------------------------------


def register(commands: Any) -> None:
    action = add_command(commands, "transactions", __doc__, headed=True)
    whole = at_least(0)
    long = at_least(0, 2**63 - 1)  # producer ids and offsets are int64 on the wire
    listing = action("list", "list transactions", run_list)
    listing.add_argument(
        "--state",
        action="append",
        metavar="S",
        help="only transactions in this state (Ongoing, PrepareCommit, CompleteCommit, ...); "
        "repeatable",
    )
    listing.add_argument(
        "--producer-id",
        action="append",
        type=long,
        metavar="ID",
        help="only transactions of this producer id; repeatable",
    )
    listing.add_argument(
        "--duration-filter",
        type=long,
        metavar="MS",
        help="only transactions open at least this many milliseconds",
    )
    describe = action("describe", "describe the state of a transactional id", run_describe)
    describe.add_argument("--transactional-id", required=True, metavar="ID")
    producers = action(
        "describe-producers",
        "describe the active producers of a partition",
        run_describe_producers,
    )
    _partition_arguments(producers, required=True)
    producers.add_argument(
        "--broker-id", type=whole, metavar="B", help="ask this replica instead of the leader"
    )
    abort = action("abort", "abort a hanging transaction on a partition", run_abort)
    _partition_arguments(abort, required=True)
    abort.add_argument(
        "--start-offset", type=long, metavar="O", help="the offset the open transaction starts at"
    )
    abort.add_argument(
        "--producer-id", type=long, metavar="ID", help="the producer id (with the two epochs)"
    )
    abort.add_argument(
        "--producer-epoch", type=at_least(0, 2**15 - 1), metavar="E", help="its producer epoch"
    )
    abort.add_argument(
        "--coordinator-epoch", type=at_least(-1), metavar="C",
        help="its coordinator epoch (as describe-producers shows it; -1 is sent as 0)",
    )  # fmt: skip
    find = action("find-hanging", "find hanging transactions", run_find_hanging)
    _partition_arguments(find, required=False)
    find.add_argument(
        "--broker-id", type=whole, metavar="B", help="search the partitions with a replica here"
    )
    find.add_argument(
        "--max-transaction-timeout",
        type=at_least(0),
        default=MAX_TRANSACTION_TIMEOUT_MIN,
        metavar="MIN",
        help="the longest transaction timeout in use, in minutes: an open transaction silent "
        f"for longer is a candidate (default: {MAX_TRANSACTION_TIMEOUT_MIN})",
    )
    for sub in (listing, describe, producers, abort, find):
        sub.add_argument("--json", action="store_true", help="print JSON instead of a table")
        add_connection_arguments(sub)


def _partition_arguments(parser: argparse.ArgumentParser, *, required: bool) -> None:
    parser.add_argument("--topic", required=required, metavar="T", help="the topic")
    parser.add_argument(
        "--partition", type=at_least(0), required=required, metavar="P", help="the partition"
    )
