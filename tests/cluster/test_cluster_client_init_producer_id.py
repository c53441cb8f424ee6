"""InitProducerId on a real 3-node cluster (issue #7): producer ids are unique cluster-wide.

- Every broker answers with epoch 0 and ids no other broker handed out (each holds its own
  block from the controller).
- A broker killed with SIGKILL and restarted hands out ids distinct from every id before (it
  asks the controller for a new block; the old block's unused ids are never reused).
- After the active controller (the metadata quorum's leader) is killed, a surviving broker
  that uses up its block gets the next one from the new active controller: over a thousand
  more ids, all distinct, none lost to the failover.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator

import pytest
from client_cluster import ClientCluster, client_cluster

from replog.errors import CoordinatorLoadInProgressError, KafkaError
from tests.kafka_broker_clients import kafka_broker_client

pytestmark = pytest.mark.slow

BLOCK_SIZE = 1000  # the controller's producer-id block


@pytest.fixture(scope="module")
def ids_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClientCluster]:
    with client_cluster(tmp_path_factory.mktemp("c")) as cluster:
        yield cluster


async def init_producer_id(address: str, timeout_s: float = 30) -> tuple[int, int]:
    """An id from the broker at `address`, retrying while it starts or waits for a block."""
    deadline = time.monotonic() + timeout_s
    async with kafka_broker_client(address, request_timeout_ms=5000) as client:
        while True:
            try:
                return await client.init_producer_id()
            except (KafkaError, OSError) as exc:
                if time.monotonic() > deadline:
                    raise AssertionError(f"no producer id from {address}: {exc!r}") from exc
                await asyncio.sleep(0.1)


async def many_ids(address: str, count: int) -> list[int]:
    """`count` ids from one broker over one connection (retrying COORDINATOR_LOAD_IN_PROGRESS
    while a block is on its way)."""
    ids: list[int] = []
    deadline = time.monotonic() + 30
    async with kafka_broker_client(address, request_timeout_ms=5000) as client:
        while len(ids) < count:
            try:
                producer_id, epoch = await client.init_producer_id()
            except CoordinatorLoadInProgressError:
                assert time.monotonic() < deadline, f"{address}: no new block within 30 s"
                await asyncio.sleep(0.05)
                continue
            assert epoch == 0
            ids.append(producer_id)
    return ids


def assert_distinct(ids: list[int]) -> None:
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    assert not repeated, f"producer ids handed out twice: {repeated[:10]}"


@pytest.mark.asyncio
async def test_producer_ids_are_unique_across_brokers_restarts_and_controller_failover(
    ids_cluster: ClientCluster,
) -> None:
    addresses = ids_cluster.kafka_addresses
    handed: list[int] = []

    # Every broker: epoch 0, its own block.
    firsts = {}
    for node_id, address in addresses.items():
        answers = [await init_producer_id(address) for _ in range(3)]
        assert all(epoch == 0 for _, epoch in answers), answers
        firsts[node_id] = answers[0][0]
        handed += [producer_id for producer_id, _ in answers]
    assert_distinct(handed)
    blocks = {first // BLOCK_SIZE for first in firsts.values()}
    assert len(blocks) == len(addresses), firsts  # one block per broker

    # A broker that is not the active controller dies and comes back: a new block.
    leader = ids_cluster.loopback.describe().leader_id
    victim = next(n for n in addresses if n != leader)
    ids_cluster.loopback.signal(victim, signal.SIGKILL)
    restarted = await asyncio.to_thread(ids_cluster.loopback.cli, "restart", str(victim))
    assert restarted.returncode == 0, restarted.stderr
    after_restart, _ = await init_producer_id(addresses[victim])
    assert after_restart not in handed
    assert after_restart // BLOCK_SIZE not in blocks  # not the block it held before
    handed.append(after_restart)

    # The active controller dies; a surviving broker uses up its block and gets the next one
    # from the new active controller.
    ids_cluster.loopback.signal(leader, signal.SIGKILL)
    survivor = next(n for n in addresses if n not in (leader, victim))
    more = await many_ids(addresses[survivor], BLOCK_SIZE + 10)
    handed += more
    assert_distinct(handed)
    assert len({i // BLOCK_SIZE for i in more}) >= 2, "the survivor never needed a new block"
    new_leader = ids_cluster.loopback.wait_for_leader(timeout_s=15).leader_id
    assert new_leader != leader
