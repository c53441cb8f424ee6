"""A follower's fetch session carries a bounded number of changed entries per request
(`fetch_session` Rules): a leader-epoch bump of every partition goes to the leader a batch at a
time, and meanwhile the follower reads no answer the leader gave at an entry it holds from
before, so no partition backs off or appends at a position it has left, and replication ends
where it would have without the bound."""

from __future__ import annotations

from pathlib import Path

import pytest
import scenario_harness
from scenario_harness import Cluster

from replog.replication.fetch_session import FetchChanges, FetcherSession
from replog.replication.messages import FetchPartition, FetchRequest

A, B = 1, 2
TOPICS = [f"t{i}" for i in range(7)]
BOUND = 2


@pytest.mark.asyncio
async def test_a_leader_epoch_bump_of_every_partition_goes_a_batch_a_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scenario_harness, "SESSION_CHANGES_PER_REQUEST", BOUND)
    # Per request the follower sent: the changed entries it carried (those of partitions the
    # leader held already).
    carried: list[list[FetchPartition]] = []
    to_send = FetcherSession.to_send

    def spying(
        self: FetcherSession,
        request: FetchRequest,
        resend: tuple[tuple[str, int], ...] = (),
        changes: FetchChanges | None = None,
    ) -> FetchRequest:
        held = {(e.topic, e.partition) for e in request.partitions if self.holds(_key(e))}
        wire = to_send(self, request, resend, changes)
        carried.append([e for e in wire.partitions if _key(e) in held])
        return wire

    monkeypatch.setattr(FetcherSession, "to_send", spying)
    async with Cluster(tmp_path, [A, B], fetch_sessions=True) as c:
        for topic in TOPICS:
            c.create_topic(topic, [A, B], leader_epoch=1)
        for topic in TOPICS:
            await c.produce(A, topic, [b"before"])
        await c.settle()
        carried.clear()
        first_exchange = len(c.exchanges)
        for topic in TOPICS:
            c.elect(topic, A, publish=False)
        c.publish()
        await c.settle()
        for topic in TOPICS:
            await c.produce(A, topic, [b"after"])
        await c.settle()
        bumps = [e for request in carried for e in request if e.current_leader_epoch == 2]
        assert max(len(request) for request in carried) <= BOUND
        assert sorted({e.topic for e in bumps}) == TOPICS
        # No answer read at a fenced entry: nothing backed off, nothing refused.
        assert [x.errors for x in c.exchanges[first_exchange:] if x.errors] == []
        for topic in TOPICS:
            assert c.partition(topic).leader_epoch == 2
            assert c.log(B, topic).log_end_offset == c.log(A, topic).log_end_offset == 2
            assert c.log(B, topic).high_watermark == 2
            c.assert_invariants(topic)


def _key(entry: FetchPartition) -> tuple[str, int]:
    return (entry.topic, entry.partition)
