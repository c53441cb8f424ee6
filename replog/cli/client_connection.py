"""Where a command's clients (`replog perf`, `produce`, `consume`, ...) connect, and their config.

- Brokers' Kafka listeners: `--bootstrap-server host:port,...`, else `bootstrap.servers` from
  the command's props or config file, else the Kafka listeners of the local cluster in
  `--data-dir` (default `./.replog/cluster`, from its `cluster.json`), else (no local cluster)
  `127.0.0.1:9092`, Kafka's default. `--bootstrap-server` wins over the props. A local
  cluster started with `--security ssl` is refused, naming its client.properties, to a
  client without a `security.protocol`. Addresses the
  user did not name are tried with a TCP connect first: when none accepts one, the command
  stops at once saying the cluster does not run, instead of retrying for `max.block.ms`
  (60 s), as it must for an address the user named.
- Config: the command's defaults < `--command-config` (the keys of the client's kind:
  `command_config`) < its own config file (`--producer.config`, `--consumer.config`) < its
  `KEY=VALUE` props < what the command forces; a malformed or repeated key, or an unreadable
  file, is a one-line `ReplogError`.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence

from replog.cli.arguments import parse_key_values
from replog.cli.command_config import CommandConfig, add_command_config_argument
from replog.cli.local_cluster import DEFAULT_DATA_DIR
from replog.config import parse_properties
from replog.errors import ReplogError


def add_client_connection_arguments(parser: argparse.ArgumentParser) -> None:
    """`--bootstrap-server`, `--data-dir` and `--command-config`, as every client command
    takes them."""
    parser.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT,...",
        help="Kafka listeners of brokers to start from (default: bootstrap.servers from the "
        "props, else the local cluster's, else 127.0.0.1:9092)",
    )
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        help=f"the local cluster whose Kafka listeners to use (default: {DEFAULT_DATA_DIR})",
    )
    add_command_config_argument(parser)


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


def local_bootstrap(data_dir: str | None, *, secured: bool = False) -> str:
    """The Kafka listeners of the local cluster in `data_dir` (else, with no `data_dir` and no
    local cluster, 127.0.0.1:9092) as a bootstrap.servers value (module docstring);
    `secured`: the client has a `security.protocol`."""
    from replog.cli.controller_connection import default_bootstrap

    return ",".join(default_bootstrap(data_dir, secured=secured))


def keys_named(config: Mapping[str, object], dotted: str) -> list[str]:
    """The keys of `config` that name the setting `dotted`, in either spelling the client
    configs accept (`auto.offset.reset`, `auto_offset_reset`)."""
    return [k for k in config if k.strip().replace("_", ".") == dotted]


def client_config(
    args: argparse.Namespace,
    *,
    kind: str,
    props_option: str,
    defaults: Mapping[str, object],
    file_option: str | None = None,
    forced: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """The config a command's client of `kind` ("producer", "consumer", "admin") gets:
    `defaults` < `--command-config` < its config file < props < `forced` and
    `--bootstrap-server`; the local cluster's brokers when nothing names any."""
    config: dict[str, object] = dict(defaults)
    command: CommandConfig | None = args.command_config
    if command is not None:
        config.update(command.for_kind(kind))
    if file_option is not None:
        config.update(read_config_file(getattr(args, file_option), "--" + file_option))
    config.update(parse_props(getattr(args, props_option), "--" + props_option.replace("_", "-")))
    config.update(forced or {})
    named = keys_named(config, "bootstrap.servers")
    if args.bootstrap_server is not None:
        for key in named:
            del config[key]
        config["bootstrap.servers"] = args.bootstrap_server
    elif not named:
        secured = bool(keys_named(config, "security.protocol"))
        config["bootstrap.servers"] = local_bootstrap(args.data_dir, secured=secured)
    return config
