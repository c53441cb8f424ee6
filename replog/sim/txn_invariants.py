"""What must hold of transactions in a simulation run (`TxnChecker`), checked on every answer a
read_committed consumer gets (`ReadCommittedView`); a break is kept in `found` and raised by
the runner after the loop iteration that saw it.

Rules (Kafka's transactional guarantees, docs/kafka-protocol.md, "Transactions"):
- The ground truth is the producers' (`TxnWorkload`): each batch names its transaction by
  (partition, producer id, epoch, base sequence), no record is decoded; a transaction is
  open until its EndTxn is first sent, then committing or aborting, committed or aborted
  once answered.
- A consumer skips what Kafka's consumer skips: a transactional batch of a producer whose
  aborted transaction (the answer's list) began at or below it, until that producer's ABORT
  marker. What it keeps is visible: a visible record's transaction must be committing or
  committed (never open, aborting or aborted), and its EndTxn must have been sent before a
  newer instance of its transactional id initialised (a fenced zombie's writes never
  become visible).
- Atomicity: a transaction is never visible in one partition and skipped as aborted in
  another, and an acknowledged commit is never skipped as aborted.
- The LSO never passes the first offset of an open transaction: a transaction a consumer saw
  begin below an answer's LSO had its marker written and replicated then, so the marker the
  consumer later reads lies below that answer's high watermark.
- Data lost by the rules `DataChecker.loss_excuse` allows (on the partition or on the
  transactional id's `__transaction_state` partition, since the commit was sent) excuses a
  committed transaction's missing or aborted part; a partition whose committed data (or
  `__transaction_state`'s) was lost may keep its LSO behind its high watermark for good
  (`_may_hang`), and so may one whose LSO is held by a transaction begun before such a loss
  on its own state partition, seen or not, that its coordinator's loaded state no longer
  holds (absent, an older epoch, or Empty at its epoch: the record that began it lost); a
  consumer whose partition's history restarted reads it again from 0.
- At the end (`unfinished`, after liveness): every acknowledged commit is visible in every
  partition it wrote, a committing one in all or none, and every consumer has read up to the
  high watermark with the LSO there (no transaction left open), except where the end's bound
  does not wait for an open transaction's timeout (`txn_liveness`): a partition in
  `lso_unheld` (written by a transaction whose coordinator times it out past the bound's cap),
  or every partition while `lso_held` is False. Where an LSO is not held so (that, or
  `_may_hang`), a commit whose batches there all lie at or above the LSO its consumer has
  read up to is not due: an open transaction below holds it back, as Kafka's read_committed
  consumer is held until that transaction ends (`_held_back`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from replog.coordinator.transaction_log_replay import partition_for_transactional_id
from replog.coordinator.transaction_metadata import TxnState
from replog.record.control_record import batch_marker
from replog.record.header import iter_frames, read_header
from replog.replication.messages import FetchPartitionResult
from replog.sim.cluster import SimCluster
from replog.sim.data_invariants import DataChecker, PartitionHistory
from replog.topic_names import TRANSACTION_STATE_TOPIC

__all__ = ["ReadCommittedView", "Txn", "TxnChecker"]

Partition = tuple[str, int]


@dataclass(eq=False)
class Txn:
    """One transaction as its producer ran it (module Rules)."""

    name: str  # "<transactional id>/<instance>/<number>"
    transactional_id: str
    instance: int
    begun_ms: int
    state: str = "open"  # open, committing, aborting, committed, aborted
    commit_sent_ms: int | None = None
    written: set[Partition] = field(default_factory=set)  # partitions with an acked batch
    # Its batches as (producer id, epoch, base sequence), by partition.
    batches: dict[Partition, list[tuple[int, int, int]]] = field(default_factory=dict)
    visible: set[Partition] = field(default_factory=set)
    skipped: set[Partition] = field(default_factory=set)  # skipped as aborted
    end_epoch: int | None = None  # the coordinator epoch that answered its EndTxn
    marker_epochs: set[int] = field(default_factory=set)


class TxnChecker:
    """The transactional checks of one run (module docstring)."""

    def __init__(self, cluster: SimCluster, data: DataChecker, state_partitions: int) -> None:
        self.cluster = cluster
        self.data = data
        self._state_partitions = state_partitions
        self.txns: list[Txn] = []
        self._batches: dict[tuple[str, int, int, int, int], Txn] = {}
        # Each id's fencings: (instance number, virtual ms): the instances below it fenced.
        self._fencings: dict[str, list[tuple[int, int]]] = {}
        self.views: dict[Partition, ReadCommittedView] = {}
        self.found: list[str] = []
        # Whether the end holds the LSOs to their high watermarks, and the partitions it does
        # not hold so (`txn_liveness`'s clocks).
        self.lso_held = True
        self.lso_unheld: set[Partition] = set()
        self.counts = {
            "zombies fenced": 0,
            "transactions whose abort lay past the end's cap": 0,
            "read_committed answers checked": 0,
            "coordinator lookups after the faults": 0,
        }

    @property
    def state_partitions(self) -> int:
        """How many partitions `__transaction_state` has."""
        return self._state_partitions

    # --- the producers' notes -------------------------------------------------------------

    def begin(self, transactional_id: str, instance: int, number: int) -> Txn:
        txn = Txn(
            f"{transactional_id}/{instance}/{number}",
            transactional_id,
            instance,
            self.cluster.loop.now_ms(),
        )
        self.txns.append(txn)
        return txn

    def sent(
        self, txn: Txn, topic: str, partition: int, producer_id: int, epoch: int, sequence: int
    ) -> None:
        self._batches[(topic, partition, producer_id, epoch, sequence)] = txn
        txn.batches.setdefault((topic, partition), []).append((producer_id, epoch, sequence))

    def acked(self, txn: Txn, topic: str, partition: int) -> None:
        txn.written.add((topic, partition))

    def ending(self, txn: Txn, commit: bool) -> None:
        txn.state = "committing" if commit else "aborting"
        if commit:
            txn.commit_sent_ms = self.cluster.loop.now_ms()

    def ended(self, txn: Txn, coordinator_epoch: int | None) -> None:
        txn.state = "committed" if txn.state == "committing" else "aborted"
        txn.end_epoch = coordinator_epoch

    def fenced(self, transactional_id: str, newest: int) -> None:
        """Instance `newest` of the id initialised: every older one is fenced from now on."""
        self._fencings.setdefault(transactional_id, []).append((newest, self.cluster.loop.now_ms()))

    def fenced_at(self, txn: Txn) -> int | None:
        for newest, at_ms in self._fencings.get(txn.transactional_id, ()):
            if txn.instance < newest:
                return at_ms
        return None

    def view(self, topic: str, partition: int) -> ReadCommittedView:
        view = self.views[(topic, partition)] = ReadCommittedView(self, topic, partition)
        return view

    # --- what consumers are given -----------------------------------------------------------

    def batch_txn(
        self, topic: str, partition: int, producer_id: int, epoch: int, sequence: int
    ) -> Txn | None:
        return self._batches.get((topic, partition, producer_id, epoch, sequence))

    def excused(self, txn: Txn, partitions: set[Partition], since: int | None = None) -> str | None:
        """Why `txn`'s part in `partitions` may be lost since `since` (virtual ms; its commit's
        sending when not given) (module Rules), None when nothing excuses it."""
        if since is None:
            since = txn.commit_sent_ms or txn.begun_ms
        state_index = partition_for_transactional_id(txn.transactional_id, self._state_partitions)
        for topic, index in sorted(partitions | {(TRANSACTION_STATE_TOPIC, state_index)}):
            history = self.data.histories.get((topic, index))
            excuse = None if history is None else self.data.loss_excuse(history, since)
            if excuse is not None:
                return f"{topic}-{index}: {excuse}"
        return None

    def visible(self, txn: Txn, where: Partition, offset: int, consumer: str) -> None:
        now = self.cluster.loop.now_ms()
        at = f"at {now} ms {consumer} was given {where[0]}-{where[1]} offset {offset} of {txn.name}"
        fenced_at = self.fenced_at(txn)
        if self.excused(txn, {where}, txn.begun_ms) is not None:
            pass  # a lost marker: its data may join the producer's next transaction
        elif fenced_at is not None and (
            txn.commit_sent_ms is None or txn.commit_sent_ms >= fenced_at
        ):
            sent = "never" if txn.commit_sent_ms is None else f"at {txn.commit_sent_ms} ms"
            self.found.append(
                f"{at}, whose producer instance was fenced at {fenced_at} ms (a newer instance "
                f"initialised) and whose commit was sent {sent}: a fenced zombie's write visible"
            )
        elif txn.state not in ("committing", "committed"):
            self.found.append(
                f"{at}, a transaction {txn.state} (its EndTxn "
                f"{'not sent' if txn.state == 'open' else 'an abort'}): read_committed given "
                "a record of an aborted or open transaction"
            )
        txn.visible.add(where)
        if txn.skipped and self.excused(txn, txn.skipped | {where}) is None:
            self.found.append(
                f"{at}, skipped as aborted in {sorted(txn.skipped)}: a transaction visible in "
                "one partition and aborted in another"
            )

    def skipped(self, txn: Txn, where: Partition, offset: int, consumer: str) -> None:
        now = self.cluster.loop.now_ms()
        at = f"at {now} ms {consumer} skipped {where[0]}-{where[1]} offset {offset} of {txn.name}"
        txn.skipped.add(where)
        if self.excused(txn, txn.visible | {where}) is not None:
            return
        if txn.visible:
            self.found.append(
                f"{at} as aborted, visible in {sorted(txn.visible)}: a transaction visible in "
                "one partition and aborted in another"
            )
        elif txn.state == "committed":
            self.found.append(f"{at} as aborted: an acknowledged commit aborted")

    # --- the end ------------------------------------------------------------------------------

    def unfinished(self) -> list[str]:
        """What the end's liveness still lacks (module Rules), in words."""
        problems = []
        for txn in self.txns:
            if txn.state not in ("committing", "committed"):
                continue
            missing = {p for p in txn.written - txn.visible if not self._held_back(txn, p)}
            if not missing or (txn.state == "committing" and not txn.visible):
                continue
            if self.excused(txn, missing) is None:
                problems.append(
                    f"{txn.name} ({txn.state}) visible in {sorted(txn.visible)}, not in "
                    f"{sorted(missing)}"
                )
        for (topic, index), view in sorted(self.views.items()):
            if not self._lso_held_at(topic, index):
                continue
            if not view.read_to_the_end():
                problems.append(
                    f"{topic}-{index}: read up to {view.position}, last stable offset "
                    f"{view.last_stable}, high watermark {view.high_watermark}"
                )
        return problems

    def _held_back(self, txn: Txn, where: Partition) -> bool:
        """Whether `txn`'s part in `where` is behind an LSO the end does not hold to its high
        watermark (module Rules): every batch of it in the history at or above the LSO its
        consumer has read up to."""
        if self._lso_held_at(*where):
            return False
        view = self.views.get(where)
        history = self.data.histories.get(where)
        if view is None or history is None or view.position < view.last_stable:
            return False
        offsets = [history.sequences.get(batch) for batch in txn.batches.get(where, ())]
        return bool(offsets) and all(o is not None and o >= view.last_stable for o in offsets)

    def _lso_held_at(self, topic: str, index: int) -> bool:
        """Whether the end holds the partition's LSO to its high watermark (module Rules)."""
        return (
            self.lso_held
            and (topic, index) not in self.lso_unheld
            and not self._may_hang(topic, index)
        )

    def _may_hang(self, topic: str, index: int) -> bool:
        """Whether committed data of the partition or of `__transaction_state` was lost (a
        lost marker, or a lost record adding the partition or preparing the end, leaves its
        transaction open for good, as in Kafka, where only an operator's abort ends it): the
        history restarted where a loss was excused, or a leader's log ends before the history
        (an unclean election's replica that lacked its tail; the history saw it before every
        power loss), or the transaction holding the LSO began before a loss the rules excuse
        on its own state partition and its coordinator forgot it (`_open_past_a_loss`: the
        record adding the partition committed and replaced between two of the history's
        looks)."""
        partitions = [(topic, index)]
        partitions += [(TRANSACTION_STATE_TOPIC, i) for i in range(self._state_partitions)]
        return (
            any(self._lost(key) for key in partitions)
            or self._open_past_a_loss(topic, index) is not None
        )

    def _open_past_a_loss(self, topic: str, index: int) -> str | None:
        """Why the transaction whose first batch the partition's consumer last saw as the LSO
        may never end (module Rules), None when it must: its state partition lost data the
        rules excuse since it began, and its coordinator forgot it (`_forgotten`)."""
        view = self.views.get((topic, index))
        history = self.data.histories.get((topic, index))
        batch = None if view is None or history is None else history.batches.get(view.last_stable)
        if batch is None:
            return None
        header = read_header(batch)
        if header.is_control or not header.is_transactional:
            return None
        producer, epoch = header.producer_id, header.producer_epoch
        txn = self.batch_txn(topic, index, producer, epoch, header.base_sequence)
        if txn is None:
            return None
        state_index = partition_for_transactional_id(txn.transactional_id, self._state_partitions)
        state = self.data.histories.get((TRANSACTION_STATE_TOPIC, state_index))
        excuse = None if state is None else self.data.loss_excuse(state, txn.begun_ms)
        if excuse is None:
            return None
        if not self._forgotten(txn.transactional_id, state_index, producer, epoch):
            return None
        return f"{TRANSACTION_STATE_TOPIC}-{state_index}: {excuse}"

    def _forgotten(
        self, transactional_id: str, state_index: int, producer_id: int, epoch: int
    ) -> bool:
        """Whether the coordinators lost the transaction of the producer's `epoch` with the
        record that began it: an up broker has the id's state loaded, and there it is absent,
        or the same producer at an older epoch, or at that epoch with no transaction (Empty).
        A coordinator that holds it open, prepared or ended (its markers are due), or has moved
        to another producer id, forgot nothing this rule can tell. `state_index`: the id's
        `__transaction_state` partition."""
        loaded = False
        for node in self.cluster.up_nodes():
            coordinator = None if node.broker is None else node.broker.transaction_coordinator
            state = None if coordinator is None else coordinator.loaded().get(state_index)
            if state is None:
                continue
            loaded = True
            for meta in state:
                if meta.transactional_id != transactional_id:
                    continue
                if meta.producer_id != producer_id or meta.producer_epoch > epoch:
                    return False
                if meta.producer_epoch == epoch and meta.state is not TxnState.EMPTY:
                    return False
        return loaded

    def _lost(self, key: Partition) -> bool:
        history = self.data.histories.get(key)
        if history is None:
            return False
        if history.resets:
            return True
        for node in self.cluster.up_nodes():
            manager = None if node.broker is None else node.broker.replica_manager
            replica = None if manager is None else manager.partition(*key)
            if replica is None or replica.leader_state is None or replica.log.closed:
                continue
            if replica.log.log_end_offset < history.end:
                return True
        return False

    def report(self) -> dict[str, int]:
        """The counts of the run's transactions, for its report."""
        states = [txn.state for txn in self.txns]
        renewed = sum(
            1
            for txn in self.txns
            if txn.end_epoch is not None and any(e > txn.end_epoch for e in txn.marker_epochs)
        )
        return {
            "transactions committed": states.count("committed"),
            "transactions aborted": states.count("aborted"),
            "transactions left to the coordinator": len(states)
            - states.count("committed")
            - states.count("aborted"),
            "transactions finished by a new coordinator": renewed,
            "read_committed partitions held to their end": sum(
                self._lso_held_at(topic, index) for topic, index in self.views
            ),
            **self.counts,
        }


class ReadCommittedView:
    """What one partition's read_committed consumer was given (module Rules)."""

    def __init__(self, checker: TxnChecker, topic: str, partition: int) -> None:
        self._checker = checker
        self.topic = topic
        self.partition = partition
        self._open: dict[int, _Opened] = {}  # by producer id
        self._resets = 0  # its history's restarts when it began reading
        self.position = 0
        self.last_stable = -1
        self.high_watermark = -1

    def restart(self) -> None:
        """The consumer reads again from offset 0."""
        self._open.clear()
        self.position = 0
        history = self._history()
        self._resets = 0 if history is None else history.resets

    def _history(self) -> PartitionHistory | None:
        return self._checker.data.histories.get((self.topic, self.partition))

    def read_to_the_end(self) -> bool:
        return self.position >= self.high_watermark == self.last_stable >= 0

    def answered(self, position: int, result: FetchPartitionResult, consumer: str) -> bool:
        """Check an answer to a fetch at `position` (module Rules); False when the consumer is
        to read again from offset 0 (its partition's history restarted)."""
        checker = self._checker
        history = self._history()
        if history is not None and history.resets != self._resets:
            self.restart()
            return False
        checker.counts["read_committed answers checked"] += 1
        where = (self.topic, self.partition)
        data = result.records
        aborted = sorted(result.aborted_transactions or (), key=lambda a: a[1])
        aborting: set[int] = set()
        taken = 0
        after = position
        kept: list[tuple[bool, Txn, int]] = []  # (visible, its transaction, offset), in order
        for at, _ in iter_frames(data):
            header = read_header(data, at)
            while taken < len(aborted) and aborted[taken][1] <= header.last_offset:
                aborting.add(aborted[taken][0])
                taken += 1
            producer = header.producer_id
            if header.is_control:
                marker = batch_marker(data, at, header, f"{self.topic}-{self.partition}")
                if marker.aborted:
                    aborting.discard(producer)
                opened = self._open.pop(producer, None)
                if opened is not None:
                    self._closed(producer, opened, header.base_offset, consumer)
                    if opened.txn is not None:
                        opened.txn.marker_epochs.add(marker.coordinator_epoch)
            elif header.is_transactional:
                txn = checker.batch_txn(
                    self.topic,
                    self.partition,
                    producer,
                    header.producer_epoch,
                    header.base_sequence,
                )
                self._open.setdefault(producer, _Opened(header.base_offset, txn))
                if txn is not None:  # else not a batch of this run's producers
                    kept.append((producer not in aborting, txn, header.base_offset))
            after = header.next_offset
        stable, high_watermark = result.last_stable_offset, result.high_watermark
        self.position, self.last_stable, self.high_watermark = after, stable, high_watermark
        for opened in self._open.values():
            if opened.first < stable and high_watermark < opened.bound:
                opened.bound, opened.passed_by = high_watermark, stable
        for visible, txn, offset in kept:
            if visible:
                checker.visible(txn, where, offset, consumer)
            else:
                checker.skipped(txn, where, offset, consumer)
        return True

    def _closed(self, producer: int, opened: _Opened, marker_offset: int, consumer: str) -> None:
        """The LSO rule (module Rules) for a transaction whose marker is at `marker_offset`."""
        if marker_offset < opened.bound:
            return
        checker = self._checker
        name = "" if opened.txn is None else f" {opened.txn.name}"
        checker.found.append(
            f"at {checker.cluster.loop.now_ms()} ms {consumer} was given "
            f"{self.topic}-{self.partition} up to the last stable offset {opened.passed_by} "
            f"while producer {producer}'s transaction{name} begun at offset {opened.first} had "
            f"no marker below the high watermark {opened.bound} (its marker is at "
            f"{marker_offset}): the LSO passed an open transaction"
        )


@dataclass
class _Opened:
    """A producer's transaction a consumer has seen begin and not end."""

    first: int  # its first offset
    txn: Txn | None
    # The lowest HW of an answer whose LSO passed `first` (its marker must be below it), and
    # that LSO; the bound is past every offset while none has.
    bound: int = 1 << 63
    passed_by: int = -1
