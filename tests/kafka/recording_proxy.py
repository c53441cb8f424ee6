"""A TCP proxy between Kafka clients and Apache Kafka's brokers that records every request and
response frame (tests/kafka/recorded_exchanges.py has the format).

    proxy = RecordingProxy(["127.0.0.1:48092", "127.0.0.1:48093", "127.0.0.1:48094"])
    client = KafkaProducer(bootstrap_servers=proxy.bootstrap)   # the proxies' addresses
    ...
    proxy.take("produce", client="kafka-python 3.0.12").save(RECORDED / "produce.json")
    proxy.close()

Rules:
- One listener per broker, on a free loopback port; a broker that a response names and that
  has no listener yet gets one before the response is passed on, so a client that follows
  Metadata or FindCoordinator never leaves the proxy.
- A broker that is down is not listened for: once Kafka ends a connection (or a new one cannot
  reach the broker), the proxy checks the broker and, if it refuses connections, closes that
  listener and reopens it on the same port when the broker is back, so that the client meets
  a refused connection as it would without the proxy. (A connection that came in before the
  proxy noticed is reset: a clean close before any answer reads as a peer that is no Kafka
  listener.)
- Requests are forwarded as received and each response is matched to its request by the
  correlation id, per connection (Kafka answers in order, but the match does not rely on it).
- `take` hands the exchanges recorded since the last `take` (or the start) as one scenario;
  connections still open go on recording into the next.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import struct
from collections.abc import Coroutine, Iterable
from typing import Any

from replog.kafka.protocol import framing
from tests.kafka.recorded_exchanges import (
    ADDRESS_KEYS,
    Address,
    Exchange,
    LoopThread,
    Recording,
    addresses_in,
    correlation_id_of,
    format_address,
    framed,
    parse_address,
    read_frame,
    rewrite_addresses,
)

# SO_LINGER on, 0 s: close() sends RST instead of FIN.
RESET_ON_CLOSE = struct.pack("ii", 1, 0)
DOWN_POLL_S = 0.1


async def _reachable(broker: Address) -> bool:
    try:
        _, writer = await asyncio.open_connection(*broker)
    except OSError:
        return False
    writer.close()
    return True


class RecordingProxy:
    """Listeners in front of Kafka's brokers, recording (module docstring)."""

    def __init__(self, brokers: Iterable[str], *, kafka_version: str = "4.4.0") -> None:
        self.kafka_version = kafka_version
        self._thread = LoopThread("kafka-recording-proxy")
        self._servers: dict[Address, asyncio.Server] = {}
        self._mapping: dict[Address, Address] = {}  # broker -> its proxy listener
        self._exchanges: list[Exchange] = []
        self._seq = itertools.count()
        self._connections = itertools.count()
        self._tasks: set[asyncio.Task[None]] = set()
        self._down: set[Address] = set()  # brokers not listened for until they are back
        self._seeds = [parse_address(b) for b in brokers]
        for broker in self._seeds:
            self._thread.run(self._listen(broker))

    @property
    def bootstrap(self) -> str:
        """The proxies of the brokers given, as bootstrap servers."""
        return ",".join(format_address(self._mapping[b]) for b in self._seeds)

    def take(self, scenario: str, *, client: str) -> Recording:
        async def taken() -> list[Exchange]:
            exchanges, self._exchanges = self._exchanges, []
            return exchanges

        exchanges = self._thread.run(taken())
        brokers = sorted({e.broker for e in exchanges} | {format_address(b) for b in self._seeds})
        return Recording(scenario, self.kafka_version, client, brokers, exchanges)

    def close(self) -> None:
        async def stop() -> None:
            for server in self._servers.values():
                server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

        self._thread.run(stop())
        self._thread.close()

    # --- on the proxy's loop ---------------------------------------------------------------------

    async def _listen(self, broker: Address) -> None:
        if broker in self._mapping:
            return
        server = await self._open(broker, 0)
        host, port = server.sockets[0].getsockname()[:2]
        self._mapping[broker] = (host, port)

    async def _open(self, broker: Address, port: int) -> asyncio.Server:
        server = await asyncio.start_server(
            lambda r, w: self._spawn(self._serve(broker, r, w)), "127.0.0.1", port
        )
        self._servers[broker] = server
        return server

    async def _check_up(self, broker: Address) -> None:
        """After Kafka closed a connection: if the broker is down, stop listening for it until
        it is back (module docstring)."""
        if broker in self._down or await _reachable(broker):
            return
        self._down.add(broker)
        self._servers[broker].close()
        self._spawn(self._reopen_when_up(broker))

    async def _reopen_when_up(self, broker: Address) -> None:
        while not await _reachable(broker):
            await asyncio.sleep(DOWN_POLL_S)
        await self._open(broker, self._mapping[broker][1])
        self._down.discard(broker)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(
        self, broker: Address, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter
    ) -> None:
        connection = next(self._connections)
        try:
            kafka_r, kafka_w = await asyncio.open_connection(*broker)
        except OSError:
            # The broker went down before the proxy noticed: reset this one connection (a clean
            # close before any answer reads as a peer that is no Kafka listener), then refuse.
            sock = client_w.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, RESET_ON_CLOSE)
            client_w.close()
            await self._check_up(broker)
            return
        pending: dict[int, Exchange] = {}
        upstream = asyncio.ensure_future(
            self._requests(broker, connection, client_r, kafka_w, pending)
        )
        try:
            await self._responses(kafka_r, client_w, pending)
            if not client_r.at_eof():  # Kafka, not the client, ended it
                await self._check_up(broker)
        finally:
            upstream.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await upstream
            for writer in (client_w, kafka_w):
                writer.close()

    async def _requests(
        self,
        broker: Address,
        connection: int,
        client_r: asyncio.StreamReader,
        kafka_w: asyncio.StreamWriter,
        pending: dict[int, Exchange],
    ) -> None:
        try:
            while (frame := await read_frame(client_r)) is not None:
                key, version, correlation_id = framing.peek_request(frame)
                exchange = Exchange(
                    next(self._seq),
                    connection,
                    format_address(broker),
                    key,
                    version,
                    correlation_id,
                    frame,
                    None,
                )
                self._exchanges.append(exchange)
                pending[correlation_id] = exchange
                kafka_w.write(framed(frame))
                await kafka_w.drain()
        except OSError:
            pass
        kafka_w.close()

    async def _responses(
        self,
        kafka_r: asyncio.StreamReader,
        client_w: asyncio.StreamWriter,
        pending: dict[int, Exchange],
    ) -> None:
        try:
            while (frame := await read_frame(kafka_r)) is not None:
                exchange = pending.pop(correlation_id_of(frame), None)
                if exchange is None:  # not an answer to anything sent: pass it on as is
                    client_w.write(framed(frame))
                    continue
                exchange.response = frame
                await self._follow(exchange.key, exchange.version, frame)
                client_w.write(
                    framed(rewrite_addresses(exchange.key, exchange.version, frame, self._mapping))
                )
                await client_w.drain()
        except OSError:
            pass

    async def _follow(self, key: int, version: int, frame: bytes) -> None:
        """Listen for every broker a response names before the client can dial it."""
        if key not in ADDRESS_KEYS:
            return
        _, body = framing.decode_response(frame, key, version)
        for address in addresses_in(body):
            if address[1] > 0:
                await self._listen(address)
