"""The aborted transaction index of a segment (`<base>.txnindex`, Kafka's `TransactionIndex`):
its bytes, and which aborted transactions a read_committed fetch must be told of.

Format (Kafka's, big-endian, no header): one 34-byte entry per aborted transaction, in the
order their ABORT markers were written:

    version:int16 (0)  producer_id:int64  first_offset:int64  last_offset:int64
    last_stable_offset:int64

`first_offset` is the transaction's first data batch in this partition, `last_offset` its
ABORT marker's offset, `last_stable_offset` the partition's LSO once the marker was written.

Rules:
- Entries are appended in strictly increasing `last_offset` (markers are written in offset
  order); an append that breaks it is a bug (`ValueError`), a file that breaks it, a length
  not a multiple of 34, an unknown version or an entry ending before the segment's base offset
  is `CorruptIndexError` naming the file and the entry; recovery then rebuilds the index from
  the segment's markers, as Kafka's does.
- A fetch from `fetch_offset` up to `upper_bound` (the LSO or HW it reads to) is told of every
  aborted transaction that overlaps it: `last_offset >= fetch_offset` and
  `first_offset < upper_bound`. The search over a log's segments in offset order may stop at
  the first segment holding an entry whose `last_stable_offset >= upper_bound`: no later
  segment can hold a transaction that began below it (`AbortedTransactions.complete`).
Pure: bytes in, bytes out; the segment shell reads and writes the file.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from replog.errors import CorruptIndexError

__all__ = [
    "ENTRY_SIZE",
    "AbortedTransaction",
    "AbortedTransactions",
    "decode",
    "encode",
    "overlapping",
]

ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34
VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTransaction:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def encode(entries: Iterable[AbortedTransaction], after_last_offset: int = -1) -> bytes:
    """The bytes of `entries`, appended after an entry whose last offset is `after_last_offset`."""
    out = bytearray()
    last = after_last_offset
    for entry in entries:
        if entry.last_offset <= last:
            raise ValueError(
                f"aborted transaction of producer {entry.producer_id} ends at {entry.last_offset}, "
                f"not after the previous entry's {last}: entries go in marker order"
            )
        if not entry.first_offset <= entry.last_offset:
            raise ValueError(f"aborted transaction {entry} ends before it starts")
        last = entry.last_offset
        out += ENTRY.pack(
            VERSION,
            entry.producer_id,
            entry.first_offset,
            entry.last_offset,
            entry.last_stable_offset,
        )
    return bytes(out)


def decode(data: bytes, where: str, base_offset: int = 0) -> list[AbortedTransaction]:
    """The entries of a `.txnindex` file's bytes (`where` names it in errors)."""
    if len(data) % ENTRY_SIZE:
        raise CorruptIndexError(
            f"{where}: {len(data)} bytes is not a whole number of {ENTRY_SIZE}-byte entries"
        )
    entries: list[AbortedTransaction] = []
    last = -1
    for index, fields in enumerate(ENTRY.iter_unpack(data)):
        version, producer_id, first, last_offset, lso = fields
        if version != VERSION:
            raise CorruptIndexError(f"{where}: entry {index} has unknown version {version}")
        if last_offset < base_offset or last_offset <= last or first > last_offset:
            raise CorruptIndexError(
                f"{where}: entry {index} (producer {producer_id}, offsets {first}..{last_offset}) "
                f"is out of order or below the segment's base offset {base_offset}"
            )
        last = last_offset
        entries.append(AbortedTransaction(producer_id, first, last_offset, lso))
    return entries


@dataclass(frozen=True, slots=True)
class AbortedTransactions:
    """What one segment's index says to a fetch: the overlapping transactions, and whether the
    search may stop at this segment."""

    found: tuple[AbortedTransaction, ...]
    complete: bool


def overlapping(
    entries: Iterable[AbortedTransaction], fetch_offset: int, upper_bound: int
) -> AbortedTransactions:
    """The entries a fetch of [fetch_offset, upper_bound) must be told of (module Rules)."""
    found = []
    for entry in entries:
        if entry.last_offset >= fetch_offset and entry.first_offset < upper_bound:
            found.append(entry)
        if entry.last_stable_offset >= upper_bound:
            return AbortedTransactions(tuple(found), True)
    return AbortedTransactions(tuple(found), False)
