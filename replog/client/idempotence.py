"""Idempotent-producer bookkeeping: the producer id, per-partition sequences, and when a
partition must start over under a new producer id. No I/O: the sender asks and reports.

The broker's side is `replog/replication/producer_state.py`: per producer id it keeps the last
5 batches of each partition; a batch repeating one of them (same epoch and sequence range) is
answered with the original offsets and not appended; otherwise a batch must start right after
the last sequence (OUT_OF_ORDER_SEQUENCE_NUMBER if not), except for a producer id the
partition does not know, whose first batch may start anywhere.

Rules (the client side of Kafka's idempotent producer, with a new producer id where Kafka bumps
the epoch):
- Sequences are assigned when a batch is drained (`on_drained`): per partition from 0, each
  batch taking as many as it has records (Int32 max wraps to 0). At most 5 batches of a
  partition are stamped from its oldest unacknowledged batch on, counting the acknowledged
  ones among them (its `window`), so that every retry is still among the broker's retained 5
  and is recognised as a duplicate. Counting only the unacknowledged would not do: calls are
  answered out of order (an acks=all request times out while later ones, written after it,
  are acknowledged), and each later batch written pushes the old one out of the broker's 5.
- Until a partition has one batch acknowledged under its producer id, it has only one request
  pending (which may carry several of its batches, in order, as one entry: the accumulator's
  drain): the broker accepts any first sequence from an id it does not know, and concurrent
  gRPC calls (unlike requests on one Kafka TCP connection) may be processed out of order, so a
  second request could otherwise be written before the first. Once the broker knows the id, an
  overtaking batch is refused (OUT_OF_ORDER_SEQUENCE_NUMBER) and retried in turn.
- A retried batch keeps its stamp and is resent only when it is the partition's oldest
  unacknowledged batch (`can_drain`), so batches are written in sequence order. Later batches
  already on the wire fail with OUT_OF_ORDER_SEQUENCE_NUMBER and are retried in turn. A batch
  refused as too large and split (`on_split`) is replaced by its pieces, which share out its
  sequences in order: the partition's sequences stay as they were.
- OUT_OF_ORDER_SEQUENCE_NUMBER is retried. When the refused batch is exactly the next sequence
  after the last acknowledged one (nothing earlier is pending), the broker lost the producer's
  state (truncation, data loss): the partition is renumbered under a new id.
  UNKNOWN_PRODUCER_ID likewise renumbers the partition and retries.
- A stamped batch that ends without success (a non-retriable error, no retries left, expired
  in the queue or on the wire) leaves a possible gap. The partition is "unresolved": nothing
  more of it is sent until none of its batches is on the wire; then, if a later batch was
  acknowledged, the failed one was written after all (the broker accepts only in order) and
  the partition goes on; otherwise it is renumbered.
- Renumbering needs a producer id obtained after it was requested and a partition with
  nothing on the wire: its pending batches are then restamped from sequence 0 under the new
  id, in their order (the broker accepts an unknown id at any sequence). Other partitions keep
  their old id until they have nothing pending, then move to the current one from 0 (the
  broker keeps per-id state, so mixing ids across partitions is fine).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from replog.client.accumulator import ProducerBatch
from replog.common import TopicPartition
from replog.errors import OutOfOrderSequenceNumberError, UnknownProducerIdError

__all__ = ["MAX_PENDING_PER_PARTITION", "Idempotence", "ProducerIdAndEpoch"]

INT32_MAX = 2**31 - 1
MAX_PENDING_PER_PARTITION = 5  # the broker retains a producer's last 5 batches per partition
NO_SEQUENCE = -1


@dataclass(frozen=True, slots=True)
class ProducerIdAndEpoch:
    producer_id: int
    epoch: int


def increment_sequence(sequence: int, count: int) -> int:
    """`sequence` advanced by `count` records, wrapping from Int32 max to 0."""
    return (sequence + count) & INT32_MAX


def sequence_after(a: int, b: int) -> bool:
    """Whether sequence `a` comes after `b` (wrap-aware: within half the ring)."""
    distance = (a - b) & INT32_MAX
    return 0 < distance < (1 << 30)


@dataclass
class _Partition:
    producer: ProducerIdAndEpoch
    next_sequence: int = 0
    last_acked: int = NO_SEQUENCE
    pending: list[ProducerBatch] = field(default_factory=list)  # stamped, not done; by sequence
    # Stamped from the oldest pending batch on, done or not, by sequence (Rules).
    window: list[ProducerBatch] = field(default_factory=list)
    unresolved: int | None = None  # last sequence of a batch that ended without success
    renumber_after: int | None = None  # needs a producer id newer than this generation

    def in_flight(self) -> bool:
        return any(batch.in_flight for batch in self.pending)

    def expected_sequence(self) -> int:
        return 0 if self.last_acked == NO_SEQUENCE else increment_sequence(self.last_acked, 1)

    def settle(self, batch: ProducerBatch) -> None:
        """`batch` is done: no longer pending; the window starts at the oldest pending."""
        if batch in self.pending:
            self.pending.remove(batch)
        # The pending batches are the window's unsettled ones, in the same order.
        del self.window[: self.window.index(self.pending[0]) if self.pending else None]


class Idempotence:
    """The producer id and every partition's sequences (module docstring). Used on the
    event loop only."""

    def __init__(self, max_pending: int = MAX_PENDING_PER_PARTITION) -> None:
        self.max_pending = max_pending
        self.producer: ProducerIdAndEpoch | None = None
        self.generation = 0  # producer ids received so far
        self.resets = 0  # partitions renumbered (a metric)
        self._partitions: dict[TopicPartition, _Partition] = {}
        # A transactional producer's: its batches carry the transactional flag, and a
        # partition's batches leave only once `gate` says it is in the transaction.
        self.transactional = False
        self.gate: Callable[[TopicPartition], bool] | None = None

    # --- the producer id ------------------------------------------------------------------------

    def needs_producer_id(self) -> bool:
        """No id yet, or a partition waits to be renumbered under a newer one."""
        if self.producer is None:
            return True
        return any(
            state.renumber_after == self.generation and not state.in_flight()
            for state in self._partitions.values()
        )

    def set_producer_id(self, producer_id: int, epoch: int) -> None:
        self.producer = ProducerIdAndEpoch(producer_id, epoch)
        self.generation += 1
        self.maybe_resolve()

    def start_over(self, producer_id: int, epoch: int) -> None:
        """A transactional producer's new id or epoch (a new transaction version 2 epoch, an
        epoch bump): every partition starts again from sequence 0 under it, as Kafka's
        TransactionManager resets its sequences. Between transactions nothing is pending."""
        self._partitions.clear()
        self.set_producer_id(producer_id, epoch)

    # --- draining -------------------------------------------------------------------------------

    def can_drain(self, tp: TopicPartition, batch: ProducerBatch) -> bool:
        """Whether `batch`, the head of `tp`'s queue, may be sent now."""
        if self.producer is None:
            return False
        if self.gate is not None and not self.gate(tp):
            return False
        state = self._partitions.get(tp)
        if state is None:
            return batch.base_sequence < 0
        if state.unresolved is not None or state.renumber_after is not None:
            return False
        if batch.base_sequence >= 0:
            return bool(state.pending) and state.pending[0] is batch and not batch.in_flight
        if state.pending and (state.last_acked == NO_SEQUENCE or state.producer != self.producer):
            # The broker takes any first sequence from an id it does not know, so a second
            # batch overtaking the first (concurrent gRPC calls may be reordered) would be
            # written first. Until one batch is acknowledged, one request at a time (it may
            # carry several of the partition's batches, in order: the accumulator's drain).
            return False
        return len(state.window) < self.max_pending

    def on_drained(self, batch: ProducerBatch) -> None:
        """Stamp a first send; mark the batch in flight."""
        tp = batch.topic_partition
        if batch.base_sequence < 0:
            producer = self.producer
            assert producer is not None, "drained before the producer id arrived"
            state = self._partitions.get(tp)
            if state is None:
                state = self._partitions[tp] = _Partition(producer)
            elif state.producer != producer and not state.pending:
                state.producer, state.next_sequence, state.last_acked = producer, 0, NO_SEQUENCE
            batch.transactional = self.transactional
            batch.stamp(state.producer.producer_id, state.producer.epoch, state.next_sequence)
            state.next_sequence = increment_sequence(state.next_sequence, batch.record_count)
            state.pending.append(batch)
            state.window.append(batch)
        batch.in_flight = True

    # --- answers --------------------------------------------------------------------------------

    def on_success(self, batch: ProducerBatch) -> None:
        """The broker wrote the batch (or had it already: a duplicate)."""
        batch.in_flight = False
        state = self._partitions.get(batch.topic_partition)
        if state is None:
            return
        state.settle(batch)
        if batch.producer_id == state.producer.producer_id and (
            state.last_acked == NO_SEQUENCE or sequence_after(batch.last_sequence, state.last_acked)
        ):
            state.last_acked = batch.last_sequence

    def on_retry(self, batch: ProducerBatch, error: BaseException) -> None:
        """The batch failed and will be resent (it stays pending)."""
        batch.in_flight = False
        state = self._partitions.get(batch.topic_partition)
        if state is None:
            return
        if isinstance(error, UnknownProducerIdError):
            self._renumber(state)
        elif (
            isinstance(error, OutOfOrderSequenceNumberError)
            and state.unresolved is None
            and state.renumber_after is None
            and state.pending
            and state.pending[0] is batch
            and batch.base_sequence == state.expected_sequence()
        ):
            self._renumber(state)  # a real gap: the broker lost what it had acknowledged

    def on_split(self, batch: ProducerBatch, pieces: list[ProducerBatch]) -> None:
        """The broker refused `batch` as too large (nothing written) and it was split into
        `pieces`, stamped with its id and its sequences in order: they take its place among
        the pending batches and are sent in turn, the first when it is the oldest (Kafka's
        TransactionManager tracks split batches under the sequences they were given)."""
        batch.in_flight = False
        state = self._partitions.get(batch.topic_partition)
        if state is None or batch not in state.pending:
            return
        index = state.pending.index(batch)
        state.pending[index : index + 1] = pieces
        if batch in state.window:
            index = state.window.index(batch)
            state.window[index : index + 1] = pieces

    def on_failed(self, batch: ProducerBatch) -> None:
        """The batch ended without success (it is not resent): a possible gap. For a batch
        that expired while on the wire, call this when its answer arrives; `on_expired` at
        the expiry itself."""
        batch.in_flight = False
        state = self._partitions.get(batch.topic_partition)
        if state is None or batch.base_sequence < 0:
            return
        state.settle(batch)
        self._mark_unresolved(state, batch)

    def on_expired(self, batch: ProducerBatch) -> None:
        """The batch expired while on the wire: its partition stops until its answer came."""
        state = self._partitions.get(batch.topic_partition)
        if state is not None and batch.base_sequence >= 0:
            self._mark_unresolved(state, batch)

    def can_retry(self, error: BaseException) -> bool:
        """Errors the idempotent producer retries although Kafka does not mark them
        retriable (module docstring)."""
        return isinstance(error, OutOfOrderSequenceNumberError | UnknownProducerIdError)

    def maybe_resolve(self) -> None:
        """Settle unresolved partitions with nothing on the wire, and renumber those that wait
        for a producer id that has arrived (module docstring)."""
        for state in self._partitions.values():
            if state.in_flight():
                continue
            if state.unresolved is not None:
                written = state.last_acked != NO_SEQUENCE and not sequence_after(
                    state.unresolved, state.last_acked
                )
                state.unresolved = None
                if not written:
                    self._renumber(state)
            if (
                state.renumber_after is not None
                and state.renumber_after < self.generation
                and self.producer is not None
            ):
                self._restamp(state, self.producer)

    # --- internals ------------------------------------------------------------------------------

    def _mark_unresolved(self, state: _Partition, batch: ProducerBatch) -> None:
        if batch.producer_id != state.producer.producer_id:
            return  # a batch of an id the partition already left
        last = batch.last_sequence
        if state.unresolved is None or sequence_after(last, state.unresolved):
            state.unresolved = last

    def _renumber(self, state: _Partition) -> None:
        if state.renumber_after is None:
            state.renumber_after = self.generation

    def _restamp(self, state: _Partition, producer: ProducerIdAndEpoch) -> None:
        sequence = 0
        for batch in state.pending:
            batch.stamp(producer.producer_id, producer.epoch, sequence)
            sequence = increment_sequence(sequence, batch.record_count)
        state.producer = producer
        state.window = list(state.pending)
        state.next_sequence = sequence
        state.last_acked = NO_SEQUENCE
        state.unresolved = None
        state.renumber_after = None
        self.resets += 1

    # --- inspection (tests, metrics) ------------------------------------------------------------

    def next_sequence(self, tp: TopicPartition) -> int:
        state = self._partitions.get(tp)
        return 0 if state is None else state.next_sequence

    def last_acked(self, tp: TopicPartition) -> int:
        state = self._partitions.get(tp)
        return NO_SEQUENCE if state is None else state.last_acked

    def pending(self, tp: TopicPartition) -> list[ProducerBatch]:
        state = self._partitions.get(tp)
        return [] if state is None else list(state.pending)

    def room(self, tp: TopicPartition) -> int:
        """How many more first sends `tp`'s window takes (Rules)."""
        state = self._partitions.get(tp)
        return self.max_pending - (0 if state is None else len(state.window))

    def is_blocked(self, tp: TopicPartition) -> bool:
        """Unresolved or waiting to be renumbered."""
        state = self._partitions.get(tp)
        return state is not None and (
            state.unresolved is not None or state.renumber_after is not None
        )
