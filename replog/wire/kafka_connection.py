"""An asyncio client connection to one Kafka listener: requests out, responses back by
correlation id, the versions agreed with ApiVersions (docs/client.md, "Connections").

Replog's own clients (Producer, Consumer, Admin, the CLI, the Spark source) reach a cluster
only through this: Kafka's protocol on the brokers' Kafka listeners.

Rules (Kafka's NetworkClient where it has one):
- `open` connects within `socket.connection.setup.timeout.ms` and sends ApiVersions (v3 and
  up name the client software) at once. A refused or unreachable address, or none of it
  within the timeout, is a NetworkError naming the address. The handshake answer must arrive
  within the same timeout.
- Something that is not a Kafka listener is named, not waited out
  (`NotAKafkaListenerError`, not retriable): an HTTP/2 server (a gRPC listener, replog's
  internal one among them) greets every connection with a SETTINGS frame; an HTTP/1 server
  (a metrics endpoint) answers a plain `GET` probed on a second connection when the
  ApiVersions answer is late by `PROBE_AFTER_MS`; a peer that sends bytes that are no
  ApiVersions response is not one either. A peer that closes having sent nothing is a
  NetworkError (retriable): a broker starting or stopping, or a proxy in front of one that is
  down, does that too.
- With a TLS context (`security.protocol=SSL`, `client.tls_connection`) the connection is TLS
  from its first byte, the broker's certificate checked for the host dialled when the context
  says so. A refused certificate, either side's, is an `SslAuthenticationError`; a peer
  that closes at the first bytes is probed for the other security protocol
  (`tls_handshake`), found: a `SecurityProtocolMismatchError` (neither is retriable).
- Each request goes out at the highest version both sides serve within the caller's bounds;
  none is an UnsupportedVersionError naming the API, the broker's range and ours.
- Responses come in request order (Kafka's guarantee); one whose correlation id is not the
  oldest outstanding request's, or that does not decode, is a MalformedResponseError and
  the connection closes. A request unanswered after its timeout is a RequestTimedOutError
  and the connection closes (as Kafka's client does: the answers behind it are in doubt).
  A lost connection fails every outstanding request with a NetworkError (retriable; the
  outcome of a produce is unknown).
- A request sent with `expect_response=False` (Produce with acks=0) takes no slot.
- Frames are read into one buffer per response (`BufferedProtocol`): a large Fetch answer is
  received straight into a buffer of its own (a bytearray, or what the `allocate` given
  makes: the Spark source's fetches use numpy's, not zeroed, since every byte of it is
  received) and its records are views of it, never copied.
  While such a frame comes in, the socket's receive low-water mark (`ReceiveLowWater`:
  `SO_RCVLOWAT`, Linux) is what is left of it, at most `RECEIVE_LOW_WATER`, and 1 between
  frames: the loop wakes about once per MiB of a large answer instead of for every few hundred
  KiB the kernel has, and never waits for bytes the frame does not have (the kernel also wakes
  a reader whose buffer is full, or whose connection closed or failed). A failed `setsockopt`
  turns it off for the connection, and a TLS connection has none (its socket's bytes are not
  the frame's).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import ssl
import struct
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from replog.clock import monotonic_ms
from replog.errors import (
    ClientClosedError,
    MalformedResponseError,
    NetworkError,
    NotAKafkaListenerError,
    ProtocolDecodeError,
    ReplogError,
    RequestTimedOutError,
    UnsupportedVersionError,
)
from replog.kafka.messages import REQUESTS
from replog.kafka.messages.api_versions_request import ApiVersionsRequest
from replog.kafka.messages.api_versions_response import ApiVersionsResponse
from replog.kafka.messages.request_header import RequestHeader
from replog.kafka.protocol.codec import Message
from replog.kafka.protocol.framing import (
    decode_response,
    request_header_version,
)
from replog.net_address import format_host_port, parse_host_port
from replog.wire.receive_low_water import ReceiveLowWater
from replog.wire.sasl_authentication import REAUTH_FRACTION, SaslCredentials, authenticate
from replog.wire.tls_handshake import certificate_failure, connect_failure, first_bytes_failure

SOFTWARE_NAME = "replog"
SOFTWARE_VERSION = "0.1.0"
PROBE_AFTER_MS = 1_000  # an ApiVersions answer this late has the peer probed for HTTP/1
_PROBE_BUDGET_S = 0.8
_SIZE = struct.Struct(">i")
_SCRATCH_BYTES = 256 * 1024
_OWN_BUFFER_BYTES = 64 * 1024  # a frame at least this large is received into its own buffer
# The most a large frame's read waits for before the loop wakes (module rules). Measured on 8 MiB
# Fetch answers (bench/spark_fetch_path.py): 1 MiB cost the loop thread least.
RECEIVE_LOW_WATER = 1 << 20
_UNSUPPORTED_VERSION = 35
_HANDSHAKE_FRAME_MAX = 1 << 20  # an ApiVersions answer is a few KiB
_HTTP2_SETTINGS = 0x04


@dataclass(slots=True)
class _Pending:
    correlation_id: int
    api_key: int
    version: int
    future: asyncio.Future[Message]


class KafkaConnection(asyncio.BufferedProtocol):
    """One connection to the Kafka listener at `address` (module docstring). Build it with
    `await KafkaConnection.open(...)`."""

    def __init__(
        self, address: str, client_id: str, allocate: Callable[[int], Any] = bytearray
    ) -> None:
        self.address = address
        self.client_id = client_id
        self._allocate = allocate  # a large frame's own buffer: writable, `len` bytes
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.finalized_features: dict[str, int] = {}
        self._transport: asyncio.Transport | None = None
        self._ssl_object: ssl.SSLObject | None = None
        self._pending: deque[_Pending] = deque()
        self._correlation = itertools.count(1)
        self._closed_cause: ReplogError | None = None
        self._closed = asyncio.get_running_loop().create_future()
        self._can_write = asyncio.Event()
        self._can_write.set()
        # Receiving: a shared scratch buffer for small frames, or one frame's own buffer.
        self._scratch = bytearray(_SCRATCH_BYTES)
        self._scratch_view = memoryview(self._scratch)
        self._start = 0  # first unparsed byte in scratch
        self._end = 0  # end of the bytes received in scratch
        self._frame: Any = None  # the large frame being received (`allocate`'s), or None
        self._frame_filled = 0
        self._first_bytes = b""  # what the peer sent first (diagnosis)
        # The receive low-water mark of the socket, following a large frame (module rules).
        self._low_water = ReceiveLowWater(None)
        # When its SASL session is to be renewed (KIP-368; None: never): from then on the
        # connection is replaced before its next use (`KafkaConnections.get`).
        self.renew_at_ms: int | None = None

    # --- opening -------------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        address: str,
        *,
        client_id: str,
        setup_timeout_ms: int,
        allocate: Callable[[int], Any] = bytearray,
        tls: ssl.SSLContext | None = None,
        sasl: SaslCredentials | None = None,
    ) -> KafkaConnection:
        """A connection whose ApiVersions handshake is done (module docstring): over TLS with
        the context `tls`, then with `sasl` its SASL authentication (`sasl_authentication`)."""
        host, port = parse_host_port(address, "broker address")
        loop = asyncio.get_running_loop()
        connection = cls(address, client_id, allocate)
        try:
            async with asyncio.timeout(setup_timeout_ms / 1000):
                await loop.create_connection(
                    lambda: connection,
                    host,
                    port,
                    ssl=tls,
                    server_hostname=None if tls is None else host,
                )
        except TimeoutError:
            connection.close()
            raise NetworkError(
                f"no connection to {address} within {setup_timeout_ms} ms "
                "(socket.connection.setup.timeout.ms): is the address right and the broker up?"
            ) from None
        except OSError as exc:
            lost = NetworkError(f"cannot connect to {address}: {_os_cause(exc)}")
            raise await connect_failure(lost, exc, address, tls=tls is not None) from None
        try:
            await connection._handshake(setup_timeout_ms)
        except (NetworkError, NotAKafkaListenerError) as exc:
            closed_by_peer = connection._closed.done()
            connection.close()
            raise await first_bytes_failure(
                exc,
                address,
                ssl_object=connection._ssl_object,
                tls=tls is not None,
                first=connection._first_bytes,
                closed_by_peer=closed_by_peer,
            ) from None
        except BaseException:
            connection.close()
            raise
        if sasl is None:
            return connection
        # SASL after TLS and ApiVersions, as Kafka's clients: on SASL_SSL the exchange (and
        # the password PLAIN sends) travels inside the TLS session.
        try:
            lifetime_ms = await authenticate(connection, sasl, setup_timeout_ms)
        except BaseException:
            connection.close()
            raise
        if lifetime_ms:
            connection.renew_at_ms = monotonic_ms() + int(lifetime_ms * REAUTH_FRACTION)
        return connection

    async def _handshake(self, timeout_ms: int) -> None:
        request = ApiVersionsRequest(
            client_software_name=SOFTWARE_NAME, client_software_version=SOFTWARE_VERSION
        )
        answer = self._start_call(request, ApiVersionsRequest.MAX_VERSION)
        probe: asyncio.Task[str | None] | None = None
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                done, _ = await asyncio.wait({answer}, timeout=PROBE_AFTER_MS / 1000)
                if not done:
                    probe = asyncio.ensure_future(_http1_probe(self.address))
                    either: set[asyncio.Future[Any]] = {answer, probe}
                    await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
                    if not answer.done() and probe.result() is not None:
                        raise NotAKafkaListenerError(
                            f"{self.address} answered HTTP/1 ({probe.result()!r}) and not "
                            "Kafka's ApiVersions: that is an HTTP server, such as a replog "
                            "node's metrics endpoint; clients use a Kafka listener (replog "
                            "cluster status shows them, by default 127.0.0.1:9092)"
                        )
                response = await answer
        except TimeoutError:
            raise NetworkError(
                f"{self.address} accepted the connection but did not answer ApiVersions "
                f"within {timeout_ms} ms (socket.connection.setup.timeout.ms): not a Kafka "
                "listener, or a broker that hangs"
            ) from None
        except NetworkError as exc:
            raise self._not_kafka(exc) from None
        except MalformedResponseError as exc:
            raise self._not_kafka(exc) from None
        finally:
            if probe is not None:
                probe.cancel()
                with contextlib.suppress(BaseException):
                    await probe
        assert isinstance(response, ApiVersionsResponse)
        if response.error_code == _UNSUPPORTED_VERSION:
            # KIP-511: the broker's ApiVersions range came back; ask again at its top.
            own = [k for k in response.api_keys if k.api_key == ApiVersionsRequest.API_KEY]
            top = own[0].max_version if own else 0
            response = await self._start_call(ApiVersionsRequest(), min(top, 2))
            assert isinstance(response, ApiVersionsResponse)
        if response.error_code != 0:
            raise NotAKafkaListenerError(
                f"{self.address} refused ApiVersions with error code {response.error_code}"
            )
        self.api_versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        # ApiVersions v3+: the cluster's finalized feature levels (a transactional producer
        # reads transaction.version from them).
        self.finalized_features = {
            f.name: f.max_version_level for f in (response.finalized_features or ())
        }

    def _not_kafka(self, exc: ReplogError) -> ReplogError:
        """What a failed handshake means (module docstring)."""
        first = self._first_bytes
        if _http2_settings(first):
            return NotAKafkaListenerError(
                f"{self.address} answered HTTP/2: that is a gRPC listener (replog's internal "
                "one, or another gRPC/HTTP/2 server), not a Kafka listener; clients use the "
                "Kafka listener (replog cluster status shows them, by default 127.0.0.1:9092)"
            )
        if first.startswith(b"HTTP/"):
            line = first.split(b"\r\n", 1)[0].decode("latin-1")
            return NotAKafkaListenerError(
                f"{self.address} answered HTTP/1 ({line!r}): that is an HTTP server, not a "
                "Kafka listener"
            )
        if isinstance(exc, NetworkError):
            if not first:
                # Nothing came: a broker starting or stopping, or a proxy in front of one that
                # is down, closes so too; retriable, as Kafka's client takes any disconnect.
                return NetworkError(
                    f"{self.address} closed the connection before answering ApiVersions (a "
                    "broker starting or stopping, or a proxy in front of one that is down)"
                )
            return NotAKafkaListenerError(
                f"{self.address} closed the connection without answering ApiVersions (it "
                f"sent {first[:16]!r}): not a Kafka listener"
            )
        return NotAKafkaListenerError(
            f"{self.address} answered ApiVersions with bytes that are not Kafka's ({exc})"
        )

    # --- versions ------------------------------------------------------------------------

    def version(self, api_key: int, *, min_version: int = 0, max_version: int | None = None) -> int:
        """The highest version of `api_key` both sides serve within [min_version, max_version]."""
        cls = REQUESTS[api_key]
        ours_min = max(cls.MIN_VERSION, min_version)
        ours_max = cls.MAX_VERSION if max_version is None else min(cls.MAX_VERSION, max_version)
        theirs = self.api_versions.get(api_key)
        if theirs is None:
            raise UnsupportedVersionError(
                f"the broker at {self.address} does not serve {cls.NAME[: -len('Request')]}"
            )
        low, high = max(ours_min, theirs[0]), min(ours_max, theirs[1])
        if low > high:
            raise UnsupportedVersionError(
                f"the broker at {self.address} serves {cls.NAME[: -len('Request')]} "
                f"v{theirs[0]}-{theirs[1]}, this client v{ours_min}-{ours_max}"
            )
        return high

    def serves(self, api_key: int) -> bool:
        return api_key in self.api_versions

    # --- calls ---------------------------------------------------------------------------

    async def call(
        self,
        request: Message,
        *,
        timeout_ms: int,
        min_version: int = 0,
        max_version: int | None = None,
    ) -> tuple[Message, int]:
        """Send `request` and wait for its response; returns (response, version used)."""
        version = self.version(request.API_KEY, min_version=min_version, max_version=max_version)
        future = self._start_call(request, version)
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                response = await asyncio.shield(future)
        except TimeoutError:
            name = request.NAME[: -len("Request")]
            self._fail(
                RequestTimedOutError(
                    f"{self.address} did not answer {name} within {timeout_ms} ms; the "
                    "connection is closed (the answers behind it are in doubt)"
                )
            )
            raise RequestTimedOutError(
                f"{self.address} did not answer {name} within {timeout_ms} ms"
            ) from None
        return response, version

    def send(
        self, request: Message, *, min_version: int = 0, max_version: int | None = None
    ) -> int:
        """Send `request` expecting no response (Produce with acks=0); returns the version."""
        version = self.version(request.API_KEY, min_version=min_version, max_version=max_version)
        self._write(request, version, next(self._correlation))
        return version

    async def writable(self) -> None:
        """Return once the socket's send buffer is below its high-water mark (backpressure)."""
        if self._closed_cause is not None:
            raise self._closed_cause
        await self._can_write.wait()

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    @property
    def is_closed(self) -> bool:
        return self._closed_cause is not None

    def _start_call(self, request: Message, version: int) -> asyncio.Future[Message]:
        correlation_id = next(self._correlation)
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._write(request, version, correlation_id)
        self._pending.append(_Pending(correlation_id, request.API_KEY, version, future))
        return future

    def _write(self, request: Message, version: int, correlation_id: int) -> None:
        if self._closed_cause is not None:
            raise self._closed_cause
        assert self._transport is not None
        api_key = request.API_KEY
        out = bytearray(b"\0\0\0\0")
        RequestHeader(
            request_api_key=api_key,
            request_api_version=version,
            correlation_id=correlation_id,
            client_id=self.client_id,
        ).write(out, request_header_version(api_key, version))
        request.write(out, version)
        _SIZE.pack_into(out, 0, len(out) - 4)
        self._transport.write(out)

    # --- closing -------------------------------------------------------------------------

    def close(self, cause: ReplogError | None = None) -> None:
        """Close the connection; outstanding requests fail with `cause` (default a
        NetworkError saying this client closed it)."""
        self._fail(
            cause or NetworkError(f"the connection to {self.address} was closed by this client")
        )

    def renewal_due(self) -> bool:
        """Its SASL session is to be renewed (`renew_at_ms` passed) and no request waits on
        it: a new connection takes over. One kept busy past it goes on until the broker closes
        it at its session's end (requests sent in order on one connection stay in order)."""
        renew_at = self.renew_at_ms
        return renew_at is not None and not self._pending and monotonic_ms() >= renew_at

    async def wait_closed(self) -> None:
        await asyncio.shield(self._closed)

    def _fail(self, cause: ReplogError) -> None:
        if self._closed_cause is None:
            self._closed_cause = cause
        pending, self._pending = self._pending, deque()
        for entry in pending:
            if not entry.future.done():
                entry.future.set_exception(cause)
                entry.future.exception()  # a caller that gave up must not log "never retrieved"
        self._can_write.set()
        if self._transport is not None:
            self._transport.close()
        elif not self._closed.done():
            self._closed.set_result(None)

    # --- asyncio.BufferedProtocol ----------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._ssl_object = transport.get_extra_info("ssl_object")  # None: plaintext
        # Over TLS the socket holds ciphertext, and the TLS layer may hold part of a record
        # already: a mark in plaintext bytes could wait for bytes that never come.
        if self._ssl_object is None:
            self._low_water = ReceiveLowWater(transport.get_extra_info("socket"))

    def connection_lost(self, exc: Exception | None) -> None:
        cause = f": {_os_cause(exc)}" if isinstance(exc, OSError) else ""
        refused = certificate_failure(self.address, exc)
        self._fail(refused or NetworkError(f"the connection to {self.address} was lost{cause}"))
        if not self._closed.done():
            self._closed.set_result(None)

    def pause_writing(self) -> None:
        self._can_write.clear()

    def resume_writing(self) -> None:
        self._can_write.set()

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._frame is not None:
            return memoryview(self._frame)[self._frame_filled :]
        if self._end == _SCRATCH_BYTES:
            # Move the partial frame to the front to make room.
            left = self._end - self._start
            self._scratch[:left] = self._scratch[self._start : self._end]
            self._start, self._end = 0, left
        return self._scratch_view[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._frame is not None:
            self._frame_filled += nbytes
            left = len(self._frame) - self._frame_filled
            if left == 0:
                self._low_water.set(1)  # the next frame's size: any byte is worth waking for
                frame, self._frame = self._frame, None
                self._deliver(memoryview(frame))
            elif left < self._low_water.mark:
                self._low_water.set(left)
            return
        if not self._first_bytes:
            self._first_bytes = bytes(self._scratch_view[self._end : self._end + min(nbytes, 64)])
        self._end += nbytes
        self._parse_scratch()

    def eof_received(self) -> bool | None:
        return None

    def _parse_scratch(self) -> None:
        while self._closed_cause is None and self._end - self._start >= 4:
            if not self.api_versions and _http2_settings(self._first_bytes):
                self._fail(NetworkError(f"{self.address} answered HTTP/2"))
                return
            size = _SIZE.unpack_from(self._scratch, self._start)[0]
            if not self.api_versions and size > _HANDSHAKE_FRAME_MAX:
                # Before the handshake, no buffer is sized by a peer not known to be Kafka's.
                self._fail(
                    MalformedResponseError(
                        f"{self.address} announced a {size}-byte frame before ApiVersions"
                    )
                )
                return
            if size < 4:
                self._fail(
                    MalformedResponseError(f"{self.address} sent a response frame of {size} bytes")
                )
                return
            have = self._end - self._start - 4
            if have >= size:
                body_start = self._start + 4
                self._start = body_start + size
                self._deliver(memoryview(bytes(self._scratch_view[body_start : self._start])))
                continue
            if size >= _OWN_BUFFER_BYTES or size + 4 > _SCRATCH_BYTES:
                frame = self._allocate(size)
                frame[:have] = self._scratch_view[self._start + 4 : self._end]
                self._frame, self._frame_filled = frame, have
                self._start = self._end = 0
                self._low_water.set(min(size - have, RECEIVE_LOW_WATER))
            return
        if self._start == self._end:
            self._start = self._end = 0

    def _deliver(self, frame: memoryview) -> None:
        if not self._pending:
            self._fail(MalformedResponseError(f"{self.address} sent a response to no request"))
            return
        entry = self._pending[0]
        correlation_id = _SIZE.unpack_from(frame, 0)[0] if len(frame) >= 4 else None
        if correlation_id != entry.correlation_id:
            self._fail(
                MalformedResponseError(
                    f"{self.address} answered correlation id {correlation_id} where "
                    f"{entry.correlation_id} was due"
                )
            )
            return
        self._pending.popleft()
        try:
            _, response = decode_response(frame, entry.api_key, entry.version)
        except ProtocolDecodeError as exc:
            failure = MalformedResponseError(
                f"{self.address} sent a {REQUESTS[entry.api_key].NAME[:-7]} v{entry.version} "
                f"response that does not decode: {exc}"
            )
            if not entry.future.done():
                entry.future.set_exception(failure)
            self._fail(failure)
            return
        if not entry.future.done():
            entry.future.set_result(response)


class KafkaConnections:
    """The connections of one client, one per (address, lane), opened on first use and again
    after one closed. Lanes keep a coordinator's heartbeats from queueing behind a long-poll
    fetch on the same broker (Kafka's client uses a second connection to the coordinator)."""

    def __init__(
        self,
        *,
        client_id: str,
        setup_timeout_ms: int,
        allocate: Callable[[int], Any] = bytearray,
        sasl: SaslCredentials | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.client_id = client_id
        self.setup_timeout_ms = setup_timeout_ms
        self.sasl = sasl  # every connection authenticates with it (None: no SASL)
        self._allocate = allocate  # each connection's large frames' buffers (module docstring)
        self.tls = tls  # every connection's TLS context (None: plaintext)
        self._open: dict[tuple[str, str], KafkaConnection] = {}
        self._dialing: dict[tuple[str, str], asyncio.Future[KafkaConnection]] = {}
        self._closed = False

    def cached(self, address: str, lane: str = "") -> KafkaConnection | None:
        connection = self._open.get((address, lane))
        if connection is None or connection.is_closed or connection.renewal_due():
            return None  # one due for renewal is replaced by `get`
        return connection

    async def get(self, address: str, lane: str = "") -> KafkaConnection:
        """The open connection to `address` on `lane`, dialled if there is none."""
        if self._closed:
            raise ClientClosedError("the client is closed: its connections are released")
        key = (address, lane)
        connection = self._open.get(key)
        if connection is not None and not connection.is_closed:
            if not connection.renewal_due():
                return connection
            # Its SASL session nears its end: a fresh one authenticates anew, and this one
            # closes (nothing waits on it).
            del self._open[key]
            connection.close()
        dialing = self._dialing.get(key)
        if dialing is None:
            dialing = self._dialing[key] = asyncio.ensure_future(
                KafkaConnection.open(
                    address,
                    client_id=self.client_id,
                    setup_timeout_ms=self.setup_timeout_ms,
                    allocate=self._allocate,
                    sasl=self.sasl,
                    tls=self.tls,
                )
            )
            dialing.add_done_callback(lambda done: self._dialled(key, done))
        return await asyncio.shield(dialing)

    def _dialled(self, key: tuple[str, str], done: asyncio.Future[KafkaConnection]) -> None:
        if self._dialing.get(key) is done:
            del self._dialing[key]
        if done.cancelled() or done.exception() is not None:
            return
        connection = done.result()
        if self._closed:
            connection.close()
        else:
            self._open[key] = connection

    def drop(self, address: str, lane: str = "") -> None:
        """Close the connection to `address` on `lane` (the next `get` dials afresh)."""
        connection = self._open.pop((address, lane), None)
        if connection is not None:
            connection.close()

    async def close(self) -> None:
        self._closed = True
        for dialing in list(self._dialing.values()):
            dialing.cancel()
        connections, self._open = self._open, {}
        for connection in connections.values():
            connection.close()
        for connection in connections.values():
            await connection.wait_closed()

    def addresses(self) -> Mapping[tuple[str, str], KafkaConnection]:
        return dict(self._open)


def _http2_settings(first: bytes) -> bool:
    """Whether `first` starts with an HTTP/2 SETTINGS frame on stream 0 (a server's preface).

    A Kafka response to correlation id 1 cannot: its bytes 4-8 are 00 00 00 01."""
    if len(first) < 9:
        return False
    length = int.from_bytes(first[0:3], "big")
    return first[3] == _HTTP2_SETTINGS and first[5:9] == b"\0\0\0\0" and length % 6 == 0


async def _http1_probe(address: str) -> str | None:
    """The status line an HTTP/1 server at `address` answers a `GET /` with, or None."""
    host, port = parse_host_port(address, "broker address")
    try:
        async with asyncio.timeout(_PROBE_BUDGET_S):
            reader, writer = await asyncio.open_connection(host, port)
            try:
                host_header = format_host_port(host, port)
                writer.write(f"GET / HTTP/1.0\r\nHost: {host_header}\r\n\r\n".encode())
                line = await reader.readline()
            finally:
                writer.close()
    except (OSError, TimeoutError, asyncio.IncompleteReadError):
        return None
    if not line.startswith(b"HTTP/"):
        return None
    return line.strip().decode("latin-1")


def _os_cause(exc: BaseException | None) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return str(exc) if exc is not None else "closed"
