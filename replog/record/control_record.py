"""The end-transaction marker: the one record of a COMMIT or ABORT control batch (Kafka's
`EndTransactionMarker` and `ControlRecordType`).

    key:    version:int16 (0)  type:int16 (0 ABORT, 1 COMMIT)
    value:  version:int16 (0)  coordinator_epoch:int32

Worked example: an ABORT written by coordinator epoch 5 is the key ``0000 0000`` and the
value ``0000 00000005``.

Rules: `marker_type` reads a key leniently (None when it is no marker key: too short, or a
control type of another kind), as Kafka's cleaner does; `decode_marker` is strict and raises
`CorruptRecordError` naming what is wrong, for the producer state that must know the outcome.
A value longer than its fields is accepted (Kafka reads only the fields it knows).
`batch_marker` reads the marker of a control batch in a buffer: the one record a broker decodes
on its append paths (the batch header says where it is; nothing else of the batch is read).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from replog.errors import CorruptRecordError
from replog.record.batch import RecordBatch
from replog.record.header import BatchHeader

__all__ = [
    "CONTROL_ABORT",
    "CONTROL_COMMIT",
    "EndTxnMarker",
    "batch_marker",
    "decode_marker",
    "encode_marker",
    "marker_type",
]

CONTROL_ABORT = 0
CONTROL_COMMIT = 1
_KEY = struct.Struct(">hh")  # version, type
_VALUE = struct.Struct(">hi")  # version, coordinator epoch


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    aborted: bool
    coordinator_epoch: int


def encode_marker(marker: EndTxnMarker) -> tuple[bytes, bytes]:
    """The (key, value) of `marker`'s record."""
    kind = CONTROL_ABORT if marker.aborted else CONTROL_COMMIT
    return _KEY.pack(0, kind), _VALUE.pack(0, marker.coordinator_epoch)


def marker_type(key: bytes | None) -> int | None:
    """A control record's type from its key, or None if it is unreadable."""
    if key is None or len(key) < _KEY.size:
        return None
    kind: int = _KEY.unpack_from(key)[1]
    return kind


def decode_marker(key: bytes | None, value: bytes | None, where: str) -> EndTxnMarker:
    """The marker of a control record (`where` names the batch in errors)."""
    kind = marker_type(key)
    if kind not in (CONTROL_ABORT, CONTROL_COMMIT):
        raise CorruptRecordError(f"{where}: control record key {key!r} is no COMMIT or ABORT")
    if value is None or len(value) < _VALUE.size:
        raise CorruptRecordError(f"{where}: end-transaction marker value {value!r} is too short")
    version, coordinator_epoch = _VALUE.unpack_from(value)
    if version < 0:
        raise CorruptRecordError(f"{where}: end-transaction marker version {version}")
    return EndTxnMarker(kind == CONTROL_ABORT, coordinator_epoch)


def batch_marker(
    buf: bytes | bytearray | memoryview, position: int, header: BatchHeader, where: str
) -> EndTxnMarker:
    """The marker of the control batch `header` at `position` of `buf` (its first record)."""
    data = bytes(buf[position : position + header.size_in_bytes])
    for record in RecordBatch(header, data, 0, where).records():
        return decode_marker(record.key, record.value, f"{where} at offset {record.offset}")
    raise CorruptRecordError(f"{where}: control batch at {header.base_offset} has no record")
