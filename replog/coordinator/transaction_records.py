"""The key and value bytes of `__transaction_state` records, exactly as Kafka writes them
(TransactionLogKey / TransactionLogValue), and the metadata a record stands for.

Big-endian, each starting with an int16 version; STRING is an int16 length and UTF-8 bytes;
in the flexible value version 1, arrays and strings carry an unsigned varint of length + 1
(0: null) and every struct ends with its tagged fields (a count, then tag, size, bytes):

    key, version 0:     version:int16  transactional_id:STRING
    value, version 0:   version:int16  producer_id:int64  producer_epoch:int16
                        timeout_ms:int32  state:int8
                        partitions:[topic:STRING  partition_ids:[int32]]?  (null when Empty)
                        last_update_ms:int64  start_ms:int64
    value, version 1:   the same fields, compact, then tagged fields (each left out at its
                        default): 0 previous producer id (int64, -1), 1 next producer id
                        (int64, -1), 2 client transaction version (int16, 0)

Worked example: "t" is the key ``0000 0001 74``; producer 7 at epoch 0, 60 s, Empty, updated at
5 ms, version 0, is the value ``0000 0000000000000007 0000 0000ea60 00 ffffffff
0000000000000005 ffffffffffffffff``.

Rules:
- replog writes value version 1 when the transaction version is 2 (Kafka 4.x with
  transaction.version 2) and version 0 otherwise; it reads both, skipping tagged fields it does
  not know. Decoded metadata has no last producer epoch (Kafka keeps it in memory only).
- A null value (a tombstone) removes the transactional id (an expired one).
- Bytes that do not parse (short, negative lengths, bad UTF-8, an unknown version or state,
  trailing bytes) raise `CorruptRecordError` naming what is wrong; values that cannot be
  encoded raise `ValueError`.
"""

from __future__ import annotations

from collections import defaultdict

from replog.coordinator.offsets_records import _INT16, _INT32, _INT64, _packed, _Reader, _string
from replog.coordinator.transaction_metadata import NO_PRODUCER_EPOCH, TxnMetadata, TxnState
from replog.errors import CorruptRecordError
from replog.record.varint import encode_unsigned

__all__ = ["decode_key", "decode_value", "encode_key", "encode_value", "value_version"]

KEY_VERSION = 0
_TAG_PREVIOUS_PRODUCER_ID = 0
_TAG_NEXT_PRODUCER_ID = 1
_TAG_CLIENT_TRANSACTION_VERSION = 2
_WHAT_VALUE = "__transaction_state value"


def value_version(transaction_version: int) -> int:
    """The value version Kafka writes under a transaction version (feature level)."""
    return 1 if transaction_version >= 2 else 0


def encode_key(transactional_id: str) -> bytes:
    return _INT16.pack(KEY_VERSION) + _string(transactional_id, "transactional id")


def decode_key(data: bytes) -> str:
    reader = _Reader(data, "__transaction_state key")
    version = reader.int16("the key version")
    if version != KEY_VERSION:
        raise CorruptRecordError(f"__transaction_state key: unknown key version {version}")
    transactional_id = reader.string("the transactional id")
    reader.end()
    return transactional_id


def _grouped(meta: TxnMetadata) -> list[tuple[str, list[int]]]:
    topics: dict[str, list[int]] = defaultdict(list)
    for topic, partition in sorted(meta.partitions):
        topics[topic].append(partition)
    return list(topics.items())


def encode_value(meta: TxnMetadata, version: int) -> bytes:
    """The record value of `meta` at value `version` (0 or 1)."""
    if meta.state is TxnState.EMPTY and meta.partitions:
        raise ValueError(f"an Empty transaction holds partitions: {sorted(meta.partitions)}")
    flexible = version >= 1
    parts = [
        _INT16.pack(version),
        _packed(_INT64, meta.producer_id, "producer id"),
        _packed(_INT16, meta.producer_epoch, "producer epoch"),
        _packed(_INT32, meta.timeout_ms, "transaction timeout"),
        bytes((meta.state.id,)),
    ]
    topics = None if meta.state is TxnState.EMPTY else _grouped(meta)
    if topics is None:
        parts.append(b"\x00" if flexible else _INT32.pack(-1))
    else:
        parts.append(encode_unsigned(len(topics) + 1) if flexible else _INT32.pack(len(topics)))
        for topic, ids in topics:
            parts.append(_compact_string(topic) if flexible else _string(topic, "topic"))
            parts.append(encode_unsigned(len(ids) + 1) if flexible else _INT32.pack(len(ids)))
            parts.extend(_packed(_INT32, i, "partition") for i in ids)
            if flexible:
                parts.append(b"\x00")  # the partitions entry's tagged fields: none
    parts.append(_packed(_INT64, meta.last_update_ms, "last update time"))
    parts.append(_packed(_INT64, meta.start_ms, "start time"))
    if flexible:
        tags = [  # a tagged field at its default is left out, as Kafka's writer does
            (tag, _packed(packer, value, f"tag {tag}"))
            for tag, value, default, packer in (
                (_TAG_PREVIOUS_PRODUCER_ID, meta.prev_producer_id, -1, _INT64),
                (_TAG_NEXT_PRODUCER_ID, meta.next_producer_id, -1, _INT64),
                (_TAG_CLIENT_TRANSACTION_VERSION, meta.transaction_version, 0, _INT16),
            )
            if value != default
        ]
        parts.append(encode_unsigned(len(tags)))
        for tag, data in tags:
            parts += [encode_unsigned(tag), encode_unsigned(len(data)), data]
    return b"".join(parts)


def _compact_string(value: str) -> bytes:
    data = _string(value, "topic")[_INT16.size :]
    return encode_unsigned(len(data) + 1) + data


class _ValueReader(_Reader):
    __slots__ = ()

    def uvarint(self, field: str) -> int:
        value = shift = 0
        for _ in range(5):
            byte = self._take(1, field)[0]
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7
        raise CorruptRecordError(f"{self._what}: {field} is a varint longer than 5 bytes")

    def int8(self, field: str) -> int:
        return int.from_bytes(self._take(1, field), "big", signed=True)

    def length(self, field: str, flexible: bool) -> int:
        """An array's or string's length; -1 for null."""
        if flexible:
            return self.uvarint(f"the length of {field}") - 1
        return self.int32(f"the length of {field}")

    def compact_string(self, field: str) -> str:
        length = self.length(field, True)
        if length < 0:
            raise CorruptRecordError(f"{self._what}: {field} is null")
        return self.text(length, field)

    def skip_tags(self, field: str) -> dict[int, bytes]:
        tags = {}
        for _ in range(self.uvarint(f"the tag count of {field}")):
            tag = self.uvarint(f"a tag of {field}")
            tags[tag] = self._take(self.uvarint(f"the size of tag {tag}"), f"tag {tag}")
        return tags


def decode_value(transactional_id: str, data: bytes) -> TxnMetadata:
    """The metadata a value (version 0 or 1) records for `transactional_id`."""
    reader = _ValueReader(data, f"{_WHAT_VALUE} of {transactional_id!r}")
    version = reader.int16("the value version")
    if version not in (0, 1):
        raise CorruptRecordError(f"{_WHAT_VALUE}: unknown value version {version}")
    flexible = version == 1
    producer_id = reader.int64("the producer id")
    epoch = reader.int16("the producer epoch")
    timeout_ms = reader.int32("the transaction timeout")
    state_id = reader.int8("the transaction state")
    try:
        state = TxnState.from_id(state_id)
    except ValueError:
        raise CorruptRecordError(f"{_WHAT_VALUE}: unknown transaction state {state_id}") from None
    partitions: set[tuple[str, int]] = set()
    topics = reader.length("the partitions", flexible)
    for _ in range(max(topics, 0)):
        topic = reader.compact_string("a topic") if flexible else reader.string("a topic")
        count = reader.length(f"the partitions of {topic!r}", flexible)
        if count < 0:
            raise CorruptRecordError(f"{_WHAT_VALUE}: the partitions of {topic!r} are null")
        partitions.update((topic, reader.int32("a partition")) for _ in range(count))
        if flexible:
            reader.skip_tags("a partitions entry")
    last_update_ms = reader.int64("the last update time")
    start_ms = reader.int64("the start time")
    tags = reader.skip_tags("the value") if flexible else {}
    reader.end()

    def tagged(tag: int, default: int) -> int:
        raw = tags.get(tag)
        if raw is None:
            return default
        if len(raw) not in (2, 8):
            raise CorruptRecordError(f"{_WHAT_VALUE}: tag {tag} has {len(raw)} bytes")
        return int.from_bytes(raw, "big", signed=True)

    return TxnMetadata(
        transactional_id,
        producer_id,
        producer_epoch=epoch,
        last_producer_epoch=NO_PRODUCER_EPOCH,
        prev_producer_id=tagged(_TAG_PREVIOUS_PRODUCER_ID, -1),
        next_producer_id=tagged(_TAG_NEXT_PRODUCER_ID, -1),
        timeout_ms=timeout_ms,
        state=state,
        partitions=frozenset() if state is TxnState.EMPTY else frozenset(partitions),
        start_ms=start_ms,
        last_update_ms=last_update_ms,
        transaction_version=tagged(_TAG_CLIENT_TRANSACTION_VERSION, 0),
    )
