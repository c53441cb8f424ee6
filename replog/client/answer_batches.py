"""The batches of a fetch answer a reader may use: one rule for the consumer and the Spark source.

Rules:
- Frames are walked in order; each batch's header is validated (magic, sizes, count) before
  anything else is read from it. A partial batch at the end (the broker's byte limit cut it) is
  not yielded: the next fetch starts before it.
- Batches that end before `position` are skipped without being checked further: a leader
  answers with whole batches, so the first may start before the position.
- The walk stops at the first batch starting at or after `bound` (the high watermark, or the
  end of a planned range): nothing above it is returned.
- With `check_crcs` each yielded batch's CRC-32C is verified; a mismatch is a
  `CorruptRecordError` naming `name`, the batch's offset and both checksums.
- Control batches are yielded too: callers skip their records but move the position past them.
"""

from __future__ import annotations

from collections.abc import Iterator

from replog.errors import CorruptRecordError
from replog.record.header import (
    BatchHeader,
    check_crc_and_count,
    compute_crc,
    iter_frames,
    validate_batch,
)


def answer_batches(
    data: bytes | memoryview,
    position: int,
    bound: int,
    *,
    check_crcs: bool,
    name: str,
    where: str,
    skip_hint: bool = False,
) -> Iterator[tuple[int, BatchHeader]]:
    """(position in `data`, header) of every checked batch holding offsets in
    [`position`, `bound`); `skip_hint` adds to a CRC error where a consumer may seek to."""
    for batch_position, size in iter_frames(data):
        header = validate_batch(data, batch_position, where=where, defer_crc=True)
        if header.next_offset <= position:
            continue  # entirely before the position: never decoded
        if header.base_offset >= bound:
            return
        stored_crc = header.crc
        if check_crcs:
            actual = compute_crc(data, batch_position, size)
            if actual != stored_crc:
                hint = f"; seek past offset {header.last_offset} to skip it" if skip_hint else ""
                raise CorruptRecordError(
                    f"{name}: record batch at offset {header.base_offset} failed its CRC-32C "
                    f"check (stored {stored_crc:#010x}, computed {actual:#010x}){hint}"
                )
        check_crc_and_count(header, stored_crc, where)
        yield batch_position, header
