"""One partition's answer to a consumer Fetch, decoded into `ConsumerRecord`s and drained by poll.

`fetched_answer` checks the v2 batches of a fetch answer (framing, header, CRC-32C) when it
arrives and keeps them as bytes; `CompletedFetch` decodes them into the records a consumer
may see a batch at a time, as `poll` hands them out (possibly over several polls when
`max.poll.records` is smaller than what one fetch returned), as Kafka's consumer parses a
fetch's records only as poll reaches them. So answers fetched ahead of the application are
bytes, not a tracked Python object a record that the garbage collector walks again and
again. `decode_fetched` decodes a whole answer at once (the same records and errors).

Three decoders, tried in turn for each uncompressed batch (a compressed one starts at the
second): `_uniform_records` when every record of the batch has one layout (no key, values of
one size, no headers: checked a byte column at a time, the records cut and built without a
Python loop over their fields), `_fast_records` for the other common shapes (one record at a
time, varints inlined), and the strict decoder of `replog.record`, which takes anything and
words the errors. A faster one never guesses: at any doubt it leaves the batch to the next,
and the tests hold each to the strict one's records and errors, damaged batches included.

Rules:
- The leader returns whole batches, so the first batch may start before the fetch position
  (a consumer that committed offset 7 of a batch holding 5..9): records below the position
  are skipped. Batches that end before the position are skipped without decoding them.
- Nothing at or above the high watermark is returned, even if the bytes hold it (the leader
  only serves committed data to consumers; the client holds the line too). A batch the high
  watermark cuts through is still read and checked to its end: a damaged batch (a record that
  does not parse, fewer records than its count; or a CRC mismatch with `check.crcs`) yields
  none of its records, only its error, on every decoder path, as Kafka's consumer never
  hands out records of a batch that fails its checks.
- Control batches (transaction markers) are skipped like Kafka's consumer does, but still
  move the position past them. A read_committed answer (`aborted_transactions` given) also
  drops the batches of the aborted transactions it names (`read_committed.py`, Kafka's rule)
  and holds the line at the last stable offset; they too move the position.
- A compacted topic's batches may be sparse (the log cleaner kept some of their records, at
  their offsets, or none: the last batch of a producer id stays for its sequence state). The
  position moves past a batch's last offset delta, not its record count, as Kafka's consumer
  moves it to the batch's next offset: an answer of empty batches still moves it, and the
  offsets between kept records are never asked for again. Sparse batches are decoded by
  `_fast_records` (whose check of offset deltas takes gaps on a branch dense batches never
  take) or the strict decoder; `_uniform_records` takes deltas 0..n-1 only.
- With `check.crcs` every returned batch's CRC-32C is verified; a mismatch is a
  `CorruptRecordError` naming the partition and the batch's offset. A partial batch at the end
  of an answer (the broker's byte limit cut it) is ignored: the next fetch starts before it.
- `next_offset` is where the next fetch starts once every record was handed out: after the
  last complete batch read, so a fetch of only skipped records (control batches, records
  below the position) still moves the position forward.
- A CRC mismatch or a bad frame is found when the answer arrives, a record that does not
  parse or a deserializer's error when `take` reaches its batch. Records before a bad batch
  (or a record the user's deserializer rejects) are still handed out; the error is raised by
  the poll after them, and again by every poll until the user seeks past it (Kafka's
  behaviour). The position stays at the bad record. A deserializer's exception is wrapped in
  RecordDeserializationError naming the partition, the offset and key or value (Kafka's
  RecordDeserializationException), so the caller knows where to seek.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

from replog.client.answer_batches import answer_batches
from replog.client.read_committed import AbortedTransactions
from replog.client.records import (
    TIMESTAMP_TYPE_CREATE_TIME,
    TIMESTAMP_TYPE_LOG_APPEND_TIME,
    ConsumerRecord,
    TopicPartition,
)
from replog.errors import RecordDeserializationError
from replog.record.batch import RecordBatch
from replog.record.compression import COMPRESSION_NONE, decompress
from replog.record.header import (
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
)
from replog.record.record import Header

Deserializer = Callable[[bytes | None], Any] | None

# A named tuple built from a plain tuple with no Python-level call (`_make` is one); a
# consumer builds one per record, so this is a measurable share of the decode cost.
_new_tuple = tuple.__new__


@dataclass(slots=True)
class _Pending:
    """The batches of an answer not decoded yet, and how to decode them."""

    data: bytes | memoryview  # the answer's record bytes (a view of the response's buffer)
    batches: list[tuple[int, BatchHeader]]  # (position in `data`, header), checked, in order
    fetch_position: int  # records below it are skipped
    bound: int  # records at or above it are not returned (the high watermark)
    key_deserializer: Deserializer
    value_deserializer: Deserializer
    error: Exception | None  # met after the last of `batches` (a CRC mismatch, a bad frame)
    next: int = 0  # the index in `batches` of the next batch to decode


@dataclass(slots=True)
class CompletedFetch:
    """One partition's fetched records not yet handed to the user: those decoded (`records`
    from `index` on), then the answer's batches not decoded yet (`pending`), decoded a batch
    at a time as `take` reaches them."""

    tp: TopicPartition
    position: int  # the consumer position these records continue from
    records: list[ConsumerRecord]
    next_offset: int  # the position once every record is handed out
    high_watermark: int
    log_start_offset: int
    error: Exception | None = None  # raised once the records before it are handed out
    index: int = field(default=0)
    # The next fetch's records, fetched from `next_offset` while these were still buffered
    # (the fetcher fetches ahead): handed out once these are.
    following: CompletedFetch | None = None
    size: int = 0  # the answer's record bytes (what the fetcher's read-ahead bound counts)
    pending: _Pending | None = None

    @property
    def exhausted(self) -> bool:
        return self.index >= len(self.records) and self.pending is None

    @property
    def empty(self) -> bool:
        """No record, no batch left to decode, no error: the answer brought nothing to hand
        out (its `next_offset` may still move the position past skipped batches)."""
        return self.exhausted and self.error is None

    def take(self, max_records: int) -> list[ConsumerRecord]:
        """Up to `max_records` records; moves `position` past them."""
        start = self.index
        taken = self.records[start : start + max_records]
        self.index = start + len(taken)
        while len(taken) < max_records and self.pending is not None:
            self._decode_next()
            more = self.records[: max_records - len(taken)]
            self.index = len(more)
            taken += more
        if taken:
            self.position = taken[-1].offset + 1
        if self.exhausted and self.error is None:
            self.position = max(self.position, self.next_offset)
        return taken

    def decode_all(self) -> None:
        """Decode every pending batch into `records` (up to an error)."""
        records = self.records[self.index :]
        while self.pending is not None:
            self._decode_next()
            records += self.records
        self.records, self.index = records, 0

    def _decode_next(self) -> None:
        """Replace `records` with the next pending batch's (module rules); at an error, the
        records before it and the error."""
        pending = self.pending
        assert pending is not None
        records: list[ConsumerRecord] = []
        try:
            while not records and pending.next < len(pending.batches):
                batch_position, header = pending.batches[pending.next]
                pending.next += 1
                _decode_batch(self.tp, pending, batch_position, header, records)
        except Exception as exc:  # a bad batch, or the user's deserializer
            self.error = exc
            self.pending = None
        else:
            if pending.next >= len(pending.batches):
                self.error = pending.error
                self.pending = None
        self.records, self.index = records, 0


def fetched_answer(
    tp: TopicPartition,
    data: bytes | memoryview,
    *,
    position: int,
    high_watermark: int,
    log_start_offset: int = -1,
    check_crcs: bool = True,
    key_deserializer: Deserializer = None,
    value_deserializer: Deserializer = None,
    aborted_transactions: Iterable[tuple[int, int]] | None = None,
    last_stable_offset: int = -1,
) -> CompletedFetch:
    """The batches of `data` (a fetch answer's bytes) holding records at or after `position`
    below the HW, checked (framing, header, CRC-32C with `check_crcs`) but not decoded: their
    records are decoded as `take` reaches them. With `aborted_transactions` (a read_committed
    answer's (producer id, first offset) list, possibly empty) the batches of aborted
    transactions are dropped and nothing at or above `last_stable_offset` is returned."""
    topic, partition = tp
    # -1: the leader did not say; then only the position bounds what is returned.
    bound = high_watermark if high_watermark >= 0 else 1 << 63
    aborted = None
    if aborted_transactions is not None:
        aborted = AbortedTransactions(aborted_transactions)
        if last_stable_offset >= 0:
            bound = min(bound, last_stable_offset)
    batches: list[tuple[int, BatchHeader]] = []
    next_offset = position
    error: Exception | None = None
    where = f"fetch of {topic}-{partition}"
    try:
        for batch_position, header in answer_batches(
            data,
            position,
            bound,
            check_crcs=check_crcs,
            name=f"{topic}-{partition}",
            where=where,
            skip_hint=True,
        ):
            next_offset = min(header.base_offset + header.last_offset_delta + 1, bound)
            if aborted is not None and aborted.hides(data, batch_position, header, where):
                continue
            batches.append((batch_position, header))
    except Exception as exc:  # a bad batch: raised after the records before it
        error = exc
    pending = None
    if batches:
        pending = _Pending(
            data, batches, position, bound, key_deserializer, value_deserializer, error
        )
        error = None
    return CompletedFetch(
        tp,
        position,
        [],
        max(next_offset, position),
        high_watermark,
        log_start_offset,
        error,
        size=len(data),
        pending=pending,
    )


def decode_fetched(
    tp: TopicPartition,
    data: bytes | memoryview,
    *,
    position: int,
    high_watermark: int,
    log_start_offset: int = -1,
    check_crcs: bool = True,
    key_deserializer: Deserializer = None,
    value_deserializer: Deserializer = None,
) -> CompletedFetch:
    """The records of `data` (a fetch answer's bytes) at or after `position`, below the HW,
    all decoded (`fetched_answer`, then every batch)."""
    completed = fetched_answer(
        tp,
        data,
        position=position,
        high_watermark=high_watermark,
        log_start_offset=log_start_offset,
        check_crcs=check_crcs,
        key_deserializer=key_deserializer,
        value_deserializer=value_deserializer,
    )
    completed.decode_all()
    return completed


def _decode_batch(
    tp: TopicPartition,
    pending: _Pending,
    batch_position: int,
    header: BatchHeader,
    records: list[ConsumerRecord],
) -> None:
    """Append the records of one checked batch in [fetch position, bound) to `records`,
    deserialized; raises at a record that does not parse or a deserializer's error (the
    records before it appended)."""
    # The header's properties spelled out: this runs once per batch of every fetch.
    attributes = header.attributes
    if attributes & CONTROL_FLAG_MASK:
        return
    data = pending.data
    if not isinstance(data, bytes):
        # A view of the answer's buffer: this batch's bytes copied once, so that the records'
        # keys and values are bytes of their own (slices of the copy).
        end = batch_position + header.batch_length + LOG_OVERHEAD
        data, batch_position = bytes(data[batch_position:end]), 0
    position = pending.fetch_position
    bound = pending.bound
    timestamp_type = (
        TIMESTAMP_TYPE_LOG_APPEND_TIME
        if attributes & TIMESTAMP_TYPE_MASK
        else TIMESTAMP_TYPE_CREATE_TIME
    )
    batch_records = None
    if not attributes & COMPRESSION_CODEC_MASK:
        batch_records = _uniform_records(
            tp,
            header,
            data,
            batch_position + RECORD_BATCH_OVERHEAD,
            batch_position + header.batch_length + LOG_OVERHEAD,
            timestamp_type,
            position,
            bound,
        )
    if batch_records is None:
        where = f"fetch of {tp.topic}-{tp.partition}"
        batch_records = _batch_records(
            tp, header, data, batch_position, timestamp_type, position, bound, where
        )
    key_deserializer = pending.key_deserializer
    value_deserializer = pending.value_deserializer
    if key_deserializer is None and value_deserializer is None:
        records += batch_records
        return
    append = records.append
    for record in batch_records:
        origin = "key"
        try:
            key = record.key
            if key_deserializer is not None:
                key = key_deserializer(key)
            origin = "value"
            value = record[6]
            if value_deserializer is not None:
                value = value_deserializer(value)
        except Exception as exc:
            raise RecordDeserializationError(tp, record.offset, origin, exc) from exc
        append(
            _new_tuple(
                ConsumerRecord,
                (*record[:5], key, value, record.headers, record.leader_epoch),
            )
        )


def _batch_records(
    tp: TopicPartition,
    header: BatchHeader,
    data: bytes,
    batch_position: int,
    timestamp_type: int,
    position: int,
    bound: int,
    where: str,
) -> list[ConsumerRecord]:
    """The records of one validated batch in [position, bound), not deserialized."""
    start = batch_position + RECORD_BATCH_OVERHEAD
    end = batch_position + header.size_in_bytes
    region = data
    codec = header.compression_codec
    if codec != COMPRESSION_NONE:
        blob = memoryview(data)[start:end]
        region = decompress(codec, blob, where=f"{where}: batch at offset {header.base_offset}")
        start, end = 0, len(region)
    try:
        fast = _fast_records(tp, header, region, start, end, timestamp_type, position, bound)
    except (IndexError, _NotFast):  # odd or malformed: the strict decoder decides and words it
        fast = None
    if fast is not None:
        return fast
    # The strict decoder: headers, long fields, or something malformed (it names what).
    topic, partition = tp
    epoch = header.partition_leader_epoch
    return [
        _new_tuple(
            ConsumerRecord,
            (
                topic,
                partition,
                record.offset,
                record.timestamp,
                timestamp_type,
                record.key,
                record.value,
                record.headers,
                epoch,
            ),
        )
        for record in RecordBatch(header, data, batch_position, where).records()
        if position <= record.offset < bound
    ]


def _fast_records(
    tp: TopicPartition,
    header: BatchHeader,
    data: bytes,
    pos: int,
    end: int,
    timestamp_type: int,
    position: int,
    bound: int,
) -> list[ConsumerRecord] | None:
    """`record.decode_records` for the common shape, with every varint inlined.

    A consumer decodes every record it reads, and the general decoder's function calls per
    field are most of its cost (this is about 3x faster). Handles records whose varints take
    one or two bytes (records up to 8 KiB, timestamp deltas up to 8 s) and up to 63 headers
    with short keys and values; for anything else, and at any structural doubt, it returns
    None (or raises IndexError / _NotFast) and the caller decodes the batch with the strict
    decoder, which also words the errors.

    A sparse batch (the log cleaner's: fewer records than offsets) is taken too: its offset
    deltas only increase, up to the last offset delta. A record whose delta is not its index
    is checked on its own branch, which a dense batch never takes past its first mismatch
    (it gives up there): no per-record work is added to dense batches.
    """
    topic, partition = tp
    base_offset = header.base_offset
    last_offset_delta = header.last_offset_delta
    sparse = header.records_count != last_offset_delta + 1
    last_gap = -1  # the offset delta of the latest record whose delta is not its index
    first_gap = 0  # the index of the first such record
    gaps = 0  # how many there are
    base_timestamp = header.base_timestamp
    append_time = header.max_timestamp if header.is_log_append_time else None
    epoch = header.partition_leader_epoch
    out: list[ConsumerRecord] = []
    append = out.append
    new = _new_tuple
    record_type = ConsumerRecord
    # Each varint: one byte below 0x80, else two when the second is below 0x80, else give up.
    # `raw` is the zig-zag form; (raw >> 1) ^ -(raw & 1) is the value. The fields are
    # unrolled, not looped over: a loop per field and a list per record were a third of the
    # decode.
    for index in range(header.records_count):
        raw = data[pos]
        if raw < 0x80:
            pos += 1
        else:
            high = data[pos + 1]
            if high >= 0x80:
                return None
            raw = (raw & 0x7F) | (high << 7)
            pos += 2
        size = (raw >> 1) ^ -(raw & 1)
        record_end = pos + size
        if size < 6 or record_end > end:  # attributes + 5 one-byte varints at least
            return None
        # pos: the attributes byte (unused); then timestampDelta.
        raw = data[pos + 1]
        if raw < 0x80:
            pos += 2
        else:
            high = data[pos + 2]
            if high >= 0x80:
                return None
            raw = (raw & 0x7F) | (high << 7)
            pos += 3
        timestamp_delta = (raw >> 1) ^ -(raw & 1)
        # offsetDelta: must be the record's index, whose zig-zag form is 2 * index.
        raw = data[pos]
        if raw < 0x80:
            pos += 1
        else:
            high = data[pos + 1]
            if high >= 0x80:
                return None
            raw = (raw & 0x7F) | (high << 7)
            pos += 2
        if raw != index << 1:
            # Only in a sparse batch, and each delta above the last: once one record's delta
            # passed its index, every later one's does too (checked after the loop).
            delta = raw >> 1
            if (
                not sparse
                or raw & 1
                or delta < index
                or delta <= last_gap
                or delta > last_offset_delta
            ):
                return None
            if not gaps:
                first_gap = index
            gaps += 1
            last_gap = delta
            offset = base_offset + delta
        else:
            offset = base_offset + index
        # keyLength + key (1: the zig-zag form of -1, no key).
        raw = data[pos]
        if raw == 1:
            key = None
            pos += 1
        else:
            if raw < 0x80:
                pos += 1
            else:
                high = data[pos + 1]
                if high >= 0x80:
                    return None
                raw = (raw & 0x7F) | (high << 7)
                pos += 2
            if raw & 1:  # negative, other than -1
                return None
            field_end = pos + (raw >> 1)
            if field_end > record_end:
                return None
            key = data[pos:field_end]
            pos = field_end
        # valueLength + value.
        raw = data[pos]
        if raw == 1:
            value = None
            pos += 1
        else:
            if raw < 0x80:
                pos += 1
            else:
                high = data[pos + 1]
                if high >= 0x80:
                    return None
                raw = (raw & 0x7F) | (high << 7)
                pos += 2
            if raw & 1:
                return None
            field_end = pos + (raw >> 1)
            if field_end > record_end:
                return None
            value = data[pos:field_end]
            pos = field_end
        raw = data[pos]
        pos += 1
        if raw == 0:
            headers: tuple[Header, ...] = ()
        elif raw < 0x80 and not raw & 1:
            headers = _headers(data, pos, record_end, raw >> 1)
            pos = record_end
        else:
            return None
        if pos != record_end:
            return None
        if offset < position or offset >= bound:
            # Skipped, but still read to the batch's end: a batch is checked whole, wherever
            # the high watermark cuts it (as the strict decoder does), so no record of a
            # damaged batch is returned.
            continue
        timestamp = base_timestamp + timestamp_delta if append_time is None else append_time
        append(
            new(
                record_type,
                (topic, partition, offset, timestamp, timestamp_type, key, value, headers, epoch),
            )
        )
    if gaps and gaps != header.records_count - first_gap:
        return None  # a delta back at its index after a gap: not increasing
    return out if pos == end else None


# The batch-level decoder's tables. A one-byte varint's value by its byte (zig-zag decoded):
_ONE_BYTE_VALUE = [(raw >> 1) ^ -(raw & 1) for raw in range(0x80)]
# The zig-zag varint bytes of offset deltas: one byte for deltas 0..63, two for 64..8191 (the
# low byte of each, then the high one).
_DELTA_ONE = bytes(range(0, 0x80, 2))
_DELTA_LOW = bytes(((index << 1) & 0x7F) | 0x80 for index in range(8192))
_DELTA_HIGH = bytes((index << 1) >> 7 for index in range(8192))
_WIDTH_LIMITS = (64, 8192)  # an offset delta below 64 takes one varint byte, below 8192 two


def _uniform_records(
    tp: TopicPartition,
    header: BatchHeader,
    data: bytes,
    pos: int,
    end: int,
    timestamp_type: int,
    position: int,
    bound: int,
) -> list[ConsumerRecord] | None:
    """The records of a batch whose records all have one layout, checked and cut at batch level.

    The layout: no key, a value of one length, no headers, a timestamp delta of one varint
    byte; a producer writing fixed-size values makes it. Such records lie at a fixed stride
    (per run of offset deltas of one varint width: 0..63, then 64..8191), so every byte that
    must be the same in each record (the length, the key's -1, the value's length, the header
    count 0) and the offset deltas (0, 1, 2, ...) are compared a whole column at a time, with
    C-level strided slices, and the records are built with `map`: no Python loop over the
    record's fields. Anything else (or any doubt) is None: the per-record decoder decides."""
    count = header.records_count
    if count > _WIDTH_LIMITS[1]:
        return None
    topic, partition = tp
    base_offset = header.base_offset
    low = max(0, position - base_offset)  # the records wanted: [low, high)
    high = min(count, bound - base_offset)
    base_timestamp = header.base_timestamp
    append_time = header.max_timestamp if header.is_log_append_time else None
    epoch = header.partition_leader_epoch
    out: list[ConsumerRecord] = []
    index = 0
    while index < count:
        width = 1 if index < _WIDTH_LIMITS[0] else 2  # the offset delta's varint bytes
        run = min(count, _WIDTH_LIMITS[width - 1]) - index
        if end - pos < 2:  # no record left (the count says more): reading on could pass the data
            return None
        raw = data[pos]
        if raw < 0x80:
            body = pos + 1
        else:
            high_byte = data[pos + 1]
            if high_byte >= 0x80:
                return None
            raw = (raw & 0x7F) | (high_byte << 7)
            body = pos + 2
        record_end = body + (raw >> 1)
        stride = record_end - pos
        run_end = pos + run * stride
        key_at = body + 2 + width  # after attributes, timestamp delta and offset delta
        if raw & 1 or run_end > end or key_at + 3 > record_end:
            return None
        # The value's length (one or two varint bytes), as the first record has it.
        value_at = key_at + 2 if data[key_at + 1] < 0x80 else key_at + 3
        encoded = data[key_at + 1 : value_at]
        zigzag = encoded[0] & 0x7F | (encoded[-1] << 7 if len(encoded) == 2 else 0)
        size = zigzag >> 1
        if (
            zigzag & 1
            or encoded[-1] >= 0x80
            or value_at + size + 1 != record_end
            or data[key_at] != 1  # no key (-1)
            or data[record_end - 1] != 0  # no headers
        ):
            return None
        # Column by column, every record like the first: its length, key and value length
        # bytes and header count, then the timestamp and offset deltas.
        for at in (*range(pos, body), *range(key_at, value_at), record_end - 1):
            column = data[at:run_end:stride]
            if column != column[:1] * run:
                return None
        deltas = data[body + 1 : run_end : stride]
        if max(deltas) >= 0x80:
            return None
        if width == 1:
            if data[body + 2 : run_end : stride] != _DELTA_ONE[index : index + run]:
                return None
        elif (
            data[body + 2 : run_end : stride] != _DELTA_LOW[index : index + run]
            or data[body + 3 : run_end : stride] != _DELTA_HIGH[index : index + run]
        ):
            return None
        start, stop = max(index, low), min(index + run, high)
        if start < stop:
            at = value_at + (start - index) * stride
            values = [data[v : v + size] for v in range(at, at + (stop - start) * stride, stride)]
            if append_time is None:
                table = _ONE_BYTE_VALUE
                times: Any = [
                    base_timestamp + table[delta] for delta in deltas[start - index : stop - index]
                ]
            else:
                times = repeat(append_time)
            out.extend(
                map(
                    _new_tuple,
                    repeat(ConsumerRecord),
                    zip(
                        repeat(topic),
                        repeat(partition),
                        range(base_offset + start, base_offset + stop),
                        times,
                        repeat(timestamp_type),
                        repeat(None),
                        values,
                        repeat(()),
                        repeat(epoch),
                    ),
                )
            )
        index += run
        pos = run_end
    return out if pos == end else None


class _NotFast(Exception):
    """A header the fast path does not take: the batch goes to the strict decoder."""


def _headers(data: bytes, pos: int, record_end: int, count: int) -> tuple[Header, ...]:
    """`count` headers filling data[pos:record_end] exactly (else _NotFast)."""
    found: list[Header] = []
    for _ in range(count):
        raw = data[pos]
        if raw >= 0x80 or raw & 1:  # a key length of 64 bytes or more, or negative
            raise _NotFast
        end = pos + 1 + (raw >> 1)
        key = data[pos + 1 : end].decode("utf-8", "surrogateescape")
        raw = data[end]
        if raw == 1:
            pos = end + 1
            found.append((key, None))
            continue
        if raw >= 0x80 or raw & 1:
            raise _NotFast
        pos = end + 1 + (raw >> 1)
        found.append((key, data[end + 1 : pos]))
    if pos != record_end:
        raise _NotFast
    return tuple(found)
