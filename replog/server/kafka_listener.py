"""The asyncio TCP shell of a Kafka listener: sockets in and out of the connection core
(`replog.kafka.connection`), requests to the handlers (`kafka_apis`), in a broker.

Theory of operation: each connection is an `asyncio.Protocol`. Bytes the socket gives are fed
to the core as they arrive (`data_received`, no reader task); each complete request goes to its
handler at once. A handler answers at once (ApiVersions, Metadata, ListOffsets, a Fetch with
records there: the answer is encoded and written from `data_received` itself) or gives an
awaitable, awaited in a task of the request's own; answers the core releases are written from
where they became releasable, in one write. A request answered at once costs one pass of the
event loop and one write: what a client that waits for each answer pays per request (Spark's
Kafka source asks offsets after every poll; docs/benchmarks.md, "Kafka listener round trips").

Rules (docs/kafka-protocol.md, "Listener"):
- `bind` binds and listens synchronously, so that the broker can register the port the OS
  chose for port 0; `start` accepts from then on (the node calls it once the broker serves
  clients: like Kafka's broker, it serves none before), `stop` closes the socket and every
  connection.
- Each request is handled as soon as it is read (pipelined), and answered in request order
  (the core). Handlers are asked in arrival order: a request is answered at once only when no
  earlier request of its connection is still being handled, else its handler is asked in its
  task. Tasks start in the order created and a produce handler reaches its append before its
  first suspension (`BrokerRequests.produce`'s contract, which ProduceStream relies on too), so
  one connection's Produce requests are appended in the order sent.
- While `queued.max.requests` requests of a connection are read and not yet written, the
  connection is not read; answers are not written while the socket's send buffer is full (the
  transport's high-water mark), so a client that sends and never reads stops being read once
  that many wait: memory per connection stays bounded.
- A connection with no bytes read or written for `connections.max.idle.ms` is closed: one
  waiting for a request (none being answered; waiting for answers is not idle), or one whose
  client reads none of its answers (dropped, not flushed).
- Each answered request is reported to `on_request` (the node's
  `replog_kafka_request_duration_seconds`): its API and the time from its read to its answer.
- A connection that breaks the protocol (`KafkaConnectionError`: bad frame size, unknown API
  key or version, undecodable request, closed in the middle of a frame) is closed with one
  WARNING line naming the listener, the peer and the cause; so is one whose request a handler
  refuses as a whole (`RequestRefusedError`: a failed acks=0 produce; or a typed `KafkaError`
  such as an isolation level that is neither 0 nor 1). The answers to the requests before it
  that are ready still leave; none after. Every other connection goes on. A handler that
  fails unexpectedly closes its connection too, logged with its traceback.
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
    Answer,
    KafkaConnection,
    KafkaRequest,
    Served,
    api_name,
)
from replog.kafka.protocol.codec import Message
from replog.net_address import format_host_port, format_peer

log = logging.getLogger("replog.server.kafka")

QUEUED_MAX_REQUESTS_DEFAULT = 500
CONNECTIONS_MAX_IDLE_MS_DEFAULT = 600_000
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

    def handle(self, request: KafkaRequest, listener_name: str) -> Answer: ...


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
        self._connections: set[_Connection] = set()  # open connections

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
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Connection(self), sock=self._socket)
        log.info("Kafka listener %s serving on %s", self.name, self.address)

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        elif self._socket is not None:
            self._socket.close()
        self._socket = None
        connections = list(self._connections)
        for connection in connections:
            connection.abort()
        if connections:
            await asyncio.wait([c.closed for c in connections], timeout=5)
        if server is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5):
                    await server.wait_closed()


class _Connection(asyncio.Protocol):
    """One client connection: bytes from the socket into the core, each request to its
    handler (answered at once, or in a task of its own), the answers the core releases
    written as soon as they are releasable."""

    def __init__(self, listener: KafkaListener) -> None:
        assert listener.handlers is not None  # set by `start`
        self._listener = listener
        self._handlers = listener.handlers
        self._name = listener.name
        self._limit = listener.config.queued_max_requests
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._core: KafkaConnection | None = None
        self.peer = "unknown peer"
        self._handling: set[asyncio.Task[None]] = set()
        self._failure: BaseException | None = None
        self._reading_paused = False  # by this connection: `queued.max.requests` reached
        self._writing_paused = False  # by the transport: its write buffer is full
        self._pumping = False  # inside `_pump`: what a handler answers meanwhile, it writes
        self._last_active = self._loop.time()  # when bytes were last read or written
        self._idle_timer: asyncio.TimerHandle | None = None
        self.closed: asyncio.Future[None] = self._loop.create_future()

    # --- the transport's calls -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self.peer = format_peer(transport.get_extra_info("peername"))
        self._core = KafkaConnection(
            self.peer,
            self._handlers.served,
            request_bytes_max=self._listener.config.request_bytes_max,
        )
        self._listener._connections.add(self)
        self._idle_timer = self._loop.call_later(self._idle_s(), self._idle_check)

    def data_received(self, data: bytes) -> None:
        if self._failure is not None:
            return
        self._last_active = self._loop.time()
        assert self._core is not None
        self._core.feed(data)
        self._pump()

    def eof_received(self) -> bool:
        assert self._core is not None
        if self._failure is None and self._core.buffered_bytes:
            self._failure = KafkaConnectionError(
                self.peer,
                f"closed in the middle of a frame ({self._core.buffered_bytes} bytes of it read)",
            )
        return False  # the transport closes

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._last_active = self._loop.time()
        self._pump()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._failure is None and exc is not None:
            self._failure = exc
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        for task in self._handling:
            task.cancel()
        self._listener._connections.discard(self)
        self._report()
        if not self.closed.done():
            self.closed.set_result(None)

    # --- requests in, answers out --------------------------------------------------------------

    def _pump(self) -> None:
        """Start every complete request while fewer than `queued.max.requests` wait, write
        whatever answers are releasable, again while either made room for the other; then
        read from the socket only while there is room."""
        core = self._core
        transport = self._transport
        assert core is not None and transport is not None
        self._pumping = True
        try:
            while self._failure is None and not transport.is_closing():
                moved = False
                while core.in_flight < self._limit:
                    request = core.next_request()
                    if request is None:
                        break
                    self._start(request)
                    moved = True
                if not self._writing_paused and core.output_ready:
                    frames = core.take_output()
                    if frames:
                        # One write: the answers released together leave in one send.
                        transport.write(frames[0] if len(frames) == 1 else b"".join(frames))
                        self._last_active = self._loop.time()
                    moved = True
                if not moved:
                    break
        except KafkaConnectionError as exc:
            self._fail(exc)
            return
        finally:
            self._pumping = False
        if self._failure is not None or transport.is_closing():
            return
        full = core.in_flight >= self._limit
        if full != self._reading_paused:
            self._reading_paused = full
            if full:
                transport.pause_reading()
            else:
                transport.resume_reading()

    def _start(self, request: KafkaRequest) -> None:
        """Answer `request` here if its handler answers at once, else when its awaitable is
        done, in a task. While an earlier request of the connection is still being handled,
        the handler is asked in a task too: handlers are asked in arrival order."""
        started = monotonic_s()
        if self._handling:
            self._spawn(request, started, lambda: self._handlers.handle(request, self._name))
            return
        try:
            answer = self._handlers.handle(request, self._name)
        except Exception as exc:
            self._fail(_failure(request, exc))
            return
        if answer is None or isinstance(answer, Message):
            self._answered(request, answer, started)
        else:
            self._spawn(request, started, lambda: answer)

    def _spawn(self, request: KafkaRequest, started: float, ask: Callable[[], Answer]) -> None:
        task = self._loop.create_task(self._handle(request, started, ask))
        self._handling.add(task)
        task.add_done_callback(self._handling.discard)

    async def _handle(
        self, request: KafkaRequest, started: float, ask: Callable[[], Answer]
    ) -> None:
        try:
            answer = ask()
            body = answer if answer is None or isinstance(answer, Message) else await answer
        except asyncio.CancelledError as exc:
            task = asyncio.current_task()
            if task is None or task.cancelling():
                raise  # the connection closes: its tasks are cancelled
            # A wait inside the handler was cancelled, not this task: without an answer the
            # connection's later answers would wait behind it forever.
            self._fail(_failure(request, exc))
            return
        except Exception as exc:
            self._fail(_failure(request, exc))
            return
        self._answered(request, body, started)

    def _answered(self, request: KafkaRequest, body: Message | None, started: float) -> None:
        assert self._core is not None
        try:
            self._core.respond(request, body)
        except Exception as exc:  # a response that does not encode at the request's version
            self._fail(_failure(request, exc))
            return
        observe = self._listener.on_request
        if observe is not None:
            observe(request.api_key, monotonic_s() - started)
        if self._core.output_ready and not self._pumping:
            self._pump()

    # --- ending --------------------------------------------------------------------------------

    def _fail(self, failure: BaseException) -> None:
        """Close the connection for `failure` (the first one is reported): the answers to the
        requests before it that are ready still leave, as Kafka, which handles a connection's
        requests one at a time, would have sent them; nothing after."""
        transport, core = self._transport, self._core
        if self._failure is None:
            self._failure = failure
            # Written even while the send buffer is full: it holds no more than the answers
            # `queued.max.requests` bounds, and a client that reads none is dropped when idle.
            if transport is not None and core is not None:
                frames = core.take_output()
                if frames and not transport.is_closing():
                    transport.write(b"".join(frames))
        if transport is not None:
            transport.close()

    def abort(self) -> None:
        """The listener stops: drop the socket (`connection_lost` follows)."""
        if self._failure is None:
            self._failure = _Stopping("the listener stops")
        if self._transport is not None:
            self._transport.abort()

    def _idle_s(self) -> float:
        return self._listener.config.connections_max_idle_ms / 1000

    def _idle_check(self) -> None:
        """Closes the connection once it has waited `connections.max.idle.ms` for a request
        with none being answered (waiting for answers is not idle), or for the client to read
        its answers; else looks again when that much time will have passed since the last
        bytes read or written."""
        assert self._core is not None and self._transport is not None
        idle_s = self._idle_s()
        quiet_s = self._loop.time() - self._last_active
        if quiet_s >= idle_s:
            if self._failure is not None or self._writing_paused:
                # A client that reads nothing holds no more than what was written: dropped.
                if self._failure is None:
                    self._failure = _Idle(idle_s, "its responses not read")
                self._transport.abort()
                return
            if not self._core.in_flight:
                self._fail(_Idle(idle_s, "no request"))
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


def _failure(request: KafkaRequest, exc: BaseException) -> Exception:
    """Why a connection closes when its request's handler raised `exc`: a refusal (one
    WARNING line) for a typed error, else an unexpected failure (logged with `exc`)."""
    what = (
        f"{api_name(request.api_key)} v{request.api_version} (correlation id "
        f"{request.correlation_id})"
    )
    if isinstance(exc, RequestRefusedError | KafkaError):
        return _Refused(f"{what} refused: {exc}")
    failure = _HandlerFailed(f"{what} failed: {exc!r}")
    failure.__cause__ = exc
    return failure


class _Idle(Exception):
    def __init__(self, idle_s: float, what: str) -> None:
        super().__init__(f"idle for connections.max.idle.ms ({int(idle_s * 1000)} ms): {what}")


class _Stopping(Exception):
    """The listener closes every connection (the node stops)."""


class _Refused(Exception):
    """A handler refused its request as a whole: the connection closes (one WARNING line)."""


class _HandlerFailed(Exception):
    """A handler raised: the connection closes (logged with the traceback)."""
