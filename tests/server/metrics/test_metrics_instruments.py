"""The hot-path instruments: per-node registries, the data plane's counters (driven through a
real ReplicaManager pair), and the request interceptor on a real grpc.aio server."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from replog.quorum.metadata.records import PartitionChangeRecord
from replog.server.metrics.instruments import BrokerCounters, NodeMetrics
from replog.server.metrics.request_interceptor import (
    RequestMetricsInterceptor,
    split_method,
    status_name,
)
from replog.testing import ManualClock
from tests.eventually import eventually
from tests.metadata.metadata_helpers import replayed
from tests.server.data_plane.test_replica_manager import (
    TID,
    Node,
    batch,
    consumer_fetch,
    produce,
    replicate,
    two_nodes,
)


def test_each_node_has_its_own_registry() -> None:
    first, second = NodeMetrics(), NodeMetrics()  # would raise on a shared registry
    first.broker.produced("t", 100, 3)
    assert first.registry.get_sample_value("replog_bytes_in_total", {"topic": "t"}) == 100
    assert second.registry.get_sample_value("replog_bytes_in_total", {"topic": "t"}) is None


def test_kafka_requests_are_timed_by_api_name() -> None:
    metrics = NodeMetrics()
    metrics.kafka_request(1, 0.0003)
    metrics.kafka_request(1, 0.6)
    metrics.kafka_request(2, 0.0002)
    metrics.kafka_request(999, 0.0001)  # a key no spec defines still counts

    def get(name: str, api: str, **labels: str) -> float | None:
        return metrics.registry.get_sample_value(name, {"api": api, **labels})

    base = "replog_kafka_request_duration_seconds"
    assert get(f"{base}_count", "Fetch") == 2
    assert get(f"{base}_bucket", "Fetch", le="0.5") == 1  # the long-polled one is above
    assert get(f"{base}_sum", "Fetch") == pytest.approx(0.6003)
    assert get(f"{base}_count", "ListOffsets") == 1
    assert get(f"{base}_count", "API key 999") == 1


def test_broker_counters() -> None:
    counters = BrokerCounters()
    counters.produced("t", 100, 3)
    counters.produced("t", 50, 2)
    counters.produced("u", 1, 1)
    counters.sent("t", 70)
    counters.isr_changed(3, 2)
    counters.isr_changed(2, 3)
    counters.isr_changed(2, 3)
    counters.isr_changed(2, 2)  # a membership swap of equal size is neither

    def get(name: str, **labels: str) -> float | None:
        return counters.registry.get_sample_value(name, labels)

    assert get("replog_bytes_in_total", topic="t") == 150
    assert get("replog_messages_in_total", topic="t") == 5
    assert get("replog_messages_in_total", topic="u") == 1
    assert get("replog_bytes_out_total", topic="t") == 70
    assert get("replog_isr_shrinks_total") == 1
    assert get("replog_isr_expands_total") == 2


@pytest.mark.asyncio
async def test_replica_manager_counts_produce_fetch_replication_and_isr_changes(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    leader, follower, _ = two_nodes(tmp_path, clock)

    def get(node: Node, name: str, **labels: str) -> float | None:
        return node.rm.counters.registry.get_sample_value(name, labels)

    records = batch(3)
    await produce(leader, records)
    assert get(leader, "replog_bytes_in_total", topic="t") == len(records)
    assert get(leader, "replog_messages_in_total", topic="t") == 3
    # The follower fetches it: replication bytes in on the follower, no bytes out (not a consumer).
    await replicate(follower, leader)
    assert get(follower, "replog_replication_bytes_in_total") == len(records)
    assert get(leader, "replog_bytes_out_total", topic="t") is None
    await replicate(follower, leader)  # the HW reaches 3
    result = await consumer_fetch(leader, 0)
    assert len(result.records) == len(records)
    assert get(leader, "replog_bytes_out_total", topic="t") == len(records)
    await consumer_fetch(leader, 3)  # nothing to send: nothing counted
    assert get(leader, "replog_bytes_out_total", topic="t") == len(records)
    # ISR: counted when the controller accepts the change, not when it is proposed.
    await produce(leader, batch(1, tag=1))  # the follower falls behind, then out
    leader.rm.tick(clock.advance(30001))
    (shrink,) = leader.rm.pending_isr_changes()
    assert get(leader, "replog_isr_shrinks_total") == 0
    leader.rm.on_isr_change_result(shrink, None, (1,), 0, shrink.partition_epoch + 1)
    assert get(leader, "replog_isr_shrinks_total") == 1
    await replicate(follower, leader)  # gets the new batch
    await replicate(follower, leader)  # its fetch offset shows it caught up
    (expand,) = leader.rm.pending_isr_changes()
    leader.rm.on_isr_change_result(expand, None, (1, 2), 0, expand.partition_epoch + 1)
    assert get(leader, "replog_isr_expands_total") == 1
    assert leader.rm.purgatory_sizes() == {"produce": 0, "fetch": 0}


def test_method_and_status_names() -> None:
    assert split_method("/replog.pb.broker.Broker/Produce") == ("Broker", "Produce")
    assert split_method("/Solo/Call") == ("Solo", "Call")
    assert status_name(None) == "OK"
    assert status_name(grpc.StatusCode.NOT_FOUND) == "NOT_FOUND"
    assert status_name(5) == "NOT_FOUND"
    assert status_name("odd") == "UNKNOWN"


def _test_service(hanging: list[str]) -> grpc.GenericRpcHandler:
    """The probe service; `hanging` hears of each call that starts to wait for its cancel."""

    async def echo(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        await asyncio.sleep(0.02)
        return request

    async def refuse(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        await context.abort(grpc.StatusCode.NOT_FOUND, "no such thing")
        raise AssertionError("abort returns no value")

    async def crash(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        raise RuntimeError("a bug")

    async def echoes(
        requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[bytes]:
        async for request in requests:
            if request == b"stop":
                await context.abort(grpc.StatusCode.OUT_OF_RANGE, "told to stop")
            if request == b"hang":
                hanging.append("Echoes")
                await asyncio.Event().wait()  # until the caller cancels
            await asyncio.sleep(0.02)
            yield request

    async def hang(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        hanging.append("Hang")
        await asyncio.Event().wait()  # until the caller cancels
        raise AssertionError("never set")

    handlers = {
        name: grpc.unary_unary_rpc_method_handler(behavior)
        for name, behavior in (("Echo", echo), ("Refuse", refuse), ("Crash", crash), ("Hang", hang))
    }
    handlers["Echoes"] = grpc.stream_stream_rpc_method_handler(echoes)
    return grpc.method_handlers_generic_handler("test.pkg.Probe", handlers)


@contextlib.asynccontextmanager
async def probe_channel(
    metrics: NodeMetrics, hanging: list[str] | None = None
) -> AsyncIterator[grpc.aio.Channel]:
    """A channel to a grpc.aio server of the probe service behind the interceptor (`hanging`:
    `_test_service`)."""
    server = grpc.aio.server(interceptors=[RequestMetricsInterceptor(metrics)])
    server.add_generic_rpc_handlers((_test_service([] if hanging is None else hanging),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield channel
    finally:
        await server.stop(None)


@pytest.mark.asyncio
async def test_interceptor_counts_and_times_every_call_by_code() -> None:
    metrics = NodeMetrics()
    async with probe_channel(metrics) as channel:
        echo = channel.unary_unary("/test.pkg.Probe/Echo")
        refuse = channel.unary_unary("/test.pkg.Probe/Refuse")
        crash = channel.unary_unary("/test.pkg.Probe/Crash")
        for _ in range(3):
            assert await echo(b"hi") == b"hi"
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await refuse(b"x")
        assert refused.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.aio.AioRpcError) as crashed:
            await crash(b"x")
        assert crashed.value.code() == grpc.StatusCode.UNKNOWN
        # A stream: each answer is one request; the one it ends on counts with its code.
        stream = channel.stream_stream("/test.pkg.Probe/Echoes")()
        for _ in range(4):
            await stream.write(b"hi")
            assert await stream.read() == b"hi"
        await stream.write(b"stop")
        with pytest.raises(grpc.aio.AioRpcError) as stopped:
            await stream.read()
        assert stopped.value.code() == grpc.StatusCode.OUT_OF_RANGE

    def get(name: str, **labels: str) -> float | None:
        return metrics.registry.get_sample_value(name, labels)

    probe = {"service": "Probe"}
    assert get("replog_requests_total", method="Echo", code="OK", **probe) == 3
    assert get("replog_requests_total", method="Refuse", code="NOT_FOUND", **probe) == 1
    assert get("replog_requests_total", method="Crash", code="UNKNOWN", **probe) == 1
    assert get("replog_request_duration_seconds_count", method="Echo", **probe) == 3
    total = get("replog_request_duration_seconds_sum", method="Echo", **probe)
    assert total is not None and 0.06 <= total < 3
    # Below 10 ms: none of the three 20 ms calls.
    assert get("replog_request_duration_seconds_bucket", method="Echo", le="0.01", **probe) == 0
    assert get("replog_requests_total", method="Echoes", code="OK", **probe) == 4
    assert get("replog_requests_total", method="Echoes", code="OUT_OF_RANGE", **probe) == 1
    assert get("replog_request_duration_seconds_count", method="Echoes", **probe) == 5
    assert get("replog_request_duration_seconds_bucket", method="Echoes", le="0.01", **probe) == 1


@pytest.mark.asyncio
async def test_interceptor_counts_a_call_the_caller_cancelled() -> None:
    metrics = NodeMetrics()

    def get(name: str, **labels: str) -> float | None:
        return metrics.registry.get_sample_value(name, {"service": "Probe", **labels})

    async def counted(method: str, code: str) -> float | None:
        # The server learns of the cancel a moment after the caller.
        await eventually(
            lambda: get("replog_requests_total", method=method, code=code) is not None,
            f"{method} counted {code}",
        )
        return get("replog_requests_total", method=method, code=code)

    hanging: list[str] = []
    async with probe_channel(metrics, hanging) as channel:
        call = channel.unary_unary("/test.pkg.Probe/Hang")(b"x")
        await eventually(lambda: hanging == ["Hang"], "the handler is waiting")
        call.cancel()
        assert await counted("Hang", "CANCELLED") == 1
        # A stream: the answered request counts OK, the one it was cancelled on CANCELLED.
        stream = channel.stream_stream("/test.pkg.Probe/Echoes")()
        await stream.write(b"hi")
        assert await stream.read() == b"hi"
        await stream.write(b"hang")
        await eventually(lambda: hanging == ["Hang", "Echoes"], "the stream's handler is waiting")
        stream.cancel()
        assert await counted("Echoes", "CANCELLED") == 1
    assert get("replog_requests_total", method="Echoes", code="OK") == 1
    assert get("replog_request_duration_seconds_count", method="Hang") == 1
    assert get("replog_request_duration_seconds_count", method="Echoes") == 2


@pytest.mark.asyncio
async def test_an_isr_change_learned_from_metadata_first_counts_once(tmp_path: Path) -> None:
    clock = ManualClock()
    leader, _, image = two_nodes(tmp_path, clock)
    await produce(leader, batch())
    leader.rm.tick(clock.advance(30001))
    (shrink,) = leader.rm.pending_isr_changes()
    leader.rm.apply_image(replayed(image, PartitionChangeRecord(TID, 0, isr=(1,))))
    leader.rm.on_isr_change_result(shrink, None, (1,), 0, 1)  # the late answer
    registry = leader.rm.counters.registry
    assert registry.get_sample_value("replog_isr_shrinks_total") == 1
    assert registry.get_sample_value("replog_isr_expands_total") == 0
