"""The transactional checks of `replog sim` (`txn_invariants`) on answers built by hand: a
read_committed consumer may keep a committed transaction's records and skip an aborted one's
(as Kafka's consumer skips them); it breaks a rule when it keeps an open or aborted
transaction's records, keeps a transaction in one partition that it skips in another, keeps a
fenced zombie's commit, or reads a transaction below an LSO whose marker was not below that
answer's high watermark. At the end an acknowledged commit must be visible, unless it lies
above an LSO the end does not hold to its high watermark."""

from __future__ import annotations

from types import SimpleNamespace

from replog.coordinator.transaction_log_replay import partition_for_transactional_id
from replog.coordinator.transaction_metadata import TxnMetadata, TxnState
from replog.record.builder import BatchBuilder
from replog.record.control_record import EndTxnMarker, encode_marker
from replog.replication.messages import FetchPartitionResult
from replog.sim.data_invariants import DataChecker, PartitionHistory, TopicSpec
from replog.sim.txn_invariants import Txn, TxnChecker
from replog.topic_names import TRANSACTION_STATE_TOPIC

TOPIC, PRODUCER, EPOCH = "txn", 7, 0
EMPTY = TxnState.EMPTY


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


def test_an_open_transaction_whose_state_partition_was_elected_uncleanly_since_may_hang() -> None:
    # Producer 8's transaction (id "b", begun at 100 ms) holds the LSO at 0 at the end, below
    # a commit of id "a" (whose state partition is the other one).
    # An operator's unclean election of its `__transaction_state` partition after it began may
    # have dropped the record that added this partition (the history never saw it: it was
    # committed and replaced between two looks), so its coordinator never ends it, as in Kafka
    # until an operator aborts it: the LSO is not held, and the commit above it is not due,
    # once the coordinator's loaded state no longer holds that transaction (Empty at its epoch).
    # An election before it began, or of another state partition, excuses nothing.
    def the_end(elected_partition: int | None, at_ms: int, state: TxnState = EMPTY) -> list[str]:
        clock = Clock()
        check = checker(clock)
        # The coordinator's loaded state of "b": forgotten (Empty), or still open with txn-0.
        meta = TxnMetadata("b", 8, EPOCH, state=state, partitions=frozenset({(TOPIC, 0)}))
        coordinator = SimpleNamespace(loaded=lambda: {own: [meta]})
        broker = SimpleNamespace(transaction_coordinator=coordinator, replica_manager=None)
        node = SimpleNamespace(broker=broker)
        check.cluster.up_nodes = lambda: [node]
        for i in range(check.state_partitions):
            history = PartitionHistory((1, 2, 3), 2, False)
            check.data.histories[(TRANSACTION_STATE_TOPIC, i)] = history
            if i == elected_partition:
                history.unclean_elections.append(at_ms)
        check.data.histories[(TOPIC, 0)] = PartitionHistory((1, 2, 3), 2, False)
        clock.ms = 100
        hung = check.begin("b", 0, 0)
        check.sent(hung, TOPIC, 0, 8, EPOCH, 0)
        check.acked(hung, TOPIC, 0)
        check.data.observe(TOPIC, 0, data(0, producer=8) + data(1), "the leader")
        committed = transaction(check)
        check.ending(committed, commit=True)
        check.ended(committed, 1)
        check.view(TOPIC, 0).answered(0, answer(lso=0, hw=2), "c")
        return check.unfinished()

    own = partition_for_transactional_id("b", 2)
    assert own != partition_for_transactional_id("a", 2)
    assert the_end(own, at_ms=500) == []
    stuck = "txn-0: read up to 0, last stable offset 0, high watermark 2"
    unseen = "a/0/0 (committed) visible in [], not in [('txn', 0)]"
    assert the_end(own, at_ms=50) == the_end(None, at_ms=0) == [unseen, stuck]
    # The other state partition's election excuses the commit of "a" only.
    assert the_end(1 - own, at_ms=500) == [stuck]
    # A coordinator that still holds the transaction open, or ended it (its markers due),
    # must see it through.
    for state in (TxnState.ONGOING, TxnState.COMPLETE_ABORT):
        assert the_end(own, at_ms=500, state=state) == [unseen, stuck]
