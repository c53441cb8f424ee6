"""Producer client cost per record (issue #7): replog against kafka-python, same run, one core.

Usage::

    .venv/bin/python bench/client_encode.py             # 7 runs, about 30 s
    .venv/bin/python bench/client_encode.py --quick     # smoke run, a few seconds
    .venv/bin/python bench/client_encode.py --runs 11 --value-bytes 1024 --json out.json
    .venv/bin/python bench/client_encode.py --records-per-ms 1 --key-bytes 16   # harder records

What it measures: records/s on one core turning 1 KiB records into complete RecordBatch v2
bytes of `batch.size` 16384 (CRC included), the work a producer does per record before the
network. Both sides get the same records (a 1 KiB random value, no key unless `--key-bytes`,
no headers; one fixed CreateTime, or with `--records-per-ms N` a timestamp 1 ms later every N
records) and close a batch when the next record would not fit in `batch.size`:

- replog accumulator (the headline, when `replog.client.accumulator` is present): the
  producer's `RecordAccumulator` appending every record as `send` does (`try_append`, and
  `append_new` when that answers None), minus the network, with the sender draining each full
  batch (see `replog_accumulator_side`). No per-record future: kafka-python's side creates
  none either.
- replog accumulator + future per record: the same plus the asyncio future the asyncio
  producer's `send` creates per record and hands to the accumulator (which keeps it with the
  record's offset and sizes for completion). kafka-python's side has no counterpart of it
  (its producer creates one too, outside the builder measured here): reported, not the goal.
- replog BatchBuilder only: `replog.record.builder.BatchBuilder.try_append` with batch.size as
  the limit, then `build()`: the general-purpose encoder alone, which the producer does not use
  (the headline while the accumulator is missing).
- kafka-python: `DefaultRecordBatchBuilder.append(...)` until it answers None, then `build()`:
  kafka-python's own per-record encoding cost, without its producer around it.

Every figure is a median over `--runs` runs; each run times every side (the order flips every
run, so slow phases of a noisy machine hit both alike) after one unrecorded warm-up run. Each
ratio to kafka-python is the median of the per-run wall-clock ratios; the CPU-time ratio is
the ratio of the median CPU times (`thread_time`, the steadier one on a shared machine). The
goal is judged on the headline row, on the smaller of the two. Before timing, the first batch
of every replog side is compared with kafka-python's: equal bytes except the partition leader
epoch, which kafka-python writes as 0 (Java and replog: -1) and which the CRC does not cover.
Goal: replog >= 2x kafka-python.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from kafka.record.default_records import DefaultRecordBatchBuilder

from replog.record.builder import BatchBuilder
from replog.record.compression import CODEC_NAMES

GOAL = 2.0
ACCUMULATOR = "replog accumulator"
ACCUMULATOR_FUTURES = "replog accumulator + future per record"
BUILDER = "replog BatchBuilder only"
KAFKA_PYTHON = "kafka-python builder"
TIMESTAMP_MS = 1_700_000_000_000
# bytes 12..16 of a batch: the partition leader epoch (outside the CRC)
_EPOCH = slice(12, 16)


@dataclass(frozen=True)
class Workload:
    records: int
    value: bytes
    key: bytes | None
    batch_size: int
    compression: int
    timestamps: tuple[int, ...]  # one per record

    @property
    def record_bytes(self) -> int:
        return len(self.value) + (len(self.key) if self.key else 0)


@dataclass
class Timing:
    wall_s: float
    cpu_s: float
    batches: int
    batch_bytes: int


Side = Callable[[Workload], Timing]


def timed(work: Callable[[], tuple[int, int]]) -> Timing:
    wall, cpu = time.perf_counter(), time.thread_time()
    batches, size = work()
    return Timing(time.perf_counter() - wall, time.thread_time() - cpu, batches, size)


# --- the two sides -----------------------------------------------------------------------------


def replog_builder_side(w: Workload) -> Timing:
    """replog's BatchBuilder with the accumulator's rule, `try_append` with batch.size as the
    limit: a record that would take the open batch past batch.size (on its exact encoded size)
    closes it first (a first record always goes in)."""
    value, key, limit, codec = w.value, w.key, w.batch_size, w.compression

    def work() -> tuple[int, int]:
        batches = size = 0
        builder = BatchBuilder(compression=codec)
        try_append = builder.try_append
        for timestamp in w.timestamps:
            if try_append(timestamp, key, value, size_limit=limit) < 0:
                size += len(builder.build())
                batches += 1
                builder = BatchBuilder(compression=codec)
                try_append = builder.try_append
                try_append(timestamp, key, value, size_limit=limit)
        size += len(builder.build())
        return batches + 1, size

    return timed(work)


def replog_accumulator_side(*, futures: bool) -> Side | None:
    """The producer's path, or None while `replog.client.accumulator` is absent.

    What `send` does per record once it knows the partition, minus the network: append the
    record to the partition's open batch in `RecordAccumulator` (batch.size decision, encoding,
    bookkeeping; a new batch when it does not fit, as the producer's `_append` does) and, with
    `futures`, first create its asyncio future, as the asyncio producer does. Whenever a record
    starts a new batch, the sender's `drain` takes the full one (built there: header, CRC) and
    its memory is returned, as after a delivery. Left out: the partitioner and serializers
    (none here: raw bytes, partition known) and completing the futures after delivery.
    """
    try:
        from replog.client.accumulator import RecordAccumulator
    except ImportError:
        return None
    from replog.common import TopicPartition

    def leader_of(_: TopicPartition) -> int:
        return 0

    def node_ready(_: int) -> bool:
        return True

    def side(w: Workload) -> Timing:
        value, key = w.value, w.key
        tp = TopicPartition("bench", 0)
        loop = asyncio.new_event_loop()
        accumulator = RecordAccumulator(
            batch_size=w.batch_size, linger_ms=2**40, compression=w.compression
        )

        def work() -> tuple[int, int]:
            batches = size = 0
            try_append, append_new = accumulator.try_append, accumulator.append_new
            drain, deallocate = accumulator.drain, accumulator.deallocate
            new_future = loop.create_future if futures else None
            open_batch = None
            for timestamp in w.timestamps:
                handle = new_future() if new_future is not None else None
                # as the producer's _append: the open batch, else a new one
                batch = try_append(tp, timestamp, key, value, (), handle)
                if batch is None:
                    batch = append_new(tp, timestamp, key, value, (), handle)
                if batch is not open_batch:
                    if open_batch is not None:
                        for drained in drain(0, leader_of, node_ready, 2**31).by_node.values():
                            for done in drained:
                                size += len(done.close())
                                batches += 1
                                deallocate(done)
                    open_batch = batch
            for done in accumulator.drain_all():
                size += len(done.close())
                batches += 1
                deallocate(done)
            return batches, size

        try:
            return timed(work)
        finally:
            loop.close()

    return side


def kafka_python_side(w: Workload) -> Timing:
    value, key, limit, codec = w.value, w.key, w.batch_size, w.compression

    def new() -> DefaultRecordBatchBuilder:
        return DefaultRecordBatchBuilder(
            magic=2,
            compression_type=codec,
            is_transactional=False,
            producer_id=-1,
            producer_epoch=-1,
            base_sequence=-1,
            batch_size=limit,
        )

    def work() -> tuple[int, int]:
        batches = size = 0
        builder = new()
        offset = 0
        for timestamp in w.timestamps:
            if builder.append(offset, timestamp, key, value, []) is None:
                size += len(builder.build())
                batches += 1
                builder = new()
                offset = 0
                builder.append(offset, timestamp, key, value, [])
            offset += 1
        size += len(builder.build())
        return batches + 1, size

    return timed(work)


def check_same_batches(w: Workload) -> None:
    """The first full batch of kafka-python and of each replog encoder: same bytes but the
    leader epoch (uncompressed), else the same record count."""
    theirs = DefaultRecordBatchBuilder(2, w.compression, False, -1, -1, -1, w.batch_size)
    offset = 0
    while offset < len(w.timestamps) and (
        theirs.append(offset, w.timestamps[offset], w.key, w.value, []) is not None
    ):
        offset += 1
    other = theirs.build()
    builder = BatchBuilder(compression=w.compression)
    for timestamp in w.timestamps[:offset]:
        builder.append(timestamp, w.key, w.value)
    candidates = {BUILDER: builder.build()}
    try:
        from replog.client.accumulator import encode_batches
    except ImportError:
        pass
    else:
        records = [(timestamp, w.key, w.value) for timestamp in w.timestamps[: offset + 1]]
        candidates[ACCUMULATOR] = encode_batches(
            records, batch_size=w.batch_size, compression=w.compression
        )[0]
    for name, batch in candidates.items():
        mine = bytearray(batch)
        if w.compression == 0:
            mine[_EPOCH] = other[_EPOCH]
            if bytes(mine) != bytes(other):
                sys.exit(f"{name}: its batch differs from kafka-python's: the benchmark is void")
        elif int.from_bytes(mine[57:61], "big") != offset:  # records count
            sys.exit(f"{name}: replog and kafka-python fit different record counts in a batch")


# --- runs and report ---------------------------------------------------------------------------


def one_run(sides: dict[str, Side], w: Workload, flip: bool) -> dict[str, Timing]:
    order = list(sides)
    if flip:
        order.reverse()
    return {name: sides[name](w) for name in order}


def summary(timings: list[Timing], w: Workload) -> dict[str, float]:
    wall = statistics.median(t.wall_s for t in timings)
    cpu = statistics.median(t.cpu_s for t in timings)
    rates = sorted(w.records / t.wall_s for t in timings)
    return {
        "records_s": w.records / wall,
        "records_s_min": rates[0],
        "records_s_max": rates[-1],
        "cpu_records_s": w.records / cpu,
        "mb_s": w.records * w.record_bytes / wall / 1e6,
        "ns_per_record": wall / w.records * 1e9,
        "batches": float(timings[0].batches),
        "batch_bytes": timings[0].batch_bytes / timings[0].batches,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, help="measured runs (default 7, quick 3)")
    parser.add_argument("--records", type=int, help="records per side and run (default 300000)")
    parser.add_argument("--value-bytes", type=int, default=1024)
    parser.add_argument("--key-bytes", type=int, default=0, help="0: null keys")
    parser.add_argument("--batch-size", type=int, default=16384)
    parser.add_argument("--compression", choices=list(CODEC_NAMES.values()), default="none")
    parser.add_argument(
        "--records-per-ms",
        type=int,
        default=0,
        help="timestamps 1 ms apart every N records (default 0: one fixed timestamp)",
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: fewer, shorter runs")
    parser.add_argument("--json", metavar="FILE", help="also write every figure to this file")
    args = parser.parse_args(argv)
    runs = args.runs or (3 if args.quick else 7)
    records = args.records or (50_000 if args.quick else 300_000)
    codec = {name: codec for codec, name in CODEC_NAMES.items()}[args.compression]
    rng = os.urandom
    w = Workload(
        records=records,
        value=rng(args.value_bytes),
        key=rng(args.key_bytes) if args.key_bytes else None,
        batch_size=args.batch_size,
        compression=codec,
        timestamps=tuple(
            TIMESTAMP_MS + (i // args.records_per_ms if args.records_per_ms else 0)
            for i in range(records)
        ),
    )
    check_same_batches(w)
    accumulator = replog_accumulator_side(futures=False)
    with_futures = replog_accumulator_side(futures=True)
    sides: dict[str, Side] = {}
    if accumulator is not None and with_futures is not None:
        sides[ACCUMULATOR] = accumulator
        sides[ACCUMULATOR_FUTURES] = with_futures
    sides[BUILDER] = replog_builder_side
    sides[KAFKA_PYTHON] = kafka_python_side
    headline = ACCUMULATOR if accumulator is not None else BUILDER
    print(
        f"# client encode: {records:,} records/run of {args.value_bytes} B values, key "
        f"{args.key_bytes or 'null'}, batch.size {args.batch_size}, compression "
        f"{args.compression}, timestamps "
        f"{f'+1 ms every {args.records_per_ms} records' if args.records_per_ms else 'all equal'}"
        f"; {runs} runs (+1 warm-up), medians"
    )
    print(
        f"# python {platform.python_version()}, {platform.machine()}, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    if accumulator is None:
        print("# replog.client.accumulator is missing: the BatchBuilder path is the headline")
    one_run(sides, w, flip=False)  # warm-up
    history: dict[str, list[Timing]] = {name: [] for name in sides}
    ratios: dict[str, list[float]] = {name: [] for name in sides if name != KAFKA_PYTHON}
    for run in range(runs):
        result = one_run(sides, w, flip=run % 2 == 1)
        for name, timing in result.items():
            history[name].append(timing)
        for name, values in ratios.items():
            values.append(result[KAFKA_PYTHON].wall_s / result[name].wall_s)
        print(
            f"run {run + 1}: "
            + ", ".join(f"{n} {records / t.wall_s:,.0f}" for n, t in result.items())
            + " records/s",
            flush=True,
        )
    figures = {name: summary(timings, w) for name, timings in history.items()}
    theirs = figures[KAFKA_PYTHON]
    print(
        "\n| side | records/s [min-max] | MB/s | ns/record | CPU records/s | batch bytes "
        "| ratio to kafka-python [range] | CPU-time ratio |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, f in figures.items():
        if name in ratios:
            cpu_ratio = f["cpu_records_s"] / theirs["cpu_records_s"]
            versus = (
                f"{statistics.median(ratios[name]):.2f}x [{min(ratios[name]):.2f}-"
                f"{max(ratios[name]):.2f}] | {cpu_ratio:.2f}x"
            )
        else:
            versus = "1 | 1"
        print(
            f"| {name} | {f['records_s']:,.0f} [{f['records_s_min']:,.0f}-"
            f"{f['records_s_max']:,.0f}] | {f['mb_s']:,.0f} | {f['ns_per_record']:,.0f} | "
            f"{f['cpu_records_s']:,.0f} | {f['batch_bytes']:,.0f} | {versus} |"
        )
    print()
    for name in ratios:
        ratio = statistics.median(ratios[name])
        cpu_ratio = figures[name]["cpu_records_s"] / theirs["cpu_records_s"]
        if name == headline:
            verdict = "met" if min(ratio, cpu_ratio) >= GOAL else "MISSED"
            note = f"goal >= {GOAL:.0f}x: {verdict}"
        elif name == ACCUMULATOR_FUTURES:
            note = "reported: kafka-python's side creates no future"
        else:
            note = "reported: the general-purpose encoder, not the producer's path"
        print(f"{name} / kafka-python: {ratio:.2f}x wall-clock, {cpu_ratio:.2f}x CPU time; {note}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(
                {"figures": figures, "ratios": ratios, "headline": headline, "args": vars(args)},
                out,
                indent=2,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
