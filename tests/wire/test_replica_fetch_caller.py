"""ReplicaFetchCaller, the shared caller side of a replica fetch connection, on a recording
transport: the greeting names the caller; an exchange writes its frame and returns the very
payload delivered; a frame answering no awaited request is `MalformedResponseError`; a refusal
is its Kafka error; any failure closes the socket and fails every later exchange with it; a
lost connection is `NetworkError` saying how much of an answer was read."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest

from replog.errors import MalformedResponseError, NetworkError, NotLeaderOrFollowerError
from replog.wire import replica_fetch_wire as wire
from replog.wire.framed_wire import GREETING_BYTES
from replog.wire.replica_fetch_caller import ReplicaFetchCaller

pytestmark = pytest.mark.asyncio

WHERE = "the listener at h:1"
_HEADER = struct.Struct(">II")


class _Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.closed = False

    def write(self, data: Any) -> None:
        self.written += data

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default  # no socket: keep_alive has nothing to set


def _caller() -> tuple[ReplicaFetchCaller[memoryview], _Transport]:
    caller: ReplicaFetchCaller[memoryview] = ReplicaFetchCaller(WHERE, 7)
    transport = _Transport()
    caller.connection_made(transport)
    return caller, transport


async def _started(caller: ReplicaFetchCaller[memoryview], sequence: int) -> asyncio.Task[Any]:
    task = asyncio.ensure_future(caller.exchange(sequence, b"request"))
    await asyncio.sleep(0)  # the frame is written, the answer awaited
    return task


async def test_greets_with_the_caller_id_and_returns_the_payload_delivered() -> None:
    caller, transport = _caller()
    assert wire.FORMAT.parse_greeting(bytes(transport.written[:GREETING_BYTES])) == 7
    task = await _started(caller, 3)
    frame = transport.written[GREETING_BYTES:]
    assert _HEADER.unpack(frame[: _HEADER.size]) == (4 + len(b"request"), 3)
    assert frame[_HEADER.size :] == b"request"
    payload = memoryview(bytearray(b"answer"))
    caller._answer_for(3)
    caller._deliver(3, payload)
    assert await task is payload  # handed over as read: no copy
    assert not caller.failed and not transport.closed


@pytest.mark.parametrize("sequence", [4, 2 | wire.REFUSAL_BIT])
async def test_a_frame_answering_another_request_is_malformed(sequence: int) -> None:
    caller, _ = _caller()
    task = await _started(caller, 3)
    with pytest.raises(MalformedResponseError, match=f"{WHERE} answered request"):
        caller._answer_for(sequence)
    task.cancel()


async def test_a_frame_when_nothing_is_awaited_is_malformed() -> None:
    caller, _ = _caller()
    with pytest.raises(MalformedResponseError, match="never sent or answered already"):
        caller._answer_for(1)


async def test_a_refusal_fails_this_exchange_and_every_later_one_and_closes() -> None:
    caller, transport = _caller()
    task = await _started(caller, 5)
    refusal = wire.refusal(5, NotLeaderOrFollowerError("not the leader"))
    caller._answer_for(5 | wire.REFUSAL_BIT)
    caller._deliver(5 | wire.REFUSAL_BIT, memoryview(refusal[_HEADER.size :]))
    with pytest.raises(NotLeaderOrFollowerError, match=f"{WHERE} refused the fetch") as first:
        await task
    assert caller.failed and transport.closed
    with pytest.raises(NotLeaderOrFollowerError) as later:
        await caller.exchange(6, b"again")
    assert later.value is first.value


@pytest.mark.parametrize(
    ("read", "said"), [(None, "closed the connection: gone"), (0, "with 0 bytes of an answer")]
)
async def test_a_lost_connection_is_a_network_error_saying_how_far_it_got(
    read: int | None, said: str
) -> None:
    caller, transport = _caller()
    task = await _started(caller, 1)
    caller._lost(ConnectionResetError("gone"), read)
    with pytest.raises(NetworkError, match=said):
        await task
    assert caller.failed and transport.closed
    with pytest.raises(NetworkError, match=said):
        await caller.exchange(2, b"again")
