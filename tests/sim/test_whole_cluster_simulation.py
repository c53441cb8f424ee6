"""`replog.sim.run`: seeded runs of the cluster's real shells (metadata quorum and broker data
plane) under faults are clean and reach what they must (`runs_reach`: transactions,
snapshots, broker-only nodes), a seed replays byte for byte, its producers' and consumers'
work included, and the checks catch planted bugs (each planted here by patching one rule of
the real code, never by a switch in it)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from planted_bug_seeds import caught_within
from runs_reach import assert_the_runs_reach

from replog.coordinator import transaction_rules
from replog.coordinator.transaction_metadata import TxnMetadata
from replog.errors import KafkaStorageError
from replog.quorum.controller import cluster_control
from replog.quorum.controller.cluster_control import ClusterControl
from replog.quorum.controller.controller import QuorumController
from replog.quorum.controller.controller_result import ControllerResult
from replog.quorum.controller.deferred_queue import DeferredQueue
from replog.quorum.controller.replication_control import ReplicationControl
from replog.quorum.raft import node as raft_node_module
from replog.quorum.raft.node import RaftNode
from replog.replication.leader_state import PartitionLeaderState
from replog.replication.partition_transactions import PartitionTransactions
from replog.replication.producer_state import ProducerStateTable
from replog.server.data_plane import fetch_serving
from replog.server.data_plane.partition import Partition
from replog.server.raft.raft_storage import RaftStorage
from replog.server.transactions import transaction_coordinator
from replog.sim.run import simulate
from replog.storage.log import Log

# 200 seeds in CI, in chunks the test workers share: small enough that the last one to start
# does not run long after the rest of the suite (a chunk of 50 took 250-280 s beside it).
SEEDS_PER_CHUNK = 25
CHUNKS = 8
# A planted bug must be caught within this many seeds of the first seed that caught it when
# its row's seed was recorded (its third element): a run starts there, so CI runs one seed
# per bug while the runs stay as they were, and a change that alters them moves the catch
# within the window or fails the test by name (`bench/planted_bug_seeds.py` finds them again).
PLANTED_BUG_SEEDS = 100


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_seeds_are_clean(chunk: int) -> None:
    seeds = range(chunk * SEEDS_PER_CHUNK, (chunk + 1) * SEEDS_PER_CHUNK)
    # simulate raises SimulationFailure naming the seed and its replay command.
    assert_the_runs_reach([simulate(seed) for seed in seeds])


def test_a_seed_replays_byte_for_byte() -> None:
    first, again = simulate(3), simulate(3)
    assert first.events == again.events and first.events
    assert first.summary() == again.summary()
    assert first.data == again.data and first.acked == again.acked
    assert first.acked and first.data["consumed"] > 0 and first.data["images checked"] > 0
    # The run reaches KIP-966's offline partitions, and the operator's unclean election heals
    # each of them within the liveness bound (else `simulate` raises).
    offline = first.data["offline partitions"]
    assert offline > 0 and first.data["offline partitions healed by unclean election"] == offline
    assert simulate(4).events != first.events


def _no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    """Raft reports its appends as flushed without syncing them."""
    apply = RaftStorage.apply

    def unsynced_apply(self: RaftStorage, ready: object, *, flush: bool = True) -> int:
        apply(self, ready, flush=False)  # type: ignore[arg-type]
        return self.log.log_end_offset

    monkeypatch.setattr(RaftStorage, "apply", unsynced_apply)
    monkeypatch.setattr(RaftStorage, "flush", lambda self: self.log.log_end_offset)


def _any_log_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    """A voter grants its vote to a candidate whatever its log (Raft's 5.4.1 skipped)."""
    monkeypatch.setattr(RaftNode, "_log_is_up_to_date", lambda self, epoch, offset: True)


def _votes_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """A voter grants its vote to every candidate of an epoch, not only the first."""
    monkeypatch.setattr(
        RaftNode, "_can_grant", lambda self, request: request.candidate_id in self._voter_ids
    )


def _no_truncation(monkeypatch: pytest.MonkeyPatch) -> None:
    """A follower told its log diverges keeps its diverging tail (KIP-595's truncation
    skipped): it truncates nothing, and the leader, checking each fetch's position, never
    lets it append again: the cluster stops making progress."""
    monkeypatch.setattr(
        raft_node_module, "truncation_offset", lambda diverging, summary, hw: summary.log_end_offset
    )


def _hw_before_isr(monkeypatch: pytest.MonkeyPatch) -> None:
    """A partition leader moves its high watermark to its own log end, not waiting for the
    ISR to fetch."""

    def to_log_end(self: PartitionLeaderState, leader_log_end_offset: int, now_ms: int) -> bool:
        if leader_log_end_offset <= self._high_watermark:
            return False
        self._high_watermark = leader_log_end_offset
        return True

    monkeypatch.setattr(PartitionLeaderState, "_maybe_increment_high_watermark", to_log_end)


def _acks_all_early(monkeypatch: pytest.MonkeyPatch) -> None:
    """acks=all is answered once appended on the leader, before min.insync.replicas hold it."""
    monkeypatch.setattr(PartitionLeaderState, "acks_all_outcome", lambda self, offset: (True, None))
    monkeypatch.setattr(PartitionLeaderState, "check_enough_replicas", lambda self: None)


def _duplicates_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    """A leader appends an idempotent producer's retry of a batch it already holds."""
    monkeypatch.setattr(ProducerStateTable, "check_batches", lambda self, *args: None)


def _stale_epoch_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    """A leader answers a fetch naming another leader epoch than its own (KIP-320's check
    skipped)."""
    monkeypatch.setattr(fetch_serving, "check_current_leader_epoch", lambda *args: None)


def _failed_fsync_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    """A log takes a failed fsync for a success: the error is swallowed and its recovery point
    moves to where the flush was to take it."""
    flush, after_append = Log._flush, Log._after_append

    def ignoring(self: Log, up_to_offset: int, *, indexes_of_last: bool = False) -> None:
        try:
            flush(self, up_to_offset, indexes_of_last=indexes_of_last)
        except (OSError, KafkaStorageError):
            point = min(up_to_offset, self.log_end_offset)
            self._recovery_point = max(self._recovery_point, point)

    def ignoring_after_append(self: Log, now_ms: int) -> None:
        try:
            after_append(self, now_ms)
        except (OSError, KafkaStorageError):
            self._recovery_point = self.log_end_offset

    monkeypatch.setattr(Log, "_flush", ignoring)
    monkeypatch.setattr(Log, "_after_append", ignoring_after_append)


def _unclean_shutdown_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    """A broker registering after an unclean shutdown (no clean-shutdown marker) is handled as
    after a clean one: it stays in the ELRs it was in, and may lead from there (KIP-966's
    check skipped)."""
    monkeypatch.setattr(
        ReplicationControl,
        "handle_broker_unclean_shutdown",
        ReplicationControl.handle_broker_fenced,
    )


def _clean_shutdown_taken_for_unclean(monkeypatch: pytest.MonkeyPatch) -> None:
    """A broker registering after a clean shutdown is handled as after an unclean one (the
    previous broker epoch it names ignored): it leaves its ELRs, so partitions go offline that
    a clean election could lead, which the liveness check must tell from KIP-966's reason."""
    monkeypatch.setattr(cluster_control, "succeeds_cleanly", lambda live, previous: False)


def _votes_twice_unasserted(monkeypatch: pytest.MonkeyPatch) -> None:
    """A voter grants every candidate of an epoch, and the core's own assertion on its
    election state is skipped, so that the checks must notice."""
    _votes_twice(monkeypatch)

    def unasserted(self: RaftNode, successor: object) -> None:
        if successor != self._election:
            self._election = successor  # type: ignore[assignment]
            self._election_dirty = True

    monkeypatch.setattr(RaftNode, "_set_election", unasserted)


def _answers_before_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The controller answers a write once its records are appended, not once they commit."""
    monkeypatch.setattr(DeferredQueue, "add", lambda self, offset, item: item.complete(None))


def _renounce_without_revert(monkeypatch: pytest.MonkeyPatch) -> None:
    """A controller losing its leadership keeps its uncommitted writes: its stable state is
    taken again over them."""
    renounce = QuorumController._renounce

    def keeping(self: QuorumController, new_leader_id: int | None) -> None:
        registry = self.offset_control.registry
        for offset in registry.snapshot_offsets():
            registry.delete_snapshot(offset)
        registry.get_or_create_snapshot(self.offset_control.last_stable_offset)
        renounce(self, new_leader_id)

    monkeypatch.setattr(QuorumController, "_renounce", keeping)


def _fenced_brokers_elected(monkeypatch: pytest.MonkeyPatch) -> None:
    """The controller counts fenced brokers as active: elections and ISR changes choose them."""
    monkeypatch.setattr(
        ClusterControl,
        "is_active",
        lambda self, broker_id: self.is_registered(broker_id) and broker_id not in self._evacuating,
    )


def _fencing_keeps_isrs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fencing a broker leaves it in every ISR and leadership it had (KIP-841 broken)."""
    for handler in ("handle_broker_fenced", "handle_broker_unclean_shutdown"):
        monkeypatch.setattr(ReplicationControl, handler, lambda self, broker_id, **kwargs: ())


def _leaderless_left(monkeypatch: pytest.MonkeyPatch) -> None:
    """No path elects a leader for a leaderless partition: neither a broker's unfencing, nor
    the periodic sweep, nor preferred-leader balancing (which would elect the preferred
    replica once it is back)."""
    monkeypatch.setattr(
        ReplicationControl,
        "handle_broker_unfenced",
        lambda self, broker_id, **kwargs: ControllerResult.of((), None),
    )
    monkeypatch.setattr(QuorumController, "_elect_leaderless", lambda self, now_ms: None)
    monkeypatch.setattr(ReplicationControl, "has_imbalanced_partitions", lambda self: False)


def _aborted_transactions_untold(monkeypatch: pytest.MonkeyPatch) -> None:
    """A read_committed fetch is told of no aborted transaction."""
    monkeypatch.setattr(Partition, "aborted_transactions", lambda self, *args, **kwargs: [])


def _lso_at_the_hw(monkeypatch: pytest.MonkeyPatch) -> None:
    """The LSO is the HW, open transactions or not."""
    monkeypatch.setattr(
        ProducerStateTable, "last_stable_offset", lambda self, high_watermark: high_watermark
    )


def _lso_past_unreplicated(monkeypatch: pytest.MonkeyPatch) -> None:
    """The LSO passes ended transactions whose markers the followers have not replicated."""

    def open_only(self: PartitionTransactions) -> int | None:
        return self._open.peekitem(0)[0] if self._open else None

    monkeypatch.setattr(PartitionTransactions, "first_unstable_offset", open_only)


def _fenced_epoch_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The transaction coordinator takes any epoch of the producer id (a zombie's too)."""
    checks = transaction_rules._member_checks

    def epoch_unchecked(
        meta: TxnMetadata | None, transactional_id: str, producer_id: int, epoch: int
    ) -> transaction_rules.Refuse | None:
        current = epoch if meta is None else meta.producer_epoch
        return checks(meta, transactional_id, producer_id, current)

    monkeypatch.setattr(transaction_rules, "_member_checks", epoch_unchecked)


def _prepared_left_open(monkeypatch: pytest.MonkeyPatch) -> None:
    """A coordinator loading its partition leaves the Prepare* transactions it finds."""
    monkeypatch.setattr(transaction_coordinator, "unfinished", lambda loaded: [])


LOST_COMMITS = "committed batch was lost or replaced|acknowledged topic creations lost"
LOST_ACKED = "acknowledged record lost|committed data lost or replaced|record replaced"


@pytest.mark.parametrize(
    ("plant", "expected", "first"),
    [
        (_no_fsync, "hold the committed metadata log", 0),
        (_any_log_wins, f"{LOST_COMMITS}|below the high watermark", 0),
        (_votes_twice, f"two leaders in quorum epoch|below the high watermark|{LOST_COMMITS}", 0),
        (_no_truncation, "no progress|not led and fully replicated in time", 1),
        (_hw_before_isr, LOST_ACKED, 0),
        # A WriteTxnMarkers answered early loses its marker in a truncation: the coordinator
        # has finished the transaction, so it stays open in the partition for good.
        (_acks_all_early, f"{LOST_ACKED}|transactions not finished", 12),
        (_duplicates_accepted, "an idempotent duplicate", 3),
        (_stale_epoch_accepted, "a stale leader epoch accepted", 14),
        (
            _failed_fsync_ignored,
            f"a synced batch lost|{LOST_COMMITS}|{LOST_ACKED}|below the high watermark|"
            "hold the committed metadata",
            85,
        ),
        (_unclean_shutdown_ignored, LOST_ACKED, 5),
        (_clean_shutdown_taken_for_unclean, "not for KIP-966's reason", 3),
        (
            _votes_twice_unasserted,
            f"election state changed illegally|two leaders in quorum epoch|"
            f"below the high watermark|{LOST_COMMITS}",
            0,
        ),
        (_answers_before_commit, "acknowledged topic creations lost", 3),
        (_renounce_without_revert, "MetadataReplayError|does not replay|differs from a replay", 3),
        (_fenced_brokers_elected, "was elected leader|joined the ISR", 0),
        (
            _fencing_keeps_isrs,
            f"{LOST_ACKED}|unregistered broker|not led and fully replicated|does not sweep them",
            0,
        ),
        (_leaderless_left, "not led and fully replicated in time", 19),
        (_aborted_transactions_untold, "a record of an aborted or open transaction", 0),
        (_lso_at_the_hw, "a record of an aborted or open transaction|the LSO passed", 0),
        (_lso_past_unreplicated, "the LSO passed an open transaction", 0),
        (_fenced_epoch_accepted, "a fenced zombie's write visible", 16),
        (_prepared_left_open, "transactions not finished", 3),
    ],
    ids=[
        "fsync dropped",
        "stale log elected",
        "two votes in an epoch",
        "truncation skipped",
        "HW advanced before the ISR acks",
        "acks=all before min ISR",
        "idempotent duplicate accepted",
        "stale leader epoch accepted",
        "failed fsync taken for a success",
        "unclean shutdown taken for a clean one",
        "clean shutdown taken for an unclean one",
        "two votes in an epoch, unasserted",
        "controller write answered before commit",
        "renounce without revert",
        "fenced broker elected",
        "fencing leaves ISRs as they were",
        "leaderless partitions left so",
        "aborted transactions untold",
        "LSO at the HW",
        "LSO past unreplicated markers",
        "fenced epoch accepted",
        "Prepare* left by a new coordinator",
    ],
)
def test_a_planted_bug_is_caught(
    plant: Callable[[pytest.MonkeyPatch], None],
    expected: str,
    first: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plant(monkeypatch)
    caught_within(range(first, first + PLANTED_BUG_SEEDS), expected)
