"""Batches of a partition's log with transactions, for the read_committed tests: data batches
of plain, idempotent and transactional producers, and COMMIT/ABORT control batches."""

from __future__ import annotations

from replog.record import build_batch
from replog.record.control_record import EndTxnMarker, encode_marker

TS = 1_700_000_000_000


def data_batch(base: int, values: list[bytes], pid: int = -1, txn: bool = False) -> bytes:
    """A batch of `values` at offsets from `base`, of producer `pid` (-1: none)."""
    return build_batch(
        [(TS, None, v, ()) for v in values],  # type: ignore[misc]
        base_offset=base,
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=0 if pid >= 0 else -1,
        is_transactional=txn,
    )


def marker_batch(offset: int, pid: int, aborted: bool) -> bytes:
    """The control batch ending `pid`'s transaction at `offset`."""
    key, value = encode_marker(EndTxnMarker(aborted, 3))
    return build_batch(
        [(TS, key, value, ())],
        base_offset=offset,
        producer_id=pid,
        producer_epoch=0,
        is_transactional=True,
        is_control=True,
    )
