"""The cleaner's batch filter (replog/storage/cleaner/batch_filter.py), which reads records as
spans and copies the kept ones as bytes, against a reference that decodes every record and
encodes the kept ones anew: on random logs (keys, keyless records, tombstones, headers, codecs,
LogAppendTime, idempotent and transactional producers, markers, aborted transactions, a key
map that does not reach the end, two passes so that horizons come and pass) both write the
same bytes, and so does the filter told which batches are plain (copied without a scan)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from replog.record import RecordBatch, available_codecs, build_batch, read_header
from replog.record.builder import seal_batch
from replog.record.compression import COMPRESSION_NONE, compress
from replog.record.control_record import CONTROL_ABORT, CONTROL_COMMIT, marker_type
from replog.record.header import (
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    DELETE_HORIZON_FLAG_MASK,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    BatchHeader,
)
from replog.record.record import Record, append_record
from replog.storage.aborted_transactions import AbortedTransaction
from replog.storage.cleaner.batch_filter import (
    BatchFilter,
    BatchRetention,
    ProducerLastBatch,
    delete_horizon,
)
from replog.storage.cleaner.offset_map import OffsetMap
from replog.storage.cleaner.transactions import CleanedTransactions

T0 = 1_700_000_000_000
RETENTION = 1_000
CODECS = sorted(available_codecs())


class ReferenceFilter(BatchFilter):
    """The module Rules of batch_filter.py over decoded `Record`s, each kept one encoded anew."""

    def filter(self, batch: bytes, plain: bool = False) -> bytes | None:
        # `plain` is the caller's knowledge: the reference decides from the records alone.
        header = RecordBatch.parse(batch, sparse=True).header
        records = list(RecordBatch(header, batch, 0, "reference").records())
        now = self._now_ms
        horizon = delete_horizon(header)
        if header.is_control:
            kind = marker_type(records[0].key) if records else None
            can_discard = self._transactions.on_control_batch_read(header, kind)
            discard_records = can_discard and horizon is not None and horizon <= now
        else:
            can_discard = discard_records = self._transactions.on_batch_read(header)
        if header.base_offset > self._map.latest_offset:
            return batch
        retention = self._batch_retention(header, discard_records)
        if retention is BatchRetention.DELETE:
            return None
        retain_deletes = horizon is None or now < horizon
        if discard_records:
            kept: list[Record] = []
        elif header.is_control:
            kept = records
        else:
            kept = [r for r in records if self._keeps(r, retain_deletes)]
        if kept:
            tombstone = any(r.value is None for r in kept)
            needs_horizon = (tombstone or (header.is_control and can_discard)) and horizon is None
            if len(kept) == len(records) and not needs_horizon:
                return batch
            return _encoded(header, kept, now + RETENTION if needs_horizon else horizon)
        if retention is BatchRetention.RETAIN_EMPTY:
            return batch if header.records_count == 0 else _empty_reference(header)
        return None

    def _keeps(self, record: Record, retain_deletes: bool) -> bool:
        if record.offset > self._map.latest_offset:
            return True
        if record.key is None:
            return False
        latest = record.offset >= self._map.get(record.key)
        return latest and (record.value is not None or retain_deletes)


def _sealed(
    header: BatchHeader, body: bytes, count: int, base: int, top: int, attributes: int
) -> bytes:
    return seal_batch(
        body,
        count,
        base,
        top,
        attributes,
        base_offset=header.base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        last_offset_delta=header.last_offset_delta,
    )


def _encoded(header: BatchHeader, kept: list[Record], horizon: int | None) -> bytes:
    base_timestamp = kept[0].timestamp if horizon is None else horizon
    parts: list[bytes] = []
    for r in kept:
        delta = r.timestamp - base_timestamp
        append_record(parts, r.offset - header.base_offset, delta, r.key, r.value, r.headers)
    top = max(r.timestamp for r in kept)
    if header.is_log_append_time:
        top = header.max_timestamp
    body = b"".join(parts)
    if header.compression_codec != COMPRESSION_NONE:
        body = compress(header.compression_codec, body)
    mask = COMPRESSION_CODEC_MASK | TIMESTAMP_TYPE_MASK | TRANSACTIONAL_FLAG_MASK
    attributes = header.attributes & (mask | CONTROL_FLAG_MASK)
    if horizon is not None:
        attributes |= DELETE_HORIZON_FLAG_MASK
    return _sealed(header, body, len(kept), base_timestamp, top, attributes)


def _empty_reference(header: BatchHeader) -> bytes:
    mask = TIMESTAMP_TYPE_MASK | TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK
    return _sealed(header, b"", 0, NO_TIMESTAMP, header.max_timestamp, header.attributes & mask)


keys = st.sampled_from([b"a", b"b", b"c", b"dd" * 40, None])
data_batch = st.tuples(
    st.just("data"),
    st.lists(
        st.tuples(
            keys,
            st.none() | st.binary(max_size=130),
            st.lists(
                st.tuples(st.sampled_from(["h", "é"]), st.none() | st.binary(max_size=3)),
                max_size=1,
            ),
            st.integers(-5, 300),  # the record's time after the batch's first
        ),
        min_size=1,
        max_size=6,
    ),
    st.sampled_from(CODECS),
    st.booleans(),  # LogAppendTime
    st.sampled_from([None, None, 7, 8]),  # producer id: plain, idempotent or transactional
)
marker = st.tuples(
    st.just("marker"), st.sampled_from([CONTROL_COMMIT, CONTROL_ABORT]), st.sampled_from([7, 8])
)
logs = st.lists(st.one_of(data_batch, data_batch, marker), min_size=1, max_size=14)


def build(
    log: list[tuple],
) -> tuple[list[bytes], list[AbortedTransaction], dict[int, ProducerLastBatch]]:  # type: ignore[type-arg]
    """The batches at their offsets, the aborted transactions (producers 7 and 8 are
    transactional: a marker ends what they wrote since their last one), each producer's last
    batch."""
    batches: list[bytes] = []
    aborted: list[AbortedTransaction] = []
    open_since: dict[int, int] = {}
    last: dict[int, ProducerLastBatch] = {}
    offset = 0
    for entry in log:
        if entry[0] == "marker":
            _, kind, producer = entry
            key = kind.to_bytes(4, "big")
            batches.append(
                build_batch(
                    [(T0 + offset, key, bytes(6), ())],
                    base_offset=offset,
                    producer_id=producer,
                    producer_epoch=0,
                    is_transactional=True,
                    is_control=True,
                )
            )
            if kind == CONTROL_ABORT and producer in open_since:
                aborted.append(
                    AbortedTransaction(producer, open_since[producer], offset, offset + 1)
                )
            open_since.pop(producer, None)
            last[producer] = ProducerLastBatch(None, 0)
            offset += 1
            continue
        _, records, codec, append_time, producer = entry
        options: dict[str, object] = {"base_offset": offset, "compression": codec}
        if append_time:
            options["log_append_time"] = T0 + 5_000
        if producer is not None:
            options.update(producer_id=producer, producer_epoch=0, base_sequence=offset)
            options["is_transactional"] = True
            open_since.setdefault(producer, offset)
            last[producer] = ProducerLastBatch(offset + len(records) - 1, 0)
        batches.append(
            build_batch(
                [(T0 + offset + at, k, v, h) for k, v, h, at in records],
                **options,  # type: ignore[arg-type]
            )
        )
        offset += len(records)
    return batches, aborted, last


def one_pass(
    filter_type: type[BatchFilter],
    batches: list[bytes],
    reach: int,
    now: int,
    aborted: list[AbortedTransaction],
    last: dict[int, ProducerLastBatch],
    plain: bool = False,
) -> list[bytes]:
    """A pass's filter over `batches` with a key map of the data up to offset `reach`;
    `plain`: each batch the rule calls plain said to be (`BatchFilter.filter`)."""
    offset_map = OffsetMap(24 * 1_000)
    transactions = CleanedTransactions(list(aborted))
    for batch in batches:
        header = read_header(batch)
        if header.base_offset > reach:
            break
        if header.is_control:
            parsed = list(RecordBatch.parse(batch, sparse=True).records())
            transactions.on_control_batch_read(
                header, marker_type(parsed[0].key) if parsed else None
            )
        elif not transactions.on_batch_read(header):
            for record in RecordBatch.parse(batch, sparse=True).records():
                if record.key is not None:
                    offset_map.put(record.key, record.offset)
        offset_map.update_latest_offset(header.last_offset)
    batch_filter = filter_type(
        offset_map,
        now_ms=now,
        delete_retention_ms=RETENTION,
        last_batches=last,
        transactions=CleanedTransactions(list(aborted)),
    )
    return [
        out
        for batch in batches
        if (out := batch_filter.filter(batch, plain and is_plain(batch, offset_map))) is not None
    ]


def is_plain(batch: bytes, offset_map: OffsetMap) -> bool:
    """The batch filter's plain rule, from the records: neither control nor transactional,
    some records, each with a key and a value and its key's latest (or past the map)."""
    header = read_header(batch)
    if header.is_control or header.is_transactional or header.records_count == 0:
        return False
    return all(
        r.key is not None
        and r.value is not None
        and (r.offset > offset_map.latest_offset or offset_map.get(r.key) == r.offset)
        for r in RecordBatch.parse(batch, sparse=True).records()
    )


@settings(max_examples=150, deadline=None)
@given(log=logs, reach=st.integers(0, 60), later=st.sampled_from([0, RETENTION - 1, RETENTION]))
def test_the_filter_writes_what_the_reference_writes(
    log: list[tuple], reach: int, later: int
) -> None:  # type: ignore[type-arg]
    batches, aborted, last = build(log)
    for now in (T0, T0 + later):  # the second pass sees the first's horizons
        expected = one_pass(ReferenceFilter, batches, reach, now, aborted, last)
        assert one_pass(BatchFilter, batches, reach, now, aborted, last) == expected
        assert one_pass(BatchFilter, batches, reach, now, aborted, last, plain=True) == expected
        batches = expected
