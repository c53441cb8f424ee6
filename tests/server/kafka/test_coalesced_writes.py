"""`framed_wire.CoalescedWrites` against a recording transport: the frames of one event-loop
turn leave in one write, in the order written, in the next turn; a turn's frames are dropped
once the socket is closing, never written to a closed transport."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest

from replog.wire.framed_wire import CoalescedWrites


class RecordingTransport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closing = False

    def write(self, data: bytes) -> None:
        assert not self.closing, "written after close"
        self.writes.append(data)

    def is_closing(self) -> bool:
        return self.closing


def coalesced() -> tuple[RecordingTransport, CoalescedWrites]:
    transport = RecordingTransport()
    return transport, CoalescedWrites(cast(asyncio.WriteTransport, transport))


@pytest.mark.asyncio
async def test_one_turns_frames_leave_in_one_write_in_order_the_next_turn() -> None:
    transport, out = coalesced()
    for data in (b"a", b"bb", b"c"):
        out.write(data)
    assert transport.writes == []  # not within the turn
    await asyncio.sleep(0)
    assert transport.writes == [b"abbc"]
    out.write(b"d")  # a later turn: a write of its own
    await asyncio.sleep(0)
    assert transport.writes == [b"abbc", b"d"]


@pytest.mark.asyncio
async def test_frames_of_a_turn_whose_socket_closes_are_dropped() -> None:
    transport, out = coalesced()
    out.write(b"a")
    transport.closing = True
    await asyncio.sleep(0)
    out.write(b"b")
    await asyncio.sleep(0)
    assert transport.writes == []
