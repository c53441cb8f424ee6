"""Benchmark workloads: OpenMessaging-Benchmark-style YAML files, read into a `Workload`.

A workload names what runs, not where (the systems are `replog bench --systems`)::

    name: 1 topic, 3 partitions, 1 KiB      # shown in the report
    topics: 1
    partitionsPerTopic: 3
    messageSize: 1024                       # bytes of each record's value
    keyDistributor: NO_KEY                  # NO_KEY | KEY_ROUND_ROBIN | RANDOM_NANO
    producersPerTopic: 1
    subscriptionsPerTopic: 1                # each subscription reads every record
    consumerPerSubscription: 1              # a subscription's partitions split among these
    producerRate: 10000                     # records/s over all producers; max: unthrottled
    warmupDurationSeconds: 5                # or warmupDurationMinutes (OMB's)
    testDurationSeconds: 20                 # or testDurationMinutes (OMB's)
    producerConfig: {linger.ms: 5}          # optional: Kafka client settings for every driver
    killLeaderAtSeconds: 15                 # optional: SIGKILL partition 0's leader then
    consumerBacklogSizeGB: 2                # optional: a catch-up run (below)
    idlePartitions: 1000                    # optional: an idle topic of this many beside
    recordsPerTransaction: 100              # optional: a transactional run (below)

A metadata run (`metadataClients`, the harness's own) has no producers or consumers: that many
admin processes each send CreateTopics requests one after another for warm-up + duration,
each request creating `topicsPerRequest` topics (default 1) of `partitionsPerTopic`
partitions, replication factor 3. It takes only `name`, `partitionsPerTopic`,
`metadataClients`, `topicsPerRequest` and the durations; any other field is refused.

A controller run (`createPartitions`, the harness's own) has no driver processes either: the
harness creates that many partitions (topics of `partitionsPerTopic`, RF 3, in CreateTopics
requests of `topicsPerRequest` topics, default 100, sent one after another) and times it until
every replica is created and led; then, with `failoverPartitions`, it grows the image to that
many partitions and SIGKILLs the active controller, timing until a new one answers a
CreateTopics. It takes only `name`, `createPartitions`, `partitionsPerTopic`,
`topicsPerRequest` and `failoverPartitions`. One request's records (a topic's, its
partitions', its config's) must fit one metadata batch (`MAX_RECORDS_PER_REQUEST`, Kafka's
and replog's limit).

`clients` (the harness's own: a list of `drivers.CLIENTS`) makes a clients run: every run
drives the same replog cluster through each client in turn, in an order that rotates from
run to run.

Rules: the keys are OpenMessaging Benchmark's (its `producerRate: 0` means max too), with
seconds beside its minutes for short runs; `killLeaderAtSeconds` (not the OMB's: seconds
since the run started, before its end) makes the run a failover timeline.
`consumerBacklogSizeGB` (the OMB's key, GiB of record values) makes it a catch-up run: the
producers write that backlog (then flush) before any consumer starts, and the consumers then
read it from the start; the test duration, if given, bounds the writing and the reading each
(else `CATCH_UP_LIMIT_S`), and a warm-up or a leader kill is refused. `idlePartitions` (the
harness's own, default 0) adds a topic of that many partitions (RF 3) that nobody writes, for
the CPU idle partitions cost the servers and the busy topic's latency beside them.
`recordsPerTransaction` (the harness's own: the OMB has no transactions) makes a
transactional run of two phases on fresh topics each: the workload as plain (idempotent)
produce, the baseline, then each producer with a transactional id of its own, committing
every that many records (`commit_transaction` timed as the client sees it); its consumers
read with isolation.level read_committed. It is a whole number (0, the default: a plain run),
refused beside a leader kill, a backlog, idle partitions or `clients`, and a
`transactional.id` in `producerConfig` is refused (each producer gets its own). Every problem is a
`WorkloadError` naming the file and the field: a missing or unknown key, a value of the wrong
type or out of range. Pure: the YAML text is parsed by `load_workload`, everything else works
on the parsed mapping.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from replog.errors import WorkloadError

KEY_DISTRIBUTORS = ("NO_KEY", "KEY_ROUND_ROBIN", "RANDOM_NANO")
MAX_RATE = 0.0  # producerRate: max (or 0): producers send as fast as their client takes records
MESSAGE_SIZE_MIN = 8  # the first 8 bytes carry the send time (end-to-end latency)
MESSAGE_SIZE_MAX = 1_000_000  # below Kafka's default max.message.bytes (1 MiB + overhead)

# The whole-number fields, each >= 1 (the durations are checked as pairs below).
_COUNTS = (
    "topics",
    "partitionsPerTopic",
    "messageSize",
    "producersPerTopic",
    "subscriptionsPerTopic",
    "consumerPerSubscription",
)
_DURATIONS = {
    "warmup": ("warmupDurationSeconds", "warmupDurationMinutes"),
    "test": ("testDurationSeconds", "testDurationMinutes"),
}
KNOWN_KEYS = frozenset(
    {
        "name",
        *_COUNTS,
        "keyDistributor",
        "producerRate",
        *(key for pair in _DURATIONS.values() for key in pair),
        "producerConfig",
        "killLeaderAtSeconds",
        "consumerBacklogSizeGB",
        "idlePartitions",
        "metadataClients",
        "topicsPerRequest",
        "clients",
        "createPartitions",
        "failoverPartitions",
        "recordsPerTransaction",
    }
)
# What a transactional run (recordsPerTransaction) cannot be beside: each makes phases or
# clients of its own.
NOT_WITH_TRANSACTIONS = (
    "killLeaderAtSeconds",
    "consumerBacklogSizeGB",
    "idlePartitions",
    "clients",
)
CONTROLLER_KEYS = frozenset(
    {"name", "createPartitions", "partitionsPerTopic", "topicsPerRequest", "failoverPartitions"}
)
# The drivers with producers and consumers.
CLIENTS = ("replog", "confluent-kafka", "kafka-python", "aiokafka")
MAX_RECORDS_PER_REQUEST = 10_000  # Kafka's max.records.per.user.op; replog's metadata batch
RECORDS_PER_TOPIC = 2  # beside its partitions' records: the topic's own and its config's
DEFAULT_TOPICS_PER_REQUEST = 100  # a controller run's
METADATA_KEYS = frozenset(
    {
        "name",
        "partitionsPerTopic",
        "metadataClients",
        "topicsPerRequest",
        *(key for pair in _DURATIONS.values() for key in pair),
    }
)
GIB = 1024**3
CATCH_UP_LIMIT_S = 600.0  # a catch-up's write and read bound without a test duration


@dataclass(frozen=True, slots=True)
class Workload:
    """One parsed workload file (the module docstring's fields, durations in seconds)."""

    name: str
    topics: int
    partitions_per_topic: int
    message_size: int
    key_distributor: str
    producers_per_topic: int
    subscriptions_per_topic: int
    consumers_per_subscription: int
    producer_rate: float  # records/s over all producers; MAX_RATE: unthrottled
    warmup_s: float
    duration_s: float
    producer_config: Mapping[str, str] = field(default_factory=dict)
    kill_leader_at_s: float | None = None  # SIGKILL of partition 0's leader; None: no kill
    backlog_gib: float | None = None  # a catch-up run's backlog; None: producers and consumers
    # run together
    idle_partitions: int = 0  # partitions of an idle topic beside the run's
    metadata_clients: int = 0  # a metadata run's admin processes; 0: not a metadata run
    topics_per_request: int = 1  # a metadata or controller run's topics per CreateTopics
    create_partitions: int = 0  # a controller run's partitions to create; 0: not one
    failover_partitions: int = 0  # the image a controller run's failover happens at; 0: none
    clients: tuple[str, ...] = ()  # a clients run's drivers; (): the system's own
    records_per_transaction: int = 0  # a transactional run's; 0: not one

    @property
    def controller(self) -> bool:
        return self.create_partitions > 0

    @property
    def most_partitions(self) -> int:
        """The most partitions a run of this workload holds at once (0 for a metadata run,
        whose topics pile up as fast as the system makes them): a controller run's failover
        image (its fill rounded up to whole topics) and probe; a data run's two phases' topics
        and its idle topic."""
        if self.controller:
            per_topic = self.partitions_per_topic
            fill = max(0, self.failover_partitions - self.create_partitions)
            return self.create_partitions + math.ceil(fill / per_topic) * per_topic + 1
        if self.metadata_clients:
            return 0
        return 2 * self.topics * self.partitions_per_topic + self.idle_partitions

    @property
    def backlog_records(self) -> int:
        """Records in the backlog (0 for a run that is not a catch-up)."""
        if self.backlog_gib is None:
            return 0
        return max(1, math.ceil(self.backlog_gib * GIB / self.message_size))

    @property
    def unthrottled(self) -> bool:
        return self.producer_rate == MAX_RATE

    @property
    def producers(self) -> int:
        return self.topics * self.producers_per_topic

    @property
    def consumers(self) -> int:
        return self.topics * self.subscriptions_per_topic * self.consumers_per_subscription

    def rate_per_producer(self) -> float:
        """Records/s each producer aims at (MAX_RATE when unthrottled)."""
        return MAX_RATE if self.unthrottled else self.producer_rate / self.producers

    def to_json(self) -> dict[str, Any]:
        if self.controller:
            return {
                "name": self.name,
                "createPartitions": self.create_partitions,
                "partitionsPerTopic": self.partitions_per_topic,
                "topicsPerRequest": self.topics_per_request,
                "failoverPartitions": self.failover_partitions,
            }
        if self.metadata_clients:
            return {
                "name": self.name,
                "partitionsPerTopic": self.partitions_per_topic,
                "metadataClients": self.metadata_clients,
                "topicsPerRequest": self.topics_per_request,
                "warmupDurationSeconds": self.warmup_s,
                "testDurationSeconds": self.duration_s,
            }
        return {
            "name": self.name,
            "topics": self.topics,
            "partitionsPerTopic": self.partitions_per_topic,
            "messageSize": self.message_size,
            "keyDistributor": self.key_distributor,
            "producersPerTopic": self.producers_per_topic,
            "subscriptionsPerTopic": self.subscriptions_per_topic,
            "consumerPerSubscription": self.consumers_per_subscription,
            "producerRate": "max" if self.unthrottled else self.producer_rate,
            "warmupDurationSeconds": self.warmup_s,
            "testDurationSeconds": self.duration_s,
            "producerConfig": dict(self.producer_config),
            "killLeaderAtSeconds": self.kill_leader_at_s,
            "consumerBacklogSizeGB": self.backlog_gib,
            "idlePartitions": self.idle_partitions,
            "clients": list(self.clients),
            "recordsPerTransaction": self.records_per_transaction,
        }


def load_workload(path: str) -> Workload:
    """Read and check the workload file at `path`."""
    import yaml  # the bench extra's; imported here so `replog --help` stays fast

    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise WorkloadError(f"workload {path}: unreadable: {exc.strerror or exc}") from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise WorkloadError(f"workload {path}: not YAML: {exc}") from None
    return parse_workload(document, source=path)


def parse_workload(document: object, source: str = "workload") -> Workload:
    """The `Workload` a parsed YAML document describes; `source` names it in errors."""
    if not isinstance(document, Mapping):
        raise WorkloadError(
            f"{source}: expected a mapping of workload fields, got {_kind(document)}"
        )
    unknown = sorted(str(key) for key in document if key not in KNOWN_KEYS)
    if unknown:
        raise WorkloadError(
            f"{source}: unknown field {unknown[0]!r} (known: {', '.join(sorted(KNOWN_KEYS))})",
            field=unknown[0],
        )
    if "createPartitions" in document:
        return _controller_workload(document, source)
    if "metadataClients" in document:
        return _metadata_workload(document, source)
    if "topicsPerRequest" in document:
        raise WorkloadError(
            f"{source}: topicsPerRequest: only in a metadata or controller run "
            "(metadataClients, createPartitions)",
            field="topicsPerRequest",
        )
    counts = {key: _count(document, key, source) for key in _COUNTS}
    if counts["messageSize"] < MESSAGE_SIZE_MIN or counts["messageSize"] > MESSAGE_SIZE_MAX:
        raise WorkloadError(
            f"{source}: messageSize {counts['messageSize']}: must be in "
            f"[{MESSAGE_SIZE_MIN}, {MESSAGE_SIZE_MAX}] (the first 8 bytes carry the send time)",
            field="messageSize",
        )
    backlog_gib = _backlog(document, source)
    warmup_s = _duration(document, "warmup", source, required=False)
    duration_s = _duration(document, "test", source, required=backlog_gib is None)
    if backlog_gib is not None:
        _refuse_with_backlog(document, warmup_s, source)
        duration_s = duration_s or CATCH_UP_LIMIT_S
    return Workload(
        name=_name(document, source),
        topics=counts["topics"],
        partitions_per_topic=counts["partitionsPerTopic"],
        message_size=counts["messageSize"],
        key_distributor=_key_distributor(document, source),
        producers_per_topic=counts["producersPerTopic"],
        subscriptions_per_topic=counts["subscriptionsPerTopic"],
        consumers_per_subscription=counts["consumerPerSubscription"],
        producer_rate=_rate(document, source),
        warmup_s=warmup_s,
        duration_s=duration_s,
        producer_config=_producer_config(document, source),
        kill_leader_at_s=_kill_at(document, warmup_s + duration_s, source),
        backlog_gib=backlog_gib,
        idle_partitions=_idle_partitions(document, source),
        clients=_clients(document, source),
        records_per_transaction=_records_per_transaction(document, source),
    )


def _kind(value: object) -> str:
    return "nothing" if value is None else type(value).__name__


def _name(document: Mapping[Any, Any], source: str) -> str:
    name = document.get("name")
    if not isinstance(name, str) or not name.strip():
        raise WorkloadError(
            f"{source}: name: expected a non-empty string, got {_kind(name)}", field="name"
        )
    return name.strip()


def _count(document: Mapping[Any, Any], key: str, source: str) -> int:
    if key not in document:
        raise WorkloadError(f"{source}: {key}: missing (a whole number >= 1)", field=key)
    value = document[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise WorkloadError(
            f"{source}: {key}: expected a whole number >= 1, got {value!r}", field=key
        )
    if value < 1:
        raise WorkloadError(f"{source}: {key}: {value}: must be >= 1", field=key)
    return value


def _key_distributor(document: Mapping[Any, Any], source: str) -> str:
    value = document.get("keyDistributor", "NO_KEY")
    if value not in KEY_DISTRIBUTORS:
        raise WorkloadError(
            f"{source}: keyDistributor: {value!r}: expected one of {', '.join(KEY_DISTRIBUTORS)}",
            field="keyDistributor",
        )
    return str(value)


def _rate(document: Mapping[Any, Any], source: str) -> float:
    if "producerRate" not in document:
        raise WorkloadError(
            f"{source}: producerRate: missing (records/s over all producers, or max)",
            field="producerRate",
        )
    value = document["producerRate"]
    if value == "max":
        return MAX_RATE
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise WorkloadError(
            f"{source}: producerRate: expected records/s (a number >= 0) or max, got {value!r}",
            field="producerRate",
        )
    return float(value)


def _duration(document: Mapping[Any, Any], which: str, source: str, *, required: bool) -> float:
    seconds_key, minutes_key = _DURATIONS[which]
    given = [key for key in (seconds_key, minutes_key) if key in document]
    if len(given) == 2:
        raise WorkloadError(
            f"{source}: {seconds_key} and {minutes_key}: give one of them", field=minutes_key
        )
    if not given:
        if required:
            raise WorkloadError(
                f"{source}: {seconds_key}: missing (or {minutes_key})", field=seconds_key
            )
        return 0.0
    key = given[0]
    value = document[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise WorkloadError(f"{source}: {key}: expected a number >= 0, got {value!r}", field=key)
    seconds = float(value) * (60 if key == minutes_key else 1)
    if required and seconds <= 0:
        raise WorkloadError(f"{source}: {key}: {value}: must be > 0", field=key)
    return seconds


def _kill_at(document: Mapping[Any, Any], run_s: float, source: str) -> float | None:
    key = "killLeaderAtSeconds"
    value = document.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < run_s:
        raise WorkloadError(
            f"{source}: {key}: expected seconds since the run started, in (0, {run_s:g}) "
            f"(warm-up + test duration), got {value!r}",
            field=key,
        )
    return float(value)


def _only(document: Mapping[Any, Any], keys: frozenset[str], run: str, source: str) -> None:
    """Refuse a field that `run` (a kind of run, named by its key) does not take."""
    others = sorted(str(key) for key in document if key not in keys)
    if others:
        raise WorkloadError(
            f"{source}: {others[0]}: not in {run}, which takes {', '.join(sorted(keys))}",
            field=others[0],
        )


def _without_clients(name: str, partitions_per_topic: int, **fields: Any) -> Workload:
    """A run without producers or consumers (a metadata or controller run)."""
    return Workload(
        name=name,
        topics=0,
        partitions_per_topic=partitions_per_topic,
        message_size=0,
        key_distributor="NO_KEY",
        producers_per_topic=0,
        subscriptions_per_topic=0,
        consumers_per_subscription=0,
        producer_rate=MAX_RATE,
        **{"warmup_s": 0.0, "duration_s": 0.0, **fields},
    )


def _metadata_workload(document: Mapping[Any, Any], source: str) -> Workload:
    _only(document, METADATA_KEYS, "a metadata run (metadataClients)", source)
    return _without_clients(
        _name(document, source),
        _count(document, "partitionsPerTopic", source),
        warmup_s=_duration(document, "warmup", source, required=False),
        duration_s=_duration(document, "test", source, required=True),
        metadata_clients=_count(document, "metadataClients", source),
        topics_per_request=(
            _count(document, "topicsPerRequest", source) if "topicsPerRequest" in document else 1
        ),
    )


def _controller_workload(document: Mapping[Any, Any], source: str) -> Workload:
    _only(document, CONTROLLER_KEYS, "a controller run (createPartitions)", source)
    create = _count(document, "createPartitions", source)
    per_topic = _count(document, "partitionsPerTopic", source)
    if create % per_topic:
        raise WorkloadError(
            f"{source}: createPartitions {create}: must be a multiple of partitionsPerTopic "
            f"({per_topic}): the partitions are created as whole topics",
            field="createPartitions",
        )
    per_request = (
        _count(document, "topicsPerRequest", source)
        if "topicsPerRequest" in document
        else DEFAULT_TOPICS_PER_REQUEST
    )
    records = per_request * (per_topic + RECORDS_PER_TOPIC)
    if records > MAX_RECORDS_PER_REQUEST:
        raise WorkloadError(
            f"{source}: topicsPerRequest {per_request}: a request of {per_request} topics of "
            f"{per_topic} partitions is {records:,} metadata records; one request must fit "
            f"one metadata batch ({MAX_RECORDS_PER_REQUEST:,}, Kafka's and replog's limit)",
            field="topicsPerRequest",
        )
    failover = document.get("failoverPartitions", 0)
    if (
        isinstance(failover, bool)
        or not isinstance(failover, int)
        or (failover and failover < create)
    ):
        raise WorkloadError(
            f"{source}: failoverPartitions: expected the image's partitions at the failover, "
            f">= createPartitions ({create}), or 0 for none, got {failover!r}",
            field="failoverPartitions",
        )
    return _without_clients(
        _name(document, source),
        per_topic,
        topics_per_request=per_request,
        create_partitions=create,
        failover_partitions=failover,
    )


def _clients(document: Mapping[Any, Any], source: str) -> tuple[str, ...]:
    value = document.get("clients", [])
    if (
        not isinstance(value, list)
        or any(c not in CLIENTS for c in value)
        or len(set(value)) != len(value)
    ):
        raise WorkloadError(
            f"{source}: clients: expected a list of distinct clients of {', '.join(CLIENTS)}, "
            f"got {value!r}",
            field="clients",
        )
    return tuple(value)


def _idle_partitions(document: Mapping[Any, Any], source: str) -> int:
    key = "idlePartitions"
    value = document.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise WorkloadError(
            f"{source}: {key}: expected a whole number >= 0 (partitions), got {value!r}",
            field=key,
        )
    if value and document.get("killLeaderAtSeconds") is not None:
        # The killed node comes back only after the run: the idle topic, made between the two
        # phases, could never have every replica created and led.
        raise WorkloadError(
            f"{source}: killLeaderAtSeconds: not in a run with idle partitions ({key})",
            field="killLeaderAtSeconds",
        )
    return value


def _records_per_transaction(document: Mapping[Any, Any], source: str) -> int:
    key = "recordsPerTransaction"
    value = document.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise WorkloadError(
            f"{source}: {key}: expected a whole number >= 0 (records each transaction commits; "
            f"0: none), got {value!r}",
            field=key,
        )
    if not value:
        return 0
    beside = next((k for k in NOT_WITH_TRANSACTIONS if document.get(k)), None)
    if beside is not None:
        raise WorkloadError(f"{source}: {beside}: not in a transactional run ({key})", field=beside)
    if "transactional.id" in (document.get("producerConfig") or {}):
        raise WorkloadError(
            f"{source}: producerConfig: 'transactional.id': a transactional run gives each "
            f"producer its own",
            field="producerConfig.transactional.id",
        )
    return value


def _backlog(document: Mapping[Any, Any], source: str) -> float | None:
    key = "consumerBacklogSizeGB"
    value = document.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise WorkloadError(
            f"{source}: {key}: expected GiB of backlog (a number > 0), got {value!r}", field=key
        )
    return float(value)


def _refuse_with_backlog(document: Mapping[Any, Any], warmup_s: float, source: str) -> None:
    """A catch-up run writes its backlog, then reads it: no warm-up, no leader kill."""
    if warmup_s:
        key = next(k for k in _DURATIONS["warmup"] if k in document)
        raise WorkloadError(
            f"{source}: {key}: a catch-up run (consumerBacklogSizeGB) has no warm-up", field=key
        )
    if document.get("killLeaderAtSeconds") is not None:
        raise WorkloadError(
            f"{source}: killLeaderAtSeconds: not in a catch-up run (consumerBacklogSizeGB)",
            field="killLeaderAtSeconds",
        )


def _producer_config(document: Mapping[Any, Any], source: str) -> dict[str, str]:
    value = document.get("producerConfig", {})
    if not isinstance(value, Mapping):
        raise WorkloadError(
            f"{source}: producerConfig: expected a mapping of Kafka producer settings, got "
            f"{_kind(value)}",
            field="producerConfig",
        )
    config = {}
    for key, setting in value.items():
        if not isinstance(key, str) or isinstance(setting, Mapping | list) or setting is None:
            raise WorkloadError(
                f"{source}: producerConfig: {key!r}: expected a setting name and a scalar value",
                field=f"producerConfig.{key}",
            )
        config[key] = str(setting).lower() if isinstance(setting, bool) else str(setting)
    return config
