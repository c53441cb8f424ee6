"""`ReceiveLowWater` on a real loopback TCP connection: the mark set is the socket's and decides
when the reader is woken; a mark equal to the last one makes no system call; the first failed
`setsockopt` turns marking off for the socket; where the option is not kept (not Linux),
nothing is set."""

from __future__ import annotations

import select
import socket
import sys
from collections.abc import Iterator

import pytest

from replog.wire import receive_low_water
from replog.wire.receive_low_water import DEFAULT_MARK, ReceiveLowWater

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="the mark is kept on Linux only")


class CountingSocket(socket.socket):
    """A socket that counts the `setsockopt` calls made on it."""

    setsockopt_calls = 0

    def setsockopt(self, *args: object) -> None:  # type: ignore[override]
        self.setsockopt_calls += 1
        super().setsockopt(*args)  # type: ignore[arg-type]


@pytest.fixture
def connection() -> Iterator[tuple[CountingSocket, socket.socket]]:
    """(the reading end, counted; the writing end) of a loopback TCP connection."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        writer = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
    reader = CountingSocket(fileno=accepted.detach())
    try:
        yield reader, writer
    finally:
        reader.close()
        writer.close()


def _mark_of(sock: socket.socket) -> int:
    return int(sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT))


def _readable(sock: socket.socket) -> bool:
    return bool(select.select([sock], [], [], 0)[0])


def _readable_soon(sock: socket.socket) -> bool:
    # Loopback bytes are queued when `sendall` returns; the timeout is room, not a pace.
    return bool(select.select([sock], [], [], 5.0)[0])


@linux_only
def test_the_mark_set_is_the_sockets_and_wakes_the_reader_only_once_reached(
    connection: tuple[CountingSocket, socket.socket],
) -> None:
    reader, writer = connection
    low_water = ReceiveLowWater(reader)
    assert low_water.kept and low_water.mark == DEFAULT_MARK
    low_water.set(10)
    assert _mark_of(reader) == 10 and low_water.mark == 10
    writer.sendall(b"x" * 9)
    assert not _readable(reader)  # 9 bytes queued, 10 asked for
    writer.sendall(b"x")
    assert _readable_soon(reader)
    low_water.set(DEFAULT_MARK)
    assert _mark_of(reader) == DEFAULT_MARK


@linux_only
def test_a_mark_equal_to_the_last_one_makes_no_system_call(
    connection: tuple[CountingSocket, socket.socket],
) -> None:
    reader, _ = connection
    low_water = ReceiveLowWater(reader)
    low_water.set(DEFAULT_MARK)  # the kernel's already
    assert reader.setsockopt_calls == 0
    for mark in (100, 100, 100, 7, 7, 100):
        low_water.set(mark)
    assert reader.setsockopt_calls == 3
    assert _mark_of(reader) == 100


@linux_only
def test_the_first_failed_call_turns_marking_off_for_the_socket(
    connection: tuple[CountingSocket, socket.socket],
) -> None:
    reader, _ = connection
    low_water = ReceiveLowWater(reader)
    low_water.set(50)
    reader.close()  # setsockopt on it fails (EBADF) from now on
    low_water.set(60)
    assert not low_water.kept and low_water.mark == 50
    calls = reader.setsockopt_calls
    low_water.set(70)
    low_water.set(DEFAULT_MARK)
    assert reader.setsockopt_calls == calls == 2  # 50, then the failed 60; none after


def test_without_the_option_nothing_is_set(
    connection: tuple[CountingSocket, socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(receive_low_water, "_OPTION", None)  # as on a system other than Linux
    reader, _ = connection
    low_water = ReceiveLowWater(reader)
    low_water.set(100)
    assert not low_water.kept and low_water.mark == DEFAULT_MARK
    assert reader.setsockopt_calls == 0


def test_no_socket_is_nothing_to_mark() -> None:
    low_water = ReceiveLowWater(None)
    low_water.set(100)
    assert not low_water.kept and low_water.mark == DEFAULT_MARK
