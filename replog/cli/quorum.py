"""`replog quorum describe`: the metadata quorum's leader, epoch and replicas, as Kafka shows them.

Like `kafka-metadata-quorum.sh describe`:

- `--status` (the default): ClusterId (Kafka's DescribeCluster, asked first as Kafka's tool
  asks it), LeaderId, LeaderEpoch, HighWatermark, MaxFollowerLag, MaxFollowerLagTimeMs,
  CurrentVoters, CurrentObservers.
- `--replication`: one row per replica (the leader, then the other voters, then observers) with
  NodeId, LogEndOffset, Lag (the leader's log end offset minus the replica's),
  LastFetchTimestamp, LastCaughtUpTimestamp (wall-clock ms) and Status (Leader, Follower or
  Observer). -1 stands for "not known in this epoch" (the replica has not fetched yet).
- `--json`: the same as one JSON document (null for unknown).

Where it asks, as `kafka-metadata-quorum.sh`: Kafka's DescribeQuorum, which every Kafka listener
answers (a broker's with `--bootstrap-server`, a controller's with `--bootstrap-controller`),
tried in turn; by default the Kafka listeners of the local cluster in `--data-dir`. The node
asked gets the description from the quorum's leader itself.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from replog.cli.arguments import add_command
from replog.cli.controller_connection import add_connection_arguments, connect
from replog.cli.table import print_table

UNKNOWN = "-1"  # what Kafka's tool prints for a value not known (the wire's -1)


def register(commands: Any) -> None:
    action = add_command(
        commands,
        "quorum",
        __doc__,
        headed=False,
    )
    describe = action(
        "describe", "the leader, epoch, high watermark and each replica's progress", run_describe
    )
    view = describe.add_mutually_exclusive_group()
    view.add_argument("--status", action="store_true", help="the quorum's status (default)")
    view.add_argument("--replication", action="store_true", help="one row per replica")
    describe.add_argument("--json", action="store_true", help="print JSON")
    add_connection_arguments(describe, controllers=True)


def run_describe(args: argparse.Namespace) -> int:
    # The admin client and the generated messages are loaded when the command runs, not by
    # `--help`.
    from replog.admin.kafka_cluster_answers import quorum_description

    with connect(args) as client:
        cluster_id = None if args.replication else client.describe_cluster().cluster_id
        description = quorum_description(*client.describe_quorum())
    if args.replication:
        rows = [asdict(r) for r in description.replicas]
        if args.json:
            print(json.dumps(rows, indent=2))
        else:
            print_replication_table(rows)
    else:
        status = {"cluster_id": cluster_id, **description.status(description.voter_addresses)}
        if args.json:
            print(json.dumps(status, indent=2))
        else:
            for key, label in STATUS_LABELS.items():
                value = status[key]
                text = json.dumps(value) if isinstance(value, list) else _cell(value)
                print(f"{label + ':':<22}{text}")
    return 0


# Kafka's names for the fields, in its order.
STATUS_LABELS = {
    "cluster_id": "ClusterId",
    "leader_id": "LeaderId",
    "leader_epoch": "LeaderEpoch",
    "high_watermark": "HighWatermark",
    "max_follower_lag": "MaxFollowerLag",
    "max_follower_lag_time_ms": "MaxFollowerLagTimeMs",
    "current_voters": "CurrentVoters",
    "current_observers": "CurrentObservers",
}
REPLICATION_COLUMNS = {
    "NodeId": "node_id",
    "LogEndOffset": "log_end_offset",
    "Lag": "lag",
    "LastFetchTimestamp": "last_fetch_timestamp",
    "LastCaughtUpTimestamp": "last_caught_up_timestamp",
    "Status": "status",
}


def print_replication_table(rows: Sequence[Mapping[str, Any]]) -> None:
    print_table(
        [list(REPLICATION_COLUMNS)]
        + [[_cell(row[key]) for key in REPLICATION_COLUMNS.values()] for row in rows]
    )


def _cell(value: object) -> str:
    return UNKNOWN if value is None else str(value)
