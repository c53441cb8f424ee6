"""One segment's aborted transaction index file, `<base>.txnindex` (Kafka's `TransactionIndex`):
its entries, kept in memory once read, and the file kept equal to them.

The entries' format and the overlapping search are `aborted_transactions`'; this module is the
file's shell.

Rules:
- The file exists only once the segment holds an ABORT marker (Kafka creates it lazily too); a
  missing file is an empty index.
- An entry goes to the segment holding its marker, appended in marker order; the bytes are
  written at once (no fsync: `flush`, with the segment's, makes them durable, and recovery
  rebuilds the index of every segment it rescans).
- `truncate_to(offset)` drops the entries whose marker is at or past `offset`, as the segment's
  other indexes drop theirs; `reset` empties the index and removes the file.
- A file that fails `aborted_transactions.decode` raises `CorruptIndexError` naming it: the
  log's recovery then rebuilds it from the segment's markers.
"""

from __future__ import annotations

from replog.storage.aborted_transactions import (
    ENTRY_SIZE,
    AbortedTransaction,
    AbortedTransactions,
    decode,
    encode,
    overlapping,
)
from replog.storage.fs import FileSystem

__all__ = ["TXN_INDEX_SUFFIX", "TransactionIndex"]

TXN_INDEX_SUFFIX = ".txnindex"


class TransactionIndex:
    """The `.txnindex` of the segment whose base offset is `base_offset`."""

    __slots__ = ("_dirty", "_entries", "_fs", "base_offset", "path")

    def __init__(self, path: str, base_offset: int, fs: FileSystem) -> None:
        self.path = path
        self.base_offset = base_offset
        self._fs = fs
        self._entries: list[AbortedTransaction] | None = None  # read on first use
        self._dirty = False  # written since the last flush

    def entries(self) -> list[AbortedTransaction]:
        """The entries, in marker order (a copy)."""
        return list(self._loaded())

    def _loaded(self) -> list[AbortedTransaction]:
        if self._entries is None:
            data = self._fs.read_bytes(self.path)
            self._entries = [] if not data else decode(data, self.path, self.base_offset)
        return self._entries

    def append(self, entry: AbortedTransaction) -> None:
        """Add the entry of an ABORT marker of this segment (after every entry there)."""
        entries = self._loaded()
        after = entries[-1].last_offset if entries else self.base_offset - 1
        data = encode((entry,), after_last_offset=after)
        segment_file = self._fs.open_segment_file(self.path, create=True)
        try:
            segment_file.append(data)
        finally:
            segment_file.close()
        entries.append(entry)
        self._dirty = True

    def collect(self, fetch_offset: int, upper_bound: int) -> AbortedTransactions:
        """What a fetch of [fetch_offset, upper_bound) must be told of from this segment."""
        entries = self._loaded()
        if not entries:
            return AbortedTransactions((), False)
        return overlapping(entries, fetch_offset, upper_bound)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after `offset`."""
        entries = self._loaded()
        kept = [entry for entry in entries if entry.last_offset < offset]
        if len(kept) == len(entries):
            return
        if kept:
            self._fs.truncate_file(self.path, len(kept) * ENTRY_SIZE)
            self._dirty = True
        else:
            self._fs.remove(self.path)
        self._entries = kept

    def reset(self) -> None:
        """Empty the index (a rebuild follows) and remove the file."""
        self._fs.remove(self.path)
        self._entries = []
        self._dirty = False

    def flush(self) -> None:
        """Make the entries written since the last flush durable."""
        if self._dirty:
            self._fs.fsync_file(self.path)
            self._dirty = False

    def delete(self) -> None:
        self._fs.remove(self.path)
        self._entries = []
        self._dirty = False
