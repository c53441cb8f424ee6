"""TransactionCoordinator: a broker's transaction coordinator (Kafka's `TransactionCoordinator`
and `TransactionStateManager`): for the transactional ids of the `__transaction_state`
partitions it leads, it keeps their `TxnMetadata`, has `transaction_rules` decide every
request, appends what they decide with acks=all, and finishes Prepare* transactions through
its `TxnMarkerSender` (docs/kafka-protocol.md, "Transactions").

Theory of operation: a transactional id lives in one partition of `__transaction_state`
(`partition_for_transactional_id`), and the leader of that partition is its coordinator
(`internal_partitions`). Like the group coordinator, this one follows the images the replica
manager has applied: for each partition led here at a new leader epoch it starts a load,
reading the partition's log from its start to its end on a worker thread and replaying it
(`transaction_log_replay`); until it is done the partition's ids answer
COORDINATOR_LOAD_IN_PROGRESS, and a partition not led here NOT_COORDINATOR. A partition no
longer led here is dropped at once, with its marker writes.

Rules:
- A decision (`transaction_rules`) is a refusal (its error), an answer (at once) or an append:
  the pending metadata is kept while the record is appended (so any other change of the id is
  CONCURRENT_TRANSACTIONS meanwhile), with acks=all within `request.timeout.ms`, and the answer
  given once it is committed; a failed append abandons the change and answers
  `state_append_error`. A partition lost or reloaded during the append answers NOT_COORDINATOR.
- The coordinator epoch is the partition's leader epoch, written in every marker.
- Once Prepare* is committed the EndTxn is answered and the markers are written in the
  background (`TxnMarkerSender`); then Complete* is appended, again after a backoff while it
  fails and the partition is still led here. A load writes the markers of every Prepare*
  transaction it finds again (a coordinator may have failed between the two records); an
  Ongoing one is left to its timeout.
- Every `transaction.abort.timed.out.transaction.cleanup.interval.ms` each loaded partition
  fences and aborts its Ongoing transactions past their timeout (`abort_timed_out`); every
  `transaction.remove.expired.transaction.cleanup.interval.ms` it writes the tombstones of the
  ids idle for `transactional.id.expiration.ms` (`expired_ids`) and forgets them once written.
- FindCoordinator (key type 1): an empty id INVALID_REQUEST; with no `__transaction_state`
  the broker asks the controller to create it (`InternalTopicCreator`, the settings of
  `TransactionCoordinatorConfig`, its replication factor capped by the brokers registered) and
  answers COORDINATOR_NOT_AVAILABLE; a partition without a leader, or a leader without the
  client's listener, COORDINATOR_NOT_AVAILABLE.
- AddOffsetsToTxn adds the group's `__consumer_offsets` partition (the existing topic's
  partition count, else `offsets.topic.num.partitions`).
- Times in the metadata are the wall clock, as Kafka's.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from uuid import UUID

from replog.clock import Clock, monotonic_ms, wall_clock_ms
from replog.common.topic_partition import TopicPartitionKey
from replog.coordinator import messages as cm
from replog.coordinator import transaction_rules as rules
from replog.coordinator.group_partition import partition_for_group
from replog.coordinator.transaction_listing import Listing, describe, list_transactions
from replog.coordinator.transaction_log_replay import (
    partition_for_transactional_id,
    replay,
    unfinished,
)
from replog.coordinator.transaction_metadata import (
    NO_PRODUCER_ID,
    TxnMetadata,
    TxnState,
    abandon,
    complete,
    prepare_dead,
)
from replog.coordinator.transaction_records import encode_key, encode_value, value_version
from replog.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidRequestError,
    KafkaError,
    NotCoordinatorError,
    UnknownServerError,
)
from replog.quorum.metadata.image import MetadataImage
from replog.record.batch import iter_batches
from replog.record.builder import BatchBuilder
from replog.replication.messages import ACKS_ALL, ProducePartition, ProduceRequest
from replog.server.config.transaction_coordinator_config import TransactionCoordinatorConfig
from replog.server.coordination.internal_partitions import (
    CoordinatorReplicas,
    ShardState,
    TopicCreator,
    coordinating,
    coordinator_of,
    leadership_changes,
)
from replog.server.runtime.node_tasks import Spawner
from replog.server.transactions.marker_sender import TxnMarkerSender
from replog.storage.log import Log
from replog.topic_names import CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC

log = logging.getLogger("replog.server.transactions")

_PREPARED = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
COMPLETE_RETRY_BACKOFF_MS = (100, 5000)


@dataclass(eq=False)
class _Shard:
    """One `__transaction_state` partition this broker leads, at one leader epoch."""

    partition: int
    topic_id: UUID
    leader_epoch: int
    state: ShardState = ShardState.LOADING
    metas: dict[str, TxnMetadata] = field(default_factory=dict)
    task: asyncio.Task[None] | None = None
    failure: str = ""
    # The marker writes (and Complete* appends) under way, by transactional id.
    completing: dict[str, asyncio.Task[None]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{TRANSACTION_STATE_TOPIC}-{self.partition}"


@dataclass(frozen=True, slots=True)
class TxnAnswer:
    """The answer to InitProducerId or EndTxn: an error, or the producer id and epoch."""

    error: KafkaError | None
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = -1


@dataclass(frozen=True, slots=True)
class Described:
    transactional_id: str
    error: KafkaError | None
    meta: TxnMetadata | None = None


class TransactionCoordinator:
    """The transaction coordinator of one broker (module docstring)."""

    name = "transaction-coordinator"

    def __init__(
        self,
        broker_id: int,
        replicas: CoordinatorReplicas,
        topic_creator: TopicCreator,
        markers: Callable[[Callable[[TopicPartitionKey], int | None]], TxnMarkerSender],
        allocate_producer_id: Callable[[], int],
        config: TransactionCoordinatorConfig | None = None,
        *,
        offsets_topic_num_partitions: int = 50,
        tasks: Spawner,
        clock: Clock = monotonic_ms,
        wall_clock: Clock = wall_clock_ms,
        sleep: Callable[[float], Awaitable[None]] | None = None,
    ) -> None:
        """`markers` makes the marker sender from the leader lookup of this coordinator's
        image; `sleep` is the backoff between Complete* attempts (asyncio's unless given)."""
        self._spawner = tasks
        self.broker_id = broker_id
        self.config = config if config is not None else TransactionCoordinatorConfig()
        self._replicas = replicas
        self._topic_creator = topic_creator
        self._markers = markers(self._leader_of)
        self._allocate = allocate_producer_id
        self._offsets_partitions = offsets_topic_num_partitions
        self._clock = clock
        self._wall_clock = wall_clock
        self._sleep: Callable[[float], Awaitable[None]] = (
            sleep if sleep is not None else asyncio.sleep
        )
        self.image = MetadataImage.EMPTY
        self._shards: dict[int, _Shard] = {}
        self._stopped = False
        self._timers: list[asyncio.Task[None]] = []
        self._background: set[asyncio.Task[None]] = set()

    # --- following leadership -----------------------------------------------------------------

    def apply_image(self, image: MetadataImage) -> None:
        """Follow the `__transaction_state` leaderships of `image`."""
        previous, self.image = self.image, image
        if self._stopped or image.topics is previous.topics:
            return
        dropped, loaded = leadership_changes(
            image, TRANSACTION_STATE_TOPIC, self.broker_id, self._shards
        )
        for shard in dropped:
            self._unload(shard)
        for partition_id, topic_id, leader_epoch in loaded:
            self._load(_Shard(partition_id, topic_id, leader_epoch))

    def _load(self, shard: _Shard) -> None:
        self._shards[shard.partition] = shard
        log.info(
            "broker %d: loading the transactions of %s (leader epoch %d)",
            self.broker_id,
            shard.name,
            shard.leader_epoch,
        )
        shard.task = self._spawner.spawn(
            self._run_load(shard), name=f"loading the transactions of {shard.name}"
        )

    def _unload(self, shard: _Shard) -> None:
        del self._shards[shard.partition]
        for task in [shard.task, *shard.completing.values()]:
            if task is not None:
                task.cancel()
        log.info(
            "broker %d: no longer the transaction coordinator of %s (%d transactional ids dropped)",
            self.broker_id,
            shard.name,
            len(shard.metas),
        )

    def _current(self, shard: _Shard) -> bool:
        return self._shards.get(shard.partition) is shard and not self._stopped

    async def _run_load(self, shard: _Shard) -> None:
        started_ms = self._clock()
        try:
            partition = self._replicas.partition(TRANSACTION_STATE_TOPIC, shard.partition)
            if partition is None or not partition.is_leader or partition.topic_id != shard.topic_id:
                raise NotCoordinatorError(
                    f"{shard.name}: the replica manager has no leader replica of it"
                )
            metas = await asyncio.to_thread(
                _read_state, partition.log, self.config.state_log_load_buffer_size
            )
        except asyncio.CancelledError:
            raise
        except Exception as error:  # a failed load answers NOT_COORDINATOR, never crashes
            if self._current(shard):
                shard.state = ShardState.FAILED
                shard.failure = f"{type(error).__name__}: {error}"
                log.warning(
                    "broker %d: loading the transactions of %s failed: %s",
                    self.broker_id,
                    shard.name,
                    shard.failure,
                )
            return
        if not self._current(shard):
            return
        shard.metas = metas
        shard.state = ShardState.ACTIVE
        prepared = unfinished(metas)
        log.info(
            "broker %d: loaded %s: %d transactional ids, %d to complete, in %d ms",
            self.broker_id,
            shard.name,
            len(metas),
            len(prepared),
            self._clock() - started_ms,
        )
        for meta in prepared:
            self._complete_in_background(shard, meta.transactional_id)

    def state_of(self, partition: int) -> ShardState | None:
        """The state of a `__transaction_state` partition led here (None: not led here)."""
        shard = self._shards.get(partition)
        return None if shard is None else shard.state

    def metadata_of(self, transactional_id: str) -> TxnMetadata | None:
        """The metadata held here for `transactional_id` (tests, DescribeTransactions)."""
        shard, _ = self._coordinating(transactional_id)
        return None if shard is None else shard.metas.get(transactional_id)

    async def wait_idle(self) -> None:
        """Until every load, marker write and background append under way ended (tests)."""
        while True:
            tasks = [
                t
                for s in self._shards.values()
                for t in (s.task, *s.completing.values())
                if t is not None and not t.done()
            ] + [t for t in self._background if not t.done()]
            if not tasks:
                return
            await asyncio.gather(*tasks, return_exceptions=True)

    def start(self) -> None:
        """Start the timeout and expiration timers (on the event loop, with the data plane)."""
        if self._timers or self._stopped:
            return
        self._timers = [
            self._spawner.spawn(
                self._every(self.config.abort_interval_ms, self.abort_timed_out_transactions),
                name="aborting timed-out transactions",
            ),
            self._spawner.spawn(
                self._every(self.config.expiration_interval_ms, self.expire_transactional_ids),
                name="expiring transactional ids",
            ),
        ]

    async def stop(self) -> None:
        """Stop the timers, drop every partition (its load and marker writes cancelled) and
        the changes under way, and the topic's creation."""
        self._stopped = True
        tasks, self._timers = [*self._timers, *self._background], []
        for shard in list(self._shards.values()):
            tasks += [t for t in (shard.task, *shard.completing.values()) if t is not None]
            self._unload(shard)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._topic_creator.stop()

    async def _every(self, interval_ms: int, tick: Callable[[], int]) -> None:
        while not self._stopped:
            await self._sleep(interval_ms / 1000)
            try:
                tick()
            except Exception:  # a failing tick must not end the timer for good
                log.exception("broker %d: a transaction coordinator timer failed", self.broker_id)

    # --- FindCoordinator ----------------------------------------------------------------------

    def find_coordinator(
        self, transactional_id: str, listener_name: str | None = None
    ) -> cm.FindCoordinatorResponse:
        """The coordinator of `transactional_id`: its endpoint of `listener_name`."""
        if not transactional_id:
            return cm.FindCoordinatorResponse(
                InvalidRequestError("FindCoordinator: a transactional id must not be empty")
            )
        image = self.image
        who = f"transactional id {transactional_id!r}"
        topic = image.topics.by_name.get(TRANSACTION_STATE_TOPIC)
        if topic is None or not topic.partitions:
            self._topic_creator.request()
            failure = self._topic_creator.last_failure
            cause = "" if failure is None else f" (the last attempt failed: {failure})"
            return cm.FindCoordinatorResponse(
                CoordinatorNotAvailableError(
                    f"{who}: {TRANSACTION_STATE_TOPIC} does not exist yet; broker "
                    f"{self.broker_id} asked the controller to create it{cause}"
                )
            )
        partition_id = partition_for_transactional_id(transactional_id, len(topic.partitions))
        return coordinator_of(image, topic, partition_id, listener_name, who)

    # --- the requests -------------------------------------------------------------------------

    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, expected: tuple[int, int] | None
    ) -> TxnAnswer:
        """InitProducerId with a transactional id; `expected`: the caller's producer id and
        epoch (KIP-360), None when it has none."""
        shard, error = self._coordinating(transactional_id)
        if shard is None:
            if not transactional_id:  # the rules' INVALID_REQUEST before NOT_COORDINATOR
                error = InvalidRequestError("a transactional id must not be empty")
            return TxnAnswer(error)
        meta = shard.metas.get(transactional_id)
        try:
            decision = rules.init_producer_id(
                meta,
                transactional_id,
                timeout_ms,
                expected,
                now_ms=self._wall_clock(),
                max_timeout_ms=self.config.max_timeout_ms,
                allocate=self._allocate,
                server_version=0 if meta is None else meta.transaction_version,
            )
        except KafkaError as failure:  # no producer id block yet: retriable
            return TxnAnswer(failure)
        return await self._answered(shard, transactional_id, decision)

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartitionKey],
        *,
        transaction_version: int,
    ) -> KafkaError | None:
        """AddPartitionsToTxn from a client (or, TV2, a leader adding them for it)."""
        shard, error = self._coordinating(transactional_id)
        if shard is None:
            return error
        decision = rules.add_partitions(
            shard.metas.get(transactional_id),
            transactional_id,
            producer_id,
            producer_epoch,
            partitions,
            now_ms=self._wall_clock(),
            version=transaction_version,
        )
        error, _ = await self._apply(shard, transactional_id, decision)
        return error

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartitionKey],
    ) -> dict[TopicPartitionKey, KafkaError | None]:
        """A leader's verification that `partitions` are in the transaction (KIP-890)."""
        shard, error = self._coordinating(transactional_id)
        if shard is None:
            return dict.fromkeys(partitions, error)
        found = rules.verify_partitions(
            shard.metas.get(transactional_id),
            transactional_id,
            producer_id,
            producer_epoch,
            partitions,
        )
        return {
            tp: None
            if error_type is None
            else error_type(f"transactional id {transactional_id!r}: {tp[0]}-{tp[1]}")
            for tp, error_type in found.items()
        }

    async def add_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str
    ) -> KafkaError | None:
        """AddOffsetsToTxn: the group's offsets partition joins the transaction."""
        offsets = self.image.topics.by_name.get(CONSUMER_OFFSETS_TOPIC)
        count = len(offsets.partitions) if offsets is not None else self._offsets_partitions
        tp = (CONSUMER_OFFSETS_TOPIC, partition_for_group(group_id, count))
        return await self.add_partitions(
            transactional_id, producer_id, producer_epoch, [tp], transaction_version=0
        )

    async def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        *,
        commit: bool,
        transaction_version: int,
    ) -> TxnAnswer:
        """EndTxn: answered once Prepare* is committed; the markers follow."""
        shard, error = self._coordinating(transactional_id)
        if shard is None:
            return TxnAnswer(error)
        try:
            decision = rules.end_txn(
                shard.metas.get(transactional_id),
                transactional_id,
                producer_id,
                producer_epoch,
                commit=commit,
                from_client=True,
                version=transaction_version,
                now_ms=self._wall_clock(),
                allocate=self._allocate,
            )
        except KafkaError as failure:  # no producer id block for a rotation yet: retriable
            return TxnAnswer(failure)
        return await self._answered(shard, transactional_id, decision)

    def describe_transactions(self, transactional_ids: Iterable[str]) -> list[Described]:
        answers = []
        for transactional_id in transactional_ids:
            shard, error = self._coordinating(transactional_id)
            if shard is None:
                answers.append(Described(transactional_id, error))
                continue
            found = describe(shard.metas, transactional_id)
            if isinstance(found, KafkaError):
                answers.append(Described(transactional_id, found))
            else:
                answers.append(Described(transactional_id, None, found))
        return answers

    def list_transactions(self, listing: Listing) -> tuple[KafkaError | None, list[TxnMetadata]]:
        """The transactions of every partition loaded here that `listing` keeps; while one is
        loading, COORDINATOR_LOAD_IN_PROGRESS (Kafka's answer: the list would be partial)."""
        loading = sorted(s.name for s in self._shards.values() if s.state is ShardState.LOADING)
        if loading:
            return (
                CoordinatorLoadInProgressError(
                    f"broker {self.broker_id} is still loading {', '.join(loading)}"
                ),
                [],
            )
        metas = [
            meta
            for shard in self._shards.values()
            if shard.state is ShardState.ACTIVE
            for meta in shard.metas.values()
        ]
        try:
            return None, list_transactions(metas, listing, self._wall_clock())
        except KafkaError as error:
            return error, []

    # --- timers -------------------------------------------------------------------------------

    def abort_timed_out_transactions(self) -> int:
        """Fence and abort every Ongoing transaction past its timeout (module Rules); how many
        aborts were started. The timer's tick, called by tests directly."""
        now_ms = self._wall_clock()
        started = 0
        for shard in self._active_shards():
            for meta in rules.timed_out(shard.metas.values(), now_ms):
                try:
                    decision = rules.abort_timed_out(
                        meta,
                        now_ms=now_ms,
                        server_version=meta.transaction_version,
                        allocate=self._allocate,
                    )
                except KafkaError as error:  # no producer id block: the next tick tries again
                    log.warning(
                        "broker %d: aborting the timed-out transaction of %r: %s",
                        self.broker_id,
                        meta.transactional_id,
                        error,
                    )
                    continue
                if not isinstance(decision, rules.Append):
                    log.warning(
                        "broker %d: the timed-out transaction of %r is not aborted: %s",
                        self.broker_id,
                        meta.transactional_id,
                        decision,
                    )
                    continue
                log.info(
                    "broker %d: aborting the transaction of %r (producer id %d, epoch %d): "
                    "it ran past its %d ms timeout",
                    self.broker_id,
                    meta.transactional_id,
                    meta.producer_id,
                    meta.producer_epoch,
                    meta.timeout_ms,
                )
                self._apply_in_background(shard, meta.transactional_id, decision)
                started += 1
        return started

    def expire_transactional_ids(self) -> int:
        """Write the tombstones of the ids idle past transactional.id.expiration.ms; how many.
        The timer's tick, called by tests directly."""
        now_ms = self._wall_clock()
        expiring = 0
        for shard in self._active_shards():
            for meta in rules.expired_ids(
                shard.metas.values(), now_ms, self.config.transactional_id_expiration_ms
            ):
                self._apply_in_background(
                    shard, meta.transactional_id, rules.Append(*prepare_dead(meta))
                )
                expiring += 1
        return expiring

    def loaded(self) -> dict[int, list[TxnMetadata]]:
        """The states of the transactional ids of each `__transaction_state` partition loaded
        here, by partition: what the abort pass times out (a reader's copy)."""
        if self._stopped:
            return {}
        return {s.partition: list(s.metas.values()) for s in self._active_shards()}

    def _active_shards(self) -> list[_Shard]:
        return [s for s in self._shards.values() if s.state is ShardState.ACTIVE]

    def _apply_in_background(
        self, shard: _Shard, transactional_id: str, decision: rules.Append
    ) -> None:
        """`decision` pending at once (no other change of the id starts), appended in a task."""
        begun = self._begin(shard, transactional_id, decision)

        async def append() -> None:
            error, _ = await self._committed(shard, transactional_id, begun)
            if error is not None:  # the next tick decides again
                log.warning(
                    "broker %d: %s of %r not written: %s: %s",
                    self.broker_id,
                    begun.record.state.display_name,
                    transactional_id,
                    error.error_name,
                    error,
                )

        task = self._spawner.spawn(append(), name=f"a transaction change of {transactional_id!r}")
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # --- applying decisions -------------------------------------------------------------------

    async def _answered(
        self, shard: _Shard, transactional_id: str, decision: rules.Decision
    ) -> TxnAnswer:
        """InitProducerId's or EndTxn's answer once `decision` is carried out: the producer id
        and epoch to use next (a rotated id at epoch 0 once a version 2 EndTxn ran out)."""
        error, done = await self._apply(shard, transactional_id, decision)
        if error is not None:
            return TxnAnswer(error)
        if isinstance(decision, rules.Answer):
            return TxnAnswer(None, decision.producer_id, decision.producer_epoch)
        assert done is not None
        if done.next_producer_id != NO_PRODUCER_ID:
            return TxnAnswer(None, done.next_producer_id, 0)
        return TxnAnswer(None, done.producer_id, done.producer_epoch)

    async def _apply(
        self, shard: _Shard, transactional_id: str, decision: rules.Decision
    ) -> tuple[KafkaError | None, TxnMetadata | None]:
        """Carry out `decision` (module Rules): its error, and the metadata it left."""
        if isinstance(decision, rules.Refuse):
            return decision.exception(), None
        if isinstance(decision, rules.Answer):
            return None, shard.metas.get(transactional_id)
        return await self._committed(
            shard, transactional_id, self._begin(shard, transactional_id, decision)
        )

    @staticmethod
    def _begin(shard: _Shard, transactional_id: str, decision: rules.Append) -> rules.Append:
        shard.metas[transactional_id] = decision.pending
        return decision

    async def _committed(
        self, shard: _Shard, transactional_id: str, decision: rules.Append
    ) -> tuple[KafkaError | None, TxnMetadata | None]:
        """Append the record of a begun `decision`, then complete or abandon it."""
        failure = await self._append(shard, transactional_id, decision.record)
        if not self._current(shard):
            return (
                NotCoordinatorError(
                    f"transactional id {transactional_id!r}: broker {self.broker_id} is no "
                    f"longer the coordinator of {shard.name}"
                ),
                None,
            )
        if failure is not None:
            shard.metas[transactional_id] = abandon(decision.pending, fence=decision.fence)
            return failure, None
        if decision.record.state is TxnState.DEAD:
            del shard.metas[transactional_id]
            return None, None
        done = complete(decision.pending, decision.record)
        shard.metas[transactional_id] = done
        if done.state in _PREPARED:
            self._complete_in_background(shard, transactional_id)
        if decision.answer_error is not None:
            return (
                decision.answer_error(
                    f"transactional id {transactional_id!r}: its ongoing transaction is "
                    "being aborted; retry"
                ),
                done,
            )
        return None, done

    async def _append(
        self, shard: _Shard, transactional_id: str, record: TxnMetadata
    ) -> KafkaError | None:
        """Append `record` (a tombstone for Dead) with acks=all; the answer's error, if any."""
        now_ms = self._wall_clock()
        batch = BatchBuilder()
        value = (
            None
            if record.state is TxnState.DEAD
            else encode_value(record, value_version(record.transaction_version))
        )
        batch.append(now_ms, encode_key(transactional_id), value)
        produce = ProduceRequest(
            ACKS_ALL,
            self.config.request_timeout_ms,
            (ProducePartition(TRANSACTION_STATE_TOPIC, shard.partition, batch.build()),),
        )
        where = f"transactional id {transactional_id!r} in {shard.name}"
        try:
            answer = await self._replicas.produce(produce, internal_topics_allowed=True)
        except KafkaError as error:
            return rules.state_append_error(error, where)
        if len(answer.partitions) != 1:
            return UnknownServerError(f"{where}: {len(answer.partitions)} answers to one append")
        failure = answer.partitions[0].error
        return None if failure is None else rules.state_append_error(failure, where)

    def _complete_in_background(self, shard: _Shard, transactional_id: str) -> None:
        if transactional_id in shard.completing:
            return
        task = self._spawner.spawn(
            self._complete(shard, transactional_id),
            name=f"the markers of {transactional_id!r}",
        )
        shard.completing[transactional_id] = task

        def done(finished: asyncio.Task[None]) -> None:
            if shard.completing.get(transactional_id) is finished:
                del shard.completing[transactional_id]

        task.add_done_callback(done)

    async def _complete(self, shard: _Shard, transactional_id: str) -> None:
        """Write the markers of a Prepare* transaction, then append Complete*."""
        meta = shard.metas[transactional_id]
        if not await self._markers.write(meta, shard.leader_epoch, lambda: self._current(shard)):
            return
        backoff_ms = COMPLETE_RETRY_BACKOFF_MS[0]
        while self._current(shard):
            meta = shard.metas[transactional_id]
            error, _ = await self._apply(
                shard, transactional_id, rules.complete_after_markers(meta, self._wall_clock())
            )
            if error is None:
                return
            log.warning(
                "broker %d: completing the transaction of %r failed (again in %d ms): %s: %s",
                self.broker_id,
                transactional_id,
                backoff_ms,
                error.error_name,
                error,
            )
            await self._sleep(backoff_ms / 1000)
            backoff_ms = min(2 * backoff_ms, COMPLETE_RETRY_BACKOFF_MS[1])

    # --- helpers ------------------------------------------------------------------------------

    def _coordinating(self, transactional_id: str) -> tuple[_Shard | None, KafkaError | None]:
        """The loaded partition keeping `transactional_id`, or the error to answer."""
        return coordinating(
            self.image,
            TRANSACTION_STATE_TOPIC,
            self._shards,
            functools.partial(partition_for_transactional_id, transactional_id),
            f"transactional id {transactional_id!r}",
            self.broker_id,
            "the transactions",
        )

    def _leader_of(self, tp: TopicPartitionKey) -> int | None:
        """The leader of `tp` in the current image; None when the partition is gone."""
        topic = self.image.topics.by_name.get(tp[0])
        registration = None if topic is None else topic.partitions.get(tp[1])
        return None if registration is None else registration.leader


def _read_state(plog: Log, chunk_bytes: int) -> dict[str, TxnMetadata]:
    """Replay the log from its start to its end (on a worker thread)."""
    return replay(_records(plog, chunk_bytes))


def _records(plog: Log, chunk_bytes: int) -> Iterator[tuple[int, bytes, bytes | None]]:
    offset, end = plog.log_start_offset, plog.log_end_offset
    while offset < end:
        data = plog.read(offset, chunk_bytes, end)
        if not data:
            return
        next_offset = offset
        for batch in iter_batches(data, where=f"{plog.name} at offset {offset}", sparse=True):
            next_offset = batch.header.next_offset
            if batch.is_control:
                continue
            for record in batch.records():
                if record.key is not None:
                    yield record.offset, record.key, record.value
        if next_offset <= offset:
            return
        offset = next_offset
