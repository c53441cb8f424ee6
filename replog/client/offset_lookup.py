"""ListOffsets for a client: offsets by timestamp, earliest or latest, from each partition leader.

Used by the consumer for `auto.offset.reset` and `seek_to_beginning`/`seek_to_end`, and for
`beginning_offsets`, `end_offsets` and `offsets_for_times`.

Rules:
- One request per leader, all leaders asked concurrently; the partition's leader epoch from the
  metadata goes along, so a broker that is no longer the leader answers FENCED_LEADER_EPOCH /
  NOT_LEADER_OR_FOLLOWER instead of its own stale view.
- Retriable answers (not the leader, no leader, an unreachable broker, a timeout) mark the
  metadata stale and retry the partitions concerned, with backoff, until the deadline; then
  `KafkaTimeoutError` names the operation, the timeout and the last cause. A partition of a
  topic that does not exist, or beyond the topic's partition count, raises
  `UnknownTopicOrPartitionError` naming it; other errors are raised as they come.
- "latest" is the high watermark: a consumer never learns of offsets it may not read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence

from replog.client.call_guard import guarded
from replog.client.cluster_metadata import ClusterMetadata
from replog.client.connections import Connections
from replog.client.records import TopicPartition
from replog.clock import monotonic_ms
from replog.errors import (
    ClientClosedError,
    KafkaTimeoutError,
    LeaderNotAvailableError,
    NetworkError,
    NoBrokersAvailableError,
    NotAKafkaListenerError,
    ReplogError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
)
from replog.replication import messages as m

EARLIEST_TIMESTAMP = m.EARLIEST_TIMESTAMP
LATEST_TIMESTAMP = m.LATEST_TIMESTAMP
# `isolation.level`'s names (Kafka's IsolationLevel) and their wire values.
ISOLATION_LEVELS = {
    "read_uncommitted": m.IsolationLevel.READ_UNCOMMITTED,
    "read_committed": m.IsolationLevel.READ_COMMITTED,
}


class OffsetLookup:
    def __init__(
        self,
        metadata: ClusterMetadata,
        connections: Connections,
        *,
        request_timeout_ms: int,
        retry_backoff_ms: int,
        retry_backoff_max_ms: int,
        isolation_level: m.IsolationLevel = m.IsolationLevel.READ_UNCOMMITTED,
        clock: Callable[[], int] = monotonic_ms,
    ) -> None:
        self._metadata = metadata
        self._connections = connections
        self._request_timeout_ms = request_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._retry_backoff_max_ms = max(retry_backoff_max_ms, retry_backoff_ms)
        self._isolation_level = isolation_level
        self._clock = clock

    async def list_offsets(
        self,
        timestamps: Mapping[TopicPartition, int],
        *,
        deadline_ms: int,
        what: str,
        timeout_ms: int | None = None,
        isolation_level: m.IsolationLevel | None = None,
    ) -> dict[TopicPartition, m.ListOffsetsPartitionResult]:
        """Each partition's answer for its timestamp (or EARLIEST/LATEST_TIMESTAMP).
        `timeout_ms`: the caller's timeout that set `deadline_ms`, named when it passes (else
        the time from this call to the deadline is). `isolation_level` overrides the lookup's
        (READ_COMMITTED: LATEST is the last stable offset)."""
        isolation = self._isolation_level if isolation_level is None else isolation_level
        pending = dict(timestamps)
        found: dict[TopicPartition, m.ListOffsetsPartitionResult] = {}
        start_ms = self._clock()
        backoff_ms = self._retry_backoff_ms
        last: ReplogError | None = None
        while pending:
            try:
                by_leader = await self._leaders(pending, deadline_ms)
            except (KafkaTimeoutError, NoBrokersAvailableError) as exc:
                by_leader, last = {}, exc
            except ClientClosedError as exc:
                # A shared metadata refresh cut off by a connection reset (see call_guard);
                # a real close cancels this coroutine instead.
                by_leader, last = {}, NetworkError(f"metadata refresh during {what}: {exc}")
            leaderless = by_leader.pop(None, None)
            if leaderless:
                last = LeaderNotAvailableError(
                    f"no leader for {describe_partitions(leaderless)} during {what}"
                )
                self._metadata.request_update()
            answers = await asyncio.gather(
                *(
                    self._ask(leader[0], leader[1], parts, pending, deadline_ms, what, isolation)
                    for leader, parts in by_leader.items()
                    if leader is not None
                )
            )
            for answer in answers:
                if isinstance(answer, ReplogError):
                    last = answer
                    self._metadata.request_update()
                    continue
                for result in answer.partitions:
                    tp = TopicPartition(result.topic, result.partition)
                    if tp not in pending:
                        continue
                    if result.error is None:
                        found[tp] = result
                        del pending[tp]
                    elif result.error.retriable:
                        last = result.error
                        self._metadata.request_update()
                    else:
                        raise result.error
            if not pending:
                break
            now = self._clock()
            if now >= deadline_ms:
                cause = f"; last error: {last}" if last is not None else ""
                raise KafkaTimeoutError(
                    f"{what} for {describe_partitions(pending)} did not finish within "
                    f"{deadline_ms - start_ms if timeout_ms is None else timeout_ms} ms{cause}"
                )
            await asyncio.sleep(min(backoff_ms, deadline_ms - now) / 1000)
            backoff_ms = min(backoff_ms * 2, self._retry_backoff_max_ms)
        return found

    async def _leaders(
        self, pending: Mapping[TopicPartition, int], deadline_ms: int
    ) -> dict[tuple[int, str] | None, list[TopicPartition]]:
        """Pending partitions by (leader id, address); None: no leader known now."""
        grouped: dict[tuple[int, str] | None, list[TopicPartition]] = {}
        for topic in sorted({tp.topic for tp in pending}):
            partitions = await self._metadata.partitions_for(topic, deadline_ms=deadline_ms)
            for tp in pending:
                if tp.topic == topic and not 0 <= tp.partition < len(partitions):
                    raise UnknownTopicOrPartitionError(
                        f"partition {tp.topic}-{tp.partition} does not exist: topic "
                        f"{topic!r} has {len(partitions)} partitions"
                    )
        for tp in pending:
            state = self._metadata.partition(tp)
            address = None
            if state is not None and state.leader >= 0:
                address = self._metadata.broker_address(state.leader)
            key = None if state is None or address is None else (state.leader, address)
            grouped.setdefault(key, []).append(tp)
        return grouped

    async def _ask(
        self,
        node: int,
        address: str,
        partitions: list[TopicPartition],
        timestamps: Mapping[TopicPartition, int],
        deadline_ms: int,
        what: str,
        isolation_level: m.IsolationLevel,
    ) -> m.ListOffsetsResponse | ReplogError:
        entries = []
        for tp in partitions:
            state = self._metadata.partition(tp)
            epoch = state.leader_epoch if state is not None else m.NO_LEADER_EPOCH
            entries.append(m.ListOffsetsPartition(tp.topic, tp.partition, timestamps[tp], epoch))
        request = m.ListOffsetsRequest(tuple(entries), isolation_level=isolation_level)
        timeout_ms = max(1, min(self._request_timeout_ms, deadline_ms - self._clock()))
        try:
            return await guarded(
                self._connections.broker(address).list_offsets(request, timeout_ms=timeout_ms),
                address=address,
                what="ListOffsets",
                node_id=node,
            )
        except (NetworkError, RequestTimedOutError, NotAKafkaListenerError) as exc:
            return type(exc)(f"broker {node} at {address}: {what}: {exc}")


def describe_partitions(
    partitions: Mapping[TopicPartition, object] | Sequence[TopicPartition],
) -> str:
    """Sorted "topic-partition" names for messages, the first five and a count of the rest."""
    names = sorted(f"{tp.topic}-{tp.partition}" for tp in partitions)
    if len(names) > 5:
        return ", ".join(names[:5]) + f" and {len(names) - 5} more"
    return ", ".join(names)
