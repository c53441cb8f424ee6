"""The transactional checks of `replog sim` (`txn_invariants`) on answers built by hand: a
read_committed consumer may keep a committed transaction's records and skip an aborted one's
(as Kafka's consumer skips them); it breaks a rule when it keeps an open or aborted
transaction's records, keeps a transaction in one partition that it skips in another, keeps a
fenced zombie's commit, or reads a transaction below an LSO whose marker was not below that
answer's high watermark. At the end an acknowledged commit must be visible, unless it lies
above an LSO the end does not hold to its high watermark."""

from __future__ import annotations

from types import SimpleNamespace

from replog.record.builder import BatchBuilder
from replog.record.control_record import EndTxnMarker, encode_marker
from replog.replication.messages import FetchPartitionResult
from replog.sim.data_invariants import DataChecker, PartitionHistory, TopicSpec
from replog.sim.txn_invariants import Txn, TxnChecker

TOPIC, PRODUCER, EPOCH = "txn", 7, 0


class Clock:
    def __init__(self) -> None:
        self.ms = 0

    def now_ms(self) -> int:
        return self.ms


def checker(clock: Clock | None = None) -> TxnChecker:
    cluster = SimpleNamespace(loop=clock or Clock(), power_losses=[], up_nodes=lambda: [])
    data = DataChecker(cluster, [TopicSpec(TOPIC, 2, 3, 2, flushed=False)])  # type: ignore[arg-type]
    return TxnChecker(cluster, data, 2)  # type: ignore[arg-type]


def data(offset: int, sequence: int = 0, producer: int = PRODUCER) -> bytes:
    builder = BatchBuilder(
        base_offset=offset,
        producer_id=producer,
        producer_epoch=EPOCH,
        base_sequence=sequence,
        is_transactional=True,
    )
    builder.append(0, None, b"v")
    return builder.build()


def marker(offset: int, aborted: bool, producer: int = PRODUCER) -> bytes:
    builder = BatchBuilder(
        base_offset=offset,
        producer_id=producer,
        producer_epoch=EPOCH,
        is_transactional=True,
        is_control=True,
    )
    key, value = encode_marker(EndTxnMarker(aborted, coordinator_epoch=1))
    builder.append(0, key, value)
    return builder.build()


def answer(
    *batches: bytes, lso: int, hw: int, aborted: tuple[tuple[int, int], ...] = ()
) -> FetchPartitionResult:
    return FetchPartitionResult(
        TOPIC,
        0,
        high_watermark=hw,
        last_stable_offset=lso,
        records=b"".join(batches),
        aborted_transactions=aborted,
    )


def transaction(check: TxnChecker, partition: int = 0, instance: int = 0, sequence: int = 0) -> Txn:
    txn = check.begin("a", instance, 0)
    check.sent(txn, TOPIC, partition, PRODUCER, EPOCH, sequence)
    check.acked(txn, TOPIC, partition)
    return txn


def test_a_committed_transaction_is_kept_and_an_aborted_one_skipped() -> None:
    check = checker()
    view = check.view(TOPIC, 0)
    committed = transaction(check)
    check.ending(committed, commit=True)
    check.ended(committed, 1)
    assert view.answered(0, answer(data(0), marker(1, aborted=False), lso=2, hw=2), "c")
    aborted = transaction(check, sequence=1)
    check.ending(aborted, commit=False)
    told = ((PRODUCER, 2),)
    assert view.answered(
        2, answer(data(2, 1), marker(3, aborted=True), lso=4, hw=4, aborted=told), "c"
    )
    assert check.found == []
    assert committed.visible == {(TOPIC, 0)} and aborted.skipped == {(TOPIC, 0)}
    assert check.unfinished() == [] and view.read_to_the_end()


def test_an_open_or_aborted_transactions_record_kept_breaks_the_rule() -> None:
    check = checker()
    transaction(check)  # its EndTxn never sent
    check.view(TOPIC, 0).answered(0, answer(data(0), lso=1, hw=1), "c")
    assert "a record of an aborted or open transaction" in check.found[0]
    check = checker()
    aborted = transaction(check)
    check.ending(aborted, commit=False)
    # The answer does not tell the consumer of the aborted transaction.
    check.view(TOPIC, 0).answered(0, answer(data(0), marker(1, aborted=True), lso=2, hw=2), "c")
    assert "a record of an aborted or open transaction" in check.found[0]


def test_a_transaction_kept_in_one_partition_and_skipped_in_another_breaks_atomicity() -> None:
    check = checker()
    txn = transaction(check, partition=0)
    check.sent(txn, TOPIC, 1, PRODUCER, EPOCH, 0)
    check.ending(txn, commit=True)
    check.view(TOPIC, 0).answered(0, answer(data(0), marker(1, aborted=False), lso=2, hw=2), "c")
    assert check.found == []
    told = ((PRODUCER, 0),)
    result = FetchPartitionResult(
        TOPIC,
        1,
        high_watermark=2,
        last_stable_offset=2,
        records=data(0) + marker(1, True),
        aborted_transactions=told,
    )
    check.view(TOPIC, 1).answered(0, result, "c")
    assert "visible in one partition and aborted in another" in check.found[0]


def test_a_commit_sent_after_a_newer_instance_initialised_is_a_fenced_zombies() -> None:
    clock = Clock()
    check = checker(clock)
    zombie = transaction(check, instance=0)
    clock.ms = 100
    check.fenced("a", 1)  # instance 1 initialised at 100 ms
    clock.ms = 150
    check.ending(zombie, commit=True)
    check.view(TOPIC, 0).answered(0, answer(data(0), marker(1, aborted=False), lso=2, hw=2), "c")
    assert "a fenced zombie's write visible" in check.found[0]


def test_an_lso_past_a_transaction_whose_marker_was_not_below_the_hw_breaks_the_rule() -> None:
    check = checker()
    view = check.view(TOPIC, 0)
    txn = transaction(check)
    check.ending(txn, commit=True)
    # Given below an LSO of 1, with the HW at 3: its marker must be below 3.
    view.answered(0, answer(data(0), lso=1, hw=3), "c")
    view.answered(1, answer(marker(2, aborted=False), lso=3, hw=3), "c")
    assert check.found == []
    check = checker()
    view = check.view(TOPIC, 0)
    txn = transaction(check)
    check.ending(txn, commit=True)
    view.answered(0, answer(data(0), lso=1, hw=1), "c")  # its marker not yet below the HW
    view.answered(1, answer(marker(1, aborted=False), lso=2, hw=2), "c")
    assert "the LSO passed an open transaction" in check.found[0]


def test_a_commit_above_an_lso_held_by_an_open_transaction_is_due_only_when_lsos_are_held() -> None:
    # Producer 8's transaction, open at offset 0 (its start stamped by a clock far ahead, so
    # its timeout is far off), holds the LSO at 0; the commit at 1 above it is not given to a
    # read_committed consumer until that transaction ends, as in Kafka.
    def the_end(lso_held: bool, lso: int = 0) -> list[str]:
        check = checker()
        history = check.data.histories[(TOPIC, 0)] = PartitionHistory((1, 2, 3), 2, False)
        check.data.observe(TOPIC, 0, data(0, producer=8) + data(1), "the leader")
        assert history.end == 2
        committed = transaction(check)
        check.ending(committed, commit=True)
        check.ended(committed, 1)
        view = check.view(TOPIC, 0)
        view.answered(0, answer(lso=lso, hw=3), "c")  # the consumer at 0, the LSO at lso
        check.lso_held = lso_held
        return check.unfinished()

    assert the_end(lso_held=False) == []
    # With the LSOs held, the open transaction must have ended and the commit be visible.
    held = the_end(lso_held=True)
    assert held[0] == "a/0/0 (committed) visible in [], not in [('txn', 0)]"
    assert held[1].startswith("txn-0: read up to 0")
    # An LSO past the commit, or a consumer short of the LSO: it is due.
    for lso in (2, 1):
        assert the_end(lso_held=False, lso=lso) == [
            "a/0/0 (committed) visible in [], not in [('txn', 0)]"
        ]
