"""`ReceiveLowWater`: a socket's receive low-water mark (`SO_RCVLOWAT`), the bytes the kernel
waits for before it wakes the socket's reader, kept by the asyncio protocols that read a frame
whose size they know (the Kafka listener's requests, the Kafka client's large responses).

Rules:
- Linux only (where the mark also governs epoll's readiness); elsewhere `set` does nothing.
- The mark last set is remembered and `set` makes the system call only when the mark changes:
  the protocols ask on every read, and most reads leave the mark where it is.
- The first `setsockopt` that fails (OSError) turns marking off for that socket: the socket
  keeps the mark it had, the default 1 when it was the first. The kernel wakes a reader whose
  buffer is full, or whose connection closed or failed, whatever the mark.
"""

from __future__ import annotations

import socket
import sys
from asyncio.trsock import TransportSocket

# None where the mark is not kept (module rules).
_OPTION: int | None = getattr(socket, "SO_RCVLOWAT", None) if sys.platform == "linux" else None
DEFAULT_MARK = 1  # the kernel's: any byte wakes the reader


class ReceiveLowWater:
    """The receive low-water mark of `sock` (None: none to keep), set only when it changes."""

    __slots__ = ("_socket", "mark")

    def __init__(self, sock: socket.socket | TransportSocket | None) -> None:
        self._socket = sock if _OPTION is not None else None
        self.mark = DEFAULT_MARK  # the mark last set on the socket

    @property
    def kept(self) -> bool:
        """Whether `set` still sets the socket's mark (Linux, no failed call yet)."""
        return self._socket is not None

    def set(self, mark: int) -> None:
        """Make `mark` (at least 1) the socket's receive low-water mark (module rules)."""
        if mark == self.mark:
            return
        sock = self._socket
        if sock is None or _OPTION is None:
            return
        try:
            sock.setsockopt(socket.SOL_SOCKET, _OPTION, mark)
        except OSError:
            self._socket = None  # not on this socket: the mark it has stays
            return
        self.mark = mark
