"""`replog dump-log FILE...`: print what a segment's `.log`, `.index`, `.timeindex` or
`.txnindex`, or a producer `.snapshot`, holds.

Like Kafka's `kafka-dump-log.sh`: one line per batch with its byte position, offsets, record
count, leader epoch, producer fields, timestamps, codec and whether its CRC-32C is valid; with
`--print-data`, one line per record. Damage is reported, never fatal: a batch with a bad CRC
is printed as `crcValid: false`, and bytes that do not frame as a batch are reported with
their position. An index prints one line per entry, and stops at the first entry that is out
of order or outside its segment (its `.log`, when next to it), naming its byte position. A
producer snapshot prints one line per producer (with its open transaction's first offset and
its last marker's coordinator epoch), or what fails its checks. With `--print-data` a control
batch's record is printed as Kafka prints it, `endTxnMarker: COMMIT coordinatorEpoch: 5` (or
ABORT) in place of key and payload. An aborted transaction index prints one line per
aborted transaction, as Kafka's dump prints a `.txnindex`.
The exit code is 1 when anything invalid was found.

A compacted log's cleaned segments print as Kafka prints them, and say what the cleaner did:
a batch holding fewer records than its offset range (the cleaner kept some, or none: the last
batch of a producer id stays for its sequence) ends with `cleaned: true` and how many offsets
it spans, a batch whose tombstones have a delete horizon shows `deleteHorizonMs` (KIP-534), and
offsets missing between two batches are a `gap:` line before the second.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, TextIO

from replog.cli.arguments import add_documented_command
from replog.cli.segment_checks import base_offset_of, offset_index_entries, time_index_entries
from replog.errors import CorruptIndexError, CorruptProducerSnapshotError, ReplogError
from replog.record.batch import RecordBatch
from replog.record.compression import codec_name
from replog.record.control_record import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    decode_marker,
    marker_type,
)
from replog.record.header import (
    DELETE_HORIZON_FLAG_MASK,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    compute_crc,
    read_frame,
    read_header,
)
from replog.replication.producer_snapshot import decode_producer_snapshot
from replog.storage.aborted_transactions import decode as decode_aborted
from replog.storage.transaction_index import TXN_INDEX_SUFFIX

_READ_BYTES = 8 * 1024 * 1024


def register(commands: Any) -> None:
    parser = add_documented_command(
        commands,
        "dump-log",
        __doc__,
    )
    parser.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help=".log, .index, .timeindex, .txnindex or .snapshot file",
    )
    parser.add_argument("--print-data", action="store_true", help="print every record too")
    parser.add_argument("--max-bytes", type=int, default=None, help="stop after this many bytes")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    status = 0
    for path in args.files:
        print(f"Dumping {path}")
        if path.endswith(".log"):
            status |= dump_segment(
                path, sys.stdout, print_data=args.print_data, max_bytes=args.max_bytes
            )
        elif path.endswith((".index", ".timeindex")):
            status |= dump_index(path, sys.stdout)
        elif path.endswith(".snapshot"):
            status |= dump_producer_snapshot(path, sys.stdout)
        elif path.endswith(TXN_INDEX_SUFFIX):
            status |= dump_txn_index(path, sys.stdout)
        else:
            raise ReplogError(
                f"{path}: not a .log, .index, .timeindex, .txnindex or .snapshot file"
            )
    return status


def dump_segment(
    path: str, out: TextIO, *, print_data: bool = False, max_bytes: int | None = None
) -> int:
    """Print every batch of a `.log` file; return 1 if any damage was found."""
    size = os.path.getsize(path)
    limit = size if max_bytes is None else min(size, max_bytes)
    damaged = 0
    position = 0
    # The offset after the previous batch; the first is the segment's base (from its name).
    expected = base_offset_of(path)
    with open(path, "rb") as f:
        while position < limit:
            f.seek(position)
            frame = f.read(LOG_OVERHEAD)
            if len(frame) < LOG_OVERHEAD:
                out.write(
                    f"Found {size - position} trailing bytes at position {position} "
                    "(partial batch)\n"
                )
                return 1
            _, batch_size = read_frame(frame)
            if batch_size - LOG_OVERHEAD < MIN_BATCH_LENGTH or batch_size < RECORD_BATCH_OVERHEAD:
                out.write(
                    f"Found invalid batch length {batch_size - LOG_OVERHEAD} "
                    f"at position {position}; stopping\n"
                )
                return 1
            if position + batch_size > size:
                out.write(
                    f"Found a partial batch at position {position}: {batch_size} bytes declared, "
                    f"{size - position} present\n"
                )
                return 1
            data = frame + f.read(batch_size - LOG_OVERHEAD)
            header = read_header(data)
            crc_valid = compute_crc(data, 0, batch_size) == header.crc
            damaged |= not crc_valid or header.magic != 2
            if expected is not None and header.base_offset > expected:
                out.write(_gap(expected, header.base_offset))
            expected = header.next_offset
            out.write(
                f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} "
                f"count: {header.records_count} baseSequence: {header.base_sequence} "
                f"lastSequence: {header.last_sequence} producerId: {header.producer_id} "
                f"producerEpoch: {header.producer_epoch} "
                f"partitionLeaderEpoch: {header.partition_leader_epoch} "
                f"isTransactional: {str(header.is_transactional).lower()} "
                f"isControl: {str(header.is_control).lower()} position: {position} "
                f"{'LogAppendTime' if header.is_log_append_time else 'CreateTime'}: "
                f"{header.max_timestamp} size: {batch_size} magic: {header.magic} "
                f"compresscodec: {codec_name(header.compression_codec)} "
                f"crcValid: {str(crc_valid).lower()}{_cleaned(header)}\n"
            )
            if print_data and crc_valid:
                damaged |= _print_records(data, path, position, out)
            position += batch_size
    if damaged:
        out.write(f"{path}: found damaged batches\n")
    return int(bool(damaged))


def _gap(first: int, next_base: int) -> str:
    """The line for offsets [first, next_base) that no batch holds (the log cleaner removed
    them)."""
    count = next_base - first
    return f"gap: offsets {first} to {next_base - 1} ({count}) not in the segment\n"


def _cleaned(header: BatchHeader) -> str:
    """What the log cleaner left visible in a batch's header: a delete horizon (KIP-534), and
    fewer records than offsets (the rest removed)."""
    shown = ""
    if header.attributes & DELETE_HORIZON_FLAG_MASK:
        shown += f" deleteHorizonMs: {header.base_timestamp}"
    span = header.last_offset_delta + 1
    if header.records_count != span:
        shown += f" cleaned: true offsets: {span}"
    return shown


def _print_records(data: bytes, path: str, position: int, out: TextIO) -> int:
    try:
        # sparse: a compacted log's cleaned batch has fewer records than offsets.
        batch = RecordBatch.parse(data, where=f"{path} at byte {position}", sparse=True)
        timestamp_type = "LogAppendTime" if batch.header.is_log_append_time else "CreateTime"
        for record in batch.records():
            key_size = -1 if record.key is None else len(record.key)
            value_size = -1 if record.value is None else len(record.value)
            header_keys = [key for key, _ in record.headers]
            if batch.header.is_control:
                shown = _control(record.key, record.value, f"{path} at byte {position}")
            else:
                shown = f"key: {_show(record.key)} payload: {_show(record.value)}"
            out.write(
                f"| offset: {record.offset} {timestamp_type}: {record.timestamp} "
                f"keySize: {key_size} valueSize: {value_size} headerKeys: {header_keys} "
                f"{shown}\n"
            )
    except ReplogError as exc:
        out.write(f"| cannot decode records: {exc}\n")
        return 1
    return 0


def _control(key: bytes | None, value: bytes | None, where: str) -> str:
    """A control record as Kafka's dump prints it: an end-transaction marker's type and
    coordinator epoch, else its control type id."""
    kind = marker_type(key)
    if kind not in (CONTROL_ABORT, CONTROL_COMMIT):
        return f"controlType: {kind if kind is not None else 'unknown'}"
    marker = decode_marker(key, value, where)
    name = "ABORT" if marker.aborted else "COMMIT"
    return f"endTxnMarker: {name} coordinatorEpoch: {marker.coordinator_epoch}"


def dump_txn_index(path: str, out: TextIO) -> int:
    """Print every aborted transaction of a `.txnindex`; return 1 if it fails its checks."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        entries = decode_aborted(raw, path, base_offset_of(path) or 0)
    except CorruptIndexError as exc:
        out.write(f"{exc}\n")
        return 1
    for entry in entries:
        out.write(
            f"version: 0 producerId: {entry.producer_id} firstOffset: {entry.first_offset} "
            f"lastOffset: {entry.last_offset} lastStableOffset: {entry.last_stable_offset}\n"
        )
    return 0


def dump_index(path: str, out: TextIO) -> int:
    """Print every entry of an offset or time index (offsets made absolute), checking each
    (`segment_checks`: ascending, within the segment, positions within its `.log` when that
    file is next to it); the first bad entry is reported with its byte position, and ends the
    dump with status 1."""
    with open(path, "rb") as f:
        raw = f.read()
    base_offset = base_offset_of(path) or 0
    if path.endswith(".timeindex"):
        names = ("timestamp", "offset")
        entries = time_index_entries(raw, base_offset, None)
    else:
        names = ("offset", "position")
        log_path = path.removesuffix(".index") + ".log"
        log_size = os.path.getsize(log_path) if os.path.isfile(log_path) else None
        entries = offset_index_entries(raw, base_offset, log_size)
    for entry in entries:
        if entry.problem is not None:
            shown = (
                "" if entry.partial else f" ({names[0]}: {entry.first} {names[1]}: {entry.second})"
            )
            out.write(
                f"{path}: bad entry at byte {entry.position}{shown}: {entry.problem}; stopping\n"
            )
            return 1
        out.write(f"{names[0]}: {entry.first} {names[1]}: {entry.second}\n")
    return 0


def dump_producer_snapshot(path: str, out: TextIO) -> int:
    """Print every producer of a snapshot file; return 1 if it fails its checks."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        entries = decode_producer_snapshot(raw, path)
    except CorruptProducerSnapshotError as exc:
        out.write(f"{exc}\n")
        return 1
    for entry in entries:
        batch = "no data batch"
        if entry.batches:
            last = entry.batches[-1]
            batch = (
                f"firstSequence: {last.first_sequence} lastSequence: {last.last_sequence} "
                f"firstOffset: {last.first_offset} lastOffset: {last.last_offset}"
            )
        out.write(
            f"producerId: {entry.producer_id} producerEpoch: {entry.producer_epoch} "
            f"coordinatorEpoch: {entry.coordinator_epoch} "
            f"currentTxnFirstOffset: {entry.current_txn_first_offset} "
            f"lastTimestamp: {entry.last_timestamp_ms} {batch}\n"
        )
    return 0


def _show(value: bytes | None) -> str:
    if value is None:
        return "null"
    text = value.decode("utf-8", errors="backslashreplace")
    return text if len(text) <= 200 else text[:200] + "..."
