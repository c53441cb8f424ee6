"""Whole RecordBatches decoded straight to columns: offsets, timestamps, keys and values.

The Spark source reads millions of records per task; building a Python object per record (what
`replog.record.record.decode_records` and the consumer do) costs far more than Spark itself.
Three decoders, tried in order:

- The compiled one (`_batch_decode.c`, built by setup.py where a C compiler is; `DECODER`
  says whether it is there, chosen once at import): one pass over the records in C, reading
  the answer where it lies through the buffer protocol and writing the int64 offsets and
  timestamps (in microseconds, Spark's unit: no pass of their own to convert them) and the
  Arrow `binary` buffers of keys and values (int32 offsets, data, a
  validity bitmap where a row is null), which Arrow wraps without a copy; headers (rare) as
  the other decoders give them, built after the pass. About 20 ns a row where numpy takes
  about 60 (bench/batch_decode.py --base numpy). It checks every rule below itself, every
  read inside its record, region and buffer; at any doubt (a broken rule, a sum past int64)
  it answers None and the numpy decoder decides.
- The numpy one (below), also all of an install without a compiler.
- The record-by-record one, `record.decode_records`, when numpy doubts: it raises the typed
  `InvalidRecordError` naming batch, record and byte.

The numpy decoder walks each batch's records once in Python to find where each record starts (the
records are length-prefixed, so this step is sequential), then decodes every field of every
record at once with numpy over those start positions, and hands keys and values to Arrow
without copying them one by one:

- Record start positions, in one buffer holding the records regions of every batch of the
  call: the fetch answer itself when no batch is compressed, else the (decompressed)
  regions copied back to back. A table lookup per record, or one numpy check for a run of
  records of the same size (`_record_starts`).
- A run of records of one size whose fields all sit at the same place in every record
  (fixed-size keys and values; only the timestamp and offset deltas differ, in varints of
  the same sizes) is decoded as a table, with no index array: each record's head (the bytes
  up to its value, and the byte before it unless that takes a word more: then each record's
  last byte is copied on its own) is copied by one strided copy per run into a small
  array, the runs of one layout together (a fetch answer's batches repeat two or three
  layouts: the deltas' varints grow at the same records in each), and every check reads that
  array a word of every head at a time (`_head_mismatches`): each word masked and compared
  with one template word (the first record's fixed bytes and continuation bits, the byte
  before each record 0) and with the record's own offset delta as a table of encoded deltas
  has it; the timestamp delta read with a few shifts. A run's values
  are then copied straight into the column's data by one strided copy, its keys from the
  heads (`_BinaryOut`). A run's layout is first taken from the first run of its record size
  (reading a layout costs Python about 4 us); runs it does not fit send the call round again
  with each run's own. In a fetch answer of 100-byte records these runs hold nearly every
  record (docs/benchmarks.md).
- The other records' varints (timestamp delta, offset delta, key length, value length,
  header count) are read for all of them together (`_one_by_one`): the 8 bytes at each
  position as one uint64 (one gather), the varint's end found with bit tricks, one shift per
  byte of the longest varint.
- Keys and values are copied into `binary` arrays, the type Spark expects: a table run's as
  above; the other records' with one numpy gather when all of a column's values have one
  size, else by Arrow's `filter` over a binary array whose elements alternate values and the
  gaps between them (`_binary`), then put in place a stretch of consecutive rows at a time;
  nulls (length -1) are Arrow nulls.
- Headers are rare: only records that have some are walked in Python.

The answer may be bytes or a memoryview of them (the Spark fetcher hands a view of the
serialized Fetch answer): C, numpy and Arrow read either where it lies; only the
record-by-record fallback copies a view into bytes.

Rules (the same as the record-by-record decoder's, `record.decode_records`, which the tests
compare both columnar decoders with on random and damaged batches):
- The caller gives batches whose header and CRC-32C were already validated (`validate_batch`),
  none of them a control batch.
- Every structural rule is checked: exactly `records_count` records filling the region, offset
  deltas 0..n-1 (in a sparse batch, rewritten by the log cleaner with fewer records than its
  offset range: deltas that only increase, up to its last offset delta; such batches are
  read by the numpy decoder's record-by-record step, `_one_by_one`, and their offsets taken
  from the deltas, while the dense batches around them keep the faster paths),
  lengths -1 or more (0 or more for counts and header keys), every field inside
  its record, every body ending exactly at its declared length, varints not longer than 5
  (varlong 10) bytes nor overflowing.
- At any doubt (a rule broken, a varint the vectorised path does not take), the call decodes
  its batches again with the next decoder, at last the record-by-record one, which raises
  `InvalidRecordError` naming batch, record and byte, or, if the batch is valid after all,
  gives the columns.
- With LogAppendTime a record's timestamp is its batch's max_timestamp.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import cast

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from replog.errors import InvalidRecordError
from replog.record.batch import RecordBatch
from replog.record.compression import COMPRESSION_NONE, decompress
from replog.record.header import RECORD_BATCH_OVERHEAD, BatchHeader
from replog.record.record import Header
from replog.record.varint import decode_varint, decode_varlong


def _load_compiled() -> ModuleType | None:
    """The compiled decoder (`_batch_decode.c`), built by setup.py where a C compiler is."""
    try:
        from replog.spark import _batch_decode
    except ImportError:  # an install without a C compiler
        return None
    return _batch_decode


_compiled = _load_compiled()

# Which decoder `decode_batches` tries first, chosen once: "compiled" or "numpy".
DECODER = "numpy" if _compiled is None else "compiled"

Int64s = npt.NDArray[np.int64]
Bytes = npt.NDArray[np.uint8]
Words = npt.NDArray[np.uint64]  # the 8 bytes at each position of a buffer
Data = bytes | memoryview  # a fetch answer, or a view of one (module docstring)

TIMESTAMP_TYPE_CREATE_TIME = 0
TIMESTAMP_TYPE_LOG_APPEND_TIME = 1
_MIN_BODY = 6  # attributes byte and five one-byte varints


@dataclass(frozen=True, slots=True)
class BatchColumns:
    """The decoded records of some batches, in offset order, as columns."""

    offsets: Int64s
    # Microseconds (Spark's unit): milliseconds times 1000, wrapped past int64 as numpy's
    # multiply wraps (every decoder alike).
    timestamps_us: Int64s
    timestamp_types: npt.NDArray[np.int32]  # 0 CreateTime, 1 LogAppendTime
    keys: pa.Array  # binary, null where a record has no key
    values: pa.Array  # binary, null for tombstones
    headers: list[tuple[Header, ...]] | None  # None: no record has headers

    def __len__(self) -> int:
        return len(self.offsets)

    def slice(self, start: int, stop: int) -> BatchColumns:
        """Rows [start, stop)."""
        return BatchColumns(
            self.offsets[start:stop],
            self.timestamps_us[start:stop],
            self.timestamp_types[start:stop],
            self.keys.slice(start, stop - start),
            self.values.slice(start, stop - start),
            None if self.headers is None else self.headers[start:stop],
        )


class _NotVectorised(Exception):
    """Something the vectorised path does not take: the strict decoder decides."""


def decode_batches(
    data: Data, batches: Sequence[tuple[int, BatchHeader]], *, where: str
) -> BatchColumns:
    """The records of `batches` (each a validated, non-control batch at a position in
    `data`), as columns (module docstring)."""
    # A check per batch, none per record: a compacted topic's answer may hold sparse batches.
    if any(h.records_count != h.last_offset_delta + 1 for _, h in batches):
        return _with_sparse(data, batches, where)
    return _dense_columns(data, batches, where)


def _dense_columns(
    data: Data, batches: Sequence[tuple[int, BatchHeader]], where: str
) -> BatchColumns:
    """`decode_batches` for batches whose offset deltas are 0..n-1 (every batch a producer or
    a leader builds)."""
    if _compiled is not None:
        try:
            columns = _compiled_columns(data, batches, where)
        except InvalidRecordError:  # a batch that does not decompress
            columns = None
        if columns is not None:
            return columns
    try:
        return _vectorised(data, batches, where)
    except (_NotVectorised, InvalidRecordError, IndexError):
        return _record_by_record(data, batches, where)


def _with_sparse(
    data: Data, batches: Sequence[tuple[int, BatchHeader]], where: str
) -> BatchColumns:
    """`decode_batches` for an answer holding sparse batches (rewritten by the log cleaner:
    fewer records than offsets, possibly none): each run of dense batches by the columnar
    decoders, each run of sparse ones by `_sparse_columns`, the columns joined in order."""
    parts: list[BatchColumns] = []
    run: list[tuple[int, BatchHeader]] = []
    run_sparse = False
    for item in (*batches, None):
        sparse = item is not None and item[1].records_count != item[1].last_offset_delta + 1
        if run and (item is None or sparse != run_sparse):
            decode = _sparse_columns if run_sparse else _dense_columns
            parts.append(decode(data, run, where))
            run = []
        if item is not None:
            run.append(item)
            run_sparse = sparse
    return _joined(parts)


def _joined(parts: Sequence[BatchColumns]) -> BatchColumns:
    """The rows of `parts`, in order, as one `BatchColumns`."""
    headers: list[tuple[Header, ...]] | None = None
    if any(part.headers is not None for part in parts):
        headers = []
        for part in parts:
            headers += part.headers if part.headers is not None else [()] * len(part)
    return BatchColumns(
        offsets=np.concatenate([part.offsets for part in parts]),
        timestamps_us=np.concatenate([part.timestamps_us for part in parts]),
        timestamp_types=np.concatenate([part.timestamp_types for part in parts]),
        keys=pa.concat_arrays([part.keys for part in parts]),
        values=pa.concat_arrays([part.values for part in parts]),
        headers=headers,
    )


def _compiled_columns(
    data: Data, batches: Sequence[tuple[int, BatchHeader]], where: str
) -> BatchColumns | None:
    """The compiled decoder's columns (`_batch_decode.c`), or None at any doubt (a broken
    rule): the caller then decodes with the numpy path."""
    assert _compiled is not None
    buffer, spans = _regions(data, batches, where)
    infos = [
        (
            h.records_count,
            h.base_offset,
            _base_time(h),
            h.is_log_append_time,
        )
        for _, h in batches
    ]
    found = _compiled.decode(buffer, spans, infos)
    if found is None:
        return None
    offsets, timestamps = found[0], found[1]
    total = len(offsets) // 8
    _, timestamp_types = _append_times(batches, [h.records_count for _, h in batches], total)
    return BatchColumns(
        offsets=np.frombuffer(offsets, dtype=np.int64),
        timestamps_us=np.frombuffer(timestamps, dtype=np.int64),
        timestamp_types=timestamp_types,
        keys=_from_buffers(total, *found[2:5]),
        values=_from_buffers(total, *found[5:8]),
        headers=found[8],
    )


def _base_time(header: BatchHeader) -> int:
    """What a batch's records' timestamp deltas add to: with LogAppendTime (the deltas then
    ignored) its max_timestamp, else its base_timestamp."""
    return header.max_timestamp if header.is_log_append_time else header.base_timestamp


def _append_times(
    batches: Sequence[tuple[int, BatchHeader]], counts: Sequence[int] | Int64s, total: int
) -> tuple[npt.NDArray[np.bool_] | None, npt.NDArray[np.int32]]:
    """Per record of the call: whether its batch stamps LogAppendTime (None when no batch
    does, as producers write), and the `timestampType` column (0 CreateTime, 1 LogAppendTime)."""
    if not any(h.is_log_append_time for _, h in batches):
        return None, np.zeros(total, dtype=np.int32)
    per_record = np.repeat(np.array([h.is_log_append_time for _, h in batches], bool), counts)
    return per_record, per_record.astype(np.int32)


def _from_buffers(count: int, offsets: bytes, data: bytes, validity: bytes | None) -> pa.Array:
    """A `binary` array over the compiled decoder's buffers, not copied."""
    return pa.Array.from_buffers(
        pa.binary(),
        count,
        [
            None if validity is None else pa.py_buffer(validity),
            pa.py_buffer(offsets),
            pa.py_buffer(data),
        ],
    )


def _regions(
    data: Data, batches: Sequence[tuple[int, BatchHeader]], where: str
) -> tuple[Data, list[tuple[int, int]]]:
    """A buffer holding every batch's records region, and each region's (start, end) in it.

    Uncompressed batches in order (as a fetch answer has them): `data` itself, the regions
    where they are. Else one new buffer: the (decompressed) regions back to back.
    """
    spans: list[tuple[int, int]] = []
    after = 0
    for position, header in batches:
        if header.compression_codec != COMPRESSION_NONE or position < after:
            break
        after = position + header.size_in_bytes
        spans.append((position + RECORD_BATCH_OVERHEAD, after))
    else:
        return data, spans
    pieces: list[bytes | memoryview] = []
    spans = []
    view = memoryview(data)
    at = 0
    for position, header in batches:
        region: bytes | memoryview = view[
            position + RECORD_BATCH_OVERHEAD : position + header.size_in_bytes
        ]
        codec = header.compression_codec
        if codec != COMPRESSION_NONE:
            region = decompress(
                codec, region, where=f"{where}: batch at offset {header.base_offset}"
            )
        pieces.append(region)
        spans.append((at, at + len(region)))
        at += len(region)
    return b"".join(pieces), spans


def _length_steps() -> list[list[int | None]]:
    """_STEPS[b0][b1]: from a record's first byte to the next record's, when its length varint
    starts with bytes b0, b1 and takes one or two bytes (bodies below 8 KiB); else None."""
    table: list[list[int | None]] = []
    for first in range(256):
        row: list[int | None] = []
        for second in range(256):
            if first < 0x80:
                row.append(1 + ((first >> 1) ^ -(first & 1)))
            elif second < 0x80:
                raw = (first & 0x7F) | (second << 7)
                row.append(2 + ((raw >> 1) ^ -(raw & 1)))
            else:
                row.append(None)
        table.append(row)
    return table


_STEPS = _length_steps()


_U2 = np.dtype("<u2")  # made once: a dtype parsed per guess costs 0.5 us
_RUN_MIN = 16  # records: a shorter run of equal sizes is not worth a numpy step
_RUN_BACKOFF_MAX = 1024  # records walked one by one after a failed guess, at most
# Records: a shorter run is read by `_one_by_one`. As short as a run `_record_starts` finds:
# a batch's first 64 records (one-byte offset deltas) are often two runs (records 3 ms apart:
# the timestamp delta's varint grows at record 22), and read one by one they cost more than
# their strided copies, and they make every row's key and value length an array to fill
# (`_lengths`) where an answer of table rows only has one length per column.
_UNIFORM_MIN = _RUN_MIN


@dataclass(frozen=True, slots=True)
class _Run:
    """`count` records of `step` bytes each, the first at `position` in the buffer; they are
    rows [row, row + count) of the call and records [index, index + count) of their batch."""

    row: int
    count: int
    position: int
    step: int
    index: int


def _record_starts(
    buffer: Data,
    buf: Bytes,
    spans: list[tuple[int, int]],
    batches: Sequence[tuple[int, BatchHeader]],
) -> tuple[list[Int64s | _Run], list[_Run]]:
    """Where each record (its length varint) starts, in pieces (`_starts` joins them): the one
    sequential step; and the runs of records of one size found on the way (`_table_group`
    decodes those whole).

    One record at a time it is a table lookup. Records of one size often come in runs (fixed
    size values and keys; a timestamp delta's varint grows only at 64 ms and 8 s), so at a
    record whose length took `step` bytes in all, the next ones are guessed at pos + k * step
    and the guess checked for all of them at once by each guess's first two bytes (the length;
    for a one-byte length also the attributes byte, 0 as producers write it, else the run is
    only shorter; read through a strided view, no gather): the guessed positions up to the
    first one whose two bytes differ are record starts (each record before it had the same
    length, so it ended there). A guess stops where the offset delta's varint grows (record 64,
    8192, ...), where the record size usually changes too. After a guess that
    did not pay, the next records are walked one by one (twice as many after each failure, up
    to _RUN_BACKOFF_MAX), so records of varying size cost little more than the plain walk.
    Nothing is checked here but that each region's last record ends at the region's end;
    `_vectorised` checks every length.
    """
    pieces: list[Int64s | _Run] = []
    runs: list[_Run] = []
    rows = 0  # records in `pieces`
    singles = array("q")  # int64, handed to numpy without a conversion per element
    add = singles.append
    steps = _STEPS
    backoff = _RUN_MIN
    walk_until = 0  # guess again once this many records were walked one by one
    walked = 0
    for (begin, end), (_, header) in zip(spans, batches, strict=True):
        pos = begin
        left = header.records_count
        while left:
            if walked < walk_until:
                # After a failed guess: a tight walk, the guess's conditions not asked per record.
                count = min(left, walk_until - walked)
                before = len(singles)
                for _ in range(count):
                    step = steps[buffer[pos]][buffer[pos + 1]]
                    if step is None:
                        break  # a longer length varint: the general step below
                    add(pos)  # a bad length can send pos anywhere (see below)
                    pos += step
                done = len(singles) - before
                left -= done
                walked += done
                if done == count:
                    continue
            first = buffer[pos]
            second = buffer[pos + 1]
            step = steps[first][second]
            if step is None:  # a longer length varint (raises InvalidRecordError if bad)
                size, after = _varint(buffer, pos, end)
                step = after + size - pos
            elif walked >= walk_until and left >= _RUN_MIN and step > 1 and pos >= begin:
                guess = min(left, (end - pos) // step)
                index = header.records_count - left
                grows = _DELTA_GROWS[bisect_right(_DELTA_GROWS, index)] - index
                if grows >= _RUN_MIN:
                    guess = min(guess, grows)
                if guess >= _RUN_MIN:
                    # The two bytes at each guess: all inside the region (a bad length before
                    # may have sent pos below it; step > 1 keeps the last one's inside).
                    guessed = np.ndarray((guess,), _U2, buf, pos, (step,))
                    same = guessed == first | second << 8
                    run = int(np.argmin(same))  # the first miss, or 0 when all match
                    if same[run]:
                        run = guess
                    if run >= _RUN_MIN:
                        if singles:
                            pieces.append(np.frombuffer(singles, dtype=np.int64))
                            rows += len(singles)
                            singles = array("q")
                            add = singles.append
                        found = _Run(rows, run, pos, step, index)
                        pieces.append(found)
                        runs.append(found)
                        rows += run
                        pos += run * step
                        left -= run
                        backoff = _RUN_MIN
                        continue
                backoff = min(backoff * 2, _RUN_BACKOFF_MAX)
                walk_until = walked + backoff
            add(pos)  # a bad length can send pos anywhere: `_vectorised` then sees size < 6
            pos += step
            left -= 1
            walked += 1
        if pos != end:
            raise _NotVectorised
    if singles:
        pieces.append(np.frombuffer(singles, dtype=np.int64))
    return pieces, runs


# The record indexes at which an offset delta's varint takes one more byte, and a stop.
_DELTA_GROWS = (64, 8192, 1 << 20, 1 << 27, 1 << 63)


def _starts(pieces: list[Int64s | _Run]) -> Int64s:
    """The record starts `_record_starts` found, as one array."""
    arrays = [
        piece
        if isinstance(piece, np.ndarray)
        else np.arange(piece.position, piece.position + piece.step * piece.count, piece.step)
        for piece in pieces
    ]
    if not arrays:
        return np.zeros(0, dtype=np.int64)
    return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)


_STOP_BITS = np.uint64(0x8080808080808080)  # each byte's continuation bit
_ONE = np.uint64(1)


def _words_at(buf: Bytes, words: Words, pos: Int64s) -> Words:
    """The 8 bytes at each of the increasing positions `pos`, as little-endian uint64s; bytes
    past the end of the buffer read as zeros (the last records' varints end near it).

    Only a damaged batch gives positions out of order (a record length below the minimum, or
    a field running past its record's end); later ones may then be read wrong or raise
    IndexError. `_vectorised` still falls back: the record after which the order breaks is
    read right, and it fails a check (its body too short, or its fields past its end).
    """
    if not len(pos) or pos[-1] < len(words):
        return words[pos]
    inside = int(np.searchsorted(pos, len(words)))
    found = np.empty(len(pos), dtype=np.uint64)
    found[:inside] = words[pos[:inside]]
    base = max(len(buf) - 8, 0)
    tail = np.zeros(16, dtype=np.uint8)
    tail[: len(buf) - base] = buf[base:]
    tail_words = np.ndarray(shape=(9,), dtype="<u8", buffer=tail, offset=0, strides=(1,))
    found[inside:] = tail_words[pos[inside:] - base]  # past the end: IndexError
    return found


def _varints(buf: Bytes, words: Words, pos: Int64s, size_max: int) -> tuple[Int64s, Int64s]:
    """(values, next positions) of the zig-zag varints at `pos`: int32 when size_max is 5,
    int64 when 10.

    The 8 bytes at each position are read as one little-endian uint64 (one gather): the
    varint's last byte is the lowest one without its continuation bit, found with bit tricks
    for all positions at once, then the 7-bit groups of the bytes up to it are joined with
    one shift per byte of the longest varint. A varlong longer than 8 bytes (only huge
    timestamp deltas) sends the whole call down the byte-by-byte path.
    """
    word = _words_at(buf, words, pos)
    stops = np.invert(word)
    stops &= _STOP_BITS
    if size_max != 5 and not stops.all():
        return _varints_bytewise(buf, pos, size_max)
    # x ^ (x - 1): the lowest stop bit and every bit under it, i.e. the varint's bytes. The
    # 7 value bits of byte k are picked by one mask after a shift by k, so the continuation
    # bits need no clearing.
    mask = stops - _ONE
    mask ^= stops
    length = np.bitwise_count(mask)  # 8 bits per byte of the varint; 64 when no stop bit
    length >>= 3
    longest = int(length.max())
    if size_max == 5 and longest > 5:
        raise _NotVectorised  # longer than 5 bytes
    word &= mask
    unsigned = _joined_varint(word, longest)
    if size_max == 5 and int(unsigned.max()) >> 32:
        raise _NotVectorised  # a varint overflowing 32 bits
    values = (unsigned >> _ONE).view(np.int64)
    unsigned &= _ONE
    values ^= -unsigned.view(np.int64)
    return values, pos + length


def _varints_bytewise(buf: Bytes, pos: Int64s, size_max: int) -> tuple[Int64s, Int64s]:
    """`_varints` one byte position at a time: for varlongs of 9 or 10 bytes."""
    byte = buf[pos]
    unsigned = (byte & 0x7F).astype(np.uint64)
    length = np.ones(len(pos), dtype=np.int64)
    more = np.flatnonzero(byte >= 0x80)
    shift = 7
    while len(more):
        if shift // 7 >= size_max:
            raise _NotVectorised  # too long
        byte = buf[pos[more] + shift // 7]
        if shift == 63 and np.any(byte > 1):
            raise _NotVectorised  # a varlong overflowing 64 bits
        unsigned[more] |= (byte & 0x7F).astype(np.uint64) << np.uint64(shift)
        length[more] += 1
        more = more[byte >= 0x80]
        shift += 7
    values = (unsigned >> np.uint64(1)).astype(np.int64) ^ -(unsigned & np.uint64(1)).astype(
        np.int64
    )
    return values, pos + length


def _binary(buf: Bytes, buffer: pa.Buffer, starts: Int64s, lengths: Int64s | int) -> pa.Array:
    """buffer[starts[i] : starts[i] + lengths[i]] as a binary array, null where length is -1;
    `lengths` one int (0 or more) when every value is known to have that size, so nothing
    needs checking.

    `binary` wants the values back to back, so they are copied, in one of two ways:
    - All values (nulls aside) of one size L, as keys and values often are: a numpy view of
      the buffer as L-byte elements starting at every byte, indexed by the starts (one
      gather), and offsets that grow by L.
    - Else the values lie in order in the buffer with gaps between them (the rest of each
      record), so one offsets array that alternates each value's start and end describes a
      `binary` array over the buffer as it is, whose even elements are the values and odd
      ones the gaps; Arrow's `filter` (C++) copies the even ones into a new array.
    The caller has checked that every value ends before the next one starts.
    """
    count = len(starts)
    if isinstance(lengths, int):
        return _one_size(buf, starts, lengths)
    valid = lengths >= 0
    nulls = not valid.all()
    validity = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    present = lengths[valid] if nulls else lengths
    size = int(present[0]) if len(present) else 0
    if len(present) == 0 or (present.min() == size and present.max() == size):
        if not nulls:
            return _one_size(buf, starts, size)
        present_values = _one_size(buf, starts[valid], size)
        offsets = np.zeros(count + 1, dtype=np.int32)  # a null takes no bytes
        np.cumsum(valid, out=offsets[1:])
        offsets *= size
        data = present_values.buffers()[2]
        return pa.Array.from_buffers(pa.binary(), count, [validity, pa.py_buffer(offsets), data])
    bounds = np.empty(2 * count + 1, dtype=np.int32)
    bounds[0:-1:2] = starts
    bounds[1::2] = starts
    bounds[1::2] += lengths
    if nulls:
        bounds[1::2][~valid] = starts[~valid]  # a null is an empty element
    bounds[-1] = bounds[-2]
    both = pa.Array.from_buffers(pa.binary(), 2 * count, [None, pa.py_buffer(bounds), buffer])
    evens = pa.Array.from_buffers(  # the bitmap 0b01010101...: every even element
        pa.bool_(), 2 * count, [None, pa.py_buffer(bytes([0x55]) * ((2 * count + 7) // 8))]
    )
    values = both.filter(evens)
    if not nulls:
        return values
    return pa.Array.from_buffers(pa.binary(), count, [validity, *values.buffers()[1:]])


def _one_size(buf: Bytes, starts: Int64s, size: int) -> pa.Array:
    """buffer[starts[i] : starts[i] + size] as a binary array, none null (`_binary`)."""
    count = len(starts)
    if size == 0:
        data = pa.py_buffer(b"")
    else:
        cells = np.ndarray(
            shape=(len(buf) - size + 1,), dtype=f"V{size}", buffer=buf, offset=0, strides=(1,)
        )
        data = pa.py_buffer(cells[starts])
    offsets = np.arange(count + 1, dtype=np.int32)
    offsets *= size
    return pa.Array.from_buffers(pa.binary(), count, [None, pa.py_buffer(offsets), data])


@dataclass(frozen=True, slots=True)
class _Fields:
    """The fields of the records `_one_by_one` reads (the rows outside the tables)."""

    timestamp_delta: Int64s
    key_start: Int64s
    key_length: Int64s
    value_start: Int64s
    value_length: Int64s
    offset_delta: Int64s

    @staticmethod
    def empty() -> _Fields:
        none = np.zeros(0, dtype=np.int64)
        return _Fields(none, none, none, none, none, none)


class _BinaryOut:
    """A `binary` column of a call's rows built in place: every row's length is known first
    (one int when every row has it), then the values are written where they go, a table run's
    with one strided copy (`put`), the other rows' from one array of theirs (`put_rest`).
    A table run's copy is a few numpy calls per run, which a fetch answer's batches of a few
    thousand records have two or three of: views built straight over both buffers."""

    def __init__(self, count: int, lengths: Int64s | int) -> None:
        self.count = count
        self.validity: pa.Buffer | None = None
        self.size = lengths if isinstance(lengths, int) else None  # every row's, if one
        if isinstance(lengths, int):
            offsets = np.arange(count + 1, dtype=np.int32)
            offsets *= lengths
        else:
            valid = lengths >= 0
            if not valid.all():
                self.validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
            offsets = np.zeros(count + 1, dtype=np.int32)
            np.cumsum(np.maximum(lengths, 0), dtype=np.int32, out=offsets[1:])
        self.offsets = offsets
        self.data = np.empty(int(offsets[-1]), dtype=np.uint8)

    def put(self, row: int, source: Bytes, count: int, size: int, offset: int, stride: int) -> None:
        """Rows [row, row + count) are `count` values of `size` bytes (none null) in `source`,
        the first at `offset`, `stride` apart."""
        start = row * self.size if self.size is not None else int(self.offsets[row])
        kind = _void(size)
        values = np.ndarray((count,), kind, source, offset, (stride,))
        np.ndarray((count,), kind, self.data, start)[...] = values

    def put_rest(self, rows: Int64s, array: pa.Array) -> None:
        """Rows `rows` (increasing) are `array`'s elements: copied a stretch of consecutive
        rows at a time."""
        offsets = np.frombuffer(array.buffers()[1], dtype=np.int32, count=len(array) + 1)
        if offsets[-1] == offsets[0]:
            return  # no bytes (and Arrow may give no data buffer)
        data = np.frombuffer(array.buffers()[2], dtype=np.uint8)
        breaks = np.flatnonzero(np.diff(rows) != 1) + 1
        firsts = [0, *breaks.tolist()]
        stops = [*breaks.tolist(), len(rows)]
        mine = self.offsets
        for first, stop in zip(firsts, stops, strict=True):
            into = int(mine[rows[first]])
            self.data[into : int(mine[rows[stop - 1] + 1])] = data[offsets[first] : offsets[stop]]

    def array(self) -> pa.Array:
        return pa.Array.from_buffers(
            pa.binary(),
            self.count,
            [self.validity, pa.py_buffer(self.offsets), pa.py_buffer(self.data)],
        )


def _lengths(
    total: int, rest: Int64s, rest_lengths: Int64s, tables: list[tuple[_Run, int]]
) -> Int64s | int:
    """One column's lengths for `_BinaryOut`: one int (0 or more) when every row is a table
    row and all tables have that length, else per row."""
    sizes = {size for _, size in tables}
    if not len(rest) and len(sizes) == 1:
        (size,) = sizes
        if size >= 0:
            return size
    lengths = np.empty(total, dtype=np.int64)
    lengths[rest] = rest_lengths
    for run, size in tables:
        lengths[run.row : run.row + run.count] = size
    return lengths


def _vectorised(
    data: Data,
    batches: Sequence[tuple[int, BatchHeader]],
    where: str,
    refused: frozenset[int] | None = None,
) -> BatchColumns:
    """`decode_batches` without the fallback. `refused`: None on a first attempt (each run's
    layout taken from the first run of its record size: `_table_groups`), else each run's
    own layout, and the runs at these positions, which failed their own layout's checks, not
    read as tables (their records go `_one_by_one`)."""
    buffer, spans = _regions(data, batches, where)
    if len(buffer) >= 1 << 31:
        raise _NotVectorised  # Arrow's binary offsets into the buffer are int32
    buf = np.frombuffer(buffer, dtype=np.uint8)
    pieces, runs = _record_starts(buffer, buf, spans, batches)
    counts = np.array([h.records_count for _, h in batches], dtype=np.int64)
    total = int(counts.sum())

    groups = _table_groups(buffer, buf, runs, refused)
    tabled = [(run, layout) for layout, members in groups.items() for run in members]
    if tabled and sum(run.count for run, _ in tabled) == total:  # disjoint runs: every row
        rest = np.zeros(0, dtype=np.int64)
    elif tabled:
        in_tables = np.zeros(total, dtype=bool)
        for run, _ in tabled:
            in_tables[run.row : run.row + run.count] = True
        rest = np.flatnonzero(~in_tables)
    else:
        rest = np.arange(total, dtype=np.int64)
    headers: list[tuple[Header, ...]] | None = None
    timestamp_delta = np.empty(total, dtype=np.int64)
    arrow_buffer = pa.py_buffer(buffer)
    if not tabled:
        fields, headers = _one_by_one(buffer, buf, _starts(pieces), _indexes(counts, total))
        timestamp_delta = fields.timestamp_delta
        keys = _binary(buf, arrow_buffer, fields.key_start, fields.key_length)
        values = _binary(buf, arrow_buffer, fields.value_start, fields.value_length)
    else:
        fields = _Fields.empty()
        if len(rest):
            fields, found_headers = _one_by_one(
                buffer, buf, _starts(pieces)[rest], _indexes(counts, total)[rest]
            )
            timestamp_delta[rest] = fields.timestamp_delta
            if found_headers is not None:
                headers = [()] * total
                for row, record_headers in zip(rest.tolist(), found_headers, strict=True):
                    headers[row] = record_headers
        key_out = _BinaryOut(
            total,
            _lengths(total, rest, fields.key_length, [(r, lay.key_length) for r, lay in tabled]),
        )
        value_out = _BinaryOut(
            total,
            _lengths(
                total, rest, fields.value_length, [(r, lay.value_length) for r, lay in tabled]
            ),
        )
        failed: list[_Run] = []
        for layout, members in groups.items():
            failed += _table_group(
                buffer, buf, layout, members, timestamp_delta, key_out, value_out
            )
        if failed:
            # Decoded again with each run's own layout (rare: records of one size whose fields
            # lie elsewhere than in the first run of their size), then without the runs that
            # fail even that (their records are not all of one layout).
            if refused is None:
                return _vectorised(data, batches, where, frozenset())
            return _vectorised(data, batches, where, refused | {r.position for r in failed})
        if len(rest):
            key_out.put_rest(rest, _binary(buf, arrow_buffer, fields.key_start, fields.key_length))
            value_out.put_rest(
                rest, _binary(buf, arrow_buffer, fields.value_start, fields.value_length)
            )
        keys, values = key_out.array(), value_out.array()

    timestamps, timestamp_types = _timestamps_us(batches, counts, total, timestamp_delta)
    return BatchColumns(
        offsets=_offsets(batches, counts, total),
        timestamps_us=timestamps,
        timestamp_types=timestamp_types,
        keys=keys,
        values=values,
        headers=headers,
    )


def _timestamps_us(
    batches: Sequence[tuple[int, BatchHeader]], counts: Int64s, total: int, deltas: Int64s
) -> tuple[Int64s, npt.NDArray[np.int32]]:
    """The `timestamp` column in microseconds (each record's batch's base time plus its
    delta, or the batch's LogAppendTime) and the `timestampType` column."""
    timestamps = np.repeat(np.array([_base_time(h) for _, h in batches], np.int64), counts)
    per_record_append, timestamp_types = _append_times(batches, counts, total)
    if per_record_append is not None:
        timestamps += np.where(per_record_append, 0, deltas)
    else:  # CreateTime only, as producers write: no per-record choice to make
        timestamps += deltas
    timestamps *= 1000
    return timestamps, timestamp_types


def _sparse_columns(
    data: Data, batches: Sequence[tuple[int, BatchHeader]], where: str
) -> BatchColumns:
    """`decode_batches` of sparse batches (the log cleaner's: fewer records than offsets)
    with numpy: every record read by `_one_by_one`, its offset its batch's base plus its own
    delta, the deltas checked increasing in each batch up to its last offset delta. At any
    doubt the strict decoder decides (and words the error)."""
    try:
        return _sparse_vectorised(data, batches, where)
    except (_NotVectorised, InvalidRecordError, IndexError):
        return _record_by_record(data, batches, where)


def _sparse_vectorised(
    data: Data, batches: Sequence[tuple[int, BatchHeader]], where: str
) -> BatchColumns:
    counts = np.array([h.records_count for _, h in batches], dtype=np.int64)
    total = int(counts.sum())
    if not total:
        raise _NotVectorised  # empty batches only: nothing to read
    buffer, spans = _regions(data, batches, where)
    if len(buffer) >= 1 << 31:
        raise _NotVectorised  # Arrow's binary offsets into the buffer are int32
    buf = np.frombuffer(buffer, dtype=np.uint8)
    pieces, _ = _record_starts(buffer, buf, spans, batches)
    fields, headers = _one_by_one(buffer, buf, _starts(pieces), None)
    deltas = fields.offset_delta
    last = np.repeat(np.array([h.last_offset_delta for _, h in batches], np.int64), counts)
    first_of_batch = np.zeros(total, dtype=bool)
    first_of_batch[(np.cumsum(counts) - counts)[counts > 0]] = True
    rising = np.diff(deltas) > 0
    if np.any(deltas < 0) or np.any(deltas > last) or np.any(~rising & ~first_of_batch[1:]):
        raise _NotVectorised
    bases = np.repeat(np.array([h.base_offset for _, h in batches], np.int64), counts)
    timestamps, timestamp_types = _timestamps_us(batches, counts, total, fields.timestamp_delta)
    arrow_buffer = pa.py_buffer(buffer)
    return BatchColumns(
        offsets=bases + deltas,
        timestamps_us=timestamps,
        timestamp_types=timestamp_types,
        keys=_binary(buf, arrow_buffer, fields.key_start, fields.key_length),
        values=_binary(buf, arrow_buffer, fields.value_start, fields.value_length),
        headers=headers,
    )


def _indexes(counts: Int64s, total: int) -> Int64s:
    """Per record of the call: its index in its batch (`counts` records per batch)."""
    return np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)


def _offsets(batches: Sequence[tuple[int, BatchHeader]], counts: Int64s, total: int) -> Int64s:
    """Per record of the call: its offset, its batch's base offset plus its index (the offset
    deltas were checked to be 0..n-1). One range when each batch starts where the one before
    ended, as in a fetch answer of a log without gaps."""
    bases = [h.base_offset for _, h in batches]
    after = [h.base_offset + h.records_count for _, h in batches]
    if bases and bases[1:] == after[:-1]:
        return np.arange(bases[0], bases[0] + total, dtype=np.int64)
    offsets = np.repeat(np.array(bases, np.int64), counts)
    offsets += _indexes(counts, total)
    return offsets


def _unaligned_words(buf: Bytes) -> Words:
    """The 8 bytes at each position that has 8 after it: an unaligned uint64 view."""
    return np.ndarray(
        shape=(max(len(buf) - 7, 0),), dtype="<u8", buffer=buf, offset=0, strides=(1,)
    )


def _one_by_one(
    buffer: Data, buf: Bytes, record_start: Int64s, index: Int64s | None
) -> tuple[_Fields, list[tuple[Header, ...]] | None]:
    """The fields of the records at the increasing positions `record_start` (`index`: each
    one's index in its batch, which its offset delta must be; None: sparse batches, whose
    deltas the caller checks), each varint read at each record's own position (`_varints`)."""
    words = _unaligned_words(buf)
    body_size, start = _varints(buf, words, record_start, 5)
    end = start + body_size
    # The starts were found with these same lengths, so each body ends where the next record
    # starts and the last one at its region's end; what is left to check is the size itself.
    if np.any(body_size < _MIN_BODY):
        raise _NotVectorised
    timestamp_delta, pos = _varints(buf, words, start + 1, 10)  # after the attributes byte
    offset_delta, pos = _varints(buf, words, pos, 5)
    if index is not None and not np.array_equal(offset_delta, index):
        raise _NotVectorised
    key_length, pos = _varints(buf, words, pos, 5)
    key_start = pos
    pos = pos + np.maximum(key_length, 0)
    if np.any(key_length < -1) or np.any(pos > end):
        raise _NotVectorised
    value_length, pos = _varints(buf, words, pos, 5)
    value_start = pos
    pos = pos + np.maximum(value_length, 0)
    if np.any(value_length < -1) or np.any(pos > end):
        raise _NotVectorised
    header_count, pos = _varints(buf, words, pos, 5)
    if np.any(header_count < 0) or np.any(pos > end):
        raise _NotVectorised
    headers: list[tuple[Header, ...]] | None = None
    with_headers = np.flatnonzero(header_count)
    if len(with_headers):
        headers = [()] * len(start)
        for row in with_headers.tolist():
            headers[row], pos[row] = _headers(
                buffer, int(pos[row]), int(end[row]), int(header_count[row])
            )
    if not np.array_equal(pos, end):
        raise _NotVectorised
    fields = _Fields(
        timestamp_delta, key_start, key_length, value_start, value_length, offset_delta
    )
    return fields, headers


_DELTA_WORDS_MAX = 1 << 20  # offset deltas the table below holds at most (8 MiB)
_delta_words = np.zeros(0, dtype=np.uint64)


def _offset_delta_words(stop: int) -> Words:
    """Entry d: the bytes of offset delta d as a record holds them (the minimal zig-zag varint
    of d, little-endian in a uint64), for d < `stop` at least; computed once, grown on demand."""
    global _delta_words
    if len(_delta_words) < stop:
        count = min(max(stop, 2 * len(_delta_words), 4096), _DELTA_WORDS_MAX)
        unsigned = np.arange(0, 2 * count, 2, dtype=np.uint64)  # zig-zag of d >= 0 is 2d
        table = np.zeros(count, dtype=np.uint64)
        for k in range(5):
            byte = (unsigned >> np.uint64(7 * k)) & np.uint64(0x7F)
            byte |= (unsigned >> np.uint64(7 * (k + 1)) != 0).astype(np.uint64) << np.uint64(7)
            table |= byte << np.uint64(8 * k)
        _delta_words = table
    return _delta_words


@dataclass(frozen=True, slots=True)
class _Layout:
    """Where each field of a record of a run lies, from the record's start (its length varint),
    and the key and value lengths: the same for every record of the run when the run is
    uniform. Runs of one layout, in any batch of the call, are checked together."""

    step: int
    timestamp_at: int
    offset_at: int
    key_length_at: int
    key_at: int
    value_length_at: int
    value_at: int
    key_length: int
    value_length: int

    @property
    def lead(self) -> int:
        """1 when each record's head starts at the byte before the record (the header count
        of the record before it in a run), which `_head_mismatches` then checks with the rest
        of the head; 0 when that byte would take the head one word more (the fields end at a
        word's end, e.g. 100-byte records 3 ms apart: 16 bytes up to the value), and each
        record's last byte is checked on its own (`_table_group`). One word fewer per head is
        a third less to copy and check."""
        return 1 if self.value_at % 8 else 0

    @property
    def width(self) -> int:
        """The bytes of each record's head that `_table_group` copies: from `lead` bytes
        before the record up to the value, in whole words."""
        return (self.value_at + self.lead + 7) & ~7

    def fits(self, run: _Run, size: int) -> bool:
        """Whether `run` (of this layout's step) can be read as a table of it, in a buffer of
        `size` bytes: every record's head lies inside the buffer and the offset-delta table
        holds the run's deltas."""
        return (
            run.position >= self.lead
            and run.position - self.lead + self.step * (run.count - 1) + self.width <= size
            and run.index + run.count <= _DELTA_WORDS_MAX
        )


# A record's head (`_Layout.width`) longer than this is not read as a table: keys of more
# than about 100 bytes (copied twice: in the head, then to the column).
_HEAD_MAX = 128


def _layout(buffer: Data, run: _Run) -> _Layout | None:
    """`run`'s first record's layout, if runs of it can be decoded as tables: its fields are
    valid and end at its length, it has no header, the deltas and key length fit one word,
    the value length another, and its head is at most _HEAD_MAX bytes (a run must also fit,
    `_Layout.fits`). Else None (`_one_by_one`)."""
    position, step = run.position, run.step
    end = position + step
    try:
        size, at = _varint(buffer, position, end)
        if at + size != end or size < _MIN_BODY:
            return None
        at += 1  # the attributes byte
        timestamp_at = at
        _, at = decode_varlong(cast(bytes, buffer), at, end)
        offset_at = at
        _, at = _varint(buffer, at, end)
        key_length_at = at
        key_length, at = _varint(buffer, at, end)
        key_at = at
        at += max(key_length, 0)
        value_length_at = at
        value_length, at = _varint(buffer, at, end)
        value_at = at
        at += max(value_length, 0)
        header_count, at = _varint(buffer, at, end)
    except InvalidRecordError:
        return None
    layout = _Layout(
        step,
        timestamp_at - position,
        offset_at - position,
        key_length_at - position,
        key_at - position,
        value_length_at - position,
        value_at - position,
        key_length,
        value_length,
    )
    if (
        key_length < -1
        or value_length < -1
        or header_count != 0  # so the count is one byte, the record's last
        or at != end
        or key_at > value_length_at
        or value_at + max(value_length, 0) != end - 1
        or key_at - timestamp_at > 8  # the deltas and the key length: one word
        or value_at - value_length_at > 8
        or layout.width > _HEAD_MAX
    ):
        return None
    return layout


def _table_groups(
    buffer: Data, buf: Bytes, runs: list[_Run], refused: frozenset[int] | None
) -> dict[_Layout, list[_Run]]:
    """The runs of at least _UNIFORM_MIN records that may be read as tables, by layout: a fetch
    answer's batches repeat a few layouts (the deltas' varints grow at the same record of
    every batch), so the checks cost a numpy call per layout, not per run (`_table_group`).

    With `refused` None, a run's layout is that of the first run of its record size that has
    one (a record's layout is read in Python: about 4 us), which `_table_group` checks on
    every record as it would its own; else each run's own, and runs at a position in
    `refused` are left out.
    """
    groups: dict[_Layout, list[_Run]] = {}
    by_step: dict[int, _Layout] = {}
    for run in runs:
        if run.count < _UNIFORM_MIN:
            continue
        if refused is None:
            layout = by_step.get(run.step)
            if layout is None:
                layout = _layout(buffer, run)
                if layout is not None:
                    by_step[run.step] = layout
        elif run.position in refused:
            continue
        else:
            layout = _layout(buffer, run)
        if layout is not None and layout.fits(run, len(buf)):
            groups.setdefault(layout, []).append(run)
    return groups


def _table_group(
    buffer: Data,
    buf: Bytes,
    layout: _Layout,
    members: list[_Run],
    timestamp_delta: Int64s,
    keys: _BinaryOut,
    values: _BinaryOut,
) -> list[_Run]:
    """Check and decode the runs of `members` (all of `layout`): the runs that fail a check
    (nothing else is written then), else none, with their rows' timestamp deltas, keys and
    values written.

    Each record's head (`_Layout.width` bytes from `_Layout.lead` bytes before it) is copied
    into one array, a strided copy per run: a pass over the records' first bytes, after which every
    check reads that small array instead of the answer, a word of every head at a time
    against one template (`_head_mismatches`): the length's bytes, the key and value lengths'
    bytes, the timestamp delta's continuation bits must be the first record's, the offset
    delta the record's own (from `_offset_delta_words`: the bytes of delta `index` as
    written), and each record's header count (its last byte) must be 0: read in the head of
    the record after it (the byte before a record, `_Layout.lead`) but for a run's last, or
    else copied alongside the heads, a byte per record. With the same layout, the checks
    `_one_by_one` makes per record hold for all once they hold for the
    first (`_layout`), which must have `layout` itself. The values are copied straight from
    the answer, one strided copy per run, the keys from the heads.
    """
    if _layout(buffer, members[0]) != layout:
        # The checks below compare every record with the first member's first record: it must
        # have the layout itself (taken from another run of its size, it may not).
        return members
    step, width, lead = layout.step, layout.width, layout.lead
    count = sum(r.count for r in members)
    heads = np.empty(count * width + 8, dtype=np.uint8)  # + 8: a word read at a row's end
    header_counts = None if lead else np.empty(count, dtype=np.uint8)
    kind = _void(width)
    at = 0
    for run in members:
        source = np.ndarray((run.count,), kind, buf, run.position - lead, (step,))
        np.ndarray((run.count,), kind, heads, at * width)[...] = source
        if header_counts is not None:
            last_bytes = np.ndarray((run.count,), np.uint8, buf, run.position + step - 1, (step,))
            header_counts[at : at + run.count] = last_bytes
        at += run.count
    counts = np.array([r.count for r in members], dtype=np.int64)
    firsts = np.cumsum(counts) - counts

    if lead:
        heads[firsts * width] = 0  # the byte before a run is no record's header count
    bad = _head_mismatches(buffer, heads, layout, members, count)
    if header_counts is not None:
        last_counts = [True] * len(members)
        if header_counts.any():
            found = header_counts.astype(np.uint64)
            bad = found if bad is None else bad | found
    else:
        last_counts = [buffer[r.position + r.count * step - 1] == 0 for r in members]
    if bad is not None or not all(last_counts):
        good = [True] * len(members)
        if bad is not None:
            good = np.logical_not(np.logical_or.reduceat(bad != 0, firsts)).tolist()
        return [r for r, g, c in zip(members, good, last_counts, strict=True) if not (g and c)]
    words: Words = np.ndarray((count,), "<u8", heads, lead + layout.timestamp_at, (width,))
    stamps = words & np.uint64(_low_bytes(layout.offset_at - layout.timestamp_at))
    unsigned = _joined_varint(stamps, layout.offset_at - layout.timestamp_at)
    signed = (unsigned >> _ONE).view(np.int64)
    unsigned &= _ONE
    signed ^= -unsigned.view(np.int64)
    key_size, value_size = layout.key_length, layout.value_length
    at = 0
    for run in members:
        rows = slice(run.row, run.row + run.count)
        timestamp_delta[rows] = signed[at : at + run.count]
        if key_size > 0:
            key_at = at * width + lead + layout.key_at
            keys.put(run.row, heads, run.count, key_size, key_at, width)
        if value_size > 0:
            values.put(run.row, buf, run.count, value_size, run.position + layout.value_at, step)
        at += run.count
    return []


def _head_mismatches(
    buffer: Data, heads: Bytes, layout: _Layout, members: list[_Run], count: int
) -> Words | None:
    """None when every one of the `count` heads (`_table_group`) has the bytes a record of
    `layout` must have; else per row a word, not 0 where the row's head differs.

    The heads are read as whole words, each word of a head against one template word (mask
    and expected bits, `_head_template`) and the row's own offset delta: a few numpy steps
    per word of a head that holds checked bits, over contiguous columns of the small array,
    into one accumulator (a differing bit anywhere stays set)."""
    width = layout.width
    words = width // 8
    flat = heads[: count * width].view("<u8")
    masks, expected = _head_template(buffer, layout, members[0].position)
    # The row's offset delta as written (`_offset_delta_words`), at its place in the head; a
    # delta longer than the layout's varint sets bits outside the mask, or spills into the
    # next word (past the head: counted as a mismatch).
    last = max(r.index + r.count for r in members)
    table = _offset_delta_words(last)
    word, byte = divmod(layout.lead + layout.offset_at, 8)
    deltas = np.concatenate([table[r.index : r.index + r.count] for r in members])
    spill: Words | None = None
    if byte and int(table[last - 1]) >> (64 - 8 * byte):
        spill = deltas >> np.uint64(64 - 8 * byte)
    deltas <<= np.uint64(8 * byte)
    found: Words | None = None
    part: Words | None = None
    for k in range(words):
        if not masks[k]:
            continue
        part = np.bitwise_and(flat[k::words], np.uint64(masks[k]), out=part)
        if expected[k]:
            part ^= np.uint64(expected[k])
        if k == word:
            part ^= deltas
        elif k == word + 1 and spill is not None:
            part ^= spill
            spill = None
        if found is None:
            found, part = part, None
        else:
            found |= part
    assert found is not None  # the head's first word holds the record's length
    if spill is not None:
        found |= spill
    return found if found.any() else None


def _head_template(buffer: Data, layout: _Layout, first: int) -> tuple[list[int], list[int]]:
    """(masks, expected bits) per word of the heads of `layout`'s records, from the record
    at `first`: the byte before the record, if the head has it (`_Layout.lead`), 0 (the
    header count of the one before); the
    length varint's bytes and the key and value lengths' bytes the first record's; the
    timestamp delta's continuation bits set on every byte but its last; the offset delta's
    bytes masked, 0 here (each row's own, `_head_mismatches`). The attributes byte, the
    timestamp delta's value bits and the key are not checked (any value is valid)."""
    lead = layout.lead
    mask = 0xFF if lead else 0
    expected = 0

    def fixed(start: int, stop: int) -> None:
        nonlocal mask, expected
        for at in range(start, stop):
            mask |= 0xFF << (8 * (lead + at))
            expected |= buffer[first + at] << (8 * (lead + at))

    fixed(0, layout.timestamp_at - 1)  # the length, before the attributes byte
    for at in range(layout.timestamp_at, layout.offset_at):
        mask |= 0x80 << (8 * (lead + at))
        if at < layout.offset_at - 1:
            expected |= 0x80 << (8 * (lead + at))
    mask |= _low_bytes(layout.key_length_at - layout.offset_at) << (8 * (lead + layout.offset_at))
    fixed(layout.key_length_at, layout.key_at)
    fixed(layout.value_length_at, layout.value_at)
    every = _low_bytes(8)
    words = layout.width // 8
    return (
        [(mask >> (64 * k)) & every for k in range(words)],
        [(expected >> (64 * k)) & every for k in range(words)],
    )


_VOIDS: dict[int, np.dtype[np.void]] = {}


def _void(size: int) -> np.dtype[np.void]:
    """The dtype of `size`-byte elements, made once (parsing "V100" costs 0.2 us a call)."""
    kind = _VOIDS.get(size)
    if kind is None:
        kind = _VOIDS[size] = np.dtype(f"V{size}")
    return kind


def _low_bytes(count: int) -> int:
    return (1 << (8 * count)) - 1


def _joined_varint(words: Words, size: int) -> Words:
    """The unsigned value of the varints of at most `size` bytes in the low bytes of `words`,
    the bytes after each one's last cleared: the 7 value bits of each byte, joined (one shift
    per byte; the continuation bits need no clearing, one mask after the shift picks each
    byte's 7 bits)."""
    joined = words & np.uint64(0x7F)
    part = np.empty_like(words)
    for k in range(1, size):
        np.right_shift(words, np.uint64(k), out=part)
        part &= np.uint64(0x7F << (7 * k))
        joined |= part
    return joined


def _headers(buffer: Data, pos: int, end: int, count: int) -> tuple[tuple[Header, ...], int]:
    """`count` headers at `pos`, inside a record ending at `end`; (headers, position after)."""
    found: list[Header] = []
    for _ in range(count):
        size, pos = _varint(buffer, pos, end)
        if size < 0 or pos + size > end:
            raise _NotVectorised  # a null or oversized header key
        key = str(buffer[pos : pos + size], "utf-8", "surrogateescape")
        pos += size
        size, pos = _varint(buffer, pos, end)
        if size < -1 or pos + size > end:
            raise _NotVectorised
        if size == -1:
            found.append((key, None))
        else:
            found.append((key, bytes(buffer[pos : pos + size])))  # a view's slice: copied
            pos += size
    return tuple(found), pos


def _varint(buffer: Data, pos: int, end: int) -> tuple[int, int]:
    # decode_varint only indexes its buffer, which a memoryview of bytes does alike.
    return decode_varint(cast(bytes, buffer), pos, end)


def _record_by_record(
    data: Data, batches: Sequence[tuple[int, BatchHeader]], where: str
) -> BatchColumns:
    """The strict decoder's answer as columns (it raises, and words, any structural error)."""
    data = bytes(data)  # a view is copied (the strict decoder takes bytes); bytes are not
    offsets: list[int] = []
    timestamps: list[int] = []
    types: list[int] = []
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    headers: list[tuple[Header, ...]] = []
    for position, header in batches:
        kind = (
            TIMESTAMP_TYPE_LOG_APPEND_TIME
            if header.is_log_append_time
            else TIMESTAMP_TYPE_CREATE_TIME
        )
        for record in RecordBatch(header, data, position, where).records():
            offsets.append(record.offset)
            timestamps.append(record.timestamp)
            types.append(kind)
            keys.append(record.key)
            values.append(record.value)
            headers.append(record.headers)
    return BatchColumns(
        offsets=np.array(offsets, dtype=np.int64),
        timestamps_us=np.array(timestamps, dtype=np.int64) * 1000,
        timestamp_types=np.array(types, dtype=np.int32),
        keys=pa.array(keys, type=pa.binary()),
        values=pa.array(values, type=pa.binary()),
        headers=headers if any(headers) else None,
    )
