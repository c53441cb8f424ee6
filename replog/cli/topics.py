"""`replog topics create|list|describe|alter|delete`: manage topics, like `kafka-topics.sh`.

- `create --topic T [--partitions P] [--replication-factor R] [--config KEY=VALUE ...]
  [--if-not-exists]`: prints `Created topic T.`; without a count, the cluster's default
  (`num.partitions`, `default.replication.factor`) applies. A `min.insync.replicas` above the
  replication factor is accepted, as in Kafka, with a warning on stderr: the leader caps it at
  the replica count, so acks=all writes need every replica in sync.
- `list [--exclude-internal] [--json]`: the topic names, sorted, one per line.
- `describe [--topic T] [--if-exists] [--under-replicated-partitions]
  [--unavailable-partitions] [--under-min-isr-partitions] [--at-min-isr-partitions]
  [--topics-with-overrides] [--exclude-internal] [--json]`: kafka-topics.sh's layout, fields
  separated by tabs:

      Topic: T<TAB>TopicId: <id><TAB>PartitionCount: 3<TAB>ReplicationFactor: 3<TAB>Configs: k=v,...
      <TAB>Topic: T<TAB>Partition: 0<TAB>Leader: 1<TAB>Replicas: 1,2,3<TAB>Isr: 1,2,3

  `Leader: none` when a partition has no leader; `Adding Replicas:` and `Removing Replicas:`
  follow during a reassignment. Configs lists the topic's settings that are not at their
  default. TopicId is printed as Kafka prints it (URL-safe base64). With a filter, only the
  matching partition lines are printed (under-replicated: fewer in-sync replicas than the
  replication factor; unavailable: no leader, or a leader that is not a live broker;
  under min ISR: no leader, or fewer in-sync replicas than the topic's effective
  `min.insync.replicas`; at min ISR: exactly that many), a partition shown when it matches any
  filter given. `--topics-with-overrides` prints only the topic lines of topics with a config
  not at its default (it does not combine with the partition filters, as in Kafka).
  `--exclude-internal` leaves out `__consumer_offsets` and `__transaction_state`.
- `alter --topic T --partitions P [--if-exists]`: grows the topic to P partitions (placed by
  the controller) and prints `Altered topic T: P partitions.`; fewer partitions than now is
  refused (INVALID_PARTITIONS): partitions are never removed.
- `delete --topic T [--if-exists]`: prints `Deleted topic T.` An internal topic
  (`__consumer_offsets`, `__transaction_state`) is refused before anything is sent, as
  `kafka-topics.sh` refuses it: deleting `__consumer_offsets` loses every group's committed
  offsets.

Requests go to the cluster's Kafka listeners (Kafka's admin APIs: a broker forwards a change to the
active controller), from `--bootstrap-server HOST:PORT,...`, tried in turn, else the Kafka
listeners of the local cluster in `--data-dir`, giving up after `--timeout` seconds. `describe`
reads the replicas being added and removed with ListPartitionReassignments, as kafka-topics.sh does
(not when no controller is active: none could answer). When the answering node's metadata may be
stale (the metadata quorum lost its majority), `describe` still prints what it last committed, with
a warning on stderr that says how old it is ("metadata stale: the quorum has not been reached for
42 s (node 1 last heard from the quorum's leader at ...)"); `--json` carries "stale" and
"metadata_age_ms" always. Leaders and ISRs are then as last committed (a dead leader is fenced only
by an active controller), so `--unavailable-partitions` also counts a partition whose leader the
answering node has not heard from within `broker.session.timeout.ms`. A refusal (the topic exists,
an invalid replication factor or config, no broker reachable) is one line on stderr naming the
cause, exit code 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from replog.cli.arguments import add_command, at_least, parse_key_values
from replog.cli.controller_connection import add_connection_arguments, connect
from replog.clock import wall_clock_ms
from replog.common.ids import topic_id_text
from replog.config import parse_integer
from replog.errors import (
    InvalidTopicError,
    TopicAlreadyExistsError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from replog.topic_names import INTERNAL_TOPICS

if TYPE_CHECKING:
    from replog.admin.cluster_metadata import ClusterMetadata, PartitionInfo, TopicInfo
    from replog.admin.kafka_admin_client import KafkaAdminClient

# --- create, list, delete ---------------------------------------------------------------------


class _HasName(Protocol):
    @property
    def name(self) -> str: ...


_Named = TypeVar("_Named", bound=_HasName)


def run_create(args: argparse.Namespace) -> int:
    from replog.admin.controller_errors import raise_first_error
    from replog.admin.controller_results import NewTopic

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
    # The factor the controller chose when none was given; a fake or older answer may lack it.
    factor = result.replication_factor or args.replication_factor
    warning = min_isr_warning(topic.configs, factor)
    if warning is not None:
        print(f"replog topics: {warning}", file=sys.stderr)
    return 0


def run_list(args: argparse.Namespace) -> int:
    with connect(args) as client:
        metadata = client.metadata()
    names = sorted(
        t.name
        for t in metadata.topics
        if t.error is None and not (args.exclude_internal and t.name in INTERNAL_TOPICS)
    )
    if args.json:
        print(json.dumps({"topics": names}, indent=2))
    else:
        for name in names:
            print(name)
    return 0


def run_delete(args: argparse.Namespace) -> int:
    from replog.admin.controller_errors import raise_first_error

    if args.topic in INTERNAL_TOPICS:
        raise InvalidTopicError(
            f"topic {args.topic} is an internal topic and is not allowed to be deleted (it "
            "holds what the brokers keep for clients, e.g. committed offsets)"
        )
    with connect(args) as client:
        results = client.delete_topics([args.topic])
    result = _result_for(results, args.topic)
    if isinstance(result.error, UnknownTopicOrPartitionError) and args.if_exists:
        return 0
    raise_first_error([result])
    print(f"Deleted topic {args.topic}.")
    return 0


def run_alter(args: argparse.Namespace) -> int:
    from replog.admin.controller_errors import raise_first_error
    from replog.admin.controller_results import NewPartitions

    with connect(args) as client:
        results = client.create_partitions([NewPartitions(args.topic, args.partitions)])
    result = next((r for r in results if r.topic == args.topic), None)
    if result is None:
        raise UnknownServerError(f"the controller's answer says nothing of topic {args.topic!r}")
    if isinstance(result.error, UnknownTopicOrPartitionError) and args.if_exists:
        return 0
    raise_first_error([result])
    print(f"Altered topic {args.topic}: {args.partitions} partitions.")
    return 0


def _result_for(results: Sequence[_Named], topic: str) -> _Named:
    """The answer's item for `topic`; an answer without it is the server's fault."""
    result = next((r for r in results if r.name == topic), None)
    if result is None:
        raise UnknownServerError(f"the controller's answer says nothing of topic {topic!r}")
    return result


# --- describe ---------------------------------------------------------------------------------


PARTITION_FILTERS = (
    "under_replicated_partitions",
    "unavailable_partitions",
    "under_min_isr_partitions",
    "at_min_isr_partitions",
)
MIN_ISR = "min.insync.replicas"


def run_describe(args: argparse.Namespace) -> int:
    filtering = any(getattr(args, name) for name in PARTITION_FILTERS)
    if filtering and args.topics_with_overrides:
        # As kafka-topics.sh: the reports are alternatives (one shows topics, the others
        # partitions).
        args.usage.error("--topics-with-overrides cannot be combined with a partition filter")
    with connect(args) as client:
        metadata = client.metadata([args.topic] if args.topic else None, with_reassignments=True)
        topics = _found_topics(metadata.topics, args)
        configs = {} if filtering else _topic_configs(client, topics)
        min_isr = (
            _min_isr(client, topics)
            if args.under_min_isr_partitions or args.at_min_isr_partitions
            else {}
        )
    warning = staleness_warning(metadata, wall_clock_ms())
    if warning is not None:
        print(f"replog topics: warning: {warning}", file=sys.stderr)
    if metadata.reassignments_unknown is not None:
        print(
            "replog topics: warning: the reassignments in progress could not be read "
            f"({metadata.reassignments_unknown}); adding and removing replicas are not shown",
            file=sys.stderr,
        )
    # With the quorum lost, no controller fences a dead broker: a leader the answering node
    # has not heard from within the session timeout counts as not live (as a controller
    # would have fenced it by now).
    live_brokers = {b.broker_id for b in metadata.brokers} - metadata.unreachable_brokers
    if args.topics_with_overrides:
        topics = [t for t in topics if configs.get(t.name)]

    def shown(topic: TopicInfo, partition: PartitionInfo) -> bool:
        if not filtering:
            return True
        floor = min_isr.get(topic.name)
        return bool(
            (args.under_replicated_partitions and is_under_replicated(partition))
            or (args.unavailable_partitions and is_unavailable(partition, live_brokers))
            or (args.under_min_isr_partitions and is_under_min_isr(partition, floor))
            or (args.at_min_isr_partitions and is_at_min_isr(partition, floor))
        )

    selected = [(t, [p for p in t.partitions if shown(t, p)]) for t in topics]
    if filtering:
        selected = [(t, ps) for t, ps in selected if ps]
    if args.json:
        document: dict[str, Any] = {
            "stale": metadata.stale,
            "metadata_age_ms": metadata.metadata_age_ms,
            "topics": [topic_json(t, ps, configs.get(t.name, {})) for t, ps in selected],
        }
        print(json.dumps(document, indent=2))
        return 0
    for topic, partitions in selected:
        if not filtering:
            print(topic_line(topic, configs.get(topic.name, {})))
        if args.topics_with_overrides:
            continue  # kafka-topics.sh shows only the topic lines of this report
        for partition in partitions:
            print(partition_line(topic.name, partition))
    return 0


def staleness_warning(metadata: ClusterMetadata, now_ms: int) -> str | None:
    """What to say of metadata the answering node may not have current: None when a quorum
    leader is known to it."""
    node = "" if metadata.answering_node_id is None else f"node {metadata.answering_node_id} "
    if metadata.stale:
        seconds = metadata.metadata_age_ms / 1000
        if metadata.quorum_contact_time_ms is None:
            since = f"{node}has not reached it since it started {seconds:.0f} s ago"
        else:
            at = _utc(metadata.quorum_contact_time_ms)
            since = f"{node}last heard from the quorum's leader at {at}"
        unreachable = ""
        if metadata.unreachable_brokers:
            ids = ",".join(map(str, sorted(metadata.unreachable_brokers)))
            several = len(metadata.unreachable_brokers) > 1
            unreachable = (
                f"; broker{'s' if several else ''} {ids} {'were' if several else 'was'} not "
                "heard from within broker.session.timeout.ms, so the partitions "
                f"{'they lead' if several else 'it leads'} count as unavailable"
            )
        return (
            f"metadata stale: the quorum has not been reached for {seconds:.0f} s ({since}); "
            "leaders and ISRs are as last committed then (only an active controller fences a "
            f"dead broker or moves a leadership){unreachable}"
        )
    if metadata.controller_id is None:
        return (
            "no active controller (has the metadata quorum lost its majority?): this is the "
            "answering node's last committed metadata, and its leaders and ISRs may be stale "
            "(only an active controller fences a dead broker)"
        )
    return None


def _utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _found_topics(topics: Sequence[TopicInfo], args: argparse.Namespace) -> list[TopicInfo]:
    """The topics to describe, sorted by name; a topic asked for and absent is an error unless
    `--if-exists`."""
    found = []
    for topic in topics:
        if isinstance(topic.error, UnknownTopicOrPartitionError) and args.if_exists:
            continue
        if topic.error is not None:
            raise topic.error
        if args.exclude_internal and topic.name in INTERNAL_TOPICS:
            continue
        found.append(topic)
    return sorted(found, key=lambda t: t.name)


def _topic_configs(
    client: KafkaAdminClient, topics: Sequence[TopicInfo]
) -> dict[str, dict[str, str | None]]:
    """Each topic's settings that are not at their default, by topic name."""
    from replog.admin.controller_results import ConfigResource

    if not topics:
        return {}
    results = client.describe_configs([ConfigResource.topic(t.name) for t in topics])
    # A topic deleted between the two requests has no configs to show: not worth failing for.
    return {r.resource.name: r.overrides() for r in results if r.error is None}


def _min_isr(client: KafkaAdminClient, topics: Sequence[TopicInfo]) -> dict[str, int]:
    """Each topic's effective min.insync.replicas (its own, else the brokers'), by name."""
    from replog.admin.controller_results import ConfigResource

    if not topics:
        return {}
    results = client.describe_configs(
        [ConfigResource.topic(t.name) for t in topics], keys=[MIN_ISR]
    )
    found: dict[str, int] = {}
    for result in results:
        for entry in result.entries:
            if result.error is None and entry.name == MIN_ISR and entry.value is not None:
                found[result.resource.name] = int(entry.value)
    return found


def is_under_replicated(partition: PartitionInfo) -> bool:
    return len(partition.isr) < partition.replication_factor


def is_unavailable(partition: PartitionInfo, live_brokers: set[int]) -> bool:
    return partition.leader is None or partition.leader not in live_brokers


def effective_min_isr(partition: PartitionInfo, min_isr: int | None) -> int | None:
    """min.insync.replicas capped at the replica count, as the leader applies it (KIP-966's
    effective min ISR, over every assigned replica, those a reassignment adds included); a min
    ISR above the replication factor would otherwise list a partition that takes acks=all
    writes as refusing them. None: not known."""
    return None if min_isr is None else min(min_isr, len(partition.replicas))


def min_isr_warning(
    configs: Mapping[str, str | None], replication_factor: int | None
) -> str | None:
    """The warning for a `min.insync.replicas` in `configs` above `replication_factor`
    (accepted, as Kafka accepts it): the leader caps it at the replica count
    (`effective_min_isr`), so acks=all writes then need every replica in sync, and one replica
    out of sync stops them. None: no such setting, or the factor is not known."""
    value = configs.get(MIN_ISR)
    if value is None or replication_factor is None or replication_factor < 1:
        return None
    try:
        min_isr = parse_integer(value)
    except ValueError:
        return None  # the controller accepted it, so it is an int; nothing to say otherwise
    if min_isr <= replication_factor:
        return None
    return (
        f"warning: {MIN_ISR}={min_isr} is above the replication factor ({replication_factor}); "
        f"it is capped at {replication_factor} (KIP-966's effective min ISR), so acks=all "
        "writes need every replica in sync"
    )


def is_under_min_isr(partition: PartitionInfo, min_isr: int | None) -> bool:
    """Kafka's rule: no leader, or fewer in-sync replicas than the effective
    min.insync.replicas (None: not known, e.g. the topic was deleted meanwhile)."""
    if partition.leader is None:
        return True
    floor = effective_min_isr(partition, min_isr)
    return floor is not None and len(partition.isr) < floor


def is_at_min_isr(partition: PartitionInfo, min_isr: int | None) -> bool:
    """Exactly the effective min.insync.replicas in sync: one more loss stops acks=all."""
    floor = effective_min_isr(partition, min_isr)
    return floor is not None and len(partition.isr) == floor


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
    _add_exclude_internal(listing)
    add_connection_arguments(listing)

    describe = action("describe", "describe topics and their partitions", run_describe)
    describe.set_defaults(usage=describe)  # usage.error(): a usage mistake, exit code 2
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
    describe.add_argument(
        "--under-min-isr-partitions",
        action="store_true",
        help="only partitions without a leader or with fewer in-sync replicas than "
        "min.insync.replicas",
    )
    describe.add_argument(
        "--at-min-isr-partitions",
        action="store_true",
        help="only partitions with exactly min.insync.replicas in-sync replicas",
    )
    describe.add_argument(
        "--topics-with-overrides",
        action="store_true",
        help="only the topic lines of topics with configs not at their default",
    )
    _add_exclude_internal(describe)
    describe.add_argument("--json", action="store_true", help="print JSON")
    add_connection_arguments(describe)

    alter = action("alter", "add partitions to a topic", run_alter)
    alter.add_argument("--topic", required=True, metavar="TOPIC", help="the topic's name")
    alter.add_argument(
        "--partitions",
        type=_positive_int,
        required=True,
        metavar="P",
        help="the new number of partitions (more than now: partitions are never removed)",
    )
    alter.add_argument(
        "--if-exists", action="store_true", help="succeed quietly if the topic does not exist"
    )
    add_connection_arguments(alter)

    delete = action("delete", "delete a topic and its data", run_delete)
    delete.add_argument("--topic", required=True, metavar="TOPIC", help="the topic's name")
    delete.add_argument(
        "--if-exists", action="store_true", help="succeed quietly if the topic does not exist"
    )
    add_connection_arguments(delete)


def _add_exclude_internal(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--exclude-internal",
        action="store_true",
        help="leave out internal topics (" + ", ".join(sorted(INTERNAL_TOPICS)) + ")",
    )


_positive_int = at_least(1)
