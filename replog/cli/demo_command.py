"""`replog demo`: the main job. A replicated stream survives a leader's SIGKILL, exactly once.

What it does, printing each step as it goes:
1. starts a 3-node local cluster (combined controller+broker processes on loopback, data in
   `--data-dir`, wiped first; the same files as `replog cluster start`);
2. creates topic `events`: 3 partitions, replication factor 3, `min.insync.replicas=2`;
3. streams `--records` keyed events (keys `user-0..user-99`, JSON values with a per-key
   sequence number and an amount) from a background thread through one producer with
   acks=all and enable.idempotence=true, recording every acknowledged (key, seq);
4. once a third is acknowledged, SIGKILLs the leader of partition 0 and keeps producing;
   restarts it about 3 s later (once its partitions are seen under-replicated), and waits
   until it is back in every ISR (no under-replicated partition);
5. prints, every second, the acknowledgements per second and the number of
   under-replicated partitions (ISR smaller than the replica set, from `Admin.describe_topics`),
   and at the end the series as a compact table;
6. reads every partition from its start up to its high watermark and checks that every
   acknowledged event is there exactly once and every key's sequence numbers are in order
   (failed sends are reported, not counted as losses: their outcome is unknown);
7. reads the topic into a Spark DataFrame (`spark.read.format("replog")`, local[2]), prints
   the count and the sum of amounts per key group, and checks that Spark saw exactly the
   records and the amounts the verification counted;
8. stops the cluster: also after a failure or Ctrl-C (unless `--keep`, which leaves it
   running for `replog cluster status|stop --data-dir DIR` and `replog topics`).

Exit code 0 only when every check held; 1 when one failed (each failure is a `FAILED:` line);
130 on Ctrl-C. Spark needs Java 17+: without it the demo stops before starting anything.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from replog.cli.arguments import add_documented_command, at_least, deferred

NODE_COUNT = 3
DEFAULT_DATA_DIR = os.path.join(".replog", "demo")
DEFAULT_BASE_PORT = 19292  # a user's `replog cluster` on 19092 stays untouched
DEFAULT_RECORDS = 20_000
DEFAULT_RATE = 1_000


# --- argument parsing -----------------------------------------------------------------------------


def _port(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 65536 - NODE_COUNT - 300:  # the Kafka controller ports: PORT + 300..
        raise argparse.ArgumentTypeError(f"{text}: not a port for {NODE_COUNT} nodes")
    return value


def register(commands: Any) -> None:
    parser = add_documented_command(
        commands,
        "demo",
        __doc__,
    )
    parser.add_argument(
        "--records",
        type=at_least(1),
        default=DEFAULT_RECORDS,
        metavar="N",
        help=f"events to send (default: {DEFAULT_RECORDS:,})",
    )
    parser.add_argument(
        "--rate",
        type=at_least(0),
        default=DEFAULT_RATE,
        metavar="PER_S",
        help=f"events per second at most, 0 = unthrottled (default: {DEFAULT_RATE:,})",
    )
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        default=DEFAULT_DATA_DIR,
        help=f"the cluster's directory, wiped at the start (default: {DEFAULT_DATA_DIR})",
    )
    parser.add_argument(
        "--base-port",
        type=_port,
        default=DEFAULT_BASE_PORT,
        metavar="PORT",
        help=(
            f"node i's internal listener is PORT + i - 1, its Kafka listener (what the demo's "
            f"clients use) PORT + 200 + i - 1 (default: {DEFAULT_BASE_PORT})"
        ),
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="leave the cluster running at the end (stop it with `replog cluster stop`)",
    )
    # The demo itself (the cluster, the clients, Spark) loads when it runs, not by `--help`.
    parser.set_defaults(run=deferred("replog.cli.demo", "run"))
