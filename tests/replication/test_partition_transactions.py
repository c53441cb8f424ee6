"""Open transactions, the last stable offset and aborted-index entries of one partition,
against a model that recomputes everything from the whole log."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from replog.replication.partition_transactions import PartitionTransactions
from replog.storage.aborted_transactions import AbortedTransaction

# A log step: (producer id, kind) with kind "txn" (transactional data), "plain" (idempotent
# data), "commit" or "abort" (markers), or ("hw", n) moving the high watermark to n batches.
_steps = st.lists(
    st.one_of(
        st.tuples(st.integers(1, 4), st.sampled_from(["txn", "txn", "plain", "commit", "abort"])),
        st.tuples(st.just("hw"), st.integers(0, 60)),
    ),
    max_size=60,
)


def _model(log: list[tuple[int, str]], hw: int) -> tuple[int, list[AbortedTransaction]]:
    """LSO and aborted entries computed from scratch (module Rules)."""
    open_first: dict[int, int] = {}
    closed: list[tuple[int, int]] = []  # (first, marker)
    entries = []
    for offset, (pid, kind) in enumerate(log):
        if kind == "txn":
            open_first.setdefault(pid, offset)
        elif kind in ("commit", "abort") and pid in open_first:
            first = open_first.pop(pid)
            closed.append((first, offset))
            if kind == "abort":
                lso = min(open_first.values(), default=offset + 1)
                entries.append(AbortedTransaction(pid, first, offset, lso))
    unstable = list(open_first.values()) + [f for f, marker in closed if marker >= hw]
    return min([*unstable, hw]), entries


@given(_steps)
def test_the_lso_and_aborted_entries_match_a_model_of_the_whole_log(steps):
    txns = PartitionTransactions()
    log: list[tuple[int, str]] = []
    hw = 0
    entries = []
    for step in steps:
        if step[0] == "hw":
            hw = max(hw, min(step[1], len(log)))  # the HW only grows, up to the log end
            txns.on_high_watermark(hw)
        else:
            pid, kind = step
            offset = len(log)
            log.append(step)
            if kind in ("txn", "plain"):
                txns.on_data_batch(pid, offset, transactional=kind == "txn")
            else:
                _, entry = txns.on_marker(pid, offset, aborted=kind == "abort")
                if entry is not None:
                    entries.append(entry)
        expected_lso, expected_entries = _model(log, hw)
        assert txns.last_stable_offset(hw) == expected_lso
        assert entries == expected_entries
    # a rebuild from the log gives the same state
    rebuilt = PartitionTransactions()
    for offset, (pid, kind) in enumerate(log):
        if kind in ("txn", "plain"):
            rebuilt.on_data_batch(pid, offset, transactional=kind == "txn")
        else:
            rebuilt.on_marker(pid, offset, aborted=kind == "abort")
    rebuilt.on_high_watermark(hw)
    assert rebuilt.last_stable_offset(hw) == txns.last_stable_offset(hw)


def test_a_marker_without_an_open_transaction_completes_nothing():
    txns = PartitionTransactions()
    assert txns.on_marker(7, 0, aborted=True) == (None, None)
    assert txns.last_stable_offset(1) == 1


def test_an_open_transaction_holds_the_lso_until_its_marker_is_replicated():
    txns = PartitionTransactions()
    txns.on_data_batch(7, 3, transactional=True)
    txns.on_data_batch(8, 4, transactional=False)
    assert txns.last_stable_offset(10) == 3
    completed, entry = txns.on_marker(7, 5, aborted=True)
    assert (completed.first_offset, completed.last_offset, completed.aborted) == (3, 5, True)
    assert entry == AbortedTransaction(7, 3, 5, 6)
    assert txns.last_stable_offset(5) == 3  # the marker is not below the HW yet
    txns.on_high_watermark(6)
    assert txns.last_stable_offset(6) == 6
    txns.reset()
    assert txns.first_unstable_offset() is None
