"""The group coordinator's requests and answers, as the coordinator sees them.

One frozen dataclass per group request and answer, flattened to one entry per partition
(Kafka's messages group partitions by topic; `replog/server/kafka/kafka_group_apis.py` and the
client's `replog/wire/kafka_coordinator_client.py` translate). Errors are
`replog.errors.KafkaError` instances naming what they are about; None means success. -1 means
"none" for offsets, leader epochs, generations and node ids.
"""

from __future__ import annotations

from dataclasses import dataclass

from replog.common.offsets import NO_LEADER_EPOCH as NO_LEADER_EPOCH
from replog.common.offsets import NO_OFFSET as NO_OFFSET
from replog.errors import KafkaError


@dataclass(frozen=True, slots=True)
class FindCoordinatorResponse:
    error: KafkaError | None = None
    node_id: int = -1
    host: str = ""
    port: int = -1


@dataclass(frozen=True, slots=True)
class CommitEntry:
    """One partition's offset in a commit: the next offset to read."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str = ""


@dataclass(frozen=True, slots=True)
class Committer:
    """Who sends a commit: its client.id, a random id per consumer instance, and the host the
    coordinator saw the commit come from ("": not known)."""

    client_id: str = ""
    instance_id: str = ""
    host: str = ""

    def describe(self) -> str:
        where = f" at {self.host}" if self.host else ""
        return f"client {self.client_id!r} (instance {self.instance_id}){where}"


NO_COMMITTER = Committer()  # a commit that does not say who sends it


@dataclass(frozen=True, slots=True)
class SharedCommit:
    """Another consumer instance that committed for the same group and some of the same
    partitions `last_commit_age_ms` before this commit (`shared_commits`)."""

    other: Committer
    partitions: tuple[tuple[str, int], ...]
    last_commit_age_ms: int

    def partition_names(self) -> str:
        return ", ".join(f"{topic}-{partition}" for topic, partition in self.partitions)


# What both sides of a shared commit are told it means, and what to do.
SHARED_COMMIT_ADVICE = (
    "because they commit from outside the group's membership (assign(), or a subscription "
    "without the group protocol): give each consumer its own partitions, or subscribe with the "
    "group.id so that the group splits them"
)


@dataclass(frozen=True, slots=True)
class OffsetCommitRequest:
    group_id: str
    entries: tuple[CommitEntry, ...]
    generation_id: int = -1
    member_id: str = ""
    committer: Committer = NO_COMMITTER
    group_instance_id: str | None = None  # a static member's group.instance.id
    # The OffsetCommit version of a Kafka client (None: replog's gRPC): a consumer-protocol
    # member must commit with v9+, which carries its member epoch in `generation_id`.
    api_version: int | None = None


@dataclass(frozen=True, slots=True)
class TxnOffsetCommitRequest:
    """Offsets committed inside a producer's transaction (Kafka's TxnOffsetCommit): written
    in its producer id and epoch, applied when the transaction commits."""

    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    entries: tuple[CommitEntry, ...]
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
    api_version: int | None = None


@dataclass(frozen=True, slots=True)
class OffsetCommitPartitionResult:
    topic: str
    partition: int
    error: KafkaError | None = None


@dataclass(frozen=True, slots=True)
class OffsetCommitResponse:
    error: KafkaError | None = None  # request-level: then nothing was committed
    partitions: tuple[OffsetCommitPartitionResult, ...] = ()
    shared: tuple[SharedCommit, ...] = ()  # other consumers committing the same partitions


@dataclass(frozen=True, slots=True)
class OffsetFetchRequest:
    group_id: str
    partitions: tuple[tuple[str, int], ...] | None  # None: every partition the group committed
    # OffsetFetch v9+: a consumer-protocol member's id and epoch (None, -1: not a member).
    member_id: str | None = None
    member_epoch: int = -1
    # UNSTABLE_OFFSET_COMMIT for a partition an open transaction commits (v7+).
    require_stable: bool = False


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    topic: str
    partition: int
    offset: int = NO_OFFSET  # -1: nothing committed
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str = ""
    error: KafkaError | None = None


@dataclass(frozen=True, slots=True)
class OffsetFetchResponse:
    error: KafkaError | None = None
    partitions: tuple[FetchedOffset, ...] = ()


@dataclass(frozen=True, slots=True)
class OffsetDeleteRequest:
    group_id: str
    partitions: tuple[tuple[str, int], ...]  # (topic, partition), each an existing partition


@dataclass(frozen=True, slots=True)
class OffsetDeleteResponse:
    error: KafkaError | None = None  # request-level: then nothing was deleted
    # Each partition asked for: None (its offset, if any, is deleted) or why it is kept.
    partitions: tuple[OffsetCommitPartitionResult, ...] = ()
