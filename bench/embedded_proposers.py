"""One replog node with its proposers inside the process: how an embedding application, or
the quorum controller itself, proposes to the metadata log (no client RPC per proposal).

    python -P bench/embedded_proposers.py CONFIG PROPOSERS SECONDS RESULT_JSON

(-P keeps bench/ off the front of sys.path: bench/timeline.py would shadow the package.)

It runs the node from its server.properties like `replog node`. Once this node leads and has
committed in its epoch, PROPOSERS tasks each propose one 100-byte record at a time through the
Raft driver (`append_and_wait`: returns when committed) for SECONDS, and the node writes
{"commits", "seconds", "latencies_s"} to RESULT_JSON. Nodes that do not lead just serve.
bench/raft_commit.py starts three of these per trial and stops them afterwards.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

from replog.config import parse_properties
from replog.server.config.node_config import NodeConfig
from replog.server.process.node import Node

RECORD_SIZE = 100


async def run(config_path: str, proposers: int, seconds: float, result_path: str) -> None:
    with open(config_path, encoding="utf-8") as f:
        config = NodeConfig.from_properties(parse_properties(f.read(), source=config_path))
    node = Node(config)
    serving = asyncio.create_task(node.serve())
    driver = node.driver
    while not (driver.status().role == "leader" and driver.status().high_watermark > 0):
        if serving.done() or os.path.exists(result_path):
            await serving  # another node led and finished the trial, or this node failed
            return
        await asyncio.sleep(0.02)
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    async def proposer(index: int) -> None:
        sequence = 0
        while (start := time.perf_counter()) < deadline:
            record = f"{index:04d}-{sequence:012d}-".encode().ljust(RECORD_SIZE, b"x")
            sequence += 1
            await driver.append_and_wait([record])
            latencies.append(time.perf_counter() - start)

    began = time.perf_counter()
    await asyncio.gather(*(proposer(i) for i in range(proposers)))
    elapsed = time.perf_counter() - began
    with open(result_path + ".tmp", "w", encoding="utf-8") as f:
        json.dump({"commits": len(latencies), "seconds": elapsed, "latencies_s": latencies}, f)
    os.replace(result_path + ".tmp", result_path)
    await serving


if __name__ == "__main__":
    config_path, proposers, seconds, result_path = sys.argv[1:5]
    asyncio.run(run(config_path, int(proposers), float(seconds), result_path))
