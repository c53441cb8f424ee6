"""The proxies' attribution of a connection to the process that opened it."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator

import pytest
from socket_owner import _table_inode, connecting_inode, owner


@pytest.fixture
def sockets() -> Iterator[list[socket.socket]]:
    opened: list[socket.socket] = []
    yield opened
    for each in opened:
        each.close()


def connected(
    sockets: list[socket.socket], family: int, listen_at: str, dial: str
) -> socket.socket:
    server = socket.socket(family)
    server.bind((listen_at, 0))
    server.listen()
    client = socket.socket(family)
    client.connect((dial, server.getsockname()[1]))
    accepted, _ = server.accept()
    sockets.extend((server, client, accepted))
    return client


@pytest.mark.parametrize(
    ("family", "listen_at", "dial"),
    [
        (socket.AF_INET, "127.0.0.2", "127.0.0.2"),
        (socket.AF_INET6, "::", "::ffff:127.0.0.2"),  # dual stack, as gRPC dials IPv4
        (socket.AF_INET6, "::1", "::1"),
    ],
)
def test_the_connecting_socket_and_its_process_are_found(
    sockets: list[socket.socket], family: int, listen_at: str, dial: str
) -> None:
    client = connected(sockets, family, listen_at, dial)
    local, remote = client.getsockname()[:2], client.getpeername()[:2]
    inode = connecting_inode(local, remote)
    assert inode == os.fstat(client.fileno()).st_ino
    assert _table_inode(local, remote) == inode  # the fallback agrees
    assert owner(inode, {"other": 1, "this test": os.getpid()}) == "this test"


def test_no_such_connection_is_none() -> None:
    assert connecting_inode(("127.0.0.1", 1), ("127.0.0.2", 2)) is None
