"""read_committed reads of fetch answers (replog/client/read_committed.py through
`fetched_answer`): aborted transactions skipped as Kafka's consumer skips them, control batches
never returned, positions moved past both; held against a model of a partition's log."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from replog.client.fetched_records import fetched_answer
from replog.client.read_committed import AbortedTransactions, control_batch_type
from replog.client.records import TopicPartition
from replog.record import read_header
from tests.client.txn_batches import data_batch, marker_batch

TP = TopicPartition("t", 0)


def data(base: int, count: int, pid: int = -1, txn: bool = False) -> bytes:
    """`count` records whose values are their offsets."""
    return data_batch(base, [b"%d" % (base + i) for i in range(count)], pid, txn)


marker = marker_batch


def read(
    answer: bytes,
    position: int,
    aborted: list[tuple[int, int]] | None,
    hw: int = 1 << 40,
    lso: int = -1,
) -> tuple[list[int], int]:
    fetched = fetched_answer(
        TP,
        answer,
        position=position,
        high_watermark=hw,
        aborted_transactions=aborted,
        last_stable_offset=lso,
    )
    assert fetched.error is None
    taken = fetched.take(1 << 30)
    return [r.offset for r in taken], fetched.position


def test_aborted_transaction_is_skipped_committed_one_read_and_markers_never_returned() -> None:
    answer = (
        data(0, 2, pid=7, txn=True)  # 0-1 aborted
        + data(2, 2, pid=8, txn=True)  # 2-3 committed
        + marker(4, 7, aborted=True)
        + marker(5, 8, aborted=False)
    )
    offsets, position = read(answer, 0, [(7, 0)])
    assert offsets == [2, 3]
    assert position == 6  # past both markers
    everything, _ = read(answer, 0, None)
    assert everything == [0, 1, 2, 3]  # read_uncommitted: aborted data, still no markers


def test_abort_marker_closes_the_producers_transaction_so_its_next_one_is_read() -> None:
    answer = (
        data(0, 1, pid=7, txn=True)
        + marker(1, 7, aborted=True)
        + data(2, 2, pid=7, txn=True)
        + marker(4, 7, aborted=False)
    )
    assert read(answer, 0, [(7, 0)]) == ([2, 3], 5)


def test_non_transactional_and_other_producers_batches_inside_an_aborted_span_are_read() -> None:
    answer = (
        data(0, 1, pid=7, txn=True)
        + data(1, 1)  # no producer id
        + data(2, 1, pid=9)  # idempotent, not transactional
        + data(3, 1, pid=8, txn=True)
        + data(4, 1, pid=7, txn=True)
        + marker(5, 7, aborted=True)
        + marker(6, 8, aborted=False)
    )
    assert read(answer, 0, [(7, 0)]) == ([1, 2, 3], 7)


def test_an_entry_is_not_applied_before_its_first_offset() -> None:
    # Producer 7 commits 0-1, then aborts 3-4: only the second transaction is named.
    answer = (
        data(0, 2, pid=7, txn=True)
        + marker(2, 7, aborted=False)
        + data(3, 2, pid=7, txn=True)
        + marker(5, 7, aborted=True)
    )
    assert read(answer, 0, [(7, 3)]) == ([0, 1], 6)


def test_a_transaction_split_across_fetches_is_skipped_in_both() -> None:
    first = data(0, 2, pid=7, txn=True) + data(2, 1)
    second = data(3, 2, pid=7, txn=True) + marker(5, 7, aborted=True) + data(6, 1)
    assert read(first, 0, [(7, 0)]) == ([2], 3)
    assert read(second, 3, [(7, 0)]) == ([6], 7)


def test_nothing_at_or_above_the_last_stable_offset_is_returned() -> None:
    answer = data(0, 2) + data(2, 2, pid=7, txn=True) + data(4, 1)
    assert read(answer, 0, [], lso=2) == ([0, 1], 2)
    assert read(answer, 0, None, lso=2) == ([0, 1, 2, 3, 4], 5)  # read_uncommitted: the HW


def test_marker_type_of_a_control_batch() -> None:
    raw = marker(9, 7, aborted=True)
    assert control_batch_type(raw, 0, read_header(raw), "here") == 0
    raw = marker(9, 7, aborted=False)
    assert control_batch_type(memoryview(b"xx" + raw), 2, read_header(raw), "here") == 1


def test_batches_without_a_producer_id_consume_no_entry() -> None:
    aborted = AbortedTransactions([(7, 0)])
    assert not aborted.is_aborted(read_header(data(0, 1)))
    assert aborted.is_aborted(read_header(data(1, 1, pid=7, txn=True)))


# --- the model ------------------------------------------------------------------------------


@dataclass
class Log:
    """A partition's log built by transactional and other producers, with what the broker
    knows of it: its aborted transactions and its last stable offset."""

    batches: list[tuple[int, int, bytes]] = field(default_factory=list)  # (base, last, bytes)
    visible: list[int] = field(default_factory=list)  # offsets read_committed must return
    every_data: list[int] = field(default_factory=list)  # offsets read_uncommitted returns
    aborted: list[tuple[int, int, int]] = field(default_factory=list)  # pid, first, last
    open: dict[int, tuple[int, list[int]]] = field(default_factory=dict)  # pid: first, offsets
    end: int = 0

    def append(self, raw: bytes) -> None:
        header = read_header(raw)
        self.batches.append((header.base_offset, header.last_offset, raw))
        self.end = header.last_offset + 1

    def send(self, pid: int, count: int, transactional: bool) -> None:
        offsets = list(range(self.end, self.end + count))
        self.every_data += offsets
        if transactional:
            _, held = self.open.setdefault(pid, (self.end, []))
            held += offsets
        else:
            self.visible += offsets
        self.append(data(self.end, count, pid=pid, txn=transactional))

    def end_txn(self, pid: int, commit: bool) -> None:
        if pid not in self.open:
            return
        first, held = self.open.pop(pid)
        if commit:
            self.visible += held
        else:
            self.aborted.append((pid, first, self.end))
        self.append(marker(self.end, pid, aborted=not commit))

    @property
    def lso(self) -> int:
        return min((first for first, _ in self.open.values()), default=self.end)

    def answer(
        self, position: int, batch_count: int, beyond: bool = False
    ) -> tuple[bytes, list[tuple[int, int]]]:
        """A leader's read_committed answer from `position`: whole batches, below the LSO,
        and the aborted transactions they overlap (Kafka's `collectAbortedTransactions`);
        with `beyond`, also those starting after the answer's last offset, as a leader
        that searches up to a segment's end names them."""
        lso = self.lso
        chosen = [b for b in self.batches if b[1] >= position and b[0] < lso][:batch_count]
        if not chosen:
            return b"", []
        upper = chosen[-1][1]
        overlapping = [
            (pid, first)
            for pid, first, last in self.aborted
            if (first <= upper or beyond) and last >= position
        ]
        return b"".join(raw for _, _, raw in chosen), overlapping


ops = st.lists(
    st.one_of(
        st.tuples(st.just("send"), st.sampled_from([1, 2, 3]), st.integers(1, 3)),
        st.tuples(st.just("plain"), st.sampled_from([-1, 20]), st.integers(1, 3)),
        st.tuples(st.just("end"), st.sampled_from([1, 2, 3]), st.booleans()),
    ),
    max_size=30,
)


def build(steps: list[tuple[str, int, object]], close_all: bool) -> Log:
    log = Log()
    for kind, pid, arg in steps:
        if kind == "send":
            log.send(pid, int(arg), transactional=True)  # type: ignore[call-overload]
        elif kind == "plain":
            log.send(pid, int(arg), transactional=False)  # type: ignore[call-overload]
        else:
            log.end_txn(pid, bool(arg))
    if close_all:
        for pid in sorted(log.open):
            log.end_txn(pid, commit=pid % 2 == 0)
    return log


@settings(max_examples=300, deadline=None)
@given(ops, st.booleans(), st.lists(st.integers(1, 4), min_size=1, max_size=8), st.booleans())
def test_read_committed_returns_exactly_the_committed_and_plain_records(
    steps: list[tuple[str, int, object]], close_all: bool, sizes: list[int], beyond: bool
) -> None:
    log = build(steps, close_all)
    lso = log.lso
    position, seen, turn = 0, [], 0
    while position < lso:
        answer, aborted = log.answer(position, sizes[turn % len(sizes)], beyond)
        turn += 1
        offsets, moved = read(answer, position, aborted, hw=log.end, lso=lso)
        assert moved > position  # every answer moves the position, even one of skipped batches
        seen += offsets
        position = moved
    assert position == lso
    assert seen == sorted(o for o in log.visible if o < lso)  # in offset order


@settings(max_examples=200, deadline=None)
@given(ops, st.lists(st.integers(1, 4), min_size=1, max_size=8))
def test_read_uncommitted_returns_every_data_record_and_no_marker(
    steps: list[tuple[str, int, object]], sizes: list[int]
) -> None:
    log = build(steps, close_all=False)
    position, seen, turn = 0, [], 0
    while position < log.end:
        chosen = [b for b in log.batches if b[1] >= position][: sizes[turn % len(sizes)]]
        turn += 1
        offsets, position = read(b"".join(raw for _, _, raw in chosen), position, None, log.end)
        seen += offsets
    assert seen == log.every_data
