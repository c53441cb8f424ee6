"""A quorum node's listener for metadata append connections (`metadata_append_wire`).

Theory of operation: after the greeting, every frame is one append. Each runs as its own task
through `append` (`MetadataLogAppends.append`: the rules live there, this shell only
translates), so a connection has any number of appends waiting to commit at once; each answer
is written, with its request's sequence number, as soon as its append is committed or refused,
whatever the order of the others (the answers of one commit leave in one socket write,
`framed_wire.CoalescedWrites`).

Rules:
- A frame that is not an `AppendRequest` is answered with `MalformedRequestError` naming the
  request and what was wrong; the connection goes on (the frames after it are intact).
- Bytes that break the framing (the greeting, a frame's length, a request numbered
  `CONNECTION_REFUSAL`, whose answer would read as a refusal) are answered with a
  `CONNECTION_REFUSAL` naming what was wrong, with a warning, and the connection ends; the node
  and its other connections go on.
- Anything else `append` raises is a bug: logged with its traceback, answered as
  UNKNOWN_SERVER_ERROR naming it.
- Backpressure: while `MAX_WAITING` appends of a connection wait to commit (give or take one
  socket read), or answers wait in the socket's write buffer (the caller does not read them),
  no more frames are read: a caller cannot make this node hold appends or answers without
  bound.
- A connection that closes cancels its waiting appends: a value already proposed still
  commits, its answer is dropped, as for a gRPC call whose caller went away.
- `close` stops listening and ends every connection. A wildcard host listens on every
  interface of both families, as the Raft Fetch listener does (`framed_wire.listen`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from replog.errors import InvalidRequestError, MalformedRequestError, UnknownServerError
from replog.net_address import format_peer
from replog.pb import raft_pb2 as pb
from replog.server.raft import metadata_append_wire as wire
from replog.wire import framed_wire

log = logging.getLogger("replog.server.raft")

Append = Callable[[list[bytes]], Awaitable[pb.AppendResponse]]
# Appends of one connection waiting to commit before it is read no more: room for a client's
# concurrent proposers, far below what a node could hold.
MAX_WAITING = 1024


class MetadataAppendListener(framed_wire.FramedListener):
    """Serves metadata append connections on one port; see the module rules."""

    def __init__(self, append: Append) -> None:
        super().__init__()
        self._append = append

    def _connection(self) -> asyncio.Protocol:
        return _InboundConnection(self)


class _InboundConnection(asyncio.Protocol):
    def __init__(self, listener: MetadataAppendListener) -> None:
        self._listener = listener
        self._socket: asyncio.Transport | None = None
        self._reader = framed_wire.InboundReader(wire.FORMAT)
        self._waiting: set[asyncio.Task[None]] = set()
        self._writing_paused = False
        self._reading_paused = False
        self._peer = "?"

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._peer = format_peer(transport.get_extra_info("peername"))
        if self._listener.refuses(transport, self._peer):
            return
        self._socket = transport
        self._out = framed_wire.CoalescedWrites(transport)
        self._listener.connections.add(self)
        framed_wire.keep_alive(transport)

    def data_received(self, data: bytes) -> None:
        try:
            frames = self._reader.feed(data)
        except InvalidRequestError as exc:
            self._refuse(exc)
            return
        loop = asyncio.get_running_loop()
        for sequence, payload in frames:
            if sequence == wire.CONNECTION_REFUSAL:
                # Its answer would read as the refusal of the whole connection.
                self._refuse(
                    InvalidRequestError(
                        f"{wire.FORMAT.name} request with sequence number "
                        f"{wire.CONNECTION_REFUSAL}: requests are numbered from 1"
                    )
                )
                return
            try:
                values = wire.parse_request(sequence, payload)
            except MalformedRequestError as exc:
                self._write(sequence, wire.refusal(exc))
                continue
            task = loop.create_task(self._serve(sequence, values))
            self._waiting.add(task)
            task.add_done_callback(self._done)
        self._pace()

    def _refuse(self, exc: InvalidRequestError) -> None:
        """Answer bytes that break the format with a refusal of the connection, and end it."""
        refused = MalformedRequestError(f"from {self._peer}: {exc}")
        log.warning("metadata append connection from %s: %s; closing it", self._peer, exc)
        assert self._socket is not None
        self._socket.write(wire.answer_frame(wire.CONNECTION_REFUSAL, wire.refusal(refused)))
        self.close()

    async def _serve(self, sequence: int, values: list[bytes]) -> None:
        try:
            answer = await self._listener._append(values)
        except Exception as exc:
            log.exception("metadata append %d from %s failed", sequence, self._peer)
            answer = wire.refusal(UnknownServerError(f"the append failed on the node: {exc!r}"))
        self._write(sequence, answer)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._waiting.discard(task)
        self._pace()

    def _write(self, sequence: int, answer: pb.AppendResponse) -> None:
        if self._socket is not None and not self._socket.is_closing():
            self._out.write(wire.answer_frame(sequence, answer))

    def _pace(self) -> None:
        """Read while neither appends nor answers are backed up (module rules)."""
        socket = self._socket
        if socket is None or socket.is_closing():
            return
        paused = self._writing_paused or len(self._waiting) >= MAX_WAITING
        if paused != self._reading_paused:
            self._reading_paused = paused
            if paused:
                socket.pause_reading()
            else:
                socket.resume_reading()

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._pace()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._pace()

    def connection_lost(self, exc: Exception | None) -> None:
        self._listener.connections.discard(self)
        for task in list(self._waiting):
            task.cancel()

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
