"""Where a command's clients (`replog perf`, `produce`, `consume`, ...) connect, and their config.

- Brokers: `--bootstrap-server host:port,...`, else `bootstrap.servers` from the command's
  props or config file, else the brokers of the local cluster in `--data-dir` (default
  `./.replog/cluster`, from its `cluster.json`). `--bootstrap-server` wins over the props.
  Local brokers are tried with a TCP connect first (`LocalCluster.require_answering`): when
  none accepts one, the command stops at once saying the cluster does not run, instead of
  retrying for `max.block.ms` (60 s), as it must for an address the user named.
- Config: the command's defaults < its config file < its `KEY=VALUE` props < what the command
  forces; a malformed or repeated key, or an unreadable file, is a one-line `ReplogError`.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence

from replog.cli.arguments import parse_key_values
from replog.cli.local_cluster import DEFAULT_DATA_DIR, LocalCluster
from replog.config import parse_properties
from replog.errors import ReplogError


def add_client_connection_arguments(parser: argparse.ArgumentParser) -> None:
    """`--bootstrap-server` and `--data-dir`, as every client command takes them."""
    parser.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT,...",
        help="brokers to start from (default: bootstrap.servers from the props, else the "
        "local cluster's brokers)",
    )
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        help=f"the local cluster whose brokers to use (default: {DEFAULT_DATA_DIR})",
    )


def parse_props(items: Sequence[str] | None, option: str) -> dict[str, str]:
    """`KEY=VALUE` arguments -> a dict; a malformed or repeated key is a one-line error."""
    return parse_key_values(items, option, strip_values=True)


def read_config_file(path: str | None, option: str) -> dict[str, str]:
    if path is None:
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise ReplogError(f"{option} {path}: {exc.strerror or exc}") from None
    return parse_properties(text, source=path)


def local_bootstrap(data_dir: str | None) -> str:
    """The brokers of the local cluster in `data_dir` as a bootstrap.servers value."""
    cluster = LocalCluster.load(data_dir or DEFAULT_DATA_DIR)
    addresses = [
        node.listeners.get("BROKER") or next(iter(node.listeners.values()))
        for node in cluster.nodes
        if "broker" in node.roles and node.listeners
    ]
    if not addresses:
        raise ReplogError(
            f"the local cluster in {cluster.directory} has no brokers; pass --bootstrap-server"
        )
    cluster.require_answering(addresses, "broker")
    return ",".join(addresses)


def keys_named(config: Mapping[str, object], dotted: str) -> list[str]:
    """The keys of `config` that name the setting `dotted`, in either spelling the client
    configs accept (`auto.offset.reset`, `auto_offset_reset`)."""
    return [k for k in config if k.strip().replace("_", ".") == dotted]


def client_config(
    args: argparse.Namespace,
    *,
    file_option: str,
    props_option: str,
    defaults: Mapping[str, object],
    forced: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """The config a command's client gets: `defaults` < config file < props < `forced` and
    `--bootstrap-server`; the local cluster's brokers when nothing names any."""
    config: dict[str, object] = dict(defaults)
    config.update(read_config_file(getattr(args, file_option), "--" + file_option))
    config.update(parse_props(getattr(args, props_option), "--" + props_option.replace("_", "-")))
    config.update(forced or {})
    named = keys_named(config, "bootstrap.servers")
    if args.bootstrap_server is not None:
        for key in named:
            del config[key]
        config["bootstrap.servers"] = args.bootstrap_server
    elif not named:
        config["bootstrap.servers"] = local_bootstrap(args.data_dir)
    return config
