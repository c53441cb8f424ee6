"""A controller client refused by a node that is not listening yet is answered soon after the
node serves: within Kafka's reconnect backoff (the client's retry backoff, at most 1 s), not
when gRPC's own reconnection of the refused channel is read. Under gRPC's polling engine (the
test session's) nothing reads that for a blocking channel but gRPC's backup poller, every
5 s: a kept channel answers 5-10 s after the node serves (docs/reliability.md, "Admin client
against a starting node"). grpc.aio's poller thread reads an asyncio channel's at once; the
asyncio client is held to the same bound.

The node is a fake Controller service in a process of its own (`fake_controller.py` run as a
script): a gRPC server in the test's own process would have its threads poll every socket of
the process, the client's reconnection among them, and hide what a separate process (the
CLI's against a node) sees.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest

from replog.admin.controller_client import AsyncControllerClient, ControllerClient
from replog.errors import KafkaTimeoutError
from tests.local_ports import free_port

FAKE_CONTROLLER = Path(__file__).with_name("fake_controller.py")
# How long after the node serves the first call may take at most: the client's backoff (1 s)
# and a call, with room for a loaded machine. A blocking channel kept after the refusals
# answers more than 5 s after the node serves: the refusal of the reconnection under way is
# read at one tick of the backup poller, the retry's success at the next.
ANSWERED_WITHIN_S = 5.0


def _start_node(port: int) -> subprocess.Popen[str]:
    """The fake node on `port`, returned once its server has started."""
    node = subprocess.Popen(
        [sys.executable, str(FAKE_CONTROLLER), str(port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert node.stdout is not None
    said = node.stdout.readline().strip()
    if said != "serving":
        _stop(node)
        raise AssertionError(f"the fake node said {said!r}, not 'serving'")
    return node


def _stop(node: subprocess.Popen[str]) -> None:
    """Close its stdin (it stops), wait for it, kill it if it does not."""
    assert node.stdin is not None and node.stdout is not None
    node.stdin.close()
    try:
        node.wait(30)
    except subprocess.TimeoutExpired:
        node.kill()
        node.wait()
    node.stdout.close()


def test_a_blocking_client_refused_before_its_node_listens_is_answered_soon_after() -> None:
    port = free_port()
    # Kafka's backoffs (the defaults): 100 ms doubling to 1 s between rounds.
    with ControllerClient(f"127.0.0.1:{port}", request_timeout_s=2.0) as client:
        with pytest.raises(KafkaTimeoutError, match="connection refused"):
            client.describe_cluster(timeout_s=1.0)  # several refused attempts
        node = _start_node(port)
        try:
            served = time.monotonic()
            client.describe_cluster(timeout_s=60)
            waited = time.monotonic() - served
        finally:
            _stop(node)
    assert waited < ANSWERED_WITHIN_S, f"answered {waited:.2f} s after the node served"


def test_an_asyncio_client_refused_before_its_node_listens_is_answered_soon_after() -> None:
    port = free_port()

    async def scenario() -> float:
        async with AsyncControllerClient(f"127.0.0.1:{port}", request_timeout_s=2.0) as client:
            with pytest.raises(KafkaTimeoutError, match="connection refused"):
                await client.describe_cluster(timeout_s=1.0)
            node = await asyncio.to_thread(_start_node, port)
            try:
                served = time.monotonic()
                await client.describe_cluster(timeout_s=60)
                return time.monotonic() - served
            finally:
                await asyncio.to_thread(_stop, node)

    waited = asyncio.run(scenario())
    assert waited < ANSWERED_WITHIN_S, f"answered {waited:.2f} s after the node served"
