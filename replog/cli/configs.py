"""`replog configs describe|alter`: topic, broker and group configs, and users' SCRAM
credentials, like `kafka-configs.sh`.

- `describe --entity-type topics|brokers|groups [--entity-name N | --entity-default] [--all]
  [--json]`: per resource, kafka-configs.sh's lines

      Dynamic configs for topic orders are:
        retention.ms=86400000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=86400000}

  Without `--all`, only the values set on the resource itself (a topic's or a group's own
  configs, a broker's dynamic configs, or with `--entity-default` the cluster-wide broker
  defaults); with `--all` ("All configs for ..."), every config with its effective value and
  where it comes from. Without `--entity-name`, every topic (or every registered broker) is
  described; groups need `--entity-name` (any group id: a group's configs need no group). The
  synonym shown is the one the effective value comes from, with Kafka's source names
  (DYNAMIC_TOPIC_CONFIG, DYNAMIC_GROUP_CONFIG, DYNAMIC_BROKER_CONFIG,
  DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG) and the broker-level name
  where a topic's or group's value comes from a broker setting (`log.retention.ms`,
  `group.consumer.session.timeout.ms`). A sensitive value prints as `null`. `--json`
  prints `{"resources": [{"entity_type", "entity_name", "configs": [{"name", "value",
  "source", "is_default", "is_sensitive", "read_only"}]}]}` (entity_name null: the default).
- `alter --entity-type topics|brokers|groups (--entity-name N | --entity-default)
  [--add-config k1=v1,k2=[a,b]] [--delete-config k1,k2]`: one IncrementalAlterConfigs request
  (SET for each added key, DELETE for each deleted one); prints `Completed updating config for
  topic T.` (`broker N.`, `group G.`, or `Completed updating default config for brokers in the
  cluster.`). A group's keys are KIP-848's `consumer.session.timeout.ms` and
  `consumer.heartbeat.interval.ms`, within the broker's `group.consumer.min/max.*` bounds.
  As in Kafka, `--add-config` items are separated by commas, and a value holding commas (a
  list) is written in square brackets. A topic's `min.insync.replicas` set above its
  replication factor is accepted with a warning on stderr, as `topics create` warns.

- `--entity-type users`: `alter --entity-name alice --add-config
  'SCRAM-SHA-512=[iterations=8192,password=...]'` (iterations default to 4096; the password is
  salted on this side, never sent) or `--delete-config SCRAM-SHA-512`, printing `Completed
  updating config for user alice.`; `describe [--entity-name alice]` prints `SCRAM credential
  configs for user-principal 'alice' are SCRAM-SHA-512=iterations=8192`, per user.

Refusals, each one line on stderr with exit code 1: an unknown topic, an unknown or invalid
config key or value (the controller's INVALID_CONFIG message, naming the bound a group's
value crosses), a broker name that is not a
broker id, a key both added and deleted. Usage mistakes (an alter naming no resource or
nothing to change, `--entity-default` with topics) exit with code 2, as argparse's do.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from replog.cli.arguments import add_command
from replog.cli.controller_connection import add_connection_arguments, connect
from replog.cli.topics import MIN_ISR, min_isr_warning
from replog.cli.user_configs import run_alter_users, run_describe_users
from replog.errors import ReplogError, UnknownTopicOrPartitionError

if TYPE_CHECKING:
    from replog.admin.controller_results import (
        AlterConfigOp,
        ConfigEntry,
        ConfigResource,
        ResourceConfigs,
    )
    from replog.admin.kafka_admin_client import KafkaAdminClient

# --entity-type -> the name of its `ConfigResourceType`. The admin client's types, the
# generated messages behind them and the controller's config definitions are imported by the
# functions that run (`replog configs --help` loads none of them).
ENTITY_TYPES = {"topics": "TOPIC", "brokers": "BROKER", "groups": "GROUP"}
USERS = "users"  # SCRAM credentials, not configs (`user_configs`)

# Where a value set on the resource itself comes from, per kind of resource: what the
# describe without --all shows (Kafka's ConfigCommand filter).
_DYNAMIC_SOURCE = {
    "topic": "TOPIC_CONFIG",
    "group": "GROUP_CONFIG",
    "broker": "DYNAMIC_BROKER_CONFIG",
    "default": "DYNAMIC_DEFAULT_BROKER_CONFIG",
}
# The wire's names for a topic's or group's own value; Kafka's tools print the Admin client's.
_SHOWN_SOURCE = {"TOPIC_CONFIG": "DYNAMIC_TOPIC_CONFIG", "GROUP_CONFIG": "DYNAMIC_GROUP_CONFIG"}
_BROKER_LEVEL_SOURCES = {
    "DYNAMIC_BROKER_CONFIG",
    "DYNAMIC_DEFAULT_BROKER_CONFIG",
    "STATIC_BROKER_CONFIG",
}


# --- pure parts -------------------------------------------------------------------------------


def parse_add_config(text: str) -> dict[str, str]:
    """`k1=v1,k2=[a,b],k3=v3` -> {"k1": "v1", "k2": "a,b", "k3": "v3"} (kafka-configs.sh's
    syntax: commas inside square brackets belong to the value)."""
    items: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth = max(0, depth - 1)
        if char == "," and depth == 0:
            items.append("".join(current))
            current = []
        else:
            current.append(char)
    items.append("".join(current))
    if depth:
        raise ReplogError(f"--add-config {text!r}: a '[' is not closed")
    found: dict[str, str] = {}
    for item in items:
        if not item.strip():
            continue
        key, equals, value = item.partition("=")
        key = key.strip()
        if not equals or not key:
            raise ReplogError(f"--add-config {item!r}: expected KEY=VALUE")
        if key in found:
            raise ReplogError(f"--add-config {key}: given twice")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        found[key] = value
    if not found:
        raise ReplogError(f"--add-config {text!r}: names no config")
    return found


def parse_delete_config(text: str) -> list[str]:
    keys = [key.strip() for key in text.split(",") if key.strip()]
    if not keys:
        raise ReplogError(f"--delete-config {text!r}: names no config")
    repeated = sorted({k for k in keys if keys.count(k) > 1})
    if repeated:
        raise ReplogError(f"--delete-config {repeated[0]}: given twice")
    return keys


def alter_ops(added: dict[str, str], deleted: Sequence[str]) -> list[AlterConfigOp]:
    from replog.admin.controller_results import AlterConfigOp, AlterConfigOpType

    both = sorted(set(added) & set(deleted))
    if both:
        raise ReplogError(f"config {both[0]} is both added and deleted")
    return [AlterConfigOp(k, AlterConfigOpType.SET, v) for k, v in added.items()] + [
        AlterConfigOp(k, AlterConfigOpType.DELETE) for k in deleted
    ]


def resource_kind(resource: ConfigResource) -> str:
    """The kind of resource: "topic", "group", "broker" or "default" (the cluster-wide broker
    default)."""
    from replog.admin.controller_results import ConfigResourceType

    if resource.resource_type is ConfigResourceType.TOPIC:
        return "topic"
    if resource.resource_type is ConfigResourceType.GROUP:
        return "group"
    return "broker" if resource.name else "default"


def heading(resource: ConfigResource, describe_all: bool) -> str:
    if resource_kind(resource) == "default":
        return f"{'All' if describe_all else 'Default'} configs for brokers in the cluster are:"
    which = "All" if describe_all else "Dynamic"
    return f"{which} configs for {resource_kind(resource)} {resource.name} are:"


def shown_entries(configs: ResourceConfigs, describe_all: bool) -> list[ConfigEntry]:
    """The entries a describe prints: all, or those set on the resource itself."""
    if describe_all:
        return list(configs.entries)
    own = _DYNAMIC_SOURCE[resource_kind(configs.resource)]
    return [e for e in configs.entries if e.source == own]


def entry_line(resource: ConfigResource, entry: ConfigEntry) -> str:
    from replog.admin.controller_results import ConfigResourceType
    from replog.quorum.controller.config_definitions import GROUP_CONFIGS, TOPIC_CONFIGS

    value = _java_str(entry.value)
    source = shown_source(entry.source)
    synonym = entry.name
    definitions = {ConfigResourceType.TOPIC: TOPIC_CONFIGS, ConfigResourceType.GROUP: GROUP_CONFIGS}
    definition = definitions.get(resource.resource_type, {}).get(entry.name)
    if (
        entry.source in _BROKER_LEVEL_SOURCES
        and definition is not None
        and definition.broker_name is not None
    ):
        synonym = definition.broker_name
    sensitive = "true" if entry.is_sensitive else "false"
    return f"  {entry.name}={value} sensitive={sensitive} synonyms={{{source}:{synonym}={value}}}"


def shown_source(source: str) -> str:
    return _SHOWN_SOURCE.get(source, source)


def resource_json(configs: ResourceConfigs, entries: Sequence[ConfigEntry]) -> dict[str, Any]:
    from replog.admin.controller_results import ConfigResourceType

    resource = configs.resource
    return {
        "entity_type": "topics"
        if resource.resource_type is ConfigResourceType.TOPIC
        else "groups"
        if resource.resource_type is ConfigResourceType.GROUP
        else "brokers",
        "entity_name": resource.name or None,
        "configs": [
            {
                "name": e.name,
                "value": e.value,
                "source": shown_source(e.source),
                "is_default": e.is_default,
                "is_sensitive": e.is_sensitive,
                "read_only": e.read_only,
            }
            for e in entries
        ],
    }


def _java_str(value: str | None) -> str:
    return "null" if value is None else value


# --- the shell --------------------------------------------------------------------------------


def _named_resource(args: argparse.Namespace) -> ConfigResource | None:
    """The resource the arguments name; None: every resource of the type (describe only)."""
    from replog.admin.controller_results import ConfigResource, ConfigResourceType

    kind = ConfigResourceType[ENTITY_TYPES[args.entity_type]]
    if args.entity_default:
        if kind is not ConfigResourceType.BROKER:
            _usage_error(args, "--entity-default is only for --entity-type brokers")
        return ConfigResource.broker()
    if args.entity_name is None:
        if kind is ConfigResourceType.GROUP:
            _usage_error(args, "--entity-type groups needs --entity-name (a group id)")
        return None
    if kind is ConfigResourceType.TOPIC:
        if not args.entity_name:
            raise ReplogError("--entity-name: a topic name cannot be empty")
        return ConfigResource.topic(args.entity_name)
    if kind is ConfigResourceType.GROUP:
        if not args.entity_name:
            raise ReplogError("--entity-name: a group id cannot be empty")
        return ConfigResource.group(args.entity_name)
    try:
        broker_id = int(args.entity_name)
    except ValueError:
        broker_id = -1
    if broker_id < 0:
        raise ReplogError(
            f"--entity-name {args.entity_name!r}: a broker's name is its id, a whole number >= 0"
        )
    return ConfigResource.broker(broker_id)


def _refuse_users_default(args: argparse.Namespace) -> None:
    if args.entity_default:
        _usage_error(args, "--entity-default is only for --entity-type brokers")


def _usage_error(args: argparse.Namespace, message: str) -> NoReturn:
    parser: argparse.ArgumentParser = args.usage
    parser.error(message)  # exits with code 2


def _every_resource(client: KafkaAdminClient, entity_type: str) -> list[ConfigResource]:
    from replog.admin.controller_results import ConfigResource

    if entity_type == "topics":
        names = sorted(t.name for t in client.metadata().topics if t.error is None)
        return [ConfigResource.topic(name) for name in names]
    ids = sorted(b.broker_id for b in client.describe_cluster().brokers)
    return [ConfigResource.broker(i) for i in ids]


def run_describe(args: argparse.Namespace) -> int:
    if args.entity_type == USERS:
        _refuse_users_default(args)
        return run_describe_users(args)
    named = _named_resource(args)
    with connect(args) as client:
        resources = [named] if named is not None else _every_resource(client, args.entity_type)
        results = client.describe_configs(resources) if resources else []
    by_resource = {r.resource: r for r in results}
    described: list[ResourceConfigs] = []
    for resource in resources:
        found = by_resource.get(resource)
        if found is None:
            raise ReplogError(f"the controller's answer says nothing of {_what(resource)}")
        if found.error is not None:
            if named is None and isinstance(found.error, UnknownTopicOrPartitionError):
                continue  # deleted between the two requests
            if isinstance(found.error, UnknownTopicOrPartitionError):
                raise UnknownTopicOrPartitionError(f"topic {resource.name!r} does not exist")
            raise found.error
        described.append(found)
    if args.json:
        document = {"resources": [resource_json(r, shown_entries(r, args.all)) for r in described]}
        print(json.dumps(document, indent=2))
        return 0
    for configs in described:
        print(heading(configs.resource, args.all))
        for entry in shown_entries(configs, args.all):
            print(entry_line(configs.resource, entry))
    return 0


def run_alter(args: argparse.Namespace) -> int:
    from replog.admin.controller_errors import raise_first_error

    if args.add_config is None and args.delete_config is None:
        _usage_error(args, "nothing to alter: give --add-config and/or --delete-config")
    added = parse_add_config(args.add_config) if args.add_config is not None else {}
    deleted = parse_delete_config(args.delete_config) if args.delete_config is not None else []
    if args.entity_type == USERS:
        _refuse_users_default(args)
        return run_alter_users(args, added, deleted)
    resource = _named_resource(args)
    if resource is None:
        _usage_error(args, "alter needs --entity-name (or --entity-default for brokers)")
    ops = alter_ops(added, deleted)
    with connect(args) as client:
        results = client.incremental_alter_configs({resource: ops})
        if not any(r.resource == resource for r in results):
            raise ReplogError(f"the controller's answer says nothing of {_what(resource)}")
        raise_first_error(r for r in results if r.resource == resource)
        warning = _min_isr_warning(client, resource, added)
    if resource_kind(resource) == "default":
        print("Completed updating default config for brokers in the cluster.")
    else:
        print(f"Completed updating config for {resource_kind(resource)} {resource.name}.")
    if warning is not None:
        print(f"replog configs: {warning}", file=sys.stderr)
    return 0


def _min_isr_warning(
    client: KafkaAdminClient, resource: ConfigResource, added: Mapping[str, str]
) -> str | None:
    """`topics.min_isr_warning` for a topic's min.insync.replicas just set, against its
    replication factor."""
    from replog.admin.controller_results import ConfigResourceType

    if resource.resource_type != ConfigResourceType.TOPIC or MIN_ISR not in added:
        return None
    # Best effort: the change is made; a failure to read the factor must not report it failed.
    try:
        (topic,) = client.metadata([resource.name]).topics
    except (ReplogError, ValueError):
        return None
    if topic.error is not None:
        return None
    return min_isr_warning(added, topic.replication_factor)


def _what(resource: ConfigResource) -> str:
    kind = resource_kind(resource)
    return "the brokers' default configs" if kind == "default" else f"{kind} {resource.name}"


# --- the command ------------------------------------------------------------------------------


def _add_entity_arguments(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(usage=parser)  # usage.error(): a usage mistake, exit code 2
    parser.add_argument(
        "--entity-type",
        required=True,
        choices=sorted([*ENTITY_TYPES, USERS]),
        help="what the configs belong to",
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--entity-name",
        metavar="NAME",
        help="the topic's name, the broker's id, the group's id or the user's name",
    )
    which.add_argument(
        "--entity-default",
        action="store_true",
        help="the cluster-wide default of every broker (brokers only)",
    )


def register(commands: Any) -> None:
    action = add_command(
        commands,
        "configs",
        __doc__,
        headed=True,
    )
    describe = action(
        "describe",
        "describe the configs of topics, brokers or groups, or users' SCRAM credentials",
        run_describe,
    )
    _add_entity_arguments(describe)
    describe.add_argument(
        "--all",
        action="store_true",
        help="every config with its effective value (default: only those set dynamically)",
    )
    describe.add_argument("--json", action="store_true", help="print JSON")
    add_connection_arguments(describe)

    alter = action(
        "alter",
        "set or delete configs of a topic, broker or group, or a user's SCRAM credentials",
        run_alter,
    )
    _add_entity_arguments(alter)
    alter.add_argument(
        "--add-config",
        metavar="K=V,K2=[A,B]",
        help="configs to set, separated by commas (list values in square brackets)",
    )
    alter.add_argument(
        "--delete-config", metavar="K,K2", help="configs to delete, separated by commas"
    )
    add_connection_arguments(alter)
