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
- An SSL listener (`ssl_context` given) runs TLS on every connection before any Kafka byte
  (`tls_context.py`), the connection itself over its TCP transport (`tls_session`: no layer of
  asyncio's between the socket and the framing). A connection whose handshake fails (plaintext
  bytes, an untrusted or missing client certificate where one is required) is closed with one
  INFO line naming the peer and the cause, and counted as a failed authentication with
  mechanism SSL when TLS refused it (a peer closing first is not), as Kafka's selector logs and
  counts it; the listener goes on.
- While a request is partly read, the socket is told not to wake the connection before the
  rest of it can have arrived (`ReceiveLowWater`, SO_RCVLOWAT on Linux: the bytes missing, over
  TLS the least ciphertext that can carry them, `TlsSession.ciphertext_needed`; at most
  `LOWAT_MAX_BYTES`): a request that arrives in pieces (Kafka's Java client writes each buffer
  of a request as a TLS record of its own) costs one wake-up of the event loop, not one per
  piece. The peer's EOF or an error wakes it whatever the mark; a socket that refuses the mark
  once is not marked again.
- A SASL listener (`sasl` given: SASL_PLAINTEXT, or SASL_SSL with `ssl_context` too) runs
  each connection's authentication through its `SaslAuthenticator` (`replog.kafka`): every
  request is shown to it first, in arrival order, and it answers the SASL requests, closes the
  connection on what it refuses (the answer written first), or lets the request through to the
  handlers. A failed attempt is one WARNING line naming the listener, the peer and the cause
  (never a password) and counted (`on_failed_authentication`).
- A connection's principal (`KafkaConnection.principal`, which every request carries to the
  authorizer) is `User:ANONYMOUS` until set: on a SASL listener, SASL_SSL included, what the
  SASL exchange authenticated (a client certificate there names nobody, as in Kafka); on an
  SSL listener its client certificate's subject mapped by `ssl.principal.mapping.rules`
  (`principal_mapping`), a certificate no rule maps closing the connection with one WARNING
  line. Its `client_host` is the peer's IP address.
- `bind` binds and listens synchronously, so that the broker can register the port the OS
  chose for port 0; `start` accepts from then on (the node calls it once the broker serves
  clients: like Kafka's broker, it serves none before), `stop` closes the socket and every
  connection.
- Each request is handled as soon as it is read (pipelined), and answered in request order
  (the core). Handlers are asked in arrival order: a request is answered at once only when no
  earlier request of its connection is still being handled, else its handler is asked in its
  task. Tasks start in the order created and a produce handler reaches its append before its
  first suspension (`BrokerRequests.produce`'s contract), so
  one connection's Produce requests are appended in the order sent.
- Answers leave in their pieces (`KafkaConnection.take_output`): consecutive small pieces in
  one write, large records as they are. On plain TCP (`KafkaConnection.sends_files`; TLS
  encrypts in user space) a Fetch answer's records left in their segment file are sent from
  it with `loop.sendfile` (Kafka's `FileRecords.transferTo`), which starts once the
  transport's buffer is empty and pauses reading while it sends; nothing else is written
  meanwhile. A file cut back under them (fewer bytes than the frame promised) breaks the
  answer: the connection is dropped with one WARNING line. A connection that closes in the
  middle of such a send cancels it first, so the send leaves the socket before it closes.
- Every accepted socket has Nagle's algorithm off (TCP_NODELAY, as Kafka's acceptor sets it):
  an answer leaves when it is written, not when the client acknowledges the one before
  (`send_at_once`).
- While `queued.max.requests` requests of a connection are read and not yet written, the
  connection is not read; answers are not written while the socket's send buffer is full (the
  transport's high-water mark), so a client that sends and never reads stops being read once
  that many wait: memory per connection stays bounded.
- A connection on which nothing moved for `connections.max.idle.ms` is closed: no bytes read,
  none written, none of an answer being sent taken by the socket (Kafka counts any progress of
  a send; a client reading a large answer slowly is active while it reads). Closed are one
  waiting for a request (none being answered; waiting for answers is not idle), and one whose
  client reads none of its answers (dropped, not flushed).
- Each answered request is reported to `on_request` (the node's
  `replog_kafka_request_duration_seconds`): its API and the time from its read to its answer.
- A connection that breaks the protocol (`KafkaConnectionError`: bad frame size, unknown API
  key or version, undecodable request, closed in the middle of a frame) is closed with one
  WARNING line naming the listener, the peer and the cause; so is one whose request a handler
  refuses as a whole (`RequestRefusedError`: a failed acks=0 produce; or a typed `KafkaError`
  such as an isolation level that is neither 0 nor 1). A handler that fails unexpectedly
  closes its connection too, logged with its traceback. Every other connection goes on.
- Such a connection closes as Kafka's would: Kafka reads a connection's next request only once
  it has answered the one before, so it answers every earlier request, in order, before it
  meets the bad one. Here reading stops at the bad request; the requests before it are still
  handled to their end and answered in order (an acks=all produce already appended is
  acknowledged, not left for the client to retry and duplicate), then the connection closes.
  Nothing from the bad request on is answered: later requests being handled are cancelled
  (their answers could never follow a missing one). The wait is bounded by `close_wait_ms`
  (30 s, a Kafka client's default `request.timeout.ms`: by then the client has given up on
  those answers); past it the connection closes with a WARNING line naming the requests left
  unanswered. The peer's EOF closes a connection the same way (a client that only shut down
  its sending side reads the answers to what it sent, as from Kafka; not over TLS, which has no
  half-close), its unanswered requests named at DEBUG only (the client left); `stop` drops every
  connection at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import secrets
import socket
import ssl
import struct
import sys
from asyncio.trsock import TransportSocket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from replog.clock import monotonic_s
from replog.config import positive_setting
from replog.errors import (
    InvalidCertificateError,
    KafkaConnectionError,
    KafkaError,
    KafkaStorageError,
    NoMatchingPrincipalRuleError,
    RequestRefusedError,
)
from replog.kafka.connection import (
    REQUEST_BYTES_MAX_DEFAULT,
    Answer,
    KafkaConnection,
    KafkaRequest,
    Served,
    request_label,
)
from replog.kafka.protocol.codec import HOLD_MIN_BYTES, Buffer, FileRecords, Message
from replog.kafka.sasl_authenticator import CredentialLookup, SaslAuthenticator, SaslStep
from replog.net_address import format_host_port, format_peer
from replog.security.principal import ANONYMOUS
from replog.security.principal_mapping import PrincipalMapper, tls_principal
from replog.server.config.sasl_config import SaslListenerConfig
from replog.server.kafka.tls_session import TlsSession
from replog.storage.file_region import FileRegion
from replog.wire.receive_low_water import ReceiveLowWater
from replog.wire.server_close import close_server
from replog.wire.tls_handshake_failure import handshake_failure_cause, is_authentication_failure

log = logging.getLogger("replog.server.kafka")

QUEUED_MAX_REQUESTS_DEFAULT = 500
CONNECTIONS_MAX_IDLE_MS_DEFAULT = 600_000
# How long a connection that is to close waits for the answers to the requests before the one
# that closes it: a Kafka client's default request.timeout.ms, past which the client has given
# up on them (and reconnects to retry).
CLOSE_WAIT_MS_DEFAULT = 30_000
# While bytes written wait to reach the client, the idle check looks this many times per
# connections.max.idle.ms whether more of them did: a client that stops reading is closed
# within an eighth of the idle time more than the idle time.
SENDING_LOOKS_PER_IDLE = 8
# Told of each answered request: its API key, seconds from its read to its answer.
RequestObserver = Callable[[int, float], None]
# Told of each failed SASL attempt: the listener's name and the mechanism ("" before one).
FailedAuthenticationObserver = Callable[[str, str], None]
# Random bytes in a SCRAM server nonce (RFC 5802 asks for an unpredictable one).
SCRAM_NONCE_BYTES = 18
# The most SO_RCVLOWAT asks for: a large request still wakes its connection at least every
# this many bytes while it arrives (the idle check sees them read). Linux clamps the receive
# window to a mark whose room exceeds the receive buffer; this one fits the default buffer.
LOWAT_MAX_BYTES = 65_536
# The listener settings read here (`socket.request.max.bytes` is the broker runtime's key too).
KAFKA_LISTENER_PROPERTIES = frozenset({"queued.max.requests", "connections.max.idle.ms"})


@dataclass(frozen=True, slots=True)
class KafkaListenerConfig:
    request_bytes_max: int = REQUEST_BYTES_MAX_DEFAULT
    queued_max_requests: int = QUEUED_MAX_REQUESTS_DEFAULT
    connections_max_idle_ms: int = CONNECTIONS_MAX_IDLE_MS_DEFAULT
    close_wait_ms: int = CLOSE_WAIT_MS_DEFAULT  # not a Kafka setting: tests shorten it

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
        ssl_context: ssl.SSLContext | None = None,
        sasl: SaslListenerConfig | None = None,
        on_failed_authentication: FailedAuthenticationObserver | None = None,
        principal_mapper: PrincipalMapper | None = None,
    ) -> None:
        """`principal_mapper`: `ssl.principal.mapping.rules` (an SSL listener's; DEFAULT if
        not given)."""
        self.name = name
        self.ssl_context = ssl_context
        self.sasl = sasl
        self.on_failed_authentication = on_failed_authentication
        # The SCRAM credentials SASL connections are checked against (`start`).
        self.credentials: CredentialLookup | None = None
        self.principal_mapper = principal_mapper or PrincipalMapper.from_rules()
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

    async def start(
        self, handlers: KafkaHandlers, credentials: CredentialLookup | None = None
    ) -> None:
        """Accept connections, served by `handlers` (binding first if `bind` was not
        called); a SASL listener checks SCRAM users against `credentials`."""
        self.handlers = handlers
        self.credentials = credentials
        if self._socket is None:
            self.bind()
        assert self._socket is not None
        loop = asyncio.get_running_loop()
        # TLS is the connection's own (`tls_session`), over a plain transport.
        self._server = await loop.create_server(lambda: _Connection(self), sock=self._socket)
        log.info(
            "Kafka listener %s serving on %s%s%s",
            self.name,
            self.address,
            " with TLS" if self.ssl_context is not None else "",
            "" if self.sasl is None else f" with SASL ({', '.join(self.sasl.mechanisms)})",
        )

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            await close_server(server)
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
        self._handling: dict[int, asyncio.Task[None]] = {}  # by request sequence
        self._failure: BaseException | None = None  # why it closes (reported once closed)
        # Set: the connection reads no more and closes once every answer before this request
        # sequence is written (`_fail`).
        self._closing_from: int | None = None
        self._close_timer: asyncio.TimerHandle | None = None  # `close_wait_ms`
        self._reading_paused = False  # by this connection: `queued.max.requests` reached
        self._writing_paused = False  # by the transport: its write buffer is full
        self._pumping = False  # inside `_pump`: what a handler answers meanwhile, it writes
        # Writing answers whose records are sent from their files (`_send_from_files`): no
        # other write starts until it ends.
        self._sending: asyncio.Task[None] | None = None
        self._last_active = self._loop.time()  # when bytes were last read or written
        self._written = 0  # bytes given to the transport
        self._reached = 0  # of them, those that had reached the client when last looked
        self._looked_at = self._loop.time()  # when the idle check last looked
        self._fd = -1  # the socket's
        self._idle_timer: asyncio.TimerHandle | None = None
        self._sasl: SaslAuthenticator | None = None  # on a SASL listener
        self._tls: TlsSession | None = None  # on an SSL listener
        self._lowat = ReceiveLowWater(None)  # the socket's SO_RCVLOWAT (module rules)
        self.closed: asyncio.Future[None] = self._loop.create_future()

    # --- the transport's calls -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self.peer = format_peer(transport.get_extra_info("peername"))
        sock = transport.get_extra_info("socket")
        self._fd = -1 if sock is None else sock.fileno()
        self._lowat = ReceiveLowWater(sock)
        if sock is not None:
            send_at_once(sock)
        self._core = KafkaConnection(
            self.peer,
            self._handlers.served,
            request_bytes_max=self._listener.config.request_bytes_max,
        )
        # TLS encrypts every byte in user space: only plain TCP sends from files.
        self._core.sends_files = sock is not None and self._listener.ssl_context is None
        peername = transport.get_extra_info("peername")
        if isinstance(peername, tuple):
            self._core.client_host = str(peername[0])
        if self._listener.ssl_context is not None:
            self._tls = TlsSession(self._listener.ssl_context)
        self._listener._connections.add(self)
        self._idle_timer = self._loop.call_later(self._idle_s(), self._idle_check)
        sasl = self._listener.sasl
        if sasl is not None:
            self._sasl = SaslAuthenticator(
                sasl.mechanisms,
                plain_users=sasl.plain_users,
                credentials=self._listener.credentials or _no_credentials,
                new_nonce=lambda: secrets.token_urlsafe(SCRAM_NONCE_BYTES),
                reauth_ms=sasl.reauth_ms,
            )

    def data_received(self, data: bytes) -> None:
        if self._closing_from is not None:
            return  # reading stopped at the request that closes the connection
        self._last_active = self._loop.time()
        core, tls = self._core, self._tls
        assert core is not None
        if tls is None:
            core.feed(data)
        else:
            handshaken = tls.handshake_done
            try:
                plaintext = tls.receive(data)
            except ssl.SSLError as exc:
                self._tls_failed(exc, handshaken)
                return
            self._send_tls_output()
            if not handshaken and tls.handshake_done and not self._secured(tls):
                return
            for chunk in plaintext:
                core.feed(chunk)
            if tls.peer_closed:
                self._pump()
                self._fail(None)  # its close_notify: no more requests come
                return
        self._pump()
        self._await_rest()

    def _secured(self, tls: TlsSession) -> bool:
        """The handshake passed: on SSL, the certificate names the principal (SASL_SSL: the
        SASL exchange does). False when no principal maps it: the connection is dropped."""
        if self._listener.sasl is not None:
            return True
        assert self._core is not None and self._transport is not None
        certificate = tls.ssl_object.getpeercert(binary_form=True)
        try:
            self._core.principal = tls_principal(certificate, self._listener.principal_mapper)
        except (NoMatchingPrincipalRuleError, InvalidCertificateError) as exc:
            # Kafka fails such a client's authentication: no principal, no requests.
            log.warning(
                "Kafka listener %s: closing connection from %s: no principal for its "
                "certificate: %s",
                self._name,
                self.peer,
                exc,
            )
            self._transport.abort()
            return False
        return True

    def _tls_failed(self, error: ssl.SSLError, handshaken: bool) -> None:
        """TLS refused the peer's bytes: its alert is sent, the connection closed (module
        rules)."""
        assert self._transport is not None
        if handshaken:
            what = f"TLS error {error.reason or error}"
        else:
            what = f"TLS handshake failed: {handshake_failure_cause(error)}"
            observe = self._listener.on_failed_authentication
            if observe is not None and is_authentication_failure(error):
                observe(self._name, "SSL")
        log.info("Kafka listener %s: closing connection from %s: %s", self._name, self.peer, what)
        self._failure = _Stopping(what)  # said here: closing is no further fault
        self._send_tls_output()
        self._transport.close()

    def _send_tls_output(self) -> None:
        assert self._tls is not None and self._transport is not None
        output = self._tls.take_output()
        if output:
            self._transport.write(output)

    def _await_rest(self) -> None:
        """Set SO_RCVLOWAT to what the partly read request still needs (module rules)."""
        core = self._core
        if core is None:
            return
        missing = core.bytes_missing
        if self._tls is not None:
            missing = self._tls.ciphertext_needed(missing)
        self._lowat.set(min(max(missing, 1), LOWAT_MAX_BYTES))

    def eof_received(self) -> bool:
        """The client sends no more: the requests it sent are still answered (one that only
        shut down its sending side reads them), then the connection closes (`_fail`)."""
        assert self._core is not None
        failure = None
        if self._core.buffered_bytes:
            failure = KafkaConnectionError(
                self.peer,
                f"closed in the middle of a frame ({self._core.buffered_bytes} bytes of it read)",
            )
        self._fail(failure)
        # Open for the answers: `_fail` closes it once they are written. TLS has no half-close
        # (a TLS client ends with close_notify, `data_received`): its EOF closes at once.
        return self._tls is None

    def pause_writing(self) -> None:
        self._writing_paused = True
        # An answer waits in the buffer: the idle check looks at it leaving from now on.
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        self._idle_timer = self._loop.call_later(
            self._idle_s() / SENDING_LOOKS_PER_IDLE, self._idle_check
        )

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._last_active = self._loop.time()
        self._pump()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._failure is None and exc is not None:
            self._failure = exc
        for timer in (self._idle_timer, self._close_timer):
            if timer is not None:
                timer.cancel()
        for task in self._handling.values():
            task.cancel()
        self._stop_sending()
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
            while not transport.is_closing():
                moved = False
                while self._closing_from is None and core.in_flight < self._limit:
                    try:
                        request = core.next_request()
                    except KafkaConnectionError as exc:
                        self._fail(exc)
                        break
                    if request is None:
                        break
                    self._start(request)
                    moved = True
                # A closing connection writes even while the send buffer is full: it reads no
                # more, so what it writes is bounded (`queued.max.requests` answers), and a
                # client that reads none is dropped when idle.
                writable = not self._writing_paused or self._closing_from is not None
                if writable and self._sending is None and core.output_ready:
                    rest = self._write_buffers(core.take_output())
                    if rest:
                        self._sending = self._loop.create_task(self._send_from_files(rest))
                    moved = True
                if not moved:
                    break
        finally:
            self._pumping = False
        if transport.is_closing():
            return
        if self._closing_from is not None:
            if core.requests_released >= self._closing_from and self._sending is None:
                transport.close()  # after what was written
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
        if self._sasl is not None:
            step = self._sasl.step(
                request.api_key, request.api_version, request.body, int(started * 1000)
            )
            if step is not None:
                self._sasl_step(request, step, started)
                return
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

    def _sasl_step(self, request: KafkaRequest, step: SaslStep, started: float) -> None:
        """Apply what the authenticator decided for `request`: the connection's principal and
        framing, its answer, and a close after it."""
        sasl, core = self._sasl, self._core
        assert sasl is not None and core is not None
        core.principal = sasl.principal or ANONYMOUS
        core.raw_sasl_tokens = sasl.raw_tokens
        if step.failed_attempt:
            observe = self._listener.on_failed_authentication
            if observe is not None:
                observe(self._name, sasl.mechanism)
        if step.close:
            # Closed after its answer: the request after it is where reading stops.
            self._fail(_Refused(step.failure or "SASL refused", request.sequence + 1))
        self._answered(request, step.response, started)

    def _spawn(self, request: KafkaRequest, started: float, ask: Callable[[], Answer]) -> None:
        task = self._loop.create_task(self._handle(request, started, ask))
        self._handling[request.sequence] = task
        task.add_done_callback(lambda _: self._handling.pop(request.sequence, None))

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

    def _write_buffers(self, pieces: list[Buffer | FileRecords]) -> list[Buffer | FileRecords]:
        """Write `pieces` up to the first records left in their file; the pieces from there
        (none: all written). Consecutive small pieces (the answers released together, the
        frame around large records) leave in one send; large records are written as they
        are, never joined (copied) into one buffer."""
        small: list[Buffer] = []
        rest: list[Buffer | FileRecords] = []
        for at, piece in enumerate(pieces):
            if not isinstance(piece, bytes | bytearray | memoryview):
                rest = pieces[at:]
                break
            if len(piece) < HOLD_MIN_BYTES:
                small.append(piece)
                continue
            if small:
                self._write(small[0] if len(small) == 1 else b"".join(small))
                small = []
            self._write(piece)
        if small:
            self._write(small[0] if len(small) == 1 else b"".join(small))
        return rest

    async def _send_from_files(self, pieces: list[Buffer | FileRecords]) -> None:
        """Write `pieces`, records left in their files first among them, each such records
        sent from its file (`_send_file_records`), then pump again. A failed send breaks the
        answer in the middle: the connection is dropped."""
        transport = self._transport
        assert transport is not None
        try:
            while pieces:
                records = pieces[0]
                assert not isinstance(records, bytes | bytearray | memoryview)
                await self._send_file_records(records)
                records.close()
                pieces = self._write_buffers(pieces[1:])
        except (OSError, KafkaStorageError) as exc:
            if self._failure is None:
                self._failure = exc
            transport.abort()
            return
        finally:
            for piece in pieces:
                if not isinstance(piece, bytes | bytearray | memoryview):
                    piece.close()
            self._sending = None
        # The sendfile resumed the reading it paused, which this connection may have paused
        # meanwhile (`queued.max.requests` reached, or closing).
        if self._reading_paused or self._closing_from is not None:
            transport.pause_reading()
        self._pump()

    async def _send_file_records(self, records: FileRecords) -> None:
        """Send `records` from their file with `sendfile` (Kafka's `FileRecords.transferTo`:
        no copy into user space); under TLS, or where the file or the platform cannot,
        read and write them. `loop.sendfile` starts once the transport's buffer is empty and
        pauses reading while it sends. Raises `KafkaStorageError` for a file cut back under
        them (fewer bytes sent than promised), `ConnectionError` for a lost connection."""
        transport = self._transport
        assert transport is not None
        if transport.is_closing():
            raise ConnectionError("the connection closed before an answer's records were sent")
        if self._tls is None and isinstance(records, FileRegion):
            try:
                # Typed for a file object; it calls only `fileno` without a fallback.
                sent = await self._loop.sendfile(
                    transport,
                    records,  # type: ignore[arg-type]
                    records.position,
                    records.size,
                    fallback=False,
                )
            except asyncio.SendfileNotAvailableError:
                pass  # raised before any byte was sent: written below
            else:
                self._written += sent
                self._last_active = self._loop.time()
                if sent != records.size:
                    raise records.cut_back(sent)
                return
        self._write(records.read())

    def _stop_sending(self) -> None:
        """Cancel a send from files before the transport closes: `loop.sendfile` then takes
        its callback off the socket while the socket is still open."""
        if self._sending is not None:
            self._sending.cancel()

    def _write(self, data: Buffer) -> None:
        assert self._transport is not None
        tls = self._tls
        if tls is not None:
            tls.seal(data)
            data = tls.take_output()
        self._transport.write(data)
        self._written += len(data)
        self._last_active = self._loop.time()

    # --- ending --------------------------------------------------------------------------------

    def _fail(self, failure: BaseException | None) -> None:
        """Close the connection at the request `failure` names (a `_RequestFailed`'s), else at
        the next one to be read (bytes that break the protocol, idleness, the peer's EOF:
        None): reading stops, the requests before it are still answered and their answers
        written in order, then it closes (module rules). Nothing from it on is answered: the
        later requests being handled are cancelled. Closing at an earlier request wins, and
        its failure is the one reported."""
        transport, core = self._transport, self._core
        assert transport is not None and core is not None
        if transport.is_closing():
            return
        at = failure.sequence if isinstance(failure, _RequestFailed) else core.requests_read
        if self._closing_from is not None and at >= self._closing_from:
            return
        self._closing_from = at
        if failure is not None:
            self._failure = failure
        for sequence, task in self._handling.items():
            if sequence > at:
                task.cancel()
        transport.pause_reading()
        if self._close_timer is None:
            wait_s = self._listener.config.close_wait_ms / 1000
            self._close_timer = self._loop.call_later(wait_s, self._close_waited)
        if not self._pumping:
            self._pump()  # writes what is ready; closes if nothing before `at` is awaited

    def _close_waited(self) -> None:
        """`close_wait_ms` passed since the connection began to close: close it without the
        answers still missing (what was written still leaves)."""
        self._close_timer = None
        transport, core = self._transport, self._core
        assert transport is not None and core is not None and self._closing_from is not None
        if transport.is_closing():
            return
        # A client that sent its EOF left of its own accord (as one closing during a long
        # JoinGroup does): no fault to warn of.
        log.log(
            logging.DEBUG if self._failure is None else logging.WARNING,
            "Kafka listener %s: closing connection from %s without answering %s: not answered "
            "within close_wait_ms (%d ms) of the close",
            self._name,
            self.peer,
            ", ".join(core.unanswered(self._closing_from)),
            self._listener.config.close_wait_ms,
        )
        self._stop_sending()
        transport.close()

    def abort(self) -> None:
        """The listener stops: drop the socket (`connection_lost` follows)."""
        if self._failure is None:
            self._failure = _Stopping("the listener stops")
        self._stop_sending()
        if self._transport is not None:
            self._transport.abort()

    def _idle_s(self) -> float:
        return self._listener.config.connections_max_idle_ms / 1000

    def _idle_check(self) -> None:
        """Closes the connection once nothing moved on it for `connections.max.idle.ms` (module
        rules) while it waited for a request with none being answered (waiting for answers is
        not idle), or for the client to read its answers; else looks again when that much time
        will have passed since the last activity, or sooner while an answer is being sent."""
        core, transport = self._core, self._transport
        assert core is not None and transport is not None
        idle_s = self._idle_s()
        now = self._loop.time()
        sending = self._sending is not None  # from files: those bytes are not counted yet
        unsent = transport.get_write_buffer_size() + unacknowledged_bytes(self._fd)
        reached = self._written - unsent
        if reached != self._reached:
            # Bytes reached the client since the last look: they are still moving if some are
            # left to send, else the last of them left after that look.
            self._last_active = max(
                self._last_active, now if unsent or sending else self._looked_at
            )
            self._reached = reached
        self._looked_at = now
        quiet_s = now - self._last_active
        if quiet_s >= idle_s:
            if self._writing_paused or sending or transport.is_closing():
                # A client that reads nothing holds no more than what was written: dropped.
                if self._failure is None:
                    self._failure = _Idle(idle_s, "its responses not read")
                self._stop_sending()
                transport.abort()
                return
            if self._closing_from is None and not core.in_flight:
                self._fail(_Idle(idle_s, "no request"))
        delay_s = idle_s - quiet_s if quiet_s < idle_s else idle_s
        if unsent or sending:
            delay_s = min(delay_s, idle_s / SENDING_LOOKS_PER_IDLE)
        self._idle_timer = self._loop.call_later(max(delay_s, 0.001), self._idle_check)

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
        elif isinstance(failure, KafkaStorageError):
            log.warning(closing, listener, self.peer, f"an answer's records not sent: {failure}")
        elif isinstance(failure, ConnectionError | _Stopping):
            log.debug("Kafka listener %s: lost %s: %s", listener, self.peer, failure)
        elif failure is not None:
            log.error(
                "Kafka listener %s: closing connection from %s on an unexpected error",
                listener,
                self.peer,
                exc_info=failure,
            )


# Linux's SIOCOUTQ (TIOCOUTQ's number): bytes in a TCP socket's send queue the peer has not
# acknowledged. The kernel's queue holds megabytes (autotuned), more than a slow client reads
# within an idle time: without it bytes that move would look still.
_SIOCOUTQ = 0x5411 if sys.platform == "linux" else None
_INT = struct.Struct("i")


def unacknowledged_bytes(fd: int) -> int:
    """Bytes written to socket `fd` (-1: none) that the peer has not acknowledged yet; 0 where
    the system does not tell."""
    if _SIOCOUTQ is None or fd < 0:
        return 0
    try:
        return int(_INT.unpack(fcntl.ioctl(fd, _SIOCOUTQ, bytes(_INT.size)))[0])
    except OSError:
        return 0


def send_at_once(sock: socket.socket | TransportSocket) -> None:
    """Turn Nagle's algorithm off (TCP_NODELAY) on an accepted connection's socket, as Kafka's
    acceptor does. asyncio turns it off only on sockets made with IPPROTO_TCP as their
    protocol, and a socket accepted from one made with 0 (`bind`'s) is not. With it on, an
    answer smaller than a segment waits while an earlier answer of the connection is
    unacknowledged: a client pipelining produce requests hears each acks=all answer only
    once the ACK for the one before rides on its next request, up to a request interval
    later. Never raises: a socket that refuses the option still carries the answers."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _no_credentials(mechanism: object) -> Callable[[str], None]:
    """The SCRAM lookup of a listener started without credentials: no user has one."""
    return lambda name: None


def _failure(request: KafkaRequest, exc: BaseException) -> Exception:
    """Why a connection closes when its request's handler raised `exc`: a refusal (one
    WARNING line) for a typed error, else an unexpected failure (logged with `exc`)."""
    what = request_label(request.api_key, request.api_version, request.correlation_id)
    if isinstance(exc, RequestRefusedError | KafkaError):
        return _Refused(f"{what} refused: {exc}", request.sequence)
    failure = _HandlerFailed(f"{what} failed: {exc!r}", request.sequence)
    failure.__cause__ = exc
    return failure


class _Idle(Exception):
    def __init__(self, idle_s: float, what: str) -> None:
        super().__init__(f"idle for connections.max.idle.ms ({int(idle_s * 1000)} ms): {what}")


class _Stopping(Exception):
    """The listener closes every connection (the node stops)."""


class _RequestFailed(Exception):
    """A request failed so that its connection closes at it: `sequence` is the request's."""

    def __init__(self, message: str, sequence: int) -> None:
        super().__init__(message)
        self.sequence = sequence


class _Refused(_RequestFailed):
    """A handler refused its request as a whole: the connection closes (one WARNING line)."""


class _HandlerFailed(_RequestFailed):
    """A handler raised: the connection closes (logged with the traceback)."""
