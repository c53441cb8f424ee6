"""A follower's fetches from one leader broker over a replica fetch connection
(`replica_fetch_wire`), in an incremental fetch session.

Theory of operation: the first fetch asks the leader's gRPC service where it listens for
replica fetches (`ReplicaFetchEndpoint`, once per connection, on the host the follower reaches
its gRPC listener at), connects, greets it with the follower's broker id and writes the fetch
as a frame; the answer's bytes go to the codec as they came off the socket (record bytes are
split off once, never decoded). Later fetches reuse the connection.

Rules (those of `broker_client.FetchStream`, which this replaces for followers):
- One fetch at a time, as a fetcher task sends them.
- The connection holds a KIP-227 fetch session (`replication.fetch_session`): the first
  request of a connection is sent in full, later ones with only what changed, each adding at
  most `SESSION_ADDS_PER_REQUEST` partitions to the session and carrying at most
  `SESSION_CHANGES_PER_REQUEST` changed entries (the rest go in the next requests, which ask
  for an answer at once meanwhile; a partition whose change waits is not read from an
  answer); any answer,
  the first one's too (the leader reads a bounded round), has only the partitions with news,
  and is checked against the session's partitions (`BrokerClient.checked_fetch_in`).
- An answer must come within the request's `max_wait_ms` plus the client's
  `request_timeout_ms` (`replica.socket.timeout.ms`), connecting included; otherwise
  `RequestTimedOutError` naming the broker and the wait.
- Any failed fetch closes the connection and ends the session: the next fetch connects
  afresh and starts a new session. So does a fetch that finds its connection lost while idle
  (a leader that restarted), at once: nothing of it was sent on the lost one. Failures are
  typed and name the broker, its address and what was wrong: `NetworkError` for a
  connection refused, lost or closed by the leader (with how much of an answer had arrived),
  `MalformedResponseError` for bytes that break the format or do not answer the request, the
  Kafka error of a refusal (`replica_fetch_wire`), and the endpoint call's
  `grpc.aio.AioRpcError`.
"""

from __future__ import annotations

import asyncio
import itertools

from replog.errors import MalformedResponseError, NetworkError, RequestTimedOutError
from replog.net_address import format_host_port, parse_host_port
from replog.replication import messages as m
from replog.replication.fetch_session import (
    SESSION_ADDS_PER_REQUEST,
    SESSION_CHANGES_PER_REQUEST,
    FetchChanges,
    FetcherSession,
)
from replog.wire import broker_codec as codec
from replog.wire import replica_fetch_wire as wire
from replog.wire.broker_client import BrokerClient
from replog.wire.replica_fetch_caller import ReplicaFetchCaller

RPC = "ReplicaFetch"  # how answers are named in errors


class ReplicaFetchClient:
    """Fetches from the leader `client` reaches, on one connection at a time."""

    def __init__(self, client: BrokerClient, source_id: int) -> None:
        self.client = client
        self.address = client.address
        self.source_id = source_id
        self._connection: _Connection | None = None
        self._session = FetcherSession(SESSION_ADDS_PER_REQUEST, SESSION_CHANGES_PER_REQUEST)
        self._sequences = itertools.count(1)

    async def fetch(
        self, request: m.FetchRequest, *, changes: FetchChanges | None = None
    ) -> m.FetchResponse:
        """The answer to `request` (module rules); `changes` says what changed since the
        previous request (`FetcherSession.to_send`)."""
        client = self.client
        wait_ms = client.request_timeout_ms + max(0, request.max_wait_ms)
        try:
            # asyncio.timeout, not wait_for: Python 3.11's wait_for drops a cancellation that
            # arrives as the answer does, and a fetcher told to stop would fetch on.
            async with asyncio.timeout(wait_ms / 1000):
                connection = self._connection
                if connection is not None and connection.failed:
                    # Lost while idle (a leader that restarted): nothing of this fetch was
                    # sent, so it goes on a new connection, in a new session, at once.
                    self.close()
                    connection = None
                if connection is None:
                    connection = self._connection = await self._connect(request.replica_id)
                sent = self._session.to_send(request, (), changes)
                sequence = next(self._sequences) & wire.SEQUENCE_MASK
                answer = await connection.exchange(
                    sequence, codec.fetch_request_to_proto(sent).SerializeToString()
                )
            # Any answer may leave out partitions of the session, the first one's too: the
            # leader reads at most a bounded round of them (`fetch_session`, bounded rounds).
            # A partition whose change waits was read at the entry the leader holds: not read.
            session = self._session
            return session.read_answer(client.checked_fetch_in(session.holds, answer, RPC))
        except TimeoutError:
            self.close()
            raise _timed_out(self._where(), wait_ms) from None
        except BaseException:
            self.close()
            raise

    async def _connect(self, caller_id: int) -> _Connection:
        host, _ = parse_host_port(self.client.address, "a broker address", error=NetworkError)
        port = await self.client.replica_fetch_endpoint()
        address = format_host_port(host, port)
        where = f"broker {self.source_id}'s replica fetch listener at {address}"
        loop = asyncio.get_running_loop()
        try:
            _, connection = await loop.create_connection(
                lambda: _Connection(where, caller_id), host, port
            )
        except OSError as exc:
            raise NetworkError(f"cannot connect to {where} (replica.fetch.port): {exc}") from None
        return connection

    def _where(self) -> str:
        return f"broker {self.source_id} at {self.client.address}"

    def close(self) -> None:
        """Close the connection; the next fetch connects again, in a new session."""
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()
        self._session.reset()

    def failed(self) -> None:
        """After a failed fetch: the next one asks for the port and connects afresh."""
        self.close()
        self.client.reconnect()

    async def aclose(self) -> None:
        self.close()
        await self.client.close()


def _timed_out(where: str, wait_ms: int) -> RequestTimedOutError:
    return RequestTimedOutError(f"{where} sent no replica fetch answer within {wait_ms} ms")


class _Connection(ReplicaFetchCaller[bytes], asyncio.Protocol):
    """One replica fetch connection: a fetch written, its answer (or failure) awaited."""

    def __init__(self, where: str, caller_id: int) -> None:
        super().__init__(where, caller_id)
        self._reader = wire.FORMAT.reader()

    # --- asyncio.Protocol ---------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        try:
            frames = self._reader.feed(data)
            for sequence, payload in frames:
                self._answer_for(sequence)
                self._deliver(sequence, payload)
                if self.failed:  # a refusal
                    return
        except MalformedResponseError as exc:
            self._fail(exc)
        except Exception as exc:  # the format's InvalidRequestError: the leader's bytes are bad
            self._fail(MalformedResponseError(f"{self._where} sent malformed bytes: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost(exc, self._reader.buffered or None)
