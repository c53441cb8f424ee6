"""The Kafka listener's asyncio shell (`kafka_listener`) over loopback sockets, with handlers
whose completion the test controls:

- pipelined requests are answered in request order though their handlers finish in reverse;
- a handler that answers at once is answered with no task, unless an earlier request of the
  connection is still being handled (then it is asked after it, in a task); one that refuses
  at once closes the connection after the answers before it, even those ready while the send
  buffer was full;
- a client that sends and never reads is read no further once `queued.max.requests` answers
  wait (the handlers stop being called), and every other connection is still served;
- an idle connection is closed after `connections.max.idle.ms`, and one whose client reads a
  large answer slowly is not while the bytes move;
- a bad frame or a refused request behind requests still being handled closes the connection
  only after their answers (nothing after it is handled), waiting no longer than
  `close_wait_ms`; a client that shuts down its sending side still reads its answers;
- a handler that fails closes its connection, logged with the cause (so does one whose own
  wait is cancelled: its connection would otherwise wait for that answer forever);
- each answered request is reported with its API and the time from its read to its answer;
- every accepted socket has Nagle's algorithm off (TCP_NODELAY), so that an answer leaves when
  written, not once the client has acknowledged the answer before it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
from collections.abc import AsyncIterator, Awaitable
from typing import TypeVar

import pytest

from replog.errors import InvalidRequestError
from replog.kafka.connection import Answer, KafkaRequest
from replog.kafka.messages.metadata_request import MetadataRequest
from replog.kafka.messages.metadata_response import MetadataResponse, MetadataResponseBroker
from replog.kafka.messages.request_header import RequestHeader
from replog.kafka.protocol.codec import Message
from replog.kafka.protocol.framing import decode_response, encode_request
from replog.server.kafka.kafka_listener import KafkaListener, KafkaListenerConfig, RequestObserver
from tests.eventually import eventually

T = TypeVar("T")


class Handlers:
    """Metadata answered once the test releases its correlation id (or at once if `hold` is
    false); correlation id 666 fails, 667 is refused (a typed error)."""

    served = {3: (0, 13), 18: (0, 4)}

    def __init__(self, *, hold: bool, brokers: int = 0) -> None:
        self.hold = hold
        self.brokers = brokers
        self.called: list[int] = []
        self.release: dict[int, asyncio.Event] = {}

    def gate(self, correlation_id: int) -> asyncio.Event:
        return self.release.setdefault(correlation_id, asyncio.Event())

    async def handle(self, request: KafkaRequest, listener_name: str) -> Message | None:
        self.called.append(request.correlation_id)
        if request.correlation_id == 666:
            raise RuntimeError("the handler broke")
        if request.correlation_id == 667:
            raise InvalidRequestError("isolation_level 7 is neither 0 nor 1")
        if self.hold:
            await self.gate(request.correlation_id).wait()
        return MetadataResponse(
            cluster_id=listener_name,
            brokers=[
                MetadataResponseBroker(node_id=i, host="h" * 200, port=9092)
                for i in range(self.brokers)
            ],
        )


def metadata_frame(correlation_id: int) -> bytes:
    header = RequestHeader(request_api_key=3, request_api_version=12, correlation_id=correlation_id)
    return encode_request(header, MetadataRequest(topics=[]))


async def read_response(reader: asyncio.StreamReader) -> tuple[int, Message]:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    header, body = decode_response(await reader.readexactly(size), 3, 12)
    return header.correlation_id, body


@contextlib.asynccontextmanager
async def listening(
    handlers: Handlers, on_request: RequestObserver | None = None, **config: int
) -> AsyncIterator[KafkaListener]:
    listener = KafkaListener(
        "PLAINTEXT", "127.0.0.1", 0, KafkaListenerConfig(**config), on_request=on_request
    )
    await listener.start(handlers)
    try:
        yield listener
    finally:
        await listener.stop()


async def within(seconds: float, awaitable: Awaitable[T]) -> T:
    async with asyncio.timeout(seconds):
        return await awaitable


@pytest.mark.asyncio
async def test_pipelined_requests_are_answered_in_order_when_handlers_finish_in_reverse() -> None:
    handlers = Handlers(hold=True)
    async with listening(handlers) as listener:
        await pipelined_in_order(listener, handlers)


async def pipelined_in_order(listener: KafkaListener, handlers: Handlers) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
    writer.write(b"".join(metadata_frame(i) for i in range(5)))
    await eventually(lambda: len(handlers.called) == 5, "all five handled at once (pipelined)")
    for i in reversed(range(5)):
        handlers.gate(i).set()
        await asyncio.sleep(0.01)
    answers = [await within(5, read_response(reader)) for _ in range(5)]
    assert [correlation for correlation, _ in answers] == [0, 1, 2, 3, 4]
    assert answers[0][1] == MetadataResponse(cluster_id="PLAINTEXT")
    writer.close()


@pytest.mark.asyncio
async def test_every_accepted_socket_sends_its_answers_without_nagle_delay() -> None:
    async with listening(Handlers(hold=False)) as listener:
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        writer.write(metadata_frame(1))
        await within(5, read_response(reader))
        (connection,) = listener._connections
        assert connection._transport is not None
        accepted = connection._transport.get_extra_info("socket")
        assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        writer.close()


@pytest.mark.asyncio
async def test_a_client_that_never_reads_is_not_read_beyond_the_queue_bound() -> None:
    handlers = Handlers(hold=False, brokers=2000)  # ~450 KB per answer: the buffers fill
    async with listening(handlers, queued_max_requests=4) as listener:
        await never_reads(listener, handlers)


async def never_reads(listener: KafkaListener, handlers: Handlers) -> None:
    _, writer = await asyncio.open_connection("127.0.0.1", listener.port)
    frame = metadata_frame(1)
    for _ in range(2000):  # ~60 KB of requests, answers of ~900 MB if all were served
        writer.write(frame)
    await eventually(lambda: len(handlers.called) > 4, "the first requests handled")
    seen = -1
    while seen != len(handlers.called):  # until the listener stops calling handlers
        seen = len(handlers.called)
        await asyncio.sleep(0.3)
    assert seen < 200, f"{seen} requests handled for a client that reads nothing"
    # Another client is served meanwhile.
    reader2, writer2 = await asyncio.open_connection("127.0.0.1", listener.port)
    writer2.write(metadata_frame(7))
    correlation, _ = await within(5, read_response(reader2))
    assert correlation == 7
    writer.transport.abort()
    writer2.close()


@pytest.mark.asyncio
async def test_an_idle_connection_is_closed(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="replog.server.kafka")
    async with listening(Handlers(hold=False), connections_max_idle_ms=200) as listener:
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        assert await within(5, reader.read(1)) == b""
    assert "idle for connections.max.idle.ms (200 ms): no request" in caplog.text
    writer.close()


@pytest.mark.asyncio
async def test_a_connection_waiting_for_its_answer_is_not_idle_and_one_that_is_closes_later(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="replog.server.kafka")
    handlers = Handlers(hold=True)
    async with listening(handlers, connections_max_idle_ms=200) as listener:
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        writer.write(metadata_frame(1))
        await asyncio.sleep(0.6)  # three idle periods with the request being handled
        handlers.gate(1).set()
        assert (await within(5, read_response(reader)))[0] == 1
        started = asyncio.get_running_loop().time()
        assert await within(5, reader.read(1)) == b""  # then idle from the answer on
        assert asyncio.get_running_loop().time() - started >= 0.15
    assert "idle for connections.max.idle.ms (200 ms): no request" in caplog.text
    writer.close()


@pytest.mark.asyncio
async def test_a_failing_handler_closes_its_connection_with_the_cause_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with listening(Handlers(hold=False)) as listener:
        await handler_fails(listener, caplog)


async def handler_fails(listener: KafkaListener, caplog: pytest.LogCaptureFixture) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
    writer.write(metadata_frame(666))
    assert await within(5, reader.read(1)) == b""
    (record,) = [r for r in caplog.records if r.name == "replog.server.kafka"]
    assert record.levelno == logging.ERROR
    assert "Metadata v12 (correlation id 666) failed: RuntimeError('the handler broke')" in (
        str(record.exc_info[1]) if record.exc_info else ""
    )
    await eventually(lambda: listener.open_connections == 0, "the connection closed")
    writer.close()


@pytest.mark.asyncio
async def test_a_refused_request_closes_its_connection_with_one_warning_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with listening(Handlers(hold=False)) as listener:
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        peer = f"127.0.0.1:{writer.get_extra_info('sockname')[1]}"
        writer.write(metadata_frame(667))
        assert await within(5, reader.read(1)) == b""
        writer.close()
    (record,) = [r for r in caplog.records if r.name == "replog.server.kafka"]
    assert record.levelno == logging.WARNING and record.exc_info is None
    assert record.getMessage() == (
        f"Kafka listener PLAINTEXT: closing connection from {peer}: Metadata v12 (correlation "
        "id 667) refused: isolation_level 7 is neither 0 nor 1"
    )


@pytest.mark.asyncio
async def test_each_answered_request_is_reported_with_its_api_and_time_to_answer() -> None:
    handlers = Handlers(hold=True)
    reported: list[tuple[int, float]] = []
    async with listening(handlers, lambda key, s: reported.append((key, s))) as listener:
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        writer.write(metadata_frame(1) + metadata_frame(2))
        await eventually(lambda: len(handlers.called) == 2, "both handled")
        handlers.gate(2).set()  # answered, but written only after 1
        await eventually(lambda: len(reported) == 1, "the second reported once answered")
        await asyncio.sleep(0.1)
        handlers.gate(1).set()
        await within(5, read_response(reader))
        await within(5, read_response(reader))
        writer.write(metadata_frame(666))  # a failing handler: no answer, not reported
        assert await within(5, reader.read()) == b""
        writer.close()
    assert [key for key, _ in reported] == [3, 3]
    assert reported[0][1] < 0.1 <= reported[1][1]  # the held one includes its wait


@pytest.mark.asyncio
async def test_a_client_that_never_reads_its_answers_is_dropped_after_the_idle_time(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="replog.server.kafka")
    handlers = Handlers(hold=False, brokers=2000)  # ~450 KB per answer: the buffers fill
    async with listening(handlers, queued_max_requests=4, connections_max_idle_ms=300) as listener:
        _, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        writer.transport.set_write_buffer_limits(high=1 << 20)
        for _ in range(200):
            writer.write(metadata_frame(1))
        await eventually(lambda: listener.open_connections == 0, "the connection dropped", 10)
        writer.close()
    assert "idle for connections.max.idle.ms (300 ms): its responses not read" in caplog.text
    assert len(handlers.called) < 200


@pytest.mark.asyncio
async def test_stopping_closes_every_connection_and_ends_the_handlers_waiting() -> None:
    handlers = Handlers(hold=True)
    listener = KafkaListener("PLAINTEXT", "127.0.0.1", 0)
    await listener.start(handlers)
    reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
    writer.write(metadata_frame(1))
    await eventually(lambda: handlers.called == [1], "the request handled")
    await within(5, listener.stop())
    assert listener.open_connections == 0
    with contextlib.suppress(ConnectionError):
        assert await within(5, reader.read()) == b""
    writer.close()


@pytest.mark.asyncio
async def test_requests_pipelined_in_one_write_are_all_answered_in_order() -> None:
    async with listening(Handlers(hold=False)) as listener:
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        writer.write(b"".join(metadata_frame(i) for i in range(50)))
        answers = [await within(5, read_response(reader)) for _ in range(50)]
        assert [correlation for correlation, _ in answers] == list(range(50))
        writer.close()


class Mixed:
    """Correlation ids below 100 are held as `Handlers` holds them (an awaitable); the others
    are answered at once (the response itself), noting whether they were asked inside a task;
    668 is refused at once."""

    served = {3: (0, 13), 18: (0, 4)}

    def __init__(self) -> None:
        self.held = Handlers(hold=True)
        self.asked_in_task: dict[int, bool] = {}

    def handle(self, request: KafkaRequest, listener_name: str) -> Answer:
        if request.correlation_id < 100:
            return self.held.handle(request, listener_name)
        if request.correlation_id == 668:
            raise InvalidRequestError("refused at once")
        self.asked_in_task[request.correlation_id] = asyncio.current_task() is not None
        return MetadataResponse(cluster_id=listener_name)


@pytest.mark.asyncio
async def test_an_answer_given_at_once_is_written_with_no_task_unless_an_earlier_one_waits() -> (
    None
):
    handlers = Mixed()
    async with listening(handlers) as listener:  # type: ignore[arg-type]
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        writer.write(metadata_frame(100))
        assert (await within(5, read_response(reader)))[0] == 100
        assert handlers.asked_in_task == {100: False}
        # Behind a request still handled, the next one's handler is asked after it, in a task.
        writer.write(metadata_frame(1) + metadata_frame(101))
        await eventually(lambda: 101 in handlers.asked_in_task, "101 asked")
        assert handlers.held.called == [1] and handlers.asked_in_task[101] is True
        handlers.held.gate(1).set()
        assert [(await within(5, read_response(reader)))[0] for _ in range(2)] == [1, 101]
        writer.write(metadata_frame(102))
        assert (await within(5, read_response(reader)))[0] == 102
        assert handlers.asked_in_task[102] is False
        writer.close()


@pytest.mark.asyncio
async def test_a_request_refused_at_once_closes_its_connection_with_one_warning_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with listening(Mixed()) as listener:  # type: ignore[arg-type]
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        writer.write(metadata_frame(100) + metadata_frame(668) + metadata_frame(101))
        assert (await within(5, read_response(reader)))[0] == 100  # written before the refusal
        assert await within(5, reader.read()) == b""
        writer.close()
    (record,) = [r for r in caplog.records if r.name == "replog.server.kafka"]
    assert record.levelno == logging.WARNING
    assert "Metadata v12 (correlation id 668) refused: refused at once" in record.getMessage()


class LargeAnswers:
    """Metadata answers of ~450 KB (the send buffer fills), answered at once except
    correlation id 40 (an awaitable, answered shortly after); 668 is refused at once."""

    served = {3: (0, 13), 18: (0, 4)}

    def __init__(self) -> None:
        self.answered_later = False

    def handle(self, request: KafkaRequest, listener_name: str) -> Answer:
        if request.correlation_id == 668:
            raise InvalidRequestError("refused at once")
        answer = MetadataResponse(
            cluster_id=listener_name,
            brokers=[
                MetadataResponseBroker(node_id=i, host="h" * 200, port=9092) for i in range(2000)
            ],
        )
        if request.correlation_id != 40:
            return answer
        return self._later(answer)

    async def _later(self, answer: Message) -> Message:
        await asyncio.sleep(0.01)
        self.answered_later = True
        return answer


@pytest.mark.asyncio
async def test_a_refusal_while_the_send_buffer_is_full_still_sends_the_answers_ready() -> None:
    handlers = LargeAnswers()
    async with listening(handlers) as listener:  # type: ignore[arg-type]
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        writer.write(b"".join(metadata_frame(i) for i in range(41)))  # ~18 MB of answers
        await eventually(lambda: handlers.answered_later, "40 answered (not yet written)")
        await asyncio.sleep(0.05)
        writer.write(metadata_frame(668))
        correlations = []
        while head := await within(10, reader.read(4)):
            body = await within(10, reader.readexactly(struct.unpack(">i", head)[0]))
            correlations.append(struct.unpack(">i", body[:4])[0])
        assert correlations == list(range(41))
        writer.close()


class CancelledInside:
    """Correlation id 1 waits on a future that something else cancels (the handler's own
    wait ends in CancelledError while its task is not cancelled); the others are answered."""

    served = {3: (0, 13), 18: (0, 4)}

    async def _cancelled(self) -> Message:
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_soon(future.cancel)
        return await future

    def handle(self, request: KafkaRequest, listener_name: str) -> Answer:
        if request.correlation_id == 1:
            return self._cancelled()
        return MetadataResponse(cluster_id=listener_name)


@pytest.mark.asyncio
async def test_a_handler_whose_own_wait_is_cancelled_closes_its_connection(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with listening(CancelledInside()) as listener:  # type: ignore[arg-type]
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        writer.write(metadata_frame(0) + metadata_frame(1) + metadata_frame(2))
        assert (await within(5, read_response(reader)))[0] == 0
        assert await within(5, reader.read()) == b""  # not left waiting for answer 1 forever
        writer.close()
    (record,) = [r for r in caplog.records if r.name == "replog.server.kafka"]
    assert record.levelno == logging.ERROR
    assert "Metadata v12 (correlation id 1) failed: CancelledError()" in (
        str(record.exc_info[1]) if record.exc_info else ""
    )


# Frames a listener refuses, with the cause its WARNING line names.
BAD_FRAMES = {
    "unsupported version": (
        struct.pack(">ihhih", 10, 3, 99, 5, -1),
        "Metadata v99 (correlation id 5) is not served (versions 0-13)",
    ),
    "unknown key": (
        struct.pack(">ihhi", 8, 999, 0, 6),
        "API key 999 (correlation id 6) is not served",
    ),
    "oversized": (
        struct.pack(">i", 2_000_000),
        "frame size 2000000 is larger than socket.request.max.bytes (1048576)",
    ),
    "truncated header": (
        struct.pack(">i", 3) + b"\0\3\0",
        "bad request header: ",
    ),
}


def closing_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "replog.server.kafka"]


async def answered_then_closed(
    reader: asyncio.StreamReader, handlers: Handlers, correlation_ids: list[int]
) -> None:
    """Release the held requests, last first: their answers come in order, then the EOF."""
    for correlation_id in reversed(correlation_ids):
        handlers.gate(correlation_id).set()
    answers = [(await within(5, read_response(reader)))[0] for _ in correlation_ids]
    assert answers == correlation_ids
    assert await within(5, reader.read()) == b""


@pytest.mark.asyncio
@pytest.mark.parametrize("what", sorted(BAD_FRAMES))
async def test_a_bad_frame_closes_its_connection_after_answering_the_requests_before_it(
    what: str, caplog: pytest.LogCaptureFixture
) -> None:
    bad, cause = BAD_FRAMES[what]
    handlers = Handlers(hold=True)
    async with listening(handlers, request_bytes_max=1 << 20) as listener:
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        writer.write(metadata_frame(1) + metadata_frame(2) + bad + metadata_frame(3))
        await eventually(lambda: handlers.called == [1, 2], "the requests before it handled")
        await asyncio.sleep(0.05)
        assert listener.open_connections == 1  # their answers are awaited
        await answered_then_closed(reader, handlers, [1, 2])
        writer.close()
    assert handlers.called == [1, 2]  # nothing read after the bad frame
    (line,) = closing_lines(caplog)
    assert cause in line and caplog.records[-1].levelno == logging.WARNING


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("bad", "cause"),
    [
        (667, "Metadata v12 (correlation id 667) refused: isolation_level 7"),
        (666, "closing connection from 127.0.0.1:{port} on an unexpected error"),
    ],
    ids=["refused", "failed"],
)
async def test_a_refused_or_failed_request_closes_its_connection_after_answering_those_before(
    bad: int, cause: str, caplog: pytest.LogCaptureFixture
) -> None:
    handlers = Handlers(hold=True)
    async with listening(handlers) as listener:
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        port = writer.get_extra_info("sockname")[1]
        writer.write(metadata_frame(1) + metadata_frame(bad) + metadata_frame(3))
        await eventually(lambda: bad in handlers.called, f"{bad} handled")
        await asyncio.sleep(0.05)
        await answered_then_closed(reader, handlers, [1])
        writer.close()
    assert handlers.called == [1, bad]  # the request after the bad one never handled
    (line,) = closing_lines(caplog)
    assert cause.format(port=port) in line


@pytest.mark.asyncio
async def test_a_closing_connection_waits_for_the_answers_before_it_no_longer_than_close_wait(
    caplog: pytest.LogCaptureFixture,
) -> None:
    handlers = Handlers(hold=True)
    loop = asyncio.get_running_loop()
    async with listening(handlers, close_wait_ms=200) as listener:
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        peer = f"127.0.0.1:{writer.get_extra_info('sockname')[1]}"
        writer.write(metadata_frame(1) + BAD_FRAMES["unsupported version"][0])
        started = loop.time()
        assert await within(5, reader.read()) == b""  # answer 1 never came
        assert loop.time() - started >= 0.15
        await eventually(lambda: listener.open_connections == 0, "the connection closed")
        writer.close()
    assert closing_lines(caplog) == [
        f"Kafka listener PLAINTEXT: closing connection from {peer} without answering Metadata "
        "v12 (correlation id 1): not answered within close_wait_ms (200 ms) of the close",
        f"Kafka listener PLAINTEXT: closing connection from {peer}: Metadata v99 (correlation "
        "id 5) is not served (versions 0-13)",
    ]


@pytest.mark.asyncio
async def test_a_client_that_shuts_down_its_sending_side_still_reads_its_answers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    handlers = Handlers(hold=True)
    async with listening(handlers) as listener:
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        writer.write(metadata_frame(1) + metadata_frame(2))
        writer.write_eof()
        await eventually(lambda: handlers.called == [1, 2], "both handled")
        await asyncio.sleep(0.05)
        await answered_then_closed(reader, handlers, [1, 2])
        writer.close()
    assert closing_lines(caplog) == []  # an EOF is no fault


class LargeAnswer:
    """One Metadata answer of ~12 MB: more than the socket buffers hold."""

    served = {3: (0, 13), 18: (0, 4)}

    def handle(self, request: KafkaRequest, listener_name: str) -> Answer:
        brokers = [MetadataResponseBroker(node_id=i, host="h" * 30_000, port=1) for i in range(400)]
        return MetadataResponse(cluster_id=listener_name, brokers=brokers)


@pytest.mark.asyncio
async def test_a_client_reading_a_large_answer_slowly_is_not_idle_while_the_bytes_move(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="replog.server.kafka")
    loop = asyncio.get_running_loop()
    async with listening(LargeAnswer(), connections_max_idle_ms=300) as listener:  # type: ignore[arg-type]
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)  # the kernel holds little
        sock.setblocking(False)
        await loop.sock_connect(sock, ("127.0.0.1", listener.port))
        reader, writer = await asyncio.open_connection(sock=sock, limit=16384)
        writer.write(metadata_frame(1))
        (size,) = struct.unpack(">i", await within(5, reader.readexactly(4)))
        started, got = loop.time(), 0
        while got < size:
            chunk = await within(5, reader.read(min(32768, size - got)))
            assert chunk, f"closed after {got} of {size} bytes"
            got += len(chunk)
            await asyncio.sleep(0.002)
        drained_s = loop.time() - started
        assert drained_s > 0.6, f"drained in {drained_s:.2f} s: not slower than the idle time"
        assert await within(5, reader.read(1)) == b""  # then idle
        writer.close()
    assert "idle for connections.max.idle.ms (300 ms): no request" in caplog.text
    assert "its responses not read" not in caplog.text


@pytest.mark.asyncio
async def test_a_client_that_closes_before_its_answers_is_closed_at_close_wait_without_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="replog.server.kafka")
    handlers = Handlers(hold=True)  # a JoinGroup held until the rebalance ends, say
    async with listening(handlers, close_wait_ms=200) as listener:
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        writer.write(metadata_frame(1))
        writer.write_eof()
        assert await within(5, reader.read()) == b""
        await eventually(lambda: listener.open_connections == 0, "the connection closed")
        writer.close()
    (record,) = [r for r in caplog.records if "without answering" in r.getMessage()]
    assert record.levelno == logging.DEBUG  # the client left: no fault of anyone's
    assert "Metadata v12 (correlation id 1)" in record.getMessage()
