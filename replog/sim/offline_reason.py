"""Why a data partition is left without a leader once the faults stop, read from the committed
metadata log (`offline_reasons`); the run's liveness check takes KIP-966's reason only.

Rules:
- KIP-966's reason: in the committed state the partition has no leader, an empty ISR and an
  empty ELR, and a non-empty last-known ELR each of whose members was put there by its own
  return after an unclean shutdown: the record adding it to the last-known ELR comes before
  that broker's next registration in the log, and the incarnation registering there started
  without proof of a clean shutdown (`unclean_starts`: the simulator's record of each start).
  Only an operator's unclean election may then lead it (every replica known to hold its
  commits may have lost what it had not synced).
- Any other leaderless partition is stuck, and its reason says what the log shows instead.
- The whole committed log is read once per call: it is asked only at the end of a run.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from uuid import UUID

from replog.quorum.metadata.partition_registration import PartitionRegistration
from replog.quorum.metadata.record_codec import decode_record
from replog.quorum.metadata.records import (
    NO_LEADER,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from replog.record import RecordBatch
from replog.record.header import iter_frames, read_header

__all__ = ["KIP966", "offline_reasons"]

KIP966 = "offline by KIP-966"

_Key = tuple[UUID, int]


class _Replay:
    """The partitions of the committed log and, per partition, which last-known ELR members
    are proven to have left by an unclean shutdown (module Rules)."""

    def __init__(self, unclean_starts: Collection[UUID]) -> None:
        self.unclean_starts = unclean_starts
        self.topic_ids: dict[str, UUID] = {}
        self.partitions: dict[_Key, PartitionRegistration] = {}
        self.awaiting: dict[int, set[_Key]] = {}  # broker -> partitions awaiting its registration
        self.proven: dict[_Key, set[int]] = {}
        self.disproven: dict[_Key, dict[int, str]] = {}

    def record(self, record: object) -> None:
        if isinstance(record, TopicRecord):
            self.topic_ids[record.name] = record.topic_id
        elif isinstance(record, PartitionRecord):
            key = (record.topic_id, record.partition_id)
            self.partitions[key] = PartitionRegistration.from_record(record)
            self.proven[key], self.disproven[key] = set(), {}
        elif isinstance(record, PartitionChangeRecord):
            key = (record.topic_id, record.partition_id)
            before = self.partitions[key]
            after = self.partitions[key] = before.merge(record)
            for broker in set(after.last_known_elr) - set(before.last_known_elr):
                self.awaiting.setdefault(broker, set()).add(key)
            for broker in set(before.last_known_elr) - set(after.last_known_elr):
                self.proven[key].discard(broker)
                self.disproven[key].pop(broker, None)
        elif isinstance(record, RegisterBrokerRecord):
            for key in self.awaiting.pop(record.broker_id, ()):
                if record.incarnation_id in self.unclean_starts:
                    self.proven[key].add(record.broker_id)
                    self.disproven[key].pop(record.broker_id, None)
                else:
                    self.proven[key].discard(record.broker_id)
                    self.disproven[key][record.broker_id] = (
                        f"broker {record.broker_id} entered its last-known ELR as incarnation "
                        f"{record.incarnation_id} registered, which started after a clean shutdown"
                    )

    def reason(self, key: _Key) -> str:
        partition = self.partitions[key]
        if partition.leader != NO_LEADER:
            return f"led by {partition.leader} in the committed state"
        if partition.isr or partition.elr:
            return (
                f"ISR {list(partition.isr)} and ELR {list(partition.elr)} in the committed "
                "state: a clean election may lead it"
            )
        if not partition.last_known_elr:
            return "no ISR, ELR or last-known ELR: no unclean shutdown took its replicas out"
        for broker in partition.last_known_elr:
            if broker in self.disproven[key]:
                return self.disproven[key][broker]
            if broker not in self.proven[key]:
                return (
                    f"broker {broker} is in its last-known ELR, but no registration of it "
                    "followed in the committed log"
                )
        return KIP966


def offline_reasons(
    committed: bytes | bytearray,
    partitions: Iterable[tuple[str, int]],
    unclean_starts: Collection[UUID],
) -> dict[tuple[str, int], str]:
    """For each (topic, partition) of `partitions`, `KIP966` when the committed metadata log
    `committed` shows KIP-966's reason for it to be offline (module Rules), else what it shows
    instead. `unclean_starts`: the incarnation ids that started without a clean-shutdown
    marker naming their predecessor's broker epoch."""
    replay = _Replay(unclean_starts)
    for position, _ in iter_frames(committed):
        if read_header(committed, position).is_control:
            continue
        for record in RecordBatch.parse(committed, position):
            assert record.value is not None
            replay.record(decode_record(record.value))
    reasons: dict[tuple[str, int], str] = {}
    for topic, index in partitions:
        topic_id = replay.topic_ids.get(topic)
        key = None if topic_id is None else (topic_id, index)
        if key is None or key not in replay.partitions:
            reasons[(topic, index)] = "absent from the committed state"
        else:
            reasons[(topic, index)] = replay.reason(key)
    return reasons
