"""Network partitions between live processes (issue #6): docs/design/reliability.md, D1-D4 and D7.

Three (D3: five) combined broker+controller nodes run as real processes (`replog cluster
start`), each
behind a proxy that can cut links pair by pair: Raft, heartbeats to the active controller and
replica fetches all cross the proxies, and a cut link carries no byte either way until it
heals (tests/cluster/proxied_cluster.py, tests/cluster/socket_owner.py). The test's clients
reach every node, the isolated one too, except in D4, which cuts them alone.

- D1, the isolated leader (Jepsen's 2013 Kafka finding): a partition's leader is cut from both
  other nodes while an idempotent acks=all producer and a consumer run through the public
  client, and while the test sends acks=all and acks=1 batches straight to the cut-off leader.
  The majority fences it (no heartbeats) and elects another ISR member; the old leader, unable
  to shrink its ISR without the controller, keeps believing it leads. What must hold: it
  acknowledges no acks=all batch (each waits out its timeout: REQUEST_TIMED_OUT); the acks=1
  batches it acknowledges are lost when the partition heals (acks=1 promises nothing more;
  they are the control that shows it did lead on, cut off); the producer's acks continue on
  the new leader while the partition lasts; after healing every acknowledged record is in the
  log exactly once at its acknowledged offset, the consumer was given exactly the log, and
  the three replicas' files are identical below the high watermark. Run twice: with the
  leader an ordinary voter, and with the leader also the metadata quorum's leader (the
  controller moves too).
- D2, flapping partitions: a seeded sequence of isolations of random nodes, some shorter than
  the broker session timeout (the node stays registered; ISRs shrink and expand) and some
  longer (it is fenced and its leaderships move), under the same producer and consumer on
  three partitions. After each heal the producer must make progress again, and by the end
  some leadership must have moved; at the end the same exactly-once, consumer and replica
  checks hold for every partition.
  `PARTITION_SEED=S` replays a sequence (timing still varies: these are real processes).
- D4, a client cut off from one leader: the test's own connections to one partition's leader
  are cut for 8 s while the nodes stay connected; calls time out and are retried on the cut
  connection, and the originals and the retries all reach the leader after the heal. The
  same exactly-once, consumer and replica checks.
- D7, a one-way cut: a follower's fetches reach its leader, the answers wait; the ISR must
  shrink, commits go on, and the late answers do no harm after the heal.
- D3, a majorities ring on five nodes: each node reaches only its two neighbours; the quorum
  keeps its leader and epoch throughout and after the heal (see the test).

How the checks can fail: a lost or duplicated acknowledged record, or one at another offset,
fails `assert_exactly_once_in_order`; a record the consumer was given above the high watermark
and then truncated fails the consumer-equals-log check; an acks=all acknowledgement from the
isolated leader fails D1 at once; a truncation that left a replica divergent fails
`assert_identical` on the files. Each test also checks that its fault happened (a new leader
was elected, the isolated node led the partition and, in D1, acknowledged acks=1 batches;
the proxies had named connections from every node), else it would prove nothing.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from cluster_helpers import LeaderWatch
from fault_traffic import (
    ACKS,
    all_nodes,
    assert_node_links_identified,
    check_logs,
    drain,
    fault_cluster,
    place_topic,
    ready_for_the_fault,
    traffic,
)
from proxied_cluster import NODES, ProxiedCluster
from replication_helpers import ACKS_ALL, ACKS_LEADER, Brokers, error_code, in_thread, one_record

from replog.admin.quorum_description import QuorumDescription

pytestmark = pytest.mark.slow

PROBE_EVERY_S = 0.1
PROBE_TIMEOUT_MS = 1500  # how long an acks=all probe may wait for the ISR


@pytest.fixture
def network(tmp_path: Path) -> Iterator[ProxiedCluster]:
    with fault_cluster(tmp_path / "cluster") as cluster:
        yield cluster


# --- D1: the isolated leader ---------------------------------------------------------------------


@dataclass
class Probes:
    """Batches sent straight to the isolated leader, and what it answered."""

    acks_all: list[str] = field(default_factory=list)  # error names ("NONE" = acknowledged)
    acks_one_acked: dict[bytes, int] = field(default_factory=dict)  # value -> offset
    acks_one_refused: list[str] = field(default_factory=list)


async def probe(
    brokers: Brokers, node_id: int, topic: str, probes: Probes, stop: asyncio.Event
) -> None:
    """Every PROBE_EVERY_S until `stop`: one acks=all and one acks=1 batch to `node_id`."""

    async def acks_all(value: bytes) -> None:
        result = await brokers.produce(
            node_id, topic, one_record(value), acks=ACKS_ALL, timeout_ms=PROBE_TIMEOUT_MS
        )
        probes.acks_all.append(error_code(result.error))

    async def acks_one(value: bytes) -> None:
        result = await brokers.produce(node_id, topic, one_record(value), acks=ACKS_LEADER)
        if result.error is None:
            probes.acks_one_acked[value] = result.base_offset
        else:
            probes.acks_one_refused.append(error_code(result.error))

    calls = []
    number = 0
    while not stop.is_set():
        calls.append(asyncio.create_task(acks_all(b"probe-all-%d" % number)))
        calls.append(asyncio.create_task(acks_one(b"probe-one-%d" % number)))
        number += 1
        await asyncio.sleep(PROBE_EVERY_S)
    await asyncio.gather(*calls)


@pytest.mark.asyncio
@pytest.mark.parametrize("quorum_leader_too", [False, True], ids=["voter", "quorum-leader"])
async def test_an_isolated_leader_acknowledges_nothing_that_is_then_lost(
    network: ProxiedCluster, quorum_leader_too: bool, tmp_path: Path
) -> None:
    topic = "d1"
    quorum_leader = await in_thread(network.quorum_leader)
    leader = quorum_leader if quorum_leader_too else min(set(all_nodes()) - {quorum_leader})
    majority = [n for n in all_nodes() if n != leader]
    await place_topic(network, topic, [leader, *majority])
    probes = Probes()
    stop_probes = asyncio.Event()
    async with Brokers(network.loopback) as brokers:
        with traffic(network, topic, 1) as (stream, tail):
            # What the test means to cut off: the partition's leader (and the quorum's).
            await ready_for_the_fault(
                network, brokers, stream, topic, leader, "before the partition"
            )
            if quorum_leader_too:
                assert await in_thread(network.quorum_leader) == leader
            isolated_at = time.monotonic()
            network.isolate(leader)
            probing = asyncio.create_task(probe(brokers, leader, topic, probes, stop_probes))
            try:
                elected, elected_at = await brokers.wait_partition(
                    topic,
                    lambda p: p.leader not in (None, leader),
                    30,
                    f"a new leader on the majority side {majority}",
                    ask=majority,
                )
                acks_before = len(stream.acked)
                await in_thread(stream.wait_acks, ACKS, 30, "from the new leader")
                acks_during = len(stream.acked) - acks_before
            finally:
                stop_probes.set()
                await probing  # every probe answered while the partition still held
                healed_at = time.monotonic()
                network.heal()
            _, rejoined_at = await brokers.wait_isr(topic, all_nodes(), 30, ask=majority)
            await in_thread(stream.wait_acks, ACKS, 30, "after healing")
            log = await drain(network, stream, tail)

    assert elected.leader != leader
    assert probes.acks_all, "no acks=all probe reached the isolated leader"
    acknowledged = probes.acks_all.count("NONE")
    assert acknowledged == 0, (
        f"the isolated leader {leader} acknowledged {acknowledged} acks=all batches of "
        f"{len(probes.acks_all)}: {probes.acks_all}"
    )
    # It waits for followers that never come: its ISR cannot shrink without the controller
    # (NOT_ENOUGH_REPLICAS would mean it had shrunk the ISR on its own).
    assert set(probes.acks_all) == {"REQUEST_TIMED_OUT"}, probes.acks_all
    # The control: cut off, it went on leading (acks=1 promises nothing more than that)...
    assert probes.acks_one_acked, (
        f"the isolated leader {leader} acknowledged no acks=1 batch ({probes.acks_one_refused}): "
        "it was not cut off, or not leading"
    )
    # ... and what it appended alone is gone, truncated when it followed the new leader.
    final = {value for _, value in log[0]}
    survived = set(probes.acks_one_acked) & final
    assert not survived, f"acks=1 batches of the isolated leader in the final log: {survived}"
    checked = await in_thread(check_logs, network, stream, tail, log, topic, tmp_path / "replicas")
    print(
        f"D1 ({'quorum leader' if quorum_leader_too else 'voter'} {leader} isolated): new leader "
        f"{elected.leader} after {elected_at - isolated_at:.1f} s; {acks_during} acks=all acks "
        f"from it during the partition; probes to the isolated leader: "
        f"{len(probes.acks_all)} acks=all, none acknowledged ({sorted(set(probes.acks_all))}), "
        f"{len(probes.acks_one_acked)} acks=1 acknowledged and all lost on healing; back in the "
        f"ISR {rejoined_at - healed_at:.1f} s after healing; {checked} records checked"
    )


def leader_epochs(network: ProxiedCluster, topic: str) -> list[int]:
    """Each partition's leader epoch, as the active controller's metadata says."""
    with network.cluster.admin() as admin:
        (info,) = admin.metadata([topic]).topics
    return [p.leader_epoch for p in info.partitions]


# --- D2: flapping partitions ---------------------------------------------------------------------


ROUNDS = 6
SHORT_S = (0.5, 2.0)  # isolations shorter than the broker session timeout (3 s)
# Longer: the node is fenced and its leaderships move, also when it is the quorum's leader
# (a new one is elected first: 5.0-5.4 s from the cut to a new partition leader in D1).
LONG_S = (6.0, 8.0)


@pytest.mark.asyncio
async def test_flapping_partitions_lose_and_duplicate_nothing(
    network: ProxiedCluster, tmp_path: Path
) -> None:
    topic, partitions = "d2", 3
    seed = int(os.environ.get("PARTITION_SEED", random.randrange(1 << 32)))
    chosen = random.Random(seed)
    network.cluster.create_topic(topic, partitions, NODES)
    try:
        await flap(network, topic, partitions, chosen, tmp_path)
    except BaseException as exc:
        exc.add_note(f"replay the partitions with PARTITION_SEED={seed}")
        raise


async def flap(
    network: ProxiedCluster, topic: str, partitions: int, chosen: random.Random, scratch: Path
) -> None:
    rounds = []
    with traffic(network, topic, partitions) as (stream, tail):
        await in_thread(stream.wait_acks, ACKS, 30, "before the partitions")
        assert_node_links_identified(network)
        epochs_before = await in_thread(leader_epochs, network, topic)
        for number in range(ROUNDS):
            victim = chosen.choice(all_nodes())
            length_s = chosen.uniform(*(LONG_S if number % 2 else SHORT_S))
            network.isolate(victim)
            await asyncio.sleep(length_s)  # the length of the partition is the fault itself
            network.heal()
            healed_at = time.monotonic()
            await in_thread(stream.wait_acks, ACKS, 60, f"after healing round {number}")
            rounds.append(f"node {victim} {length_s:.1f} s (+{time.monotonic() - healed_at:.1f})")
        await in_thread(network.wait_healthy, [topic], 60)
        moved = sum(
            after - before
            for before, after in zip(
                epochs_before, await in_thread(leader_epochs, network, topic), strict=True
            )
        )
        # Non-vacuity: the long isolations fenced a leader, and its partitions moved.
        assert moved > 0, f"no leadership moved in {rounds}"
        log = await drain(network, stream, tail)
    checked = await in_thread(check_logs, network, stream, tail, log, topic, scratch / "replicas")
    print(
        f"D2: isolated {'; '.join(rounds)} (+ time to {ACKS} acks after healing); "
        f"{moved} leader elections; {checked} records checked"
    )


# --- D4: a client cut off from one leader ------------------------------------------------------


CLIENT_CUT_S = 8.0  # longer than the request timeout (3 s): calls time out and are retried


@pytest.mark.asyncio
async def test_a_client_cut_off_from_a_leader_neither_loses_nor_duplicates(
    network: ProxiedCluster, tmp_path: Path
) -> None:
    """The plan's D4: the test's own connections to one partition's leader are cut for
    CLIENT_CUT_S while the nodes stay connected. The producer's calls to it time out and its
    batches are retried on the same (cut) connection; what was sent reaches the leader only
    after the heal, the original requests with their retries (Redpanda #3039: duplicates).
    Exactly once, the consumer given exactly the log, identical replicas."""
    topic, partitions = "d4", 3
    network.cluster.create_topic(topic, partitions, NODES)
    with traffic(network, topic, partitions) as (stream, tail):
        await in_thread(stream.wait_acks, ACKS, 30, "before the cut")
        leader = network.leaders(topic)[0]
        assert leader is not None
        proxy = network.kafka_proxies[leader]  # where the clients reach it (cut_clients_from)
        held_before, retried_before = proxy.held_bytes, stream.producer.metrics()["batches_retried"]
        network.cut_clients_from(leader)
        await asyncio.sleep(CLIENT_CUT_S)  # the length of the cut is the fault itself
        network.heal()
        healed_at = time.monotonic()
        await in_thread(stream.wait_acks, ACKS, 60, "after the cut")
        resumed_s = time.monotonic() - healed_at
        held = proxy.held_bytes - held_before
        retried = stream.producer.metrics()["batches_retried"] - retried_before
        log = await drain(network, stream, tail)
    # Non-vacuity: the cut held requests (and fetches) that reached the leader only after it,
    # and the producer retried meanwhile.
    assert held > 0 and retried > 0, (held, retried)
    checked = await in_thread(check_logs, network, stream, tail, log, topic, tmp_path / "replicas")
    print(
        f"D4: the client cut from leader {leader} for {CLIENT_CUT_S:g} s: {held} bytes held, "
        f"{retried} batches retried; {ACKS} acks {resumed_s:.1f} s after the heal; {checked} "
        "records checked"
    )


# --- D7: a one-way cut ---------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_one_way_cut_shrinks_the_isr_and_late_answers_do_no_harm(
    network: ProxiedCluster, tmp_path: Path
) -> None:
    """The plan's D7: a follower's fetches still reach the leader, but the leader's answers
    to it wait (a one-way cut). The leader must drop it from the ISR (its fetch offset stops
    advancing) and go on committing with the other follower; after the heal the held answers
    arrive late, and the follower catches up and rejoins without harm: exactly once, the
    consumer given exactly the log, identical replicas."""
    topic = "d7"
    quorum_leader = await in_thread(network.quorum_leader)
    leader, follower = sorted(set(all_nodes()) - {quorum_leader})
    await place_topic(network, topic, [leader, follower, quorum_leader])
    async with Brokers(network.loopback) as brokers:
        with traffic(network, topic, 1) as (stream, tail):
            await in_thread(stream.wait_acks, ACKS, 30, "before the cut")
            assert (await brokers.partition(topic)).leader == leader
            proxy = network.proxies[leader]  # the follower's fetch stream's answers
            held_before = proxy.held_bytes
            cut_at = time.monotonic()
            network.cut_answers(leader, to=follower)
            try:
                _, shrunk_at = await brokers.wait_isr(topic, [leader, quorum_leader], 30)
                await in_thread(stream.wait_acks, ACKS, 30, "with the follower out of the ISR")
            finally:
                held = proxy.held_bytes - held_before
                healed_at = time.monotonic()
                network.heal()
            _, rejoined_at = await brokers.wait_isr(topic, all_nodes(), 30)
            await in_thread(stream.wait_acks, ACKS, 30, "after the heal")
            log = await drain(network, stream, tail)
    assert held > 0, "the cut held no answer"
    checked = await in_thread(check_logs, network, stream, tail, log, topic, tmp_path / "replicas")
    print(
        f"D7: answers from leader {leader} to follower {follower} held ({held} bytes); the ISR "
        f"shrank {shrunk_at - cut_at:.1f} s after the cut; the follower was back "
        f"{rejoined_at - healed_at:.1f} s after the heal; {checked} records checked"
    )


# --- D3: a majorities ring -----------------------------------------------------------------------


RING_NODES = 5
RING_S = 15.0  # past the election timeouts and the broker session timeout (3 s)
AFTER_HEAL_S = 5.0  # a healed voter has had time to try deposing the leader


@pytest.fixture
def ring_network(tmp_path: Path) -> Iterator[ProxiedCluster]:
    with fault_cluster(tmp_path / "cluster", nodes=RING_NODES) as cluster:
        yield cluster


def ring_cuts(nodes: list[int]) -> list[tuple[int, int]]:
    """Every pair of nodes that are not neighbours on the ring nodes[0], nodes[1], ...: each
    node keeps a majority (itself and its two neighbours), a different one for each."""
    count = len(nodes)
    return [
        (nodes[i], nodes[j])
        for i in range(count)
        for j in range(i + 1, count)
        if (j - i) % count not in (1, count - 1)
    ]


def assert_not_deposed(watch: LeaderWatch, before: QuorumDescription, when: str) -> None:
    """No two leaders in one quorum epoch, and none in an epoch after `before`'s."""
    watch.assert_no_split_brain()
    later = watch.leaders_after(before.leader_epoch)
    assert not later, (
        f"{when}: the quorum's leader {before.leader_id} (epoch {before.leader_epoch}) was "
        f"deposed: leaders by later epoch {later}"
    )


def fenced_brokers(network: ProxiedCluster) -> set[int]:
    """The brokers the active controller has fenced."""
    with network.cluster.admin() as admin:
        return {b.broker_id for b in admin.describe_cluster().brokers if b.fenced}


@pytest.mark.asyncio
async def test_a_majorities_ring_elects_no_second_leader_and_loses_nothing(
    ring_network: ProxiedCluster, tmp_path: Path
) -> None:
    """The plan's D3: five combined nodes (five voters), each linked to its two neighbours
    on a ring only, for RING_S. Every node still reaches a majority, none the same. The
    quorum's leader keeps its majority (its neighbours fetch from it); the two nodes that
    cannot reach it time out, but their pre-votes find no majority (the leader's neighbours
    still hear from it), so they start no quorum epoch: none while the ring lasts, none when
    it heals (the plan: pre-vote keeps a healed voter from deposing a healthy leader), and
    never two leaders in one epoch (every node's DescribeQuorum is polled throughout).
    Without pre-vote they would: their logs fall behind (the leader appends), so they cannot
    win, but a vote request in a higher epoch makes the leader's neighbours leave it. The
    brokers that cannot reach the active controller are fenced and their leaderships move;
    an acks=all producer and a consumer run throughout: after the heal, exactly once, the
    consumer given exactly the log, identical replicas on all five."""
    network = ring_network
    nodes = sorted(network.proxies)
    topic, partitions = "d3", 2
    network.cluster.create_topic(topic, partitions, len(nodes))
    watch = LeaderWatch(network.loopback.addresses)
    with traffic(network, topic, partitions) as (stream, tail), watch:
        await in_thread(stream.wait_acks, ACKS, 60, "before the ring")
        assert_node_links_identified(network)
        before = await in_thread(network.loopback.wait_for_leader)
        cuts = ring_cuts(nodes)
        acks_before = len(stream.acked)
        network.cut_links(cuts)
        await asyncio.sleep(RING_S)  # the length of the fault is the fault itself
        acks_during = len(stream.acked) - acks_before
        fenced = await in_thread(fenced_brokers, network)
        # Non-vacuity: the ring held; the nodes that could not reach the active controller
        # (the quorum's leader) were fenced, and only they.
        cut_off = {n for n in nodes if tuple(sorted((before.leader_id, n))) in cuts}
        assert fenced == cut_off, f"fenced at the end of the ring: {fenced}, cut off: {cut_off}"
        assert_not_deposed(watch, before, "while the ring lasted")
        network.heal()
        await asyncio.sleep(AFTER_HEAL_S)  # time for a healed voter to try
        assert_not_deposed(watch, before, "after the heal")
        await in_thread(stream.wait_acks, ACKS, 60, "after healing")
        await in_thread(network.wait_healthy, [topic], 60)
        log = await drain(network, stream, tail)
    assert_not_deposed(watch, before, "at the end")
    assert watch.polls > 0 and watch.claims, "no node answered DescribeQuorum"
    checked = await in_thread(check_logs, network, stream, tail, log, topic, tmp_path / "replicas")
    print(
        f"D3: ring {nodes} for {RING_S:g} s around quorum leader {before.leader_id} (epoch "
        f"{before.leader_epoch}): no new epoch, no split brain in {watch.polls} polls; "
        f"brokers {sorted(fenced)} fenced; {acks_during} acks during the ring; {checked} records "
        "checked"
    )
