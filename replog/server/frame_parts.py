"""A framed answer whose payload holds records left in a segment file (`file_region`): the
records sent from the file with `sendfile`, the rest of the frame written around them.

Why: the framed fetch listener's large answers (a Spark task's 8 MiB, a follower catching up)
were read into memory (`pread`) and written from there (`send`): two copies of every byte,
43% of a leader's CPU while serving Spark's reads (perf; docs/benchmarks.md, "Where a row's
CPU goes").

Rules:
- The frame is the one `framed_wire.write_frame_pieces` writes for the same bytes: the
  header and the small parts between regions joined into one write each, large buffers
  written as they are.
- A region is sent only once the transport's buffer is empty (`loop.sendfile` waits for it,
  and pauses reading while it sends), so the frame's bytes go out in order.
- Every region among the parts is closed on return, sent or not.
- A region the platform cannot send from its file (no `sendfile`, or not on this transport)
  is read and written instead; one whose file was cut back (fewer bytes sent than its length)
  raises `KafkaStorageError`, and a lost connection `ConnectionError`: the frame is then
  broken, and the caller must end the connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence, Sized

from replog.errors import KafkaStorageError
from replog.record.batch import Buffer
from replog.storage.file_region import FileRegion
from replog.wire import framed_wire


async def write_frame_parts(
    transport: asyncio.WriteTransport, sequence: int, parts: Sequence[Buffer | Sized]
) -> None:
    """Write one frame whose payload is `parts` joined, each `FileRegion` among them sent
    from its file (module rules)."""
    try:
        size = sum(len(part) for part in parts)
        pieces: list[Buffer] = [framed_wire.header(sequence, size)]  # written up to a region
        for part in parts:
            if isinstance(part, FileRegion):
                framed_wire.write_pieces(transport, pieces)
                pieces = []
                await _send_region(transport, part)
            elif not isinstance(part, bytes | bytearray | memoryview):
                raise TypeError(f"a frame part is a buffer or a FileRegion, not {part!r}")
            else:
                pieces.append(part)
        framed_wire.write_pieces(transport, pieces)
    finally:
        for part in parts:
            if isinstance(part, FileRegion):
                part.close()


async def _send_region(transport: asyncio.WriteTransport, region: FileRegion) -> None:
    if transport.is_closing():
        raise ConnectionError("the connection closed before the answer's records were sent")
    loop = asyncio.get_running_loop()
    try:
        # Typed for a file object; it calls only `fileno` without a fallback.
        sent = await loop.sendfile(
            transport,
            region,  # type: ignore[arg-type]
            region.position,
            region.size,
            fallback=False,
        )
    except (asyncio.SendfileNotAvailableError, RuntimeError):
        # Raised before any byte was sent: no sendfile here (or not on this transport).
        transport.write(region.read())
        return
    if sent != region.size:
        raise KafkaStorageError(
            f"{region.path}: sent {sent} of {region.size} bytes at position {region.position}: "
            "the file was cut back"
        )
