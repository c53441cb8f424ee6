"""Translation between the ReplicaFetch stream's protobuf fetch messages and
`replog.replication.messages`, plus the error and isolation-level readings the broker shares
with its Kafka handlers.

Both directions: a follower encodes its fetch (`fetch_request_to_proto`) and decodes the
answer (`fetch_response_from_wire`); the leader does the opposite. No protocol decision is made
here.

Rules:
- The wire groups partitions by topic (in the order topics first appear); the dataclasses hold
  one flat entry per partition. Decoding keeps the wire's order, so encoding what was decoded
  gives the same message back.
- Leader epochs that may be absent are proto3 `optional`: absent decodes as -1, and -1 is
  encoded as absent. A topic id is 16 raw bytes; empty is "none" (not checked).
- Errors cross the wire as `ErrorStatus` (Kafka's code and name, and the message naming the
  topic-partition and offset); no error is an unset field or code 0. Decoding gives the
  `replog.errors` class registered for the code (`error_for_code`), so fetchers raise the
  leader's types; a code not registered is UnknownServerError, whose message names the code
  and the RPC and peer when the caller passes them as `where` (`error_from_proto`).
- A request the dataclasses cannot even hold (a topic id that is not 16 bytes, an unknown
  isolation level) is `InvalidRequestError` naming the field and the value; the leader ends
  the stream with gRPC INVALID_ARGUMENT.
- Record bytes pass through as they are, never decoded. A FetchResponse is read and written
  as serialized bytes (`fetch_response_to_wire` / `fetch_response_from_wire`): with 64 KiB of
  records or more (`SPLIT_MIN_BYTES`) the records are joined in or split off by `record_wire`,
  copied once on the way out, instead of protobuf's two or three copies; below that, protobuf
  handles them whole. The ReplicaFetch service writes them through `FetchResponseWire`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar, cast
from uuid import UUID

from google.protobuf.message import Message

from replog.common.ids import UUID_BYTES
from replog.errors import (
    InvalidRequestError,
    KafkaError,
    UnknownServerError,
    error_for_code,
)
from replog.pb import broker_pb2 as pb
from replog.pb import common_pb2
from replog.record.batch import Buffer
from replog.replication import messages as m
from replog.wire.record_wire import records_pieces, split_records

NONE = -1

T = TypeVar("T")
M = TypeVar("M", bound=Message)

# Where the records sit (`record_wire` paths): FetchResponse.topics -> partitions -> records.
FETCH_RECORDS_PATH = (1, 3, 8)
# Messages with this many bytes of records or more have them joined in or split off by
# `record_wire`; below, protobuf's two copies cost less than the walk (16 KiB: 3.4 µs through
# protobuf, 8.4 µs joined; 256 KiB: 22 µs through protobuf, 15 µs joined).
SPLIT_MIN_BYTES = 64 * 1024


# --- common -------------------------------------------------------------------------------------


def error_to_proto(error: KafkaError | None) -> common_pb2.ErrorStatus | None:
    """The wire form of an error; None for no error."""
    if error is None:
        return None
    return common_pb2.ErrorStatus(code=error.code, error_name=error.error_name, message=str(error))


def error_from_proto(
    holder: Any, where: str = "", topic: str | None = None, partition: int = NONE
) -> KafkaError | None:
    """The error a response entry carries (its `error` field), None when absent or code 0.

    A code this process does not know (a newer or buggy peer) is UnknownServerError, as in
    Kafka's client; given `where` (the RPC and its peer, as a follower's fetch does), its message
    names that, the topic-partition and the code with the name the peer gave it. Without, it
    is `error_for_code`'s, the peer's message as is (what the Spark source's partition
    fetcher, which reads the wire form itself, gives too).
    """
    status: common_pb2.ErrorStatus = holder.error
    if not holder.HasField("error") or status.code == 0:
        return None
    error = error_for_code(status.code, status.message)
    if where and status.code != UnknownServerError.code and type(error) is UnknownServerError:
        about = f"{where}: "
        if topic is not None:
            about += f"{topic}-{partition}: "
        name = status.error_name or "no name"
        return UnknownServerError(
            f"{about}unknown error code {status.code} ({name}): {status.message or '-'}"
        )
    return error


def topic_id_from_proto(value: bytes, where: str) -> UUID | None:
    if not value:
        return None
    if len(value) != UUID_BYTES:
        raise InvalidRequestError(
            f"{where}: topic_id must be {UUID_BYTES} bytes or empty, got {len(value)}"
        )
    return UUID(bytes=value)


def _topic_id_bytes(value: UUID | None) -> bytes:
    return b"" if value is None else value.bytes


def _optional_epoch(holder: Any, name: str) -> int:
    """An `optional int32` leader epoch: absent is -1."""
    if holder.HasField(name):
        return int(getattr(holder, name))
    return m.NO_LEADER_EPOCH


def _set_optional_epoch(message: Any, name: str, value: int) -> None:
    if value != m.NO_LEADER_EPOCH:
        setattr(message, name, value)


def _leader_to_proto(leader: m.LeaderIdAndEpoch | None) -> pb.LeaderIdAndEpoch | None:
    if leader is None:
        return None
    return pb.LeaderIdAndEpoch(leader_id=leader.leader_id, leader_epoch=leader.leader_epoch)


def _leader_from_proto(holder: Any) -> m.LeaderIdAndEpoch | None:
    if not holder.HasField("current_leader"):
        return None
    leader: pb.LeaderIdAndEpoch = holder.current_leader
    return m.LeaderIdAndEpoch(leader.leader_id, leader.leader_epoch)


def isolation_level_from_proto(value: int, where: str) -> m.IsolationLevel:
    try:
        return m.IsolationLevel(value)
    except ValueError:
        raise InvalidRequestError(
            f"{where}: isolation_level {value} is neither 0 (READ_UNCOMMITTED) nor "
            "1 (READ_COMMITTED)"
        ) from None


def _add_grouped(
    topics: Any,
    items: Iterable[T],
    key: Callable[[T], object],
    new_topic: Callable[[Any, T], Any],
    add_partition: Callable[[Any, T], None],
) -> None:
    """Fill the repeated `topics` field in place, one topic per `key` in first-seen order.

    `add_partition` is called in the order the partitions will be serialized (topic by topic),
    not in `items`' order: the record-carrying messages collect their records' bytes in those
    calls for `record_wire` to join in, in serialized order. (Called in item order, it would
    give interleaved topics' records, a-0 b-0 a-1 with 64 KiB or more, to each other's
    partitions, on produce and on follower fetches.)

    For messages that carry record bytes: protobuf copies a sub-message handed to a parent's
    constructor, so building bottom-up copies each batch once per nesting level (a 1 MiB fetch
    answer cost three extra copies). Adding in place copies the bytes exactly once.
    """
    groups: dict[object, list[T]] = {}
    for item in items:
        group_key = key(item)
        group = groups.get(group_key)
        if group is None:
            groups[group_key] = [item]
        else:
            group.append(item)
    for group in groups.values():
        topic = new_topic(topics, group[0])
        for item in group:
            add_partition(topic.partitions, item)


def _topic(item: Any) -> object:
    return item.topic


def _topic_and_id(item: Any) -> object:
    return (item.topic, item.topic_id)


def _new_topic(topics: Any, item: Any) -> Any:
    return topics.add(topic=item.topic)


def _new_topic_with_id(topics: Any, item: Any) -> Any:
    return topics.add(topic=item.topic, topic_id=_topic_id_bytes(item.topic_id))


def _appending(encode: Callable[[T], Any]) -> Callable[[Any, T], None]:
    """An `add_partition` for `_add_grouped` that appends the message `encode` builds."""

    def add_partition(partitions: Any, item: T) -> None:
        partitions.append(encode(item))

    return add_partition


def _add_fetch_partition(partitions: Any, partition: m.FetchPartition) -> None:
    # Built in place, not built and appended (which copies it): a follower's request may
    # carry a thousand entries (fetch_session, SESSION_ADDS_PER_REQUEST), 28% less CPU.
    message = partitions.add(
        partition=partition.partition,
        fetch_offset=partition.fetch_offset,
        log_start_offset=partition.log_start_offset,
        partition_max_bytes=partition.partition_max_bytes,
    )
    if partition.current_leader_epoch != m.NO_LEADER_EPOCH:
        message.current_leader_epoch = partition.current_leader_epoch
    if partition.last_fetched_epoch != m.NO_LEADER_EPOCH:
        message.last_fetched_epoch = partition.last_fetched_epoch


def fetch_request_to_proto(request: m.FetchRequest) -> pb.FetchRequest:
    message = pb.FetchRequest(
        replica_id=request.replica_id,
        replica_epoch=request.replica_epoch,
        max_wait_ms=request.max_wait_ms,
        min_bytes=request.min_bytes,
        max_bytes=request.max_bytes,
        isolation_level=int(request.isolation_level),
    )
    _add_grouped(
        message.topics,
        request.partitions,
        _topic_and_id,
        _new_topic_with_id,
        _add_fetch_partition,
    )
    if request.session_epoch != m.NO_SESSION:
        message.session_epoch = request.session_epoch
    forgotten: dict[str, list[int]] = {}
    for topic, partition in request.forgotten:
        forgotten.setdefault(topic, []).append(partition)
    for topic, partitions in forgotten.items():
        message.forgotten_topics.add(topic=topic, partitions=partitions)
    return message


def fetch_request_from_proto(
    message: pb.FetchRequest, partitions: Iterable[m.FetchPartition] | None = None
) -> m.FetchRequest:
    """The request `message` holds; `partitions`: its entries, already decoded by the caller
    (`fetch_partitions_from_proto`, a slice at a time: a full fetch may hold thousands)."""
    return m.FetchRequest(
        partitions=tuple(
            fetch_partitions_from_proto(message) if partitions is None else partitions
        ),
        replica_id=message.replica_id,
        replica_epoch=message.replica_epoch,
        max_wait_ms=message.max_wait_ms,
        min_bytes=message.min_bytes,
        max_bytes=message.max_bytes,
        isolation_level=isolation_level_from_proto(message.isolation_level, "Fetch"),
        session_epoch=_session_epoch_from_proto(message),
        forgotten=tuple(
            (topic.topic, partition)
            for topic in message.forgotten_topics
            for partition in topic.partitions
        ),
    )


def fetch_partitions_from_proto(message: pb.FetchRequest) -> Iterator[m.FetchPartition]:
    """The entries of a fetch request, one at a time, in the wire's order."""
    for topic in message.topics:
        topic_id = topic_id_from_proto(topic.topic_id, f"Fetch of topic {topic.topic!r}")
        for p in topic.partitions:
            yield m.FetchPartition(
                topic=topic.topic,
                partition=p.partition,
                fetch_offset=p.fetch_offset,
                partition_max_bytes=p.partition_max_bytes,
                current_leader_epoch=_optional_epoch(p, "current_leader_epoch"),
                last_fetched_epoch=_optional_epoch(p, "last_fetched_epoch"),
                log_start_offset=p.log_start_offset,
                topic_id=topic_id,
            )


def _session_epoch_from_proto(message: pb.FetchRequest) -> int:
    """The session epoch (NO_SESSION when absent); forgotten partitions need an incremental
    fetch (epoch > 0): a full or sessionless fetch has nothing to forget."""
    epoch: int = m.NO_SESSION
    if message.HasField("session_epoch"):
        epoch = message.session_epoch
        if epoch < 0:
            raise InvalidRequestError(
                f"Fetch: session_epoch {epoch}: a fetch session's epoch is 0 (full) or more; "
                "leave it out for a fetch without a session"
            )
    if message.forgotten_topics and epoch <= 0:
        raise InvalidRequestError(
            "Fetch: forgotten_topics need an incremental fetch (session_epoch > 0)"
        )
    return epoch


def _add_fetch_result(
    partitions: Any,
    result: m.FetchPartitionResult,
    records: list[Buffer | m.RecordsRegion] | None,
) -> None:
    """Add `result` to `partitions`: its records too, or (given `records`) into that list
    (its region, if its records were left in the file)."""
    added = partitions.add(
        partition=result.partition,
        high_watermark=result.high_watermark,
        last_stable_offset=result.last_stable_offset,
        log_start_offset=result.log_start_offset,
        log_end_offset=result.log_end_offset,
    )
    if records is None:
        added.records = result.records
    else:
        records.append(result.records if result.region is None else result.region)
    if result.error is not None:
        added.error.CopyFrom(error_to_proto(result.error))
    if result.diverging_epoch is not None:
        added.diverging_epoch.leader_epoch = result.diverging_epoch.leader_epoch
        added.diverging_epoch.end_offset = result.diverging_epoch.end_offset
    leader = _leader_to_proto(result.current_leader)
    if leader is not None:
        added.current_leader.CopyFrom(leader)


def fetch_response_to_wire(response: m.FetchResponse) -> bytes:
    """The serialized FetchResponse; records of `SPLIT_MIN_BYTES` or more are joined in by
    `record_wire` rather than copied through protobuf (module docstring)."""
    return b"".join(fetch_response_pieces(response))  # one bytes piece: itself, not a copy


def fetch_response_pieces(response: m.FetchResponse) -> list[Buffer]:
    """`fetch_response_to_wire`'s bytes in pieces that joined are them: records of
    `SPLIT_MIN_BYTES` or more are pieces of their own, not copied (for a writer that sends
    them apart: `framed_wire.write_frame`). Raises ValueError for records left in a file
    (`fetch_response_parts` is for a writer that sends those)."""
    for partition in response.partitions:
        if partition.region is not None:
            raise ValueError(f"records left in a file ({partition.region!r}): not bytes to write")
    return cast("list[Buffer]", fetch_response_parts(response))  # no region: buffers only


def fetch_response_parts(response: m.FetchResponse) -> list[Buffer | m.RecordsRegion]:
    """`fetch_response_pieces`, where records the leader left in its file
    (`FetchPartitionResult.region`) are parts of their own, for a writer that sends them from
    there with `sendfile`."""
    message = pb.FetchResponse()
    partitions = response.partitions
    split = sum(p.records_size for p in partitions) >= SPLIT_MIN_BYTES or any(
        p.region is not None for p in partitions
    )
    records: list[Buffer | m.RecordsRegion] | None = [] if split else None
    _add_grouped(
        message.topics,
        response.partitions,
        _topic_and_id,
        _new_topic_with_id,
        lambda partitions, result: _add_fetch_result(partitions, result, records),
    )
    serialized: bytes = message.SerializeToString()
    if records is None:
        return [serialized]
    return records_pieces(serialized, FETCH_RECORDS_PATH, records)


class FetchResponseWire:
    """FetchResponse as the Broker service writes it (`fetch_response_to_wire`), in the shape
    `tolerant_service.add_tolerant_service` takes a response type in."""

    DESCRIPTOR = pb.FetchResponse.DESCRIPTOR
    SerializeToString = staticmethod(fetch_response_to_wire)


def fetch_response_from_wire(data: bytes, where: str = "") -> m.FetchResponse:
    """The FetchResponse serialized in `data`; from `SPLIT_MIN_BYTES` on, its records are
    split off by `record_wire` and copied once each (out of the view, into `bytes`). Raises
    protobuf's DecodeError for bytes that are not one."""
    message, records = _parse_split(pb.FetchResponse, data, FETCH_RECORDS_PATH)
    results: list[m.FetchPartitionResult] = []
    for topic in message.topics:
        topic_id = topic_id_from_proto(topic.topic_id, f"Fetch response of topic {topic.topic!r}")
        for p in topic.partitions:
            diverging = None
            if p.HasField("diverging_epoch"):
                diverging = m.EpochEndOffsetResult(
                    p.diverging_epoch.leader_epoch, p.diverging_epoch.end_offset
                )
            results.append(
                m.FetchPartitionResult(
                    topic=topic.topic,
                    partition=p.partition,
                    error=error_from_proto(p, where, topic.topic, p.partition),
                    high_watermark=p.high_watermark,
                    last_stable_offset=p.last_stable_offset,
                    log_start_offset=p.log_start_offset,
                    diverging_epoch=diverging,
                    current_leader=_leader_from_proto(p),
                    records=bytes(next(records)),  # a view's copy; `bytes` as it is
                    topic_id=topic_id,
                    log_end_offset=p.log_end_offset,
                )
            )
    return m.FetchResponse(tuple(results))


def _records_bytes(entries: Iterable[Any]) -> int:
    return sum(len(entry.records) for entry in entries)


def _parse_split(
    message_type: type[M], data: bytes, path: tuple[int, ...]
) -> tuple[M, Iterator[bytes | memoryview]]:
    """`data` parsed as `message_type` (its topics' partitions hold the records), and each
    partition's records in wire order: from `SPLIT_MIN_BYTES` on split off along `path` as
    views of `data`, below read from the message protobuf parsed whole."""
    if len(data) < SPLIT_MIN_BYTES:
        message: Any = message_type.FromString(data)
        return message, (p.records for topic in message.topics for p in topic.partitions)
    skeleton, records = split_records(data, path)
    return message_type.FromString(skeleton), iter(records)
