"""The client library under faults (issue #7), on a real 3-node cluster, through the public API.

The clients under test are only `replog.Producer`, `replog.Consumer` and their results and
errors; the faults are signals to node processes (`kill -9`, `replog cluster restart`) and a
TCP proxy in front of every node (tests/cluster/tcp_proxy.py); the cluster is inspected with
the controller's admin client, as an operator would.

How the client's connections are cut (the brief: "cut the client's connection"). Each node
*advertises* its proxy's address (`advertised.listeners`, written into its server.properties
before `replog cluster start`), and the clients bootstrap from the proxies: every connection a
client opens to a broker, found through bootstrap or metadata, goes through a proxy, and the
client library is not touched. A cut first holds the nodes' answers (requests still reach the
nodes and are executed, their responses are dropped) and then resets every connection with
RST: the calls in flight fail although the broker appended their batches, which is what makes
a retry duplicate unless the producer is idempotent. The cost of this honesty: a broker's
replica fetchers look leaders up by the same advertised address, so replication goes through
the proxies too and a cut also interrupts it for the same moment (a network blip between the
nodes; they reconnect like the client does). Closing the client's gRPC channels through an
internal handle was the alternative; it would test the client's reaction to its own close,
not to a network that lost answers, and would reach into internals.

The tests, in order (the last ones kill the whole cluster):
- kill -9 of a partition's leader during a stream of sends to 3 partitions (acks=all,
  idempotence on by default): every send is acknowledged, each record is in the log exactly
  once, at its acknowledged offset, in send order per partition.
- three cuts during such a stream: the same checks; each cut must have dropped answers and
  reset connections, else the test proves nothing and says so.
- the control: the same cuts with `enable.idempotence=false` do write duplicates. This is what
  shows that the duplicate check can fail and that the cuts produce retried appends; if the
  client ever stops retrying non-idempotent batches after a lost answer, it fails too.
- committed-only reads (the history check): with acks=1, where a leader acknowledges records
  its followers may never copy, a consumer tails the topic from its start through a kill -9 of
  a partition's leader, its restart, and a SIGSTOP of the next leader past the session timeout
  (it is fenced, another replica leads, and it resumes believing it still leads). Every record
  the consumer was given must be in the final log at the offset it was given at, and the
  consumer's records must be exactly the log, in order from offset 0: a record served above
  the high watermark and then truncated, a high watermark that moved back, or a reset to the
  start would each break that.
- committed offsets (the next offset to read) survive a consumer restart, then a kill -9 of
  the group coordinator's node (the leader of the group's `__consumer_offsets` partition),
  commits during its absence, and its restart.
- a dead cluster (every node killed): a send whose metadata is known fails within
  `delivery.timeout.ms`, a send that needs metadata within `max.block.ms`, both with
  KafkaTimeoutError; `poll` returns within its timeout.
- Ctrl-C (SIGINT to the test's own thread) interrupts a blocked `send`, `future.get()`,
  `flush` and `poll` within a wait slice.

How each check can fail: the exactly-once check compares the log of each partition with the
list of values sent to it, so a duplicate, a loss, a reordering or a stray record fails it
(the idempotence-off control shows duplicates are caught); the acknowledged-offset check fails
when an acknowledgement named an offset that holds another record; the timing checks fail
when a call outlives its timeout by more than a second of slack.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

import pytest
from cluster_helpers import wait_for
from proxied_cluster import (
    NODES,
    Log,
    ProxiedCluster,
    Stream,
    Tail,
    assert_consumer_was_given_the_log,
    assert_exactly_once_in_order,
    duplicates,
    read_log,
    settled_log,
    start_proxied_cluster,
    stop,
)
from tcp_proxy import CutReport, cut_all

from replog import Consumer, OffsetAndMetadata, TopicPartition
from replog.errors import KafkaTimeoutError, ReplogError

pytestmark = pytest.mark.slow

OFFSETS_TOPIC = "__consumer_offsets"
HOLD_S = 0.3  # how long a cut drops the nodes' answers before it resets the connections
SLACK_S = 1.5  # what a timed call may take beyond its timeout (scheduling, a wait slice)


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxiedCluster]:
    cluster = start_proxied_cluster(tmp_path_factory.mktemp("faults") / "cluster")
    try:
        yield cluster
    finally:
        stop(cluster)


@pytest.fixture
def live(proxied: ProxiedCluster) -> ProxiedCluster:
    """The cluster with every node running (a test run out of order may find it dead)."""
    if proxied.alive() != set(range(1, NODES + 1)):
        proxied.revive()
        proxied.wait_healthy([])
    return proxied


def cuts_during(stream: Stream, proxied: ProxiedCluster, rounds: int) -> CutReport:
    """`rounds` cuts of every proxy, each after 200 fresh acks; then 200 more."""
    total = CutReport()
    for _ in range(rounds):
        stream.wait_acks(200, 30, "before a cut")
        total.add(cut_all(proxied.proxies.values(), HOLD_S))
    stream.wait_acks(200, 30, "after the cuts")
    return total


def data_plane_victim(live: ProxiedCluster, topic: str) -> int:
    """A partition whose leader is not also the metadata quorum's leader: killing or stopping
    it is then a data-plane failover only, which keeps a test short."""
    quorum_leader = live.quorum_leader()
    return next((p for p, node in live.leaders(topic).items() if node != quorum_leader), 0)


def kill_9_leader_and_restart(
    live: ProxiedCluster, stream: Stream, topic: str, partition: int, acks: int
) -> int:
    """After `acks` more acknowledgements, kill -9 the partition's leader; wait for a new
    leader and `acks` more; restart the node and wait for full ISRs. Returns the node id."""
    stream.wait_acks(acks, 30, "before the kill")
    victim = live.leaders(topic)[partition]
    assert victim is not None
    live.kill(victim)
    wait_for(
        lambda: live.leaders(topic)[partition] not in (None, victim),
        20,
        f"a new leader of {topic}-{partition} after kill -9 of node {victim}",
    )
    stream.wait_acks(acks, 30, "after the failover")
    live.restart(victim)
    live.wait_healthy([topic])
    return victim


# --- idempotence under kill -9 and cut connections ----------------------------------------------


def test_kill_9_of_a_partition_leader_neither_loses_nor_duplicates(live: ProxiedCluster) -> None:
    topic, partitions = "kill9", 3
    live.cluster.create_topic(topic, partitions, NODES)
    victim_partition = data_plane_victim(live, topic)
    with (
        live.producer(acks="all", linger_ms=5) as producer,
        Stream(producer, topic, partitions) as stream,
    ):
        victim = kill_9_leader_and_restart(live, stream, topic, victim_partition, acks=500)
        stream.wait_acks(200, 30, "after the restart")
    log = read_log(live, topic, partitions)
    checked = assert_exactly_once_in_order(stream, log)
    print(f"kill -9 of node {victim} (leader of {topic}-{victim_partition}): {checked} records")


def stream_through_cuts(
    live: ProxiedCluster, topic: str, **config: object
) -> tuple[Stream, CutReport, Log]:
    """A stream to a new 3-partition topic through three cuts; what the log then holds."""
    live.cluster.create_topic(topic, 3, NODES)
    with (
        live.producer(acks="all", linger_ms=5, **config) as producer,
        Stream(producer, topic, 3) as stream,
    ):
        report = cuts_during(stream, live, rounds=3)
    return stream, report, read_log(live, topic, 3)


def test_cut_connections_neither_lose_duplicate_nor_reorder(live: ProxiedCluster) -> None:
    stream, report, log = stream_through_cuts(live, "cuts")
    # Non-vacuity: the cuts reset connections and dropped answers of requests that arrived.
    assert report.connections > 0 and report.bytes_dropped > 0, report
    assert report.requests_bytes_while_holding > 0, report
    checked = assert_exactly_once_in_order(stream, log)
    print(f"3 cuts ({report}): {checked} records, each once and in order")


def test_the_same_cuts_duplicate_records_without_idempotence(live: ProxiedCluster) -> None:
    """The control of the test above: its faults do produce retried appends."""
    stream, report, log = stream_through_cuts(live, "cuts-control", enable_idempotence=False)
    found = duplicates(log)
    print(f"without idempotence, 3 cuts ({report}): {found} duplicates")
    assert found > 0, (
        "three cuts that dropped answers wrote no duplicate without idempotence: either the "
        f"cuts no longer hit requests in flight or the producer did not retry ({report})"
    )
    with pytest.raises(AssertionError, match="appended more than once"):
        assert_exactly_once_in_order(stream, log)


# --- committed-only reads under faults -----------------------------------------------------------


def test_a_consumer_never_sees_a_record_that_later_vanishes(live: ProxiedCluster) -> None:
    topic, partitions = "history", 3
    live.cluster.create_topic(topic, partitions, NODES)
    victim_partition = data_plane_victim(live, topic)
    tail_counts = []
    # A stopped process keeps its connections open: calls to it end only at the request
    # timeout, and until then its partitions' sends fill the stream's window (as in Kafka).
    quick = {"request_timeout_ms": 3000}
    with (
        live.producer(acks=1, enable_idempotence=False, linger_ms=5, **quick) as producer,
        live.consumer(enable_auto_commit=False, auto_offset_reset="earliest", **quick) as consumer,
        Tail(consumer, topic, partitions) as tail,
        Stream(producer, topic, partitions) as stream,
    ):
        killed = kill_9_leader_and_restart(live, stream, topic, victim_partition, acks=300)
        tail_counts.append(tail.count)

        stopped = live.leaders(topic)[victim_partition]
        assert stopped is not None
        if stopped == live.quorum_leader():  # keep the metadata quorum running
            stopped = next(n for n in live.leaders(topic).values() if n != live.quorum_leader())
        stopped_partitions = [p for p, n in live.leaders(topic).items() if n == stopped]
        live.loopback.signal(stopped, signal.SIGSTOP)
        try:
            # Fenced after broker.session.timeout.ms (3 s): every partition it led moves.
            wait_for(
                lambda: all(live.leaders(topic)[p] != stopped for p in stopped_partitions),
                20,
                f"the partitions of SIGSTOPped node {stopped} to get new leaders",
            )
            stream.wait_acks(300, 30, "while a deposed leader is stopped")
        finally:
            live.loopback.signal(stopped, signal.SIGCONT)
        stream.wait_acks(300, 30, "after SIGCONT")
        live.wait_healthy([topic])
        tail_counts.append(tail.count)
        stream.stop()
        log = settled_log(live, topic, partitions)
        tail.wait_for({p: len(entries) for p, entries in log.items()}, 30)
    for partition, entries in log.items():
        offsets = [offset for offset, _ in entries]
        assert offsets == list(range(len(entries))), f"{topic}-{partition}: offsets not 0..n-1"
    assert_consumer_was_given_the_log(tail, log)
    final = {value: (p, offset) for p, entries in log.items() for offset, value in entries}
    lost = sum(1 for v, m in stream.acked.items() if final.get(v) != (m.partition, m.offset))
    # The consumer was reading while the faults happened, not only afterwards.
    assert 0 < tail_counts[0] < tail_counts[1] < tail.count, tail_counts
    print(
        f"kill -9 of node {killed}, SIGSTOP of node {stopped}: the consumer read "
        f"{tail.count} records, each where the final log has it; {len(stream.acked)} acks=1 "
        f"acknowledgements, {lost} of them not in the final log at their offset (acks=1 "
        f"allows that); {len(tail.errors)} failed polls"
    )


# --- committed offsets ----------------------------------------------------------------------------


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (UTF-16 code units, 32-bit wrap-around), signed."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i : i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def offsets_partition(group: str, partitions: int) -> int:
    """Kafka's partition of `__consumer_offsets` for a group (Utils.abs: MIN_VALUE -> 0)."""
    h = java_string_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def committed_offset(consumer: Consumer, tp: TopicPartition) -> int | None:
    committed = consumer.committed(tp)
    return getattr(committed, "offset", committed)


def poll_records(consumer: Consumer, count: int, timeout_s: float = 20) -> list[Any]:
    records: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(records) < count:
        assert time.monotonic() < deadline, f"{len(records)} of {count} records polled"
        for batch in consumer.poll(timeout_ms=500, max_records=count - len(records)).values():
            records.extend(batch)
    return records


def test_committed_offsets_survive_consumer_restart_and_coordinator_kill_9(
    live: ProxiedCluster,
) -> None:
    topic, group = "committed", "faults-group"
    tp = TopicPartition(topic, 0)
    live.cluster.create_topic(topic, 1, NODES)
    with live.producer() as producer:
        for i in range(100):
            producer.send(topic, value=b"%d" % i, partition=0)
        producer.flush(timeout=30)
    settings = {"group_id": group, "enable_auto_commit": False, "auto_offset_reset": "earliest"}

    with live.consumer(**settings) as consumer:
        consumer.assign([tp])
        records = poll_records(consumer, 40)
        assert [r.offset for r in records] == list(range(40))
        consumer.commit()  # what poll returned: the next offset to read is 40
        assert committed_offset(consumer, tp) == 40

    # A new consumer of the group starts where the last one committed.
    with live.consumer(**settings) as consumer:
        consumer.assign([tp])
        assert committed_offset(consumer, tp) == 40
        assert consumer.position(tp) == 40
        assert poll_records(consumer, 1)[0].offset == 40

    # kill -9 the coordinator's node: the leader of the group's __consumer_offsets partition.
    partitions = len(live.leaders(OFFSETS_TOPIC))
    coordinator = live.leaders(OFFSETS_TOPIC)[offsets_partition(group, partitions)]
    assert coordinator is not None
    live.kill(coordinator)
    with live.consumer(**settings) as consumer:
        consumer.assign([tp])
        assert committed_offset(consumer, tp) == 40  # loaded by the new coordinator
        assert poll_records(consumer, 30)[-1].offset == 69
        consumer.commit({tp: OffsetAndMetadata(70)})  # written while the node is down
        assert committed_offset(consumer, tp) == 70
    live.restart(coordinator)
    live.wait_healthy([topic, OFFSETS_TOPIC])
    with live.consumer(**settings) as consumer:
        consumer.assign([tp])
        assert committed_offset(consumer, tp) == 70
        assert poll_records(consumer, 1)[0].offset == 70


# --- Ctrl-C, and a dead cluster (last: it kills every node) -----------------------------------


def test_ctrl_c_interrupts_a_blocked_poll(live: ProxiedCluster) -> None:
    topic = "ctrl-c"
    tp = TopicPartition(topic, 0)
    live.cluster.create_topic(topic, 1, NODES)
    # An empty partition: poll blocks for its whole timeout.
    with live.consumer(auto_offset_reset="latest", enable_auto_commit=False) as consumer:
        consumer.assign([tp])
        consumer.poll(timeout_ms=100)
        assert_interrupted(lambda: consumer.poll(timeout_ms=60_000), "poll(60 s)")


def test_a_dead_cluster_fails_calls_within_their_timeouts_and_ctrl_c_interrupts_them(
    live: ProxiedCluster,
) -> None:
    topic = "dead"
    tp = TopicPartition(topic, 0)
    live.cluster.create_topic(topic, 1, NODES)
    timeouts = {"request_timeout_ms": 1000, "delivery_timeout_ms": 3000, "max_block_ms": 2000}
    patient = {"max_block_ms": 60_000, "delivery_timeout_ms": 120_000}
    with (
        live.producer(linger_ms=5, **timeouts) as producer,
        live.producer(**patient) as patient_producer,
        live.consumer(auto_offset_reset="earliest", enable_auto_commit=False) as consumer,
    ):
        producer.send(topic, value=b"before").get(timeout=30)  # metadata now known
        patient_producer.send(topic, value=b"before").get(timeout=30)
        consumer.assign([tp])
        assert [r.value for r in poll_records(consumer, 2)] == [b"before", b"before"]

        live.loopback.kill_everything()

        # metadata known: the batch expires at delivery.timeout.ms
        future = producer.send(topic, value=b"after")
        with (
            timed(3 + SLACK_S, "a send's delivery on a dead cluster"),
            pytest.raises(KafkaTimeoutError) as expired,
        ):
            future.get(timeout=30)
        assert topic in str(expired.value), expired.value
        # no metadata for the topic: send itself gives up at max.block.ms
        with (
            timed(2 + SLACK_S, "a send needing metadata on a dead cluster"),
            pytest.raises(KafkaTimeoutError),
        ):
            producer.send("never-seen", value=b"x")
        # poll returns within its timeout, with nothing
        with timed(1 + SLACK_S, "poll(1000) on a dead cluster"):
            assert not consumer.poll(timeout_ms=1000)

        # Ctrl-C interrupts what would block for a minute or two
        stuck = patient_producer.send(topic, value=b"stuck")
        assert_interrupted(lambda: stuck.get(), "future.get() without a timeout")
        assert_interrupted(lambda: patient_producer.flush(), "flush() without a timeout")
        assert_interrupted(
            lambda: patient_producer.send("unknown", value=b"x"), "a send needing metadata"
        )
        with suppress(ReplogError):
            patient_producer.close(timeout=0)

    # clients that never reached the cluster
    with (
        live.producer(**timeouts) as fresh,
        timed(2 + SLACK_S, "a fresh producer's first send on a dead cluster"),
        pytest.raises(KafkaTimeoutError),
    ):
        fresh.send(topic, value=b"x")
    with live.consumer(auto_offset_reset="earliest", enable_auto_commit=False) as fresh_consumer:
        fresh_consumer.assign([tp])
        with timed(1 + SLACK_S, "a fresh consumer's poll(1000) on a dead cluster"):
            assert not fresh_consumer.poll(timeout_ms=1000)


# --- helpers of the timing tests ----------------------------------------------------------------


@contextmanager
def timed(limit_s: float, what: str) -> Iterator[None]:
    started = time.monotonic()
    yield
    took = time.monotonic() - started
    assert took <= limit_s, f"{what} took {took:.2f} s, more than {limit_s:.2f} s"


@contextmanager
def ctrl_c_after(delay_s: float) -> Iterator[list[float]]:
    """SIGINT to this (the main) thread after `delay_s`, as Ctrl-C at a terminal; yields a
    list that holds the time it was sent."""
    assert threading.current_thread() is threading.main_thread(), "signals reach the main thread"
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    sent_at: list[float] = []
    main_thread = threading.main_thread().ident
    assert main_thread is not None

    def interrupt() -> None:
        sent_at.append(time.monotonic())
        signal.pthread_kill(main_thread, signal.SIGINT)

    timer = threading.Timer(delay_s, interrupt)
    timer.start()
    try:
        yield sent_at
    finally:
        # Joined before the handler is restored: a SIGINT after that would interrupt whatever
        # this process runs next (the rest of the session).
        timer.cancel()
        timer.join()
        signal.signal(signal.SIGINT, previous)


def assert_interrupted(call: Callable[[], object], what: str) -> None:
    """`call` would block for much longer than 0.3 s; Ctrl-C then interrupts it within 1 s."""
    with pytest.raises(KeyboardInterrupt), ctrl_c_after(0.3) as sent_at:
        call()
        raise AssertionError(f"{what} returned instead of blocking")
    assert sent_at, f"{what} ended before Ctrl-C"
    took = time.monotonic() - sent_at[0]
    assert took < 1.0, f"{what} went on for {took:.2f} s after Ctrl-C"
