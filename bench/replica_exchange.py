"""One follower's fetch rounds against a leader in one process, over the real `ReplicaFetch`
gRPC stream (issue #77, the acks=all latency at half load): what a replicated batch costs the
two sides together, and how many event-loop turns and thread wake-ups it takes.

The leader is a replica manager (logs in a temporary directory) leading orders-0 (replicas 1, 2,
3) with its `ReplicaFetchService` on a grpc.aio server on 127.0.0.1; the follower is broker 2's
`ReplicaFetchStream`. Each round the follower sends its next fetch (at the offset the previous
answer ended), the leader appends one batch of `--records` records of `--value-bytes` (acks=1)
and the fetch is answered with it: with `--pause-ms` 0 (the default) the append follows at once,
as a follower's next fetch follows its append, so the fetch may reach the leader before or
after the batch; with a pause the fetch is parked first. `--rounds` rounds after a fifth as many
unmeasured. Printed: CPU per round (the process's clock: both sides, gRPC's threads included),
the append-to-answer time's median (from the append's call to the follower holding the answer),
loop turns per round and how many of them waited in the selector (the loop went to sleep), and
context switches per round (every thread's, /proc/self/task).

Measures the code of the checkout it is run from (its interpreter and working directory):

    cd CHECKOUT && .venv/bin/python PATH/TO/bench/replica_exchange.py [--rounds 2000]
        [--records 48] [--value-bytes 1024] [--pause-ms 0] [--runs 3]

The gRPC engine is the node's (`GRPC_EXPERIMENTS` as `replog node` sets it) unless the
environment sets it.
"""

from __future__ import annotations

import os

# gRPC reads its engine when first imported: the node's, as `replog node` sets it.
os.environ.setdefault("GRPC_EXPERIMENTS", "-event_engine_client,-event_engine_listener")

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# bench/ first on sys.path would let bench/timeline.py shadow the package replog imports; the
# measured checkout (the working directory) gives its tests' metadata helpers.
_BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _BENCH_DIR]
sys.path.insert(0, os.getcwd())

import grpc  # noqa: E402

from replog.record import build_batch  # noqa: E402
from replog.replication import messages as m  # noqa: E402
from replog.server.data_plane.broker_cores import BrokerCores  # noqa: E402
from replog.server.data_plane.replica_fetch_service import (  # noqa: E402
    ReplicaFetchService,
    add_replica_fetch_service,
)
from replog.server.data_plane.replica_fetch_stream import ReplicaFetchStream  # noqa: E402
from replog.server.data_plane.replica_manager import ReplicaManager, ReplicaManagerConfig  # noqa: E402
from replog.storage.log_manager import LogManager  # noqa: E402
from replog.testing import LoopTasks  # noqa: E402
from tests.metadata.metadata_helpers import topic_id  # noqa: E402
from tests.server.data_plane.test_replica_fetcher import three_broker_image  # noqa: E402

TOPIC_ID = topic_id(5)  # three_broker_image's orders


def _switches() -> int:
    total = 0
    for status in Path("/proc/self/task").glob("*/status"):
        try:
            for line in status.read_text().splitlines():
                if "voluntary_ctxt_switches" in line:
                    total += int(line.split()[1])
        except FileNotFoundError:
            continue  # a thread that ended meanwhile
    return total


class _CountingSelector:
    """The loop's selector, counting its calls (one per loop turn) and the ones that may sleep."""

    def __init__(self, selector: Any) -> None:
        self._selector = selector
        self.turns = 0
        self.waits = 0

    def select(self, timeout: float | None = None) -> Any:
        self.turns += 1
        if timeout is None or timeout > 0:
            self.waits += 1
        return self._selector.select(timeout)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._selector, name)


async def _run(args: argparse.Namespace, root: Path) -> str:
    logs = LogManager(str(root / "broker1"))
    rm = ReplicaManager(
        ReplicaManagerConfig(1, replica_fetch_wait_ms_max=10_000), logs, tasks=LoopTasks()
    )
    cores = BrokerCores(1, replica_manager=rm)
    service = ReplicaFetchService(1, cores.replica_fetch, 1 << 26)
    server = grpc.aio.server(options=[("grpc.max_send_message_length", 1 << 27)])
    add_replica_fetch_service(service, server)
    address = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
    await server.start()
    rm.apply_image(three_broker_image({1: address, 2: "127.0.0.1:2", 3: "127.0.0.1:3"}))
    await rm.start()
    follower = ReplicaFetchStream(address, 1, request_timeout_ms=30_000)
    batch = build_batch([(i, b"k%d" % i, b"v" * args.value_bytes, ()) for i in range(args.records)])
    produce = m.ProduceRequest(m.ACKS_LEADER, 5000, (m.ProducePartition("orders", 0, batch),))
    loop = asyncio.get_running_loop()
    counting = _CountingSelector(loop._selector)  # type: ignore[attr-defined]
    loop._selector = counting  # type: ignore[attr-defined]

    def fetch(offset: int) -> m.FetchRequest:
        entry = m.FetchPartition(
            "orders", 0, offset, current_leader_epoch=0, topic_id=TOPIC_ID,
            partition_max_bytes=1 << 26,
        )  # fmt: skip
        return m.FetchRequest(
            (entry,), replica_id=2, replica_epoch=102, max_wait_ms=5000, min_bytes=1,
            max_bytes=1 << 26,
        )  # fmt: skip

    offset = 0
    try:
        await follower.fetch(fetch(0))  # opens the session
        for measured in (False, True):
            rounds = args.rounds if measured else max(1, args.rounds // 5)
            times: list[float] = []
            counting.turns = counting.waits = 0
            cpu, switches = time.process_time(), _switches()
            for _ in range(rounds):
                answer = asyncio.ensure_future(follower.fetch(fetch(offset)))
                if args.pause_ms:
                    await asyncio.sleep(args.pause_ms / 1000)
                started = time.perf_counter()
                (result,) = (await rm.produce(produce)).partitions
                assert result.error is None, result.error
                await answer
                times.append(time.perf_counter() - started)
                offset += args.records
            cpu = time.process_time() - cpu
            switches = _switches() - switches
        times.sort()
        return (
            f"CPU per round {cpu / rounds * 1e6:.0f} us, append to answer p50"
            f" {times[len(times) // 2] * 1e6:.0f} us, loop turns per round"
            f" {counting.turns / rounds:.2f} ({counting.waits / rounds:.2f} waiting),"
            f" context switches per round {switches / rounds:.2f}"
        )
    finally:
        await follower.aclose()
        await rm.stop()
        await server.stop(None)
        logs.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--records", type=int, default=48)
    parser.add_argument("--value-bytes", type=int, default=1024)
    parser.add_argument("--pause-ms", type=float, default=0.0)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    for run in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="replica-exchange-") as root:
            print(f"run {run + 1}: {asyncio.run(_run(args, Path(root)))}")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
