"""The asyncio TCP shell of a Kafka listener: sockets in and out of the connection core
(`replog.kafka.connection`), requests to the handlers (`kafka_apis`), in a broker.

Rules (docs/kafka-protocol.md, "Listener"):
- `bind` binds and listens synchronously, so that the broker can register the port the OS
  chose for port 0; `start` accepts from then on (the node calls it once the broker serves
  clients: like Kafka's broker, it serves none before), `stop` closes the socket and every
  connection.
- Each request is handled in its own task as soon as it is read (pipelined), and answered in
  request order (the core). Tasks start in the order created and a produce handler reaches its
  append before its first suspension (`BrokerRequests.produce`'s contract, which ProduceStream
  relies on too), so one connection's Produce requests are appended in the order sent.
- While `queued.max.requests` requests of a connection are read and not yet written, or the
  socket's send buffer is full (a client that sends and never reads), the connection is not
  read: memory per connection stays bounded.
- A connection with no bytes read or written for `connections.max.idle.ms` is closed.
- Each answered request is reported to `on_request` (the node's
  `replog_kafka_request_duration_seconds`): its API and the time from its read to its answer.
- A connection that breaks the protocol (`KafkaConnectionError`: bad frame size, unknown API
  key or version, undecodable request) is closed with one WARNING line naming the listener,
  the peer and the cause; so is one whose request a handler refuses as a whole
  (`RequestRefusedError`: a failed acks=0 produce; or a typed `KafkaError` such as an
  isolation level that is neither 0 nor 1). Every other connection goes on. A handler
  that fails unexpectedly closes its connection too, logged with its traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from replog.clock import monotonic_s
from replog.config import positive_setting
from replog.errors import KafkaConnectionError, KafkaError, RequestRefusedError
from replog.kafka.connection import (
    REQUEST_BYTES_MAX_DEFAULT,
    KafkaConnection,
    KafkaRequest,
    Served,
    api_name,
)
from replog.kafka.protocol.codec import Message
from replog.net_address import format_host_port

log = logging.getLogger("replog.server.kafka")

QUEUED_MAX_REQUESTS_DEFAULT = 500
CONNECTIONS_MAX_IDLE_MS_DEFAULT = 600_000
READ_CHUNK_BYTES = 64 * 1024
# Told of each answered request: its API key, seconds from its read to its answer.
RequestObserver = Callable[[int, float], None]
# The listener settings read here (`socket.request.max.bytes` is the broker runtime's key too).
KAFKA_LISTENER_PROPERTIES = frozenset({"queued.max.requests", "connections.max.idle.ms"})


@dataclass(frozen=True, slots=True)
class KafkaListenerConfig:
    request_bytes_max: int = REQUEST_BYTES_MAX_DEFAULT
    queued_max_requests: int = QUEUED_MAX_REQUESTS_DEFAULT
    connections_max_idle_ms: int = CONNECTIONS_MAX_IDLE_MS_DEFAULT

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> KafkaListenerConfig:
        return cls(
            request_bytes_max=positive_setting(
                properties, "socket.request.max.bytes", REQUEST_BYTES_MAX_DEFAULT
            ),
            queued_max_requests=positive_setting(
                properties, "queued.max.requests", QUEUED_MAX_REQUESTS_DEFAULT
            ),
            connections_max_idle_ms=positive_setting(
                properties, "connections.max.idle.ms", CONNECTIONS_MAX_IDLE_MS_DEFAULT
            ),
        )


class KafkaHandlers(Protocol):
    """What the listener needs of the handlers (`kafka_apis.KafkaApis`)."""

    @property
    def served(self) -> Served: ...

    async def handle(self, request: KafkaRequest, listener_name: str) -> Message | None: ...


class KafkaListener:
    """One `listeners` entry served with Kafka's protocol."""

    def __init__(
        self,
        name: str,
        host: str,
        port: int,
        config: KafkaListenerConfig | None = None,
        on_request: RequestObserver | None = None,
    ) -> None:
        self.name = name
        self.on_request = on_request
        self.host = host
        self.port = port
        self.handlers: KafkaHandlers | None = None
        self.config = config or KafkaListenerConfig()
        self._socket: socket.socket | None = None
        self._server: asyncio.Server | None = None
        # Open connections and their tasks.
        self._connections: dict[asyncio.Task[None], _Connection] = {}

    @property
    def address(self) -> str:
        return format_host_port(self.host, self.port)

    @property
    def open_connections(self) -> int:
        return len(self._connections)

    def bind(self) -> int:
        """Bind and listen; returns the port bound (the OS's choice for port 0). An `OSError`
        names the listener."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.port))
            sock.listen(128)
            sock.setblocking(False)
        except OSError as exc:
            sock.close()
            raise OSError(
                f"listeners: cannot listen on {self.name}://{self.address}: {exc}"
            ) from None
        self._socket = sock
        self.port = sock.getsockname()[1]
        return self.port

    def close_unstarted(self) -> None:
        """Release the bound port of a listener that never started."""
        if self._server is None and self._socket is not None:
            self._socket.close()
            self._socket = None

    async def start(self, handlers: KafkaHandlers) -> None:
        """Accept connections, served by `handlers` (binding first if `bind` was not
        called)."""
        self.handlers = handlers
        if self._socket is None:
            self.bind()
        assert self._socket is not None
        self._server = await asyncio.start_server(self._accepted, sock=self._socket)
        log.info("Kafka listener %s serving on %s", self.name, self.address)

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        elif self._socket is not None:
            self._socket.close()
        self._socket = None
        # Each connection ends itself once its socket is gone: a cancelled connection task
        # would be logged by asyncio's stream callback as an error.
        for connection in self._connections.values():
            connection.abort()
        if self._connections:
            _, stuck = await asyncio.wait(set(self._connections), timeout=5)
            for task in stuck:
                task.cancel()
        if server is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5):
                    await server.wait_closed()

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        connection = _Connection(self, reader, writer)
        self._connections[task] = connection
        try:
            await connection.serve()
        finally:
            del self._connections[task]


class _Connection:
    """One client connection: a reading loop, one task per request, a writing loop."""

    def __init__(
        self, listener: KafkaListener, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        assert listener.handlers is not None  # set by `start`
        self._listener = listener
        self._handlers = listener.handlers
        self._reader = reader
        self._writer = writer
        peer = writer.get_extra_info("peername")
        self.peer = format_host_port(peer[0], peer[1]) if peer else "unknown peer"
        self._core = KafkaConnection(
            self.peer,
            self._handlers.served,
            request_bytes_max=listener.config.request_bytes_max,
        )
        self._answered = asyncio.Event()  # an answer may be releasable
        self._room = asyncio.Event()  # output was taken: the reader may go on
        self._handling: set[asyncio.Task[None]] = set()
        self._failure: BaseException | None = None
        self._loop = asyncio.get_running_loop()
        self._last_active = self._loop.time()  # when bytes were last read or written
        self._reading = False  # the read loop waits for the socket
        self._reading_task: asyncio.Task[None] | None = None
        self._idle_timer: asyncio.TimerHandle | None = None

    async def serve(self) -> None:
        writing = asyncio.create_task(self._write_loop())
        reading = asyncio.create_task(self._read_loop())
        self._reading_task = reading
        self._idle_timer = self._loop.call_later(self._idle_s(), self._idle_check)
        try:
            await asyncio.wait({reading, writing}, return_when=asyncio.FIRST_COMPLETED)
            for task in (reading, writing):
                if task.done() and not task.cancelled():
                    exc = task.exception()
                    if exc is not None and self._failure is None:
                        self._failure = exc
            self._report()
        finally:
            if self._idle_timer is not None:
                self._idle_timer.cancel()
            for task in (reading, writing, *self._handling):
                task.cancel()
            self._writer.close()
            with contextlib.suppress(Exception):
                await self._writer.wait_closed()

    def abort(self) -> None:
        """The listener stops: drop the socket and wake the loops, which end on their own."""
        if self._failure is None:
            self._failure = _Stopping("the listener stops")
        self._writer.transport.abort()
        self._room.set()
        self._answered.set()

    def _idle_check(self) -> None:
        """Closes the connection once it has waited `connections.max.idle.ms` for a request
        with none being answered (waiting for answers is not idle), else looks again when
        that much time will have passed since the last bytes read or written."""
        idle_s = self._idle_s()
        quiet_s = self._loop.time() - self._last_active
        if self._reading and not self._core.in_flight and quiet_s >= idle_s:
            if self._failure is None:
                self._failure = _Idle(idle_s, "no request")
            if self._reading_task is not None:
                self._reading_task.cancel()
            return
        self._idle_timer = self._loop.call_later(max(idle_s - quiet_s, 0.001), self._idle_check)

    def _report(self) -> None:
        failure = self._failure
        listener = self._listener.name
        closing = "Kafka listener %s: closing connection from %s: %s"
        if isinstance(failure, KafkaConnectionError):
            log.warning(closing, listener, failure.peer, failure.cause)
        elif isinstance(failure, _Refused):
            log.warning(closing, listener, self.peer, failure)
        elif isinstance(failure, _Idle):
            log.info(closing, listener, self.peer, failure)
        elif isinstance(failure, ConnectionError | _Stopping):
            log.debug("Kafka listener %s: lost %s: %s", listener, self.peer, failure)
        elif failure is not None:
            log.error(
                "Kafka listener %s: closing connection from %s on an unexpected error",
                listener,
                self.peer,
                exc_info=failure,
            )

    def _idle_s(self) -> float:
        return self._listener.config.connections_max_idle_ms / 1000

    async def _read_loop(self) -> None:
        core = self._core
        limit = self._listener.config.queued_max_requests
        while self._failure is None:
            if core.in_flight >= limit:
                # Not read until answers are written: a client that never reads stops here.
                self._room.clear()
                try:
                    async with asyncio.timeout(self._idle_s()):
                        await self._room.wait()
                except TimeoutError:
                    raise _Idle(self._idle_s(), "its responses not read") from None
                continue
            request = core.next_request()
            if core.output_ready:
                self._answered.set()
            if request is not None:
                task = asyncio.create_task(self._handle(request))
                self._handling.add(task)
                task.add_done_callback(self._handling.discard)
                continue
            # One idle timer per connection (`_idle_check`), not one per read: a read is the
            # listener's most frequent await.
            self._reading = True
            try:
                data = await self._reader.read(READ_CHUNK_BYTES)
            finally:
                self._reading = False
            if self._failure is not None:
                return
            self._last_active = self._loop.time()
            if not data:
                if core.buffered_bytes:
                    raise KafkaConnectionError(
                        self.peer,
                        f"closed in the middle of a frame ({core.buffered_bytes} bytes of it read)",
                    )
                return
            core.feed(data)

    async def _handle(self, request: KafkaRequest) -> None:
        started = monotonic_s()
        try:
            body = await self._handlers.handle(request, self._listener.name)
            self._core.respond(request, body)
            observe = self._listener.on_request
            if observe is not None:
                observe(request.api_key, monotonic_s() - started)
        except asyncio.CancelledError:
            raise
        except (RequestRefusedError, KafkaError) as exc:
            if self._failure is None:
                self._failure = _Refused(
                    f"{api_name(request.api_key)} v{request.api_version} (correlation id "
                    f"{request.correlation_id}) refused: {exc}"
                )
            self._answered.set()
            return
        except BaseException as exc:
            if self._failure is None:
                self._failure = _HandlerFailed(
                    f"{api_name(request.api_key)} v{request.api_version} (correlation id "
                    f"{request.correlation_id}) failed: {exc!r}"
                )
                self._failure.__cause__ = exc
            self._answered.set()
            return
        if self._core.output_ready:
            self._answered.set()

    async def _write_loop(self) -> None:
        while True:
            await self._answered.wait()
            self._answered.clear()
            if self._failure is not None:
                return
            frames = self._core.take_output()
            if frames:
                self._writer.writelines(frames)
                self._last_active = self._loop.time()
                # Only bytes the socket did not take are waited for (a timer per answer would
                # cost more than the write).
                if self._writer.transport.get_write_buffer_size():
                    try:
                        async with asyncio.timeout(self._idle_s()):
                            await self._writer.drain()
                    except TimeoutError:
                        raise _Idle(self._idle_s(), "its responses not read") from None
            self._room.set()


class _Idle(Exception):
    def __init__(self, idle_s: float, what: str) -> None:
        super().__init__(f"idle for connections.max.idle.ms ({int(idle_s * 1000)} ms): {what}")


class _Stopping(Exception):
    """The listener closes every connection (the node stops)."""


class _Refused(Exception):
    """A handler refused its request as a whole: the connection closes (one WARNING line)."""


class _HandlerFailed(Exception):
    """A handler raised: the connection closes (logged with the traceback)."""
