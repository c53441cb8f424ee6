"""Idempotent-producer state of one partition: sequence checks and de-duplication of retries.

Rules (paraphrasing Kafka's broker: `storage/src/main/java/org/apache/kafka/storage/internals/log/`
`ProducerAppendInfo.java` (checkProducerEpoch, checkSequence, inSequence),
`ProducerStateEntry.java` (NUM_BATCHES_TO_RETAIN, addBatch, findDuplicateBatch) and
`ProducerStateManager.java` (prepareUpdate, removeExpiredProducers), plus the duplicate lookup of
`UnifiedLog.analyzeAndValidateProducerState`):

- A batch with producer id < 0 is not idempotent: no state, no checks.
- Per producer id the table keeps its producer epoch, the metadata (first and last sequence,
  first and last offset, max timestamp) of its last 5 data batches of that epoch, oldest first,
  and the timestamp of its last batch.
- Duplicates first: a client batch whose epoch equals the producer's current epoch and whose
  (first sequence, last sequence) equals one of the 5 retained batches is a retry of a batch
  already in the log. It is not appended; the producer is answered with the original batch's
  offsets. The lookup is against the table as it was before the request.
- A request (one partition's entry) of several batches is a retry as a whole or not at all:
  when every batch is a duplicate and they lie back to back in the log, it is answered with the
  first one's first offset up to the last one's last offset; when only some are, or they are
  not contiguous, the entry is refused with INVALID_RECORD naming which (one answer cannot say
  where each batch is; replog's client then sends each batch alone, Kafka's allows one batch
  per entry). Answering from the first duplicate alone would drop the new batches silently
  and, for acks=all, acknowledge before the later batches were replicated.
- Epoch: a batch whose producer epoch is lower than the current one is refused with
  INVALID_PRODUCER_EPOCH (a fenced "zombie" producer).
- Sequence, when the batch's epoch differs from the current one (an epoch bump): the batch must
  start at sequence 0, unless the producer is unknown (no current epoch).
- Sequence, same epoch: the batch must start right after the last retained batch's last
  sequence (last + 1, where Int32 max is followed by 0; with no retained batch, "last" is -1 so
  only 0 fits). Anything else is OUT_OF_ORDER_SEQUENCE_NUMBER.
- Unknown producer id (not in the table: new, expired, or its state lost with its segments):
  any epoch and any sequence are accepted, and within that first request the sequence is not
  checked either. Current Kafka brokers no longer answer UNKNOWN_PRODUCER_ID for this (KIP-360);
  the producer's own bookkeeping catches real gaps.
- Within one request the batches are checked in order against the state the earlier batches
  of the same request would leave.
- A coordinator's append (`AppendOrigin.COORDINATOR`: the group coordinator's transactional
  offset commits, in the client producer's id and epoch with no sequence) is checked for its
  epoch and transaction state only: no duplicate lookup, no sequence check (Kafka's
  `ProducerAppendInfo` checks sequences for `AppendOrigin.CLIENT` alone).
- Applying a batch (leader after its append, follower replication, rebuild from the log) checks
  nothing: a different epoch replaces the epoch and forgets the retained batches; a data batch
  is added (the oldest of 6 is dropped); a control batch (transaction marker) only moves the
  epoch and the timestamp.
- Transactions: a producer's transaction opens at its first transactional data batch
  (`current_txn_first_offset`) and closes at its control batch (COMMIT or ABORT); while it is
  open, a non-transactional batch of that producer is INVALID_TXN_STATE. A marker a coordinator
  asks to write is checked by `check_marker` (its epoch: above the producer's with transaction
  version 2, a same-epoch repeat after the close accepted; not below it before version 2; its
  coordinator epoch not below the last marker's, else TRANSACTION_COORDINATOR_FENCED). The
  marker's coordinator epoch is kept when the caller passes the marker; a rebuild from headers
  alone keeps the previous one.
- The partition's open and unreplicated transactions, the last stable offset and the aborted
  transaction index entries are `partition_transactions`'s, fed by every `update` (an
  ABORT's entry is `update`'s answer, for the shell to write to the segment's `.txnindex`),
  rebuilt by `replay` (the log's headers with their markers) and by `load` (a snapshot's open
  transactions).
  A control batch is applied with its marker (`EndTxnMarker`): without it (a caller that did
  not read it) the producer's transaction still closes, as a commit, and no index entry is
  made; an empty control batch (its marker cleaned away) closes nothing, as Kafka's.
- Expiry: a producer whose last timestamp is `producer.id.expiration.ms` (default 1 day) or more
  before now is forgotten, unless its transaction is open (Kafka's rule).

Theory of operation: the leader calls `check(header)` (or `check_batches`) on the headers of a
produce before appending; a BatchMetadata answer means "duplicate: reply with these offsets and
append nothing"; an exception is the partition's error. After the append the leader calls
`update(header)` with each stamped header (real offsets). A follower only calls `update`. After
truncation, or when a replica first takes a role (leader or follower), the shell calls
`rebuild(headers of the log)`, or `load`s a snapshot's entries (`producer_snapshot.py`) and
`update`s with the headers after it; a rebuild must yield the same table as the incremental
updates did, because both apply the same `_applied` step.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import Enum
from itertools import pairwise

from replog.common.offsets import NO_OFFSET
from replog.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceNumberError,
    TransactionCoordinatorFencedError,
)
from replog.record.control_record import EndTxnMarker
from replog.record.header import BatchHeader
from replog.replication.partition_transactions import PartitionTransactions
from replog.storage.aborted_transactions import AbortedTransaction

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT32_MAX = 2**31 - 1
NO_COORDINATOR_EPOCH = -1
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms


class AppendOrigin(Enum):
    """Who appends a batch as leader (Kafka's AppendOrigin; Rules)."""

    CLIENT = "client"
    COORDINATOR = "coordinator"


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """One retained batch of a producer: where a retry of it was written."""

    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class ProducerEntry:
    """What the partition knows of one producer id."""

    producer_id: int
    producer_epoch: int
    batches: tuple[BatchMetadata, ...]  # oldest first, at most NUM_BATCHES_TO_RETAIN
    last_timestamp_ms: int
    current_txn_first_offset: int = NO_OFFSET  # the open transaction's first batch, if any
    coordinator_epoch: int = NO_COORDINATOR_EPOCH  # of the last marker written

    @property
    def in_transaction(self) -> bool:
        return self.current_txn_first_offset != NO_OFFSET

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else NO_SEQUENCE

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        """The retained batch `header` repeats (same epoch, same sequence range), if any."""
        if header.producer_epoch != self.producer_epoch:
            return None
        first, last = header.base_sequence, header.last_sequence
        for batch in self.batches:
            if batch.first_sequence == first and batch.last_sequence == last:
                return batch
        return None


def in_sequence(last_sequence: int, next_sequence: int) -> bool:
    """Whether `next_sequence` directly follows `last_sequence` (Int32 max wraps to 0)."""
    return next_sequence == last_sequence + 1 or (next_sequence == 0 and last_sequence == INT32_MAX)


def _applied(
    entry: ProducerEntry | None, header: BatchHeader, marker: EndTxnMarker | None = None
) -> ProducerEntry:
    """`entry` after `header` is in the log (no checks: Kafka's addBatch / marker update); a
    control batch ends the open transaction (`marker`, when known, gives the coordinator's
    epoch)."""
    if entry is None or entry.producer_epoch != header.producer_epoch:
        batches: tuple[BatchMetadata, ...] = ()
    else:
        batches = entry.batches
    txn_first = entry.current_txn_first_offset if entry is not None else NO_OFFSET
    coordinator_epoch = entry.coordinator_epoch if entry is not None else NO_COORDINATOR_EPOCH
    if header.is_control:
        if header.records_count:
            txn_first = NO_OFFSET
        if marker is not None:
            coordinator_epoch = marker.coordinator_epoch
    else:
        if header.is_transactional and txn_first == NO_OFFSET:
            txn_first = header.base_offset
        batch = BatchMetadata(
            first_sequence=header.base_sequence,
            last_sequence=header.last_sequence,
            first_offset=header.base_offset,
            last_offset=header.last_offset,
            timestamp_ms=header.max_timestamp,
        )
        batches = (*batches, batch)[-NUM_BATCHES_TO_RETAIN:]
    return ProducerEntry(
        header.producer_id,
        header.producer_epoch,
        batches,
        header.max_timestamp,
        txn_first,
        coordinator_epoch,
    )


class ProducerStateTable:
    """Idempotent producers of one partition (Rules above). No I/O."""

    def __init__(self, where: str) -> None:
        self.where = where
        self._entries: dict[int, ProducerEntry] = {}
        self.transactions = PartitionTransactions()

    def __len__(self) -> int:
        return len(self._entries)

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self._entries.get(producer_id)

    def entries(self) -> Mapping[int, ProducerEntry]:
        """A copy of the table by producer id."""
        return dict(self._entries)

    # --- Leader: before the append ----------------------------------------------------------

    def check(self, header: BatchHeader) -> BatchMetadata | None:
        """Validate one client batch: its duplicate's metadata, None to append, or an error."""
        return self.check_batches((header,))

    def check_batches(
        self, headers: Iterable[BatchHeader], origin: AppendOrigin = AppendOrigin.CLIENT
    ) -> BatchMetadata | None:
        """Validate the batches of one produce in order (Rules): None to append them, the
        offsets of the duplicates when all are, or an error."""
        client = origin is AppendOrigin.CLIENT
        pending: dict[int, ProducerEntry] = {}
        duplicates: list[BatchMetadata] = []
        fresh = 0  # batches that are not duplicates
        for header in headers:
            producer_id = header.producer_id
            committed = self._entries.get(producer_id) if producer_id >= 0 else None
            duplicate = (
                committed.find_duplicate(header) if client and committed is not None else None
            )
            if duplicate is not None:
                duplicates.append(duplicate)
                continue
            fresh += 1
            if producer_id < 0:
                continue
            current = pending.get(producer_id, committed)
            self._validate(committed, current, header, client)
            pending[producer_id] = _applied(current, header)
        if not duplicates:
            return None
        if fresh:
            raise InvalidRecordError(
                f"{self.where}: {len(duplicates)} of the request's {len(duplicates) + fresh} "
                "batches are retries of batches already written and the others are not; send "
                "them in separate requests"
            )
        for before, after in pairwise(duplicates):
            if after.first_offset != before.last_offset + 1:
                raise InvalidRecordError(
                    f"{self.where}: the request's batches are retries of batches written apart "
                    f"(offsets {before.first_offset}-{before.last_offset} and "
                    f"{after.first_offset}-{after.last_offset}); send them in separate requests"
                )
        first, last = duplicates[0], duplicates[-1]
        return replace(first, last_sequence=last.last_sequence, last_offset=last.last_offset)

    def _validate(
        self,
        committed: ProducerEntry | None,
        current: ProducerEntry | None,
        header: BatchHeader,
        client: bool,
    ) -> None:
        producer_id, producer_epoch = header.producer_id, header.producer_epoch
        current_epoch = current.producer_epoch if current is not None else NO_PRODUCER_EPOCH
        if producer_epoch < current_epoch:
            raise InvalidProducerEpochError(
                f"{self.where}: producer {producer_id} sent epoch {producer_epoch}, older than "
                f"its current epoch {current_epoch}"
            )
        if header.is_control:
            return  # transaction markers carry no sequence
        if current is not None and current.in_transaction and not header.is_transactional:
            raise InvalidTxnStateError(
                f"{self.where}: producer {producer_id} sent a non-transactional batch while its "
                f"transaction from offset {current.current_txn_first_offset} is open"
            )
        if not client:
            return  # a coordinator's batch carries no sequence
        first_sequence = header.base_sequence
        if producer_epoch != current_epoch:
            if first_sequence != 0 and current_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceNumberError(
                    f"{self.where}: producer {producer_id} bumped its epoch from {current_epoch} "
                    f"to {producer_epoch} but starts at sequence {first_sequence}, not 0"
                )
            return
        committed_epoch = committed.producer_epoch if committed is not None else NO_PRODUCER_EPOCH
        last_sequence = current.last_sequence if current is not None else NO_SEQUENCE
        # A producer the table did not know before this request may start anywhere (Rules).
        if committed_epoch != NO_PRODUCER_EPOCH and not in_sequence(last_sequence, first_sequence):
            expected = 0 if last_sequence == INT32_MAX else last_sequence + 1
            raise OutOfOrderSequenceNumberError(
                f"{self.where}: producer {producer_id} epoch {producer_epoch} sent sequence "
                f"{first_sequence}, expected {expected} after its last sequence {last_sequence}"
            )

    # --- Applying batches that are in the log -----------------------------------------------

    def check_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        transaction_version: int,
    ) -> None:
        """Validate an end-transaction marker a coordinator asks the leader to write (Kafka's
        `ProducerAppendInfo.checkProducerEpoch` and `checkCoordinatorEpoch`): with transaction
        version 2 the marker's epoch must exceed the producer's (the coordinator bumped it), a
        repeat at the same epoch once the transaction is closed is accepted (a retried marker);
        before version 2 it must not be lower; a coordinator epoch below the last marker's is
        a fenced coordinator."""
        entry = self._entries.get(producer_id)
        current = entry.producer_epoch if entry is not None else NO_PRODUCER_EPOCH
        if transaction_version >= 2:
            retried = producer_epoch == current and entry is not None and not entry.in_transaction
            stale = producer_epoch <= current and not retried
        else:
            stale = producer_epoch < current
        if stale:
            raise InvalidProducerEpochError(
                f"{self.where}: a marker of producer {producer_id} at epoch {producer_epoch} is "
                f"stale: its epoch is {current} (transaction version {transaction_version})"
            )
        if entry is not None and coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"{self.where}: a marker of producer {producer_id} from coordinator epoch "
                f"{coordinator_epoch}, older than {entry.coordinator_epoch}"
            )

    def update(
        self, header: BatchHeader, marker: EndTxnMarker | None = None
    ) -> AbortedTransaction | None:
        """Record a batch now in the log, with its stamped offsets (leader or follower);
        `marker`: a control batch's end-transaction marker, when the caller read it. Returns
        the aborted transaction index entry an ABORT marker makes, else None."""
        producer_id = header.producer_id
        if producer_id < 0:
            return None
        self._entries[producer_id] = _applied(self._entries.get(producer_id), header, marker)
        if not header.is_control:
            if header.is_transactional:
                self.transactions.on_data_batch(producer_id, header.base_offset, True)
            return None
        if not header.records_count:
            return None
        aborted = marker is not None and marker.aborted
        _, entry = self.transactions.on_marker(producer_id, header.base_offset, aborted)
        return entry

    def rebuild(self, headers: Iterable[BatchHeader]) -> list[AbortedTransaction]:
        """`replay` of headers read without their markers (Rules: control batches commit)."""
        return self.replay((header, None) for header in headers)

    def replay(
        self, batches: Iterable[tuple[BatchHeader, EndTxnMarker | None]]
    ) -> list[AbortedTransaction]:
        """Forget everything, then apply the log's batches in offset order, each header with
        its control batch's marker (None for a data batch). Returns the aborted transactions'
        index entries."""
        self.truncate()
        aborted: list[AbortedTransaction] = []
        previous_next_offset = -1
        for header, marker in batches:
            assert header.base_offset >= previous_next_offset, (
                f"{self.where}: rebuild got batch at offset {header.base_offset} after one "
                f"ending at {previous_next_offset - 1}"
            )
            previous_next_offset = header.next_offset
            entry = self.update(header, marker)
            if entry is not None:
                aborted.append(entry)
        return aborted

    def last_stable_offset(self, high_watermark: int) -> int:
        """The LSO: below the first open or unreplicated transaction, at most the HW
        (`partition_transactions`)."""
        transactions = self.transactions
        if transactions.idle:  # most partitions: no transaction, read by every fetch
            return high_watermark
        transactions.on_high_watermark(high_watermark)
        return transactions.last_stable_offset(high_watermark)

    def truncate(self) -> None:
        """Forget every producer and transaction (the log was emptied)."""
        self._entries = {}
        self.transactions.reset()

    def load(self, entries: Iterable[ProducerEntry]) -> None:
        """Forget everything, then take `entries` (a producer-state snapshot's), their open
        transactions included."""
        self.truncate()
        self._entries = {entry.producer_id: entry for entry in entries}
        for entry in self._entries.values():
            if entry.in_transaction:
                self.transactions.on_data_batch(
                    entry.producer_id, entry.current_txn_first_offset, True
                )

    def remove_expired(
        self, now_ms: int, producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS
    ) -> list[int]:
        """Forget producers idle for `producer_id_expiration_ms` or more, but none with an
        open transaction; returns their ids."""
        expired = [
            producer_id
            for producer_id, entry in self._entries.items()
            if now_ms - entry.last_timestamp_ms >= producer_id_expiration_ms
            and not entry.in_transaction
        ]
        for producer_id in expired:
            del self._entries[producer_id]
        return expired
