"""The replicated data plane on real node processes (issue #6): failures under acks=all.

Every test runs combined broker+controller nodes on loopback (`replog cluster start`) with
short timers: `replica.lag.time.max.ms` = 2000 (a silent follower leaves the ISR 2-3 s after
its last fetch) and heartbeats every 500 ms. Partitions are placed by hand, preferred leader
first and the metadata quorum's leader last if at all, so that a node the test kills or stops
is a data-plane failure and not also a controller failover.

- kill -9 of the partition leader under a produce stream (3 nodes, RF=3, min.insync.replicas=2,
  acks=all): every acknowledged record is readable at its acknowledged offset after failover,
  the killed node rejoins the ISR when restarted, and the three logs hold byte-identical
  batches below the high watermark (read from the files after the nodes are dead).
- SIGSTOP of a follower past the lag time (3 nodes): the leader shrinks the ISR (the broker is
  still unfenced, so it was the leader's lag check and not the controller's session expiry),
  acks=all waits meanwhile and then goes on; after SIGCONT the follower catches up and rejoins.
- two followers stopped (5 nodes: stopping two of three combined nodes would stop the
  metadata quorum too, and with it every ISR change): acks=all gets NOT_ENOUGH_REPLICAS and
  appends nothing; acks=1 appends but the high watermark does not move until they return.
- unclean leader election (5 nodes, same reason), docs/design/replication.md#scenarios, S6: with the
  leader the last ISR member and killed, a topic with unclean election off stays offline until the
  leader returns (nothing lost); a topic with it on elects a stale replica and loses exactly the
  acknowledged records above that replica's log end, and the replicas converge on the new leader's
  log.
- every produce and fetch error path a client can reach answers its Kafka error code; garbage
  bytes close the connection (on the Kafka listener and the internal gRPC one) and so does an
  oversize request; no node process dies of any of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import time
from collections.abc import Awaitable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from cluster_helpers import LoopbackCluster
from replication_helpers import (
    ACKS_LEADER,
    REPLICA_LAG_TIME_MAX_MS,
    Ack,
    Brokers,
    ProduceStream,
    Replica,
    assert_acked,
    assert_identical,
    assert_unique_offsets,
    create_topic,
    error_code,
    in_thread,
    new_cluster,
    one_record,
    others,
    overrides,
    placement,
    produce_values,
    read_replicas,
    replication_overrides,
    wait_until,
)

from replog.errors import KafkaError, NetworkError, NotLeaderOrFollowerError
from replog.replication import messages as m

LAG_S = REPLICA_LAG_TIME_MAX_MS / 1000
# The leader notices a silent follower within lag + lag / 2; the metadata shows it a moment later.
ISR_SHRINK_S = LAG_S * 1.5 + 5
KAFKA_SESSION_TIMEOUT_MS = 9000  # outlives every SIGSTOP below: a stopped broker stays unfenced
SHORT_SESSION_TIMEOUT_MS = 3000  # a killed broker is fenced (and its leaderships moved) in 3 s
REJOIN_S = 20
RACED_TIMEOUT_MS = 5000  # longer than the ISR takes to shrink
REQUEST_BYTES_MAX = 4 * 1024 * 1024  # socket.request.max.bytes of the error-path test


@pytest.fixture
def cluster3(tmp_path: Path) -> Iterator[LoopbackCluster]:
    loopback = new_cluster(tmp_path, 3)
    try:
        yield loopback
    finally:
        loopback.kill_everything()


@pytest.fixture
def cluster5(tmp_path: Path) -> Iterator[LoopbackCluster]:
    loopback = new_cluster(tmp_path, 5)
    try:
        yield loopback
    finally:
        loopback.kill_everything()


async def start(
    cluster: LoopbackCluster, *, session_timeout_ms: int, min_isr: int, more: Sequence[str] = ()
) -> None:
    await in_thread(
        cluster.start,
        *replication_overrides(session_timeout_ms=session_timeout_ms, min_insync_replicas=min_isr),
        *more,
    )


async def new_topic(
    cluster: LoopbackCluster,
    brokers: Brokers,
    name: str,
    replicas: list[int],
    **configs: str,
) -> m.FetchPartition:
    """Create `name` on `replicas` and wait until its preferred leader leads a full ISR, as
    every replica itself reports it.

    Not just the first node to answer Metadata: it is not always a replica, and a replica
    that has not yet replayed the topic answers a produce with UNKNOWN_TOPIC_OR_PARTITION. A
    broker answers Metadata from the image its replica manager has already acted on, so asking
    each replica is enough."""
    topic_id = await in_thread(create_topic, cluster, name, replicas, configs)
    for node_id in replicas:
        info, _ = await brokers.wait_isr(name, replicas, 20, ask=[node_id])
        assert info.leader == replicas[0], f"{name}: expected leader {replicas[0]}, got {info}"
    return m.FetchPartition(name, 0, 0, topic_id=topic_id)


async def kill_all_and_read(
    cluster: LoopbackCluster, topic: str, order: list[int], high_watermark: int, scratch: Path
) -> list[Replica]:
    """Kill every node, then check the replicas' files: identical below the high watermark."""
    await in_thread(cluster.kill_everything)
    replicas = read_replicas(cluster, order, topic, scratch)
    assert_identical(replicas, high_watermark, topic)
    return replicas


# --- kill -9 of the leader ---------------------------------------------------------------------


@pytest.mark.asyncio
async def test_kill_9_of_the_leader_loses_no_acknowledged_record(
    cluster3: LoopbackCluster, tmp_path: Path
) -> None:
    cluster = cluster3
    await start(cluster, session_timeout_ms=SHORT_SESSION_TIMEOUT_MS, min_isr=2)
    order = await placement(cluster, 3)
    old = order[0]
    async with Brokers(cluster) as brokers:
        await new_topic(cluster, brokers, "stream", order)
        before = await brokers.partition("stream")
        async with ProduceStream(brokers, "stream") as stream:
            await stream.wait_for_acks(
                30, 20, f"from leader {old}", where=lambda a: a.leader_id == old
            )
            cluster.signal(old, signal.SIGKILL)
            brokers.down.add(old)
            killed_at = time.monotonic()
            first = await stream.wait_for_acks(
                1,
                SHORT_SESSION_TIMEOUT_MS / 1000 + 15,
                "from a new leader",
                after=killed_at,
                where=lambda a: a.leader_id != old,
            )
            failover_s = first.at - killed_at
            # Asked of the broker that acknowledged: it has replayed its own election. Another
            # broker's metadata may still be a moment behind the controller's.
            after = await brokers.partition("stream", ask=[first.leader_id])
            assert after.leader in others(order, old) and old not in after.isr, after
            assert after.leader_epoch > before.leader_epoch, (before, after)
            new = after.leader
            await stream.wait_for_acks(30, 10, "after the failover", after=first.at)

            # Everything acknowledged so far, before and after the kill, is readable.
            acked = list(stream.acks)
            consumed = await brokers.read_committed(new, "stream")
            assert_acked(acked, consumed.values, f"a consumer fetch from the new leader {new}")

            # The new leader fences requests of the old epoch and refuses future ones.
            for epoch, expected in (
                (before.leader_epoch, "FENCED_LEADER_EPOCH"),
                (after.leader_epoch + 1, "UNKNOWN_LEADER_EPOCH"),
            ):
                result = await brokers.fetch(
                    new, m.FetchPartition("stream", 0, 0, current_leader_epoch=epoch)
                )
                assert error_code(result.error) == expected, (epoch, result)

            restarted = await in_thread(cluster.cli, "restart", str(old))
            assert restarted.returncode == 0, restarted.stderr
            brokers.down.discard(old)
            _, rejoined_at = await brokers.wait_isr("stream", order, REJOIN_S)
            await stream.wait_for_acks(20, 10, "after the rejoin", after=rejoined_at)
        acks = stream.acks
        print(
            f"kill -9 of leader {old}: node {new} acknowledged {failover_s * 1000:.0f} ms later; "
            f"{len(acks)} acks, outcomes {dict(stream.outcomes)}"
        )
        assert_unique_offsets(acks)
        leader = (await brokers.partition("stream")).leader
        assert leader is not None
        high_watermark = await brokers.high_watermark(leader, "stream")
        assert high_watermark > max(a.offset for a in acks)
        consumed = await brokers.read_committed(leader, "stream")
        assert_acked(acks, consumed.values, f"a consumer fetch from leader {leader}")
    for replica in await kill_all_and_read(cluster, "stream", order, high_watermark, tmp_path):
        assert_acked(acks, replica.values, f"node {replica.node_id}'s log files")


# --- SIGSTOP of a follower ---------------------------------------------------------------------


@pytest.mark.asyncio
async def test_sigstop_of_a_follower_shrinks_the_isr_and_sigcont_rejoins_it(
    cluster3: LoopbackCluster, tmp_path: Path
) -> None:
    cluster = cluster3
    await start(cluster, session_timeout_ms=KAFKA_SESSION_TIMEOUT_MS, min_isr=2)
    order = await placement(cluster, 3)
    leader, stopped = order[0], order[1]
    async with Brokers(cluster) as brokers:
        await new_topic(cluster, brokers, "stream", order)
        async with ProduceStream(brokers, "stream") as stream:
            await stream.wait_for_acks(20, 20, "before the stop")
            cluster.signal(stopped, signal.SIGSTOP)
            brokers.down.add(stopped)
            stopped_at = time.monotonic()
            try:
                shrunk, shrunk_at = await brokers.wait_isr(
                    "stream", others(order, stopped), ISR_SHRINK_S
                )
                unfenced = await brokers.unfenced("stream")
                await stream.wait_for_acks(20, 10, "with the follower stopped", after=shrunk_at)
            finally:
                cluster.signal(stopped, signal.SIGCONT)
            brokers.down.discard(stopped)
            continued_at = time.monotonic()
            rejoined, rejoined_at = await brokers.wait_isr("stream", order, REJOIN_S)
            await stream.wait_for_acks(20, 10, "after the rejoin", after=rejoined_at)
        acks = stream.acks
        print(
            f"SIGSTOP of follower {stopped}: out of the ISR {shrunk_at - stopped_at:.2f} s "
            f"later, back {rejoined_at - continued_at:.2f} s after SIGCONT; {len(acks)} acks"
        )
        assert shrunk.leader == leader and rejoined.leader == leader, (shrunk, rejoined)
        assert stopped in unfenced, (
            f"broker {stopped} was fenced ({unfenced} unfenced) when it left the ISR: the "
            "controller's session expiry removed it, not the leader's lag check"
        )
        assert shrunk_at - stopped_at >= LAG_S - 0.2, (
            f"the ISR shrank {shrunk_at - stopped_at:.2f} s after the stop, before "
            f"replica.lag.time.max.ms ({LAG_S:g} s)"
        )
        # acks=all waits for every ISR member: nothing is acknowledged from a moment after
        # the stop until the lag time has passed at the least.
        stalled = [a for a in acks if stopped_at + 0.5 < a.at < stopped_at + LAG_S - 0.1]
        assert not stalled, f"acknowledged while a stopped follower was in the ISR: {stalled}"
        assert_unique_offsets(acks)
        high_watermark = await brokers.high_watermark(leader, "stream")
        assert high_watermark > max(a.offset for a in acks)
        consumed = await brokers.read_committed(leader, "stream")
        assert_acked(acks, consumed.values, f"a consumer fetch from leader {leader}")
    for replica in await kill_all_and_read(cluster, "stream", order, high_watermark, tmp_path):
        assert_acked(acks, replica.values, f"node {replica.node_id}'s log files")


# --- two followers stopped: min.insync.replicas ------------------------------------------------


@pytest.mark.asyncio
async def test_two_stopped_followers_make_acks_all_fail_with_not_enough_replicas(
    cluster5: LoopbackCluster, tmp_path: Path
) -> None:
    """docs/design/replication.md#scenarios, S7 and S5 T1, with min.insync.replicas = 2 (this
    cluster's static broker setting). An acks=all produce appended just as both followers stop times
    out (the ISR shrinks below the minimum before the high watermark reaches it); acks=all is then
    refused with NOT_ENOUGH_REPLICAS before any append; acks=1 appends, but the high watermark waits
    for the followers."""
    cluster = cluster5
    await start(cluster, session_timeout_ms=KAFKA_SESSION_TIMEOUT_MS, min_isr=2)
    order = await placement(cluster, 3)
    leader, followers = order[0], order[1:]
    async with Brokers(cluster) as brokers:
        await new_topic(cluster, brokers, "gated", order)
        acks = await produce_values(
            brokers, leader, "gated", [f"ok-{i}".encode() for i in range(10)]
        )
        for follower in followers:
            cluster.signal(follower, signal.SIGSTOP)
        brokers.down.update(followers)
        try:
            # Followers as far as the leader's log end stay in sync however long they are
            # silent (docs/design/replication.md#caught-up-time): this append moves the log end, and
            # stays uncommitted.
            raced = asyncio.create_task(
                brokers.produce(leader, "gated", one_record(b"raced"), timeout_ms=RACED_TIMEOUT_MS)
            )
            # Asked of the leader: the produces below are refused only once the leader itself
            # knows its ISR shrank; another broker may replay the change before the leader
            # has the controller's answer.
            await brokers.wait_isr("gated", [leader], ISR_SHRINK_S, ask=[leader])
            unfenced = await brokers.unfenced("gated")
            timed_out = await raced
            refused = []
            for i in range(3):
                value = f"refused-{i}".encode()
                result = await brokers.produce(leader, "gated", one_record(value))
                refused.append(value)
                assert error_code(result.error) == "NOT_ENOUGH_REPLICAS", result
                assert "gated-0" in str(result.error), result.error
            unsafe = await produce_values(brokers, leader, "gated", [b"unsafe"], acks=ACKS_LEADER)
            assert [a.offset for a in unsafe] == [11], unsafe
            # The high watermark does not move with the ISR below min.insync.replicas
            # (docs/design/replication.md#high-watermark).
            for _ in range(2):
                assert await brokers.high_watermark(leader, "gated") == 10
                result = await brokers.fetch(leader, m.FetchPartition("gated", 0, 10))
                assert result.error is None and result.records == b"", result
                await asyncio.sleep(LAG_S / 2)
        finally:
            for follower in followers:
                cluster.signal(follower, signal.SIGCONT)
        brokers.down.clear()
        assert error_code(timed_out.error) == "REQUEST_TIMED_OUT", timed_out
        assert set(followers) <= unfenced, f"followers fenced before the leader shrank: {unfenced}"
        await brokers.wait_isr("gated", order, REJOIN_S)
        acks += await produce_values(brokers, leader, "gated", [b"ok-again"])
        assert acks[-1].offset == 12, acks[-1]
        high_watermark = await brokers.high_watermark(leader, "gated")
        assert high_watermark == 13
        # The timed-out record was appended all the same (at 10), as Kafka's would be.
        written = [*acks, *unsafe, Ack(10, b"raced", leader, 0.0)]
        consumed = await brokers.read_committed(leader, "gated")
        assert_acked(written, consumed.values, f"a consumer fetch from leader {leader}")
    for replica in await kill_all_and_read(cluster, "gated", order, high_watermark, tmp_path):
        assert_acked(written, replica.values, f"node {replica.node_id}'s log files")
        appended = set(replica.values.values())
        assert not appended & set(refused), f"node {replica.node_id} holds refused records"


# --- unclean leader election -------------------------------------------------------------------


@pytest.mark.asyncio
async def test_unclean_leader_election_off_and_on(
    cluster5: LoopbackCluster, tmp_path: Path
) -> None:
    """docs/design/replication.md#scenarios, S6 on two topics placed alike, min.insync.replicas=1:
    the followers are stopped until the leader alone holds the last records, the leader is killed,
    the followers continue."""
    cluster = cluster5
    await start(cluster, session_timeout_ms=SHORT_SESSION_TIMEOUT_MS, min_isr=1)
    order = await placement(cluster, 3)
    old, followers = order[0], order[1:]
    topics = {"clean": "false", "unclean": "true"}
    async with Brokers(cluster) as brokers:
        epochs = {}
        for topic, unclean in topics.items():
            await new_topic(
                cluster, brokers, topic, order, **{"unclean.leader.election.enable": unclean}
            )
            epochs[topic] = (await brokers.partition(topic)).leader_epoch
        # Phase A: on all three replicas. Phase B: on the leader alone, acknowledged.
        replicated = {
            t: await produce_values(brokers, old, t, [f"a-{i}".encode() for i in range(10)])
            for t in topics
        }
        for follower in followers:
            cluster.signal(follower, signal.SIGSTOP)
        brokers.down.update(followers)
        try:
            for topic in topics:
                await brokers.wait_isr(topic, [old], ISR_SHRINK_S)
            alone = {
                t: await produce_values(brokers, old, t, [f"b-{i}".encode() for i in range(10)])
                for t in topics
            }
            # Killed while the followers are stopped, so they cannot catch up first.
            cluster.signal(old, signal.SIGKILL)
        finally:
            for follower in followers:
                cluster.signal(follower, signal.SIGCONT)
        brokers.down = {old}
        divergence = len(replicated["unclean"])
        assert [a.offset for a in alone["unclean"]] == list(range(divergence, 2 * divergence))

        # unclean.leader.election.enable=true: a stale follower leads once the leader is fenced.
        elected, _ = await brokers.wait_partition(
            "unclean",
            lambda p: p.leader in followers,
            SHORT_SESSION_TIMEOUT_MS / 1000 + 15,
            f"a leader among {followers}",
        )
        new = elected.leader
        assert new is not None and elected.leader_epoch > epochs["unclean"], elected
        # The documented loss starts at the new leader's log end: where the old epoch ends there.
        request = m.OffsetsForLeaderEpochRequest(
            (m.OffsetForLeaderPartition("unclean", 0, epochs["unclean"]),)
        )
        answers: list[m.OffsetForLeaderPartitionResult] = []

        async def new_leader_answers() -> bool:
            # The broker a metadata answer names may not have replayed its own election yet
            # (it was resumed from SIGSTOP moments ago): NOT_LEADER_OR_FOLLOWER until it has.
            answer = await brokers.client(new).offsets_for_leader_epoch(request)
            answers[:] = answer.partitions
            return not isinstance(answers[0].error, NotLeaderOrFollowerError)

        await wait_until(new_leader_answers, 15, f"broker {new} to lead", seen=lambda: answers)
        (ended,) = answers
        assert ended.error is None and ended.end_offset == divergence, ended
        rewritten = await produce_values(
            brokers, new, "unclean", [f"c-{i}".encode() for i in range(5)]
        )
        assert rewritten[0].offset == divergence, rewritten

        # unclean.leader.election.enable=false: offline while its last ISR member is down.
        for _ in range(2):
            clean = await brokers.partition("clean")
            assert clean.leader is None and list(clean.isr) == [old], clean
            for follower in followers:
                result = await brokers.produce(follower, "clean", one_record(b"nowhere"))
                assert error_code(result.error) == "NOT_LEADER_OR_FOLLOWER", (follower, result)
            await asyncio.sleep(1)

        restarted = await in_thread(cluster.cli, "restart", str(old))
        assert restarted.returncode == 0, restarted.stderr
        brokers.down.clear()
        back, _ = await brokers.wait_isr("clean", order, REJOIN_S)
        assert back.leader == old, back
        await brokers.wait_isr("unclean", order, REJOIN_S)
        high_watermarks = {}
        for topic in topics:
            leader = (await brokers.partition(topic)).leader
            assert leader is not None
            high_watermarks[topic] = await brokers.high_watermark(leader, topic)
        clean_acks = replicated["clean"] + alone["clean"]
        consumed = await brokers.read_committed(old, "clean")
        assert_acked(clean_acks, consumed.values, "clean: a consumer fetch from its old leader")
        consumed = await brokers.read_committed(new, "unclean")
        survivors = replicated["unclean"] + rewritten
        assert_acked(survivors, consumed.values, f"unclean: a consumer fetch from leader {new}")
        assert high_watermarks["unclean"] == divergence + len(rewritten), high_watermarks

    await in_thread(cluster.kill_everything)
    for replica in read_replicas(cluster, order, "clean", tmp_path / "clean"):
        assert_acked(clean_acks, replica.values, f"clean: node {replica.node_id}'s log files")
    assert_identical(
        read_replicas(cluster, order, "clean", tmp_path / "clean-again"),
        high_watermarks["clean"],
        "clean",
    )
    unclean = read_replicas(cluster, order, "unclean", tmp_path / "unclean")
    assert_identical(unclean, high_watermarks["unclean"], "unclean")
    for replica in unclean:
        assert_acked(survivors, replica.values, f"unclean: node {replica.node_id}'s log files")
        lost = [a for a in alone["unclean"] if replica.values.get(a.offset) != a.value]
        assert lost == alone["unclean"], (
            f"unclean: node {replica.node_id} should have lost exactly the {len(alone['unclean'])}"
            f" records acknowledged by the old leader alone (offsets >= {divergence}); lost "
            f"{[a.offset for a in lost]}"
        )
        assert replica.log_end_offset == divergence + len(rewritten), replica.log_end_offset
        assert replica.leader_epochs == unclean[0].leader_epochs, [r.leader_epochs for r in unclean]


# --- error paths -------------------------------------------------------------------------------


def send_raw_garbage(host: str, port: int) -> None:
    """Bytes that are neither HTTP/2 nor a Kafka request, straight to the listener; read until it
    hangs up."""
    with socket.create_connection((host, port), timeout=5) as raw:
        raw.sendall(b"GET / HTTP/1.0\r\n\r\n" + bytes(range(256)) * 64)
        with contextlib.suppress(OSError):
            while raw.recv(4096):
                pass


Result = m.ProducePartitionResult | m.FetchPartitionResult | m.ListOffsetsPartitionResult


@dataclass
class Findings:
    """Every error path is tried and every mismatch reported together, not the first alone."""

    problems: list[str] = field(default_factory=list)
    checked: int = 0

    def expect(self, result: Result, name: str, where: str) -> None:
        """`result` carries the error `name`, and its message names the topic-partition."""
        self.checked += 1
        named = f"{result.topic}-{result.partition}"
        if error_code(result.error) != name:
            self.problems.append(f"{where}: expected {name}, got {result}")
        elif (
            # Kafka's Produce answer carries the broker's message; Fetch's and ListOffsets'
            # carry the code alone.
            isinstance(result, m.ProducePartitionResult)
            and result.error is not None
            and named not in str(result.error)
        ):
            self.problems.append(
                f"{where}: the {name} message does not name {named}: {result.error}"
            )

    async def connection_closed(self, call: Awaitable[object], where: str) -> None:
        """The broker closes the connection instead of answering (a request it refuses as a
        whole, as Kafka's broker does): the call fails with NetworkError."""
        self.checked += 1
        try:
            answer = await call
        except NetworkError:
            return
        except (KafkaError, OSError) as exc:
            self.problems.append(f"{where}: expected NetworkError, got {exc!r}")
            return
        self.problems.append(f"{where}: expected NetworkError, got an answer: {answer!r:.300}")


@pytest.mark.asyncio
async def test_every_error_path_answers_its_error_code_and_no_process_dies(
    cluster3: LoopbackCluster,
) -> None:
    cluster = cluster3
    await start(
        cluster,
        session_timeout_ms=KAFKA_SESSION_TIMEOUT_MS,
        min_isr=2,
        more=overrides(socket_request_max_bytes=REQUEST_BYTES_MAX),
    )
    pids = sorted(cluster.node_pids())
    order = await placement(cluster, 3)
    leader, follower = order[0], order[1]
    found = Findings()
    async with Brokers(cluster) as brokers:
        entry = await new_topic(cluster, brokers, "errors", order)
        await new_topic(cluster, brokers, "tiny-batches", order, **{"max.message.bytes": "1000"})
        await new_topic(cluster, brokers, "tiny-segments", order, **{"segment.bytes": "1000"})
        info = await brokers.partition("errors")
        good = one_record(b"good")

        async def produce(
            where: str, name: str, topic: str, records: bytes, *, node: int = leader, **kw: int
        ) -> m.ProducePartitionResult:
            result = await brokers.produce(node, topic, records, **kw)
            found.expect(result, name, f"produce {where}")
            return result

        def idempotent(value: bytes, producer_epoch: int, base_sequence: int) -> bytes:
            return one_record(
                value, producer_id=4242, producer_epoch=producer_epoch, base_sequence=base_sequence
            )

        # --- Produce ---
        await produce("to an unknown topic", "UNKNOWN_TOPIC_OR_PARTITION", "nope", good)
        await produce(
            "to partition 7 of 1", "UNKNOWN_TOPIC_OR_PARTITION", "errors", good, partition=7
        )
        await produce("to an illegal topic name", "INVALID_TOPIC_EXCEPTION", "bad name!", good)
        moved = await produce(
            "to a follower", "NOT_LEADER_OR_FOLLOWER", "errors", good, node=follower
        )
        if moved.current_leader is None or moved.current_leader.leader_id != leader:
            found.problems.append(f"produce to a follower: current leader not {leader}: {moved}")
        await produce("with acks=2", "INVALID_REQUIRED_ACKS", "errors", good, acks=2)
        await produce("of bytes that are no batch", "CORRUPT_MESSAGE", "errors", b"garbage" * 20)
        flipped = bytearray(good)
        flipped[-1] ^= 0xFF  # a record byte: the CRC no longer matches
        await produce("with a bad CRC", "CORRUPT_MESSAGE", "errors", bytes(flipped))
        await produce(
            "with base offset 5", "INVALID_RECORD", "errors", one_record(b"x", base_offset=5)
        )
        await produce(
            "of a control batch", "INVALID_RECORD", "errors", one_record(b"x", is_control=True)
        )
        await produce(
            "of an idempotent batch without a sequence",
            "INVALID_RECORD",
            "errors",
            one_record(b"x", producer_id=7, producer_epoch=0, base_sequence=-1),
        )
        big = one_record(b"x" * 2000)
        await produce("over max.message.bytes", "MESSAGE_TOO_LARGE", "tiny-batches", big)
        await produce("over segment.bytes", "RECORD_LIST_TOO_LARGE", "tiny-segments", big)
        # An idempotent producer: a duplicate is answered with the first append's offset (and
        # not appended again), a sequence gap and an older producer epoch are refused.
        first = await produce("of sequence 0", "NONE", "errors", idempotent(b"p0", 0, 0))
        again = await produce("of sequence 0 again", "NONE", "errors", idempotent(b"p0", 0, 0))
        if again.base_offset != first.base_offset:
            found.problems.append(f"a duplicate batch was appended again: {first} then {again}")
        await produce(
            "with a sequence gap", "OUT_OF_ORDER_SEQUENCE_NUMBER", "errors", idempotent(b"p5", 0, 5)
        )
        await produce("of a new producer epoch", "NONE", "errors", idempotent(b"e1", 1, 0))
        await produce(
            "with an older producer epoch",
            "INVALID_PRODUCER_EPOCH",
            "errors",
            idempotent(b"e0", 0, 1),
        )

        # --- Fetch, ListOffsets ---
        async def fetch(
            where: str, name: str, fetched: m.FetchPartition, *, node: int = leader, **kw: int
        ) -> None:
            found.expect(await brokers.fetch(node, fetched, **kw), name, f"fetch {where}")

        log_end = await brokers.high_watermark(leader, "errors")
        await fetch(
            "of an unknown topic", "UNKNOWN_TOPIC_OR_PARTITION", m.FetchPartition("nope", 0, 0)
        )
        await fetch("as a consumer from a follower", "NOT_LEADER_OR_FOLLOWER", entry, node=follower)
        await fetch(
            "past the log end", "OFFSET_OUT_OF_RANGE", m.FetchPartition("errors", 0, log_end + 100)
        )
        await fetch("below the log start", "OFFSET_OUT_OF_RANGE", m.FetchPartition("errors", 0, -5))
        await fetch(
            "with a future leader epoch",
            "UNKNOWN_LEADER_EPOCH",
            m.FetchPartition("errors", 0, 0, current_leader_epoch=info.leader_epoch + 1),
        )
        for node, topic, name in (
            (leader, "nope", "UNKNOWN_TOPIC_OR_PARTITION"),
            (follower, "errors", "NOT_LEADER_OR_FOLLOWER"),
        ):
            request = m.ListOffsetsRequest((m.ListOffsetsPartition(topic, 0, m.LATEST_TIMESTAMP),))
            (listed,) = (await brokers.client(node).list_offsets(request)).partitions
            found.expect(listed, name, f"list offsets of {topic} on node {node}")

        # --- Garbage and oversize requests: the connection closes, the node lives on ---
        await found.connection_closed(
            brokers.produce(leader, "errors", one_record(b"x" * (REQUEST_BYTES_MAX + 1024))),
            "a produce over socket.request.max.bytes",
        )
        brokers.client(leader).reconnect()
        leader_node = cluster.layout.node(leader)
        internal = leader_node.listeners.get("BROKER", leader_node.controller_address)
        for address in (brokers.addresses[leader], internal):
            host, port = address.rsplit(":", 1)
            await in_thread(send_raw_garbage, host, int(port))

        # Nothing died and the partition still works.
        assert sorted(cluster.node_pids()) == pids, "a node process died"
        ok = await produce_values(brokers, leader, "errors", [b"still-fine"])
        consumed = await brokers.read_committed(leader, "errors")
        assert_acked(ok, consumed.values, f"a consumer fetch from leader {leader}")
    for node_id in range(1, 4):
        text = Path(cluster.layout.node(node_id).log_path).read_text()
        if "Traceback" in text or "CRITICAL" in text:
            found.problems.append(f"node {node_id} logged a traceback:\n{text[-3000:]}")
    print(f"{found.checked} error paths checked")
    assert not found.problems, "\n".join(
        [f"{len(found.problems)} of {found.checked} error paths are wrong:", *found.problems]
    )
