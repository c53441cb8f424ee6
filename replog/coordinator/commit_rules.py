"""What the group coordinator accepts: group ids, commits, and what a failed append of a
commit means to the committer.

Rules (Kafka's group coordinator; a group with members is fenced by its classic group instead,
`ClassicGroupCoordinator.commit_error`):
- A group id must not be empty (INVALID_GROUP_ID, for FindCoordinator, OffsetCommit and
  OffsetFetch alike) and must fit a Kafka string (32767 UTF-8 bytes). Differs from Kafka, on
  purpose: Kafka refuses the empty group id elsewhere but accepts it for OffsetCommit and
  OffsetFetch (backward compatibility with clients that committed under ""); replog's API is
  its own gRPC service, whose client never sends an empty group id, so it refuses it for all
  three.
- Per partition of a commit, in Kafka's order: a topic-partition missing from the metadata
  image is UNKNOWN_TOPIC_OR_PARTITION; then the membership: generation -1 and member "" (a
  commit from outside any group generation, as an admin or a consumer with `assign` sends)
  are accepted; a generation >= 0 is ILLEGAL_GENERATION (no such generation exists) and
  a member id with generation -1 is UNKNOWN_MEMBER_ID; then metadata longer than
  `offset.metadata.max.bytes` (counted as Kafka counts it: Java string length, UTF-16 code
  units) is OFFSET_METADATA_TOO_LARGE. The other partitions of the commit go on.
- A failed append of a commit's batch, as Kafka's coordinator maps it: UNKNOWN_TOPIC_OR_PARTITION,
  NOT_ENOUGH_REPLICAS and NOT_ENOUGH_REPLICAS_AFTER_APPEND are COORDINATOR_NOT_AVAILABLE;
  NOT_LEADER_OR_FOLLOWER and KAFKA_STORAGE_ERROR are NOT_COORDINATOR; a batch too large
  (MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, INVALID_FETCH_SIZE) is INVALID_COMMIT_OFFSET_SIZE;
  anything else (REQUEST_TIMED_OUT) keeps its class. Every message names the group and keeps
  the original cause.
- A failed append of group records (`group_append_error`, answered to JoinGroup, SyncGroup,
  LeaveGroup, ConsumerGroupHeartbeat): as a commit's, but REQUEST_TIMED_OUT is
  COORDINATOR_NOT_AVAILABLE and a batch too large UNKNOWN_SERVER_ERROR, as Kafka's coordinator
  maps them (its clients retry the first; REQUEST_TIMED_OUT is no error these requests know,
  and Kafka's consumers fail on it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from replog.coordinator.messages import CommitEntry
from replog.coordinator.offsets_records import STRING_BYTES_MAX
from replog.errors import (
    CoordinatorNotAvailableError,
    IllegalGenerationError,
    InvalidCommitOffsetSizeError,
    InvalidFetchSizeError,
    InvalidGroupIdError,
    KafkaError,
    KafkaStorageError,
    MessageSizeTooLargeError,
    NotCoordinatorError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetMetadataTooLargeError,
    RecordBatchTooLargeError,
    RequestTimedOutError,
    UnknownMemberIdError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)

OFFSET_METADATA_MAX_BYTES_DEFAULT = 4096  # offset.metadata.max.bytes
NO_GENERATION = -1
NO_MEMBER = ""


def group_id_problem(group_id: str) -> KafkaError | None:
    """INVALID_GROUP_ID naming the problem, or None for a usable group id."""
    if not group_id:
        return InvalidGroupIdError("the group id is empty: set group.id to commit or fetch offsets")
    size = len(group_id.encode("utf-8"))
    if size > STRING_BYTES_MAX:
        return InvalidGroupIdError(
            f"the group id is {size} UTF-8 bytes long; at most {STRING_BYTES_MAX} are allowed"
        )
    return None


def membership_error(group_id: str, generation_id: int, member_id: str) -> KafkaError | None:
    """The error of a commit's generation and member, None when they are accepted."""
    if generation_id >= 0:
        return IllegalGenerationError(
            f"group {group_id!r} has no generation {generation_id}: it has no members; join it, "
            f"or commit with generation {NO_GENERATION} and an empty member id"
        )
    if member_id != NO_MEMBER:
        return UnknownMemberIdError(
            f"group {group_id!r} has no member {member_id!r}: it has no members; join it, or "
            "commit with an empty member id"
        )
    return None


def java_string_length(text: str) -> int:
    """`String.length()` in Java: UTF-16 code units (a character outside the BMP counts 2)."""
    return len(text.encode("utf-16-le")) // 2


def metadata_error(where: str, metadata: str, max_bytes: int) -> KafkaError | None:
    length = java_string_length(metadata)
    if length > max_bytes:
        return OffsetMetadataTooLargeError(
            f"{where}: the commit's metadata is {length} characters long; "
            f"offset.metadata.max.bytes is {max_bytes}"
        )
    size = len(metadata.encode("utf-8"))
    if size > STRING_BYTES_MAX:
        return OffsetMetadataTooLargeError(
            f"{where}: the commit's metadata is {size} UTF-8 bytes long; a record holds at "
            f"most {STRING_BYTES_MAX}"
        )
    return None


def commit_errors(
    group_id: str,
    generation_id: int,
    member_id: str,
    entries: Sequence[CommitEntry],
    *,
    partition_exists: Callable[[str, int], bool],
    metadata_max_bytes: int = OFFSET_METADATA_MAX_BYTES_DEFAULT,
    membership: Callable[[], KafkaError | None] | None = None,
) -> dict[int, KafkaError]:
    """Index -> error of each entry the commit refuses (module docstring for the order).
    `membership` decides the generation and member (a group with members:
    `ClassicGroupCoordinator.commit_error`); by default `membership_error`."""
    if membership is None:
        found = membership_error(group_id, generation_id, member_id)
    else:
        found = membership()
    refused: dict[int, KafkaError] = {}
    for index, entry in enumerate(entries):
        where = f"group {group_id!r}, {entry.topic}-{entry.partition}"
        if entry.partition < 0 or not partition_exists(entry.topic, entry.partition):
            refused[index] = UnknownTopicOrPartitionError(
                f"{where}: no such topic-partition in the cluster's metadata"
            )
            continue
        if found is not None:
            refused[index] = type(found)(f"{entry.topic}-{entry.partition}: {found}")
            continue
        error = metadata_error(where, entry.metadata, metadata_max_bytes)
        if error is not None:
            refused[index] = error
    return refused


def append_error(error: KafkaError, where: str) -> KafkaError:
    """What a failed append of a commit means to the committer (module docstring)."""
    if isinstance(
        error,
        UnknownTopicOrPartitionError | NotEnoughReplicasError | NotEnoughReplicasAfterAppendError,
    ):
        return CoordinatorNotAvailableError(
            f"{where}: the commit could not be written: {error.error_name}: {error}"
        )
    if isinstance(error, NotLeaderOrFollowerError | KafkaStorageError):
        return NotCoordinatorError(
            f"{where}: this broker is no longer the coordinator: {error.error_name}: {error}"
        )
    if isinstance(
        error, MessageSizeTooLargeError | RecordBatchTooLargeError | InvalidFetchSizeError
    ):
        return InvalidCommitOffsetSizeError(
            f"{where}: the commit is too large for __consumer_offsets: {error.error_name}: {error}"
        )
    return type(error)(f"{where}: the commit could not be written: {error}")


def group_append_error(error: KafkaError, where: str) -> KafkaError:
    """What a failed append of group records means to the requests they answer (module
    docstring)."""
    if isinstance(error, RequestTimedOutError):
        return CoordinatorNotAvailableError(
            f"{where}: the group records were not replicated in time: {error.error_name}: {error}"
        )
    if isinstance(
        error, MessageSizeTooLargeError | RecordBatchTooLargeError | InvalidFetchSizeError
    ):
        return UnknownServerError(
            f"{where}: the group records are too large for __consumer_offsets: "
            f"{error.error_name}: {error}"
        )
    return append_error(error, where)
