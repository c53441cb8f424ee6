"""read_committed against a model, through a leader `Partition` on a real `LogManager` (in
memory, small segments): for any run of transactional and plain batches and COMMIT or ABORT
markers, a read below the LSO filtered as Kafka's consumer filters it (the aborted
transactions the log collects; a batch of an aborted producer skipped up to its ABORT) gives
exactly the records the model says are committed; a restart that rebuilds the producer state
and, after a crash, the `.txnindex` files, gives the same files and the same reads."""

from __future__ import annotations

from collections.abc import Iterator

from hypothesis import given, settings
from hypothesis import strategies as st

from replog.record import RecordBatch, build_batch, iter_frames, read_header
from replog.record.control_record import CONTROL_ABORT, EndTxnMarker, encode_marker, marker_type
from replog.server.data_plane.partition import Partition
from replog.storage.aborted_transactions import AbortedTransaction
from replog.storage.log_config import LogConfig
from replog.storage.log_manager import LogManager
from replog.storage.memory_fs import MemoryFileSystem
from replog.testing import ManualClock
from tests.server.data_plane.test_partition import T0, lead, registration
from tests.server.data_plane.test_replica_manager import TID

CONFIG = LogConfig(segment_bytes=400)  # a few batches a segment: entries across segments
PRODUCERS = (1, 2, 3)

# A step: (producer id, "txn" data, "commit" or "abort" marker), or ("plain", n) n plain records.
_steps = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(PRODUCERS), st.sampled_from(["txn", "txn", "commit", "abort"])),
        st.tuples(st.just("plain"), st.integers(1, 3)),
    ),
    min_size=1,
    max_size=40,
)


class Model:
    """Which offsets hold which records, and which a read_committed consumer may see."""

    def __init__(self) -> None:
        self.records: list[tuple[int, int, int | None]] = []  # (offset, producer, txn id)
        self.open: dict[int, tuple[int, int]] = {}  # producer -> (txn id, first offset)
        self.outcome: dict[int, bool] = {}  # txn id -> committed
        self.next_txn = 0

    def data(self, offset: int, count: int, producer: int | None) -> None:
        txn = None
        if producer is not None:
            if producer not in self.open:
                self.open[producer] = (self.next_txn, offset)
                self.next_txn += 1
            txn = self.open[producer][0]
        for i in range(count):
            self.records.append((offset + i, producer or -1, txn))

    def marker(self, producer: int, committed: bool) -> None:
        if producer in self.open:
            self.outcome[self.open.pop(producer)[0]] = committed

    def lso(self, end: int) -> int:
        return min([first for _, first in self.open.values()] + [end])

    def committed_from(self, start: int, end: int) -> list[int]:
        bound = self.lso(end)
        return [
            offset
            for offset, _, txn in self.records
            if start <= offset < bound and (txn is None or self.outcome.get(txn, False))
        ]


def kafka_consumer_filter(records: bytes, aborted: list[AbortedTransaction]) -> Iterator[int]:
    """The offsets Kafka's consumer keeps (`CompletedFetch.nextFetchedRecord`)."""
    pending = sorted(aborted, key=lambda a: a.first_offset)
    aborted_producers: set[int] = set()
    for position, _ in iter_frames(records):
        batch = RecordBatch.parse(records, position)
        while pending and pending[0].first_offset <= batch.last_offset:
            aborted_producers.add(pending.pop(0).producer_id)
        if batch.is_control:
            (record,) = batch.records()
            if marker_type(record.key) == CONTROL_ABORT:
                aborted_producers.discard(batch.producer_id)
            continue
        if batch.is_transactional and batch.producer_id in aborted_producers:
            continue
        yield from (record.offset for record in batch.records())


def leader(fs: MemoryFileSystem) -> tuple[Partition, LogManager]:
    manager = LogManager("/logs", CONFIG, fs=fs, clock=ManualClock(T0))
    plog = manager.get_or_create_log("t", 0)
    partition = Partition(
        topic="t", topic_id=TID, partition=0, local_broker_id=1, log=plog, log_manager=manager
    )
    lead(partition, registration(replicas=(1,), isr=(1,)))
    return partition, manager


def read_committed(partition: Partition, start: int) -> list[int]:
    """A consumer's fetches from `start` until one brings nothing (a read stays within one
    segment), each with the aborted transactions of its own range, as the leader answers."""
    plog = partition.log
    bound = partition.last_stable_offset(plog.log_end_offset)
    offsets: list[int] = []
    position = start
    while records := plog.read(position, 1 << 20, bound):
        aborted = plog.collect_aborted_transactions(position, bound)
        offsets += [o for o in kafka_consumer_filter(records, aborted) if o >= start]
        position = max(read_header(records, p).next_offset for p, _ in iter_frames(records))
    return offsets


def txn_indexes(fs: MemoryFileSystem) -> dict[str, bytes | None]:
    return {
        name: fs.read_bytes(f"/logs/t-0/{name}")
        for name in fs.list_dir("/logs/t-0")
        if name.endswith(".txnindex")
    }


@settings(max_examples=40, deadline=None)
@given(_steps, st.data())
def test_read_committed_reads_exactly_the_committed_records(steps, data) -> None:
    fs = MemoryFileSystem(clock=ManualClock(T0))
    partition, manager = leader(fs)
    model = Model()
    sequences = dict.fromkeys(PRODUCERS, 0)
    for step in steps:
        offset = partition.log.log_end_offset
        if step[0] == "plain":
            count = step[1]
            partition.append_as_leader(
                build_batch([(T0, b"k", b"plain", ())] * count), partition.leader_epoch
            )
            model.data(offset, count, None)
            continue
        producer, kind = step
        if kind == "txn":
            partition.append_as_leader(
                build_batch(
                    [(T0, b"k", b"txn", ())],
                    producer_id=producer,
                    producer_epoch=0,
                    base_sequence=sequences[producer],
                    is_transactional=True,
                ),
                partition.leader_epoch,
            )
            sequences[producer] += 1
            model.data(offset, 1, producer)
        else:
            key, value = encode_marker(EndTxnMarker(kind == "abort", 0))
            partition.append_marker_as_leader(
                build_batch(
                    [(T0, key, value, ())],
                    producer_id=producer,
                    producer_epoch=0,
                    is_transactional=True,
                    is_control=True,
                ),
                partition.leader_epoch,
            )
            model.marker(producer, kind == "commit")
    end = partition.log.log_end_offset
    starts = sorted({0, *(data.draw(st.integers(0, end - 1)) for _ in range(3))})
    # Start at a batch boundary, as a consumer does (its position is after what it read).
    bases = [h.base_offset for h in partition.log.batch_headers(0)]
    starts = [max(b for b in bases if b <= s) for s in starts]
    for start in starts:
        assert read_committed(partition, start) == model.committed_from(start, end)
    assert partition.last_stable_offset(end) == model.lso(end)

    indexes = txn_indexes(fs)
    manager.close_after_failure()  # a crash of the process: the page cache keeps the files
    again, again_manager = leader(fs)
    try:
        assert txn_indexes(fs) == indexes
        for start in starts:
            assert read_committed(again, start) == model.committed_from(start, end)
        assert again.last_stable_offset(end) == model.lso(end)
    finally:
        again_manager.close_after_failure()
