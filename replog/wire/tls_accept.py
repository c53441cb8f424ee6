"""The TLS handshake of one connection accepted by a framed listener, done where its failure
can be seen: asyncio's own TLS server ends a failed handshake silently (outside debug mode) and
without the peer, and issue #81 asks for one line naming peer and cause, and a count.

Rules:
- The TCP connection is accepted plaintext and its reading paused at once, so no byte is read
  before the handshake (`loop.start_tls`) reads it; the listener's protocol is made connected
  (`connection_made`) with the TLS transport only once the handshake passed.
- A failed handshake aborts the connection and is handed to `on_failure` with the peer and the
  error; the listener's protocol never sees it.
- The handshake is a task of its connection: the listener holds the connection while it runs,
  and its `close` cancels it.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from typing import Protocol

from replog.net_address import format_peer

FailureObserver = Callable[[str, BaseException], None]


class Holder(Protocol):
    """What holds the connections of a listener (`framed_wire.FramedListener.connections`)."""

    def add(self, connection: TlsAccept) -> None: ...

    def discard(self, connection: TlsAccept) -> None: ...


class TlsAccept(asyncio.Protocol):
    """One accepted connection until its handshake ends (module rules)."""

    def __init__(
        self,
        context: ssl.SSLContext,
        inner: asyncio.Protocol,
        on_failure: FailureObserver,
        holder: Holder,
    ) -> None:
        self._context = context
        self._inner = inner
        self._on_failure = on_failure
        self._holder = holder
        self._task: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        transport.pause_reading()
        self._holder.add(self)
        self._task = asyncio.get_running_loop().create_task(self._handshake(transport))

    async def _handshake(self, transport: asyncio.Transport) -> None:
        peer = format_peer(transport.get_extra_info("peername"))
        try:
            tls = await asyncio.get_running_loop().start_tls(
                transport, self._inner, self._context, server_side=True
            )
        except OSError as error:  # ssl.SSLError is one; so are a reset and the timeout's abort
            transport.abort()
            self._on_failure(peer, error)
            return
        except BaseException:
            transport.abort()
            raise
        finally:
            self._holder.discard(self)
        if tls is None:  # the peer's EOF ended the handshake, already closed
            self._on_failure(peer, ConnectionResetError("closed by the peer"))
            return
        self._inner.connection_made(tls)

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
