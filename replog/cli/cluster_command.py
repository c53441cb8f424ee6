"""`replog cluster start|status|stop|kill|restart`: a local multi-process cluster in one directory.

- `start [--nodes N] [--data-dir DIR] [--base-port P] [--kafka-base-port K] [--fresh]
  [--override KEY=VALUE] [--security plaintext|ssl|sasl_ssl]`:
  writes each node's `server.properties` and `DIR/cluster.json` (the nodes, their roles and
  listeners; docs/operations.md describes these files), starts
  one `replog node` process per node in the background (its own process group in this
  command's session, docs/operations.md; output appended to
  `node-<id>/node.log`, pid in `node-<id>/node.pid`), waits until the quorum has a leader that
  committed its epoch, every node answers and every broker is registered and unfenced (so a
  topic created right after `start` can place its replicas on all of them), saying each phase
  on stderr as it passes (and, past 5 s, what it waits for), and prints the endpoints. On a
  directory whose cluster is stopped it starts the same nodes again, keeping their data, on
  the ports `--base-port`/`--kafka-base-port` name (the nodes' configs rewritten) or its own;
  `--fresh` deletes it and starts anew, once every check (settings, ports, directory) passed.
  A port in use names the flag that moves it. An `--override` key no node reads (a typo:
  `num.partitons`) is a warning on stderr naming the closest known key, and the cluster starts
  anyway, as Kafka warns about unknown keys without refusing them. It ends with the clients'
  `bootstrap.servers` (the Kafka listeners), the tools' `bootstrap.controllers`, and the
  internal gRPC listeners, which only the nodes use. With `--security ssl` every listener is
  TLS: the brokers' Kafka listeners are `SSL://` with client certificates required
  (`ssl.client.auth=required`), so are the controllers' Kafka listeners, and the links between
  the nodes are mutual TLS open to the nodes' certificates only (`super.users`); the start
  makes a CA, a certificate per node (naming 127.0.0.1 and localhost; its server and client
  certificate) and one for clients in `DIR/tls` (a later start reuses them), and writes
  `DIR/client.properties`
  (bootstrap.servers, security.protocol=SSL and librdkafka's ssl.ca.location,
  ssl.certificate.location, ssl.key.location), which every `replog` command takes as
  `--command-config`, and confluent-kafka and `kcat -F` read as it is; it ends naming that
  file; beside it `DIR/client-java.properties`, the same in the names of Kafka's Java tools
  (PEM truststore and keystore). With `--security sasl_ssl` the listeners are `SASL_SSL://`
  (TLS without client certificates, then SCRAM-SHA-512), the authorizer is on with
  `allow.everyone.if.no.acl.found=false`, and the administrator `admin`, a super user, signs
  in with a password made by the start of a new cluster, kept in `DIR/admin.password` and in
  the two client files (each readable by its owner only), printed nowhere
  (docs/security.md, "TLS and the local cluster"); the links between the nodes are mutual TLS
  as under ssl, the controllers' Kafka listeners stay PLAINTEXT.
- `status [--json]`: first the clients' `bootstrap.servers` line (the Kafka listeners; `--json`
  key "bootstrap_servers", null when no broker serves one), for an ssl or sasl_ssl cluster the
  client.properties to pass as `--command-config` (`--json` keys "security",
  "client_config" and "java_client_config", null for a plaintext cluster); then per node: id,
  roles, pid, its Kafka listener's address (KAFKA, key `kafka`; `-`/null when it serves none), its
  controller's Kafka listener, for `--bootstrap-controller` (KAFKA CONTROLLER, key
  "kafka_controller"), its internal gRPC listener (INTERNAL (gRPC), key `listener`), alive (the
  process exists and is not a zombie), whether it answers (its metrics endpoint gives its Raft
  gauges and its listener accepts), the leader and quorum epoch it knows, and its Prometheus
  metrics URL (METRICS; `-` for a cluster written before metrics existed).
- `stop`: SIGTERM to every node (each resigns and closes its log), SIGKILL after `--timeout`.
- `kill NODE_ID`: SIGKILL one node. `restart NODE_ID`: start a node that is not running; it
  returns once the node answers and, when a majority of the controllers runs, its broker runs
  again (after a crash, once the killed process's session expires), as `start` waits.

Defaults: 3 nodes, `./.replog/cluster`, base port 19092 (node i's internal gRPC listener is
base + i - 1, its metrics base + 100 + i - 1), Kafka base port 9092 (node i, a broker, serves
Kafka's protocol, for clients, on 127.0.0.1:9092 + i - 1; a controller on 127.0.0.1:9192 + i -
1); `--base-port P` alone puts a new cluster's Kafka listeners at P + 200 + i - 1
(`local_cluster.kafka_base_port_for`). A node's one gRPC listener serves every role it has
between the nodes; `start` shows it with the roles it serves ("127.0.0.1:19092 (internal
gRPC: broker+controller)"), not by its `server.properties` name.
Every refusal (a port in use, a cluster already running, an unknown node id) is one line.
"""

from __future__ import annotations

import argparse
from typing import Any

from replog.cli.arguments import add_documented_command, at_least, deferred, positive_seconds
from replog.cli.local_cluster import (
    DEFAULT_BASE_PORT,
    DEFAULT_DATA_DIR,
    DEFAULT_KAFKA_BASE_PORT,
    DEFAULT_NODE_COUNT,
    DEFAULT_ROLES,
    DERIVED_KAFKA_PORT_OFFSET,
    SECURITY_CHOICES,
)

STOP_TIMEOUT_S = 90.0

# Each action is its module's `run_<action>`, imported when it runs: `start` and `restart`
# load the node's configuration and the admin client (gRPC), which `--help` does not need;
# `status`, `stop` and `kill` load neither, and start in the time of a bare interpreter.
RUNS = {
    "start": "replog.cli.cluster",
    "restart": "replog.cli.cluster",
    "status": "replog.cli.cluster_status",
    "stop": "replog.cli.cluster_stop",
    "kill": "replog.cli.cluster_stop",
}


def _roles(text: str) -> tuple[str, ...]:
    roles = tuple(sorted({r.strip() for r in text.split(",") if r.strip()}))
    if roles not in (("broker", "controller"), ("controller",)):
        raise argparse.ArgumentTypeError(
            f"{text!r}: every node of a local cluster is a voter: use broker,controller or "
            "controller"
        )
    return roles


def register(commands: Any) -> None:
    parser = add_documented_command(
        commands,
        "cluster",
        __doc__,
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    def action(name: str, help_text: str, run: str) -> argparse.ArgumentParser:
        sub: argparse.ArgumentParser = actions.add_parser(name, help=help_text)
        sub.add_argument(
            "--data-dir",
            metavar="DIR",
            default=DEFAULT_DATA_DIR,
            help=f"the cluster's directory (default: {DEFAULT_DATA_DIR})",
        )
        sub.set_defaults(run=deferred(RUNS[name], run))
        return sub

    start = action(
        "start",
        "write the configs, start the nodes, wait for a leader",
        "run_start",
    )
    start.add_argument(
        "--nodes",
        type=at_least(1),
        metavar="N",
        help=f"how many nodes (default: {DEFAULT_NODE_COUNT})",
    )
    start.add_argument(
        "--base-port",
        type=at_least(1),
        metavar="PORT",
        help=f"node i's internal gRPC listener is base + i - 1, its metrics base + 100 + i - 1 "
        f"(default: {DEFAULT_BASE_PORT}); without --kafka-base-port a new cluster's Kafka "
        f"listeners follow, at base + {DERIVED_KAFKA_PORT_OFFSET} + i - 1; a stopped cluster "
        "moves there with its data",
    )
    start.add_argument(
        "--kafka-base-port",
        type=at_least(1),
        metavar="PORT",
        help="node i (a broker) serves Kafka's protocol, for clients, on 127.0.0.1:PORT + i - 1, "
        "and as a controller on PORT + 100 + i - 1 (default: "
        f"{DEFAULT_KAFKA_BASE_PORT}, or --base-port + {DERIVED_KAFKA_PORT_OFFSET} when "
        "--base-port is given, so clusters on different base ports never share a Kafka port; "
        "a stopped cluster moves there with its data, and keeps its own without this flag)",
    )
    start.add_argument(
        "--fresh", action="store_true", help="delete a stopped cluster's data and start anew"
    )
    start.add_argument(
        "--security",
        choices=SECURITY_CHOICES,
        help="how the listeners are secured: plaintext (the default for a new cluster); ssl: "
        "mutual TLS on every listener, the links between the nodes included, with certificates "
        "made for the cluster in DIR/tls and DIR/client.properties for clients; sasl_ssl: the "
        "brokers' listeners TLS, then SCRAM-SHA-512 with ACLs, an administrator (admin, a super "
        "user) whose password is in DIR/admin.password and DIR/client.properties, the links "
        "between the nodes mutual TLS; both write DIR/client-java.properties for Kafka's Java "
        "tools; a stopped cluster keeps its own",
    )
    start.add_argument(
        "--roles",
        type=_roles,
        default=DEFAULT_ROLES,
        metavar="ROLES",
        help="every node's process.roles: broker,controller (combined, the default) or "
        "controller (a metadata quorum without brokers)",
    )
    start.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a property for every node's server.properties (repeatable)",
    )
    start.add_argument(
        "--timeout",
        type=positive_seconds,
        metavar="SECONDS",
        default=30.0,
        help=(
            "seconds to wait for the cluster to come up: a leader, every node answering,"
            " every broker unfenced (default: 30)"
        ),
    )

    status = action(
        "status",
        "each node's pid, listener, liveness and view of the quorum",
        "run_status",
    )
    status.add_argument("--json", action="store_true", help="print JSON")

    stop = action("stop", "SIGTERM every node; SIGKILL after --timeout", "run_stop")
    stop.add_argument(
        "--timeout",
        type=positive_seconds,
        metavar="SECONDS",
        # Above a node's own bounds: a broker gives up its controlled shutdown after 30 s
        # (9 s when no controller answers), then closes its logs and writes its metadata
        # snapshot, which takes seconds at 100,000 replicas; a SIGKILL leaves every log to
        # recover and the metadata log to replay at the next start (a 100,000-partition
        # cluster killed at 30 s restarted in 154 s). A stop normally takes 1-3 s.
        default=STOP_TIMEOUT_S,
        help=f"seconds before SIGKILL (default: {STOP_TIMEOUT_S:g})",
    )

    kill = action("kill", "SIGKILL one node", "run_kill")
    kill.add_argument("node_id", type=int, metavar="NODE_ID")

    restart = action(
        "restart",
        "start a node that is not running, with its config",
        "run_restart",
    )
    restart.add_argument("node_id", type=int, metavar="NODE_ID")
    restart.add_argument(
        "--timeout",
        type=positive_seconds,
        metavar="SECONDS",
        default=30.0,
        help="seconds to wait for it to answer and its broker to run",
    )
