"""What must hold of the data plane at every moment of a simulation run (`DataChecker`), checked
by the runner between the loop's iterations; a break is `InvariantViolation`.

Rules (Kafka's replication guarantees, docs/design/replication.md):
- Replicas identical below the high watermark: every replica's batches below its HW (a
  follower's once its leader answered it in this role), and every
  batch a consumer is given, equal byte for byte the partition's committed history (the first
  batch seen at each offset), unless committed data may be lost (`loss_excuse`; the history
  then restarts there): more than `replicas - min.insync.replicas` replicas of the partition
  lost power since that batch entered the history (every replica holding it may have lost it
  unsynced). A replica that lost power is never excused as a leader otherwise: KIP-966 keeps
  it out of every ISR and ELR once it registers again (the cluster runs with
  `eligible.leader.replicas.version` 1). A topic with `flush.messages=1` is never excused
  that way: its replicas sync every append. Any loss since an operator's unclean election of
  the partition (`note_unclean_election`) is excused, on every topic: the replica it elects
  may lack committed data, as Kafka's does.
- A leader's HW never moves back within one leader epoch of one incarnation of its node.
- Idempotence: a (producer id, producer epoch, base sequence) is in the committed history once.
- A consumer is never given a record at or above the HW its answer states.
- Fencing (KIP-320): a fetch naming a leader epoch is answered without an error only by a
  replica that leads in that epoch, at the moment it answers (`check_fenced`, at the broker;
  a break found there is raised at the next check, since the call's own error would go to
  the client). A parked fetch is answered by its purgatory, and its caller resumes one loop
  iteration later (`ParkedFetch`): a replica that stopped leading in the iteration that
  answered, or since, may have answered while it led; one that stopped earlier may not.
- Each broker's metadata image equals the replay of the committed metadata log up to the
  image's offset (`check_images`, at check points, on the metadata checker's replay).
The cost stays incremental: each replica (node, incarnation, partition) is read only from the
offset where the last check stopped; a broker's image is serialized once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from replog.quorum.metadata.image import MetadataImage
from replog.quorum.metadata.snapshot import image_to_records
from replog.record.header import iter_frames, read_header
from replog.replication.messages import FetchRequest, FetchResponse
from replog.server.broker.broker_runtime import BrokerRuntime
from replog.sim.cluster import SimCluster
from replog.sim.committed_images import CommittedImages
from replog.sim.invariants import InvariantViolation

__all__ = ["DataChecker", "ParkedFetch", "PartitionHistory", "TopicSpec"]

READ_BYTES = 1 << 20
PAYLOAD_START = 21  # a batch's bytes from its attributes on: what its producer sent


@dataclass(frozen=True)
class TopicSpec:
    """A data topic of the run as its creator asked for it."""

    name: str
    partitions: int
    replication_factor: int
    min_isr: int
    flushed: bool  # flush.messages=1
    # "data" (the idempotent producers' and consumers'), "transactional" (`txn_workload`'s)
    # or "internal" (created by the brokers themselves, `__transaction_state`).
    kind: str = "data"

    def configs(self) -> dict[str, str]:
        configs = {"min.insync.replicas": str(self.min_isr)}
        if self.flushed:
            configs["flush.messages"] = "1"
        return configs


@dataclass
class PartitionHistory:
    """One partition's committed history as the run has seen it."""

    replicas: tuple[int, ...]
    min_isr: int
    flushed: bool
    batches: dict[int, bytes] = field(default_factory=dict)  # base offset -> batch
    seen_at_ms: dict[int, int] = field(default_factory=dict)  # base offset -> when first seen
    sequences: dict[tuple[int, int, int], int] = field(default_factory=dict)  # -> base offset
    end: int = 0  # the offset after the last batch of the history
    resets: int = 0
    unclean_elections: list[int] = field(default_factory=list)  # virtual ms each was asked

    def truncate(self, offset: int) -> None:
        for base in [b for b in self.batches if b >= offset]:
            data = self.batches.pop(base)
            self.seen_at_ms.pop(base)
            header = read_header(data)
            if header.producer_id >= 0:
                key = (header.producer_id, header.producer_epoch, header.base_sequence)
                if self.sequences.get(key) == base:
                    del self.sequences[key]
        self.end = min(self.end, offset)
        self.resets += 1


@dataclass
class ParkedFetch:
    """A consumer's fetch that waits at a broker: for each entry, the loop iteration after which
    its replica was first seen not leading the epoch it names (module Rules, fencing)."""

    broker: BrokerRuntime
    request: FetchRequest
    stopped_leading: dict[int, int] = field(default_factory=dict)  # entry index -> iteration


def _leads(broker: BrokerRuntime, topic: str, partition: int, epoch: int) -> bool:
    manager = broker.replica_manager
    replica = None if manager is None else manager.partition(topic, partition)
    leading = None if replica is None else replica.leader_state
    return leading is not None and leading.leader_epoch == epoch


class DataChecker:
    def __init__(self, cluster: SimCluster, topics: Iterable[TopicSpec]) -> None:
        self._cluster = cluster
        self._topics = {spec.name: spec for spec in topics}
        self.histories: dict[tuple[str, int], PartitionHistory] = {}
        self._checked_to: dict[tuple[int, int, str, int], int] = {}  # replica -> offset
        self._leader_hws: dict[tuple[int, int, str, int, int], int] = {}
        self._equal_images: dict[int, MetadataImage] = {}  # node -> its image found equal
        self.checks = 0
        self.images_checked = 0
        self._found: list[str] = []  # breaks seen inside a call, raised at the next check
        self.iterations = 0  # the loop's iterations so far (`note_iteration`)
        self._parked: list[ParkedFetch] = []
        self.excused = 0  # committed batches found replaced where `loss_excuse` allowed it

    # --- the committed history --------------------------------------------------------------

    def history(self, topic: str, partition: int) -> PartitionHistory | None:
        """The partition's history, made once a broker's image names it."""
        key = (topic, partition)
        known = self.histories.get(key)
        if known is not None:
            return known
        spec = self._topics[topic]
        for node in self._cluster.up_nodes():
            entry = None if node.broker is None else node.broker.image.topics.by_name.get(topic)
            if entry is None or partition not in entry.partitions:
                continue
            made = self.histories[key] = PartitionHistory(
                replicas=tuple(entry.partitions[partition].replicas),
                min_isr=spec.min_isr,
                flushed=spec.flushed,
            )
            return made
        return None

    def loss_excuse(self, history: PartitionHistory, since_ms: int) -> str | None:
        """Why committed data of the partition seen (or acknowledged) at `since_ms` may be
        lost since (module Rules), None when nothing excuses it."""
        elected = [at_ms for at_ms in history.unclean_elections if at_ms >= since_ms]
        if elected:
            return f"an operator's unclean election at {elected[0]} ms"
        if history.flushed:
            return None
        losses = self._cluster.power_losses
        lost = {node for at_ms, node in losses if at_ms >= since_ms and node in history.replicas}
        if len(lost) > len(history.replicas) - history.min_isr:
            return f"{len(lost)} of its replicas {list(history.replicas)} lost power since"
        return None

    def note_unclean_election(self, topic: str, partition: int) -> None:
        """An operator asks for an unclean election of the partition now: what it held may be
        lost from here on (module Rules)."""
        history = self.history(topic, partition)
        assert history is not None, f"{topic}-{partition} is named in no image"
        history.unclean_elections.append(self._cluster.loop.now_ms())

    def observe(self, topic: str, partition: int, data: bytes, source: str) -> int:
        """Compare the batches `data` (committed ones, from `source`) with the history (module
        Rules); returns the offset after the last one."""
        history = self.history(topic, partition)
        if history is None:
            raise InvariantViolation(f"{source} holds {topic}-{partition}, which no image names")
        now = self._cluster.loop.now_ms()
        after = -1
        for position, size in iter_frames(data):
            batch = data[position : position + size]
            header = read_header(batch)
            base = header.base_offset
            after = header.next_offset
            known = history.batches.get(base)
            if known == batch:
                continue
            if known is not None or base < history.end:
                # The history's batch holding `base` (or the first after it) is replaced.
                cut = max((b for b in history.batches if b <= base), default=base)
                if cut in history.batches and read_header(history.batches[cut]).next_offset <= base:
                    cut = base
                since = history.seen_at_ms.get(cut, now)
                if self.loss_excuse(history, since) is None:
                    lost = {n for at, n in self._cluster.power_losses if at >= since}
                    raise InvariantViolation(
                        f"at {now} ms {source}: {topic}-{partition}'s committed batch at offset "
                        f"{base}, seen at {since} ms, differs from the committed history (nodes "
                        f"{sorted(lost)} lost power since, replicas {list(history.replicas)}"
                        f"{', flush.messages=1' if history.flushed else ''}): committed data "
                        "lost or replaced"
                    )
                self.excused += 1
                history.truncate(cut)
            if base > history.end:
                continue  # a replica that restarted its log past the history: nothing to join
            self._add(history, topic, partition, header.producer_id, batch, now, source)
        return after

    def _add(
        self,
        history: PartitionHistory,
        topic: str,
        partition: int,
        producer_id: int,
        batch: bytes,
        now: int,
        source: str,
    ) -> None:
        header = read_header(batch)
        if producer_id >= 0 and not header.is_control:
            key = (producer_id, header.producer_epoch, header.base_sequence)
            twice = history.sequences.get(key)
            if twice is not None:
                raise InvariantViolation(
                    f"at {now} ms {source}: {topic}-{partition} holds producer {producer_id} "
                    f"epoch {header.producer_epoch} sequence {header.base_sequence} twice, at "
                    f"offsets {twice} and {header.base_offset}: an idempotent duplicate"
                )
            history.sequences[key] = header.base_offset
        history.batches[header.base_offset] = batch
        history.seen_at_ms[header.base_offset] = now
        history.end = header.next_offset

    # --- replicas ---------------------------------------------------------------------------

    def check_replicas(self) -> None:
        """Every replica's new committed batches against the history; leaders' HWs."""
        self.checks += 1
        if self._found:
            raise InvariantViolation(self._found[0])
        now = self._cluster.loop.now_ms()
        for node in self._cluster.up_nodes():
            broker = node.broker
            manager = None if broker is None else broker.replica_manager
            if manager is None:
                continue
            for (topic, index), replica in manager.partitions().items():
                # A closed log: its broker is stopping cleanly (its logs shut down first).
                if topic not in self._topics or replica.stopped or replica.log.closed:
                    continue
                follower = replica.follower
                answered = follower is not None and follower.caught_up is not None
                if replica.leader_state is None and not answered:
                    # A follower's HW is its checkpoint's until its leader first answers it: a
                    # replica that was down may hold below it what a loss the checks excused
                    # has since replaced, and truncates it on that answer.
                    continue
                log = replica.log
                key = (node.node_id, node.incarnation, topic, index)
                leader = replica.leader_state
                if leader is not None:
                    epoch_key = (*key, leader.leader_epoch)
                    last = self._leader_hws.get(epoch_key, -1)
                    if leader.high_watermark < last:
                        raise InvariantViolation(
                            f"at {now} ms node {node.node_id}'s leader of {topic}-{index} moved "
                            f"its high watermark back from {last} to {leader.high_watermark} "
                            f"in leader epoch {leader.leader_epoch}"
                        )
                    self._leader_hws[epoch_key] = leader.high_watermark
                checked = min(self._checked_to.get(key, 0), log.log_end_offset)
                high_watermark = log.high_watermark
                source = f"node {node.node_id}'s replica"
                while checked < high_watermark:
                    data = log.read(max(checked, log.log_start_offset), READ_BYTES, high_watermark)
                    after = self.observe(topic, index, data, source) if data else -1
                    if after <= checked:
                        break
                    checked = after
                self._checked_to[key] = checked

    def park_fetch(self, broker: BrokerRuntime, request: FetchRequest) -> ParkedFetch:
        """`request` waits at `broker` from now on, until `unpark`."""
        parked = ParkedFetch(broker, request)
        self._parked.append(parked)
        return parked

    def unpark(self, parked: ParkedFetch) -> None:
        """`parked` was answered (or its caller went away): no more iterations are noted."""
        self._parked.remove(parked)

    def note_iteration(self) -> None:
        """After each iteration of the loop: which replicas of parked fetches stopped leading
        the epoch the fetch names (module Rules, fencing)."""
        self.iterations += 1
        for parked in self._parked:
            for index, asked in enumerate(parked.request.partitions):
                if index in parked.stopped_leading or asked.current_leader_epoch < 0:
                    continue
                if not _leads(
                    parked.broker, asked.topic, asked.partition, asked.current_leader_epoch
                ):
                    parked.stopped_leading[index] = self.iterations

    def check_fenced(
        self,
        broker: BrokerRuntime,
        node_id: int,
        request: FetchRequest,
        answer: FetchResponse,
        consumer: str,
        parked: ParkedFetch | None = None,
    ) -> None:
        """The fencing rule (module Rules) for `answer`, which node `node_id`'s `broker` gives
        `consumer` now: at once, or as the answer of the fetch `parked` (`park_fetch`)."""
        manager = broker.replica_manager
        pairs = zip(request.partitions, answer.partitions, strict=True)
        for index, (asked, result) in enumerate(pairs):
            epoch = asked.current_leader_epoch
            if result.error is not None or epoch < 0:
                continue
            if _leads(broker, asked.topic, asked.partition, epoch):
                continue
            # Not noted yet: it stopped leading in this very iteration, after the answer.
            stopped = None if parked is None else parked.stopped_leading.get(index, self.iterations)
            if stopped is not None and stopped >= self.iterations:
                continue  # it stopped leading in the iteration that answered, or since
            replica = None if manager is None else manager.partition(asked.topic, asked.partition)
            leading = None if replica is None else replica.leader_state
            since = "" if stopped is None else f" since loop iteration {stopped}"
            self._found.append(
                f"at {self._cluster.loop.now_ms()} ms node {node_id} answered {consumer}'s "
                f"fetch at leader epoch {epoch} without an error, leading "
                f"{asked.topic}-{asked.partition} "
                f"{'not at all' if leading is None else f'in epoch {leading.leader_epoch}'}"
                f"{since}: a stale leader epoch accepted"
            )

    def check_consumed(
        self, topic: str, partition: int, data: bytes, high_watermark: int, consumer: str
    ) -> int:
        """A consumer's answer: below its HW and equal to the history; the offset after it."""
        now = self._cluster.loop.now_ms()
        for position, _ in iter_frames(data):
            header = read_header(data, position)
            if header.last_offset >= high_watermark:
                raise InvariantViolation(
                    f"at {now} ms {consumer} was given {topic}-{partition} offsets "
                    f"{header.base_offset}-{header.last_offset}, at or above the high watermark "
                    f"{high_watermark} of the same answer"
                )
        return self.observe(topic, partition, data, consumer)

    # --- metadata images --------------------------------------------------------------------

    def check_images(self, images: CommittedImages) -> None:
        """Compare each broker's published image with `images`' replay of the committed
        metadata log at its offset; a broker image found equal is not serialized again while
        the broker keeps it (an image never changes)."""
        for node in self._cluster.up_nodes():
            broker = node.broker
            if broker is None:
                continue
            image = broker.image
            end = image.provenance.last_offset + 1
            if end <= 0 or end > images.end:
                continue  # not published yet, or beyond what the run has seen committed
            if end not in images.by_end:
                raise InvariantViolation(
                    f"node {node.node_id}'s metadata image ends at offset {end - 1}, which is "
                    "not the end of a committed batch"
                )
            self.images_checked += 1
            if self._equal_images.get(node.node_id) is image:
                continue
            if tuple(image_to_records(image)) != images.records_at(end):
                raise InvariantViolation(
                    f"node {node.node_id}'s metadata image at offset {end - 1} differs from a "
                    "replay of the committed metadata log"
                )
            self._equal_images[node.node_id] = image
