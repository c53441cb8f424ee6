"""The producer's sender: one task on the client's event loop that drains ready batches from the
accumulator and sends them to the partition leaders, and decides what each answer means.

Rules:
- One Produce request per leader carries the ready batches of the partitions it leads, up
  to `max.request.size` (the accumulator's drain); a partition's several batches go as one
  entry, their bytes back to back, and each batch's base offset is the entry's plus the
  records of the batches before it. An entry refused with an error that is not retriable
  (e.g. one batch too large) is resent batch by batch, each alone, so that one batch's fault
  does not fail its neighbours (without idempotence, not after an error that leaves it
  unknown whether the entry was written: it fails as it is). At most
  `max.in.flight.requests.per.connection` requests per broker are outstanding, all pipelined
  on the broker's one produce connection (`Connections.produce_stream`), which the broker
  appends in the order sent, as Kafka's broker reads one connection's requests in order. A
  failed connection fails every request on it, each batch settled by the error below.
- With `max.in.flight.requests.per.connection=1` a partition is muted in the accumulator from
  the moment one of its requests leaves until its answer is settled (Kafka's
  `guaranteeMessageOrder`): the in-flight limit counts per broker, so without it a batch
  could go to a new leader while an older one waits for its answer from the old leader, and
  land first when that one is retried. Then the order holds without idempotence too (a retry
  may still duplicate).
- A retriable error (and, with idempotence, OUT_OF_ORDER_SEQUENCE_NUMBER and
  UNKNOWN_PRODUCER_ID, see `idempotence`) puts the batch back in its queue after a backoff of
  `retry.backoff.ms` doubling per attempt up to `retry.backoff.max.ms` (with +-20% jitter,
  KIP-580), as long as `retries` attempts are not used up and `delivery.timeout.ms` since the
  batch was created has not passed. Another error fails the batch with the broker's typed
  error (whose message names the partition); a failed request's error (NetworkError,
  RequestTimedOutError, ...) is re-raised naming the broker, its address and the partitions.
  An answer that is not one (`MalformedResponseError` from KafkaBrokerClient) fails every
  batch of the request at once with it, naming the partitions too: retrying would get the
  same answer. Like a lost connection it also drops the connection to that broker and marks
  the metadata stale (Kafka's
  NetworkClient closes a connection whose bytes are no response, and a disconnect requests a
  metadata update: the address may now belong to something else).
- A retry is not silent: the first retry of each (partition, error class) is logged at
  WARNING, as Kafka's Sender does ("Got error produce response on topic-partition t-0,
  retrying (...). Error: NOT_ENOUGH_REPLICAS: ..."), later ones at DEBUG until the partition
  delivers a batch again (then a new spell of errors is warned about again).
- Records waiting for a leader (the metadata names none for their partition) are not silent
  either: once they have waited `NO_LEADER_WARN_MS` (3 s; an election takes less), a WARNING
  names the partition, once until it delivers again.
- A wait that lasts is said while it lasts (`wait_notice`): once records have waited 5 s
  without an answer, a WARNING every 10 s names the partition of the oldest, what it waits
  for (a leader, and since when; else its attempts and last error), how many records wait
  and in how many partitions, and until when they are retried (delivery.timeout.ms).
- MESSAGE_TOO_LARGE (over `max.message.bytes`) or RECORD_LIST_TOO_LARGE (over `segment.bytes`)
  for a batch of several records sent alone: the batch is split
  (`RecordAccumulator.split_and_reenqueue`: pieces sized to the topic's limit, the smaller of
  the two, when the producer knows it, else halves) and the pieces are sent at once, in order, not
  counted against `retries` (Kafka's Sender splitAndReenqueue); with idempotence the pieces
  take over the batch's sequences (`Idempotence.on_split`). The producer is told
  (`on_too_large`) so that it describes the topic's limit again. A batch of one record fails
  with the broker's error, naming the record's size and the limit. Kafka's Sender splits on
  MESSAGE_TOO_LARGE only; replog's splits on both because its default batch.size (1 MB) is
  larger than a small-segment topic's appends may be, where Kafka's (16 KiB) never is.
- NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, fenced or unknown
  leader epochs, storage errors, timeouts and lost connections mark the metadata stale; stale
  metadata, or a partition whose leader is unknown, triggers a refresh (at most one in flight,
  then at least `retry.backoff.ms` apart), after which the sender looks again. Stale metadata
  is refreshed even when nothing is left to send (as Kafka's sender acts on requestUpdate at its
  next poll); metadata merely older than `metadata.max.age.ms` only when records wait.
- Expiry: a batch not done `delivery.timeout.ms` after its creation fails with
  KafkaTimeoutError naming the partition, the number of records, the timeout, the attempts
  made and the last error (or why it never left: no leader, no producer id). A batch on the
  wire expires too; its answer, when it comes, still counts for the idempotence bookkeeping.
- acks=0: a delivered batch's records get offset -1 (nothing is known of where they landed).
- With idempotence, the producer id comes from `InitProducerId` on any live broker; batches
  wait for it. A failed call or a retriable error (COORDINATOR_LOAD_IN_PROGRESS) is retried
  with backoff; any other error code is fatal as in Kafka's TransactionManager ("Unexpected
  error in InitProducerIdResponse"): every batch waiting and every later one fails at once
  with that typed error instead of expiring at `delivery.timeout.ms`. A malformed answer is
  fatal too, as it fails a Produce at once here; Kafka would count unparseable bytes as a
  lost connection and ask again, which against a peer that is no replog broker only runs the
  batches into the timeout.
- A transactional producer (`transactions`): its producer id comes from init_transactions,
  not from the sender; a partition's batches leave only once it is in the transaction
  (AddPartitionsToTxn under version 1, started from here), carry the transactional flag and
  the transactional id, and go at most as Produce v11 under version 1 (v12 tells a version 2
  broker that produce adds the partition). A lost sequence is not renumbered: a batch that
  fails ends the transaction (`TransactionManager.fail`), after which the batches not sent
  fail with the transaction's error, as Kafka's abortUndrainedBatches.
- `close` stops taking new work, sends what is queued (every batch is ready at once) and
  waits for the answers up to its timeout; then it fails whatever is left with
  ClientClosedError and cancels the requests on the wire. The error says which it was: a
  batch sent at least once is "not acknowledged (may have been written)"
  (`maybe_written=True`), one never sent is "never sent". From then on an append (a blocking
  send that raced the close) raises ClientClosedError (`RecordAccumulator.abort_queued`).
- The sender's loop, every task it starts (requests, metadata refreshes, the producer id) and
  the producer's own (sends waiting for metadata or memory, topic limit describes) run in one
  TaskGroup (`task_owner`). An unexpected exception in any of them (a bug) stops
  the sender, logged once: every batch fails with UnknownServerError naming it, and every
  later send, append and flush raises IllegalStateError naming it (`crash_error`), as Kafka's
  producer refuses calls once its I/O thread is gone; nothing is accepted that no one would
  send.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from replog.client import wait_notice
from replog.client.accumulator import ProducerBatch, RecordAccumulator
from replog.client.cluster_metadata import ClusterMetadata
from replog.client.config import ProducerConfig
from replog.client.connections import Connections
from replog.client.idempotence import MAX_PENDING_PER_PARTITION, Idempotence
from replog.client.task_owner import TaskOwner
from replog.client.transaction_manager import Outcome, TxnState
from replog.clock import monotonic_ms
from replog.common import TopicPartition
from replog.errors import (
    ClientClosedError,
    DuplicateSequenceNumberError,
    FencedLeaderEpochError,
    IllegalStateError,
    KafkaError,
    KafkaStorageError,
    KafkaTimeoutError,
    LeaderNotAvailableError,
    MalformedResponseError,
    MessageSizeTooLargeError,
    NetworkError,
    NotAKafkaListenerError,
    NotEnoughReplicasAfterAppendError,
    NotLeaderOrFollowerError,
    RecordBatchTooLargeError,
    ReplogError,
    RequestTimedOutError,
    TransactionAbortedError,
    UnknownLeaderEpochError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from replog.replication import messages as m
from replog.wire.kafka_broker_client import (
    PRODUCE_MAX_VERSION,
    TRANSACTION_V1_PRODUCE_MAX_VERSION,
)

if TYPE_CHECKING:
    from replog.client.transactions import Transactions

log = logging.getLogger("replog.client")

# A produce call's transport deadline beyond the request's own timeout (acks=all waits up to
# request.timeout.ms on the broker, then answers REQUEST_TIMED_OUT itself).
TRANSPORT_MARGIN_MS = 1_000
BACKOFF_JITTER = 0.2
# A partition whose records have waited this long for a leader is warned about (module
# docstring): an election takes moments, a wait longer than a few seconds says what it is.
NO_LEADER_WARN_MS = 3_000

# Errors after which the cached leaders may be wrong (Kafka's InvalidMetadataException family,
# plus lost connections and timeouts).
_STALE_METADATA = (
    NotLeaderOrFollowerError,
    UnknownTopicOrPartitionError,
    LeaderNotAvailableError,
    FencedLeaderEpochError,
    UnknownLeaderEpochError,
    KafkaStorageError,
    NetworkError,
    RequestTimedOutError,
)
# Errors after which the broker's own Metadata answer is not to be trusted first: it did not
# answer in time, or its acks=all append waited out the request timeout (a leader cut off from
# its followers and from the controller still names itself the leader).
_DISTRUST_AFTER = (NetworkError, RequestTimedOutError)
# Errors that leave it unknown whether the broker wrote the batch: docs/errors.md calls them
# indeterminate (tests/test_docs.py holds it to this list). The idempotent producer treats
# every failed batch's sequence as unresolved anyway (idempotence.py), so no flag is kept.
_UNKNOWN_OUTCOME = (
    NetworkError,
    RequestTimedOutError,
    NotEnoughReplicasAfterAppendError,
    NotLeaderOrFollowerError,  # also the answer of an acks=all wait whose leader moved
    UnknownServerError,
    KafkaStorageError,  # an fsync that failed after the append moved the log end offset
)


@dataclass
class SenderMetrics:
    requests: int = 0
    batches_sent: int = 0
    records_sent: int = 0
    bytes_sent: int = 0
    batches_retried: int = 0
    batches_failed: int = 0
    batches_expired: int = 0
    records_delivered: int = 0
    metadata_refreshes: int = 0
    producer_ids: int = 0
    batches_split: int = 0


def _describe(error: BaseException | None) -> str:
    if error is None:
        return "none"
    return f"{type(error).__name__}: {error}"


def _ignore_topic(topic: str) -> None:
    return None


def _closed_error(batch: ProducerBatch, when: str) -> ClientClosedError:
    """The error of a batch a closing producer gives up on (module docstring): one that was
    sent may have been written, one never sent was not."""
    tp = batch.topic_partition
    sent = batch.attempts > 0
    outcome = "not acknowledged (may have been written)" if sent else "never sent"
    return ClientClosedError(
        f"{tp.topic}-{tp.partition}: {batch.record_count} record(s) {outcome}: the producer was "
        f"closed {when}",
        maybe_written=sent,
    )


def _created(batch: ProducerBatch) -> int:
    return batch.created_ms


def _partitions_text(batches: Iterable[ProducerBatch]) -> str:
    return ", ".join(f"{b.topic_partition.topic}-{b.topic_partition.partition}" for b in batches)


class Sender:
    """Drains the accumulator to the leaders and settles every batch (module docstring)."""

    def __init__(
        self,
        config: ProducerConfig,
        accumulator: RecordAccumulator,
        metadata: ClusterMetadata,
        connections: Connections,
        *,
        clock: Callable[[], int] = monotonic_ms,
        rng: random.Random | None = None,
    ) -> None:
        self._config = config
        self._acc = accumulator
        self._metadata = metadata
        self._connections = connections
        self._clock = clock
        self._rng = rng or random.Random()
        self.idempotence: Idempotence | None = (
            Idempotence(
                min(MAX_PENDING_PER_PARTITION, config.max_in_flight_requests_per_connection)
            )
            if config.enable_idempotence
            else None
        )
        accumulator.idempotence = self.idempotence
        self.metrics = SenderMetrics()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._wake_scheduled = False
        self._tasks = TaskOwner("the producer's sender", self._crash, log)
        self._requests: dict[int, int] = {}  # node -> produce requests outstanding
        self._request_tasks: set[asyncio.Task[None]] = set()
        self._on_wire: set[ProducerBatch] = set()
        self._metadata_task: asyncio.Task[None] | None = None
        self._metadata_next_ms = 0
        self._metadata_error: BaseException | None = None
        self._pid_task: asyncio.Task[None] | None = None
        self._pid_error: BaseException | None = None
        self._stopping = False
        self._forced = False
        self._crashed: BaseException | None = None  # what stopped the loop (module docstring)
        # Kafka's guaranteeMessageOrder: one request per partition on the wire (module docstring)
        self._mute = config.max_in_flight_requests_per_connection == 1
        self._fatal: KafkaError | None = None  # InitProducerId failed for good (module docstring)
        # (partition, error class) warned about while retrying (module docstring)
        self._warned: set[tuple[TopicPartition, str]] = set()
        # partitions with queued records and no leader, since when (module docstring)
        self._leaderless: dict[TopicPartition, int] = {}
        # when to look for records waiting long enough to say so (module docstring)
        self._notice_at_ms: int | None = None
        # Called with a topic whose batch the broker refused as too large (the producer asks
        # for the topic's max.message.bytes again).
        self.on_too_large: Callable[[str], None] = _ignore_topic
        # A transactional producer's coordinator calls (`transactions`; None: not one).
        self.transactions: Transactions | None = None

    # --- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the sender task on the running loop (once)."""
        if self._tasks.started:
            return
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._tasks.start(self._run())

    @property
    def started(self) -> bool:
        return self._tasks.started

    @property
    def tasks(self) -> TaskOwner:
        """The producer's TaskGroup: the producer's other background tasks run in it too, and
        the failure of any of them stops the sender (module docstring)."""
        return self._tasks

    @property
    def crashed(self) -> bool:
        return self._crashed is not None

    def crash_error(self, what: str = "send") -> IllegalStateError | None:
        """The error of a send, append or flush after the sender crashed (module docstring);
        None while it has not."""
        if self._crashed is None:
            return None
        return IllegalStateError(
            f"{what}: the producer's sender stopped on an unexpected error "
            f"({type(self._crashed).__name__}: {self._crashed}), so nothing more can be sent: "
            "close this producer and create a new one"
        )

    def wakeup(self) -> None:
        """Make the sender look again soon; from the loop thread."""
        if self._wake is not None:
            self._wake.set()

    def wakeup_threadsafe(self) -> None:
        """`wakeup` from any thread; coalesced so a burst of appends costs one loop callback."""
        loop = self._loop
        if loop is None or self._wake_scheduled:
            return
        self._wake_scheduled = True
        try:
            loop.call_soon_threadsafe(self._wake_from_thread)
        except RuntimeError:  # the loop closed: nothing left to wake
            self._wake_scheduled = False

    def _wake_from_thread(self) -> None:
        self._wake_scheduled = False
        self.wakeup()

    async def flush(self, timeout_ms: int | None, *, what: str = "flush") -> None:
        """Send every batch that exists now at once and wait until each is done (delivered or
        failed); KafkaTimeoutError after `timeout_ms` (None: no limit) whose message starts
        with `what`."""
        self._acc.flushing += 1
        self.wakeup()
        try:
            await self._wait_done(self._acc.incomplete(), timeout_ms, what)
        finally:
            self._acc.flushing -= 1

    async def _wait_done(
        self, batches: list[ProducerBatch], timeout_ms: int | None, what: str
    ) -> None:
        pending = [b for b in batches if not b.done]
        if not pending:
            return
        loop = asyncio.get_running_loop()
        all_done: asyncio.Future[None] = loop.create_future()
        remaining = len(pending)

        def one_done(_: ProducerBatch) -> None:
            nonlocal remaining
            remaining -= 1
            if remaining == 0 and not all_done.done():
                all_done.set_result(None)

        for batch in pending:
            batch.add_done_callback(one_done)
        try:
            async with asyncio.timeout(None if timeout_ms is None else timeout_ms / 1000):
                await all_done
        except TimeoutError:
            left = [b for b in pending if not b.done]
            records = sum(b.record_count for b in left)
            raise KafkaTimeoutError(
                f"{what}: {len(left)} batch(es) with {records} record(s) still undelivered "
                f"(partitions {_partitions_text(left)})"
            ) from None

    async def close(self, timeout_ms: int | None) -> None:
        """Deliver what is queued within `timeout_ms` (None: no limit), then force (module
        docstring) and stop."""
        self._stopping = True
        self._acc.closing = True
        self.wakeup()
        if self._tasks.started and timeout_ms != 0:
            try:
                await self._wait_done(
                    self._acc.incomplete(),
                    timeout_ms,
                    f"close did not finish within {timeout_ms} ms",
                )
            except KafkaTimeoutError as exc:
                log.warning("producer close: %s; failing the rest", exc)
        self._force()
        await self._stop_tasks()

    def _force(self, error: BaseException | None = None) -> None:
        """Fail every queued batch (with `error`, else ClientClosedError), refuse every later
        append, cancel the requests on the wire."""
        self._forced = True
        for batch in self._acc.abort_queued(self._refusal):
            self._fail(
                batch,
                error or _closed_error(batch, "before they could be delivered"),
            )
        for task in list(self._request_tasks):
            task.cancel()

    def _refusal(self, tp: TopicPartition) -> ReplogError:
        """The error of an append after `_force` (module docstring)."""
        crashed = self.crash_error(f"send to {tp.topic}-{tp.partition}")
        if crashed is not None:
            return crashed
        return ClientClosedError(
            f"send to {tp.topic}-{tp.partition}: the producer was closed while the send was in "
            "progress; the record was not sent"
        )

    async def _stop_tasks(self) -> None:
        await self._tasks.close()
        # Anything still incomplete had no answer: it fails now rather than hang a waiter.
        for batch in self._acc.incomplete():
            self._fail(batch, _closed_error(batch, "while they were on the wire"))

    # --- the loop -------------------------------------------------------------------------------

    async def _run(self) -> None:
        assert self._wake is not None and self._loop is not None
        wake, loop = self._wake, self._loop
        while True:
            wake.clear()
            next_ms = self.run_once(self._clock())
            if self._stopping and not self._acc.has_incomplete():
                return
            if wake.is_set():
                continue
            handle = None
            if next_ms is not None:
                delay_s = max(next_ms - self._clock(), 0) / 1000
                handle = loop.call_later(delay_s, wake.set)
            try:
                await wake.wait()
            finally:
                if handle is not None:
                    handle.cancel()

    def _crash(self, exc: BaseException) -> None:
        """A task of the sender failed (a bug): fail every batch loudly instead of hanging
        sends (module docstring); `TaskOwner` logged it."""
        self._crashed = exc
        error = UnknownServerError(f"the producer's sender failed: {exc!r}")
        self._force(error)
        for batch in self._acc.incomplete():
            self._fail(batch, error)

    def run_once(self, now_ms: int) -> int | None:
        """One pass: expire, settle idempotence, drain and send. Returns when to look again
        (monotonic ms) if nothing else wakes the sender first; None: only a wakeup."""
        if self._fatal is not None:
            self._fail_for_fatal()
            return None
        next_ms = self._expire(now_ms)
        idempotence = self.idempotence
        if idempotence is not None:
            idempotence.maybe_resolve()
            if self.transactions is not None:
                self.transactions.poll()  # its producer id comes from init_transactions
                if (
                    self.transactions.manager.state is TxnState.ABORTABLE_ERROR
                    and self._acc.has_queued()
                ):
                    # Kafka's abortUndrainedBatches: nothing more of a doomed transaction goes.
                    self.abort_queued(self.transactions.manager.last_error)
            elif idempotence.needs_producer_id() and not self._forced:
                self._ensure_producer_id()
        result = self._acc.drain(
            now_ms, self._leader_of, self._node_ready, self._config.max_request_size
        )
        metadata = self._metadata
        # Marked stale, it is refreshed whether or not anything is left to send (Kafka's
        # requestUpdate is acted on at the sender's next poll): the batch that marked it may
        # have been the last, and one drained in this pass goes to the cached leader.
        if (
            result.unknown_leaders
            or metadata.update_requested
            or (metadata.needs_refresh() and self._acc.has_queued())
        ):
            refresh_at = self._request_metadata({tp.topic for tp in result.unknown_leaders})
            if refresh_at is not None:
                next_ms = refresh_at if next_ms is None else min(next_ms, refresh_at)
        if result.unknown_leaders or self._leaderless:
            warn_at = self._warn_leaderless(result.unknown_leaders, now_ms)
            if warn_at is not None:
                next_ms = warn_at if next_ms is None else min(next_ms, warn_at)
        for node, batches in result.by_node.items():
            self._send(node, batches)
        if result.next_ready_ms is not None:
            next_ms = (
                result.next_ready_ms if next_ms is None else min(next_ms, result.next_ready_ms)
            )
        notice_at = self._notice_waits(now_ms)
        if notice_at is not None:
            next_ms = notice_at if next_ms is None else min(next_ms, notice_at)
        return next_ms

    def _notice_waits(self, now_ms: int) -> int | None:
        """Say what records waiting `FIRST_NOTICE_MS` and more wait for, then again every
        `NOTICE_EVERY_MS` while they wait (module docstring); returns when to look again
        (None: no record waits)."""
        if not self._acc.has_incomplete():
            self._notice_at_ms = None
            return None
        first_ms = wait_notice.FIRST_NOTICE_MS
        if self._notice_at_ms is None:
            self._notice_at_ms = now_ms + first_ms
        if now_ms < self._notice_at_ms:
            return self._notice_at_ms
        oldest: dict[TopicPartition, ProducerBatch] = {}
        records = 0
        for batch in self._acc.incomplete():
            if batch.done or now_ms - batch.created_ms < first_ms:
                continue
            records += batch.record_count
            seen = oldest.get(batch.topic_partition)
            if seen is None or batch.created_ms < seen.created_ms:
                oldest[batch.topic_partition] = batch
        if not oldest:
            self._notice_at_ms = now_ms + first_ms
            return self._notice_at_ms
        log.warning("%s", self._wait_text(sorted(oldest.values(), key=_created), records, now_ms))
        self._notice_at_ms = now_ms + wait_notice.NOTICE_EVERY_MS
        return self._notice_at_ms

    def _wait_text(self, oldest: list[ProducerBatch], records: int, now_ms: int) -> str:
        """The notice for records that wait (`oldest`: each partition's oldest waiting batch,
        the oldest first; `records`: how many wait in all)."""
        batch = oldest[0]
        tp = batch.topic_partition
        name = f"{tp.topic}-{tp.partition}"
        waited = wait_notice.waited_text(now_ms - batch.created_ms)
        since_ms = self._leaderless.get(tp)
        if since_ms is not None and not batch.in_flight:
            cause = f"; last metadata error: {self._metadata_error}" if self._metadata_error else ""
            what = (
                f"Producer waiting {waited} for a leader of {name} (no leader known since "
                f"{wait_notice.wall_time_of(since_ms, now_ms)}{cause})"
            )
        else:
            last = (
                f"last error: {_describe(batch.last_error)}"
                if batch.last_error is not None
                else self._why_waiting(batch)
            )
            what = (
                f"Producer waiting {waited}: {name}'s records not acknowledged yet "
                f"({batch.attempts} attempt(s)); {last}"
            )
        others = ""
        if len(oldest) > 1:
            others = f"; {len(oldest) - 1} more partition(s) wait too"
        timeout_ms = self._config.delivery_timeout_ms
        until = wait_notice.wall_time_of(batch.created_ms + timeout_ms, now_ms)
        return (
            f"{what}; {records} record(s) waiting{others}; retrying until {until} "
            f"(delivery.timeout.ms={timeout_ms})"
        )

    def _warn_leaderless(self, partitions: set[TopicPartition], now_ms: int) -> int | None:
        """Warn once about each partition whose records have waited NO_LEADER_WARN_MS for a
        leader (module docstring); returns when to look again for one not warned about yet."""
        since = self._leaderless
        for tp in [tp for tp in since if tp not in partitions]:
            del since[tp]
        look_at: int | None = None
        for tp in partitions:
            first_ms = since.setdefault(tp, now_ms)
            key = (tp, "no leader")
            if key in self._warned:
                continue
            if now_ms - first_ms < NO_LEADER_WARN_MS:
                due = first_ms + NO_LEADER_WARN_MS
                look_at = due if look_at is None else min(look_at, due)
                continue
            self._warned.add(key)
            cause = f"; last metadata error: {_describe(self._metadata_error)}"
            log.warning(
                "Partition %s-%d has had no leader for %d ms: its records wait for one (up to "
                "delivery.timeout.ms=%d ms from their send)%s",
                tp.topic,
                tp.partition,
                now_ms - first_ms,
                self._config.delivery_timeout_ms,
                cause if self._metadata_error is not None else "",
            )
        return look_at

    def _leader_of(self, tp: TopicPartition) -> int | None:
        state = self._metadata.partition(tp)
        if state is None or state.leader < 0:
            return None
        if self._metadata.broker_address(state.leader) is None:
            return None
        return state.leader

    def _node_ready(self, node: int) -> bool:
        limit = self._config.max_in_flight_requests_per_connection
        return self._requests.get(node, 0) < limit and not self._forced

    # --- expiry ---------------------------------------------------------------------------------

    def _expire(self, now_ms: int) -> int | None:
        """Fail batches past delivery.timeout.ms; returns the next expiry time."""
        timeout_ms = self._config.delivery_timeout_ms
        for batch in self._acc.expired(now_ms, timeout_ms):
            self.metrics.batches_expired += 1
            if self.idempotence is not None:
                self.idempotence.on_failed(batch)
            self._fail(batch, self._expiry_error(batch))
        next_ms = self._acc.next_expiry_ms(timeout_ms)
        for batch in self._on_wire:
            if batch.done:
                continue
            deadline = batch.created_ms + timeout_ms
            if now_ms >= deadline:
                batch.expired = True
                self.metrics.batches_expired += 1
                if self.idempotence is not None:
                    self.idempotence.on_expired(batch)
                self._fail(batch, self._expiry_error(batch))
            elif next_ms is None or deadline < next_ms:
                next_ms = deadline
        return next_ms

    def _expiry_error(self, batch: ProducerBatch) -> KafkaTimeoutError:
        tp = batch.topic_partition
        cause = _describe(batch.last_error) if batch.last_error else self._why_waiting(batch)
        where = "on the wire" if batch.in_flight else "in the queue"
        return KafkaTimeoutError(
            f"{tp.topic}-{tp.partition}: {batch.record_count} record(s) expired {where}: not "
            f"delivered within delivery.timeout.ms={self._config.delivery_timeout_ms} ms of "
            f"the batch's creation, after {batch.attempts} attempt(s); last error: {cause}"
        )

    def _why_waiting(self, batch: ProducerBatch) -> str:
        """Why a batch never got an answer, for its expiry message."""
        tp = batch.topic_partition
        if batch.in_flight:
            return "no answer from the leader yet"
        idempotence = self.idempotence
        if idempotence is not None and idempotence.producer is None:
            return f"no producer id yet ({_describe(self._pid_error)})"
        if self._leader_of(tp) is None:
            cause = f" ({_describe(self._metadata_error)})" if self._metadata_error else ""
            return f"no leader known for {tp.topic}-{tp.partition}{cause}"
        if idempotence is not None and idempotence.is_blocked(tp):
            return "waiting for earlier batches of the partition to be resolved"
        if self._acc.is_muted(tp):
            return (
                "waiting for the answer to the partition's request on the wire "
                "(max.in.flight.requests.per.connection=1 keeps the order)"
            )
        return "never sent (the leader's in-flight requests were at their limit)"

    # --- sending --------------------------------------------------------------------------------

    def _send(self, node: int, batches: list[ProducerBatch]) -> None:
        address = self._metadata.broker_address(node)
        assert address is not None
        acks = self._config.acks
        # A partition's batches (in `batches` in their order) go as one entry, their bytes
        # back to back.
        entries: dict[TopicPartition, list[bytes]] = {}
        for b in batches:
            entries.setdefault(b.topic_partition, []).append(b.records or b"")
        request = m.ProduceRequest(
            acks=acks,
            timeout_ms=self._config.request_timeout_ms if acks == m.ACKS_ALL else 0,
            partitions=tuple(
                m.ProducePartition(
                    tp.topic, tp.partition, parts[0] if len(parts) == 1 else b"".join(parts)
                )
                for tp, parts in entries.items()
            ),
            transactional_id=self._config.transactional_id,
        )
        for batch in batches:
            if self._mute:
                self._acc.mute(batch.topic_partition)
            batch.attempts += 1
            batch.in_flight = True
            self._on_wire.add(batch)
            self.metrics.records_sent += batch.record_count
            self.metrics.bytes_sent += batch.size_in_bytes
        self.metrics.batches_sent += len(batches)
        self.metrics.requests += 1
        self._requests[node] = self._requests.get(node, 0) + 1
        task = self._tasks.spawn(self._produce(node, address, request, batches))
        self._request_tasks.add(task)
        task.add_done_callback(self._request_tasks.discard)

    async def _produce(
        self, node: int, address: str, request: m.ProduceRequest, batches: list[ProducerBatch]
    ) -> None:
        acks = request.acks
        response: m.ProduceResponse | None = None
        call_error: ReplogError | None = None
        transport_ms = (
            TRANSPORT_MARGIN_MS if acks == m.ACKS_ALL else self._config.request_timeout_ms
        )
        try:
            response = await self._connections.produce_stream(address).produce(
                request, timeout_ms=transport_ms, max_version=self._produce_max_version()
            )
        except (NetworkError, RequestTimedOutError, UnsupportedVersionError) as exc:
            # No answer in time, a lost connection, or a broker that does not serve Produce.
            call_error = type(exc)(
                f"broker {node} at {address}: Produce to {_partitions_text(batches)}: {exc}"
            )
        except NotAKafkaListenerError as exc:
            call_error = UnknownServerError(
                f"broker {node} at {address}: Produce to {_partitions_text(batches)}: {exc}"
            )
        except MalformedResponseError as exc:
            # The answer is not one (KafkaBrokerClient checked it): nothing in it can be trusted,
            # not even which batches were written, so every batch gets the call's error
            # (UNKNOWN_SERVER_ERROR's: not retriable, outcome unknown).
            call_error = MalformedResponseError(
                f"{exc}; the request carried {_partitions_text(batches)}"
            )
            self._peer_misbehaved(address)
        except ClientClosedError as exc:
            call_error = exc
        except Exception as exc:  # a bug must not stall the node's in-flight count
            log.exception("Produce to %s failed unexpectedly", _partitions_text(batches))
            call_error = UnknownServerError(
                f"broker {node} at {address}: Produce to {_partitions_text(batches)} failed: "
                f"{type(exc).__name__}: {exc}"
            )
        except asyncio.CancelledError:
            self._requests[node] -= 1
            for batch in batches:
                self._on_wire.discard(batch)
                batch.in_flight = False
                self._fail(batch, _closed_error(batch, "while they were on the wire"))
            self._unmute(batches)
            raise
        self._requests[node] -= 1
        now_ms = self._clock()
        results: dict[tuple[str, int], m.ProducePartitionResult] = {}
        if response is not None:
            results = {(r.topic, r.partition): r for r in response.partitions}
        if isinstance(call_error, _DISTRUST_AFTER) or any(
            isinstance(r.error, _DISTRUST_AFTER) for r in results.values()
        ):
            # It may be a leader cut off from the cluster, whose own Metadata answer would
            # name it the leader again: ask the other brokers (cluster_metadata.py).
            self._metadata.distrust(address)
        # Per partition: how many of its batches the request carried, and the records of
        # those already settled (a batch's base offset is the entry's plus the records of
        # the batches before it: the broker appends an entry's batches back to back).
        carried = Counter(batch.topic_partition for batch in batches)
        before: dict[TopicPartition, int] = {}
        # Retries go back to the front of their queues: last first, so that a partition's
        # batches keep their order.
        retries: list[tuple[ProducerBatch, int]] = []
        for batch in batches:
            self._on_wire.discard(batch)
            tp = batch.topic_partition
            result = results.get((tp.topic, tp.partition))
            grouped = carried[tp] > 1
            if call_error is not None:
                self._on_error(batch, call_error, now_ms, retries)
            elif result is not None and result.error is not None:
                self._on_error(batch, result.error, now_ms, retries, grouped=grouped)
            elif acks == m.ACKS_NONE or result is None:
                # acks=0: the answer names no partition (a failure fails the call), so the
                # offset is unknown. (With acks=1/all KafkaBrokerClient refuses an answer that
                # leaves a partition out as MalformedResponseError.)
                self._on_success(batch, -1, -1)
            else:
                base_offset = result.base_offset
                if grouped:
                    skipped = before.get(tp, 0)
                    before[tp] = skipped + batch.record_count
                    if base_offset >= 0:
                        base_offset += skipped
                self._on_success(batch, base_offset, result.log_append_time_ms)
        for batch, retry_at_ms in reversed(retries):
            self._acc.reenqueue(batch, retry_at_ms)
        # Only now, the retries back in their queues ahead of the later batches.
        self._unmute(batches)
        self.wakeup()

    def _unmute(self, batches: list[ProducerBatch]) -> None:
        if self._mute:
            for batch in batches:
                self._acc.unmute(batch.topic_partition)

    # --- settling -------------------------------------------------------------------------------

    def _on_success(self, batch: ProducerBatch, base_offset: int, log_append_time_ms: int) -> None:
        if self.idempotence is not None:
            self.idempotence.on_success(batch)
        else:
            batch.in_flight = False
        if self._warned:  # the partition recovered: a new spell of errors is warned about again
            tp = batch.topic_partition
            self._warned = {key for key in self._warned if key[0] != tp}
        if batch.complete(base_offset, log_append_time_ms):
            self.metrics.records_delivered += batch.record_count
        self._acc.deallocate(batch)

    def _on_error(
        self,
        batch: ProducerBatch,
        error: ReplogError,
        now_ms: int,
        retries: list[tuple[ProducerBatch, int]],
        *,
        grouped: bool = False,
    ) -> None:
        """Settle or retry `batch`; a retry is added to `retries` (batch, not before) for the
        caller to re-enqueue. `grouped`: the error answered an entry of several batches."""
        idempotence = self.idempotence
        if idempotence is not None and isinstance(error, DuplicateSequenceNumberError):
            self._on_success(batch, -1, -1)  # Kafka: an old duplicate is a success
            return
        batch.last_error = error
        if isinstance(error, _STALE_METADATA):
            self._metadata.request_update()
        if (
            isinstance(error, MessageSizeTooLargeError | RecordBatchTooLargeError)
            and not grouped
            and not batch.done
            and not self._forced
            and now_ms < batch.created_ms + self._config.delivery_timeout_ms
        ):
            if batch.record_count > 1:
                self._split(batch, error, now_ms)
                return
            error = self._record_too_large(batch, error)
        # In a transaction a lost sequence is not renumbered: the transaction aborts instead.
        retriable = error.retriable or (
            idempotence is not None and self.transactions is None and idempotence.can_retry(error)
        )
        deadline_ms = batch.created_ms + self._config.delivery_timeout_ms
        # The broker refused an entry of several batches as a whole for what may be one
        # batch's fault (too large, a bad timestamp): each is resent at once on its own (a
        # retried batch goes alone) to get its own answer, even with retries=0 (Kafka would
        # have sent it alone). Not when the entry may have been written and no sequence
        # would catch the duplicate.
        alone = (
            grouped
            and not retriable
            and (idempotence is not None or not isinstance(error, _UNKNOWN_OUTCOME))
        )
        if (
            (alone or (retriable and batch.attempts <= self._config.retries))
            and not batch.done
            and not self._forced
            and now_ms < deadline_ms
        ):
            if idempotence is not None:
                idempotence.on_retry(batch, error)
            else:
                batch.in_flight = False
            self.metrics.batches_retried += 1
            if alone:
                log.debug("resending %r alone after %s", batch, _describe(error))
            else:
                self._warn_retry(batch, error, "retrying", deadline_ms - now_ms)
            retry_at_ms = now_ms if alone else now_ms + self._backoff_ms(batch.attempts)
            retries.append((batch, retry_at_ms))
            return
        if idempotence is not None:
            idempotence.on_failed(batch)
        else:
            batch.in_flight = False
        if batch.done:  # expired on the wire: the user has its answer already
            self._acc.deallocate(batch)
            return
        if retriable and now_ms >= deadline_ms:
            self.metrics.batches_expired += 1
            self._fail(batch, self._expiry_error(batch))
        else:
            self._fail(batch, error)

    def _warn_retry(
        self, batch: ProducerBatch, error: ReplogError, action: str, left_ms: int
    ) -> None:
        """Say why a partition's batch is not delivered yet, at WARNING once per partition
        and cause until the partition delivers again (Kafka's "Got error produce response
        ..., retrying"), else at DEBUG: a retry loop that can last delivery.timeout.ms must
        not be silent, nor flood the log."""
        tp = batch.topic_partition
        name = getattr(error, "error_name", type(error).__name__)
        key = (tp, type(error).__name__)
        first = key not in self._warned
        self._warned.add(key)
        log.log(
            logging.WARNING if first else logging.DEBUG,
            "Got error produce response on topic-partition %s-%d, %s (%d record(s), attempt "
            "%d, up to %d ms left of delivery.timeout.ms). Error: %s: %s",
            tp.topic,
            tp.partition,
            action,
            batch.record_count,
            batch.attempts,
            max(left_ms, 0),
            name,
            error,
        )

    def _split(self, batch: ProducerBatch, error: ReplogError, now_ms: int) -> None:
        """The broker refused a batch of several records as larger than the topic's
        max.message.bytes, although each record may fit: split it and send the pieces at
        once, in order (Kafka's Sender splits and re-enqueues such a batch; the attempt is
        not counted against `retries`). The pieces are sized to the topic's limit when the
        producer knows it, else halves (split again if still too large)."""
        tp = batch.topic_partition
        limit = self._acc.topic_limit(tp.topic)
        max_bytes = (batch.size_in_bytes + 1) // 2
        if limit is not None and limit < batch.size_in_bytes:
            max_bytes = limit
        left_ms = batch.created_ms + self._config.delivery_timeout_ms - now_ms
        self._warn_retry(batch, error, "splitting the batch and retrying", left_ms)
        pieces = self._acc.split_and_reenqueue(batch, max_bytes, now_ms)
        if self.idempotence is not None:
            self.idempotence.on_split(batch, pieces)
        else:
            batch.in_flight = False
        self.metrics.batches_split += 1
        self.on_too_large(tp.topic)

    def _record_too_large(
        self, batch: ProducerBatch, error: MessageSizeTooLargeError | RecordBatchTooLargeError
    ) -> MessageSizeTooLargeError | RecordBatchTooLargeError:
        """A batch of one record refused as too large: the record itself is, so say so."""
        tp = batch.topic_partition
        limit = self._acc.topic_limit(tp.topic)
        known = (
            f" (the topic's batch limit, the smaller of max.message.bytes and segment.bytes, "
            f"is {limit})"
            if limit is not None
            else ""
        )
        config = (
            "segment.bytes" if isinstance(error, RecordBatchTooLargeError) else "max.message.bytes"
        )
        return type(error)(
            f"{tp.topic}-{tp.partition}: the record is {batch.size_in_bytes} bytes as a batch, "
            f"larger than the topic's {config} allows{known}, so it cannot be sent "
            f"on its own; the broker said: {error}"
        )

    def _fail(self, batch: ProducerBatch, error: BaseException) -> None:
        transactions = self.transactions
        if (
            transactions is not None
            and isinstance(error, ReplogError)
            and not isinstance(error, TransactionAbortedError | ClientClosedError)
            and transactions.manager.fail(error) is Outcome.FATAL
        ):
            self.transaction_failed(transactions.manager.last_error)
        if batch.fail(error):
            self.metrics.batches_failed += 1
        self._acc.deallocate(batch)

    def _backoff_ms(self, attempts: int) -> int:
        base = self._config.retry_backoff_ms
        cap = self._config.retry_backoff_max_ms
        backoff = min(base * 2 ** max(attempts - 1, 0), cap) if base < cap else cap
        jitter = 1 + self._rng.uniform(-BACKOFF_JITTER, BACKOFF_JITTER)
        return max(int(backoff * jitter), 0)

    # --- metadata and the producer id -----------------------------------------------------------

    def _request_metadata(self, topics: set[str]) -> int | None:
        """Start a refresh unless one runs or the last was moments ago; returns when to look
        again if it had to wait."""
        if self._metadata_task is not None and not self._metadata_task.done():
            return None
        now_ms = self._clock()
        if now_ms < self._metadata_next_ms:
            return self._metadata_next_ms
        if topics:
            self._metadata.request_update()
        self._metadata_task = self._tasks.spawn(self._refresh_metadata(topics))
        return None

    async def _refresh_metadata(self, topics: set[str]) -> None:
        wanted = topics | {tp.topic for tp in self._acc.queued_partitions()}
        self.metrics.metadata_refreshes += 1
        try:
            await self._metadata.refresh(
                sorted(wanted), deadline_ms=self._clock() + self._config.request_timeout_ms
            )
            self._metadata_error = None
        except ReplogError as exc:
            self._metadata_error = exc
            log.debug("producer metadata refresh failed: %s", exc)
        finally:
            self._metadata_next_ms = self._clock() + self._config.retry_backoff_ms
            self.wakeup()

    def _ensure_producer_id(self) -> None:
        if self._pid_task is not None and not self._pid_task.done():
            return
        self._pid_task = self._tasks.spawn(self._obtain_producer_id())

    async def _obtain_producer_id(self) -> None:
        idempotence = self.idempotence
        assert idempotence is not None
        attempts = 0
        while not self._forced:
            addresses = list(self._metadata.brokers().values()) or list(
                self._config.bootstrap_servers
            )
            self._rng.shuffle(addresses)
            for address in addresses:
                try:
                    producer_id, epoch = await self._connections.broker(address).init_producer_id(
                        timeout_ms=self._config.request_timeout_ms
                    )
                except NotAKafkaListenerError as exc:
                    self._pid_error = exc
                except KafkaError as exc:
                    self._pid_error = exc
                    if isinstance(exc, MalformedResponseError):
                        self._peer_misbehaved(address)
                    if not exc.retriable:
                        self._producer_id_failed(exc)
                        return
                else:
                    self._pid_error = None
                    self.metrics.producer_ids += 1
                    log.debug("producer id %d epoch %d from %s", producer_id, epoch, address)
                    idempotence.set_producer_id(producer_id, epoch)
                    self.wakeup()
                    return
            attempts += 1
            log.debug("no producer id yet: %s", _describe(self._pid_error))
            await asyncio.sleep(self._backoff_ms(attempts) / 1000)

    def _producer_id_failed(self, error: KafkaError) -> None:
        """Kafka's InitProducerIdHandler: an error that is neither retriable nor one it knows
        is fatal (`fatalError(new KafkaException("Unexpected error in InitProducerIdResponse"))`
        and the Sender then aborts every incomplete batch with it): asking again would only
        run the batches into delivery.timeout.ms with the cause buried in a KafkaTimeoutError."""
        # Same class, so callers catch what the broker answered; every KafkaError takes one
        # message (`errors.error_for_code` relies on that too).
        self._fatal = type(error)(
            f"the idempotent producer cannot send: it has no producer id, InitProducerId "
            f"failed with an error that is not retriable: {error}"
        )
        self._fatal.__cause__ = error
        log.error("%s", self._fatal)
        self.wakeup()

    def _fail_for_fatal(self) -> None:
        """Fail every queued batch, new ones included, with the fatal error (batches on the
        wire keep their answers)."""
        fatal = self._fatal
        assert fatal is not None
        for batch in self._acc.abort_queued():
            if self.idempotence is not None:
                self.idempotence.on_failed(batch)
            self._fail(batch, fatal)

    # --- a transactional producer's (`transactions`) --------------------------------------------

    def _produce_max_version(self) -> int:
        transactions = self.transactions
        if transactions is None or transactions.manager.version2:
            return PRODUCE_MAX_VERSION
        return TRANSACTION_V1_PRODUCE_MAX_VERSION

    def start_over(self, producer_id: int, epoch: int) -> None:
        """A transactional producer's new id or epoch: every partition's sequences start
        again from 0 under it (nothing of the producer is pending between transactions)."""
        assert self.idempotence is not None
        self.idempotence.start_over(producer_id, epoch)
        self.metrics.producer_ids += 1
        self.wakeup()

    def abort_queued(self, error: BaseException | None) -> None:
        """Fail every batch not yet sent with `error` (an aborted or failed transaction's);
        those on the wire keep their answers."""
        for batch in self._acc.abort_queued():
            if self.idempotence is not None:
                self.idempotence.on_failed(batch)
            self._fail(batch, error if error is not None else TransactionAbortedError("aborted"))

    def transaction_failed(self, error: ReplogError | None) -> None:
        """The transaction manager hit a fatal error: queued and later batches fail with it
        (as after a fatal InitProducerId)."""
        if isinstance(error, KafkaError) and self._fatal is None:
            self._fatal = error
            self.wakeup()

    def _peer_misbehaved(self, address: str) -> None:
        """A broker answered bytes that are no answer: treat it as Kafka treats a connection
        it had to close (module docstring): drop the channel, mark the metadata stale."""
        self._connections.redial(address)
        self._metadata.request_update()

    # --- inspection -----------------------------------------------------------------------------

    def in_flight_requests(self) -> int:
        return sum(self._requests.values())
