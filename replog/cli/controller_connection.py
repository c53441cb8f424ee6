"""Where an admin command (`replog topics`, `configs`, `reassign`, `elect-leaders`, `quorum
describe`) reaches the cluster, and its admin client: Kafka's admin APIs on Kafka listeners.

As Kafka's tools: `--bootstrap-server host:port,...` names brokers' Kafka listeners, tried in
turn (any of them answers every admin request: a broker forwards a change to the active
controller); a command that also takes `--bootstrap-controller` may name controllers' Kafka
listeners instead. Without either, `bootstrap.servers` of `--command-config`'s file, else the
local cluster in `--data-dir` (default
`./.replog/cluster`, its `cluster.json`) gives its brokers' (or controllers') Kafka listeners;
(a quorum of controllers only: its controllers'); without a local cluster,
`127.0.0.1:9092`, Kafka's default. Addresses the user did not name are
tried with a TCP connect first: none accepting one is a one-line error at once ("is it
running?"), not a wait of `--timeout`; a local cluster started with `--security ssl` without
`--command-config` is a one-line error naming its client.properties. `--command-config FILE`
gives the admin client its
`security.protocol`, TLS settings and `client.id` (`command_config`); its timeouts are
`--timeout`.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from replog.cli.arguments import positive_seconds
from replog.cli.command_config import (
    CommandConfig,
    add_command_config_argument,
    command_sasl,
    command_ssl_context,
)
from replog.cli.local_cluster import DEFAULT_DATA_DIR, LocalCluster
from replog.errors import ReplogError

if TYPE_CHECKING:
    # Imported where a command connects, not by building its parser: the admin client and
    # the generated messages are most of what `--help` would otherwise load.
    from replog.admin.kafka_admin_client import KafkaAdminClient

DEFAULT_TIMEOUT_S = 10.0  # long enough for a controller election, short enough at a terminal
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"  # Kafka's default listener


def add_connection_arguments(parser: argparse.ArgumentParser, *, controllers: bool = False) -> None:
    """`--bootstrap-server` (and with `controllers`, `--bootstrap-controller`), `--data-dir`,
    `--command-config` and `--timeout`."""
    where = parser.add_mutually_exclusive_group() if controllers else parser
    where.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT,...",
        help="Kafka listeners of brokers to ask, in turn (default: the local cluster's, else "
        f"{DEFAULT_BOOTSTRAP})",
    )
    if controllers:
        where.add_argument(
            "--bootstrap-controller",
            metavar="HOST:PORT,...",
            help="Kafka listeners of controllers to ask instead, in turn",
        )
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        help=f"the local cluster whose Kafka listeners to ask (default: {DEFAULT_DATA_DIR})",
    )
    add_command_config_argument(parser)
    parser.add_argument(
        "--timeout",
        type=positive_seconds,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"give up when the cluster does not answer within this time (default: "
        f"{DEFAULT_TIMEOUT_S:g})",
    )


def bootstrap(args: argparse.Namespace) -> list[str]:
    """The Kafka listeners to ask, in turn (module docstring)."""
    return _bootstrap(args)[0]


def _bootstrap(args: argparse.Namespace) -> tuple[list[str], bool]:
    """The Kafka listeners to ask, and whether they are controllers' (whose DescribeCluster
    describes controllers: KIP-919)."""
    from replog.admin.bootstrap import parse_bootstrap

    for option in ("bootstrap_server", "bootstrap_controller"):
        named = getattr(args, option, None)
        if named is not None:
            flag = "--" + option.replace("_", "-")
            addresses = list(parse_bootstrap(named, what=flag).addresses)
            return addresses, option == "bootstrap_controller"
    command: CommandConfig | None = getattr(args, "command_config", None)
    servers = None if command is None else command.properties.get("bootstrap.servers")
    if command is not None and servers:  # as a client command takes it from its config
        where = f"{command.path}: bootstrap.servers"
        return list(parse_bootstrap(servers, what=where).addresses), False
    return _local_bootstrap(
        args.data_dir,
        controllers=hasattr(args, "bootstrap_controller"),
        secured=command is not None and "security.protocol" in command.properties,
    )


def default_bootstrap(
    data_dir: str | None, *, controllers: bool = False, secured: bool = False
) -> list[str]:
    """The brokers' Kafka listeners of the local cluster in `data_dir` (default
    `./.replog/cluster`; with `controllers`, its controllers' when it has no broker), or with
    no `data_dir` and no local cluster 127.0.0.1:9092, checked to accept a TCP connection
    (module docstring). `secured`: the client has security settings (a cluster started with
    `--security ssl` is refused without, naming its client.properties)."""
    return _local_bootstrap(data_dir, controllers=controllers, secured=secured)[0]


def _local_bootstrap(
    data_dir: str | None, *, controllers: bool, secured: bool
) -> tuple[list[str], bool]:
    """`default_bootstrap`, and whether the addresses are controllers'."""
    from replog.cli.local_cluster import accepts_connections

    directory = data_dir or DEFAULT_DATA_DIR
    if data_dir is None and not LocalCluster.exists(directory):
        if not accepts_connections(DEFAULT_BOOTSTRAP):
            raise ReplogError(
                f"nothing answers at {DEFAULT_BOOTSTRAP} (the default) and there is no local "
                f"cluster in {directory}: pass --bootstrap-server, or start one with "
                "`replog cluster start`"
            )
        return [DEFAULT_BOOTSTRAP], False
    cluster = LocalCluster.load(directory)
    if not secured and cluster.client_config_path is not None:
        raise ReplogError(
            f"the local cluster in {cluster.directory} takes TLS clients only (started with "
            f"--security ssl): pass --command-config {cluster.client_config_path}"
        )
    addresses = [n.kafka_address for n in cluster.nodes if n.kafka_address]
    of_controllers = not addresses and controllers
    if of_controllers:
        # A quorum of controllers only (`--roles controller`) answers on its controllers'.
        addresses = [
            n.kafka_controller_address for n in cluster.nodes if n.kafka_controller_address
        ]
    if not addresses:
        raise ReplogError(
            f"the local cluster in {cluster.directory} has no brokers with a Kafka listener; "
            "pass --bootstrap-server"
        )
    cluster.require_answering(addresses, "Kafka listener")
    return addresses, of_controllers


def connect(args: argparse.Namespace) -> KafkaAdminClient:
    """An admin client of the Kafka listeners the arguments name (module docstring)."""
    from replog.admin.kafka_admin_client import KafkaAdminClient

    addresses, controllers = _bootstrap(args)
    from replog.admin.kafka_admin_client import CLIENT_ID

    command = args.command_config
    given = {} if command is None else command.for_kind("admin")
    return KafkaAdminClient(
        addresses,
        client_id=given.get("client.id", CLIENT_ID),
        default_timeout_s=args.timeout,
        request_timeout_s=args.timeout,
        controllers=controllers,
        tls=command_ssl_context(args),
        sasl=command_sasl(args),
    )
