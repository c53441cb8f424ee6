"""The fault proxy the link fault tests stand on (tests/cluster/tcp_proxy.py), against an echo
server: what it promises must hold, or those tests prove nothing.

- `slow`: a round trip takes at least the delay each way, and a large stream arrives whole and
  in order (a chunk never overtakes the one before it), also when the delay is lifted while
  chunks are still on their way.
- `corrupt`: the bits that differ are exactly the bits the proxy says it flipped, in the answer
  direction only, at about the rate asked; the same seed flips the same bits.
- `heal` ends both.
"""

from __future__ import annotations

import contextlib
import random
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from tcp_proxy import TEST_PROCESS, TcpProxy

# 2 MiB, many chunks through the proxy, none like another (reordered, they would show).
PAYLOAD = random.Random(1).randbytes(2 << 20)


@pytest.fixture
def echo_address() -> Iterator[str]:
    """A server that sends back what it reads, for as many connections as it gets."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve(connection: socket.socket) -> None:
        # The proxy resets its connections when it closes: the end of the test, not a fault.
        with connection, contextlib.suppress(ConnectionError):
            while data := connection.recv(65536):
                connection.sendall(data)

    stop = threading.Event()
    server.settimeout(0.1)  # (closing a socket does not wake a thread blocked in accept)

    def accept() -> None:
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            connection.settimeout(None)
            threading.Thread(target=serve, args=(connection,), daemon=True).start()

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        acceptor.join(5)
        server.close()


@pytest.fixture
def proxy(echo_address: str) -> Iterator[TcpProxy]:
    proxy = TcpProxy("echo", source_of=lambda peer, ours: TEST_PROCESS)
    proxy.forward_to(echo_address)
    try:
        yield proxy
    finally:
        proxy.close()


def round_trip(
    proxy: TcpProxy, payload: bytes, *, lift_after_s: float | None = None
) -> tuple[float, bytes]:
    """Send `payload` through the proxy and read as many bytes back: (seconds, bytes). With
    `lift_after_s`, sent in 64 KiB pieces 10 ms apart, and every delay lifted that long
    after the first."""
    with socket.create_connection(("127.0.0.1", proxy.port)) as connection:
        started = time.monotonic()

        def send() -> None:
            if lift_after_s is None:
                connection.sendall(payload)
                return
            for start in range(0, len(payload), 65536):
                connection.sendall(payload[start : start + 65536])
                time.sleep(0.01)

        sender = threading.Thread(target=send)
        sender.start()
        if lift_after_s is not None:
            time.sleep(lift_after_s)
            proxy.slow({})
        received = bytearray()
        while len(received) < len(payload):
            chunk = connection.recv(65536)
            assert chunk, f"the proxy closed after {len(received)} of {len(payload)} bytes"
            received += chunk
        sender.join()
        return time.monotonic() - started, bytes(received)


def test_slow_delays_each_way_and_keeps_the_order(proxy: TcpProxy) -> None:
    fast_s, _ = round_trip(proxy, b"ping")
    proxy.slow({TEST_PROCESS: (0.2, 0.3)})
    slow_s, answer = round_trip(proxy, b"ping")
    assert answer == b"ping"
    assert slow_s >= 0.4 > fast_s, (fast_s, slow_s)
    _, echoed = round_trip(proxy, PAYLOAD)
    assert echoed == PAYLOAD
    # Lifted while chunks are delayed: the later chunks wait behind them.
    _, echoed = round_trip(proxy, PAYLOAD, lift_after_s=0.1)
    assert echoed == PAYLOAD
    healed_s, _ = round_trip(proxy, b"ping")
    assert healed_s < 0.4  # below the 0.4 s the delay takes at least


def test_slow_applies_only_to_the_sources_named(proxy: TcpProxy) -> None:
    proxy.slow({TEST_PROCESS + 1: (1.0, 1.0)})
    elapsed_s, answer = round_trip(proxy, b"ping")
    assert answer == b"ping" and elapsed_s < 1.0  # 2 s, were it delayed


def differing_bits(a: bytes, b: bytes) -> int:
    return sum(bin(x ^ y).count("1") for x, y in zip(a, b, strict=True))


def test_corrupt_flips_exactly_the_bits_it_counts_and_heal_stops_it(proxy: TcpProxy) -> None:
    proxy.corrupt([TEST_PROCESS], 1e-4, seed=7)
    _, echoed = round_trip(proxy, PAYLOAD)
    flipped = proxy.flipped_bits
    assert differing_bits(echoed, PAYLOAD) == flipped
    expected = 1e-4 * len(PAYLOAD)  # about 210: only the answers are spoilt
    assert 0.6 * expected < flipped < 1.4 * expected, (flipped, expected)
    # The same seed over the same bytes spoils them the same way.
    proxy.corrupt([TEST_PROCESS], 1e-4, seed=7)
    _, again = round_trip(proxy, PAYLOAD)
    assert again == echoed
    proxy.heal()
    _, echoed = round_trip(proxy, PAYLOAD)
    assert echoed == PAYLOAD
    assert proxy.flipped_bits == 2 * flipped
