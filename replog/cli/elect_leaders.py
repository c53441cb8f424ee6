"""`replog elect-leaders`: preferred or unclean leader elections, like
`kafka-leader-election.sh`.

    replog elect-leaders --election-type preferred|unclean
        (--topic T --partition P | --all-topic-partitions | --path-to-json-file F) [--json]

- preferred: the first replica of each partition becomes its leader again, if it is in the
  ISR (after a broker came back, leaderships have moved away from it).
- unclean: a partition without a leader gets one from outside the ISR, if a replica is alive:
  records its old leader had committed may be lost (the trade-off is in docs/operations.md).
- F is Kafka's `{"partitions":[{"topic":"t","partition":0}]}`; `--all-topic-partitions` asks
  for every partition, and then only those that needed an election are reported.

Output, as Kafka prints it:

    Successfully completed leader election (PREFERRED) for partitions t-0, t-1
    Valid replica already elected for partitions t-2

Naming no partitions, or two ways of naming them, is a usage error (exit code 2). A partition
whose election failed (an unknown partition, a preferred replica out of the ISR,
no live replica) is one line on stderr, `Error completing leader election (PREFERRED) for
partition: t-3: <cause>`, and the exit code is 1. `--json` prints `{"partitions": [{"topic",
"partition", "result": "elected"|"not_needed"|"failed", "error"}]}` (exit code as above).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from replog.cli.arguments import add_documented_command, at_least
from replog.cli.controller_connection import add_connection_arguments, connect
from replog.cli.partition_files import load, parse_election_partitions
from replog.common import TopicPartition
from replog.errors import ElectionNotNeededError

if TYPE_CHECKING:
    from replog.admin.controller_results import ElectionResult, ElectionType

ELECTED, NOT_NEEDED, FAILED = "elected", "not_needed", "failed"


# --- pure parts -------------------------------------------------------------------------------


def outcome(result: ElectionResult) -> str:
    if result.error is None:
        return ELECTED
    return NOT_NEEDED if isinstance(result.error, ElectionNotNeededError) else FAILED


def report_lines(
    election_type: ElectionType, results: Sequence[ElectionResult]
) -> tuple[list[str], list[str]]:
    """(stdout lines, stderr lines) of kafka-leader-election.sh for these results."""
    ordered = sorted(results, key=lambda r: r.topic_partition)
    elected = [_text(r.topic_partition) for r in ordered if outcome(r) == ELECTED]
    not_needed = [_text(r.topic_partition) for r in ordered if outcome(r) == NOT_NEEDED]
    out = []
    if elected:
        out.append(
            f"Successfully completed leader election ({election_type.name}) for partitions "
            + ", ".join(elected)
        )
    if not_needed:
        out.append("Valid replica already elected for partitions " + ", ".join(not_needed))
    err = [
        f"Error completing leader election ({election_type.name}) for partition: "
        f"{_text(r.topic_partition)}: {r.error}"
        for r in ordered
        if outcome(r) == FAILED
    ]
    return out, err


def _text(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


# --- the shell --------------------------------------------------------------------------------


def _partitions(args: argparse.Namespace) -> list[TopicPartition] | None:
    """The partitions asked for; None: every partition."""
    if args.all_topic_partitions:
        if args.topic is not None or args.partition is not None:
            args.usage.error("--all-topic-partitions does not go with --topic/--partition")
        return None
    if args.path_to_json_file is not None:
        if args.topic is not None or args.partition is not None:
            args.usage.error("--path-to-json-file does not go with --topic/--partition")
        found = load(args.path_to_json_file, "--path-to-json-file", parse_election_partitions)
        return [TopicPartition(t, p) for t, p in found]
    if args.topic is None or args.partition is None:
        args.usage.error(
            "name the partitions: --topic T --partition P, --all-topic-partitions or "
            "--path-to-json-file F"
        )
    return [TopicPartition(args.topic, args.partition)]


def run(args: argparse.Namespace) -> int:
    # The admin client's types (and the generated messages behind them) load when the command
    # runs, not by `--help`.
    from replog.admin.controller_results import ElectionType

    election_type = ElectionType[args.election_type.upper()]
    partitions = _partitions(args)
    with connect(args) as client:
        results = client.elect_leaders(election_type, partitions)
    out, err = report_lines(election_type, results)
    if args.json:
        document = {
            "partitions": [
                {
                    "topic": r.topic_partition.topic,
                    "partition": r.topic_partition.partition,
                    "result": outcome(r),
                    "error": None if outcome(r) == ELECTED else str(r.error),
                }
                for r in sorted(results, key=lambda r: r.topic_partition)
            ]
        }
        print(json.dumps(document, indent=2))
    else:
        for line in out:
            print(line)
    for line in err:
        print(f"replog elect-leaders: {line}", file=sys.stderr)
    return 1 if err else 0


def register(commands: Any) -> None:
    parser = add_documented_command(
        commands,
        "elect-leaders",
        __doc__,
    )
    parser.set_defaults(run=run, usage=parser)  # usage.error(): a usage mistake, exit code 2
    parser.add_argument(
        "--election-type",
        required=True,
        type=str.lower,
        choices=["preferred", "unclean"],
        help="preferred: the first replica leads again; unclean: elect outside the ISR",
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--all-topic-partitions", action="store_true", help="every partition of every topic"
    )
    which.add_argument(
        "--path-to-json-file",
        metavar="FILE",
        help='the partitions: {"partitions":[{"topic":"t","partition":0}]}',
    )
    parser.add_argument("--topic", metavar="TOPIC", help="the topic (with --partition)")
    parser.add_argument(
        "--partition", type=at_least(0), metavar="P", help="the partition (with --topic)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    add_connection_arguments(parser)
