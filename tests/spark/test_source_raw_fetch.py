"""`RawFetchChannels` without a cluster (its answers are covered by every read test): a call to
a broker that is down fails fast with gRPC's UNAVAILABLE (no wait for the deadline), and
after `close` a fetch raises `ClientClosedError`."""

from __future__ import annotations

import asyncio
import socket

import grpc
import pytest

from replog.errors import ClientClosedError
from replog.replication import messages as m
from replog.spark.raw_fetch import RawFetchChannels

REQUEST = m.FetchRequest((m.FetchPartition("t", 0, 0, 1024),), max_wait_ms=0)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens once the socket is closed


def test_a_broker_that_is_down_fails_fast_and_closed_channels_refuse() -> None:
    async def scenario() -> None:
        channels = RawFetchChannels(request_timeout_ms=30_000, client_id="test")
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await asyncio.wait_for(
                channels.fetch(f"127.0.0.1:{_closed_port()}", REQUEST), timeout=20
            )
        assert failed.value.code() == grpc.StatusCode.UNAVAILABLE
        await channels.close()
        with pytest.raises(ClientClosedError, match="closed"):
            await channels.fetch("127.0.0.1:1", REQUEST)

    asyncio.run(scenario())
