"""Transactions end to end on a real 3-node cluster, through librdkafka (confluent-kafka): the
transaction coordinator writes its markers to each partition leader over the Broker gRPC
service, so a read_committed consumer sees exactly the committed records and a
read_uncommitted one sees the aborted ones too; DescribeTransactions shows CompleteCommit and
CompleteAbort. A consumer's offsets sent to a transaction (TxnOffsetCommit) are committed with
it and dropped with an aborted one. A coordinator killed with -9 while its transaction is in
PrepareCommit (its partition's one replica down, so no leader takes the markers) leaves it to
the broker that takes its `__transaction_state` partition, which loads it and completes it
once the partition is back. The cluster finalizes transaction version 2 (Kafka 4.x's default):
replog's own producer uses it (Produce v12 and TxnOffsetCommit v5 add what they write, EndTxn
v5 bumps the epoch), librdkafka stays on version 1 (AddPartitionsToTxn first, verified by
each partition's leader with the coordinator, KIP-890); a TxnOffsetCommit v4 whose group was
never added is refused, a v5 adds it. With version 2, an EndTxn at the epoch the previous
EndTxn bumped to waits (CONCURRENT_TRANSACTIONS) while that one's markers are being written.
A partition's leader killed with -9 while two transactions write to it (RF 3,
min.insync.replicas 2) neither loses nor duplicates a record: both carry on through the new
leader, the committed one is read exactly once read_committed, the aborted one only
read_uncommitted (librdkafka's and replog's own producers).
`replog transactions list`, `describe` and `describe-producers` (the leader's replica, and
with `--broker-id` the coordinator's follower replica) show an open transaction whose
coordinator leads none of the partitions asked about, and then its commit."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import confluent_kafka
import confluent_kafka.admin as admin_module
import pytest
from client_cluster import NO_GROUP_DELAY, ClientCluster, client_cluster
from cluster_helpers import replog_in_process, wait_for

from replog import Consumer, OffsetAndMetadata, TopicPartition
from replog.errors import ProducerFencedError, ReplogError
from replog.kafka.messages.describe_transactions_request import DescribeTransactionsRequest
from replog.kafka.messages.describe_transactions_response import (
    DescribeTransactionsResponse,
    TransactionState,
)
from replog.kafka.messages.end_txn_request import EndTxnRequest
from replog.kafka.messages.find_coordinator_request import FindCoordinatorRequest
from replog.kafka.messages.init_producer_id_request import InitProducerIdRequest
from replog.kafka.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from replog.kafka.messages.txn_offset_commit_request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from replog.record.builder import BatchBuilder
from replog.topic_names import CONSUMER_OFFSETS_TOPIC
from replog.wire.kafka_connection import KafkaConnection
from tests.confluent_producer import confluent_producer
from tests.local_ports import free_base_port

pytestmark = pytest.mark.slow

TIMEOUT_S = 60


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClientCluster]:
    base = free_base_port(3)
    with client_cluster(
        tmp_path_factory.mktemp("txn") / "cluster",
        3,
        *NO_GROUP_DELAY,
        "--override",
        "transaction.state.log.num.partitions=3",
        base_port=base,
    ) as running:
        yield running


@contextlib.contextmanager
def transactional(cluster: ClientCluster, transactional_id: str) -> Iterator[Any]:
    """An initialized transactional producer, destroyed on leaving (tests/confluent_producer.py):
    while a broker is down, `describe` fails, and the exception its asyncio task keeps holds the
    test's frame in a reference cycle; a producer left to be freed with that frame reconnects to
    the stopped cluster until the garbage collector frees it."""
    with confluent_producer(
        {"bootstrap.servers": cluster.bootstrap, "transactional.id": transactional_id}
    ) as producer:
        producer.init_transactions(TIMEOUT_S)
        yield producer


def transaction(producer: Any, topic: str, values: list[bytes], *, commit: bool) -> None:
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, value=value, key=b"k", partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    if commit:
        producer.commit_transaction(TIMEOUT_S)
    else:
        producer.abort_transaction(TIMEOUT_S)


def read(cluster: ClientCluster, topic: str, isolation: str, count: int) -> list[bytes]:
    """The first `count` values of partition 0 of `topic` at `isolation`, then none more
    within a second."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": f"reader-{isolation}-{topic}",
            "isolation.level": isolation,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
        quiet_until = time.monotonic() + 1
        while time.monotonic() < quiet_until:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value())
        return values
    finally:
        consumer.close()


async def _describe(address: str, transactional_id: str) -> TransactionState:
    connection = await KafkaConnection.open(address, client_id="tests", setup_timeout_ms=2000)
    try:
        request = DescribeTransactionsRequest(transactional_ids=[transactional_id])
        answer, _ = await connection.call(request, timeout_ms=5000)
    finally:
        connection.close()
    assert isinstance(answer, DescribeTransactionsResponse)
    (state,) = answer.transaction_states
    return state


def describe(cluster: ClientCluster, transactional_id: str) -> tuple[int, str] | None:
    """(its coordinator's broker id, its state) as the coordinator describes it; None while
    no broker does."""
    for broker, address in cluster.kafka_addresses.items():
        try:
            state = asyncio.run(_describe(address, transactional_id))
        except (ReplogError, OSError):
            continue
        if state.error_code == 0:
            return broker, state.transaction_state
    return None


def wait_state(cluster: ClientCluster, transactional_id: str, wanted: str) -> int:
    """The coordinator's broker id once it describes the transaction in state `wanted`."""
    found: list[tuple[int, str] | None] = [None]

    def reached() -> bool:
        found[0] = describe(cluster, transactional_id)
        return found[0] is not None and found[0][1] == wanted

    wait_for(reached, TIMEOUT_S, f"{transactional_id} in {wanted} (last seen: {found})")
    assert found[0] is not None
    return found[0][0]


def test_read_committed_sees_exactly_the_committed_records(cluster: ClientCluster) -> None:
    cluster.create_topic("orders", 1, 3)
    with transactional(cluster, "orders-tx") as producer:
        transaction(producer, "orders", [b"c1", b"c2"], commit=True)
        wait_state(cluster, "orders-tx", "CompleteCommit")
        transaction(producer, "orders", [b"a1", b"a2"], commit=False)
        wait_state(cluster, "orders-tx", "CompleteAbort")
        transaction(producer, "orders", [b"c3"], commit=True)
        wait_state(cluster, "orders-tx", "CompleteCommit")
    assert read(cluster, "orders", "read_committed", 3) == [b"c1", b"c2", b"c3"]
    assert read(cluster, "orders", "read_uncommitted", 5) == [b"c1", b"c2", b"a1", b"a2", b"c3"]


def group_offset(cluster: ClientCluster, group: str, topic: str) -> int:
    """The committed offset of partition 0 of `topic` for `group`, asked with require_stable:
    UNSTABLE_OFFSET_COMMIT (the commit's marker not yet written) is asked again, which the
    admin client leaves to its caller."""
    wanted = confluent_kafka.ConsumerGroupTopicPartitions(
        group, [confluent_kafka.TopicPartition(topic, 0)]
    )
    deadline = time.monotonic() + TIMEOUT_S
    with admin_module.AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
        while True:
            futures = admin.list_consumer_group_offsets([wanted], require_stable=True)
            (answer,) = [future.result(TIMEOUT_S) for future in futures.values()]
            (partition,) = answer.topic_partitions
            error = partition.error
            if error is None:
                return int(partition.offset)
            assert error.code() == confluent_kafka.KafkaError.UNSTABLE_OFFSET_COMMIT, error
            assert time.monotonic() < deadline, f"{group}: {topic}-0 still unstable"
            time.sleep(0.05)


def test_offsets_sent_to_a_transaction_commit_with_it(cluster: ClientCluster) -> None:
    cluster.create_topic("inputs", 1, 3)
    cluster.create_topic("outputs", 1, 3)
    with confluent_producer({"bootstrap.servers": cluster.bootstrap}) as feeder:
        for n in range(5):
            feeder.produce("inputs", value=b"in-%d" % n, key=b"k", partition=0)
        assert feeder.flush(TIMEOUT_S) == 0
    reader = {
        "bootstrap.servers": cluster.bootstrap,
        "group.id": "copier",
        "isolation.level": "read_committed",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    with (
        confluent_kafka.Consumer(reader) as consumer,
        transactional(cluster, "copier-tx") as producer,
    ):
        consumer.subscribe(["inputs"])
        copied: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(copied) < 3 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                copied.append(message.value())
        assert copied == [b"in-0", b"in-1", b"in-2"]
        # Read, copy, and commit the consumer's position inside the transaction (a member of
        # the group: its generation and member id are checked).
        producer.begin_transaction()
        for value in copied:
            producer.produce("outputs", value=value, key=b"k", partition=0)
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata()
        )
        producer.commit_transaction(TIMEOUT_S)
        assert group_offset(cluster, "copier", "inputs") == 3
        # An aborted transaction's offsets are dropped with it.
        producer.begin_transaction()
        producer.produce("outputs", value=b"dropped", key=b"k", partition=0)
        producer.send_offsets_to_transaction(
            [confluent_kafka.TopicPartition("inputs", 0, 5)], consumer.consumer_group_metadata()
        )
        producer.abort_transaction(TIMEOUT_S)
        assert group_offset(cluster, "copier", "inputs") == 3
    assert read(cluster, "outputs", "read_committed", 3) == [b"in-0", b"in-1", b"in-2"]


def replog_read(
    cluster: ClientCluster, topic: str, isolation: str, count: int, partition_id: int = 0
) -> list[bytes]:
    """As `read` (of partition `partition_id`), through replog's own Consumer."""
    partition = TopicPartition(topic, partition_id)
    with cluster.consumer(isolation_level=isolation, enable_auto_commit=False) as consumer:
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        values: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(values) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(r.value for r in records)
        for records in consumer.poll(timeout_ms=1000).values():
            values.extend(r.value for r in records)
        return values


def test_replogs_own_producer_commits_aborts_and_is_fenced(cluster: ClientCluster) -> None:
    """replog's transactional Producer against replog's brokers: what it commits is read
    exactly once by replog's read_committed Consumer, what it aborts only by a
    read_uncommitted one; a second producer with its transactional id fences it."""
    cluster.create_topic("ledger", 1, 3)
    producer = cluster.producer(transactional_id="ledger-tx")
    try:
        producer.init_transactions()
        for values, commit in (([b"c1", b"c2"], True), ([b"a1"], False), ([b"c3"], True)):
            producer.begin_transaction()
            for value in values:
                producer.send("ledger", value, key=b"k", partition=0)
            if commit:
                producer.commit_transaction()
            else:
                producer.flush()  # written, then aborted (an abort drops what is unsent)
                producer.abort_transaction()
        wait_state(cluster, "ledger-tx", "CompleteCommit")
        assert replog_read(cluster, "ledger", "read_committed", 3) == [b"c1", b"c2", b"c3"]
        assert replog_read(cluster, "ledger", "read_uncommitted", 4) == [
            b"c1",
            b"c2",
            b"a1",
            b"c3",
        ]
        producer.begin_transaction()
        producer.send("ledger", b"zombie", key=b"k", partition=0)
        producer.flush()  # written at its epoch: only the coordinator can refuse it now
        with cluster.producer(transactional_id="ledger-tx") as successor:
            successor.init_transactions()  # bumps the epoch: the first producer is a zombie
            with pytest.raises(ProducerFencedError):
                producer.commit_transaction()
            successor.begin_transaction()
            successor.send("ledger", b"c4", key=b"k", partition=0)
            successor.commit_transaction()
        assert replog_read(cluster, "ledger", "read_committed", 4) == [b"c1", b"c2", b"c3", b"c4"]
    finally:
        producer.close()


def test_back_to_back_version_2_transactions_race_their_markers(cluster: ClientCluster) -> None:
    """Transaction version 2: EndTxn is answered once PrepareCommit is written, so the next
    transaction's first produce to each partition (at the bumped epoch) may be verified while
    the previous transaction's markers, at that same epoch, are still landing (the coordinator
    answers CONCURRENT_TRANSACTIONS until they all have): every record is appended once, in
    order, and each transaction bumps the epoch once. The race itself is pinned down in
    tests/server/transactions/test_produce_verifier.py."""
    cluster.create_topic("racing", 3, 3)
    rounds = 15
    with cluster.producer(transactional_id="racing-tx") as producer:
        producer.init_transactions()
        for n in range(rounds):
            producer.begin_transaction()
            for partition in range(3):
                producer.send("racing", b"%d-%d" % (n, partition), partition=partition)
            producer.commit_transaction()
    coordinator = wait_state(cluster, "racing-tx", "CompleteCommit")
    state = asyncio.run(_describe(cluster.kafka_addresses[coordinator], "racing-tx"))
    assert state.producer_epoch == rounds  # one bump a transaction: version 2
    for partition in range(3):
        values = replog_read(cluster, "racing", "read_committed", rounds, partition)
        assert values == [b"%d-%d" % (n, partition) for n in range(rounds)]


def copier_consumer(
    cluster: ClientCluster, source: str, target: str, values: list[bytes]
) -> Consumer:
    """A read_committed member of group `target`-copier subscribed to `source`, a new topic
    holding `values` in partition 0 (`target` is created too)."""
    replicas = len(cluster.kafka_addresses)
    cluster.create_topic(source, 1, replicas)
    cluster.create_topic(target, 1, replicas)
    with cluster.producer() as feeder:
        for value in values:
            feeder.send(source, value, key=b"k", partition=0)
        feeder.flush()
    return Consumer(
        source,
        bootstrap_servers=cluster.bootstrap,
        group_id=f"{target}-copier",
        isolation_level="read_committed",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )


def polled(consumer: Consumer, count: int) -> list[bytes]:
    """The values `consumer` polls until it has `count` (or the time-out passed)."""
    values: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(values) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            values.extend(r.value for r in records)
    return values


def test_replogs_own_consumer_offsets_commit_with_the_transaction(cluster: ClientCluster) -> None:
    """A consume-transform-produce loop of replog's own clients: the offsets sent to an
    aborted transaction are dropped, those of a committed one are the group's."""
    source = TopicPartition("sources", 0)
    with (
        copier_consumer(cluster, "sources", "copies", [b"s-%d" % n for n in range(4)]) as consumer,
        cluster.producer(transactional_id="replog-copier-tx") as producer,
    ):
        producer.init_transactions()
        copied = polled(consumer, 4)
        assert copied == [b"s-0", b"s-1", b"s-2", b"s-3"]
        for commit, upto in ((False, 2), (True, 4)):
            producer.begin_transaction()
            for value in copied[:upto]:
                producer.send("copies", value, key=b"k", partition=0)
            offsets = {source: OffsetAndMetadata(upto)}
            producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
            if commit:
                producer.commit_transaction()
            else:
                producer.flush()
                producer.abort_transaction()
                wait_state(cluster, "replog-copier-tx", "CompleteAbort")
                assert consumer.committed(source) is None  # dropped with the transaction
        wait_for(
            lambda: consumer.committed(source) == 4,
            TIMEOUT_S,
            "the committed transaction's offset 4 of sources-0 for copies-copier",
        )
    assert replog_read(cluster, "copies", "read_committed", 4) == copied


# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS
RETRIABLE = {14, 15, 16, 51}


async def _coordinator(cluster: ClientCluster, key: str, key_type: int) -> KafkaConnection:
    """A connection to the coordinator of `key` (0 a group, 1 a transactional id)."""
    deadline = time.monotonic() + TIMEOUT_S
    address = next(iter(cluster.kafka_addresses.values()))
    while True:
        connection = await KafkaConnection.open(address, client_id="tests", setup_timeout_ms=2000)
        try:
            request = FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
            answer, _ = await connection.call(request, timeout_ms=5000, min_version=4)
        finally:
            connection.close()
        (found,) = answer.coordinators  # type: ignore[attr-defined]
        if found.error_code == 0:
            return await KafkaConnection.open(
                f"{found.host}:{found.port}", client_id="tests", setup_timeout_ms=2000
            )
        assert found.error_code in RETRIABLE and time.monotonic() < deadline, found
        await asyncio.sleep(0.1)


async def _answered(connection: KafkaConnection, request: Any, version: int) -> Any:
    """`request` at `version`, asked again while the answer is retriable."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        answer, _ = await connection.call(
            request, timeout_ms=5000, min_version=version, max_version=version
        )
        codes = {getattr(answer, "error_code", 0)} | {
            p.error_code for t in getattr(answer, "topics", []) for p in t.partitions
        }
        if not codes & RETRIABLE or time.monotonic() > deadline:
            return answer
        await asyncio.sleep(0.1)


async def _txn_offset_commits(cluster: ClientCluster) -> tuple[list[int], TransactionState]:
    transactions = await _coordinator(cluster, "raw-tx", 1)
    group = await _coordinator(cluster, "raw-group", 0)
    try:
        request = InitProducerIdRequest(transactional_id="raw-tx", transaction_timeout_ms=60_000)
        init = await _answered(transactions, request, 4)
        assert init.error_code == 0

        def commit(offset: int) -> TxnOffsetCommitRequest:
            partition = TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=offset)
            return TxnOffsetCommitRequest(
                transactional_id="raw-tx",
                group_id="raw-group",
                producer_id=init.producer_id,
                producer_epoch=init.producer_epoch,
                topics=[TxnOffsetCommitRequestTopic(name="raw-in", partitions=[partition])],
            )

        codes = []
        for version in (3, 4, 5):
            answer = await _answered(group, commit(version), version)
            codes.append(answer.topics[0].partitions[0].error_code)
        described = await _answered(
            transactions, DescribeTransactionsRequest(transactional_ids=["raw-tx"]), 0
        )
        ended = await _answered(
            transactions,
            EndTxnRequest(
                transactional_id="raw-tx",
                producer_id=init.producer_id,
                producer_epoch=init.producer_epoch,
                committed=False,
            ),
            5,
        )
        assert (ended.error_code, ended.producer_epoch) == (0, init.producer_epoch + 1)
        return codes, described.transaction_states[0]
    finally:
        transactions.close()
        group.close()


def test_txn_offset_commit_v5_adds_the_group_and_older_versions_are_verified(
    cluster: ClientCluster,
) -> None:
    cluster.create_topic("raw-in", 1, 3)
    codes, state = asyncio.run(_txn_offset_commits(cluster))
    # v3 and v4 without AddOffsetsToTxn: not in the transaction (INVALID_TXN_STATE for v3,
    # which predates TRANSACTION_ABORTABLE); v5 (transaction version 2) adds the group.
    assert codes == [48, 120, 0]
    assert state.transaction_state == "Ongoing"
    assert [t.topic for t in state.topics] == [CONSUMER_OFFSETS_TOPIC]


def create_placed(
    cluster: ClientCluster, topic: str, replicas: list[int], config: dict[str, str] | None = None
) -> None:
    """Creates `topic` with one partition on `replicas` (the first its preferred leader)."""
    created = admin_module.NewTopic(topic, 1, replica_assignment=[replicas], config=config or {})
    with admin_module.AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
        for future in admin.create_topics([created]).values():
            future.result(TIMEOUT_S)
    cluster.wait_for_leaders(topic, 1, TIMEOUT_S)


def held_elsewhere(cluster: ClientCluster, topic: str, coordinator: int) -> int:
    """Creates `topic` with one partition whose one replica is on a broker other than
    `coordinator`, and returns that broker: killed, it holds the markers back."""
    (holder, *_) = sorted(set(cluster.kafka_addresses) - {coordinator})
    create_placed(cluster, topic, [holder])
    return holder


async def _open(address: str) -> KafkaConnection:
    return await KafkaConnection.open(address, client_id="tests", setup_timeout_ms=2000)


async def _produce_v12(address: str, tid: str, pid: int, epoch: int, topic: str) -> int:
    """One transactional record to `topic`-0 (led at `address`) with Produce v12: its code."""
    builder = BatchBuilder(
        producer_id=pid, producer_epoch=epoch, base_sequence=0, is_transactional=True
    )
    builder.append(int(time.time() * 1000), b"k", b"v")
    data = PartitionProduceData(index=0, records=builder.build())
    request = ProduceRequest(
        transactional_id=tid,
        acks=-1,
        timeout_ms=5000,
        topic_data=[TopicProduceData(name=topic, partition_data=[data])],
    )
    connection = await _open(address)
    try:
        answer = await _answered(connection, request, 12)
    finally:
        connection.close()
    ((partition,),) = [t.partition_responses for t in answer.responses]
    return int(partition.error_code)


async def _init_v5(cluster: ClientCluster, tid: str) -> Any:
    connection = await _coordinator(cluster, tid, 1)
    request = InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60_000)
    try:
        return await _answered(connection, request, 5)
    finally:
        connection.close()


async def _end_v5(address: str, tid: str, pid: int, epoch: int, *, retry: bool) -> Any:
    """EndTxn v5 (transaction version 2) to the coordinator at `address`, aborting `tid`'s
    transaction at `epoch`; asked again while retriable when `retry`."""
    connection = await _open(address)
    request = EndTxnRequest(
        transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=False
    )
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while True:
            # long: the append waits for the ISR to drop a killed replica
            answer, _ = await connection.call(
                request, timeout_ms=TIMEOUT_S * 1000, min_version=5, max_version=5
            )
            if not retry or answer.error_code not in RETRIABLE or time.monotonic() > deadline:
                return answer
            await asyncio.sleep(0.1)
    finally:
        connection.close()


def test_an_abort_at_the_bumped_epoch_waits_for_the_previous_markers(
    cluster: ClientCluster,
) -> None:
    """Transaction version 2: EndTxn is answered with the bumped epoch once PrepareAbort is
    written; the next transaction's EndTxn at that epoch while the markers are still being
    written is CONCURRENT_TRANSACTIONS (retriable, as Kafka answers since KAFKA-18464), not
    PRODUCER_FENCED (fatal: franz-go's TestTxnEtl died on it), and it ends the transaction
    once they land. The markers are held by killing the one replica of the partition."""
    tid = "fence-tx"
    init = asyncio.run(_init_v5(cluster, tid))
    assert init.error_code == 0
    pid, epoch = init.producer_id, init.producer_epoch
    coordinator = wait_state(cluster, tid, "Empty")
    holder = held_elsewhere(cluster, "fenced-abort", coordinator)
    leader, at = cluster.kafka_addresses[holder], cluster.kafka_addresses[coordinator]
    assert asyncio.run(_produce_v12(leader, tid, pid, epoch, "fenced-abort")) == 0
    cluster.loopback.kill(holder)
    try:
        first = asyncio.run(_end_v5(at, tid, pid, epoch, retry=True))
        assert (first.error_code, first.producer_epoch) == (0, epoch + 1)
        assert describe(cluster, tid) == (coordinator, "PrepareAbort")
        time.sleep(1)  # the markers wait for a leader meanwhile
        waiting = asyncio.run(_end_v5(at, tid, pid, epoch + 1, retry=False))
        assert waiting.error_code == 51, waiting  # CONCURRENT_TRANSACTIONS
        assert describe(cluster, tid) == (coordinator, "PrepareAbort")
    finally:
        cluster.loopback.restart(holder)
    wait_state(cluster, tid, "CompleteAbort")
    ended = asyncio.run(_end_v5(at, tid, pid, epoch + 1, retry=True))
    assert (ended.error_code, ended.producer_epoch) == (0, epoch + 2)
    assert read(cluster, "fenced-abort", "read_committed", 0) == []


# --- a partition leader killed with SIGKILL mid-transaction -------------------------------------

# Long enough for a transaction to outlive a leader's failover (the broker session timeout, 9 s,
# then an election) on a busy machine: the coordinator would abort it otherwise.
SURVIVING_TIMEOUT_MS = 180_000
PER_PHASE = 40
# acknowledged before the kill, sent just before it (maybe still on the wire), sent after it
PHASES = ("acked", "sent", "after")
TAGS = ("kept", "dropped")  # the transaction committed, the one aborted


def phase(tag: str, name: str) -> list[bytes]:
    return [f"{tag}-{name}-{n}".encode() for n in range(PER_PHASE)]


KEPT, DROPPED = ([v for name in PHASES for v in phase(tag, name)] for tag in TAGS)


def leader_of(cluster: ClientCluster, topic: str) -> int | None:
    """The leader of `topic`-0 as the active controller has it."""
    with cluster.admin() as admin:
        (info,) = admin.metadata([topic]).topics
    return info.partitions[0].leader


def led_apart(cluster: ClientCluster, topic: str, coordinators: set[int]) -> int:
    """Creates `topic` with one partition on every broker (min.insync.replicas 2) led by a
    broker that coordinates none of the transactions, and returns that broker."""
    brokers = sorted(cluster.kafka_addresses)
    leader = next(b for b in brokers if b not in coordinators)
    replicas = [leader, *(b for b in brokers if b != leader)]
    create_placed(cluster, topic, replicas, {"min.insync.replicas": "2"})
    wait_for(lambda: leader_of(cluster, topic) == leader, TIMEOUT_S, f"{leader} leading {topic}")
    return leader


def leader_killed_mid_transactions(
    cluster: ClientCluster,
    topic: str,
    producers: dict[str, Any],
    ids: dict[str, str],
    send: Callable[[Any, bytes], None],
    settle: Callable[[Any], None],
    end: Callable[[Any, bool], None],
) -> None:
    """Begins a transaction on each of `producers` (initialized; by tag, `ids` their
    transactional ids), all writing to `topic`-0, led by a broker that coordinates neither;
    kills that broker with SIGKILL between the phases' records (`send`, then `settle` waits
    for each producer's records to be acknowledged); commits "kept" and aborts "dropped"
    (`end`); and returns once both are complete and the broker is back in the ISR."""
    cluster.wait_healthy([], TIMEOUT_S)
    coordinators = {
        wait_state(cluster, transactional_id, "Empty") for transactional_id in ids.values()
    }
    victim = led_apart(cluster, topic, coordinators)

    def write(name: str) -> None:
        for tag, producer in producers.items():
            for value in phase(tag, name):
                send(producer, value)

    for producer in producers.values():
        producer.begin_transaction()
    write("acked")
    for producer in producers.values():
        settle(producer)  # acks=all: on every replica of the victim's partition
    write("sent")
    cluster.loopback.kill(victim)
    try:
        write("after")
        for producer in producers.values():
            settle(producer)  # the victim fenced after its session timeout, a leader elected
        end(producers["kept"], True)
        end(producers["dropped"], False)
        assert leader_of(cluster, topic) not in (None, victim)
    finally:
        cluster.loopback.restart(victim)
    wait_state(cluster, ids["kept"], "CompleteCommit")
    wait_state(cluster, ids["dropped"], "CompleteAbort")
    cluster.wait_healthy([topic], TIMEOUT_S)


def test_transactions_outlive_their_partition_leaders_kill_confluent(
    cluster: ClientCluster,
) -> None:
    """Two librdkafka transactions (version 1) write to a partition (RF 3, min.insync.replicas
    2, acks=all) whose leader is killed with SIGKILL while both are open; they carry on
    through the new leader, one commits and the other aborts: read_committed reads exactly the
    committed one's records, in order, read_uncommitted every record of both once."""
    topic = "txn-killed-leader"
    ids = {tag: f"kill-{tag}-tx" for tag in TAGS}
    errors: list[Any] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            errors.append(error)

    def settle(producer: Any) -> None:
        assert producer.flush(TIMEOUT_S * 2) == 0, "records still queued"
        assert errors == []

    with contextlib.ExitStack() as clients:
        producers = {
            tag: clients.enter_context(
                confluent_producer(
                    {
                        "bootstrap.servers": cluster.bootstrap,
                        "transactional.id": ids[tag],
                        "transaction.timeout.ms": SURVIVING_TIMEOUT_MS,
                        "on_delivery": delivered,
                    }
                )
            )
            for tag in TAGS
        }
        for producer in producers.values():
            producer.init_transactions(TIMEOUT_S)
        leader_killed_mid_transactions(
            cluster,
            topic,
            producers,
            ids,
            lambda producer, value: producer.produce(topic, value=value, key=b"k", partition=0),
            settle,
            lambda producer, commit: (
                producer.commit_transaction(TIMEOUT_S)
                if commit
                else producer.abort_transaction(TIMEOUT_S)
            ),
        )
    assert read(cluster, topic, "read_committed", len(KEPT)) == KEPT
    everything = read(cluster, topic, "read_uncommitted", len(KEPT) + len(DROPPED))
    assert Counter(everything) == Counter(KEPT + DROPPED)


def test_transactions_outlive_their_partition_leaders_kill_replog(cluster: ClientCluster) -> None:
    """As above with replog's own Producer (transaction version 2: each Produce v12 adds its
    partition, verified again by the new leader) and read_committed Consumer."""
    topic = "replog-txn-killed-leader"
    ids = {tag: f"replog-kill-{tag}-tx" for tag in TAGS}
    config = {"transaction_timeout_ms": SURVIVING_TIMEOUT_MS, "max_block_ms": TIMEOUT_S * 2000}
    futures: list[Any] = []
    with (
        cluster.producer(transactional_id=ids["kept"], **config) as kept,
        cluster.producer(transactional_id=ids["dropped"], **config) as dropped,
    ):
        for producer in (kept, dropped):
            producer.init_transactions()
        leader_killed_mid_transactions(
            cluster,
            topic,
            {"kept": kept, "dropped": dropped},
            ids,
            lambda producer, value: futures.append(
                producer.send(topic, value, key=b"k", partition=0)
            ),
            lambda producer: producer.flush(TIMEOUT_S * 2),
            lambda producer, commit: (
                producer.commit_transaction() if commit else producer.abort_transaction()
            ),
        )
    assert [f.exception() for f in futures if f.failed()] == []
    assert replog_read(cluster, topic, "read_committed", len(KEPT)) == KEPT
    everything = replog_read(cluster, topic, "read_uncommitted", len(KEPT) + len(DROPPED))
    assert Counter(everything) == Counter(KEPT + DROPPED)


def transactions_cli(cluster: ClientCluster, *args: str) -> list[dict[str, str]]:
    """`replog transactions ARGS --json` against the cluster: its rows (exit 0 asserted)."""
    outcome = replog_in_process(
        "transactions", *args, "--json", "--bootstrap-server", cluster.bootstrap
    )
    assert outcome.returncode == 0, outcome.stderr
    rows: list[dict[str, str]] = json.loads(outcome.stdout)
    return rows


def test_the_transactions_command_across_brokers(cluster: ClientCluster) -> None:
    # Before the test below, which leaves a broker down: three brokers lead its partitions.
    cluster.wait_healthy([], TIMEOUT_S)
    topic = "cli-spread"
    cluster.create_topic(topic, 3, 3)
    with transactional(cluster, "cli-tx") as producer:
        producer.begin_transaction()
        for partition in range(3):
            producer.produce(topic, value=b"v%d" % partition, key=b"k", partition=partition)
        assert producer.flush(TIMEOUT_S) == 0
        coordinator = wait_state(cluster, "cli-tx", "Ongoing")
        with cluster.admin() as admin:
            (info,) = admin.metadata([topic]).topics
        leaders = {p.partition: p.leader for p in info.partitions}
        # Three partitions led by three brokers: some are led away from the coordinator.
        elsewhere = sorted(p for p, leader in leaders.items() if leader != coordinator)
        assert elsewhere, f"every partition of {topic} is led by the coordinator {coordinator}"
        partition = elsewhere[0]

        (described,) = transactions_cli(cluster, "describe", "--transactional-id", "cli-tx")
        assert described["CoordinatorId"] == str(coordinator)
        assert described["TransactionState"] == "Ongoing"
        assert set(described["TopicPartitions"].split(",")) == {f"{topic}-{p}" for p in range(3)}
        producer_id = described["ProducerId"]
        listed = transactions_cli(cluster, "list", "--state", "Ongoing")
        assert {
            "TransactionalId": "cli-tx",
            "Coordinator": str(coordinator),
            "ProducerId": producer_id,
            "TransactionState": "Ongoing",
        } in listed

        def open_on(*broker_id: str) -> dict[str, str] | None:
            rows = transactions_cli(
                cluster,
                "describe-producers",
                "--topic",
                topic,
                "--partition",
                str(partition),
                *broker_id,
            )
            return next((r for r in rows if r["ProducerId"] == producer_id), None)

        at_leader = open_on()  # the partition's leader, not the coordinator
        assert at_leader is not None and at_leader["CurrentTransactionStartOffset"] == "0"
        # The coordinator's broker holds a follower replica: it knows the producer once it has
        # replicated the batch.
        found: list[dict[str, str] | None] = [None]

        def replicated() -> bool:
            found[0] = open_on("--broker-id", str(coordinator))
            return found[0] is not None and found[0]["CurrentTransactionStartOffset"] == "0"

        wait_for(replicated, TIMEOUT_S, f"producer {producer_id} on broker {coordinator}: {found}")

        producer.commit_transaction(TIMEOUT_S)
        wait_state(cluster, "cli-tx", "CompleteCommit")
        (described,) = transactions_cli(cluster, "describe", "--transactional-id", "cli-tx")
        assert described["TransactionState"] == "CompleteCommit"
        committed = transactions_cli(cluster, "list", "--state", "CompleteCommit")
        assert any(r["TransactionalId"] == "cli-tx" for r in committed)
        assert not any(
            r["TransactionalId"] == "cli-tx"
            for r in transactions_cli(cluster, "list", "--state", "Ongoing")
        )

        def closed_on(*broker_id: str) -> bool:
            row = open_on(*broker_id)
            return row is not None and row["CurrentTransactionStartOffset"] == "None"

        wait_for(closed_on, TIMEOUT_S, f"the commit marker on {topic}-{partition}'s leader")
        wait_for(
            lambda: closed_on("--broker-id", str(coordinator)),
            TIMEOUT_S,
            f"the commit marker on broker {coordinator}'s replica",
        )


def test_a_new_coordinator_completes_a_prepared_commit(cluster: ClientCluster) -> None:
    with transactional(cluster, "payments-tx") as producer:
        coordinator = wait_state(cluster, "payments-tx", "Empty")
        # killing the holder leaves the partition without a leader: the commit stays prepared
        holder = held_elsewhere(cluster, "payments", coordinator)
        producer.begin_transaction()
        producer.produce("payments", value=b"p1", key=b"k", partition=0)
        assert producer.flush(TIMEOUT_S) == 0
        cluster.loopback.kill(holder)
        producer.commit_transaction(TIMEOUT_S)  # answered once PrepareCommit is written
    assert wait_state(cluster, "payments-tx", "PrepareCommit") == coordinator
    time.sleep(1)  # the markers wait for a leader meanwhile
    assert describe(cluster, "payments-tx") == (coordinator, "PrepareCommit")
    # The coordinator dies with its transaction prepared; the holder comes back (the quorum
    # needs two of the three nodes) and another broker takes the `__transaction_state`
    # partition, loads the transaction and writes its markers.
    cluster.loopback.kill(coordinator)
    cluster.loopback.restart(holder)
    successor = wait_state(cluster, "payments-tx", "CompleteCommit")
    assert successor != coordinator
    assert read(cluster, "payments", "read_committed", 1) == [b"p1"]
