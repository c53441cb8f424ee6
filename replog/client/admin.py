"""The asyncio `Admin` client: topics, partitions, configs, records, elections, reassignments.

`from replog.aio import Admin`; the blocking `replog.Admin` (sync_admin.py) runs this one on a
private event loop and has the same methods.

    async with Admin({"bootstrap.servers": "127.0.0.1:9092"}) as admin:
        await admin.create_topics([NewTopic("orders", 6, 3)])

Where requests go:
- Every call is one of Kafka's admin APIs on the brokers' Kafka listeners
  (`AsyncKafkaAdminClient`): `bootstrap.servers`, or with `bootstrap.controllers` (KIP-919)
  the controllers' Kafka listeners, which serve describe_cluster and describe_quorum. Topics,
  partitions, configs, elections and reassignments go to any broker, which forwards them to
  the active controller.
- `delete_records` goes to each partition's leader (Metadata finds it), one request per
  leader, and `list_offsets` through the client's `OffsetLookup`; both retry retriable answers
  until the deadline.
- `describe_quorum` is Kafka's DescribeQuorum, as `replog quorum describe` asks it.

Timeouts: every method takes `timeout_ms` (None: `default.api.timeout.ms`, 60 s) bounding the
whole call, retries included; each attempt is bounded by `request.timeout.ms`.

Errors, one rule everywhere: a method returns only if every item succeeded, and otherwise
raises the error of the first item that failed, as kafka-python 3 does, with a message naming
the item (topic, partition, config resource). The request went out whole, so the other items
may have been applied. One exception, as Kafka's tools treat it: an election that was not
needed (the preferred leader already leads) is a success, reported in the result's `error`.
Unknown topics raise UnknownTopicOrPartitionError ("topic 'x' does not exist"). A call after
`close()` raises ClientClosedError.

After `create_topics` and `create_partitions` succeed, the call also waits (within its timeout)
until every live broker's metadata shows the new partitions with leaders, so a producer or
consumer started right after finds them; after `delete_topics` until none shows the topics;
after a preferred `elect_leaders` until each shows the elected partitions led by their
preferred replica (a broker's Metadata answers from its own copy of the metadata log, so
that a description read right after says what the change did); a broker that does not answer
is not waited for.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from replog.admin import kafka_cluster_answers
from replog.admin.cluster_metadata import ClusterDescription, ClusterMetadata
from replog.admin.controller_results import (
    AlterConfigOp,
    AlterConfigOpType,
    ConfigResource,
    ConfigsAltered,
    CreatedTopic,
    DeletedTopic,
    ElectionResult,
    ElectionType,
    NewPartitions,
    NewTopic,
    OngoingReassignment,
    PartitionsCreated,
    ReassignmentResult,
    ResourceConfigs,
)
from replog.admin.kafka_admin_client import AsyncKafkaAdminClient
from replog.admin.quorum_description import QuorumDescription
from replog.client.admin_results import OffsetSpec, TopicDescription
from replog.client.cluster_metadata import ClusterMetadata as ClientMetadata
from replog.client.config import AdminConfig, admin_config
from replog.client.event_loop_binding import EventLoopBinding
from replog.client.offset_lookup import ISOLATION_LEVELS, OffsetLookup
from replog.client.records import OffsetAndTimestamp, TopicPartition
from replog.client.tls_connection import client_ssl_context
from replog.clock import Clock, monotonic_ms
from replog.errors import (
    ClientClosedError,
    ElectionNotNeededError,
    InvalidRequestError,
    KafkaError,
    KafkaTimeoutError,
    LeaderNotAvailableError,
    NoBrokersAvailableError,
    ReplogError,
    UnknownTopicOrPartitionError,
)
from replog.net_address import format_host_port
from replog.replication import messages as m
from replog.topic_names import INTERNAL_TOPICS

__all__ = ["Admin", "AlterConfigOp", "ConfigResource", "NewPartitions", "NewTopic", "OffsetSpec"]

log = logging.getLogger("replog.client")

T = TypeVar("T")
PROPAGATION_POLL_S = 0.05  # how often to look whether brokers have learnt of a change


class Admin:
    """The asyncio admin client (module docstring). `config`: Kafka's dotted names and/or
    snake_case keyword arguments (`replog.client.config.admin_config`)."""

    def __init__(
        self,
        config: Mapping[str, object] | AdminConfig | None = None,
        *,
        clock: Clock = monotonic_ms,
        **kwargs: object,
    ) -> None:
        """`clock`: the client's millisecond clock (deadlines, backoffs, ages); a test may pass
        `replog.testing.ManualClock`."""
        self.config = admin_config(config, **kwargs)
        self._clock = clock
        c = self.config
        self._metadata = ClientMetadata.for_client(c, clock)
        self._connections = self._metadata.connections
        self._offsets = OffsetLookup(
            self._metadata,
            self._connections,
            request_timeout_ms=c.request_timeout_ms,
            retry_backoff_ms=c.retry_backoff_ms,
            retry_backoff_max_ms=c.retry_backoff_max_ms,
            clock=clock,
        )
        self._kafka: AsyncKafkaAdminClient | None = None
        self._closed = False
        self._home = EventLoopBinding("asyncio Admin", "replog.Admin")

    # --- lifecycle -------------------------------------------------------------------------------

    async def close(self) -> None:
        """Release every connection; idempotent."""
        if self._closed:
            return
        if self._home.ended_for_close():
            self._closed = True  # nothing of it can run any more (event_loop_binding)
            return
        self._closed = True
        kafka, self._kafka = self._kafka, None
        if kafka is not None:
            await kafka.close()
        await self._metadata.close()  # and the connections it made

    async def __aenter__(self) -> Admin:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # --- topics and partitions -------------------------------------------------------------------

    async def create_topics(
        self,
        new_topics: Sequence[NewTopic],
        validate_only: bool = False,
        *,
        timeout_ms: int | None = None,
    ) -> list[CreatedTopic]:
        """Create topics (name, partitions, replication factor, configs, assignments)."""
        deadline_ms = self._deadline(timeout_ms)
        results = await self._admin_call(
            AsyncKafkaAdminClient.create_topics,
            deadline_ms,
            [_new_topic(t) for t in _entries(new_topics, "create_topics", "NewTopic")],
            validate_only=validate_only,
        )
        _raise_failed(results, lambda r: f"topic {r.name!r}")
        if not validate_only:
            counts = {r.name: r.num_partitions for r in results}
            await self._await_brokers(counts, _showing(counts), deadline_ms, "create_topics")
        return results

    async def delete_topics(
        self, names: Iterable[str], *, timeout_ms: int | None = None
    ) -> list[DeletedTopic]:
        deadline_ms = self._deadline(timeout_ms)
        results = await self._admin_call(
            AsyncKafkaAdminClient.delete_topics, deadline_ms, list(_names(names, "delete_topics"))
        )
        _raise_failed(results, lambda r: f"topic {r.name!r}")
        names = [r.name for r in results]
        await self._await_brokers(names, _without(names), deadline_ms, "delete_topics")
        return results

    async def create_partitions(
        self,
        new_partitions: Mapping[str, NewPartitions | int],
        validate_only: bool = False,
        *,
        timeout_ms: int | None = None,
    ) -> list[PartitionsCreated]:
        """Grow topics: `{topic: total partition count}` or `{topic: NewPartitions(...)}`."""
        deadline_ms = self._deadline(timeout_ms)
        increases = [_new_partitions(topic, value) for topic, value in new_partitions.items()]
        results = await self._admin_call(
            AsyncKafkaAdminClient.create_partitions,
            deadline_ms,
            increases,
            validate_only=validate_only,
        )
        _raise_failed(results, lambda r: f"topic {r.topic!r}")
        if not validate_only:
            counts: dict[str, int | None] = {i.topic: i.total_count for i in increases}
            await self._await_brokers(counts, _showing(counts), deadline_ms, "create_partitions")
        return results

    async def list_topics(
        self, *, include_internal: bool = False, timeout_ms: int | None = None
    ) -> list[str]:
        """The names of every topic, sorted (internal ones such as __consumer_offsets only
        with `include_internal`)."""
        metadata = await self._admin_call(
            AsyncKafkaAdminClient.metadata, self._deadline(timeout_ms), None
        )
        return sorted(
            t.name for t in metadata.topics if include_internal or t.name not in INTERNAL_TOPICS
        )

    async def describe_topics(
        self,
        names: Iterable[str] | None = None,
        *,
        include_internal: bool = False,
        timeout_ms: int | None = None,
    ) -> dict[str, TopicDescription]:
        """Each topic's partitions: leader, replicas, isr and the offline / under-replicated
        flags (None: every topic; internal ones only with `include_internal`)."""
        wanted = None if names is None else list(_names(names, "describe_topics"))
        metadata = await self._admin_call(
            AsyncKafkaAdminClient.metadata,
            self._deadline(timeout_ms),
            wanted,
            with_reassignments=True,
        )
        _raise_failed(metadata.topics, lambda t: f"topic {t.name!r}")
        return {
            t.name: TopicDescription.of(t)
            for t in sorted(metadata.topics, key=lambda t: t.name)
            if wanted is not None or include_internal or t.name not in INTERNAL_TOPICS
        }

    async def describe_cluster(self, *, timeout_ms: int | None = None) -> ClusterDescription:
        """The cluster id, the active controller and the registered brokers."""
        return await self._admin_call(
            AsyncKafkaAdminClient.describe_cluster, self._deadline(timeout_ms)
        )

    # --- configs ---------------------------------------------------------------------------------

    async def describe_configs(
        self,
        resources: Iterable[ConfigResource],
        keys: Sequence[str] = (),
        *,
        timeout_ms: int | None = None,
    ) -> dict[ConfigResource, ResourceConfigs]:
        """Every config of each resource (only `keys` when given), with its source."""
        results = await self._admin_call(
            AsyncKafkaAdminClient.describe_configs,
            self._deadline(timeout_ms),
            list(resources),
            keys=list(keys),
        )
        _raise_failed(results, lambda r: _resource_text(r.resource))
        return {r.resource: r for r in results}

    async def incremental_alter_configs(
        self,
        changes: Mapping[ConfigResource, Sequence[AlterConfigOp] | Mapping[str, str | None]],
        validate_only: bool = False,
        *,
        timeout_ms: int | None = None,
    ) -> list[ConfigsAltered]:
        """Change configs: per resource, AlterConfigOps or `{name: value}` (None: delete the
        override, back to the default)."""
        ops = {resource: _ops(value) for resource, value in changes.items()}
        results = await self._admin_call(
            AsyncKafkaAdminClient.incremental_alter_configs,
            self._deadline(timeout_ms),
            ops,
            validate_only=validate_only,
        )
        _raise_failed(results, lambda r: _resource_text(r.resource))
        return results

    # --- elections and reassignments -------------------------------------------------------------

    async def elect_leaders(
        self,
        election_type: ElectionType | str = ElectionType.PREFERRED,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        timeout_ms: int | None = None,
    ) -> list[ElectionResult]:
        """Elect leaders (`"preferred"` or `"unclean"`) of `partitions` (None: all eligible).
        A partition whose election was not needed comes back with ElectionNotNeededError in
        its `error` instead of raising (module docstring)."""
        kind = _election_type(election_type)
        tps = None if partitions is None else [TopicPartition(*tp) for tp in partitions]
        deadline_ms = self._deadline(timeout_ms)
        results = await self._admin_call(
            AsyncKafkaAdminClient.elect_leaders, deadline_ms, kind, tps
        )
        _raise_failed(
            [r for r in results if not isinstance(r.error, ElectionNotNeededError)],
            lambda r: _tp_text(r.topic_partition),
        )
        elected = [r.topic_partition for r in results if r.error is None]
        if kind is ElectionType.PREFERRED and elected:
            await self._await_brokers(
                {tp.topic for tp in elected}, _preferred(elected), deadline_ms, "elect_leaders"
            )
        return results

    async def alter_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition, Sequence[int] | None],
        *,
        timeout_ms: int | None = None,
    ) -> list[ReassignmentResult]:
        """Move each partition to the replicas given (None: cancel its reassignment)."""
        moves = {TopicPartition(*tp): r for tp, r in reassignments.items()}
        results = await self._admin_call(
            AsyncKafkaAdminClient.alter_partition_reassignments, self._deadline(timeout_ms), moves
        )
        _raise_failed(results, lambda r: _tp_text(r.topic_partition))
        return results

    async def list_partition_reassignments(
        self,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, OngoingReassignment]:
        """The reassignments in progress (of `partitions`; None: of every partition)."""
        tps = None if partitions is None else [TopicPartition(*tp) for tp in partitions]
        results = await self._admin_call(
            AsyncKafkaAdminClient.list_partition_reassignments, self._deadline(timeout_ms), tps
        )
        return {r.topic_partition: r for r in results}

    # --- records and offsets (partition leaders) -------------------------------------------------

    async def delete_records(
        self, before: Mapping[TopicPartition, int], *, timeout_ms: int | None = None
    ) -> dict[TopicPartition, int]:
        """Delete the records of each partition before the offset given (-1: the high
        watermark, i.e. everything); returns each partition's new low watermark."""
        deadline_ms = self._deadline(timeout_ms)
        pending = {TopicPartition(*tp): offset for tp, offset in before.items()}
        for tp, offset in pending.items():
            if offset < -1:
                raise InvalidRequestError(
                    f"delete_records: offset {offset} for {_tp_text(tp)}: must be >= 0, or -1 "
                    "for the high watermark"
                )
        return await self._at_leaders(pending, deadline_ms, "delete_records", self._delete_at)

    async def delete_records_each(
        self, before: Mapping[TopicPartition, int], *, timeout_ms: int | None = None
    ) -> dict[TopicPartition, int | ReplogError]:
        """As `delete_records`, with each partition's own outcome: its new low watermark, or
        its error (as Kafka's Admin gives one future per partition). The partitions go at
        once, each on its own, under the one timeout."""

        async def one(tp: TopicPartition, offset: int) -> int | ReplogError:
            try:
                return (await self.delete_records({tp: offset}, timeout_ms=timeout_ms))[tp]
            except ReplogError as exc:
                return exc

        wanted = [(TopicPartition(*tp), offset) for tp, offset in before.items()]
        outcomes = await asyncio.gather(*(one(tp, offset) for tp, offset in wanted))
        return {tp: outcome for (tp, _), outcome in zip(wanted, outcomes, strict=True)}

    async def list_offsets(
        self,
        specs: Mapping[TopicPartition, OffsetSpec | int],
        *,
        timeout_ms: int | None = None,
        isolation_level: str = "read_uncommitted",
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """Per partition: the offset for an OffsetSpec (EARLIEST, LATEST = the high watermark,
        or the last stable offset with isolation_level "read_committed", MAX_TIMESTAMP) or the
        first offset whose timestamp is at or after a timestamp in ms. None: no such record (a
        timestamp after the last record's)."""
        if isolation_level not in ISOLATION_LEVELS:
            raise InvalidRequestError(
                f"list_offsets: isolation_level {isolation_level!r} is neither "
                "'read_uncommitted' nor 'read_committed'"
            )
        timestamps = {TopicPartition(*tp): int(spec) for tp, spec in specs.items()}
        for tp, ts in timestamps.items():
            if ts < m.MAX_TIMESTAMP:
                raise InvalidRequestError(
                    f"list_offsets: {ts} for {_tp_text(tp)}: not a timestamp (>= 0) nor an "
                    "OffsetSpec (EARLIEST, LATEST, MAX_TIMESTAMP)"
                )
        self._check_open()
        budget_ms = self._budget_ms(timeout_ms)
        found = await self._offsets.list_offsets(
            timestamps,
            deadline_ms=self._clock() + budget_ms,
            what="list_offsets",
            timeout_ms=budget_ms,
            isolation_level=ISOLATION_LEVELS[isolation_level],
        )
        return {
            tp: None if r.offset < 0 else OffsetAndTimestamp(r.offset, r.timestamp, r.leader_epoch)
            for tp, r in found.items()
        }

    # --- the metadata quorum ---------------------------------------------------------------------

    async def describe_quorum(self, *, timeout_ms: int | None = None) -> QuorumDescription:
        """The metadata quorum: leader, epoch, high watermark, voters and observers, and each
        replica's progress (`replog.admin.quorum_description.QuorumDescription`)."""
        deadline_ms = self._deadline(timeout_ms)
        try:
            answer, address = await self._admin_call(
                AsyncKafkaAdminClient.describe_quorum, deadline_ms
            )
        except KafkaTimeoutError as exc:
            if "connection refused" in str(exc) and "answered" not in str(exc):
                raise NoBrokersAvailableError(f"describe_quorum: {exc}") from None
            raise
        return kafka_cluster_answers.quorum_description(answer, address)

    # --- helpers ---------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("the Admin client is closed")
        self._home.check()

    def _budget_ms(self, timeout_ms: int | None) -> int:
        """The caller's timeout, checked, or `default.api.timeout.ms`."""
        budget_ms = self.config.default_api_timeout_ms if timeout_ms is None else timeout_ms
        if budget_ms < 0:
            raise InvalidRequestError(f"timeout_ms={timeout_ms}: must be >= 0")
        return budget_ms

    def _deadline(self, timeout_ms: int | None) -> int:
        return self._clock() + self._budget_ms(timeout_ms)

    def _admin_client(self) -> AsyncKafkaAdminClient:
        self._check_open()
        if self._kafka is None:
            c = self.config
            self._kafka = AsyncKafkaAdminClient(
                list(c.bootstrap_controllers or c.bootstrap_servers),
                client_id=c.client_id,
                default_timeout_s=c.default_api_timeout_ms / 1000,
                request_timeout_s=c.request_timeout_ms / 1000,
                retry_backoff_s=c.retry_backoff_ms / 1000,
                max_retry_backoff_s=max(c.retry_backoff_max_ms, c.retry_backoff_ms) / 1000,
                refused_timeout_s=c.socket_connection_setup_timeout_max_ms / 1000,
                controllers=bool(c.bootstrap_controllers),
                sasl=c.sasl,
                tls=client_ssl_context(c),
            )
        return self._kafka

    async def _admin_call(
        self,
        method: Callable[..., Coroutine[Any, Any, T]],
        deadline_ms: int,
        *args: Any,
        **kwargs: Any,
    ) -> T:
        """`AsyncKafkaAdminClient.<method>(*args, **kwargs)` within the deadline."""
        client = self._admin_client()
        timeout_s = max(deadline_ms - self._clock(), 0) / 1000
        try:
            return await method(client, *args, timeout_s=timeout_s, **kwargs)
        except ReplogError:
            if self._closed:
                raise ClientClosedError("the Admin client was closed during the call") from None
            raise

    async def _await_brokers(
        self,
        topics: Iterable[str],
        sees: Callable[[ClusterMetadata], bool],
        deadline_ms: int,
        what: str,
    ) -> None:
        """Until every live broker's Metadata of `topics` is one that `sees` accepts (module
        docstring); gives up quietly at the deadline: the change itself is done."""
        names = sorted(set(topics))
        client = self._admin_client()
        cap_ms = min(deadline_ms, self._clock() + self.config.request_timeout_ms)
        try:
            cluster = await client.metadata(names, timeout_s=max(cap_ms - self._clock(), 0) / 1000)
        except ReplogError:
            return
        pending = {b.broker_id: format_host_port(b.host, b.port) for b in cluster.brokers}
        while pending:
            remaining_ms = deadline_ms - self._clock()
            if remaining_ms <= 0:
                log.info("%s: brokers %s have not learnt of it yet", what, sorted(pending))
                return
            timeout_ms = min(self.config.request_timeout_ms, remaining_ms)
            seen = await asyncio.gather(
                *(self._broker_sees(a, names, sees, timeout_ms) for a in pending.values())
            )
            pending = {b: a for (b, a), ok in zip(pending.items(), seen, strict=True) if not ok}
            if pending:
                await asyncio.sleep(min(PROPAGATION_POLL_S, remaining_ms / 1000))

    async def _broker_sees(
        self,
        address: str,
        topics: Sequence[str],
        sees: Callable[[ClusterMetadata], bool],
        timeout_ms: int,
    ) -> bool:
        try:
            answer = await self._admin_client().metadata_at(address, topics, timeout_ms=timeout_ms)
        except ReplogError:
            return True  # not answering: nothing to wait for there
        return sees(answer)

    async def _at_leaders(
        self,
        pending: dict[TopicPartition, int],
        deadline_ms: int,
        what: str,
        ask: Callable[
            [str, dict[TopicPartition, int], int],
            Any,
        ],
    ) -> dict[TopicPartition, int]:
        """`ask(address, {tp: arg}, deadline_ms)` at the leader of the partitions it leads,
        concurrently; retriable failures are retried with fresh metadata and backoff until the
        deadline. `ask` returns {tp: result int | KafkaError} or raises ReplogError."""
        self._check_open()
        started_ms = self._clock()
        done: dict[TopicPartition, int] = {}
        backoff_ms = self.config.retry_backoff_ms
        last: ReplogError | None = None
        while pending:
            groups: dict[str, dict[TopicPartition, int]] = {}
            try:
                cluster = await self._admin_call(
                    AsyncKafkaAdminClient.metadata,
                    deadline_ms,
                    sorted({tp.topic for tp in pending}),
                )
            except (KafkaTimeoutError, NoBrokersAvailableError) as exc:
                last = exc
                cluster = None
            for tp, arg in pending.items() if cluster is not None else ():
                try:
                    address = _leader_of(cluster, tp)  # type: ignore[arg-type]
                except LeaderNotAvailableError as exc:
                    last = exc
                    continue
                groups.setdefault(address, {})[tp] = arg
            answers = await asyncio.gather(
                *(ask(address, parts, deadline_ms) for address, parts in groups.items()),
                return_exceptions=True,
            )
            for answer in answers:
                if isinstance(answer, BaseException):
                    if not isinstance(answer, ReplogError) or not answer.retriable:
                        raise answer
                    last = answer
                    continue
                for tp, result in answer.items():
                    if isinstance(result, KafkaError):
                        if not result.retriable:
                            raise _naming(result, _tp_text(tp))
                        last = result
                    else:
                        done[tp] = result
                        pending.pop(tp, None)
            if not pending:
                break
            now = self._clock()
            if now >= deadline_ms:
                cause = f"; last error: {last}" if last is not None else ""
                names = ", ".join(sorted(_tp_text(tp) for tp in pending))
                raise KafkaTimeoutError(
                    f"{what} for {names} did not finish within {deadline_ms - started_ms} ms{cause}"
                )
            await asyncio.sleep(min(backoff_ms, deadline_ms - now) / 1000)
            backoff_ms = min(backoff_ms * 2, max(self.config.retry_backoff_max_ms, backoff_ms))
        return done

    async def _delete_at(
        self, address: str, parts: dict[TopicPartition, int], deadline_ms: int
    ) -> dict[TopicPartition, int | KafkaError]:
        wait_ms = max(1, min(self.config.request_timeout_ms, deadline_ms - self._clock()))
        return await self._admin_client().delete_records_at(address, parts, timeout_ms=wait_ms)


def _showing(counts: Mapping[str, int | None]) -> Callable[[ClusterMetadata], bool]:
    """A broker's Metadata shows each topic with its partition count (None: any), all led."""

    def sees(answer: ClusterMetadata) -> bool:
        by_name = {t.name: t for t in answer.topics if t.error is None}
        return all(
            (topic := by_name.get(name)) is not None
            and (count is None or len(topic.partitions) == count)
            and all(p.leader is not None for p in topic.partitions)
            for name, count in counts.items()
        )

    return sees


def _without(names: Iterable[str]) -> Callable[[ClusterMetadata], bool]:
    """A broker's Metadata shows none of the topics `names`."""
    gone = set(names)
    return lambda answer: not any(t.name in gone and t.error is None for t in answer.topics)


def _preferred(elected: Iterable[TopicPartition]) -> Callable[[ClusterMetadata], bool]:
    """A broker's Metadata shows each partition led by its preferred (first) replica."""
    wanted = set(elected)

    def sees(answer: ClusterMetadata) -> bool:
        led = {
            TopicPartition(t.name, p.partition)
            for t in answer.topics
            for p in t.partitions
            if p.replicas and p.leader == p.replicas[0]
        }
        return wanted <= led

    return sees


def _leader_of(cluster: ClusterMetadata, tp: TopicPartition) -> str:
    """The Kafka address of `tp`'s leader in `cluster`; an unknown topic or partition raises
    UnknownTopicOrPartitionError, no leader (yet) LeaderNotAvailableError (retriable)."""
    topic = next((t for t in cluster.topics if t.name == tp.topic), None)
    if topic is None or isinstance(topic.error, UnknownTopicOrPartitionError):
        raise UnknownTopicOrPartitionError(f"topic {tp.topic!r} does not exist")
    if not 0 <= tp.partition < len(topic.partitions):
        raise UnknownTopicOrPartitionError(
            f"partition {_tp_text(tp)} does not exist: topic {tp.topic!r} has "
            f"{len(topic.partitions)} partitions"
        )
    leader = topic.partitions[tp.partition].leader
    address = next(
        (format_host_port(b.host, b.port) for b in cluster.brokers if b.broker_id == leader),
        None,
    )
    if address is None:
        raise LeaderNotAvailableError(f"no leader known for {_tp_text(tp)}")
    return address


# --- argument and result shaping ------------------------------------------------------------------


def _names(names: Iterable[str], what: str) -> list[str]:
    if isinstance(names, str):
        raise InvalidRequestError(
            f"{what}: expected a list of topic names, got the string {names!r}"
        )
    found = _entries(names, what, "topic names")
    for name in found:
        if not isinstance(name, str):
            raise InvalidRequestError(
                f"{what}: a topic name must be a str, not {type(name).__name__} ({name!r})"
            )
    return found


def _entries(values: Iterable[T], what: str, expected: str) -> list[T]:
    """`values` as a list, or InvalidRequestError naming what came instead (None or a single
    entry would otherwise fail deep inside with a TypeError)."""
    if isinstance(values, str | bytes | Mapping) or not isinstance(values, Iterable):
        raise InvalidRequestError(
            f"{what}: expected a list of {expected}, got {type(values).__name__} ({values!r})"
        )
    return list(values)


def _new_topic(topic: object) -> NewTopic:
    """`topic` checked as a NewTopic, its config values as text (as `incremental_alter_configs`
    takes them: `{"retention.ms": 1000}` is "1000")."""
    if not isinstance(topic, NewTopic):
        raise InvalidRequestError(
            f"create_topics: expected NewTopic entries, got {type(topic).__name__} ({topic!r})"
        )
    for field_name in ("num_partitions", "replication_factor"):
        value = getattr(topic, field_name)
        if not isinstance(value, int) or isinstance(value, bool):
            raise InvalidRequestError(
                f"create_topics: topic {topic.name!r}: {field_name} must be an int, not "
                f"{type(value).__name__} ({value!r})"
            )
    for key, value in topic.configs.items():
        if value is None:
            raise InvalidRequestError(
                f"create_topics: topic {topic.name!r}: config {key!r} is None"
            )
    configs = {str(k): str(v) for k, v in topic.configs.items()}
    return dataclasses.replace(topic, configs=configs)


def _new_partitions(topic: str, value: NewPartitions | int) -> NewPartitions:
    if isinstance(value, NewPartitions):
        if value.topic != topic:
            raise InvalidRequestError(
                f"create_partitions: the entry for topic {topic!r} names topic {value.topic!r}"
            )
        return value
    return NewPartitions(topic, int(value))


def _ops(value: Sequence[AlterConfigOp] | Mapping[str, str | None]) -> list[AlterConfigOp]:
    if isinstance(value, Mapping):
        return [
            AlterConfigOp(name, AlterConfigOpType.DELETE)
            if v is None
            else AlterConfigOp(name, AlterConfigOpType.SET, str(v))
            for name, v in value.items()
        ]
    return list(value)


def _election_type(value: ElectionType | str) -> ElectionType:
    if isinstance(value, ElectionType):
        return value
    try:
        return ElectionType[str(value).upper()]
    except KeyError:
        raise InvalidRequestError(
            f"elect_leaders: election type {value!r}: expected 'preferred' or 'unclean'"
        ) from None


def _tp_text(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


def _resource_text(resource: ConfigResource) -> str:
    kind = resource.resource_type.name.lower()
    return f"{kind} {resource.name!r}" if resource.name else f"{kind} (cluster default)"


def _raise_failed(results: Iterable[Any], item: Callable[[Any], str]) -> None:
    """Raise the first failed item's error, its message naming the item (module docstring)."""
    for result in results:
        error: KafkaError | None = result.error
        if error is None:
            continue
        name = item(result)
        if isinstance(error, UnknownTopicOrPartitionError) and name.startswith("topic "):
            raise UnknownTopicOrPartitionError(f"{name} does not exist")
        raise _naming(error, name)


def _naming(error: KafkaError, item: str) -> KafkaError:
    """`error`, its message prefixed with `item` unless it names it already."""
    text = str(error)
    return error if item in text else type(error)(f"{item}: {text}")
