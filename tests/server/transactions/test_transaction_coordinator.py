"""TransactionCoordinator over a real ReplicaManager and logs in tmp_path, its markers sent
through a fake channel: it follows `__transaction_state` leadership, loads a partition before
answering, appends each decision with acks=all before answering it, writes the markers of a
Prepare* transaction to each partition's leader and then Complete*, resends them after a
failover, fences a zombie, aborts a timed-out transaction, expires idle ids, and maps failed
appends and lost leadership to the errors a client acts on. No test sleeps: backoffs go
through a recorded fake."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from replog.common.topic_partition import TopicPartitionKey
from replog.coordinator.group_partition import partition_for_group
from replog.coordinator.transaction_listing import Listing
from replog.coordinator.transaction_log_replay import partition_for_transactional_id
from replog.coordinator.transaction_markers import TxnMarker
from replog.coordinator.transaction_metadata import TxnState
from replog.coordinator.transaction_records import decode_key, decode_value
from replog.errors import (
    ConcurrentTransactionsError,
    ConfigError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidProducerEpochError,
    InvalidRequestError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    KafkaError,
    NotCoordinatorError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    ProducerFencedError,
    TransactionalIdNotFoundError,
)
from replog.quorum.metadata.image import MetadataImage
from replog.quorum.metadata.records import MetadataRecord, PartitionChangeRecord, RemoveTopicRecord
from replog.record import iter_batches
from replog.replication import messages as m
from replog.server.config.transaction_coordinator_config import TransactionCoordinatorConfig
from replog.server.data_plane.replica_manager import ReplicaManager, ReplicaManagerConfig
from replog.server.transactions.marker_sender import TxnMarkerSender
from replog.server.transactions.transaction_coordinator import (
    ShardState,
    TransactionCoordinator,
)
from replog.storage.log_config import LogConfig
from replog.storage.log_manager import LogManager
from replog.testing import LoopTasks
from replog.topic_names import CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from tests.metadata.metadata_helpers import bootstrapped, create_topic, register, replayed, topic_id
from tests.server.groups.test_group_coordinator import FakeCreator

STATE_TID = topic_id(60)
ORDERS_TID = topic_id(61)
NOW = 1_700_000_000_000
FIRST_PID = 4000
STATE_EPOCH = 4  # the leader epoch of __transaction_state-0: the coordinator epoch
T0, T1 = ("orders", 0), ("orders", 1)


Script = Mapping[TopicPartitionKey, KafkaError | None] | Exception | None


@dataclass
class FakeChannel:
    """WriteTxnMarkers to a broker: each call recorded, answered by the next script (None:
    every partition written), after `gate` when set."""

    sent: list[tuple[int, TxnMarker]] = field(default_factory=list)
    scripts: list[Script] = field(default_factory=list)
    gate: asyncio.Event | None = None

    async def send(
        self, broker_id: int, markers: Sequence[TxnMarker]
    ) -> list[Mapping[TopicPartitionKey, KafkaError | None]]:
        self.sent.extend((broker_id, marker) for marker in markers)
        if self.gate is not None:
            await self.gate.wait()
        script = self.scripts.pop(0) if self.scripts else None
        if isinstance(script, Exception):
            raise script
        return [{tp: (script or {}).get(tp) for tp in marker.partitions} for marker in markers]


def image_with(*records: MetadataRecord) -> MetadataImage:
    image = replayed(bootstrapped(), *(register(b, 10 * b, fenced=False) for b in (1, 2)))
    return replayed(image, *records) if records else image


STATE = create_topic(TRANSACTION_STATE_TOPIC, STATE_TID, (1,), leader_epoch=STATE_EPOCH)
ORDERS = create_topic("orders", ORDERS_TID, (1, 2), (2, 1))
IMAGE = image_with(*STATE, *ORDERS)


class Broker:
    """Broker 1's log manager, replica manager and transaction coordinator over `root`."""

    def __init__(
        self,
        root: Path,
        channel: FakeChannel | None = None,
        config: TransactionCoordinatorConfig | None = None,
    ) -> None:
        self.log_manager = LogManager(str(root), LogConfig())
        self.rm = ReplicaManager(ReplicaManagerConfig(1), self.log_manager, tasks=LoopTasks())
        self.creator = FakeCreator()
        self.now = NOW
        self.channel = channel or FakeChannel()
        self.sleeps: list[float] = []
        self.ids = itertools.count(FIRST_PID)
        self.allocate: Callable[[], int] = lambda: next(self.ids)  # the producer-id manager
        self.coordinator = TransactionCoordinator(
            1,
            self.rm,
            self.creator,
            lambda leaders: TxnMarkerSender(1, self.channel, leaders, sleep=self.sleep),
            lambda: self.allocate(),
            config,
            tasks=LoopTasks(),
            wall_clock=lambda: self.now,
            sleep=self.sleep,
        )

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        await asyncio.sleep(0)

    def publish(self, image: MetadataImage) -> None:
        self.rm.apply_image(image)
        self.coordinator.apply_image(image)

    async def loaded(self, image: MetadataImage = IMAGE) -> None:
        self.publish(image)
        await asyncio.wait_for(self.coordinator.wait_idle(), 5)

    async def idle(self) -> None:
        await asyncio.wait_for(self.coordinator.wait_idle(), 5)

    def states(self) -> list[tuple[str, str]]:
        """(transactional id, state name or "tombstone") of every record of the state log."""
        plog = self.log_manager.get_log(TRANSACTION_STATE_TOPIC, 0)
        found = []
        offset = plog.log_start_offset
        while offset < plog.log_end_offset:
            for batch in iter_batches(plog.read(offset, 1 << 20)):
                for record in batch.records():
                    tid = decode_key(bytes(record.key or b""))
                    state = (
                        "tombstone"
                        if record.value is None
                        else decode_value(tid, bytes(record.value)).state.display_name
                    )
                    found.append((tid, state))
                offset = batch.header.next_offset
        return found

    async def close(self) -> None:
        await self.coordinator.stop()
        self.log_manager.shutdown()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    node = Broker(tmp_path / "broker1")
    yield node
    node.log_manager.shutdown()


async def started(broker: Broker, tid: str = "tx", timeout_ms: int = 60_000) -> tuple[int, int]:
    """InitProducerId for `tid`: its producer id and epoch."""
    answer = await broker.coordinator.init_producer_id(tid, timeout_ms, None)
    assert answer.error is None, answer.error
    return answer.producer_id, answer.producer_epoch


def state_of(broker: Broker, tid: str = "tx") -> TxnState:
    meta = broker.coordinator.metadata_of(tid)
    assert meta is not None
    return meta.state


# --- FindCoordinator and leadership ---------------------------------------------------------


@pytest.mark.asyncio
async def test_find_coordinator_creates_the_topic_then_names_the_leader(broker: Broker) -> None:
    broker.publish(image_with(*ORDERS))
    missing = broker.coordinator.find_coordinator("tx", "PLAINTEXT")
    assert isinstance(missing.error, CoordinatorNotAvailableError)
    assert "__transaction_state does not exist yet" in str(missing.error)
    assert broker.creator.requests == 1
    empty = broker.coordinator.find_coordinator("", "PLAINTEXT")
    assert isinstance(empty.error, InvalidRequestError)
    # Three partitions, led by 2, 1, 2: each id's coordinator is its partition's leader.
    image = image_with(*create_topic(TRANSACTION_STATE_TOPIC, STATE_TID, (2,), (1,), (2,)))
    broker.publish(image)
    for tid in ("a", "b", "c", "tx-17"):
        leader = (2, 1, 2)[partition_for_transactional_id(tid, 3)]
        found = broker.coordinator.find_coordinator(tid, "PLAINTEXT")
        assert (found.error, found.node_id, found.host, found.port) == (
            None,
            leader,
            f"broker{leader}",
            9092,
        )
    nameless = broker.coordinator.find_coordinator("a", "EXTERNAL")
    assert isinstance(nameless.error, CoordinatorNotAvailableError)
    await broker.coordinator.stop()
    assert broker.creator.stopped


@pytest.mark.asyncio
async def test_not_coordinator_elsewhere_and_load_in_progress_while_loading(
    broker: Broker,
) -> None:
    answer = await broker.coordinator.init_producer_id("tx", 60_000, None)
    assert isinstance(answer.error, NotCoordinatorError)
    broker.publish(IMAGE)
    assert broker.coordinator.state_of(0) is ShardState.LOADING
    loading = await broker.coordinator.init_producer_id("tx", 60_000, None)
    assert isinstance(loading.error, CoordinatorLoadInProgressError)
    error, _ = broker.coordinator.list_transactions(Listing())
    assert isinstance(error, CoordinatorLoadInProgressError)
    await broker.idle()
    assert broker.coordinator.state_of(0) is ShardState.ACTIVE
    assert await started(broker) == (FIRST_PID, 0)
    # Led by broker 2 from here on: dropped at once.
    moved = image_with(*create_topic(TRANSACTION_STATE_TOPIC, STATE_TID, (2,)), *ORDERS)
    broker.publish(moved)
    assert broker.coordinator.state_of(0) is None
    gone = await broker.coordinator.end_txn("tx", FIRST_PID, 0, commit=True, transaction_version=0)
    assert isinstance(gone.error, NotCoordinatorError)
    await broker.coordinator.stop()


# --- InitProducerId, AddPartitionsToTxn, EndTxn -----------------------------------------------


@pytest.mark.asyncio
async def test_a_committed_transaction_goes_through_the_log_and_the_leaders(
    broker: Broker,
) -> None:
    await broker.loaded()
    pid, epoch = await started(broker)
    assert (pid, epoch) == (FIRST_PID, 0)
    assert await started(broker) == (FIRST_PID, 1)  # a new session of the producer: bumped
    epoch = 1
    add = broker.coordinator.add_partitions
    assert await add("tx", pid, epoch, [T0], transaction_version=0) is None
    assert await add("tx", pid, epoch, [T0, T1], transaction_version=0) is None
    assert await broker.coordinator.add_offsets("tx", pid, epoch, "billing") is None
    offsets_tp = (CONSUMER_OFFSETS_TOPIC, partition_for_group("billing", 50))
    meta = broker.coordinator.metadata_of("tx")
    assert meta is not None and meta.partitions == {T0, T1, offsets_tp}
    assert meta.state is TxnState.ONGOING and meta.start_ms == NOW
    ended = await broker.coordinator.end_txn("tx", pid, epoch, commit=True, transaction_version=0)
    assert (ended.error, ended.producer_id, ended.producer_epoch) == (None, pid, epoch)
    await broker.idle()
    # The offsets partition's topic does not exist: nothing to mark there.
    assert sorted((b, mk.partitions) for b, mk in broker.channel.sent) == [(1, (T0,)), (2, (T1,))]
    for _, marker in broker.channel.sent:
        assert (marker.producer_id, marker.producer_epoch, marker.commit) == (pid, epoch, True)
        assert marker.coordinator_epoch == STATE_EPOCH and marker.transactional_id == "tx"
    assert state_of(broker) is TxnState.COMPLETE_COMMIT
    assert broker.states() == [
        ("tx", "Empty"),
        ("tx", "Empty"),
        ("tx", "Ongoing"),
        ("tx", "Ongoing"),
        ("tx", "Ongoing"),
        ("tx", "PrepareCommit"),
        ("tx", "CompleteCommit"),
    ]
    # A repeated commit is answered at once; an abort now has no transaction to end.
    again = await broker.coordinator.end_txn("tx", pid, epoch, commit=True, transaction_version=0)
    assert again.error is None
    abort = await broker.coordinator.end_txn("tx", pid, epoch, commit=False, transaction_version=0)
    assert isinstance(abort.error, InvalidTxnStateError)
    assert len(broker.states()) == 7
    await broker.coordinator.stop()


@pytest.mark.asyncio
async def test_requests_while_the_markers_are_written_are_concurrent_transactions(
    broker: Broker,
) -> None:
    broker.channel.gate = asyncio.Event()
    await broker.loaded()
    pid, epoch = await started(broker)
    assert (
        await broker.coordinator.add_partitions("tx", pid, epoch, [T0], transaction_version=0)
        is None
    )
    ended = await broker.coordinator.end_txn("tx", pid, epoch, commit=False, transaction_version=0)
    assert ended.error is None  # answered once PrepareAbort is committed, markers pending
    assert state_of(broker) is TxnState.PREPARE_ABORT
    for answer in (
        (await broker.coordinator.init_producer_id("tx", 60_000, None)).error,
        (
            await broker.coordinator.end_txn("tx", pid, epoch, commit=False, transaction_version=0)
        ).error,
        await broker.coordinator.add_partitions("tx", pid, epoch, [T1], transaction_version=0),
        # the other outcome waits too (Kafka's pending Complete* is looked at first); it is
        # refused once the abort is complete
        (
            await broker.coordinator.end_txn("tx", pid, epoch, commit=True, transaction_version=0)
        ).error,
    ):
        assert isinstance(answer, ConcurrentTransactionsError)
    (described,) = broker.coordinator.describe_transactions(["tx"])
    assert described.meta is not None and described.meta.state is TxnState.PREPARE_ABORT
    broker.channel.gate.set()
    await broker.idle()
    assert state_of(broker) is TxnState.COMPLETE_ABORT
    committing = await broker.coordinator.end_txn(
        "tx", pid, epoch, commit=True, transaction_version=0
    )
    assert isinstance(committing.error, InvalidTxnStateError)
    await broker.coordinator.stop()


@pytest.mark.asyncio
async def test_bad_requests_get_kafkas_errors_and_change_nothing(broker: Broker) -> None:
    await broker.loaded()
    too_long = await broker.coordinator.init_producer_id("tx", 900_001, None)
    assert isinstance(too_long.error, InvalidTransactionTimeoutError)
    empty = await broker.coordinator.init_producer_id("", 1000, None)
    assert isinstance(empty.error, InvalidRequestError)
    pid, epoch = await started(broker)
    no_txn = await broker.coordinator.end_txn("tx", pid, epoch, commit=True, transaction_version=0)
    assert isinstance(no_txn.error, InvalidTxnStateError)
    stale = await broker.coordinator.add_partitions(
        "tx", pid, epoch - 1, [T0], transaction_version=0
    )
    assert isinstance(stale, ProducerFencedError)
    assert broker.states() == [("tx", "Empty")]
    await broker.coordinator.stop()


@pytest.mark.asyncio
async def test_a_new_producer_fences_the_zombie_and_aborts_its_transaction(
    broker: Broker,
) -> None:
    await broker.loaded()
    pid, zombie_epoch = await started(broker)
    assert (
        await broker.coordinator.add_partitions(
            "tx", pid, zombie_epoch, [T0, T1], transaction_version=0
        )
        is None
    )
    # The new producer's first InitProducerId aborts the open transaction and is told to retry.
    first = await broker.coordinator.init_producer_id("tx", 60_000, None)
    assert isinstance(first.error, ConcurrentTransactionsError)
    await broker.idle()
    assert state_of(broker) is TxnState.COMPLETE_ABORT
    aborts = [mk for _, mk in broker.channel.sent]
    assert {mk.commit for mk in aborts} == {False}
    assert {mk.producer_epoch for mk in aborts} == {zombie_epoch + 1}
    again = await broker.coordinator.init_producer_id("tx", 60_000, None)
    assert (again.error, again.producer_id, again.producer_epoch) == (None, pid, zombie_epoch + 2)
    zombie = await broker.coordinator.end_txn(
        "tx", pid, zombie_epoch, commit=True, transaction_version=0
    )
    assert isinstance(zombie.error, ProducerFencedError)
    # KIP-360: a producer naming the id and epoch it had keeps its id only if it is current.
    fenced = await broker.coordinator.init_producer_id("tx", 60_000, (pid + 1, 0))
    assert isinstance(fenced.error, ProducerFencedError)
    await broker.coordinator.stop()


@pytest.mark.asyncio
async def test_no_producer_id_block_yet_is_retriable_and_writes_nothing(broker: Broker) -> None:
    def no_block() -> int:
        raise CoordinatorLoadInProgressError("broker 1 has no producer id block yet")

    broker.allocate = no_block
    await broker.loaded()
    answer = await broker.coordinator.init_producer_id("tx", 60_000, None)
    assert isinstance(answer.error, CoordinatorLoadInProgressError) and answer.error.retriable
    assert broker.states() == [] and broker.coordinator.metadata_of("tx") is None
    await broker.coordinator.stop()


# --- markers: retries, fencing, failover --------------------------------------------------------


@pytest.mark.asyncio
async def test_markers_are_sent_again_to_the_new_leader_until_written(broker: Broker) -> None:
    broker.channel.scripts = [
        {T0: NotLeaderOrFollowerError("moved")},  # broker 1 (orders-0), first attempt
        None,  # broker 2 (orders-1)
        RuntimeError("connection reset"),  # orders-0's second attempt: the leader is away
        None,
    ]
    await broker.loaded()
    pid, epoch = await started(broker)
    await broker.coordinator.add_partitions("tx", pid, epoch, [T0, T1], transaction_version=0)
    await broker.coordinator.end_txn("tx", pid, epoch, commit=True, transaction_version=0)
    await broker.idle()
    assert [(b, mk.partitions) for b, mk in broker.channel.sent] == [
        (1, (T0,)),
        (2, (T1,)),
        (1, (T0,)),
        (1, (T0,)),
    ]
    assert broker.sleeps == [0.1, 0.2]
    assert state_of(broker) is TxnState.COMPLETE_COMMIT
    await broker.coordinator.stop()


@pytest.mark.asyncio
async def test_a_partition_moved_or_deleted_meanwhile(broker: Broker) -> None:
    await broker.loaded()
    pid, epoch = await started(broker)
    await broker.coordinator.add_partitions("tx", pid, epoch, [T0, T1], transaction_version=0)
    broker.channel.scripts = [{T0: NotLeaderOrFollowerError("moved")}, None]
    broker.channel.gate = asyncio.Event()
    await broker.coordinator.end_txn("tx", pid, epoch, commit=False, transaction_version=0)
    await asyncio.sleep(0)
    # orders-0 moves to broker 2; orders-1 stays. Then the first answers arrive.
    broker.publish(replayed(IMAGE, PartitionChangeRecord(ORDERS_TID, 0, leader=2)))
    broker.channel.gate.set()
    await broker.idle()
    assert [(b, mk.partitions) for b, mk in broker.channel.sent][-1] == (2, (T0,))
    assert state_of(broker) is TxnState.COMPLETE_ABORT
    # A transaction whose topic is deleted before its markers: nothing left to mark.
    await broker.coordinator.add_partitions("tx", pid, epoch, [T1], transaction_version=0)
    sent = len(broker.channel.sent)
    broker.publish(replayed(broker.coordinator.image, RemoveTopicRecord(ORDERS_TID)))
    await broker.coordinator.end_txn("tx", pid, epoch, commit=True, transaction_version=0)
    await broker.idle()
    assert len(broker.channel.sent) == sent and state_of(broker) is TxnState.COMPLETE_COMMIT
    await broker.coordinator.stop()


@pytest.mark.asyncio
async def test_a_fenced_marker_stops_the_writes_and_a_reload_resends_them(
    tmp_path: Path,
) -> None:
    broker = Broker(tmp_path / "b")
    broker.channel.scripts = [{T0: InvalidProducerEpochError("newer epoch")}]
    await broker.loaded()
    pid, epoch = await started(broker)
    await broker.coordinator.add_partitions("tx", pid, epoch, [T0], transaction_version=0)
    await broker.coordinator.end_txn("tx", pid, epoch, commit=True, transaction_version=0)
    await broker.idle()
    assert state_of(broker) is TxnState.PREPARE_COMMIT and len(broker.channel.sent) == 1
    await broker.close()
    # A coordinator that loads the partition (a failover, at a newer leader epoch) completes it.
    again = Broker(tmp_path / "b")
    newer = replayed(IMAGE, PartitionChangeRecord(STATE_TID, 0, leader=1))
    await again.loaded(newer)
    (marker,) = [mk for _, mk in again.channel.sent]
    assert (marker.commit, marker.partitions, marker.producer_epoch) == (True, (T0,), epoch)
    assert marker.coordinator_epoch == STATE_EPOCH + 1
    assert state_of(again) is TxnState.COMPLETE_COMMIT
    assert again.states()[-2:] == [("tx", "PrepareCommit"), ("tx", "CompleteCommit")]
    await again.close()


# --- failed appends ----------------------------------------------------------------------------


class FailingProduce:
    """The replica manager's produce, failing with `errors` (in turn) while any are left."""

    def __init__(self, broker: Broker) -> None:
        self.errors: list[KafkaError] = []
        self.hold: asyncio.Event | None = None
        self._produce = broker.rm.produce
        broker.rm.produce = self  # type: ignore[method-assign]

    async def __call__(self, request: m.ProduceRequest, **kwargs: Any) -> m.ProduceResponse:
        if self.hold is not None:
            await self.hold.wait()
        if not self.errors:
            return await self._produce(request, **kwargs)
        error = self.errors.pop(0)
        ((topic, partition),) = [(p.topic, p.partition) for p in request.partitions]
        return m.ProduceResponse((m.ProducePartitionResult(topic, partition, error=error),))


@pytest.mark.asyncio
async def test_a_failed_append_answers_the_mapped_error_and_abandons_the_change(
    broker: Broker,
) -> None:
    failing = FailingProduce(broker)
    await broker.loaded()
    pid, epoch = await started(broker)
    failing.errors = [NotEnoughReplicasError("1 of 2 in sync")]
    refused = await broker.coordinator.add_partitions("tx", pid, epoch, [T0], transaction_version=0)
    assert isinstance(refused, CoordinatorNotAvailableError)
    assert state_of(broker) is TxnState.EMPTY  # abandoned: the retry is not concurrent
    assert (
        await broker.coordinator.add_partitions("tx", pid, epoch, [T0], transaction_version=0)
        is None
    )
    failing.errors = [NotLeaderOrFollowerError("moved")]
    lost = await broker.coordinator.end_txn("tx", pid, epoch, commit=True, transaction_version=0)
    assert isinstance(lost.error, NotCoordinatorError) and state_of(broker) is TxnState.ONGOING
    # The partition moves away while an append waits: NOT_COORDINATOR, whatever the append did.
    failing.hold = asyncio.Event()
    ending = asyncio.ensure_future(
        broker.coordinator.end_txn("tx", pid, epoch, commit=True, transaction_version=0)
    )
    await asyncio.sleep(0)
    broker.publish(image_with(*create_topic(TRANSACTION_STATE_TOPIC, STATE_TID, (2,)), *ORDERS))
    failing.hold.set()
    assert isinstance((await ending).error, NotCoordinatorError)
    await broker.coordinator.stop()


# --- timers ------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_timed_out_transaction_is_aborted_and_its_producer_fenced(broker: Broker) -> None:
    await broker.loaded()
    pid, epoch = await started(broker, timeout_ms=1000)
    await broker.coordinator.add_partitions("tx", pid, epoch, [T0], transaction_version=0)
    broker.now = NOW + 1000
    assert broker.coordinator.abort_timed_out_transactions() == 0  # at its timeout, not past
    broker.now = NOW + 1001
    assert broker.coordinator.abort_timed_out_transactions() == 1
    assert broker.coordinator.abort_timed_out_transactions() == 0  # already being aborted
    await broker.idle()
    assert state_of(broker) is TxnState.COMPLETE_ABORT
    ((_, marker),) = broker.channel.sent
    assert (marker.commit, marker.producer_epoch) == (False, epoch + 1)
    late = await broker.coordinator.end_txn("tx", pid, epoch, commit=True, transaction_version=0)
    assert isinstance(late.error, ProducerFencedError)
    await broker.coordinator.stop()


@pytest.mark.asyncio
async def test_a_new_coordinator_times_out_by_the_start_its_predecessors_clock_stamped(
    tmp_path: Path,
) -> None:
    """As Kafka's `timedOutTransactions`: the start in the loaded record, by this clock."""
    ahead = Broker(tmp_path / "b")
    ahead.now = NOW + 30_000  # its wall clock 30 s ahead
    await ahead.loaded()
    pid, epoch = await started(ahead, timeout_ms=1000)
    await ahead.coordinator.add_partitions("tx", pid, epoch, [T0], transaction_version=0)
    await ahead.close()
    again = Broker(tmp_path / "b")  # a failover to a broker whose clock is right
    await again.loaded(replayed(IMAGE, PartitionChangeRecord(STATE_TID, 0, leader=1)))
    again.now = NOW + 1001
    assert again.coordinator.abort_timed_out_transactions() == 0
    again.now = NOW + 31_001
    assert again.coordinator.abort_timed_out_transactions() == 1
    await again.idle()
    assert state_of(again) is TxnState.COMPLETE_ABORT
    await again.close()


@pytest.mark.asyncio
async def test_idle_transactional_ids_expire_with_a_tombstone(tmp_path: Path) -> None:
    config = TransactionCoordinatorConfig(transactional_id_expiration_ms=5000)
    broker = Broker(tmp_path / "b", config=config)
    await broker.loaded()
    await started(broker, "idle")
    pid, epoch = await started(broker, "busy")
    await broker.coordinator.add_partitions("busy", pid, epoch, [T0], transaction_version=0)
    broker.now = NOW + 5000
    assert broker.coordinator.expire_transactional_ids() == 1  # not the one in a transaction
    await broker.idle()
    (gone, kept) = broker.coordinator.describe_transactions(["idle", "busy"])
    assert isinstance(gone.error, TransactionalIdNotFoundError)
    assert kept.meta is not None and kept.meta.state is TxnState.ONGOING
    assert broker.states()[-1] == ("idle", "tombstone")
    # A restarted coordinator reads the tombstone: the id stays gone.
    await broker.close()
    again = Broker(tmp_path / "b")
    await again.loaded()
    assert again.coordinator.metadata_of("idle") is None
    assert state_of(again, "busy") is TxnState.ONGOING
    await again.close()


@pytest.mark.asyncio
async def test_list_transactions_filters(broker: Broker) -> None:
    await broker.loaded()
    for tid in ("a", "b", "c"):
        await started(broker, tid)
    pid, epoch = await started(broker, "b")
    await broker.coordinator.add_partitions("b", pid, epoch, [T0], transaction_version=0)
    broker.now = NOW + 500

    def listed(**filters: Any) -> list[str]:
        error, metas = broker.coordinator.list_transactions(Listing(**filters))
        assert error is None
        return [meta.transactional_id for meta in metas]

    assert listed() == ["a", "b", "c"]
    assert listed(states=frozenset({"Ongoing"})) == ["b"]
    assert listed(duration_ms=500) == ["b"] and listed(duration_ms=501) == []
    assert listed(pattern="[ac]") == ["a", "c"]
    assert listed(producer_ids=frozenset({pid})) == ["b"]
    await broker.coordinator.stop()


@pytest.mark.asyncio
async def test_timers_run_their_ticks_until_stopped(tmp_path: Path) -> None:
    config = TransactionCoordinatorConfig(abort_interval_ms=250, expiration_interval_ms=1000)
    broker = Broker(tmp_path / "b", config=config)
    await broker.loaded()
    pid, epoch = await started(broker, timeout_ms=1)
    await broker.coordinator.add_partitions("tx", pid, epoch, [T0], transaction_version=0)
    broker.now = NOW + 2
    broker.coordinator.start()
    for _ in range(50):
        await asyncio.sleep(0)
        if state_of(broker) is TxnState.COMPLETE_ABORT:
            break
    assert state_of(broker) is TxnState.COMPLETE_ABORT
    assert 0.25 in broker.sleeps and 1.0 in broker.sleeps
    await broker.close()


def test_config_from_properties_and_bounds() -> None:
    config = TransactionCoordinatorConfig.from_properties(
        {"transaction.state.log.num.partitions": "3", "transaction.max.timeout.ms": "1000"}
    )
    assert (config.state_log_num_partitions, config.max_timeout_ms) == (3, 1000)
    assert config.state_log_configs(1)["min.insync.replicas"] == "1"
    assert [config.state_log_replication(n) for n in (0, 1, 2, 3, 5)] == [1, 1, 2, 3, 3]
    assert replace(config, state_log_min_isr=2).state_log_configs(3) == {
        "cleanup.policy": "compact",
        "compression.type": "uncompressed",
        "segment.bytes": str(100 * 1024 * 1024),
        "min.insync.replicas": "2",
    }
    with pytest.raises(ConfigError, match=r"transactional\.id\.expiration\.ms=0"):
        TransactionCoordinatorConfig(transactional_id_expiration_ms=0)
