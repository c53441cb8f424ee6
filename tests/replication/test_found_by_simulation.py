"""Scripted replays of the faults `test_random_faults.py` found, each reduced to its steps, so
that they stay covered whatever the simulation's seeds do.

1. A leader re-elected after missing another leader's epoch kept its followers' log end
   offsets from before (Kafka keeps them on any re-election,
   docs/design/replication.md#caught-up-time). A follower that truncated under the other leader then
   counted with its old, higher offset, and the HW passed records that ISR member no longer had:
   acknowledged records it would lose if elected.
2. A follower whose old, divergent epoch ended (per the leader) at the leader's log start
   offset truncated to it, and when DeleteRecords had left that offset inside a batch, every
   later fetch answered that batch from its base, below the follower's log end offset: the
   follower never appended again.
3. A leader restarted after a kill -9 that came between DeleteRecords and the periodic
   log-start checkpoint: its leader-epoch checkpoint (written when the log start moved) no
   longer covered the deleted records, its log start came back from the older checkpoint, and
   the records were served again. Asked about an epoch older than its first, it answered with
   its first entry's start (the old data being gone, as the rule assumes), past a returning
   follower's divergent records, which the follower then kept. The log start now comes back
   from the epoch checkpoint too.
"""

from __future__ import annotations

import pytest
from scenario_harness import Cluster

from replog.replication.messages import ACKS_LEADER

T = "orders"
A, B, C = 1, 2, 3


def values(prefix: str, start: int, stop: int) -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(start, stop)]


@pytest.mark.asyncio
async def test_a_leader_that_missed_an_epoch_forgets_its_followers_offsets(tmp_path):
    async with Cluster(tmp_path, [A, B, C], default_min_insync_replicas=2) as c:
        c.create_topic(T, [C, A, B])
        assert (await c.produce(C, T, values("m", 0, 10))).error is None
        await c.settle()
        # Offsets 10..14 reach B only (A is cut off): C knows B's log end offset is 15.
        c.isolate(A)
        await c.produce(C, T, values("u", 10, 15), acks=ACKS_LEADER, replicate=False)
        await c.deliver_fetch(B)
        await c.deliver_fetch(B)
        assert c.log(B, T).log_end_offset == 15
        assert c.log(C, T).high_watermark == 10
        # C misses an epoch: A leads it (from offset 10) and B truncates to follow A.
        c.held_back = {C}
        c.heal(A)
        c.elect(T, A)
        await c.deliver_fetch(B)
        assert c.log(B, T).log_end_offset == 10
        # C leads again, two epochs on; A fetches C's 10..14 and cannot be told apart from a
        # follower that had them all along.
        c.elect(T, C)
        c.held_back = set()
        c.publish()
        for _ in range(3):  # a diverging epoch (A's empty epoch), the records, the LEO
            await c.deliver_fetch(A)
        assert c.log(A, T).log_end_offset == 15
        # B, in the ISR, holds 10 records: the HW may not pass 10 until B fetches again.
        assert set(c.partition(T).isr) == {A, B, C}
        assert c.log(C, T).high_watermark == 10
        await c.settle()
        assert c.log(C, T).high_watermark == 15
        c.assert_invariants(T)


async def b_leads_an_epoch_a_never_sees(c: Cluster, batch_sizes: list[int]) -> None:
    """B leads epoch 0 and writes batches of "old" records, which A never fetches; B dies and
    A leads epoch 1 from offset 0."""
    c.create_topic(T, [B, A])
    c.isolate(A)
    start = 0
    for size in batch_sizes:
        await c.produce(B, T, values("old", start, start + size), acks=ACKS_LEADER, replicate=False)
        start += size
    c.crash(B)
    c.heal(A)
    c.fence(B)
    assert c.partition(T).leader == A


@pytest.mark.asyncio
async def test_a_follower_truncated_to_a_log_start_inside_a_batch_catches_up(tmp_path):
    async with Cluster(tmp_path, [A, B]) as c:
        await b_leads_an_epoch_a_never_sees(c, [1, 2])  # 0 and 1..2
        await c.produce(A, T, values("new", 0, 2), acks=ACKS_LEADER)
        await c.produce(A, T, values("new", 2, 4), acks=ACKS_LEADER)
        # DeleteRecords to offset 1: the log start falls inside the batch 0..1.
        deleted = await c.finish(c.start_delete_records(A, T, 1))
        assert deleted.partitions[0].error is None
        assert c.log(A, T).log_start_offset == 1
        # B returns with epoch 0's 0..2; A's answer: epoch 0 ends at its log start, 1.
        c.restart(B)
        exchange = await c.deliver_fetch(B)
        assert exchange is not None
        assert exchange.diverging_epochs == [(0, 1)]
        await c.settle()
        assert c.log(B, T).log_end_offset == c.log(A, T).log_end_offset == 4
        assert c.records(B, T) == {0: b"new0", 1: b"new1", 2: b"new2", 3: b"new3"}
        c.assert_identical(T)


@pytest.mark.asyncio
async def test_a_leader_restarted_after_delete_records_keeps_its_log_start(tmp_path):
    async with Cluster(tmp_path, [A, B]) as c:
        await b_leads_an_epoch_a_never_sees(c, [3])  # 0..2
        for start in range(0, 30, 5):
            await c.produce(A, T, values("new", start, start + 5), acks=ACKS_LEADER)
        deleted = await c.finish(c.start_delete_records(A, T, 20))
        assert deleted.partitions[0].error is None
        assert c.epochs(A, T) == [(1, 20)]
        # kill -9 before the log-start checkpoint: the epoch checkpoint already says 20.
        c.crash(A)
        c.fence(A)
        c.restart(A)
        assert c.partition(T).leader == A
        assert c.log(A, T).log_start_offset == 20
        # B returns with epoch 0's 0..2: its fetch at 3 is below A's log start, so it
        # restarts its log there instead of keeping 0..2 under A's records.
        c.restart(B)
        await c.settle()
        assert c.log(B, T).log_start_offset == 20
        assert c.records(B, T) == {o: f"new{o}".encode() for o in range(20, 30)}
        c.assert_identical(T)
