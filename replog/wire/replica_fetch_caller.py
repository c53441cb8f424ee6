"""The caller's side of one replica fetch connection (`replica_fetch_wire`): the greeting, one
request at a time written as a frame, its answer (or the connection's failure) awaited.

Used by a Spark task's fetches (`spark.framed_fetch`; replog's brokers serve no such
listener, their followers fetch over gRPC). How an answer's bytes come off the socket is the
subclass's (a task reads them straight into a buffer of its own): it is the asyncio protocol
that reads them, typed by the answer it hands over
(`bytes` or a `memoryview`), and calls `_answer_for` when a frame's header arrives and
`_deliver` when its payload is whole.

Rules:
- One exchange at a time: a frame answering no request awaited now (another sequence number,
  or a second answer to the one awaited) is `MalformedResponseError` naming the listener.
- A refusal frame (`REFUSAL_BIT`) fails the exchange with its Kafka error; one too short to
  hold an error code is `MalformedResponseError` naming the listener.
- Any failure (`_fail`) ends the connection: the awaited answer and every later exchange raise
  that first failure, and the socket is closed; `failed` says so to the owner, who connects
  afresh. A connection lost is `NetworkError` naming the listener and how much of an answer
  had been read.
"""

from __future__ import annotations

import asyncio
from typing import Generic, TypeVar

from replog.errors import InvalidRequestError, MalformedResponseError, NetworkError
from replog.wire import framed_wire
from replog.wire import replica_fetch_wire as wire

AnswerT = TypeVar("AnswerT", bytes, memoryview)


class ReplicaFetchCaller(asyncio.BaseProtocol, Generic[AnswerT]):
    """One replica fetch connection's exchanges (module rules); `where` names the listener in
    errors, `caller_id` is the broker id of the greeting."""

    def __init__(self, where: str, caller_id: int) -> None:
        self._where = where
        self._caller_id = caller_id
        self._socket: asyncio.Transport | None = None
        self._sequence = -1
        self._answer: asyncio.Future[AnswerT] | None = None
        self._failure: Exception | None = None  # once the connection is over

    @property
    def failed(self) -> bool:
        return self._failure is not None

    async def exchange(self, sequence: int, request: bytes) -> AnswerT:
        """Write `request` as frame `sequence`; its answer's payload."""
        if self._failure is not None:
            raise self._failure
        assert self._socket is not None and self._answer is None
        self._sequence = sequence
        answer: asyncio.Future[AnswerT] = asyncio.get_running_loop().create_future()
        self._answer = answer
        framed_wire.write_frame(self._socket, sequence, request)
        try:
            return await answer
        finally:
            self._answer = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._socket = transport
        framed_wire.keep_alive(transport)
        transport.write(wire.FORMAT.greeting(self._caller_id))

    def _answer_for(self, sequence: int) -> None:
        """Check that a frame numbered `sequence` answers the request awaited now."""
        answer = self._answer
        # A second answer to the request (in the same read, before the fetch has taken the
        # first) is as wrong as one to a request never sent.
        if answer is None or answer.done() or sequence & wire.SEQUENCE_MASK != self._sequence:
            raise MalformedResponseError(
                f"{self._where} answered request {sequence & wire.SEQUENCE_MASK}, never sent "
                "or answered already"
            )

    def _deliver(self, sequence: int, payload: AnswerT) -> None:
        """Hand over the payload of the frame numbered `sequence` (checked by `_answer_for`):
        the answer, or the Kafka error of a refusal."""
        if sequence & wire.REFUSAL_BIT:
            try:
                refusal: Exception = wire.parse_refusal(bytes(payload), self._where)
            except InvalidRequestError as exc:  # a refusal too short for its code
                refusal = MalformedResponseError(f"{self._where} sent malformed bytes: {exc}")
            self._fail(refusal)
            return
        assert self._answer is not None
        self._answer.set_result(payload)

    def _lost(self, exc: Exception | None, answer_bytes_read: int | None) -> None:
        """`connection_lost`, with how many bytes of an answer had been read (None: say
        nothing of it)."""
        read = ""
        if answer_bytes_read is not None:
            read = f" with {answer_bytes_read} bytes of an answer read"
        why = f": {exc}" if exc is not None else ""
        self._fail(NetworkError(f"{self._where} closed the connection{read}{why}"))

    def _fail(self, error: Exception) -> None:
        """The connection is over: the awaited answer and every later exchange fail."""
        if self._failure is None:
            self._failure = error
        answer = self._answer
        if answer is not None and not answer.done():
            answer.set_exception(self._failure)
        self.close()

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
