"""The checks of a follower's append: the leader's batches, taken verbatim, must be valid
batches whose offsets and leader epochs increase
(docs/design/storage.md#leader-validation-on-produce).

Rules: pure functions over bytes, a log's name and its config; no `Log`, no I/O, no lock (the
log calls them under its own). A compacted log accepts the batches its leader's cleaner
rewrote (fewer records than offsets, gaps between batches); no batch may carry a leader epoch
later than the sending leader's. Whether the first batch starts at the log end offset is the
log's check, not this module's.
"""

from __future__ import annotations

from collections.abc import Sized

from replog.errors import CorruptRecordError, InvalidRecordError, OffsetsOutOfOrderError
from replog.record.header import LOG_OVERHEAD, BatchHeader, validate_batch
from replog.storage.leader_batch_validation import Unchangeable, batch_where, raise_naming_batch
from replog.storage.log_config import LogConfig


def validate_follower_batches(
    buf: Unchangeable, leader_epoch: int | None, name: str, config: LogConfig
) -> list[BatchHeader]:
    """The header of each batch of a follower's append to the log `name` (sent by a leader of
    `leader_epoch` when given), every one a valid batch (or, in a compacted log, a cleaned
    one), their offsets and leader epochs increasing."""
    if not buf:
        raise InvalidRecordError(f"{name}: a follower append needs at least one batch")
    headers: list[BatchHeader] = []
    position = 0
    expected: int | None = None
    epoch_floor = -1
    while position < len(buf):
        try:
            header = validate_batch(buf, position, where=name)
        except (CorruptRecordError, InvalidRecordError):
            header = cleaned_batch(name, config, buf, headers, position)
        # A compacted leader's cleaned batches skip the offsets it removed (checked only
        # on a mismatch: the usual append pays nothing for it).
        if (
            expected is not None
            and header.base_offset != expected
            and not (header.base_offset > expected and config.compacts)
        ):
            raise OffsetsOutOfOrderError(
                f"{batch_where(name, 'follower append', headers, position)}: base offset "
                f"{header.base_offset} does not follow {expected - 1}"
            )
        if header.partition_leader_epoch < epoch_floor:
            raise InvalidRecordError(
                f"{batch_where(name, 'follower append', headers, position)}: leader epoch "
                f"{header.partition_leader_epoch} after {epoch_floor}"
            )
        if leader_epoch is not None and header.partition_leader_epoch > leader_epoch:
            raise InvalidRecordError(
                f"{batch_where(name, 'follower append', headers, position)}: leader epoch "
                f"{header.partition_leader_epoch} after the leader's own, {leader_epoch}"
            )
        epoch_floor = header.partition_leader_epoch
        expected = header.base_offset + header.last_offset_delta + 1
        headers.append(header)
        position += header.batch_length + LOG_OVERHEAD
    return headers


def cleaned_batch(
    name: str, config: LogConfig, data: Unchangeable, headers: Sized, position: int
) -> BatchHeader:
    """The header of a batch at `position` that failed the strict check: valid as a batch
    the log cleaner rewrote (fewer records than offsets, or none) in a compacted log, else
    the strict check's error, the batch named."""
    if config.compacts:
        try:
            return validate_batch(data, position, where=name, sparse=True)
        except (CorruptRecordError, InvalidRecordError):
            pass
    raise_naming_batch(name, "follower append", data, headers, position)
