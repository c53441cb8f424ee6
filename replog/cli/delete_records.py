"""`replog delete-records`: delete the records of partitions before an offset, like
`kafka-delete-records.sh`.

    replog delete-records --offset-json-file F [--command-config FILE] [--json]

F is Kafka's `{"partitions":[{"topic":"t","partition":0,"offset":5}],"version":1}`; offset -1
means the high watermark (every committed record). Each partition's leader raises its log
start offset to the offset and answers once every in-sync replica has too (the low
watermark); readers then start there. Output, as Kafka prints it (fields separated by a tab):

    Executing records delete operation
    Records delete operation completed:
    partition: t-0	low_watermark: 5

A partition that failed (an unknown topic or partition, an offset past the high watermark:
OFFSET_OUT_OF_RANGE, no leader within the timeout) is `partition: t-1	error: <cause>` on
stderr, and the exit code is 1. `--json` prints `{"partitions": [{"topic", "partition",
"low_watermark", "error"}]}` instead (exit code as above).

The requests go to the partitions' leaders through the client library's Admin (Kafka's
DeleteRecords at the Kafka listeners: `--bootstrap-server`, else the local cluster's in
`--data-dir`; `--command-config`: Admin client properties). Each partition is its own request, all
sent at once, so that every partition's own outcome is reported and `--timeout` bounds the whole
command (as Kafka's tool has one future per partition under one timeout).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from replog.cli.arguments import add_documented_command, positive_seconds
from replog.cli.client_connection import add_client_connection_arguments, client_config
from replog.cli.partition_files import PartitionOffset, load, parse_offsets
from replog.client.records import TopicPartition
from replog.errors import ReplogError

if TYPE_CHECKING:
    from replog.client.sync_admin import Admin

DEFAULT_TIMEOUT_S = 30.0

Outcome = tuple[PartitionOffset, "int | ReplogError"]


# --- pure parts -------------------------------------------------------------------------------


def result_line(entry: PartitionOffset, result: int | ReplogError) -> str:
    where = f"partition: {entry.topic}-{entry.partition}"
    if isinstance(result, ReplogError):
        return f"{where}\terror: {result}"
    return f"{where}\tlow_watermark: {result}"


def result_json(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    return {
        "partitions": [
            {
                "topic": entry.topic,
                "partition": entry.partition,
                "low_watermark": None if isinstance(result, ReplogError) else result,
                "error": str(result) if isinstance(result, ReplogError) else None,
            }
            for entry, result in outcomes
        ]
    }


# --- the shell --------------------------------------------------------------------------------


def delete(admin: Admin, entries: Sequence[PartitionOffset], timeout_ms: int) -> list[Outcome]:
    """Each entry with its new low watermark or its error (module docstring)."""
    wanted = {TopicPartition(e.topic, e.partition): e.offset for e in entries}
    found = admin.delete_records_each(wanted, timeout_ms=timeout_ms)
    return [(e, found[TopicPartition(e.topic, e.partition)]) for e in entries]


def run(args: argparse.Namespace) -> int:
    # The client library (gRPC) loads when the command runs, not by `--help`.
    from replog.client.sync_admin import Admin

    entries = load(args.offset_json_file, "--offset-json-file", parse_offsets)
    config = client_config(
        args,
        kind="admin",
        props_option="command_property",
        defaults={"client.id": "replog-delete-records"},
    )
    timeout_ms = int(args.timeout * 1000)
    if not args.json:
        print("Executing records delete operation", flush=True)
    with Admin(config) as admin:
        outcomes = delete(admin, entries, timeout_ms)
    failed = [o for o in outcomes if isinstance(o[1], ReplogError)]
    if args.json:
        print(json.dumps(result_json(outcomes), indent=2))
    else:
        print("Records delete operation completed:")
        for entry, result in outcomes:
            if not isinstance(result, ReplogError):
                print(result_line(entry, result))
    for entry, result in failed:
        print(f"replog delete-records: {result_line(entry, result)}", file=sys.stderr)
    return 1 if failed else 0


def register(commands: Any) -> None:
    parser = add_documented_command(
        commands,
        "delete-records",
        __doc__,
    )
    parser.set_defaults(run=run, command_property=None)
    parser.add_argument(
        "--offset-json-file",
        required=True,
        metavar="FILE",
        help='the partitions: {"partitions":[{"topic":"t","partition":0,"offset":5}],'
        '"version":1} (offset -1: the high watermark)',
    )
    parser.add_argument(
        "--timeout",
        type=positive_seconds,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"give up on a partition after this long (default: {DEFAULT_TIMEOUT_S:g})",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    add_client_connection_arguments(parser)
