"""`replog topics create|list|describe|delete`: manage topics, like `kafka-topics.sh`.

- `create --topic T [--partitions P] [--replication-factor R] [--config KEY=VALUE ...]
  [--if-not-exists]`: prints `Created topic T.`; without a count, the cluster's default
  (`num.partitions`, `default.replication.factor`) applies.
- `list [--json]`: the topic names, sorted, one per line.
- `describe [--topic T] [--if-exists] [--under-replicated-partitions]
  [--unavailable-partitions] [--json]`: kafka-topics.sh's layout, fields separated by tabs:

      Topic: T<TAB>TopicId: <id><TAB>PartitionCount: 3<TAB>ReplicationFactor: 3<TAB>Configs: k=v,...
      <TAB>Topic: T<TAB>Partition: 0<TAB>Leader: 1<TAB>Replicas: 1,2,3<TAB>Isr: 1,2,3

  `Leader: none` when a partition has no leader; `Adding Replicas:` and `Removing Replicas:`
  follow during a reassignment. Configs lists the topic's settings that are not at their
  default. TopicId is printed as Kafka prints it (URL-safe base64). With a filter, only the
  matching partition lines are printed (under-replicated: fewer in-sync replicas than the
  replication factor; unavailable: no leader, or a leader that is not a live broker).
- `delete --topic T [--if-exists]`: prints `Deleted topic T.`

Every action asks the active controller: at `--bootstrap-server HOST:PORT,...` (entries may be
`id@host:port`), tried in turn, else at the controllers of the local cluster in `--data-dir`,
giving up after `--timeout` seconds. A refusal (the topic exists, an invalid replication factor
or config, no controller reachable) is one line on stderr naming the cause, exit code 1.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypeVar

from replog.admin.controller_client import ControllerClient
from replog.admin.controller_results import (
    ConfigResource,
    NewTopic,
    PartitionInfo,
    TopicInfo,
    raise_first_error,
    topic_id_text,
)
from replog.cli.arguments import add_command, at_least, parse_key_values
from replog.cli.controller_connection import add_connection_arguments, connect
from replog.errors import (
    TopicAlreadyExistsError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)

# --- create, list, delete ---------------------------------------------------------------------


class _HasName(Protocol):
    @property
    def name(self) -> str: ...


_Named = TypeVar("_Named", bound=_HasName)


def run_create(args: argparse.Namespace) -> int:
    topic = NewTopic(
        args.topic,
        num_partitions=args.partitions if args.partitions is not None else -1,
        replication_factor=args.replication_factor if args.replication_factor is not None else -1,
        configs=parse_key_values(args.config, "--config", strip_values=False),
    )
    with connect(args) as client:
        results = client.create_topics([topic])
    result = _result_for(results, args.topic)
    if isinstance(result.error, TopicAlreadyExistsError) and args.if_not_exists:
        return 0
    raise_first_error([result])
    print(f"Created topic {args.topic}.")
    return 0


def run_list(args: argparse.Namespace) -> int:
    with connect(args) as client:
        metadata = client.metadata()
    names = sorted(t.name for t in metadata.topics if t.error is None)
    if args.json:
        print(json.dumps({"topics": names}, indent=2))
    else:
        for name in names:
            print(name)
    return 0


def run_delete(args: argparse.Namespace) -> int:
    with connect(args) as client:
        results = client.delete_topics([args.topic])
    result = _result_for(results, args.topic)
    if isinstance(result.error, UnknownTopicOrPartitionError) and args.if_exists:
        return 0
    raise_first_error([result])
    print(f"Deleted topic {args.topic}.")
    return 0


def _result_for(results: Sequence[_Named], topic: str) -> _Named:
    """The answer's item for `topic`; an answer without it is the server's fault."""
    result = next((r for r in results if r.name == topic), None)
    if result is None:
        raise UnknownServerError(f"the controller's answer says nothing of topic {topic!r}")
    return result


# --- describe ---------------------------------------------------------------------------------


def run_describe(args: argparse.Namespace) -> int:
    filtering = args.under_replicated_partitions or args.unavailable_partitions
    with connect(args) as client:
        metadata = client.metadata([args.topic] if args.topic else None)
        topics = _found_topics(metadata.topics, args)
        configs = {} if filtering else _topic_configs(client, topics)
    live_brokers = {b.broker_id for b in metadata.brokers}

    def shown(partition: PartitionInfo) -> bool:
        if not filtering:
            return True
        return bool(
            (args.under_replicated_partitions and is_under_replicated(partition))
            or (args.unavailable_partitions and is_unavailable(partition, live_brokers))
        )

    selected = [(t, [p for p in t.partitions if shown(p)]) for t in topics]
    if filtering:
        selected = [(t, ps) for t, ps in selected if ps]
    if args.json:
        document = {"topics": [topic_json(t, ps, configs.get(t.name, {})) for t, ps in selected]}
        print(json.dumps(document, indent=2))
        return 0
    for topic, partitions in selected:
        if not filtering:
            print(topic_line(topic, configs.get(topic.name, {})))
        for partition in partitions:
            print(partition_line(topic.name, partition))
    return 0


def _found_topics(topics: Sequence[TopicInfo], args: argparse.Namespace) -> list[TopicInfo]:
    """The topics to describe, sorted by name; a topic asked for and absent is an error unless
    `--if-exists`."""
    found = []
    for topic in topics:
        if isinstance(topic.error, UnknownTopicOrPartitionError) and args.if_exists:
            continue
        if topic.error is not None:
            raise topic.error
        found.append(topic)
    return sorted(found, key=lambda t: t.name)


def _topic_configs(
    client: ControllerClient, topics: Sequence[TopicInfo]
) -> dict[str, dict[str, str | None]]:
    """Each topic's settings that are not at their default, by topic name."""
    if not topics:
        return {}
    results = client.describe_configs([ConfigResource.topic(t.name) for t in topics])
    # A topic deleted between the two requests has no configs to show: not worth failing for.
    return {r.resource.name: r.overrides() for r in results if r.error is None}


def is_under_replicated(partition: PartitionInfo) -> bool:
    return len(partition.isr) < partition.replication_factor


def is_unavailable(partition: PartitionInfo, live_brokers: set[int]) -> bool:
    return partition.leader is None or partition.leader not in live_brokers


def topic_line(topic: TopicInfo, configs: Mapping[str, str | None]) -> str:
    replication_factor = topic.replication_factor
    fields = [
        f"Topic: {topic.name}",
        f"TopicId: {topic_id_text(topic.topic_id)}",
        f"PartitionCount: {len(topic.partitions)}",
        f"ReplicationFactor: {replication_factor}",
        "Configs: " + ",".join(f"{k}={_java_str(v)}" for k, v in sorted(configs.items())),
    ]
    return "\t".join(fields)


def partition_line(topic_name: str, partition: PartitionInfo) -> str:
    fields = [
        "",  # kafka-topics.sh indents partition lines with a tab
        f"Topic: {topic_name}",
        f"Partition: {partition.partition}",
        f"Leader: {'none' if partition.leader is None else partition.leader}",
        f"Replicas: {_ids(partition.replicas)}",
        f"Isr: {_ids(partition.isr)}",
    ]
    if partition.adding_replicas or partition.removing_replicas:
        fields.append(f"Adding Replicas: {_ids(partition.adding_replicas)}")
        fields.append(f"Removing Replicas: {_ids(partition.removing_replicas)}")
    return "\t".join(fields)


def topic_json(
    topic: TopicInfo, partitions: Sequence[PartitionInfo], configs: Mapping[str, str | None]
) -> dict[str, Any]:
    return {
        "name": topic.name,
        "topic_id": topic_id_text(topic.topic_id),
        "partition_count": len(topic.partitions),
        "replication_factor": topic.replication_factor,
        "configs": dict(sorted(configs.items())),
        "partitions": [
            {
                "partition": p.partition,
                "leader": p.leader,
                "leader_epoch": p.leader_epoch,
                "replicas": list(p.replicas),
                "isr": list(p.isr),
                "adding_replicas": list(p.adding_replicas),
                "removing_replicas": list(p.removing_replicas),
                "offline_replicas": list(p.offline_replicas),
            }
            for p in partitions
        ],
    }


def _ids(ids: Sequence[int]) -> str:
    return ",".join(str(i) for i in ids)


def _java_str(value: str | None) -> str:
    return "null" if value is None else value  # as Kafka prints a sensitive (hidden) value


# --- the command ------------------------------------------------------------------------------


def register(commands: Any) -> None:
    action = add_command(
        commands,
        "topics",
        "create, list, describe and delete topics (like kafka-topics.sh)",
        __doc__,
        headed=True,
    )
    create = action("create", "create a topic", run_create)
    create.add_argument("--topic", required=True, metavar="TOPIC", help="the topic's name")
    create.add_argument(
        "--partitions",
        type=_positive_int,
        metavar="P",
        help="number of partitions (default: the cluster's num.partitions)",
    )
    create.add_argument(
        "--replication-factor",
        type=_positive_int,
        metavar="R",
        help="replicas per partition (default: the cluster's default.replication.factor)",
    )
    create.add_argument(
        "--config",
        action="append",
        metavar="KEY=VALUE",
        help="a topic config (retention.ms=..., min.insync.replicas=...); may be repeated",
    )
    create.add_argument(
        "--if-not-exists", action="store_true", help="succeed quietly if the topic exists"
    )
    add_connection_arguments(create)

    listing = action("list", "list the topics' names", run_list)
    listing.add_argument("--json", action="store_true", help='print JSON: {"topics": [...]}')
    add_connection_arguments(listing)

    describe = action("describe", "describe topics and their partitions", run_describe)
    describe.add_argument("--topic", metavar="TOPIC", help="only this topic (default: all)")
    describe.add_argument(
        "--if-exists", action="store_true", help="print nothing if --topic does not exist"
    )
    describe.add_argument(
        "--under-replicated-partitions",
        action="store_true",
        help="only partitions with fewer in-sync replicas than replicas",
    )
    describe.add_argument(
        "--unavailable-partitions",
        action="store_true",
        help="only partitions without a live leader",
    )
    describe.add_argument("--json", action="store_true", help="print JSON")
    add_connection_arguments(describe)

    delete = action("delete", "delete a topic and its data", run_delete)
    delete.add_argument("--topic", required=True, metavar="TOPIC", help="the topic's name")
    delete.add_argument(
        "--if-exists", action="store_true", help="succeed quietly if the topic does not exist"
    )
    add_connection_arguments(delete)


_positive_int = at_least(1)
