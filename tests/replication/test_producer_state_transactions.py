"""The idempotent producer state's transaction rules (Kafka's ProducerAppendInfo): a
transaction opens at the first transactional batch and closes at its marker; a plain batch
while it is open is INVALID_TXN_STATE; markers are checked by epoch (transaction version aware,
KAFKA-19999's retried marker) and coordinator epoch; a coordinator's batches (no sequence)
are checked for their epoch only; the end-transaction marker's bytes."""

from __future__ import annotations

import pytest

from replog.errors import (
    CorruptRecordError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceNumberError,
    TransactionCoordinatorFencedError,
)
from replog.record.control_record import (
    EndTxnMarker,
    decode_marker,
    encode_marker,
    marker_type,
)
from replog.record.header import TRANSACTIONAL_FLAG_MASK
from replog.replication.producer_snapshot import (
    decode_producer_snapshot,
    encode_producer_snapshot,
)
from replog.replication.producer_state import AppendOrigin, ProducerStateTable
from replog.storage.aborted_transactions import AbortedTransaction
from tests.replication.test_producer_state import batch


def txn_batch(producer_id, epoch, sequence, base_offset, count=1):
    header = batch(producer_id, epoch, sequence, count=count, base_offset=base_offset)
    return header._replace(attributes=header.attributes | TRANSACTIONAL_FLAG_MASK)


def marker_batch(producer_id, epoch, base_offset):
    header = batch(producer_id, epoch, -1, base_offset=base_offset, control=True)
    return header._replace(attributes=header.attributes | TRANSACTIONAL_FLAG_MASK)


def test_a_transaction_opens_at_its_first_batch_and_closes_at_its_marker():
    table = ProducerStateTable("orders-0")
    table.update(txn_batch(7, 0, 0, base_offset=10))
    table.update(txn_batch(7, 0, 1, base_offset=12))
    assert table.entry(7).current_txn_first_offset == 10
    table.update(
        marker_batch(7, 0, base_offset=13), EndTxnMarker(aborted=False, coordinator_epoch=3)
    )
    entry = table.entry(7)
    assert not entry.in_transaction and entry.coordinator_epoch == 3
    # a later transaction of the same producer opens anew
    table.update(txn_batch(7, 0, 2, base_offset=20))
    assert table.entry(7).current_txn_first_offset == 20


def test_a_plain_batch_while_a_transaction_is_open_is_refused():
    table = ProducerStateTable("orders-0")
    table.update(txn_batch(7, 0, 0, base_offset=10))
    with pytest.raises(InvalidTxnStateError, match=r"orders-0.*producer 7.*offset 10"):
        table.check(batch(7, 0, 1, base_offset=11))
    assert table.check(txn_batch(7, 0, 1, base_offset=11)) is None


@pytest.mark.parametrize(
    ("version", "marker_epoch", "open_txn", "refused"),
    [
        (2, 3, True, False),  # the coordinator bumped the epoch
        (2, 2, True, True),  # same epoch while open: a late marker of an older transaction
        (2, 2, False, False),  # same epoch once closed: a retried marker (KAFKA-19999)
        (2, 1, False, True),
        (0, 2, True, False),  # before version 2 markers carry the producer's epoch
        (0, 1, True, True),
    ],
)
def test_marker_epochs(version, marker_epoch, open_txn, refused):
    table = ProducerStateTable("orders-0")
    table.update(txn_batch(7, 2, 0, base_offset=0))
    if not open_txn:
        table.update(marker_batch(7, 2, base_offset=1), EndTxnMarker(False, 0))
    if refused:
        with pytest.raises(InvalidProducerEpochError, match="stale"):
            table.check_marker(7, marker_epoch, 0, version)
    else:
        table.check_marker(7, marker_epoch, 0, version)


def test_a_marker_from_an_older_coordinator_is_fenced():
    table = ProducerStateTable("orders-0")
    table.update(txn_batch(7, 0, 0, base_offset=0))
    table.update(marker_batch(7, 0, base_offset=1), EndTxnMarker(True, 5))
    table.update(txn_batch(7, 0, 1, base_offset=2))
    with pytest.raises(TransactionCoordinatorFencedError, match="coordinator epoch 4"):
        table.check_marker(7, 0, 4, 0)
    table.check_marker(7, 0, 5, 0)


def test_the_marker_record_is_kafkas():
    key, value = encode_marker(EndTxnMarker(aborted=True, coordinator_epoch=5))
    assert (key.hex(), value.hex()) == ("00000000", "000000000005")
    assert decode_marker(*encode_marker(EndTxnMarker(False, 9)), "t") == EndTxnMarker(False, 9)
    assert marker_type(b"\x00\x00\x00\x01") == 1 and marker_type(b"\x00") is None
    with pytest.raises(CorruptRecordError, match="no COMMIT or ABORT"):
        decode_marker(b"\x00\x00\x00\x07", value, "orders-0 at 4")
    with pytest.raises(CorruptRecordError, match="too short"):
        decode_marker(key, b"\x00", "orders-0 at 4")


# --- the partition's transactions through the table: LSO, index entries, snapshots, expiry ---

ABORT = EndTxnMarker(aborted=True, coordinator_epoch=1)
COMMIT = EndTxnMarker(aborted=False, coordinator_epoch=1)


def test_the_lso_stops_at_the_first_open_transaction_until_its_marker_is_replicated():
    table = ProducerStateTable("orders-0")
    table.update(batch(1, 0, 0, base_offset=0))  # plain idempotent data: never unstable
    table.update(txn_batch(7, 0, 0, base_offset=1))
    table.update(txn_batch(8, 0, 0, base_offset=2))
    assert table.last_stable_offset(10) == 1
    assert table.update(marker_batch(7, 0, base_offset=3), COMMIT) is None
    assert table.last_stable_offset(3) == 1  # the marker is not below the HW yet
    assert table.last_stable_offset(4) == 2  # replicated: producer 8's transaction holds it
    entry = table.update(marker_batch(8, 0, base_offset=4), ABORT)
    assert entry == AbortedTransaction(8, 2, 4, 5)
    assert table.last_stable_offset(5) == 5  # nothing open: the HW
    assert table.last_stable_offset(3) == 3  # never past the HW


def test_an_abort_entry_carries_the_lso_of_the_other_open_transactions():
    table = ProducerStateTable("orders-0")
    table.update(txn_batch(7, 0, 0, base_offset=10))
    table.update(txn_batch(8, 0, 0, base_offset=11))
    # Producer 7's abort: producer 8's transaction, open since 11, bounds the LSO.
    assert table.update(marker_batch(7, 0, base_offset=12), ABORT) == AbortedTransaction(
        7, 10, 12, 11
    )


def test_a_marker_read_without_its_record_closes_as_a_commit_and_an_empty_one_closes_nothing():
    table = ProducerStateTable("orders-0")
    table.update(txn_batch(7, 0, 0, base_offset=0))
    empty = marker_batch(7, 0, base_offset=1)._replace(records_count=0)
    assert table.update(empty) is None
    assert table.entry(7).in_transaction and table.last_stable_offset(9) == 0
    assert table.update(marker_batch(7, 0, base_offset=2)) is None
    assert not table.entry(7).in_transaction and table.last_stable_offset(9) == 9


def test_replay_gives_the_table_and_the_entries_the_appends_gave():
    batches = [
        (txn_batch(7, 0, 0, base_offset=0), None),
        (txn_batch(8, 0, 0, base_offset=1), None),
        (marker_batch(7, 0, base_offset=2), ABORT),
        (txn_batch(7, 0, 1, base_offset=3), None),
        (marker_batch(8, 0, base_offset=4), COMMIT),
    ]
    live = ProducerStateTable("orders-0")
    appended = [e for e in (live.update(h, m) for h, m in batches) if e is not None]
    replayed = ProducerStateTable("orders-0")
    assert replayed.replay(batches) == appended == [AbortedTransaction(7, 0, 2, 1)]
    assert replayed.entries() == live.entries()
    assert replayed.last_stable_offset(5) == live.last_stable_offset(5) == 3


def test_a_snapshot_keeps_open_transactions_and_loading_it_restores_the_lso():
    table = ProducerStateTable("orders-0")
    table.update(txn_batch(7, 0, 0, base_offset=4))
    table.update(txn_batch(8, 0, 0, base_offset=5))
    table.update(marker_batch(8, 0, base_offset=6), EndTxnMarker(False, 3))
    data = encode_producer_snapshot(table.entries().values())
    loaded = ProducerStateTable("orders-0")
    loaded.load(decode_producer_snapshot(data, "00000000000000000007.snapshot"))
    assert loaded.entry(7).current_txn_first_offset == 4
    assert loaded.entry(8).coordinator_epoch == 3 and not loaded.entry(8).in_transaction
    assert loaded.last_stable_offset(7) == 4
    # Its marker closes it as if the table had never left memory.
    assert loaded.update(marker_batch(7, 0, base_offset=7), ABORT) == AbortedTransaction(7, 4, 7, 8)


def test_a_producer_with_an_open_transaction_never_expires():
    table = ProducerStateTable("orders-0")
    table.update(txn_batch(7, 0, 0, base_offset=0))
    table.update(batch(8, 0, 0, base_offset=1))
    assert table.remove_expired(10**12, producer_id_expiration_ms=1) == [8]
    assert table.entry(7) is not None
    table.update(marker_batch(7, 0, base_offset=2), COMMIT)
    assert table.remove_expired(10**12, producer_id_expiration_ms=1) == [7]


def test_a_coordinators_batches_are_checked_for_their_epoch_only():
    table = ProducerStateTable("__consumer_offsets-0")
    coordinator = AppendOrigin.COORDINATOR
    table.update(txn_batch(7, 2, -1, base_offset=0))
    # Checked as a client's, a batch after it would need sequence 0, and its range (-1) is a
    # duplicate of it.
    with pytest.raises(OutOfOrderSequenceNumberError):
        table.check_batches([txn_batch(7, 2, 5, base_offset=0)])
    assert table.check(txn_batch(7, 2, -1, base_offset=0)) is not None
    # The coordinator's next batch of the same transaction (no sequence) is neither.
    assert table.check_batches([txn_batch(7, 2, -1, base_offset=0)], coordinator) is None
    assert table.check_batches([txn_batch(7, 3, -1, base_offset=0)], coordinator) is None
    with pytest.raises(InvalidProducerEpochError):
        table.check_batches([txn_batch(7, 1, -1, base_offset=0)], coordinator)
