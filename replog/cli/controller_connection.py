"""Where an admin command (`replog topics`, ...) finds the controllers, and its client for them.

The same convention as `replog quorum describe`: `--bootstrap-server host:port,...` (entries may
be `id@host:port`), tried in turn; without it, the controllers of the local cluster in
`--data-dir` (default `./.replog/cluster`, read from its `cluster.json`). When both are given,
the bootstrap list is asked and the local cluster's node ids still name addresses, so a
redirect to "node 3" can be followed. The local cluster's controllers alone are tried with a TCP
connect first: none accepting one is a one-line error at once ("is it running?"), not a wait
of `--timeout` for an election that cannot happen.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from replog.cli.arguments import positive_seconds
from replog.cli.local_cluster import DEFAULT_DATA_DIR, LocalCluster

if TYPE_CHECKING:
    # Imported where a command connects, not by building its parser: gRPC and the generated
    # messages are most of what `--help` would otherwise load.
    from replog.admin.controller_client import ControllerClient

DEFAULT_TIMEOUT_S = 10.0  # long enough for a controller election, short enough at a terminal


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT,...",
        help="controllers to ask, in turn (default: the local cluster's controllers)",
    )
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        help=f"the local cluster whose controllers to ask (default: {DEFAULT_DATA_DIR})",
    )
    parser.add_argument(
        "--timeout",
        type=positive_seconds,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help="give up when no active controller answers within this time "
        f"(default: {DEFAULT_TIMEOUT_S:g})",
    )


def bootstrap_and_addresses(args: argparse.Namespace) -> tuple[list[str], dict[int, str]]:
    """The addresses to try in turn and the node ids known to listen at some of them: from
    `--bootstrap-server`, else (and also with `--data-dir`) from the local cluster's files."""
    from replog.admin.bootstrap import parse_bootstrap

    addresses: dict[int, str] = {}
    if args.data_dir is not None or args.bootstrap_server is None:
        cluster = LocalCluster.load(args.data_dir or DEFAULT_DATA_DIR)
        addresses = cluster.controller_addresses()
        if args.bootstrap_server is None:
            cluster.require_answering(list(addresses.values()), "controller")
    bootstrap: list[str] = list(addresses.values())
    if args.bootstrap_server is not None:
        parsed = parse_bootstrap(args.bootstrap_server, what="--bootstrap-server")
        bootstrap = list(parsed.addresses)
        addresses.update(parsed.node_addresses)
    return bootstrap, addresses


def connect(args: argparse.Namespace) -> ControllerClient:
    """A client for the controllers the arguments name (see the module docstring)."""
    from replog.admin.controller_client import ControllerClient

    bootstrap, addresses = bootstrap_and_addresses(args)
    return ControllerClient(
        bootstrap,
        node_addresses=addresses,
        default_timeout_s=args.timeout,
        request_timeout_s=args.timeout,
    )
