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
- Sparse batches (a compacted topic's, rewritten by the log cleaner: fewer records than their
  offset range, possibly none) are yielded like any other; a reader's position moves past a
  batch's last offset delta, not its record count (Kafka's consumer: the next fetch offset is
  the batch's next offset).
"""

from __future__ import annotations

from collections.abc import Iterator

from crc32c import crc32c

from replog.errors import CorruptRecordError
from replog.record.header import (
    ATTRIBUTES_OFFSET,
    LOG_OVERHEAD,
    MAGIC_V2,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    check_crc_and_count,
    compute_crc,
    iter_frames,
    read_header,
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
    # The common case first, the checks inlined (this runs per batch of every fetch): at the
    # first batch that is partial or fails any check, the walk below takes over from it and
    # decides (a partial tail ends the walk; anything else is raised, in its words).
    view = memoryview(data)
    limit = len(data)
    at = 0
    while limit - at >= RECORD_BATCH_OVERHEAD:
        header = read_header(data, at)
        size = header.batch_length + LOG_OVERHEAD
        if size < RECORD_BATCH_OVERHEAD or size > limit - at or header.magic != MAGIC_V2:
            break
        delta = header.last_offset_delta
        if header.base_offset + delta + 1 <= position:
            at += size
            continue
        if header.base_offset >= bound:
            return
        if check_crcs and crc32c(view[at + ATTRIBUTES_OFFSET : at + size]) != header.crc:
            break
        count = header.records_count
        # The second test only for a sparse batch (a compacted topic's): a dense one costs none.
        if (count <= 0 or count != delta + 1) and not 0 <= count <= delta:
            break
        yield at, header
        at += size
    yield from checked_batches(data, at, position, bound, check_crcs, name, where, skip_hint)


def checked_batches(
    data: bytes | memoryview,
    start: int,
    position: int,
    bound: int,
    check_crcs: bool,
    name: str,
    where: str,
    skip_hint: bool,
) -> Iterator[tuple[int, BatchHeader]]:
    """`answer_batches` from byte `start`, one check at a time (the errors' words)."""
    for batch_position, size in iter_frames(data, start):
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
        check_crc_and_count(header, stored_crc, where, sparse=True)
        yield batch_position, header
