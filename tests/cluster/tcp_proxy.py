"""A TCP proxy in front of one node, whose connections a test can cut like a failing network.

`TcpProxy` listens on a free loopback port and forwards every connection to `upstream` (a
node's listener), in both directions, on its own event loop in a daemon thread. A node that
advertises the proxy's address (`advertised.listeners`) is then reached through it by every
client that found the node through the metadata, and by the other brokers' replica fetchers,
which look up the leader's address the same way.

`hold()` stops passing bytes from the node back to its clients (requests still reach the node;
its answers are dropped): a network that loses the responses of requests the node executed.
`sever()` then resets every connection (RST, as a broken network or a dead NAT entry does) and
forwards normally again for new connections. `cut_all` does both for several proxies: the
calls in flight fail although the node may have executed them, the situation in which a
producer's retry duplicates a record unless the producer is idempotent.

`block(sources)` is the other kind of fault, a network partition: given `source_of` (which
names the node a new connection comes from, see tests/cluster/socket_owner.py), the
connections from those nodes stop carrying bytes either way, and new ones from them are
accepted but go nowhere, until they are unblocked; a close or reset of one side reaches the
other only then too. `block(answers_to=...)` cuts one way: those nodes' requests arrive, and
what the node sends back waits. Nothing is dropped: bytes read before or during the block
are delivered once it ends, as TCP's retransmissions deliver them after a partition heals.
A connection `source_of` cannot name is reset at once, so that none escapes a partition.

Two more faults keep the bytes flowing but spoil the link, by source too: `slow(delays_s)`
delivers each chunk read on a source's connections, either way, a random time drawn from its
range later, in order (a link with that latency and jitter: a chunk never overtakes the one
before it); `corrupt(answers_to, per_byte, seed)` flips one random bit in each byte this node
sends them with probability `per_byte` (memory or a NIC corrupting data after TCP's checksum
was verified: nothing below the application can catch it). `heal()` ends every fault.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")

CHUNK = 64 * 1024
TEST_PROCESS = 0  # the source of connections this process opened (node ids start at 1)
# SO_LINGER on, 0 s: close() sends RST instead of FIN (the peer's next read fails at once).
RESET_ON_CLOSE = struct.pack("ii", 1, 0)


@dataclass
class _Link:
    """One proxied connection: the client's side and the node's side."""

    client: asyncio.StreamWriter
    node: asyncio.StreamWriter
    source: int | None = None  # the node the client side belongs to, if it is one
    closed: bool = False
    # Tasks writing delayed chunks (`slow`): a closed connection drops what they still hold.
    deliveries: set[asyncio.Task[None]] = field(default_factory=set)

    def close(self, *, reset: bool) -> None:
        if self.closed:
            return
        self.closed = True
        for task in self.deliveries:
            task.cancel()
        for writer in (self.client, self.node):
            transport = writer.transport
            if reset:
                sock = transport.get_extra_info("socket")
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, RESET_ON_CLOSE)
                transport.abort()
            else:
                transport.close()


@dataclass
class CutReport:
    """What one cut did: connections reset, and node-to-client bytes dropped while holding."""

    connections: int = 0
    bytes_dropped: int = 0
    requests_bytes_while_holding: int = 0

    def add(self, other: CutReport) -> None:
        self.connections += other.connections
        self.bytes_dropped += other.bytes_dropped
        self.requests_bytes_while_holding += other.requests_bytes_while_holding


@dataclass
class TcpProxy:
    name: str
    upstream: tuple[str, int] | None = None
    port: int = 0  # where to listen (0: any free port; then the port it took)
    host: str = "127.0.0.1"
    # (peer address, our address) of an accepted connection -> the node id of the process that
    # opened it (TEST_PROCESS: this one), or None (unknown): what `block` keys on.
    source_of: Callable[[tuple[str, int], tuple[str, int]], int | None] | None = None

    def __post_init__(self) -> None:
        self._sock = socket.create_server((self.host, self.port))
        self.port = self._sock.getsockname()[1]
        self._open: dict[int, _Link] = {}
        self._holding = False
        self._report = CutReport()
        self._blocked: frozenset[int] = frozenset()
        self._answers_blocked: frozenset[int] = frozenset()  # one way: node -> client held
        self._sources: dict[int | None, int] = {}  # connections accepted, by source
        self._held_bytes = 0
        self._delays: dict[int, tuple[float, float]] = {}  # source -> delay range (s), both ways
        self._flip_to: frozenset[int] = frozenset()  # sources whose answers get bits flipped
        self._flip_per_byte = 0.0
        self._flip_rng = random.Random(0)
        self._until_flip = 0  # bytes of flipped answers still to pass before the next flip
        self.flipped_bits = 0
        self._unblocked = asyncio.Condition()  # notified on a block change, a sever, a close
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"proxy-{self.name}", daemon=True
        )
        self._thread.start()
        self._server = self._call(asyncio.start_server(self._accept, sock=self._sock))

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def forward_to(self, address: str) -> None:
        host, _, port = address.rpartition(":")
        self.upstream = (host, int(port))

    def hold(self) -> None:
        """From now on, drop what the node sends to its clients (until `sever`)."""
        self._call(self._set_holding())

    def sever(self) -> CutReport:
        """Reset every open connection and forward normally again; what the cut did."""
        return self._call(self._sever())

    def block(self, sources: Iterable[int], *, answers_to: Iterable[int] = ()) -> None:
        """Partition this node from `sources` (node ids): their connections stall both ways
        and new ones wait; for `answers_to` only what this node sends them stalls (a one-way
        cut: their requests arrive, the answers do not). Until a later `block` leaves them
        out (`block(())` heals)."""
        self._call(self._set_blocked(frozenset(sources), frozenset(answers_to)))

    def slow(self, delays_s: Mapping[int, tuple[float, float]]) -> None:
        """Delay what travels on the connections from each source in `delays_s` (both ways):
        each chunk by a time drawn uniformly from its range (not seeded: timing varies
        anyway), never overtaking the chunk before it. Until a later `slow` leaves the source
        out; bytes already delayed still arrive when due, unless the connection closes
        first."""
        self._call(self._set(_delays=dict(delays_s)))

    def corrupt(self, answers_to: Iterable[int], per_byte: float, seed: int = 0) -> None:
        """Flip a random bit in each byte this node sends on the connections from
        `answers_to`, with probability `per_byte` (`flipped_bits` counts them); `seed` makes
        the choice of bytes and bits repeatable for the same stream of bytes."""
        assert 0 <= per_byte < 1, f"a probability below 1 per byte, not {per_byte}"
        rng = random.Random(seed)
        self._call(
            self._set(
                _flip_to=frozenset(answers_to),
                _flip_per_byte=per_byte,
                _flip_rng=rng,
                _until_flip=_bytes_to_next_flip(rng, per_byte),
            )
        )

    def heal(self) -> None:
        """End every fault: blocks, delays, bit flips."""
        self.block(())
        self.slow({})
        self.corrupt((), 0.0)

    def sources(self) -> dict[int | None, int]:
        """Connections accepted so far, by the node they came from (None: not a node)."""
        return self._call(self._count_sources())

    @property
    def held_bytes(self) -> int:
        """Bytes that waited behind a block so far (delivered once it ended)."""
        return self._held_bytes

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._call(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        with contextlib.suppress(RuntimeError):
            self._loop.close()

    # --- on the proxy's loop ---

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    async def _set_holding(self) -> None:
        self._holding = True
        self._report = CutReport()

    async def _set_blocked(self, sources: frozenset[int], answers_to: frozenset[int]) -> None:
        self._blocked, self._answers_blocked = sources, answers_to
        async with self._unblocked:
            self._unblocked.notify_all()

    async def _set(self, **state: Any) -> None:
        for name, value in state.items():
            setattr(self, name, value)

    async def _count_sources(self) -> dict[int | None, int]:
        return dict(self._sources)

    def _passes(self, link: _Link, to_node: bool) -> bool:
        """Whether bytes may flow on `link` in this direction now."""
        blocked = self._blocked if to_node else self._blocked | self._answers_blocked
        return link.source not in blocked

    async def _wait_open(self, link: _Link, to_node: bool = True) -> None:
        """Until `link` passes bytes in this direction (or is closed)."""
        async with self._unblocked:
            await self._unblocked.wait_for(lambda: link.closed or self._passes(link, to_node))

    async def _sever(self) -> CutReport:
        report, self._report = self._report, CutReport()
        links = list(self._open.values())
        self._open.clear()
        for link in links:
            link.close(reset=True)
        report.connections = len(links)
        self._holding = False
        async with self._unblocked:  # links waiting behind a block see themselves closed
            self._unblocked.notify_all()
        return report

    async def _shutdown(self) -> None:
        self._server.close()
        await self._sever()
        # Let the connections' tasks see their sockets gone and end before the loop stops.
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        if others:
            await asyncio.wait(others, timeout=2)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.upstream is None:
            writer.transport.abort()
            return
        source = None
        if self.source_of is not None:
            peer, ours = writer.get_extra_info("peername"), writer.get_extra_info("sockname")
            source = self.source_of(peer[:2], ours[:2])
        self._sources[source] = self._sources.get(source, 0) + 1
        if self.source_of is not None and source is None:
            # Nobody to attribute it to: most often a probe already closed by its process (its
            # socket has no inode left). Were it live, it would escape every partition; reset,
            # it is dialled again and named then.
            writer.transport.abort()
            return
        if source in self._blocked:
            # A partitioned peer's connect: accepted here, but it reaches the node only once
            # the partition heals (a real one drops the SYN; either way nothing gets through).
            # Kept in `_open` meanwhile, so that a sever or the proxy's close ends it.
            pending = _Link(writer, writer, source)
            self._open[id(pending)] = pending
            await self._wait_open(pending)
            self._open.pop(id(pending), None)
            if pending.closed:
                return
        try:
            node_reader, node_writer = await asyncio.open_connection(*self.upstream)
        except OSError:  # the node is down: the client sees its connection closed at once
            writer.transport.abort()
            return
        link = _Link(writer, node_writer, source)
        key = id(link)
        self._open[key] = link
        try:
            await asyncio.gather(
                self._pump(reader, link, to_node=True),
                self._pump(node_reader, link, to_node=False),
            )
        finally:
            self._open.pop(key, None)
            await self._close(link)

    async def _close(self, link: _Link) -> None:
        """Close both sides, and wake the other direction if it waits behind a block."""
        link.close(reset=False)
        async with self._unblocked:
            self._unblocked.notify_all()

    async def _pump(self, reader: asyncio.StreamReader, link: _Link, *, to_node: bool) -> None:
        writer = link.node if to_node else link.client
        loop = asyncio.get_running_loop()
        delayed: deque[tuple[float, bytes]] = deque()  # (when due, chunk), in reading order
        delivery: asyncio.Task[None] | None = None
        due = 0.0  # when the last chunk delayed in this direction is due (loop time)
        try:
            while not link.closed:
                data = await reader.read(CHUNK)
                if not data or link.closed:
                    break
                if not self._passes(link, to_node):
                    self._held_bytes += len(data)
                    await self._wait_open(link, to_node)  # held as a partition delays packets
                    if link.closed:
                        break
                if self._holding:
                    if not to_node:
                        self._report.bytes_dropped += len(data)
                        continue
                    self._report.requests_bytes_while_holding += len(data)
                if not to_node and link.source in self._flip_to:
                    data = self._flip_bits(data)
                delay = self._delays.get(link.source) if link.source is not None else None
                if delay or delayed:  # delayed, or queued behind a delayed chunk
                    due = max(due, loop.time() + (random.uniform(*delay) if delay else 0.0))
                    delayed.append((due, data))
                    if delivery is None or delivery.done():
                        delivery = asyncio.create_task(_deliver(delayed, link, writer))
                        link.deliveries.add(delivery)
                        delivery.add_done_callback(link.deliveries.discard)
                    continue
                writer.write(data)
                await writer.drain()
            if delivery is not None:  # the end of the stream travels behind its last bytes
                await asyncio.wait({delivery})  # (cancelled if the connection closes first)
        except (ConnectionError, OSError):
            pass
        finally:
            if not link.closed and not self._passes(link, to_node):
                # One side closed or broke during a partition: the other learns it only once
                # the partition heals, as a FIN or RST would reach it only then.
                await self._wait_open(link, to_node)
            await self._close(link)

    def _flip_bits(self, data: bytes) -> bytes:
        """`data` with a bit flipped at each byte the per-byte draw picks."""
        if self._until_flip >= len(data):
            self._until_flip -= len(data)
            return data
        spoilt = bytearray(data)
        position = self._until_flip
        while position < len(spoilt):
            spoilt[position] ^= 1 << self._flip_rng.randrange(8)
            self.flipped_bits += 1
            position += 1 + _bytes_to_next_flip(self._flip_rng, self._flip_per_byte)
        self._until_flip = position - len(spoilt)
        return bytes(spoilt)


def _bytes_to_next_flip(rng: random.Random, per_byte: float) -> int:
    """Bytes passed intact before the next flipped one: geometric, as if each byte were
    flipped with probability `per_byte` on its own (never, when it is 0)."""
    if per_byte <= 0:
        return 1 << 62
    return int(math.log(1.0 - rng.random()) / math.log(1.0 - per_byte))


async def _deliver(
    delayed: deque[tuple[float, bytes]], link: _Link, writer: asyncio.StreamWriter
) -> None:
    """Write the delayed chunks in order, each when due, until none is left. A write that
    fails breaks the connection: it is reset, and what is still delayed dropped."""
    loop = asyncio.get_running_loop()
    try:
        while delayed and not link.closed:
            due, data = delayed[0]
            await asyncio.sleep(max(0.0, due - loop.time()))
            delayed.popleft()
            if link.closed:
                return
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        delayed.clear()
        link.close(reset=True)


def cut_all(proxies: Iterable[TcpProxy], hold_s: float) -> CutReport:
    """Drop the nodes' answers for `hold_s` (requests still arrive and execute), then reset
    every connection of every proxy; the sum of what the cuts did."""
    chosen = list(proxies)
    for proxy in chosen:
        proxy.hold()
    time.sleep(hold_s)  # the length of the outage is the fault itself, not a wait for an event
    total = CutReport()
    for proxy in chosen:
        total.add(proxy.sever())
    return total
