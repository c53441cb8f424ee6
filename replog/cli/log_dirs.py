"""`replog log-dirs describe`: each broker's log dirs and the replicas in them, like
kafka-log-dirs.sh --describe.

    replog log-dirs describe [--broker-list 1,2] [--topic-list a,b] [--json]
        [--command-config FILE] [--bootstrap-server HOST:PORT,... | --data-dir DIR]

Output: Kafka's lines -- `Querying brokers for log directories information`, then `Received
log directory information from brokers 1,2,3` -- then a table, one line per replica (a log dir
holding none, or failing, gets one line of its own, `-` in the replica's columns):

    BROKER  LOG-DIR   PARTITION  SIZE  OFFSET-LAG  FUTURE  LOG-START  LOG-END  HW  DIRTY-RATIO
    1       /data/n1  t-0        1234  0           no      0          10       10  -

(and an ERROR column last, `-` for a dir that answered)

With `--json`, only Kafka's JSON document, on one line (what kafka-log-dirs.sh prints after its
two lines):

    {"version":1,"brokers":[{"broker":1,"logDirs":[{"logDir":"/data/n1","error":null,
     "partitions":[{"partition":"t-0","size":1234,"offsetLag":0,"isFuture":false,
     "logStartOffset":0,"logEndOffset":10,"highWatermark":10,"dirtyRatio":null}]}]}]}

Rules:
- Brokers come from the cluster (DescribeCluster, through the usual bootstrap: Kafka listeners
  at `--bootstrap-server`, else the local cluster's in `--data-dir`); by default every
  unfenced broker. `--broker-list` may name any registered broker (fenced ones too); an id the
  cluster does not know is an error naming it and the known ones (Kafka's check).
- Each broker is asked for itself (Kafka's DescribeLogDirs at its Kafka listener). `size` is
  the bytes of the replica's segment files; `offsetLag` is Kafka's max(0, HW - LEO), 0 in
  practice; `logStartOffset`, `logEndOffset` and `highWatermark` (the table's LOG-START,
  LOG-END and HW) are replog's additions, carried in replog's tagged field of the answer
  (`replog.kafka.replica_offsets_tag`; -1 from a broker without it), so the replicas'
  progress can be compared.
- `dirtyRatio` (DIRTY-RATIO) is a compacted log's dirty ratio, the log cleaner's (its bytes
  not cleaned yet over its bytes below the active segment and the high watermark, from the
  log dir's cleaner-offset-checkpoint), to 3 decimals in the table; null (`-`) for a log that
  does not compact, or from a broker that does not send replog's tag for it.
- `--topic-list a,b` keeps only those topics' replicas (every topic, internal ones included, by
  default). Brokers are listed in id order; partitions as each broker lists them.
- A broker that does not answer (down, or still recovering its logs) is one stderr line naming
  it and the error; the others are still printed, and the exit code is 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from replog.cli.arguments import add_command
from replog.cli.client_connection import add_client_connection_arguments, client_config
from replog.cli.table import print_table
from replog.errors import ReplogError
from replog.net_address import format_host_port

if TYPE_CHECKING:
    from replog.admin.kafka_admin_client import KafkaAdminClient
    from replog.replication.messages import DescribeLogDirsResponse

QUERYING = "Querying brokers for log directories information"
REQUEST_TIMEOUT_S = 10.0


def id_list(text: str) -> list[int]:
    """An argparse type: `1,2,3` -> [1, 2, 3]."""
    try:
        ids = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected broker ids like 1,2,3") from None
    if not ids:
        raise argparse.ArgumentTypeError(f"{text!r}: expected broker ids like 1,2,3")
    return ids


def name_list(text: str) -> list[str]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"{text!r}: expected topic names like a,b")
    return names


def chosen_brokers(
    brokers: Mapping[int, str], unfenced: Collection[int], wanted: Sequence[int] | None
) -> dict[int, str]:
    """The brokers to ask, id -> address: `wanted` (every one registered) or every unfenced
    one."""
    if wanted is None:
        return {b: brokers[b] for b in sorted(brokers) if b in unfenced}
    missing = sorted(set(wanted) - set(brokers))
    if missing:
        raise ReplogError(
            "--broker-list: the given brokers do not exist: "
            f"{','.join(map(str, missing))}; current brokers: "
            f"{','.join(map(str, sorted(brokers))) or 'none'}"
        )
    return {b: brokers[b] for b in sorted(set(wanted))}


def broker_json(broker_id: int, described: DescribeLogDirsResponse) -> dict[str, Any]:
    """One broker's entry of Kafka's JSON document, with replog's three offsets added."""
    return {
        "broker": broker_id,
        "logDirs": [
            {
                "logDir": d.log_dir,
                "error": None if d.error is None else d.error.error_name,
                "partitions": [
                    {
                        "partition": f"{r.topic}-{r.partition}",
                        "size": r.size,
                        "offsetLag": r.offset_lag,
                        "isFuture": r.is_future,
                        "logStartOffset": r.log_start_offset,
                        "logEndOffset": r.log_end_offset,
                        "highWatermark": r.high_watermark,
                        "dirtyRatio": r.dirty_ratio,
                    }
                    for r in d.replicas
                ],
            }
            for d in described.log_dirs
        ],
    }


def document(answers: Mapping[int, DescribeLogDirsResponse]) -> dict[str, Any]:
    return {
        "version": 1,
        "brokers": [broker_json(b, answers[b]) for b in sorted(answers)],
    }


TABLE_HEADER = (
    "BROKER", "LOG-DIR", "PARTITION", "SIZE", "OFFSET-LAG", "FUTURE", "LOG-START", "LOG-END", "HW",
    "DIRTY-RATIO", "ERROR",
)  # fmt: skip


def table(answers: Mapping[int, DescribeLogDirsResponse]) -> list[list[str]]:
    """The text mode's table (module docstring), header first."""
    lines = [list(TABLE_HEADER)]
    for broker_id in sorted(answers):
        for d in answers[broker_id].log_dirs:
            head = [str(broker_id), d.log_dir]
            error = "-" if d.error is None else d.error.error_name
            if not d.replicas:
                lines.append([*head, *["-"] * 8, error])
            for r in d.replicas:
                lines.append(
                    [
                        *head,
                        f"{r.topic}-{r.partition}",
                        str(r.size),
                        str(r.offset_lag),
                        "yes" if r.is_future else "no",
                        str(r.log_start_offset),
                        str(r.log_end_offset),
                        str(r.high_watermark),
                        "-" if r.dirty_ratio is None else f"{r.dirty_ratio:.3f}",
                        error,
                    ]
                )
    return lines


def received_line(broker_ids: Sequence[int]) -> str:
    return f"Received log directory information from brokers {','.join(map(str, broker_ids))}"


# --- the shell -----------------------------------------------------------------------------------


def cluster_brokers(admin: KafkaAdminClient) -> tuple[dict[int, str], set[int]]:
    """Every registered broker's id -> its Kafka listener, and the ids of the unfenced ones."""
    cluster = admin.describe_cluster()
    addresses = {b.broker_id: format_host_port(b.host, b.port) for b in cluster.brokers}
    return addresses, {b.broker_id for b in cluster.brokers if not b.fenced}


def run_describe(args: argparse.Namespace) -> int:
    # The admin client and the generated messages are loaded when the command runs, not by
    # `--help`.
    from replog.admin.kafka_admin_client import KafkaAdminClient
    from replog.client.config import security_sasl
    from replog.client.tls_connection import security_ssl_context

    config = client_config(
        args,
        kind="admin",
        props_option="command_property",
        defaults={"client.id": "replog-log-dirs"},
    )
    if not args.json:
        print(QUERYING, flush=True)
    bootstrap = str(config["bootstrap.servers"])
    with KafkaAdminClient(
        bootstrap,
        client_id=str(config["client.id"]),
        request_timeout_s=REQUEST_TIMEOUT_S,
        tls=security_ssl_context(config),
        sasl=security_sasl(config),
    ) as admin:
        brokers = chosen_brokers(*cluster_brokers(admin), args.broker_list)
        answers: dict[int, DescribeLogDirsResponse] = {}
        failed = 0
        for broker_id, address in brokers.items():
            try:
                answers[broker_id] = admin.describe_log_dirs_at(
                    address, args.topic_list or (), timeout_ms=int(REQUEST_TIMEOUT_S * 1000)
                )
            except ReplogError as error:
                failed += 1
                print(
                    f"replog log-dirs: broker {broker_id} at {address}: "
                    f"{type(error).__name__}: {error}",
                    file=sys.stderr,
                )
    if args.json:
        print(json.dumps(document(answers), separators=(",", ":")))
    else:
        print(received_line(sorted(answers)))
        print_table(table(answers))
    return 1 if failed else 0


def register(commands: Any) -> None:
    action = add_command(
        commands,
        "log-dirs",
        __doc__,
        headed=False,
    )
    describe = action(
        "describe",
        "each broker's log dirs and the size, offsets and dirty ratio of every replica in them",
        run_describe,
    )
    describe.set_defaults(command_property=None)
    describe.add_argument(
        "--broker-list",
        type=id_list,
        metavar="IDS",
        help="the brokers to ask, e.g. 1,2 (default: every unfenced broker)",
    )
    describe.add_argument(
        "--topic-list",
        type=name_list,
        metavar="TOPICS",
        help="only these topics, e.g. a,b (default: every topic)",
    )
    describe.add_argument(
        "--json", action="store_true", help="print Kafka's JSON document only, instead of a table"
    )
    add_client_connection_arguments(describe)
