"""`replog quorum describe`: the metadata quorum's leader, epoch and replicas, as Kafka shows them.

Like `kafka-metadata-quorum.sh describe`:

- `--status` (the default): LeaderId, LeaderEpoch, HighWatermark, MaxFollowerLag,
  MaxFollowerLagTimeMs, CurrentVoters, CurrentObservers.
- `--replication`: one row per replica (the leader, then the other voters, then observers) with
  NodeId, LogEndOffset, Lag (the leader's log end offset minus the replica's),
  LastFetchTimestamp, LastCaughtUpTimestamp (wall-clock ms) and Status (Leader, Follower or
  Observer). -1 stands for "not known in this epoch" (the replica has not fetched yet).
- `--json`: the same as one JSON document (null for unknown).

Where it asks: the `--bootstrap-server` list (`host:port,...`; an entry may be written
`id@host:port`, as in `controller.quorum.voters`, to say which node listens there), tried in
turn as Kafka's clients do; by default the nodes of the local cluster in `--data-dir`. Only the
leader describes the quorum: another node answers with the leader's id, and the command asks
the leader next, at the address the local cluster or the `id@` entries give for that id.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from replog.cli.arguments import add_command
from replog.cli.controller_connection import bootstrap_and_addresses
from replog.cli.local_cluster import DEFAULT_DATA_DIR
from replog.cli.table import print_table

UNKNOWN = "-1"  # what Kafka's tool prints for a value not known (the wire's -1)


def parse_bootstrap(text: str) -> tuple[list[str], dict[int, str]]:
    """`host:port,...` (or `id@host:port` entries) -> (addresses in order, ids it names)."""
    from replog.admin import bootstrap as admin_bootstrap

    parsed = admin_bootstrap.parse_bootstrap(text, what="--bootstrap-server")
    return list(parsed.addresses), dict(parsed.node_addresses)


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
    describe.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT,...",
        help="quorum nodes to ask, in turn (default: the local cluster's nodes)",
    )
    describe.add_argument(
        "--data-dir",
        metavar="DIR",
        help=f"the local cluster whose nodes to ask (default: {DEFAULT_DATA_DIR})",
    )


def run_describe(args: argparse.Namespace) -> int:
    # gRPC and the Raft messages are loaded when the command runs, not by `--help`.
    from replog.admin.quorum import describe_quorum

    bootstrap, addresses = bootstrap_and_addresses(args)
    description = describe_quorum(bootstrap, addresses)
    if args.replication:
        rows = [asdict(r) for r in description.replicas]
        if args.json:
            print(json.dumps(rows, indent=2))
        else:
            print_replication_table(rows)
    else:
        status = description.status({**description.voter_addresses, **addresses})
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
