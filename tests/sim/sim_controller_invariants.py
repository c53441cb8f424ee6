"""The controller simulation's checker: Raft's invariants, plus the metadata layer's.

`ControllerChecker` extends the Raft `InvariantChecker` (whose committed-history table it
reuses) with an oracle: every committed batch, as it enters the table, is decoded and replayed
with the broker-side `MetadataDelta` into a `MetadataImage`, nobody on the controller side
having written that code. One image is kept per committed batch end. Properties, checked after
every event (letters as in the issue's simulation requirement):

(a) Acknowledged means committed: every write the workload saw succeed had each batch it
    appended committed, at the offsets Raft promised, in the quorum epoch it was written in,
    with exactly its records (verified in the event that delivered the answer; the Raft checker
    guarantees committed history never changes afterwards, crashes included).
(b) Every controller's committed view equals the oracle, at every committed offset it reaches:
    after each batch or snapshot it applies, and after every claim, renounce or restart, the
    active controller's `snapshot_records(last_stable_offset)`, and a standby's latest state
    (a renounce must have reverted everything uncommitted), equal `image_to_records` of the
    oracle at its last committed offset. A standby holds no timeline snapshot beyond its stable
    offset; no two controllers are active in the same quorum epoch. Every snapshot written or
    loaded holds the oracle's records at its end offset; observers' broker-side images (loaded
    from those snapshots too) equal the oracle's image at their offset.
(c) Reads show committed state only: every `QuorumController.read` the workload made returned
    exactly the oracle's topics and brokers at the controller's committed offset at that time.
(d) For every partition (by topic id) no two committed records give it two different leaders
    at the same leader epoch, and its leader epoch and partition epoch never decrease.
(e) After every committed batch, no unregistered broker leads a partition or is in an ISR,
    except as the last ISR member of a partition whose leader is -1; a fenced one may, only
    while a session-expiry fencing's moves go on (its fencing record comes with its first
    step, docs/controller.md "Stepped writes"; the runner's (g) bounds how long the moves
    take); and every partition is well formed (non-empty ISR within its replicas, leader in
    the ISR or -1, no repeats, adding and removing replicas disjoint and among the
    replicas). For every committed partition record, against the registrations as the
    records before it in the log left them: no fenced or unregistered broker becomes leader
    or joins an ISR (a new partition's included), and a leader change that is neither an
    unclean election (leader recovery state RECOVERING) nor the completion of a reassignment
    (whose AlterPartition may add the new leader to the ISR first) picks a member of the ISR
    the partition had just before. Those three are what keeps the high watermark safe while a
    fenced broker is still named (docs/controller.md, "Stepped writes").
Liveness (f) and the sweep's progress (g) are the runner's (`sim_controller_runner.py`).
"""

from __future__ import annotations

import hashlib
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import NoReturn
from uuid import UUID

from sim_controller_host import (
    AppendedBatch,
    ControllerNodeHost,
    ImageMachine,
    decode_snapshot_records,
)
from sim_host import NodeHost
from sim_invariants import InvariantChecker, InvariantViolation
from sim_memory_log import StoredBatch

from replog.quorum.metadata.broker_registration import BrokerRegistration
from replog.quorum.metadata.delta import MetadataDelta
from replog.quorum.metadata.image import MetadataImage, MetadataProvenance
from replog.quorum.metadata.partition_registration import PartitionRegistration
from replog.quorum.metadata.record_codec import decode_record
from replog.quorum.metadata.records import (
    LEADER_UNCHANGED,
    BrokerRegistrationChangeRecord,
    FenceChange,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
)
from replog.quorum.metadata.snapshot import image_to_records
from replog.record import RecordBatch
from replog.sim.metadata_invariants import check_choices, check_shapes, partition_before

Canonical = tuple[MetadataRecord, ...]
TopicsView = dict[str, tuple[UUID, tuple[PartitionRegistration, ...]]]


@dataclass(frozen=True)
class Ack:
    """A write the workload saw succeed, and the batches it appended (property a)."""

    description: str
    node_id: int
    batches: tuple[AppendedBatch, ...]


@dataclass(frozen=True)
class ReadResult:
    """What one `QuorumController.read` returned (property c)."""

    node_id: int
    committed_offset: int  # the controller's last committed offset when it answered
    topics: TopicsView
    brokers: Mapping[int, BrokerRegistration]


def image_topics(image: MetadataImage) -> TopicsView:
    """The oracle's answer to a describe of every topic, in `ReadResult`'s shape."""
    return {
        name: (
            topic.topic_id,
            tuple(topic.partitions[p] for p in range(len(topic.partitions))),
        )
        for name, topic in sorted(image.topics.by_name.items())
    }


class ControllerChecker(InvariantChecker):
    """Raft's checker plus the metadata oracle (module docstring)."""

    def __init__(self, hosts: Iterable[NodeHost]) -> None:
        super().__init__(hosts)
        # The committed records by offset (None: a control record).
        self.records: list[MetadataRecord | None] = []
        # The oracle image after every committed batch, by batch end offset (exclusive).
        self.images: dict[int, MetadataImage] = {0: MetadataImage.EMPTY}
        self._canonical: dict[int, Canonical] = {}
        self.latest_image = MetadataImage.EMPTY
        # (d): leader per (topic id, partition, leader epoch); last epochs per partition.
        self.leaders_at_epoch: dict[tuple[UUID, int, int], int] = {}
        self.partition_epochs: dict[tuple[UUID, int], tuple[int, int]] = {}
        self.acks: list[Ack] = []
        self.reads: list[ReadResult] = []
        # Per controller: (incarnation, last committed offset, claim epoch, writes waiting)
        # at the last check; per observer: (incarnation, applied end).
        self._signatures: dict[int, tuple[int, int, int | None, int]] = {}
        self._observed: dict[int, tuple[int, int]] = {}
        # Set by the simulator for an event that changed nothing (a timer with nothing due).
        self.quiet = False
        self.stats: Counter[str] = Counter()
        # Whether the latest committed state names a fenced broker beside other ISR members
        # or as leader: a session-expiry fencing whose moves are not all made (property e).
        self.fenced_named = False

    def fail(self, message: str) -> NoReturn:
        raise InvariantViolation(message)

    # --- the oracle -------------------------------------------------------------------------------

    def image_at(self, end_offset: int) -> MetadataImage | None:
        """The oracle image of the committed log below `end_offset` (a batch end), or None."""
        return self.images.get(end_offset)

    def canonical_at(self, end_offset: int) -> Canonical | None:
        canonical = self._canonical.get(end_offset)
        if canonical is None:
            image = self.images.get(end_offset)
            if image is None:
                return None
            canonical = self._canonical[end_offset] = tuple(image_to_records(image))
        return canonical

    def latest_image_end(self) -> int:
        return self.latest_image.provenance.last_offset + 1

    def _extend_table(self, host: NodeHost, up_to: int) -> None:
        before = len(self.bases)
        super()._extend_table(host, up_to)
        for index in range(before, len(self.bases)):
            stored = host.log.batches[host.log.batch_index(self.bases[index])]
            assert stored.base_offset == self.bases[index]
            assert hashlib.sha256(stored.data).digest() == self.hashes[index]
            self._replay_committed(stored, self.epochs[index])

    def _replay_committed(self, stored: StoredBatch, epoch: int) -> None:
        """Feed one batch that just entered the committed table to the oracle; (d), (e)."""
        base, end = stored.base_offset, stored.end_offset
        assert base == len(self.records) == self.latest_image_end(), (base, len(self.records))
        provenance = MetadataProvenance(end - 1, epoch)
        if stored.is_control:
            self.records.extend([None] * (end - base))
            self.latest_image = replace(self.latest_image, provenance=provenance)
            self.images[end] = self.latest_image
            return
        delta = MetadataDelta(self.latest_image)
        changes_state = False
        try:
            for record in RecordBatch.parse(stored.data):
                assert record.value is not None
                metadata = decode_record(record.value)
                self.records.append(metadata)
                before = partition_before(delta, metadata)
                delta.replay(metadata, record.offset)
                changes_state = changes_state or not isinstance(metadata, NoOpRecord)
                if isinstance(metadata, PartitionRecord | PartitionChangeRecord):
                    partition = delta.topic_deltas[metadata.topic_id].partition(
                        metadata.partition_id
                    )
                    assert partition is not None
                    self._note_partition(
                        metadata.topic_id, metadata.partition_id, partition, record.offset
                    )
                    check_choices(delta, metadata, before, partition, record.offset)
                    if (
                        isinstance(metadata, PartitionChangeRecord)
                        and metadata.leader != LEADER_UNCHANGED
                    ):
                        self.stats["committed leader changes"] += 1
                elif (
                    isinstance(metadata, BrokerRegistrationChangeRecord)
                    and metadata.fenced == FenceChange.FENCE
                ):
                    self.stats["committed fencings"] += 1
        except Exception as e:  # any replay failure is the finding
            self.fail(
                f"the committed batch at {base} (quorum epoch {epoch}) does not replay onto "
                f"the committed state: {e!r}"
            )
        assert len(self.records) == end, "a committed batch's records fill its offsets"
        self.latest_image = delta.apply(provenance)
        self.images[end] = self.latest_image
        if changes_state:
            self._check_fenced_brokers(self.latest_image, end)

    def _note_partition(
        self, topic_id: UUID, partition_id: int, partition: PartitionRegistration, offset: int
    ) -> None:
        """Property (d), for one committed partition record at `offset`."""
        key = (topic_id, partition_id)
        before = self.partition_epochs.get(key)
        if before is not None and (
            partition.leader_epoch < before[0] or partition.partition_epoch < before[1]
        ):
            self.fail(
                f"partition {topic_id}-{partition_id} at offset {offset}: (leader epoch, "
                f"partition epoch) went from {before} to "
                f"{(partition.leader_epoch, partition.partition_epoch)}"
            )
        self.partition_epochs[key] = (partition.leader_epoch, partition.partition_epoch)
        leader = self.leaders_at_epoch.setdefault(
            (topic_id, partition_id, partition.leader_epoch), partition.leader
        )
        if leader != partition.leader:
            self.fail(
                f"partition {topic_id}-{partition_id} has two leaders at leader epoch "
                f"{partition.leader_epoch}: {leader} and, at offset {offset}, {partition.leader}"
            )

    def _check_fenced_brokers(self, image: MetadataImage, end: int) -> None:
        """Property (e), on the committed image ending at `end` (`check_shapes`); also notes
        whether it names a fenced broker beside other ISR members or as leader
        (`fenced_named`)."""
        brokers = image.cluster.brokers

        def fenced(broker_id: int) -> bool:
            registration = brokers.get(broker_id)
            return registration is not None and registration.fenced

        self.fenced_named = any(
            fenced(partition.leader) or (len(partition.isr) > 1 and any(map(fenced, partition.isr)))
            for topic in image.topics.by_id.values()
            for partition in topic.partitions.values()
        )
        if self.fenced_named:
            self.stats["committed states naming a fenced broker"] += 1
        check_shapes(image, end - 1)

    # --- what the workload reports ---------------------------------------------------------------

    def acknowledged(self, ack: Ack) -> None:
        """A success answer reached a client; verified at the end of this event."""
        self.acks.append(ack)

    def read_returned(self, read: ReadResult) -> None:
        self.reads.append(read)

    # --- after every event --------------------------------------------------------------------

    def after_apply(self, host: NodeHost) -> None:
        """A host applied one committed batch or snapshot: (b) at that offset, at once."""
        assert isinstance(host, ControllerNodeHost)
        controller = host.controller
        if controller is None:
            self._check_observer(host)
            return
        self._check_controller_view(host)
        before = self._signatures.get(host.node_id)
        if before is not None and before[:3] != _signature(host)[:3]:
            # check() sees the rest of the change (the claim; the writes still waiting).
            self._signatures[host.node_id] = (*_signature(host)[:2], *before[2:])

    def check(self) -> None:
        if self.quiet:
            self.quiet = False
            self.events += 1
            return
        super().check()
        if self.acks:
            self._check_acks()
        if self.reads:
            self._check_reads()
        self._check_controllers()

    def _check_acks(self) -> None:
        for ack in self.acks:
            self.stats["acknowledged writes"] += 1
            for batch in ack.batches:
                where = (
                    f"{ack.description!r}, acknowledged by node {ack.node_id}, appended "
                    f"{batch.base_offset}..{batch.last_offset} in quorum epoch "
                    f"{batch.quorum_epoch}"
                )
                if batch.last_offset >= self.table_end:
                    self.fail(
                        f"{where}: answered before its records committed (committed end "
                        f"{self.table_end})"
                    )
                committed = self.records[batch.base_offset : batch.last_offset + 1]
                epoch = self.epochs[bisect_right(self.bases, batch.base_offset) - 1]
                if committed != list(batch.records) or epoch != batch.quorum_epoch:
                    self.fail(
                        f"{where}: the committed log holds other records there (quorum epoch "
                        f"{epoch}): {committed} instead of {list(batch.records)}"
                    )
        self.acks.clear()

    def _check_reads(self) -> None:
        for read in self.reads:
            self.stats["checked reads"] += 1
            image = self.image_at(read.committed_offset + 1)
            if image is None or read.committed_offset + 1 > self.table_end:
                self.fail(
                    f"node {read.node_id} answered a read at offset {read.committed_offset}, "
                    f"which is not a committed batch end (committed end {self.table_end})"
                )
            expected_topics = image_topics(image)
            expected_brokers = dict(image.cluster.brokers)
            if read.topics != expected_topics or dict(read.brokers) != expected_brokers:
                self.fail(
                    f"node {read.node_id} answered a read at committed offset "
                    f"{read.committed_offset} with state the committed log does not hold there:"
                    f"\n  read:      {read.topics} {dict(read.brokers)}"
                    f"\n  committed: {expected_topics} {expected_brokers}"
                )
        self.reads.clear()

    def _check_controllers(self) -> None:
        """(b) for every controller whose committed offset, role or incarnation changed."""
        changed = False
        for node_id, host in self.hosts.items():
            if host.node is None:
                continue
            assert isinstance(host, ControllerNodeHost)
            controller = host.controller
            if controller is None:
                self._check_observer(host)
                continue
            # A controller's state changes only with these (commits, snapshot loads, claims,
            # renounces, writes), so checking on a change of them misses nothing.
            signature = _signature(host)
            before = self._signatures.get(node_id)
            if before == signature:
                continue
            self._signatures[node_id] = signature
            changed = True
            if (
                before is not None
                and before[0] == host.incarnation
                and before[2] is not None
                and before[3]
                and controller.claim_epoch is None
            ):
                self.stats["failovers with uncommitted writes"] += 1
            if not controller.is_active:
                latest = controller.offset_control.registry.latest_offset()
                if latest != controller.last_stable_offset:
                    self.fail(
                        f"standby controller {node_id} holds state beyond its stable offset "
                        f"{controller.last_stable_offset} (newest snapshot {latest})"
                    )
            if before is None or before[:3] != signature[:3]:
                self._check_controller_view(host)  # a claim, a renounce or a restart
        if changed:
            active_in: dict[int, int] = {}
            for node_id, host in self.hosts.items():
                controller = getattr(host, "controller", None)
                if host.node is None or controller is None or controller.claim_epoch is None:
                    continue
                other = active_in.setdefault(controller.claim_epoch, node_id)
                if other != node_id:
                    self.fail(
                        f"nodes {other} and {node_id} are both active in quorum epoch "
                        f"{controller.claim_epoch}"
                    )

    def _check_controller_view(self, host: ControllerNodeHost) -> None:
        """Property (b) for one controller, at its current committed offset."""
        controller = host.controller
        assert controller is not None
        end = controller.last_committed_offset + 1
        if host.machine.next_offset != end:
            self.fail(
                f"controller {host.node_id} committed up to offset {end - 1}, but its node "
                f"applied up to {host.machine.next_offset - 1}"
            )
        expected = self.canonical_at(end)
        if expected is None or end > self.table_end:
            self.fail(
                f"controller {host.node_id}'s committed offset {end - 1} is not the end of a "
                f"committed batch (committed end {self.table_end})"
            )
        # A standby must hold nothing else, so its latest state is compared: that is what a
        # renounce must have reverted to.
        offset = controller.last_stable_offset if controller.is_active else None
        actual = tuple(controller.snapshot_records(offset))
        self.stats["controller views checked"] += 1
        if actual != expected:
            self.fail(
                f"{'active' if controller.is_active else 'standby'} controller {host.node_id}'s "
                f"committed view at offset {end - 1} differs from a replay of the committed log: "
                f"{_first_difference(actual, expected)}"
            )

    def _check_observer(self, host: NodeHost) -> None:
        machine = host.machine
        if not isinstance(machine, ImageMachine):
            return
        key = (host.incarnation, machine.next_offset)
        if self._observed.get(host.node_id) == key:
            return
        self._observed[host.node_id] = key
        expected = self.image_at(machine.next_offset)
        if expected is None or machine.image != expected:
            self.fail(
                f"observer {host.node_id}'s broker-side image below {machine.next_offset} "
                f"differs from the oracle's: {machine.image} != {expected}"
            )

    def _check_snapshot(self, host: NodeHost, end_offset: int, data: bytes) -> None:
        super()._check_snapshot(host, end_offset, data)
        self.stats["snapshots checked"] += 1
        records = decode_snapshot_records(data)
        expected = self.canonical_at(end_offset)
        if records != expected:
            self.fail(
                f"node {host.node_id}'s snapshot ending at {end_offset} holds other metadata "
                f"than the committed log: {_first_difference(records, expected or ())}"
            )


def _signature(host: ControllerNodeHost) -> tuple[int, int, int | None, int]:
    controller = host.controller
    assert controller is not None
    return (
        host.incarnation,
        controller.last_committed_offset,
        controller.claim_epoch,
        len(controller.purgatory),
    )


def _first_difference(actual: Canonical, expected: Canonical) -> str:
    for index, (a, e) in enumerate(zip(actual, expected, strict=False)):
        if a != e:
            return f"record {index}: {a} instead of {e}"
    return f"{len(actual)} records instead of {len(expected)}; extra: " + str(
        actual[len(expected) :] or expected[len(actual) :]
    )
