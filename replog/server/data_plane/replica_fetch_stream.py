"""A follower's fetches from one leader broker over one `ReplicaFetch.Fetch` gRPC stream
(`replica_fetch_service` is the leader's side), in an incremental fetch session.

Theory of operation: the first fetch opens the call on a channel to the leader's registered
gRPC address; each fetch writes its request (the session's changes only) and reads the answer,
whose bytes go to the codec as they came (record bytes split off once, never decoded). Later
fetches reuse the call.

Rules:
- One fetch at a time, as a fetcher task sends them.
- The call holds a KIP-227 fetch session (`replication.fetch_session`): its first request is
  sent in full, later ones with only what changed, each adding at most
  `SESSION_ADDS_PER_REQUEST` partitions to the session and carrying at most
  `SESSION_CHANGES_PER_REQUEST` changed entries (the rest go in the next requests, which ask
  for an answer at once meanwhile; a partition whose change waits is not read from an
  answer); any answer, the first one's too, has only the partitions with news and is checked
  against the session's partitions (`session_answers`).
- An answer must come within the request's `max_wait_ms` plus `request_timeout_ms`
  (`replica.socket.timeout.ms`); otherwise `RequestTimedOutError` naming the broker and the
  wait. The call itself has no deadline: the leader's purgatory long-polls each request.
- Any failed fetch cancels the call and ends the session, and `failed` drops the channel: the
  next fetch dials afresh and opens a new session with a full fetch (a leader that restarted
  or moved is found at its current address). Failures are typed and name the broker, its
  address and what was wrong: `NetworkError` for a leader unreachable, gone or closing the
  stream; the Kafka error of a leader's refusal (its gRPC status: INVALID_ARGUMENT or
  RESOURCE_EXHAUSTED `InvalidRequestError`, FAILED_PRECONDITION
  `InvalidFetchSessionEpochError`, UNIMPLEMENTED `UnsupportedVersionError`, any other
  `UnknownServerError`); `MalformedResponseError` for bytes that are no `FetchResponse` or
  do not answer the session.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Protocol

import grpc
from google.protobuf.message import DecodeError

from replog.errors import (
    InvalidFetchSessionEpochError,
    InvalidRequestError,
    KafkaError,
    MalformedResponseError,
    NetworkError,
    RequestTimedOutError,
    UnknownServerError,
    UnsupportedVersionError,
)
from replog.pb import replica_fetch_pb2
from replog.replication import messages as m
from replog.replication.fetch_session import (
    SESSION_ADDS_PER_REQUEST,
    SESSION_CHANGES_PER_REQUEST,
    FetchChanges,
    FetcherSession,
)
from replog.wire import broker_codec as codec
from replog.wire.grpc_reconnect import RECONNECT_OPTIONS
from replog.wire.redialing_channel import GRPC_CORE_INTERNAL, RedialingChannel
from replog.wire.session_answers import checked_session_answer

RPC = "ReplicaFetch.Fetch"  # how answers are named in errors
# An answer holds up to replica.fetch.response.max.bytes (10 MiB by default), more than gRPC's
# default 4 MiB message limit. Reconnects as Kafka's client makes them, as the Raft transport's
# (replog/wire/grpc_reconnect.py): a restarted leader is found at once.
_CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", 128 * 1024 * 1024),
    ("grpc.max_receive_message_length", 128 * 1024 * 1024),
    ("grpc.keepalive_time_ms", 10_000),
    *RECONNECT_OPTIONS,
]
_SERVICE = replica_fetch_pb2.DESCRIPTOR.services_by_name["ReplicaFetch"]
# What a leader's status means in Kafka's words (module rules); UNAVAILABLE and CANCELLED are
# a leader gone or stopping (NetworkError), anything else UnknownServerError.
_STATUS_ERRORS: dict[grpc.StatusCode, type[KafkaError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidRequestError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: InvalidRequestError,
    grpc.StatusCode.FAILED_PRECONDITION: InvalidFetchSessionEpochError,
    grpc.StatusCode.UNIMPLEMENTED: UnsupportedVersionError,
    grpc.StatusCode.UNAVAILABLE: NetworkError,
    grpc.StatusCode.CANCELLED: NetworkError,
}


class FetchChannel(Protocol):
    """What the stream needs of its channel (`RedialingChannel`): a new `Fetch` call, whose
    `write` takes a request's bytes and `read` returns an answer's (`grpc.aio.EOF` once the
    call ended) or raises its status, and `cancel` ends it; `reconnect` dials afresh."""

    def open_stream(self, rpc: str) -> Any: ...
    def reconnect(self) -> None: ...
    async def close(self) -> None: ...


class ReplicaFetchStream:
    """Fetches from the leader at `address` (broker `source_id`) on one call at a time."""

    def __init__(
        self,
        address: str,
        source_id: int,
        *,
        request_timeout_ms: int,
        channel: FetchChannel | None = None,
    ) -> None:
        """`channel`: where the calls go (a gRPC channel to `address` unless given: the
        simulator's network)."""
        self.address = address
        self.source_id = source_id
        self.request_timeout_ms = request_timeout_ms
        self._channel: FetchChannel = channel or RedialingChannel(
            address, _stub, _CHANNEL_OPTIONS, peer="broker", service=_SERVICE
        )
        self._call: Any = None
        self._session = FetcherSession(SESSION_ADDS_PER_REQUEST, SESSION_CHANGES_PER_REQUEST)

    async def fetch(
        self, request: m.FetchRequest, *, changes: FetchChanges | None = None
    ) -> m.FetchResponse:
        """The answer to `request` (module rules); `changes` says what changed since the
        previous request (`FetcherSession.to_send`)."""
        wait_ms = self.request_timeout_ms + max(0, request.max_wait_ms)
        session = self._session
        try:
            if self._call is None:
                self._call = self._channel.open_stream("Fetch")
            sent = session.to_send(request, (), changes)
            # asyncio.timeout, not wait_for: Python 3.11's wait_for drops a cancellation that
            # arrives as the answer does, and a fetcher told to stop would fetch on.
            async with asyncio.timeout(wait_ms / 1000):
                answer = await self._exchange(
                    codec.fetch_request_to_proto(sent).SerializeToString()
                )
            try:
                response = codec.fetch_response_from_wire(answer, where=self._where())
            except (DecodeError, InvalidRequestError) as exc:
                raise self._malformed(f"bytes that are no FetchResponse: {exc}") from None
            # Any answer may leave out partitions of the session, the first one's too: the
            # leader reads at most a bounded round of them (`fetch_session`, bounded rounds).
            # A partition whose change waits was read at the entry the leader holds: not read.
            return session.read_answer(
                checked_session_answer(response, session.holds, self._malformed)
            )
        except TimeoutError:
            self.close()
            raise RequestTimedOutError(
                f"{self._where()} sent no {RPC} answer within {wait_ms} ms"
            ) from None
        except grpc.aio.AioRpcError as exc:
            self.close()
            raise self._status_error(exc) from None
        except BaseException:
            self.close()
            raise

    async def _exchange(self, request: bytes) -> bytes:
        call = self._call
        # write() on a call that has ended raises InvalidStateError whatever its status; read()
        # then raises the status (AioRpcError) or, for a call the leader ended without an
        # error, returns EOF.
        with contextlib.suppress(asyncio.InvalidStateError):
            await call.write(request)
        answer = await call.read()
        if answer is grpc.aio.EOF:
            raise NetworkError(
                f"{self._where()} ended the {RPC} call without an error while a fetch waited "
                "for its answer"
            )
        return bytes(answer)

    def _status_error(self, exc: grpc.aio.AioRpcError) -> KafkaError:
        code = exc.code()
        details = exc.details() or ""
        error_type = _STATUS_ERRORS.get(code, UnknownServerError)
        if code == grpc.StatusCode.INTERNAL and GRPC_CORE_INTERNAL in details:
            error_type = NetworkError  # the connection cut under the call
        return error_type(f"{self._where()}: {RPC} failed: {code.name}: {details}")

    def _malformed(self, what: str) -> MalformedResponseError:
        return MalformedResponseError(f"{self._where()} answered {RPC} with {what}")

    def _where(self) -> str:
        return f"broker {self.source_id} at {self.address}"

    def close(self) -> None:
        """Cancel the call; the next fetch opens a new one, in a new session."""
        call, self._call = self._call, None
        if call is not None:
            call.cancel()
        self._session.reset()

    def failed(self) -> None:
        """After a failed fetch: the next one dials afresh (module rules)."""
        self.close()
        self._channel.reconnect()

    async def aclose(self) -> None:
        self.close()
        await self._channel.close()


def _stub(channel: grpc.aio.Channel) -> Any:
    """The stream method with requests and answers as serialized bytes: the fetcher writes and
    reads those itself (`broker_codec`), keeping record bytes out of protobuf's copies."""
    path = f"/{_SERVICE.full_name}/Fetch"
    return _Stub(channel.stream_stream(path, _registered_method=True))


class _Stub:
    def __init__(self, fetch: Any) -> None:
        self.Fetch = fetch
