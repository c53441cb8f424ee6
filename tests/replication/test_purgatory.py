"""Delayed-operation bookkeeping: rules, the bound, and a stateful check against a list model."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from replog.errors import PurgatoryFullError, UnknownServerError
from replog.replication.purgatory import Purgatory

P0, P1, P2 = ("t", 0), ("t", 1), ("t", 2)


def purgatory(max_pending: int = 100) -> Purgatory[tuple[str, int], str]:
    return Purgatory("fetch", max_pending)


def test_watchers_list_pending_ops_per_key_in_watch_order() -> None:
    p = purgatory()
    p.watch("a", [P0, P1], 100)
    p.watch("b", [P1], 50)
    p.watch("c", [P2, P0], 70)
    assert p.watchers(P0) == ["a", "c"]
    assert p.watchers(P1) == ["a", "b"]
    assert p.watchers(P2) == ["c"]
    assert p.watchers(("other", 0)) == []
    assert len(p) == 3
    assert p.keys("a") == (P0, P1)
    assert p.deadline_ms("b") == 50


def test_complete_removes_the_op_from_every_key_once() -> None:
    p = purgatory()
    p.watch("a", [P0, P1], 100)
    p.watch("b", [P1], 100)
    assert p.complete("a") is True
    assert p.watchers(P0) == []
    assert p.watchers(P1) == ["b"]
    assert p.complete("a") is False
    assert p.complete("never") is False
    assert len(p) == 1
    assert "a" not in p
    assert "b" in p


def test_watchers_returns_a_copy_safe_to_complete_while_iterating() -> None:
    p = purgatory()
    for op in "abc":
        p.watch(op, [P0], 10)
    for op in p.watchers(P0):
        p.complete(op)
    assert len(p) == 0


def test_expire_returns_due_ops_by_deadline_then_watch_order() -> None:
    p = purgatory()
    p.watch("late", [P0], 300)
    p.watch("b", [P0], 100)
    p.watch("a", [P1], 50)
    p.watch("b2", [P1], 100)
    assert p.next_deadline_ms() == 50
    assert p.expire(49) == []
    assert p.expire(100) == ["a", "b", "b2"]
    assert p.watchers(P0) == ["late"]
    assert p.next_deadline_ms() == 300
    assert p.expire(10_000) == ["late"]
    assert p.next_deadline_ms() is None
    assert len(p) == 0


def test_a_completed_op_never_expires() -> None:
    p = purgatory()
    p.watch("a", [P0], 10)
    p.complete("a")
    assert p.next_deadline_ms() is None
    assert p.expire(100) == []


def test_a_rewatched_op_expires_by_its_new_deadline_only() -> None:
    p = purgatory()
    p.watch("a", [P0], 10)
    p.complete("a")
    p.watch("a", [P1], 500)
    assert p.expire(100) == []  # the old entry at 10 is stale
    assert p.watchers(P1) == ["a"]
    assert p.next_deadline_ms() == 500
    assert p.expire(500) == ["a"]


def test_the_bound_refuses_one_more_with_a_typed_error() -> None:
    p = purgatory(max_pending=2)
    p.watch("a", [P0], 10)
    p.watch("b", [P0], 10)
    with pytest.raises(
        PurgatoryFullError, match=r"purgatory fetch is full: 2 pending .* bound is 2"
    ):
        p.watch("c", [P0], 10)
    assert issubclass(PurgatoryFullError, UnknownServerError)
    assert p.watchers(P0) == ["a", "b"]  # nothing half-registered
    p.complete("a")
    p.watch("c", [P0], 10)  # room again
    assert p.watchers(P0) == ["b", "c"]


def test_programming_errors_are_refused() -> None:
    p = purgatory()
    p.watch("a", [P0], 10)
    with pytest.raises(ValueError, match="already pending"):
        p.watch("a", [P1], 10)
    with pytest.raises(ValueError, match="max_pending"):
        Purgatory("produce", 0)


def test_an_op_on_no_key_waits_for_its_owner_or_its_deadline() -> None:
    p = purgatory()
    p.watch("a", [], 10)
    p.watch("b", [], 20)
    assert "a" in p and p.keys("a") == ()
    assert p.expire(10) == ["a"]
    assert p.complete("b") and len(p) == 0


def test_duplicate_keys_are_watched_once() -> None:
    p = purgatory()
    p.watch("a", [P0, P0, P1], 10)
    assert p.watchers(P0) == ["a"]
    assert p.keys("a") == (P0, P1)
    assert p.complete("a")
    assert p.watchers(P0) == []


def test_stale_heap_entries_stay_bounded() -> None:
    p = purgatory(max_pending=10)
    for i in range(10_000):
        p.watch(f"op{i}", [P0], 1_000_000 + i)
        p.complete(f"op{i}")
    assert len(p) == 0
    assert len(p._heap) <= 64  # compaction: stale entries never outgrow the live ones for long


class Counted:
    """A key or op that counts the equality comparisons made against it: a purgatory that
    scanned its pending ops (or their keys) would compare with every one of them."""

    comparisons = 0

    def __init__(self, name: str) -> None:
        self.name = name

    def __hash__(self) -> int:
        return hash(self.name)

    def __eq__(self, other: object) -> bool:
        Counted.comparisons += 1
        return isinstance(other, Counted) and other.name == self.name


def test_watchers_and_complete_do_not_scan_other_ops() -> None:
    p: Purgatory[Counted, Counted] = Purgatory("produce", 100_000)
    ops = [Counted(f"op{i}") for i in range(2_000)]
    keys = [Counted(f"key{i}") for i in range(2_000)]
    for op, key in zip(ops, keys, strict=True):
        p.watch(op, [key], 10**9)
    Counted.comparisons = 0
    # Equal but not identical objects, so a scan could not short-cut on identity.
    assert [w.name for w in p.watchers(Counted("key1500"))] == ["op1500"]
    assert p.complete(Counted("op1500"))
    assert p.watchers(Counted("key1500")) == []
    assert Counted.comparisons <= 10


# --- Stateful check against a naive list model ----------------------------------------------

OPS = st.sampled_from([f"op{i}" for i in range(8)])
KEYS = st.lists(st.integers(0, 3), min_size=1, max_size=3)
DEADLINES = st.integers(0, 50)


class PurgatoryMachine(RuleBasedStateMachine):
    """The model: a list of (op, keys, deadline) in watch order."""

    def __init__(self) -> None:
        super().__init__()
        self.max_pending = 5
        self.real: Purgatory[int, str] = Purgatory("model", self.max_pending)
        self.model: list[tuple[str, list[int], int]] = []
        self.now_ms = 0

    def pending(self) -> list[str]:
        return [op for op, _, _ in self.model]

    @rule(op=OPS, keys=KEYS, deadline_ms=DEADLINES)
    def watch(self, op: str, keys: list[int], deadline_ms: int) -> None:
        if op in self.pending():
            with pytest.raises(ValueError):
                self.real.watch(op, keys, deadline_ms)
        elif len(self.model) >= self.max_pending:
            with pytest.raises(PurgatoryFullError):
                self.real.watch(op, keys, deadline_ms)
        else:
            self.real.watch(op, keys, deadline_ms)
            self.model.append((op, list(dict.fromkeys(keys)), deadline_ms))

    @rule(op=OPS)
    def complete(self, op: str) -> None:
        expected = op in self.pending()
        self.model = [entry for entry in self.model if entry[0] != op]
        assert self.real.complete(op) is expected

    @rule(step=st.integers(0, 20))
    def expire(self, step: int) -> None:
        self.now_ms += step
        due = [entry for entry in self.model if entry[2] <= self.now_ms]
        # Earliest deadline first; ties in watch order (sorted() is stable).
        expected = [op for op, _, _ in sorted(due, key=lambda entry: entry[2])]
        self.model = [entry for entry in self.model if entry[2] > self.now_ms]
        assert self.real.expire(self.now_ms) == expected

    @precondition(lambda self: bool(self.model))
    @rule()
    def next_deadline(self) -> None:
        assert self.real.next_deadline_ms() == min(entry[2] for entry in self.model)

    @invariant()
    def same_watchers(self) -> None:
        assert len(self.real) == len(self.model)
        for key in range(4):
            expected = [op for op, keys, _ in self.model if key in keys]
            assert self.real.watchers(key) == expected
        if not self.model:
            assert self.real.next_deadline_ms() is None


PurgatoryMachine.TestCase.settings = settings(
    max_examples=200, stateful_step_count=40, deadline=None
)
test_purgatory_matches_the_list_model = PurgatoryMachine.TestCase
