"""A consumer's `FetchStream` call that the broker ends without an error (a stream closed
under a waiting fetch): the next fetch is Kafka's NETWORK_EXCEPTION, retriable, naming the
broker and the call, never MalformedResponseError (nothing malformed came), and the fetch
after it opens another call."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from replog.errors import NetworkError
from replog.pb import broker_pb2 as pb
from replog.pb import broker_pb2_grpc
from replog.record import build_batch
from replog.replication import messages as m
from replog.wire import broker_codec as codec
from replog.wire.broker_client import BrokerClient

BATCH = build_batch([(0, b"k", b"v", ())])


class EndingLeader(broker_pb2_grpc.BrokerServicer):
    """Answers each FetchStream call's first fetch with BATCH, then ends the call."""

    def __init__(self) -> None:
        self.streams = 0

    async def FetchStream(
        self, requests: AsyncIterator[pb.FetchRequest], context: Any
    ) -> AsyncIterator[pb.FetchResponse]:
        self.streams += 1
        async for request in requests:
            decoded = codec.fetch_request_from_proto(request)
            answer = m.FetchResponse(
                tuple(
                    m.FetchPartitionResult(p.topic, p.partition, high_watermark=1, records=BATCH)
                    for p in decoded.partitions
                )
            )
            yield pb.FetchResponse.FromString(codec.fetch_response_to_wire(answer))
            return


@pytest.mark.asyncio
async def test_a_stream_the_leader_ended_is_the_peer_closing_it_not_a_malformed_answer() -> None:
    servicer = EndingLeader()
    server = grpc.aio.server()
    broker_pb2_grpc.add_BrokerServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]
    address = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
    await server.start()
    client = BrokerClient(address, request_timeout_ms=5000)
    stream = client.fetch_stream(sessions=True)
    request = m.FetchRequest((m.FetchPartition("t", 0, 0),), replica_id=-1)
    try:
        assert (await stream.fetch(request)).partitions[0].records == BATCH
        call = stream._call
        async with asyncio.timeout(5):
            while not call.done():  # ended before the next write: no race inside gRPC
                await asyncio.sleep(0.01)
        with pytest.raises(NetworkError) as ended:
            await stream.fetch(request)
        assert ended.value.retriable
        assert str(ended.value) == (
            f"broker at {address} ended the FetchStream call without an error while a fetch "
            "waited for an answer (the peer closed the stream)"
        )
        assert (await stream.fetch(request)).partitions[0].records == BATCH
        assert servicer.streams == 2
    finally:
        stream.close()
        await client.close()
        await server.stop(grace=None)
