"""`--command-config FILE`: a properties file of client configs for every client a command
builds, as Kafka's tools take it (`security.protocol`, the ssl and sasl settings, `client.id`,
...).

Rules:
- Read and checked once, when the arguments are parsed: a missing or unreadable file, a line
  that is no `key=value`, a key that is no client config of any kind (producer, consumer,
  admin), a value its setting refuses, or TLS or SASL settings that do not fit is a usage
  error naming the file and the key. The TLS files it names are read when the command builds
  its clients (a `ConfigError` naming the key and the file).
- One file may serve every command, confluent-kafka and `kcat -F` alike (the
  client.properties `replog cluster start --security ssl` writes): each client takes the keys
  of its kind, and leaves out another kind's (`group.id` for an admin command), as librdkafka
  leaves out another client type's properties.
"""

from __future__ import annotations

import argparse
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from replog.config import parse_properties
from replog.errors import ConfigError, ReplogError

if TYPE_CHECKING:
    from replog.wire.sasl_authentication import SaslCredentials

OPTION = "--command-config"


@dataclass(frozen=True)
class CommandConfig:
    """A checked `--command-config` file: its path and its properties."""

    path: str
    properties: Mapping[str, str]

    def for_kind(self, kind: str) -> dict[str, str]:
        """The properties that are settings of client `kind` ("producer", "consumer",
        "admin"): the rest is for other clients (module docstring)."""
        from replog.client.config import config_names

        names = config_names(kind)
        return {k: v for k, v in self.properties.items() if k.strip() in names}

    def sasl(self) -> SaslCredentials | None:
        """Who its clients authenticate as (None: no SASL)."""
        from replog.client.config import security_sasl

        return security_sasl(self.properties)

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context its security settings make (None: plaintext)."""
        from replog.client.tls_connection import security_ssl_context

        return security_ssl_context(self.properties)


def read_command_config(path: str) -> CommandConfig:
    """The checked file at `path` (module rules); a `ConfigError` names it and the key."""
    from replog.client.config import check_client_properties

    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not a text file ({exc.reason})") from None
    properties = parse_properties(text, source=path)
    check_client_properties(properties, source=path)
    return CommandConfig(path, properties)


def command_config_file(path: str) -> CommandConfig:
    """An argparse type: `read_command_config`, its error a usage error."""
    try:
        return read_command_config(path)
    except ReplogError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_command_config_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        OPTION,
        dest="command_config",
        type=command_config_file,
        metavar="FILE",
        help="a properties file of client configs (security.protocol, ssl and sasl settings, "
        "client.id, "
        "...) for every client the command builds; a local cluster started with --security "
        "ssl writes one: DIR/client.properties",
    )


def command_ssl_context(args: argparse.Namespace) -> ssl.SSLContext | None:
    """The TLS context of the command's `--command-config` (None: none given, or plaintext)."""
    config: CommandConfig | None = getattr(args, "command_config", None)
    return None if config is None else config.ssl_context()


def command_sasl(args: argparse.Namespace) -> SaslCredentials | None:
    """Who the command's clients authenticate as, by its `--command-config` (None: no SASL)."""
    config: CommandConfig | None = getattr(args, "command_config", None)
    return None if config is None else config.sasl()
