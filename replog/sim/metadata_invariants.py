"""What must hold of the committed metadata log's partition records (`MetadataChecker`), checked
by the runner on the longest committed metadata log seen; a break is `InvariantViolation`.

Rules (KRaft's controller, docs/controller.md "Stepped writes"), record by record as the log
is replayed:
- Leader epochs: no two committed records give one partition (by topic id) two different
  leaders at the same leader epoch; its leader epoch and partition epoch never decrease.
- Choices: no fenced or unregistered broker (as the records before it left the registrations)
  becomes leader or joins an ISR, a new partition's included; a leader change that is neither
  an unclean election (leader recovery state RECOVERING) nor the completion of a reassignment
  (whose AlterPartition may add the new leader to the ISR first) picks a member of the ISR
  the partition had just before, or of its ELR (KIP-966: once the ISR empties, which the
  same record may do).
- Shape, after every batch that changes state: every partition has an ISR within its
  replicas, empty only with leader -1 (KIP-966: the runs finalize
  `eligible.leader.replicas.version`), an ELR within the replicas and outside the ISR, a
  last-known ELR within the replicas, its leader in the ISR or -1, no repeats, adding and
  removing replicas disjoint and
  among the replicas; no unregistered broker leads a partition or is in an ISR, except as the
  last ISR member of a partition whose leader is -1.
- Every committed batch replays onto the state before it; the image after each data batch goes
  to the `after_batch` hooks too (`sweep_progress`).
- Controllers (`check_controllers`): each controller's committed view equals the replay of
  the committed log at its last committed offset, which ends a committed batch: the active
  controller's state at its stable offset, a standby's latest state (so a controller that
  lost its leadership reverted every uncommitted write), a standby holding no state beyond
  its stable offset; no two controllers active in one quorum epoch.
The log is replayed once, batch by batch, from where the last call stopped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from uuid import UUID

from replog.quorum.controller.controller import QuorumController
from replog.quorum.metadata.delta import MetadataDelta
from replog.quorum.metadata.image import MetadataImage, MetadataProvenance
from replog.quorum.metadata.partition_registration import PartitionRegistration
from replog.quorum.metadata.record_codec import decode_record
from replog.quorum.metadata.records import (
    NO_LEADER,
    LeaderRecoveryState,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
)
from replog.record import RecordBatch
from replog.sim.committed_images import CommittedImages
from replog.sim.invariants import InvariantViolation

__all__ = ["MetadataChecker", "check_choices", "check_shapes", "partition_before"]


class MetadataChecker:
    """Replays the committed metadata log and checks its partition records (module docstring)."""

    def __init__(self) -> None:
        self._images = CommittedImages()
        self._leaders_at_epoch: dict[tuple[UUID, int, int], int] = {}
        self._epochs: dict[tuple[UUID, int], tuple[int, int]] = {}
        self.partition_records = 0
        self.controller_views = 0
        # Called with the image after each committed data batch (a checker of its own).
        self.after_batch: list[Callable[[MetadataImage], None]] = []
        # (topic, partition) of each partition a committed record left without a leader
        self.left_leaderless: set[tuple[str, int]] = set()

    @property
    def images(self) -> CommittedImages:
        """The images `follow` replayed, by batch end."""
        return self._images

    def follow(self, committed: bytes | bytearray) -> None:
        """Replay and check what is new in `committed`, the longest committed log seen."""
        self._images.follow(committed, self._replay_batch)

    def check_controllers(self, controllers: Iterable[tuple[int, QuorumController]]) -> None:
        """The controllers rule (module docstring) for `controllers`, (node id, controller)
        of each running node, against the log `follow` replayed."""
        active_in: dict[int, int] = {}
        replayed_end = self._images.end
        for node_id, controller in controllers:
            claim_epoch = controller.claim_epoch
            if claim_epoch is not None:
                other = active_in.setdefault(claim_epoch, node_id)
                if other != node_id:
                    raise InvariantViolation(
                        f"nodes {other} and {node_id} are both active controllers in quorum "
                        f"epoch {claim_epoch}"
                    )
            end = controller.last_committed_offset + 1
            if end > replayed_end:
                continue  # beyond what the run has seen committed
            if end not in self._images.by_end:
                raise InvariantViolation(
                    f"controller {node_id}'s committed offset {end - 1} is not the end of a "
                    "committed batch"
                )
            if controller.is_active:
                actual = controller.snapshot_records(controller.last_stable_offset)
            else:
                latest = controller.offset_control.registry.latest_offset()
                if latest != controller.last_stable_offset:
                    raise InvariantViolation(
                        f"standby controller {node_id} holds state beyond its stable offset "
                        f"{controller.last_stable_offset} (newest snapshot {latest})"
                    )
                actual = controller.snapshot_records()
            self.controller_views += 1
            if tuple(actual) != self._images.records_at(end):
                role = "active" if controller.is_active else "standby"
                raise InvariantViolation(
                    f"{role} controller {node_id}'s committed view at offset {end - 1} differs "
                    "from a replay of the committed metadata log"
                )

    def _replay_batch(
        self,
        image: MetadataImage,
        committed: bytes | bytearray,
        position: int,
        provenance: MetadataProvenance,
    ) -> MetadataImage:
        delta = MetadataDelta(image)
        changes_state = False
        try:
            for record in RecordBatch.parse(committed, position):
                assert record.value is not None
                metadata = decode_record(record.value)
                before = partition_before(delta, metadata)
                delta.replay(metadata, record.offset)
                changes_state = changes_state or not isinstance(metadata, NoOpRecord)
                if isinstance(metadata, PartitionRecord | PartitionChangeRecord):
                    after = delta.topic_deltas[metadata.topic_id].partition(metadata.partition_id)
                    assert after is not None
                    self.partition_records += 1
                    if after.leader == NO_LEADER and (before is None or before.leader != NO_LEADER):
                        topic = delta.topic_deltas[metadata.topic_id].name
                        self.left_leaderless.add((topic, metadata.partition_id))
                    self._check_epochs(metadata, after, record.offset)
                    check_choices(delta, metadata, before, after, record.offset)
        except InvariantViolation:
            raise
        except Exception as e:  # a committed batch that does not replay is the finding
            raise InvariantViolation(
                f"the committed metadata batch ending at {provenance.last_offset} does not "
                f"replay onto the committed state: {e!r}"
            ) from e
        image = delta.apply(provenance)
        if changes_state:
            check_shapes(image, provenance.last_offset)
        for hook in self.after_batch:
            hook(image)
        return image

    def _check_epochs(
        self,
        record: PartitionRecord | PartitionChangeRecord,
        after: PartitionRegistration,
        offset: int,
    ) -> None:
        key = (record.topic_id, record.partition_id)
        epochs = (after.leader_epoch, after.partition_epoch)
        before = self._epochs.get(key)
        if before is not None and (epochs[0] < before[0] or epochs[1] < before[1]):
            raise InvariantViolation(
                f"partition {key[0]}-{key[1]} at offset {offset}: (leader epoch, partition "
                f"epoch) went from {before} to {epochs}"
            )
        self._epochs[key] = epochs
        leader = self._leaders_at_epoch.setdefault((*key, after.leader_epoch), after.leader)
        if leader != after.leader:
            raise InvariantViolation(
                f"partition {key[0]}-{key[1]} has two leaders at leader epoch "
                f"{after.leader_epoch}: {leader} and, at offset {offset}, {after.leader}"
            )


def partition_before(delta: MetadataDelta, record: MetadataRecord) -> PartitionRegistration | None:
    """The partition a partition record is about to change, as the records replayed so far
    left it (None: another record, or a new partition)."""
    if not isinstance(record, PartitionRecord | PartitionChangeRecord):
        return None
    topic = delta.topic_deltas.get(record.topic_id)
    if topic is not None:
        return topic.partition(record.partition_id)
    base = delta.base.topics.by_id.get(record.topic_id)
    return None if base is None else base.partitions.get(record.partition_id)


def _fenced_or_gone(delta: MetadataDelta, broker_id: int) -> bool:
    """Whether `broker_id` is fenced or unregistered as the records replayed so far left it."""
    changes = delta.broker_changes
    registration = (
        changes[broker_id] if broker_id in changes else delta.base.cluster.brokers.get(broker_id)
    )
    return registration is None or registration.fenced


def check_choices(
    delta: MetadataDelta,
    record: PartitionRecord | PartitionChangeRecord,
    before: PartitionRegistration | None,
    after: PartitionRegistration,
    offset: int,
) -> None:
    """The choices rule (module docstring) for one committed partition record at `offset`."""
    where = f"partition {record.topic_id}-{record.partition_id} at offset {offset}"
    old_isr = () if before is None else before.isr
    for broker_id in after.isr:
        if broker_id not in old_isr and _fenced_or_gone(delta, broker_id):
            raise InvariantViolation(
                f"{where}: fenced or unregistered broker {broker_id} joined the ISR "
                f"({before} -> {after})"
            )
    leader = after.leader
    if leader == NO_LEADER or (before is not None and leader == before.leader):
        return
    if _fenced_or_gone(delta, leader):
        raise InvariantViolation(
            f"{where}: fenced or unregistered broker {leader} was elected leader "
            f"({before} -> {after})"
        )
    # Completing a reassignment may elect a replica the same AlterPartition added to the ISR
    # (its leader vouched for it): the ISR between the two is in no record.
    unclean = after.leader_recovery_state == LeaderRecoveryState.RECOVERING
    reassigned = before is not None and after.replicas != before.replicas
    # KIP-966: a member of the ELR is elected cleanly once the ISR empties, which may happen
    # in the same record (its last member leaves as it is fenced).
    from_elr = before is not None and leader in before.elr
    if before is not None and leader not in before.isr and not (unclean or reassigned or from_elr):
        raise InvariantViolation(
            f"{where}: broker {leader} was elected leader cleanly from outside the ISR "
            f"{before.isr} and the ELR {before.elr} ({before} -> {after})"
        )


def check_shapes(image: MetadataImage, last_offset: int) -> None:
    """The shape rule (module docstring) on the committed image ending at `last_offset`."""
    brokers = image.cluster.brokers
    for topic in image.topics.by_id.values():
        for partition_id, partition in topic.partitions.items():
            where = f"{topic.name}-{partition_id} in the committed state up to {last_offset}"
            problem = _malformed(partition)
            if problem is not None:
                raise InvariantViolation(f"{where}: {problem} ({partition})")
            if partition.leader != NO_LEADER and partition.leader not in brokers:
                raise InvariantViolation(
                    f"{where}: unregistered broker {partition.leader} leads it ({partition})"
                )
            for broker_id in partition.isr:
                if broker_id not in brokers and not (
                    partition.isr == (broker_id,) and partition.leader == NO_LEADER
                ):
                    raise InvariantViolation(
                        f"{where}: unregistered broker {broker_id} is in the ISR and is not "
                        f"its last member with leader -1 ({partition})"
                    )


def _malformed(partition: PartitionRegistration) -> str | None:
    """What breaks the shape every partition registration keeps, if anything."""
    replicas, isr = partition.replicas, partition.isr
    if not replicas or len(set(replicas)) != len(replicas):
        return "its replicas are empty or repeat a broker"
    if len(set(isr)) != len(isr) or not set(isr) <= set(replicas):
        return "its ISR repeats a broker or names one outside the replicas"
    if not isr and partition.leader != NO_LEADER:
        # KIP-966: the ISR empties only when no replica may lead (its last members shut
        # down uncleanly, or the ELR waits for one to come back).
        return "its ISR is empty while it has a leader"
    elr = partition.elr
    if len(set(elr)) != len(elr) or not set(elr) <= set(replicas) or set(elr) & set(isr):
        return "its ELR repeats a broker, names one outside the replicas or one in the ISR"
    if not set(partition.last_known_elr) <= set(replicas):
        return "its last-known ELR names a broker outside the replicas"
    if partition.leader != NO_LEADER and partition.leader not in isr:
        return "its leader is not in its ISR"
    adding, removing = set(partition.adding_replicas), set(partition.removing_replicas)
    if not (adding | removing) <= set(replicas) or adding & removing:
        return "its adding and removing replicas overlap or lie outside the replicas"
    return None
