"""The data-loss and divergence scenarios of docs/design/replication.md#scenarios (S1-S9), run on
real ReplicaManagers over real logs, with `scenario_harness.Cluster` as controller, network and
clock. Each test follows the scenario's steps and ends with the two invariants: every record
acknowledged under acks=all is at its offset on the leader and every ISR member (minus the losses
the design note documents, named where they happen), and live replicas are byte-identical below the
smallest log end offset. Epoch numbers can differ from the note's by the bumps the harness's
controller makes on fencing; the tests assert the relations the note states.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest
from scenario_harness import Cluster, active_segment_path

from replog.errors import (
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetNotAvailableError,
    OffsetOutOfRangeError,
    RequestTimedOutError,
)
from replog.record import COMPRESSION_GZIP, RecordBatch, build_batch, iter_frames
from replog.replication.follower_truncation import offset_truncation_state
from replog.replication.messages import (
    ACKS_LEADER,
    LATEST_TIMESTAMP,
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    ListOffsetsPartition,
    ListOffsetsRequest,
)

T = "orders"
A, B, C, D = 1, 2, 3, 4


def values(prefix: str, start: int, stop: int) -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(start, stop)]


def diverging(cluster: Cluster, follower: int) -> list[tuple[int, int]]:
    return [d for e in cluster.exchanges if e.follower_id == follower for d in e.diverging_epochs]


# --- S1 -------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_s1_restarted_follower_keeps_records_above_its_high_watermark(tmp_path):
    """KIP-101 scenario 1: B's HW lags one round trip; after a hard restart B must not truncate
    to it, or m1 (acked) is lost once A fails too."""
    async with Cluster(tmp_path, [A, B]) as c:
        c.create_topic(T, [A, B], leader_epoch=1)
        # 2. m0: B's first fetch copies it, its second tells A, which commits it.
        task = c.start_produce(A, T, [b"m0"])
        await c.deliver_fetch(B)
        assert c.log(B, T).log_end_offset == 1
        await c.deliver_fetch(B)
        m0 = await c.finish(task, replicate=False)
        assert (m0.error, m0.base_offset) == (None, 0)
        assert c.log(A, T).high_watermark == 1
        # 3. m1: B copies it with HW 1 in the answer; its next fetch commits m1 on A, and that
        # answer (which would tell B HW = 2) is lost.
        task = c.start_produce(A, T, [b"m1"])
        await c.deliver_fetch(B)
        assert (c.log(B, T).log_end_offset, c.log(B, T).high_watermark) == (2, 1)
        await c.deliver_fetch(B, drop_response=True)
        m1 = await c.finish(task, replicate=False)
        assert (m1.error, m1.base_offset) == (None, 1)
        assert c.log(A, T).high_watermark == 2
        # 4. B's HW checkpoint says 1; hard crash and restart as a follower of A (epoch 1).
        c.checkpoint_high_watermarks(B)
        c.crash(B)
        c.restart(B)
        assert c.partition(T).leader == A and c.partition(T).leader_epoch == 1
        assert c.log(B, T).high_watermark == 1
        assert c.log(B, T).log_end_offset == 2, "B truncated to its HW on restart (KIP-101)"
        # 5./6. A fails before B fetches again; B (in the ISR) leads epoch 2 from LEO 2.
        c.crash(A)
        c.fence(A)
        registration = c.partition(T)
        assert (registration.leader, registration.isr) == (B, (B,))
        assert c.epochs(B, T) == [(1, 0), (registration.leader_epoch, 2)]
        c.restart(A)
        await c.settle()
        # A fetches at 2 with last epoch 1: B's endOffsetFor(1) = (1, 2), no divergence.
        assert diverging(c, A) == []
        # 7. m1 at offset 1 on both; A is back in the ISR.
        for broker in (A, B):
            assert c.records(broker, T) == {0: b"m0", 1: b"m1"}
        assert set(c.partition(T).isr) == {A, B}
        c.assert_invariants(T)


# --- S2 -------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_s2_double_hard_failure_divergence_is_truncated_away(tmp_path):
    """KIP-101 scenario 2: B loses m1 from its page cache, leads epoch 2 and writes m2 at
    offset 1; A, back with m1@1(e1), must truncate it instead of trusting its HW."""
    async with Cluster(tmp_path, [A, B]) as c:
        c.create_topic(T, [A, B], leader_epoch=1)
        assert (await c.produce(A, T, [b"m0"])).error is None
        await c.settle()
        for broker in (A, B):
            c.log(broker, T).flush()
        assert (await c.produce(A, T, [b"m1"])).base_offset == 1
        await c.settle()
        assert c.log(A, T).high_watermark == 2 and c.log(B, T).log_end_offset == 2
        for broker in (A, B):
            c.checkpoint_high_watermarks(broker)
        # 4. Power loss on both: B's m1 was only in the page cache.
        c.crash(B, cut_to_offset={T: 1})
        c.crash(A)
        lost = c.ledger.forgive_from(T, 1, "S2: both replicas failed without fsync")
        assert lost == [1]
        # 5. A is fenced first; B, still in the ISR, leads epoch 2; restart B.
        c.fence(A)
        registration = c.partition(T)
        assert (registration.leader, registration.isr) == (B, (B,))
        c.restart(B)
        assert c.log(B, T).log_end_offset == 1
        epoch2 = registration.leader_epoch
        assert c.epochs(B, T) == [(1, 0), (epoch2, 1)]
        m2 = await c.produce(B, T, [b"m2"])
        assert (m2.error, m2.base_offset) == (None, 1)
        # 6. A returns as a follower with HW 2 and m1@1(e1).
        c.restart(A)
        assert c.log(A, T).log_end_offset == 2
        await c.settle()
        assert diverging(c, A)[0] == (1, 1)
        # 7. Byte-identical; m1 is gone (allowed: both failed), m2 is at 1 on both.
        for broker in (A, B):
            assert c.records(broker, T) == {0: b"m0", 1: b"m2"}
        c.assert_invariants(T)


@pytest.mark.asyncio
async def test_s2_divergence_with_compressed_multi_record_batches(tmp_path):
    """S2 with gzip batches of several records: truncation lands on batch boundaries and the
    logs end byte-identical (the buggy rule would leave fetch offsets inside a batch)."""
    async with Cluster(tmp_path, [A, B]) as c:
        c.create_topic(T, [A, B], leader_epoch=1)
        gzip = {"compression": COMPRESSION_GZIP}
        assert (await c.produce(A, T, values("m", 0, 3), batch_options=gzip)).base_offset == 0
        await c.settle()
        for broker in (A, B):
            c.log(broker, T).flush()
        assert (await c.produce(A, T, values("m", 3, 6), batch_options=gzip)).base_offset == 3
        await c.settle()
        for broker in (A, B):
            c.checkpoint_high_watermarks(broker)
        c.crash(B, cut_to_offset={T: 3})
        c.crash(A)
        assert c.ledger.forgive_from(T, 3, "S2: both replicas failed") == [3, 4, 5]
        c.fence(A)
        c.restart(B)
        assert c.log(B, T).log_end_offset == 3
        m2 = await c.produce(B, T, values("n", 3, 5), batch_options=gzip)
        assert (m2.error, m2.base_offset) == (None, 3)
        c.restart(A)
        await c.settle()
        assert diverging(c, A)[0] == (1, 3)
        expected = dict(enumerate(values("m", 0, 3))) | {3: b"n3", 4: b"n4"}
        for broker in (A, B):
            assert c.records(broker, T) == expected
        c.assert_invariants(T)


# --- S3 -------------------------------------------------------------------------------------


async def _s3_fast_failovers(c: Cluster) -> None:
    """Steps 1-3 up to A's re-election in epoch 3 (nothing written in epoch 3 yet)."""
    c.create_topic(T, [A, B], leader_epoch=1)
    assert (await c.produce(A, T, [b"m0"])).error is None
    await c.settle()
    assert c.log(A, T).high_watermark == 1
    assert (await c.produce(A, T, [b"m1"], acks=ACKS_LEADER)).base_offset == 1
    # 2. Leadership to B (epoch 2); A does not hear of it.
    c.held_back = {A}
    epoch2 = c.elect(T, B).leader_epoch
    assert c.epochs(B, T) == [(1, 0), (epoch2, 1)]
    assert (await c.produce(B, T, [b"m2"], acks=ACKS_LEADER)).base_offset == 1
    # 3. Back to A (epoch 3) before A ever followed B; B does not hear of it yet.
    c.held_back = {B}
    epoch3 = c.elect(T, A).leader_epoch
    assert c.epochs(A, T) == [(1, 0), (epoch3, 2)], "the new epoch is assigned at election"


@pytest.mark.asyncio
async def test_s3_leader_lacking_the_followers_epoch_answers_the_epoch_it_has(tmp_path):
    """KIP-279: A never saw epoch 2; B, following A in epoch 3 with last epoch 2, is told
    (epoch 1, end 2), truncates to 1 and gets m1 and m3."""
    async with Cluster(tmp_path, [A, B]) as c:
        await _s3_fast_failovers(c)
        assert (await c.produce(A, T, [b"m3"], acks=ACKS_LEADER)).base_offset == 2
        # 4. B becomes a follower of A with last epoch 2.
        c.held_back = set()
        c.publish()
        await c.settle()
        assert diverging(c, B)[0] == (1, 2)
        for broker in (A, B):
            assert c.records(broker, T) == {0: b"m0", 1: b"m1", 2: b"m3"}
        c.assert_invariants(T)


@pytest.mark.asyncio
async def test_s3_dangling_epoch_of_a_leader_that_wrote_nothing_is_removed(tmp_path):
    """Step 5: A is elected in epoch 3 (its cache gets 3:2 at once), writes nothing, loses
    leadership to B (epoch 4); as a follower its truncation drops the dangling entry."""
    async with Cluster(tmp_path, [A, B]) as c:
        await _s3_fast_failovers(c)
        epoch3 = c.partition(T).leader_epoch
        c.held_back = set()
        assert c.elect(T, B).leader_epoch == 4
        await c.settle()
        # A asked with last epoch 3 (dangling): (2, 2) from B, then with epoch 1: (1, 1).
        assert diverging(c, A)[:2] == [(2, 2), (1, 1)]
        assert epoch3 not in [epoch for epoch, _ in c.epochs(A, T)]
        assert c.epochs(A, T) == [e for e in c.epochs(B, T) if e[1] < c.log(A, T).log_end_offset]
        for broker in (A, B):
            assert c.records(broker, T) == {0: b"m0", 1: b"m2"}
        c.assert_invariants(T)


@pytest.mark.asyncio
async def test_s3_acks_all_waiter_answers_not_leader_when_leadership_moves(tmp_path):
    """docs/design/replication.md#acks-and-min-isr: a DelayedProduce whose partition is no longer
    led here completes with NOT_LEADER_OR_FOLLOWER (the record was never committed, so it may
    vanish)."""
    async with Cluster(tmp_path, [A, B]) as c:
        c.create_topic(T, [A, B], leader_epoch=1)
        assert (await c.produce(A, T, [b"m0"])).error is None
        c.isolate(B)
        task = c.start_produce(A, T, [b"m1"])
        for _ in range(5):
            await asyncio.sleep(0)
        assert not task.done()
        c.elect(T, B)
        result = await c.finish(task, replicate=False)
        assert isinstance(result.error, NotLeaderOrFollowerError)
        assert result.current_leader is not None and result.current_leader.leader_id == B
        c.heal(B)
        await c.settle()
        for broker in (A, B):
            assert c.records(broker, T) == {0: b"m0"}
        c.assert_invariants(T)


async def _s3_multi_round_logs(c: Cluster, follower: int, leader: int) -> None:
    """docs/design/replication.md#iterative-truncation-example: follower log e0@0, e2@1, e4@2;
    leader log e1@0, e3@1, e5@2 (each broker hears only of its own elections)."""
    c.create_topic(T, [follower, leader], leader_epoch=0)
    for epoch in range(6):
        me = follower if epoch % 2 == 0 else leader
        c.held_back = {leader if me == follower else follower}
        if epoch > 0:
            assert c.elect(T, me).leader_epoch == epoch
        result = await c.produce(me, T, [f"e{epoch}".encode()], acks=ACKS_LEADER)
        assert result.base_offset == epoch // 2
    assert c.epochs(follower, T) == [(0, 0), (2, 1), (4, 2)]
    assert c.epochs(leader, T) == [(1, 0), (3, 1), (5, 2)]


@pytest.mark.asyncio
async def test_s3_multi_round_truncation_through_diverging_epoch_fetches(tmp_path):
    async with Cluster(tmp_path, [A, B]) as c:
        await _s3_multi_round_logs(c, follower=A, leader=B)
        c.held_back = set()
        c.publish()
        await c.settle()
        assert diverging(c, A) == [(3, 2), (1, 1), (0, 0)]
        for broker in (A, B):
            assert c.records(broker, T) == {0: b"e1", 1: b"e3", 2: b"e5"}
        c.assert_invariants(T)


@pytest.mark.asyncio
async def test_s3_multi_round_truncation_through_offsets_for_leader_epoch(tmp_path):
    """The old path: the follower asks OffsetsForLeaderEpoch about its latest epoch, truncates
    per docs/design/replication.md#follower-truncation and asks again until done: 3 rounds, ending
    at offset 0."""
    async with Cluster(tmp_path, [A, B]) as c:
        await _s3_multi_round_logs(c, follower=A, leader=B)
        log = c.log(A, T)
        answers, offsets = [], []
        for _ in range(5):
            latest = log.latest_leader_epoch
            assert latest is not None
            answer = c.offsets_for_leader_epoch(B, T, latest, current_leader_epoch=5, replica_id=A)
            answers.append(answer)

            def end_offset_for(epoch: int, log=log) -> tuple[int, int] | None:
                found = log.leader_epoch_cache.end_offset_for(epoch, log.log_end_offset)
                return None if found.end_offset == -1 else tuple(found)

            state = offset_truncation_state(
                leader_epoch=answer[0],
                leader_end_offset=answer[1],
                follower_end_offset_for=end_offset_for,
                follower_log_end_offset=log.log_end_offset,
                initial_fetch_offset=log.high_watermark,
            )
            log.truncate_to(state.offset)
            offsets.append(log.log_end_offset)
            if state.truncation_completed:
                break
        assert answers == [(3, 2), (1, 1), (0, 0)]
        assert offsets == [2, 1, 0]
        c.held_back = set()
        c.publish()
        await c.settle()
        assert diverging(c, A) == []
        for broker in (A, B):
            assert c.records(broker, T) == {0: b"e1", 1: b"e3", 2: b"e5"}
        c.assert_invariants(T)


@pytest.mark.asyncio
async def test_s7_pending_isr_shrink_keeps_the_hw_and_a_stale_one_is_refused(tmp_path):
    """docs/design/replication.md#isr-shrink: while a shrink is in flight the maximal ISR is the old
    one, so the HW waits for the commit; a shrink the controller refuses as stale (partition epoch
    moved meanwhile) leaves the leader on the controller's ISR, and it proposes again from there."""
    async with Cluster(tmp_path, [A, B, C]) as c:
        c.create_topic(T, [A, B, C])
        assert (await c.produce(A, T, [b"r0"])).error is None
        c.isolate(C)
        task = c.start_produce(A, T, [b"r1"])
        lag = c.brokers[A].config.replica_lag_time_ms_max
        sent = []
        for _ in range(8):
            c.advance(lag // 4)
            await c.replicate_round(answer=False)
            sent.extend(c.rm(A).pending_isr_changes())
        assert [set(ch.new_isr) for ch in sent] == [{A, B}]
        assert not task.done() and c.log(A, T).high_watermark == 1
        # The controller moved on meanwhile (an ISR change of its own: the partition epoch
        # bumps), so the leader's shrink is stale.
        c.change_partition(T, isr=[A, B, C])
        (stale,) = sent
        registration = c.partition(T)
        c.rm(A).on_isr_change_result(
            stale,
            c.check_isr_change(A, stale, registration),
            registration.isr,
            registration.leader_epoch,
            registration.partition_epoch,
        )
        assert not task.done() and c.log(A, T).high_watermark == 1
        await c.advance_past_lag(A)
        assert set(c.partition(T).isr) == {A, B}
        assert (await c.finish(task)).error is None
        assert c.log(A, T).high_watermark == 2
        c.heal(C)
        await c.settle()
        assert set(c.partition(T).isr) == {A, B, C}
        c.assert_invariants(T)


# --- S4 -------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_s4_follower_joins_the_isr_only_from_the_leader_epoch_start(tmp_path):
    """B leads epoch 6 from LEO 100 with HW 95; C at 97 (>= HW, < epoch start) stays out of the
    ISR; D's fetch at 100 lifts the HW; C joins once at 100."""
    one_batch_per_fetch = {"replica_fetch_max_bytes": 1, "replica_fetch_response_max_bytes": 1}
    async with Cluster(tmp_path, [A, B, C, D], broker_overrides={C: one_batch_per_fetch}) as c:
        c.create_topic(T, [A, B, C, D], isr=[A, B, D], leader_epoch=5)
        c.isolate(C)
        assert (await c.produce(A, T, values("r", 0, 95))).error is None
        await c.settle()
        # 2. Offsets 95..99, one batch each, committed by A; B's own HW stays at 95.
        tasks = [c.start_produce(A, T, [v]) for v in values("r", 95, 100)]
        await c.deliver_fetch(B)
        await c.deliver_fetch(D)
        await c.deliver_fetch(B)
        await c.deliver_fetch(D)
        for task in tasks:
            assert (await c.finish(task, replicate=False)).error is None
        assert c.log(A, T).high_watermark == 100
        assert (c.log(B, T).log_end_offset, c.log(B, T).high_watermark) == (100, 95)
        # 3. A fails: B leads epoch 6 with ISR {B, D}; D's LEO is unknown, so the HW stays 95.
        c.crash(A)
        c.fence(A)
        registration = c.partition(T)
        assert (registration.leader, set(registration.isr)) == (B, {B, D})
        assert c.epochs(B, T)[-1] == (registration.leader_epoch, 100)
        assert c.log(B, T).high_watermark == 95
        # 4. C catches up to 97, one batch per fetch.
        c.heal(C)
        while c.log(C, T).log_end_offset < 97:
            if await c.deliver_fetch(C) is None:
                c.advance(c.brokers[C].config.replica_fetch_backoff_ms)
            c.answer_isr_changes()
            assert C not in c.partition(T).isr
        # One more fetch, at offset 97: B now knows C's LEO is 97 (>= HW 95, < 100).
        await c.deliver_fetch(C)
        c.answer_isr_changes()
        assert c.exchanges[-1].request.partitions[0].fetch_offset == 97
        # 5. Not in the ISR below the epoch start, though above the HW.
        assert C not in c.partition(T).isr
        assert all(C not in ch.new_isr for ch in c.rm(B).pending_isr_changes())
        assert c.log(B, T).high_watermark == 95
        # 6. D fetches at 100: the HW jumps to 100; C is still out until it reaches 100.
        await c.deliver_fetch(D)
        assert c.log(B, T).high_watermark == 100
        c.answer_isr_changes()
        assert C not in c.partition(T).isr
        await c.settle()
        assert set(c.partition(T).isr) == {B, C, D}
        c.assert_invariants(T)


# --- S5 -------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_s5_last_replica_standing_without_elr_loses_acked_records(tmp_path):
    """KIP-966's timeline with ELR off (replog has no ELR): the ISR keeps its last member, which
    alone may lead; it comes back with a torn log, so offsets 120..149 (acks=all) are lost."""
    async with Cluster(tmp_path, [0, 1, 2]) as c:
        c.create_topic(T, [0, 1, 2], leader=2, leader_epoch=5, configs={"min.insync.replicas": "2"})
        assert (await c.produce(2, T, values("v", 0, 100))).error is None
        await c.settle()
        assert c.log(2, T).high_watermark == 100
        # T0: broker 0 cut off. (A caught-up follower stays in the ISR while nothing new is
        # written, docs/design/replication.md#caught-up-time, so the shrink comes once a produce
        # leaves broker 0 behind.) The ISR shrinks to {1, 2}; acks=all works.
        c.isolate(0)
        task = c.start_produce(2, T, values("v", 100, 120))
        await c.advance_past_lag(2)
        assert set(c.partition(T).isr) == {1, 2}
        result = await c.finish(task)
        assert (result.error, result.base_offset) == (None, 100)
        result = await c.produce(2, T, values("v", 120, 150))
        assert (result.error, result.base_offset) == (None, 120)
        assert c.log(2, T).high_watermark == 150 and c.log(1, T).log_end_offset == 150
        # T1: broker 1 cut off; ISR {2}: acks=all refused before the append, acks=1 appends
        # but the HW stays (ISR < min ISR).
        c.isolate(1)
        leader_only = await c.produce(2, T, values("v", 150, 160), acks=ACKS_LEADER)
        assert (leader_only.error, leader_only.base_offset) == (None, 150)
        await c.advance_past_lag(2)
        assert c.partition(T).isr == (2,)
        refused = await c.produce(2, T, values("x", 0, 5))
        assert isinstance(refused.error, NotEnoughReplicasError)
        assert c.log(2, T).log_end_offset == 160
        assert c.log(2, T).high_watermark == 150
        # T2: broker 2 crashes and loses its page cache from offset 120.
        c.crash(2, cut_to_offset={T: 120})
        c.fence(2)
        registration = c.partition(T)
        assert (registration.leader, registration.isr) == (-1, (2,))
        refused_follower = await c.produce(1, T, [b"y"], acks=ACKS_LEADER)
        assert isinstance(refused_follower.error, NotLeaderOrFollowerError)
        # T3: heal, restart broker 2: the only one that can lead.
        c.heal()
        c.restart(2)
        registration = c.partition(T)
        assert registration.leader == 2
        assert c.log(2, T).log_end_offset == 120
        await c.settle()
        # Broker 1 fetched at 150 with last epoch 5 and was told (5, 120).
        assert (5, 120) in diverging(c, 1)
        lost = c.ledger.forgive_from(T, 120, "S5 without ELR: the sole ISR member lost them")
        assert lost == list(range(120, 150))
        for broker in (0, 1, 2):
            assert c.log(broker, T).log_end_offset == 120
            assert sorted(c.records(broker, T)) == list(range(120))
        assert set(c.partition(T).isr) == {0, 1, 2}
        c.assert_invariants(T)


# --- S6 -------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_s6_unclean_election_loses_records_but_never_diverges(tmp_path):
    async with Cluster(tmp_path, [A, B]) as c:
        c.create_topic(T, [A, B], leader_epoch=3)
        assert (await c.produce(A, T, values("v", 0, 40))).error is None
        await c.settle()
        # B stops fetching; the next write leaves it behind and it drops out of the ISR, after
        # which the write commits with A alone (min ISR 1).
        c.isolate(B)
        task = c.start_produce(A, T, values("v", 40, 60))
        await c.advance_past_lag(A)
        assert c.partition(T).isr == (A,)
        assert (await c.finish(task)).base_offset == 40
        assert c.log(A, T).high_watermark == 60 and c.log(B, T).log_end_offset == 40
        # 2. A fails. Unclean disabled: no leader until A returns.
        c.crash(A)
        c.fence(A)
        assert (c.partition(T).leader, c.partition(T).isr) == (-1, (A,))
        c.heal(B)
        refused = await c.produce(B, T, [b"x"], acks=ACKS_LEADER)
        assert isinstance(refused.error, NotLeaderOrFollowerError)
        # Unclean enabled: B leads, ISR {B}, RECOVERING until B reports RECOVERED.
        registration = c.elect_unclean(T, B)
        assert registration.leader_recovery_state == 1
        c.answer_isr_changes()
        assert c.partition(T).leader_recovery_state == 0
        assert c.partition(T).isr == (B,)
        lost = c.ledger.forgive_from(T, 40, "S6: unclean election of a replica with LEO 40")
        assert lost == list(range(40, 60))
        x = await c.produce(B, T, [b"x"])
        assert (x.error, x.base_offset) == (None, 40)
        # 3. A returns with last epoch 3: (3, 40) from B, truncates to 40.
        c.restart(A)
        await c.settle()
        assert diverging(c, A)[0] == (3, 40)
        for broker in (A, B):
            records = c.records(broker, T)
            assert sorted(records) == list(range(41)) and records[40] == b"x"
        assert set(c.partition(T).isr) == {A, B}
        c.assert_invariants(T)


# --- S7 -------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_s7_min_insync_replicas_gates_acks_all(tmp_path):
    """RF 3, min ISR 2, ISR {A, B}: acks=all commits with B; a produce appended before B stops
    times out once the ISR shrinks under it (the HW cannot move below min ISR); after the
    shrink acks=all is refused before the append."""
    async with Cluster(tmp_path, [A, B, C]) as c:
        c.create_topic(T, [A, B, C], isr=[A, B], configs={"min.insync.replicas": "2"})
        c.isolate(C)
        ok = await c.produce(A, T, [b"a0"])
        assert (ok.error, ok.base_offset) == (None, 0)
        # 2. The race: appended under ISR {A, B}; B stops; the ISR shrinks first.
        c.isolate(B)
        task = c.start_produce(A, T, [b"late"], timeout_ms=30_000)
        for _ in range(5):
            await asyncio.sleep(0)
        assert c.log(A, T).log_end_offset == 2 and not task.done()
        await c.advance_past_lag(A)
        assert c.partition(T).isr == (A,) and not task.done()
        assert c.log(A, T).high_watermark == 1
        c.advance(30_000)
        late = await c.finish(task, replicate=False)
        assert isinstance(late.error, RequestTimedOutError)
        assert c.log(A, T).high_watermark == 1
        # 1. ISR {A} < 2: refused before the append.
        refused = await c.produce(A, T, [b"no"])
        assert isinstance(refused.error, NotEnoughReplicasError)
        assert c.log(A, T).log_end_offset == 2
        # B back: the ISR expands, the HW moves (the timed-out record is committed after all).
        c.heal(B)
        await c.settle()
        assert set(c.partition(T).isr) == {A, B}
        assert c.log(A, T).high_watermark == 2
        assert (await c.produce(A, T, [b"a2"])).base_offset == 2
        c.assert_invariants(T)


@pytest.mark.asyncio
async def test_s7_min_insync_replicas_above_the_replication_factor_is_capped(tmp_path):
    """min.insync.replicas 3 on RF 2 acts as 2: acks=all works with both, is refused with one."""
    async with Cluster(tmp_path, [A, B]) as c:
        c.create_topic(T, [A, B], configs={"min.insync.replicas": "3"})
        ok = await c.produce(A, T, [b"a0"])
        assert (ok.error, ok.base_offset) == (None, 0)
        c.isolate(B)
        assert (await c.produce(A, T, [b"a1"], acks=ACKS_LEADER)).base_offset == 1
        await c.advance_past_lag(A)
        assert c.partition(T).isr == (A,)
        refused = await c.produce(A, T, [b"no"])
        assert isinstance(refused.error, NotEnoughReplicasError)
        c.heal(B)
        await c.settle()
        assert (await c.produce(A, T, [b"a2"])).base_offset == 2
        c.assert_invariants(T)


# --- S8 -------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_s8_torn_and_corrupt_tails_recover_and_the_broker_converges(tmp_path):
    async with Cluster(tmp_path, [A, B]) as c:
        c.create_topic(T, [A, B], leader_epoch=1)
        for i in range(10):
            assert (await c.produce(A, T, [f"b{i}".encode()])).base_offset == i
        await c.settle()
        # 1. Torn tail on the follower: half of b10's bytes after b9.
        b10 = build_batch([(c.clock.now_ms, None, b"b10", ())])
        good_size = os.path.getsize(active_segment_path(c.partition_dir(A, T)))
        c.crash(B, torn_tail={T: b10[: len(b10) // 2]})
        c.restart(B)
        assert c.log(B, T).log_end_offset == 10
        assert os.path.getsize(active_segment_path(c.partition_dir(B, T))) == good_size
        for i in range(10, 12):
            assert (await c.produce(A, T, [f"b{i}".encode()])).base_offset == i
        await c.settle()
        c.assert_invariants(T)
        # 3. A flipped byte inside b5's records on the follower (never flushed: above the
        # recovery point): recovery truncates to the end of b4; B fetches the rest again.
        c.crash(B)
        path = active_segment_path(c.partition_dir(B, T))
        with open(path, "rb") as f:
            data = bytearray(f.read())
        position, size = list(iter_frames(data))[5]
        assert RecordBatch.parse(bytes(data[position : position + size])).header.base_offset == 5
        data[position + size - 2] ^= 0xFF
        with open(path, "wb") as f:
            f.write(data)
        c.restart(B)
        assert c.log(B, T).log_end_offset == 5
        await c.settle()
        assert c.log(B, T).log_end_offset == 12
        c.assert_invariants(T)
        # Torn tail on the leader: B takes over, A comes back as a follower and converges.
        c.crash(A, torn_tail={T: b10[: len(b10) // 3]})
        c.fence(A)
        assert c.partition(T).leader == B
        assert (await c.produce(B, T, [b"b12"])).base_offset == 12
        c.restart(A)
        assert c.log(A, T).log_end_offset == 12
        await c.settle()
        assert set(c.partition(T).isr) == {A, B}
        assert c.records(A, T) == {i: f"b{i}".encode() for i in range(13)}
        c.assert_invariants(T)


# --- S9 -------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_s9_stale_high_watermark_checkpoint_gives_empty_reads_not_errors(tmp_path):
    async with Cluster(tmp_path, [A, B]) as c:
        c.create_topic(T, [A, B], leader_epoch=1)
        for i in range(10):
            await c.produce(A, T, [f"r{i}".encode()])
        await c.settle()
        c.checkpoint_high_watermarks(A)
        for i in range(10, 20):
            await c.produce(A, T, [f"r{i}".encode()])
        await c.settle()
        assert c.log(A, T).high_watermark == 20
        # The leader dies within the 5 s checkpoint period and comes back as leader.
        c.crash(A)
        c.restart(A, publish=False)
        assert c.log(A, T).high_watermark == 10
        registration = c.elect(T, A)
        assert registration.leader == A
        assert c.log(A, T).high_watermark == 10
        # Between the new HW and the LEO: empty answers, no error.
        for offset in (10, 15, 20):
            result = await c.consumer_fetch(A, T, offset)
            assert (result.error, result.records, result.high_watermark) == (None, b"", 10)
        below = await c.consumer_fetch(A, T, 5)
        assert below.error is None
        assert sorted(_offsets(below.records)) == list(range(5, 10))
        beyond = await c.consumer_fetch(A, T, 21)
        assert isinstance(beyond.error, OffsetOutOfRangeError)

        def latest() -> Any:
            request = ListOffsetsRequest((ListOffsetsPartition(T, 0, LATEST_TIMESTAMP),))
            (answer,) = c.rm(A).list_offsets(request).partitions
            return answer

        # Not the stale HW as "latest": OFFSET_NOT_AVAILABLE (retriable) while the HW is below
        # the start offset of A's new leader epoch, as Kafka answers
        # (docs/design/replication.md#read-bounds).
        assert isinstance(latest().error, OffsetNotAvailableError)
        # The HW rises again as B fetches.
        await c.settle()
        assert c.log(A, T).high_watermark == 20
        assert (latest().error, latest().offset) == (None, 20)
        result = await c.consumer_fetch(A, T, 15)
        assert result.error is None and sorted(_offsets(result.records)) == list(range(15, 20))
        c.assert_invariants(T)


def _offsets(records: bytes) -> list[int]:
    found: list[int] = []
    for position, size in iter_frames(records):
        batch = RecordBatch.parse(records[position : position + size])
        found.extend(r.offset for r in batch.records())
    return found


@pytest.mark.asyncio
async def test_s9_log_start_offset_after_delete_records_and_a_crash_of_every_replica(tmp_path):
    """S9.2: DeleteRecords(to 5) is acked once the low watermark reaches 5; a hard crash of all
    replicas before the 60 s log-start checkpoint. In Kafka the log start may come back at the
    segment base (the design note leaves the choice to replog); replog keeps it at 5: the
    leader-epoch checkpoint, written when the log start moved, witnesses it (log_loader.py;
    without it the leader could also mislead a divergent follower, test_found_by_simulation.py
    no. 3). The replicas agree and nothing below the HW is lost above the start."""
    async with Cluster(tmp_path, [A, B]) as c:
        c.create_topic(T, [A, B], leader_epoch=1)
        for i in range(10):
            await c.produce(A, T, [f"r{i}".encode()])
        await c.settle()
        task = asyncio.ensure_future(
            c.rm(A).delete_records(DeleteRecordsRequest((DeleteRecordsPartition(T, 0, 5),)))
        )
        for _ in range(5):
            await asyncio.sleep(0)
        assert not task.done(), "acked before the follower's log start reached 5"
        await c.settle()
        (deleted,) = (await asyncio.wait_for(task, 5)).partitions
        assert (deleted.error, deleted.low_watermark) == (None, 5)
        assert [c.log(b, T).log_start_offset for b in (A, B)] == [5, 5]
        for broker in (B, A):
            c.checkpoint_high_watermarks(broker)
            c.crash(broker)
        for broker in (A, B):
            c.restart(broker)
        starts = [c.log(b, T).log_start_offset for b in (A, B)]
        assert starts == [5, 5], f"log start after the crash: {starts}"
        await c.settle()
        assert set(c.partition(T).isr) == {A, B}
        c.assert_invariants(T)
