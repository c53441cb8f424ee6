"""One TLS session of a Kafka listener connection, run by the connection over its plain TCP
transport: OpenSSL over memory buffers (`ssl.SSLObject`), bytes in and out, no I/O here.

Why the connection runs it rather than asyncio's TLS transport: that transport puts a layer of
Python calls on every read and write, and hides how much ciphertext it holds. A Kafka client
writes one request as several TLS records (Kafka's Java client wraps and flushes each buffer
of a request on its own: header, records, tail), so a request arrives in several reads; a
connection that knows how much of a frame is missing, and how much ciphertext it holds,
can ask the kernel not to wake it before that much has arrived (`bytes_before_useful`).

Rules:
- `receive(ciphertext)` returns the plaintext it completes, in order. Until the handshake is
  done it returns nothing; `handshake_done` turns true in the call that completes it. A failed
  handshake or a corrupt record raises `ssl.SSLError`; the connection closes.
- After `receive` and `seal`, `take_output()` gives the ciphertext to send (handshake
  messages, alerts, sealed answers), in order.
- The peer's close_notify makes `peer_closed` true; nothing is received after it.
- `ciphertext_needed(n)` is the least ciphertext still to arrive before `n` more plaintext
  bytes can be read: the record boundaries of what was received are followed (OpenSSL holds a
  record begun where it cannot be seen), and a record gives no plaintext before it is whole
  and at most its length after. A lower bound, never more than will come.
"""

from __future__ import annotations

import ssl

# Plaintext bytes asked of OpenSSL per read: one TLS record holds at most 16 KiB.
READ_BYTES = 65_536
RECORD_HEADER_BYTES = 5  # content type, version, body length (2 bytes)


class TlsSession:
    __slots__ = (
        "_header",
        "_incoming",
        "_object",
        "_outgoing",
        "_record_left",
        "_record_length",
        "handshake_done",
        "peer_closed",
    )

    def __init__(self, context: ssl.SSLContext) -> None:
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._object = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self.handshake_done = False
        self.peer_closed = False
        self._header = bytearray()  # a record header begun
        self._record_length = 0  # the body length of the record begun
        self._record_left = 0  # bytes of its body not received yet

    @property
    def ssl_object(self) -> ssl.SSLObject:
        return self._object

    def ciphertext_needed(self, plaintext: int) -> int:
        """The least ciphertext still to arrive before `plaintext` more bytes (module rules)."""
        if plaintext <= 0:
            return 0
        if self._header:
            return RECORD_HEADER_BYTES - len(self._header) + plaintext
        if self._record_left:
            return self._record_left + max(plaintext - self._record_length, 0)
        return plaintext

    def _follow_records(self, ciphertext: bytes) -> None:
        at, end = 0, len(ciphertext)
        while at < end:
            if self._record_left:
                step = min(self._record_left, end - at)
                self._record_left -= step
                at += step
                continue
            take = min(RECORD_HEADER_BYTES - len(self._header), end - at)
            self._header += ciphertext[at : at + take]
            at += take
            if len(self._header) == RECORD_HEADER_BYTES:
                self._record_length = int.from_bytes(self._header[3:], "big")
                self._record_left = self._record_length
                self._header.clear()

    def receive(self, ciphertext: bytes) -> list[bytes]:
        """The plaintext `ciphertext` completes (module rules)."""
        self._follow_records(ciphertext)
        self._incoming.write(ciphertext)
        if not self.handshake_done:
            try:
                self._object.do_handshake()
            except ssl.SSLWantReadError:
                return []
            self.handshake_done = True
        plaintext: list[bytes] = []
        read = self._object.read
        while self._incoming.pending or self._object.pending():
            try:
                chunk = read(READ_BYTES)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:
                self.peer_closed = True
                break
            if not chunk:
                self.peer_closed = True
                break
            plaintext.append(chunk)
        return plaintext

    def seal(self, plaintext: bytes | bytearray | memoryview) -> None:
        """Encrypt `plaintext` for sending (`take_output`)."""
        self._object.write(plaintext)

    def take_output(self) -> bytes:
        return self._outgoing.read() if self._outgoing.pending else b""
