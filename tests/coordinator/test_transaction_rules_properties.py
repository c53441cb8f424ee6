"""Properties of the transaction coordinator's decisions under any interleaving of two
producers sharing one transactional id, failed appends, late markers and timeouts:

- every transition the rules prepare is one the state machine completes (no IllegalTransition);
- the (producer id, epoch) pairs handed to producers only grow: a later grant never equals or
  precedes an earlier one;
- a producer holding anything but the newest grant never gets an append accepted: zombies are
  fenced;
- commit markers go out only for commits a producer asked for, and no transaction both
  commits and aborts;
- resting states (Empty, Complete*) hold no partitions, and one transition at most is pending.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from txn_coordinator_driver import MAX_TIMEOUT_MS, Driver

from replog.coordinator.transaction_metadata import TxnState
from replog.coordinator.transaction_rules import (
    Answer,
    Append,
    abort_timed_out,
    add_partitions,
    end_txn,
    init_producer_id,
    timed_out,
)

PARTITIONS = [("a", 0), ("a", 1), ("b", 0)]
OUTCOMES = st.sampled_from([True, True, True, False])  # an append succeeds, mostly


class TwoProducers(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.d = Driver()
        self.version = 2
        self.now = 0
        self.held: dict[int, tuple[int, int] | None] = {0: None, 1: None}
        self.grants: list[tuple[int, int]] = []
        self.markers_pending = False
        self.committed: set[int] = set()  # transactions, numbered by their start in the log
        self.aborted: set[int] = set()

    @initialize(version=st.sampled_from([0, 2]))
    def choose_version(self, version: int) -> None:
        self.version = version

    def _grant(self, who: int, pid: int, epoch: int) -> None:
        grant = (pid, epoch)
        if self.grants:
            assert self._order(grant) > self._order(self.grants[-1]), (grant, self.grants)
        self.grants.append(grant)
        self.held[who] = grant

    def _transaction(self) -> int:
        """The number of the transaction in flight: how many transactions started in the log
        (an Ongoing after a resting state, or an abort with no partition straight after one)."""
        resting = (None, TxnState.EMPTY, TxnState.COMPLETE_ABORT, TxnState.COMPLETE_COMMIT)
        states = [r.state for r in self.d.log]
        return sum(
            1
            for before, after in zip([None, *states], states, strict=False)
            if before in resting and after in (TxnState.ONGOING, TxnState.PREPARE_ABORT)
        )

    def _order(self, grant: tuple[int, int]) -> tuple[int, int]:
        return grant  # producer ids are allocated increasing, epochs grow within one

    def _apply(self, decision, ok: bool):
        if isinstance(decision, Append) and decision.record.state in (
            TxnState.PREPARE_COMMIT,
            TxnState.PREPARE_ABORT,
        ):
            outcome = self.d.apply(decision, append_ok=ok, write_markers=False)
            if ok:
                self.markers_pending = True
            return outcome
        return self.d.apply(decision, append_ok=ok)

    @rule(who=st.integers(0, 1), ok=OUTCOMES, with_expected=st.booleans())
    def init(self, who: int, ok: bool, with_expected: bool) -> None:
        expected = self.held[who] if with_expected else None
        decision = init_producer_id(
            self.d.meta,
            self.d.tid,
            60_000,
            expected,
            now_ms=self.now,
            max_timeout_ms=MAX_TIMEOUT_MS,
            allocate=self.d.allocate,
            server_version=self.version,
        )
        outcome = self._apply(decision, ok)
        if isinstance(decision, Append) and ok and decision.answer_error is None:
            self._grant(who, outcome.producer_id, outcome.producer_epoch)
        if isinstance(decision, Answer):
            raise AssertionError("a transactional InitProducerId always writes")

    @rule(
        who=st.integers(0, 1), ok=OUTCOMES, parts=st.sets(st.sampled_from(PARTITIONS), min_size=1)
    )
    def add(self, who: int, ok: bool, parts: set) -> None:
        held = self.held[who]
        if held is None:
            return
        decision = add_partitions(
            self.d.meta, self.d.tid, *held, parts, now_ms=self.now, version=self.version
        )
        if isinstance(decision, (Append, Answer)):
            assert held == self.grants[-1], f"a zombie {held} was let in; newest {self.grants[-1]}"
        self._apply(decision, ok)

    @rule(who=st.integers(0, 1), ok=OUTCOMES, commit=st.booleans())
    def end(self, who: int, ok: bool, commit: bool) -> None:
        held = self.held[who]
        if held is None:
            return
        decision = end_txn(
            self.d.meta,
            self.d.tid,
            *held,
            commit=commit,
            from_client=True,
            version=self.version,
            now_ms=self.now,
            allocate=self.d.allocate,
        )
        if isinstance(decision, Append):
            assert held == self.grants[-1], f"a zombie {held} ended a transaction"
        outcome = self._apply(decision, ok)
        if isinstance(decision, Append) and ok:
            assert outcome.error is None
            (self.committed if commit else self.aborted).add(self._transaction())
            if self.version >= 2:
                # the answer carries the bumped epoch the producer goes on with
                self._grant(who, self.d.meta.producer_id, self.d.meta.producer_epoch)

    @precondition(lambda self: self.markers_pending)
    @rule()
    def markers_written(self) -> None:
        self.markers_pending = False
        self.d.finish_markers(self.now)

    @rule(ms=st.integers(1, 120_000))
    def time_passes(self, ms: int) -> None:
        self.now += ms

    @precondition(lambda self: self.d.meta is not None)
    @rule(ok=OUTCOMES)
    def coordinator_aborts_timed_out(self, ok: bool) -> None:
        for meta in timed_out([self.d.meta], self.now):
            self._apply(
                abort_timed_out(
                    meta, now_ms=self.now, server_version=self.version, allocate=self.d.allocate
                ),
                ok,
            )

    @invariant()
    def resting_states_hold_no_partitions(self) -> None:
        meta = self.d.meta
        if meta is not None and meta.state in (
            TxnState.EMPTY,
            TxnState.COMPLETE_ABORT,
            TxnState.COMPLETE_COMMIT,
        ):
            assert meta.partitions == frozenset()
        if meta is not None:
            assert meta.pending is None  # the driver completes or abandons every append

    @invariant()
    def no_transaction_both_commits_and_aborts(self) -> None:
        assert not (self.committed & self.aborted)

    @invariant()
    def only_a_producer_commits(self) -> None:
        """Commit markers go out only for commits the newest producer asked for: the
        coordinator's own aborts (fences, timeouts) never commit."""
        assert sum(commit for _, _, commit in self.d.markers) <= len(self.committed)


TwoProducers.TestCase.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)
test_two_producers_sharing_a_transactional_id = TwoProducers.TestCase
