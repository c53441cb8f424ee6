"""A Spark task's fetches of one partition: the leader's RecordBatch bytes, not decoded.

The range reader decodes whole batches into Arrow columns (`batch_columns`), so it needs the
bytes a Fetch returns rather than the consumer's per-record objects. This is the consumer's
fetch path (`replog.client.fetcher`) cut down to one partition and one request at a time, on
the same client parts: `ClusterMetadata` to find the leader, `OffsetLookup` for the log start
offset and the high watermark, all on a private `LoopThread`. The consumer is not changed.

The Fetch itself is a consumer's Fetch on the leader's Kafka listener (`leader_fetch`), and
the records handed to the decoder are a view of the buffer the answer was received into.

Rules (the consumer's, with `auto.offset.reset=none`):
- A Fetch goes to the partition's current leader with its known leader epoch, as a consumer
  (replica id -1): the leader answers with committed data only, below its high watermark.
- OFFSET_OUT_OF_RANGE raises `OffsetOutOfRangeError` naming the partition and offset.
- NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH and the other retriable answers, a partition
  without a leader and an unreachable broker mark the metadata stale, wait `retry.backoff.ms`
  and ask again (the new leader, once the metadata names it). A fetch that failed (timed out,
  broke, refused) also has the next metadata asked of other brokers first, as the consumer
  has it (`ClusterMetadata.distrust`: the leader may be cut off from the cluster). When the
  caller's deadline passes first, the fetch answers None; the caller words the timeout with
  `last_failure`: why the latest attempt got no answer, said at WARNING once per change of
  cause (the consumer's rule; metadata failures are said by `ClusterMetadata`), None once an
  answer came.
- A topic the metadata no longer has, or one with no such partition (deleted, or re-created
  with fewer partitions), raises `UnknownTopicOrPartitionError` naming it, as `OffsetLookup`
  does: the caller decides whether that is data loss.
- Any other error is raised as the broker's typed error.
- An answer whose bytes do not decode as a FetchResponse (`MalformedResponseError`) is a
  failed fetch like a lost connection: retried, the connection opened afresh.
- `submit` starts the next fetch while the caller decodes the previous answer (one at a
  time: the caller only knows the next position from the answer before).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Mapping
from dataclasses import dataclass

from replog.client.config import ConsumerConfig, consumer_config
from replog.client.offset_lookup import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, OffsetLookup
from replog.client.records import TopicPartition
from replog.clock import monotonic_ms
from replog.errors import (
    KafkaTimeoutError,
    MalformedResponseError,
    NoBrokersAvailableError,
    OffsetOutOfRangeError,
    ReplogError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from replog.kafka.messages.fetch_response import FetchResponse
from replog.spark.fetch_sessions import FetchSession, SessionPool, settings_key
from replog.spark.leader_fetch import PartitionFetch

SAFETY_MARGIN_S = 5.0  # a blocking wait outlasts the coroutine's own deadline by this much
READ_COMMITTED = 1  # Fetch's isolation_level for read_committed (0: read_uncommitted)

log = logging.getLogger("replog.spark")


@dataclass(frozen=True, slots=True)
class FetchAnswer:
    """A leader's answer for one partition: its batches' bytes (possibly ending with a partial
    batch) and what it said about the log."""

    records: memoryview  # a view of the buffer the answer was received into (module docstring)
    high_watermark: int  # -1: not said
    log_start_offset: int  # -1: not said
    last_stable_offset: int = -1  # -1: not said
    # read_committed: (producer id, first offset) of the aborted transactions the records
    # overlap; None: read_uncommitted.
    aborted_transactions: tuple[tuple[int, int], ...] | None = None


class PartitionFetcher:
    """Blocking raw fetches of one partition (module docstring). Close it when done."""

    def __init__(
        self,
        tp: TopicPartition,
        settings: Mapping[str, object],
        sessions: SessionPool | None = None,
    ) -> None:
        self.tp = tp
        self.config: ConsumerConfig = consumer_config(settings)
        # A session kept by this worker for the settings, else a new one (`fetch_sessions`).
        self._sessions = sessions
        self._key = settings_key(settings)
        config = self.config
        self._session = (
            FetchSession(config)
            if sessions is None
            else sessions.take(self._key, lambda: FetchSession(config))
        )
        self._session.begin_task()
        self._loop = self._session.loop
        self._metadata, self._fetches = self._session.metadata, self._session.fetches
        self._in_flight: concurrent.futures.Future[FetchAnswer | None] | None = None
        # Why the latest attempt got no answer (module rules). Set on the loop, read by the
        # task's thread when it gives up: a str swapped whole.
        self.last_failure: str | None = None

    def submit(
        self, position: int, deadline_ms: int, max_bytes: int | None = None
    ) -> concurrent.futures.Future[FetchAnswer | None]:
        """Start a fetch from `position` of at most `max_bytes` (None: the configured
        `max.partition.fetch.bytes`); its answer, or None if `deadline_ms` (monotonic) passed
        while only retriable failures came back."""
        self._in_flight = self._loop.submit(self._fetch(position, deadline_ms, max_bytes))
        return self._in_flight

    def wait(
        self, future: concurrent.futures.Future[FetchAnswer | None], deadline_ms: int
    ) -> FetchAnswer | None:
        """The answer of a submitted fetch (it bounds itself by its deadline)."""
        remaining_s = max(0.0, (deadline_ms - monotonic_ms()) / 1000) + SAFETY_MARGIN_S
        try:
            return future.result(timeout=remaining_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            if self.last_failure is None:
                self.last_failure = f"the fetch of {self._name} in flight had no answer yet"
            return None

    def log_start_offset(self, timeout_ms: int) -> int:
        """The partition's log start offset, asked of its leader."""
        return self._list_offset(EARLIEST_TIMESTAMP, timeout_ms, "log start offset")

    def high_watermark(self, timeout_ms: int) -> int:
        """The partition's high watermark (ListOffsets latest), asked of its leader."""
        return self._list_offset(LATEST_TIMESTAMP, timeout_ms, "high watermark")

    def _list_offset(self, timestamp: int, timeout_ms: int, what: str) -> int:
        return self._loop.run(
            self._lookup(timestamp, monotonic_ms() + timeout_ms, what),
            timeout_s=timeout_ms / 1000 + SAFETY_MARGIN_S,
            what=what,
        )

    async def _lookup(self, timestamp: int, deadline_ms: int, what: str) -> int:
        config = self.config
        lookup = OffsetLookup(
            self._metadata,
            self._metadata.connections,
            request_timeout_ms=config.request_timeout_ms,
            retry_backoff_ms=config.retry_backoff_ms,
            retry_backoff_max_ms=config.retry_backoff_max_ms,
        )
        found = await lookup.list_offsets({self.tp: timestamp}, deadline_ms=deadline_ms, what=what)
        return found[self.tp].offset

    async def _fetch(
        self, position: int, deadline_ms: int, max_bytes: int | None
    ) -> FetchAnswer | None:
        config = self.config
        topic, partition = self.tp
        partition_bytes = config.max_partition_fetch_bytes if max_bytes is None else max_bytes
        isolation = READ_COMMITTED if config.isolation_level == "read_committed" else 0
        while True:
            leader = await self._leader(deadline_ms)
            if leader is not None:
                node, address, epoch = leader
                ask = PartitionFetch(
                    topic,
                    partition,
                    position,
                    partition_bytes,
                    current_leader_epoch=epoch,
                    max_wait_ms=max(0, min(config.fetch_max_wait_ms, deadline_ms - monotonic_ms())),
                    min_bytes=config.fetch_min_bytes,
                    max_bytes=config.fetch_max_bytes,
                    isolation_level=isolation,
                )
                answer = await self._ask(node, address, ask)
                if answer is not None:
                    return answer
                self._metadata.request_update()
            now = monotonic_ms()
            if now >= deadline_ms:
                return None
            await asyncio.sleep(min(config.retry_backoff_ms, deadline_ms - now) / 1000)

    async def _leader(self, deadline_ms: int) -> tuple[int, str, int] | None:
        """(node, address, leader epoch) of the partition's leader, or None for now."""
        metadata = self._metadata
        topic, partition = self.tp
        try:
            partitions = await metadata.partitions_for(
                topic, deadline_ms=max(deadline_ms, monotonic_ms() + 1)
            )
        except (KafkaTimeoutError, NoBrokersAvailableError) as exc:
            # Kept, not said: the metadata says its brokers' failures itself, once per change
            # (and this message counts attempts, so it changes at every one).
            self.last_failure = f"no metadata for {topic}-{partition}: {exc}"
            return None
        if not 0 <= partition < len(partitions):
            # The cached answer may predate the partition (partitions added since, or a broker
            # behind on metadata answered): the caller asks again, with fresh metadata.
            metadata.request_update()
            raise UnknownTopicOrPartitionError(
                f"partition {topic}-{partition} does not exist: topic {topic!r} has "
                f"{len(partitions)} partitions"
            )
        state = metadata.partition(self.tp)
        if state is None or state.leader < 0:
            self._retrying(f"{topic}-{partition} has no leader in the cluster's metadata")
            metadata.request_update()
            return None
        address = metadata.broker_address(state.leader)
        if address is None:
            self._retrying(
                f"the leader of {topic}-{partition}, broker {state.leader}, has no address in "
                "the cluster's metadata"
            )
            metadata.request_update()
            return None
        return state.leader, address, state.leader_epoch

    async def _ask(self, node: int, address: str, ask: PartitionFetch) -> FetchAnswer | None:
        """The answer, None after a retriable failure; raises the rest."""
        try:
            response = await self._fetches.fetch(
                address, ask, timeout_ms=self.config.request_timeout_ms
            )
        except ReplogError as exc:
            if not exc.retriable and not isinstance(exc, MalformedResponseError):
                raise  # a leader address that is no Kafka listener, a version not served
            # As the consumer does: an unreachable or reset broker is retried (new metadata,
            # maybe a new leader) until the deadline, the metadata asked of other brokers
            # first: a leader cut off from the cluster still names itself.
            self._metadata.distrust(address)
            self._retrying(f"fetch of {self._name} from broker {node} at {address} failed: {exc}")
            return None
        answer = answer_for(self.tp, response, ask.fetch_offset)
        if isinstance(answer, str):
            self._retrying(f"fetch of {self._name} from broker {node} at {address}: {answer}")
            return None
        self.last_failure = None
        return answer

    @property
    def _name(self) -> str:
        return f"{self.tp.topic}-{self.tp.partition}"

    def _retrying(self, why: str) -> None:
        """An attempt got no answer for `why`: kept, and said once per change (module
        rules)."""
        if why != self.last_failure:
            log.warning("%s; asking again", why)
        self.last_failure = why

    def close(self, keep: bool = False) -> None:
        """Done with the partition: with `keep` (a task that read its whole range) the
        session goes back to the pool it came from, if no fetch is in flight on it; else it
        is closed (`fetch_sessions`)."""
        pending = self._in_flight
        idle = pending is None or pending.done()
        if keep and idle and self._sessions is not None:
            self._sessions.give_back(self._key, self._session)
        else:
            self._session.close()

    def __enter__(self) -> PartitionFetcher:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def answer_for(tp: TopicPartition, response: FetchResponse, fetch_offset: int) -> FetchAnswer | str:
    """What a Fetch answer says for `tp` (module docstring): its records, why to ask again,
    or the broker's error raised."""
    for result in (p for t in response.responses if t.topic == tp.topic for p in t.partitions):
        if result.partition_index != tp.partition:
            continue
        code = result.error_code
        if code == 0:
            records = result.records
            aborted = result.aborted_transactions
            return FetchAnswer(
                _EMPTY if records is None else memoryview(records),
                result.high_watermark,
                result.log_start_offset,
                result.last_stable_offset,
                None
                if aborted is None
                else tuple((a.producer_id, a.first_offset) for a in aborted),
            )
        error = error_for_code(code)
        if isinstance(error, OffsetOutOfRangeError):
            raise OffsetOutOfRangeError(
                f"{tp.topic}-{tp.partition}: fetch offset {fetch_offset} is out of range"
            )
        if error.retriable:
            return f"the leader answered {error.error_name}"
        raise type(error)(
            f"{tp.topic}-{tp.partition}: the leader answered the fetch at offset {fetch_offset} "
            f"with {error.error_name}"
        )
    return f"the answer leaves {tp.topic}-{tp.partition} out"


_EMPTY = memoryview(b"")
