"""Produce benchmark (issue #6): replog's replicated produce path against NATS JetStream and the
page cache, all measured in one run.

Workload (both systems): 1 KiB records, replication factor 3 on a 3-node local cluster, the
producer acknowledged only once the record is committed by the replicas (replog acks=all with
min.insync.replicas=2; JetStream's publish ack, sent after the stream's Raft group stored it).

Each run (`--runs N`, default 3) does, in order:

1. Baseline: page-cache write bandwidth. 1 MiB `os.write`s of one random block to a new file
   in the run's temporary directory, 1 GiB, no fsync (like the peers' `fio ...
   pagecache_no_sync`), the file deleted after each pass. This VM hands freed memory back to
   its host (virtio-balloon free page reporting, about 2 s after it is freed), and a page the
   host took back costs a fault to touch again: a pass right after the previous one's delete
   reuses its pages at 4-6 GB/s, one 2 s or more after it writes at 0.9-1.9 GB/s. The servers
   write in the second regime (every trial's topic is deleted, its pages reported, before the
   next trial writes), and so did the issue's reference figure (1.0-1.4 GB/s), so the goal's
   baseline is the median of 3 passes each started 5 s after the last delete; the median of
   3 back-to-back passes is printed beside it. One untimed pass comes first: memory never
   touched since the VM booted is slower still (0.3-0.6 GB/s). The host takes memory back
   at its own pace: after a large free it may not have yet (one pass of three at 5 GB/s),
   and after the 256 MiB passes of `--quick` it had not at all (all at 5.5 GB/s).
2. NATS JetStream: three `nats-server` processes (Debian's 2.9) in one cluster, a stream with 3
   replicas and file storage per partition (`--partitions`, default 1), started and stopped
   here. Publishers (one connection each, to the stream leader's server) publish 1 KiB
   messages with `publish_async`, keeping at most W un-acked, W = the records of one replog
   batch (64, 256 or 1,023): the same bytes in flight per producer as replog.
3. replog: `replog cluster start` with 3 combined broker+controller nodes (data in the run's
   temporary directory); a topic with replication factor 3 and min.insync.replicas=2 per trial
   (created with the admin client, deleted after, so every trial starts on an empty log; the
   next trial waits until no node holds the deleted topic's files, which brokers remove on a
   background thread).
   Producers (one `KafkaBrokerClient` each, on the leaders' Kafka listeners) send real v2
   batches of 1 KiB records (64 KiB, 256 KiB, 1 MiB; built once with `replog.record.builder`
   and re-sent, each produce a real append) to the partition leader with acks=-1, pipelined on
   one connection each (as the client library's producer sends), one request in flight each in
   the throughput trials.

For each system: closed-loop throughput for every batch size x producer count (the peak is
the best records/s), then produce latency at 50% of that peak (paced: records arrive on
schedule whatever the answers do, and latency is counted from the scheduled send time, so a
stall is not hidden). replog's paced
batches are what a producer with `linger.ms` = 5 (Kafka 4.0's default) fills at that rate:
the records that arrive in 5 ms, within 64-1023 (`paced_batch_records`: 500 records, 500 KiB,
at 100k records/s), as a 1 MiB batch would hold its first record 8-16 ms before sending it;
JetStream publishes every message at once. When answers are slow, replog's paced producer does
what Kafka's does (`PacedProducer`): at most 5 requests unanswered
(`max.in.flight.requests.per.connection`); the windows that close meanwhile wait and then go
in batches of up to 1,023 records (`batch.size` = the largest throughput batch), each window
still timed from its due time, so the wait counts: a stall is followed by a few full batches,
not by hundreds of 5 ms ones queued behind it. Each paced trial counts only after 2 s at its
rate (`PACED_WARM_UP_S`, both systems). Then end-to-end latency at 50% of
peak: the same paced producer with its send time stamped in the first record of each batch
(every NATS message), and a consumer in this process receiving the committed records (replog:
Kafka Fetch requests at the leader, one after another on one connection, served only up to the
high watermark; JetStream:
an ordered push consumer). Latency of a window counts for its records; the time a record
would wait in a filling window is not counted (about 5 ms, see above). A paced trial's line
also says where its slowest 1% of sends (windows) came from (`slow_episodes`): how many
stalls, and the longest one's place in the trial, its sends and its worst latency, since one
stall can decide a p99.
Each paced trial (both systems) starts once the VM has stopped handing the previous trial's
freed memory back to its host (`wait_for_page_reporting_idle`; its line says how long that
took): the host takes it back in bursts that stop the whole VM for 50-350 ms, so a paced
trial right after a deleted topic measured that clean-up, not the system.

The table compares in one run and states the issue's goals: records/s >= 5x JetStream's;
replog MB/s >= 40% of (page-cache bandwidth / 3), the three replicas sharing one machine's
page cache; end-to-end p99 <= 20 ms at 50% of peak. With several runs it then prints each
figure's median over the runs (ratios are taken within a run, then their median).

    .venv/bin/python bench/produce.py                  # 3 runs, about 10 minutes
    .venv/bin/python bench/produce.py --quick          # smoke run, about 1 minute
    .venv/bin/python bench/produce.py --runs 5 --json out.json

`bash bench/install_nats.sh` installs nats-server (Debian) and nats-py when missing. Ports:
19720-19722 (replog), 14323-14325 and 16323-16325 (NATS). Every server started is stopped on
exit, and servers left by an interrupted earlier run (found by their data directory under
$TMPDIR/replog-bench-produce-*) are killed at start. The benchmark process tunes glibc to keep
its large buffers (`replog.server.runtime.allocator`, as the nodes do), so the load generator does
not fault in fresh pages per batch.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

# Run as `python bench/produce.py`, Python puts bench/ first on sys.path, where bench/timeline.py
# would shadow the timeline package that replog imports: put the checkout there instead.
_BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _BENCH_DIR]
sys.path.insert(0, os.path.dirname(_BENCH_DIR))

# The benchmark's client runs on the same gRPC engine as the nodes (replog/wire/grpc_engine.py); it
# must be chosen before grpc is imported.
from replog.wire.grpc_engine import choose_grpc_engine  # noqa: E402

choose_grpc_engine()

from crc32c import crc32c  # noqa: E402

from replog.admin.controller_client import ControllerClient  # noqa: E402
from replog.admin.controller_results import NewTopic  # noqa: E402
from replog.cli.local_cluster import LocalCluster  # noqa: E402
from replog.errors import ReplogError  # noqa: E402
from replog.record.batch import iter_batches  # noqa: E402
from replog.record.builder import BatchBuilder, build_batch  # noqa: E402
from replog.record.header import LOG_OVERHEAD, RECORD_BATCH_OVERHEAD  # noqa: E402
from replog.record.varint import decode_varint  # noqa: E402
from replog.replication import messages as msg  # noqa: E402
from replog.server.runtime.allocator import keep_large_buffers  # noqa: E402
from replog.storage.log_dir_names import (  # noqa: E402
    DELETE_DIR_SUFFIX,
    parse_topic_partition,
    renamed_topic_partition,
)
from replog.wire.kafka_broker_client import KafkaBrokerClient  # noqa: E402
from replog.wire.kafka_connection import KafkaConnections  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
KiB = 1024
MiB = 1024 * KiB
RECORD_BYTES = 1024  # a NATS payload; a replog record's encoded size (value + its framing)
RECORD_VALUE_BYTES = 1014  # with ~10 bytes of record framing, 1 KiB (as in bench/storage.py)
# Records per batch for each nominal size; 1,024 records would exceed max.message.bytes.
BATCH_RECORDS = {64: 64, 256: 256, 1024: 1023}
# The paced trials' batches are what a producer with this linger fills at the paced rate
# (Kafka 4.0's default `linger.ms`, KIP-1030): see `paced_batch_records`.
PRODUCER_LINGER_MS = 5.0
# A paced trial first runs this long at its rate without counting (OpenMessaging Benchmark
# discards a warm-up the same way): without it, every paced trial of a full run had its
# slowest 1% in one 32-306 ms stall in its first second, with no event loop silent for 15 ms;
# likely (not proven) a new topic's first ~64 MiB per replica going into page cache the VM
# has handed back to its host (docs/benchmarks.md, "Produce path").
PACED_WARM_UP_S = 2.0
# A paced trial's producer keeps at most this many requests unanswered per partition (Kafka's
# and the client library's `max.in.flight.requests.per.connection`): `PacedProducer`.
PRODUCER_MAX_IN_FLIGHT = 5
# The send time (perf_counter_ns, big-endian int64) follows this marker in the first record's
# value (every NATS message's payload): the consumer computes end-to-end latency from it.
STAMP_MARKER = b"replog-bench-ts:"
STAMP = struct.Struct(">q")
# RecordBatch v2's header fields a batch of fewer records changes (`BatchShape.first_records`).
BATCH_LENGTH_AT = 8  # the bytes after base offset and this field (LOG_OVERHEAD)
CRC_AT = 17  # the CRC-32C, covering bytes [21, end)
CRC_COVERED_FROM = 21
LAST_OFFSET_DELTA_AT = 23
RECORDS_COUNT_AT = 57  # the header's last field: records follow (RECORD_BATCH_OVERHEAD)
TEMP_PREFIX = "replog-bench-produce-"
REPLOG_BASE_PORT = 19720
NATS_CLIENT_PORT = 14322  # node i (1..3): client port + i, route port NATS_ROUTE_PORT + i
NATS_ROUTE_PORT = 16322
PRODUCE_TIMEOUT_MS = 30_000
FETCH_MAX_WAIT_MS = 500
TICKS = os.sysconf("SC_CLK_TCK")


# --- the records ------------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchShape:
    """One replog batch of `records` 1 KiB records, built once and re-sent."""

    nominal_kib: int
    records: int
    data: bytes
    stamp_at: int  # where the 8-byte send time sits in `data`
    record_ends: tuple[int, ...]  # where each record ends in `data`

    def first_records(self, count: int, stamp_ns: int) -> bytes:
        """A batch of this one's first `count` records, `stamp_ns` as the first one's send time.
        A valid batch: its records' offset deltas run 0..count-1, so the header's length,
        last offset delta, count and CRC are all that change."""
        if not 0 < count <= self.records:
            raise ValueError(f"a batch of {count} records from a shape of {self.records}")
        end = self.record_ends[count - 1]
        buf = bytearray(memoryview(self.data)[:end])
        struct.pack_into(">i", buf, BATCH_LENGTH_AT, end - LOG_OVERHEAD)
        struct.pack_into(">i", buf, LAST_OFFSET_DELTA_AT, count - 1)
        struct.pack_into(">i", buf, RECORDS_COUNT_AT, count)
        STAMP.pack_into(buf, self.stamp_at, stamp_ns)
        struct.pack_into(">I", buf, CRC_AT, crc32c(memoryview(buf)[CRC_COVERED_FROM:]))
        return bytes(buf)


def make_shape(nominal_kib: int, records: int | None = None) -> BatchShape:
    """A batch of `records` 1 KiB records (default: the nominal size's `BATCH_RECORDS`)."""
    if records is None:
        records = BATCH_RECORDS[nominal_kib]
    now_ms = int(time.time() * 1000)
    builder = BatchBuilder()
    first = STAMP_MARKER + bytes(STAMP.size) + os.urandom(RECORD_VALUE_BYTES - 24)
    builder.append(now_ms, None, first)
    values = [os.urandom(RECORD_VALUE_BYTES) for _ in range(16)]
    for i in range(1, records):
        builder.append(now_ms, None, values[i % len(values)])
    data = builder.build()
    stamp_at = data.index(STAMP_MARKER) + len(STAMP_MARKER)
    return BatchShape(nominal_kib, records, data, stamp_at, record_ends(data, records))


def record_ends(data: bytes, records: int) -> tuple[int, ...]:
    """Where each of a v2 batch's `records` ends: each record is its length (a varint) and
    that many bytes."""
    ends = []
    position = RECORD_BATCH_OVERHEAD
    for _ in range(records):
        length, position = decode_varint(data, position, len(data))
        position += length
        ends.append(position)
    if position != len(data):
        raise ValueError(f"{records} records end at byte {position} of a {len(data)}-byte batch")
    return tuple(ends)


def nats_payload(stamp_ns: int, filler: bytes) -> bytes:
    return STAMP_MARKER + STAMP.pack(stamp_ns) + filler


def read_stamp(value: bytes | None) -> int | None:
    if value is None or not value.startswith(STAMP_MARKER):
        return None
    return int(STAMP.unpack_from(value, len(STAMP_MARKER))[0])


# --- results ----------------------------------------------------------------------------------


def percentile_ms(latencies_s: Sequence[float], q: float) -> float:
    if not latencies_s:
        return float("nan")
    ordered = sorted(latencies_s)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index] * 1000.0


@dataclass(frozen=True)
class Stall:
    """A run of slow sends in a trial: seconds from the trial's first send."""

    start_s: float
    end_s: float
    count: int
    worst_s: float

    def summary(self) -> dict[str, float]:
        return {
            "start_s": round(self.start_s, 2),
            "end_s": round(self.end_s, 2),
            "count": self.count,
            "worst_ms": round(self.worst_s * 1000, 1),
        }


def slow_episodes(
    latencies_s: Sequence[float], ended_at_s: Sequence[float], gap_s: float = 0.2
) -> list[Stall]:
    """The slowest 1% of sends (at least one), grouped into stalls: sends that ended within
    `gap_s` of each other belong to one. Tells one stall that decides a p99 (the case of a
    paced trial's ~2,000 sends, whose p99 is the 20th slowest) from slowness spread over it."""
    if not latencies_s:
        return []
    sends = list(zip(ended_at_s, latencies_s, strict=True))
    first_send = min(at - latency for at, latency in sends)
    slowest = sorted(sends, key=lambda send: send[1], reverse=True)[: max(1, len(sends) // 100)]
    stalls: list[Stall] = []
    for at, latency in sorted(slowest):
        at -= first_send
        last = stalls[-1] if stalls else None
        if last is not None and at - last.end_s <= gap_s:
            stalls[-1] = Stall(last.start_s, at, last.count + 1, max(last.worst_s, latency))
        else:
            stalls.append(Stall(at, at, 1, latency))
    return stalls


@dataclass
class Trial:
    system: str  # "replog" | "nats"
    kind: str  # "throughput" | "latency" | "e2e"
    batch_kib: int
    producers: int
    records: int
    bytes: int
    seconds: float
    latencies_s: list[float] = field(default_factory=list)  # produce, per request/message
    e2e_s: list[float] = field(default_factory=list)  # end to end, per batch/message
    errors: int = 0
    first_error: str = ""
    target_records_s: float | None = None
    cpu: dict[str, float] = field(default_factory=dict)  # cores used (CpuMeter)
    # When each latency above ended (perf_counter seconds), to place the slow ones in the trial.
    latencies_at_s: list[float] = field(default_factory=list)
    e2e_at_s: list[float] = field(default_factory=list)
    # A paced trial's wait for the VM's free page reporting to go idle before it (None: no
    # such counter here; `wait_for_page_reporting_idle`).
    page_reporting_wait_s: float | None = None
    # A paced trial counts the sends due from this perf_counter time on; the ones before it
    # (`warm_up_s` at the same rate) are not counted (`PACED_WARM_UP_S`).
    counted_from_s: float = 0.0
    warm_up_s: float = 0.0

    def add_latency(self, seconds: float) -> None:
        now = time.perf_counter()
        if now - seconds >= self.counted_from_s:
            self.latencies_s.append(seconds)
            self.latencies_at_s.append(now)

    def add_e2e(self, seconds: float, at_s: float) -> None:
        if at_s - seconds >= self.counted_from_s:
            self.e2e_s.append(seconds)
            self.e2e_at_s.append(at_s)

    def start_counting_after(self, warm_up_s: float) -> None:
        """Count only the sends due `warm_up_s` from now on."""
        self.warm_up_s = warm_up_s
        self.counted_from_s = time.perf_counter() + warm_up_s

    def stalls(self) -> list[Stall]:
        """Where the slowest 1% of a paced trial came from: end to end if measured, else
        produce latency."""
        if self.e2e_s:
            return slow_episodes(self.e2e_s, self.e2e_at_s)
        return slow_episodes(self.latencies_s, self.latencies_at_s)

    @property
    def records_s(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    @property
    def mb_s(self) -> float:
        return self.bytes / self.seconds / 1e6 if self.seconds > 0 else 0.0

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "system": self.system,
            "kind": self.kind,
            "batch_kib": self.batch_kib,
            "producers": self.producers,
            "records_s": round(self.records_s, 1),
            "MB_s": round(self.mb_s, 2),
            "p50_ms": round(percentile_ms(self.latencies_s, 0.5), 3),
            "p99_ms": round(percentile_ms(self.latencies_s, 0.99), 3),
            "errors": self.errors,
            "cpu": self.cpu,
        }
        if self.e2e_s:
            out["e2e_p50_ms"] = round(percentile_ms(self.e2e_s, 0.5), 3)
            out["e2e_p99_ms"] = round(percentile_ms(self.e2e_s, 0.99), 3)
        if self.target_records_s is not None:
            out["target_records_s"] = round(self.target_records_s, 1)
            out["slowest_1pct_stalls"] = [stall.summary() for stall in self.stalls()]
            out["page_reporting_wait_s"] = (
                None if self.page_reporting_wait_s is None else round(self.page_reporting_wait_s, 1)
            )
            out["warm_up_s"] = self.warm_up_s
        if self.first_error:
            out["first_error"] = self.first_error
        return out

    def line(self) -> str:
        size = f"{self.batch_kib:>4} KiB" if self.batch_kib else "   1 msg"
        what = f"{self.system:6} {self.kind:10} {size} x{self.producers:<2}"
        text = (
            f"  {what} {self.records_s:>10,.0f} rec/s {self.mb_s:>8.1f} MB/s  "
            f"p50 {percentile_ms(self.latencies_s, 0.5):7.2f} ms  "
            f"p99 {percentile_ms(self.latencies_s, 0.99):7.2f} ms"
        )
        if self.e2e_s:
            text += (
                f"  e2e p50 {percentile_ms(self.e2e_s, 0.5):7.2f} ms"
                f"  p99 {percentile_ms(self.e2e_s, 0.99):7.2f} ms"
            )
        if self.target_records_s is not None:
            text += f"  (target {self.target_records_s:,.0f} rec/s"
            if self.page_reporting_wait_s is not None:
                text += f"; page reporting idle after {self.page_reporting_wait_s:.0f} s"
            if self.warm_up_s:
                text += f"; first {self.warm_up_s:g} s not counted"
            text += ")"
            stalls = self.stalls()
            if stalls:
                longest = max(stalls, key=lambda stall: stall.count)
                text += (
                    f"  slowest 1%: {len(stalls)} stall(s), the longest {longest.start_s:.1f}-"
                    f"{longest.end_s:.1f} s into the trial ({longest.count} sends, worst "
                    f"{longest.worst_s * 1000:.0f} ms)"
                )
        if self.cpu:
            text += (
                f"  cpu client {self.cpu['client']:.2f} servers {self.cpu['servers']:.2f}"
                f" (busiest {self.cpu['busiest_server']:.2f})"
                f" machine {self.cpu['machine']:.2f} steal {self.cpu['steal']:.2f}"
            )
        if self.errors:
            text += f"  ERRORS {self.errors}: {self.first_error}"
        return text


# --- CPU accounting (to tell client-bound from server-bound trials, and noise) -----------------


def _process_cpu_s(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS
    except (OSError, IndexError, ValueError):
        return 0.0


def machine_times_s(cpu_line: str) -> tuple[float, float]:
    """(busy, steal) seconds summed over all CPUs from /proc/stat's first line ("cpu user nice
    system idle iowait irq softirq steal guest guest_nice", in clock ticks). Busy is what this
    machine ran; steal is time its virtual CPUs wanted to run while the host ran something
    else, neither the servers' nor the client's work, yet taken from the cores a trial needs
    (guest time is already inside user, so it is not added again)."""
    values = [int(x) for x in cpu_line.split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = values + [0] * (8 - len(values))
    return (user + nice + system + irq + softirq) / TICKS, steal / TICKS


def _machine_times_s() -> tuple[float, float]:
    with open("/proc/stat", encoding="ascii") as f:
        return machine_times_s(f.readline())


class CpuMeter:
    """Cores used during a trial: this process, the servers, the whole machine, and the
    machine's steal time (cores' worth of time the host did not give it)."""

    def __init__(self, server_pids: Sequence[int]) -> None:
        self.server_pids = list(server_pids)
        self.result: dict[str, float] = {}

    def _snap(self) -> tuple[float, float, list[float], tuple[float, float]]:
        servers = [_process_cpu_s(p) for p in self.server_pids]
        return time.perf_counter(), time.process_time(), servers, _machine_times_s()

    def __enter__(self) -> CpuMeter:
        self.start = self._snap()
        return self

    def __exit__(self, *exc: object) -> None:
        end = self._snap()
        wall = max(end[0] - self.start[0], 1e-9)
        per_server = [(b - a) / wall for a, b in zip(self.start[2], end[2], strict=True)]
        self.result = {
            "client": round((end[1] - self.start[1]) / wall, 2),
            "servers": round(sum(per_server), 2),
            "busiest_server": round(max(per_server, default=0.0), 2),
            "machine": round((end[3][0] - self.start[3][0]) / wall, 2),
            "steal": round((end[3][1] - self.start[3][1]) / wall, 2),
        }


# --- page-cache baseline ----------------------------------------------------------------------


# How long freed memory takes to go back to the host on a VM with free page reporting (the
# kernel reports free blocks about 2 s after they are freed; measured once: a pass 1 s after
# the previous one's unlink still ran at 5.3 GB/s, after 2 s at 1.9, after 3 and 5 s at 1.2).
PAGE_REPORTING_SETTLE_S = 5.0
# This VM's count of the KiB it has reported free to its host (its kernel's page_reporting
# module; absent on kernels without it, and on machines that are no VM).
REPORTED_KIB_PATH = "/sys/module/page_reporting/parameters/reported_kib"
# A paced trial starts once that count has not moved for this long, or after the limit. The
# first report after a large free came 2-3.5 s after it (measured: a topic deleted at 0 s,
# reports at 3.3, 6.4, 9.4 ... 19.3 s, growing from 8 to 104 MiB), so a shorter quiet time
# can end before the reporting has begun.
PAGE_REPORTING_QUIET_S = 6.0
PAGE_REPORTING_WAIT_LIMIT_S = 120.0


def wait_for_page_reporting_idle(
    counter_path: str = REPORTED_KIB_PATH,
    quiet_s: float = PAGE_REPORTING_QUIET_S,
    limit_s: float = PAGE_REPORTING_WAIT_LIMIT_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> float | None:
    """Wait until the VM has stopped handing freed memory back to its host; the seconds
    waited, or None without such a counter.

    Why (measured, docs/benchmarks.md): the host takes reported memory back in bursts of
    64-384 MiB, and during a burst the whole VM stops for 50-350 ms: every process's event
    loop (three nodes and the load generator) is late at the same instant, while the guest
    counts no runnable task waiting. A trial's topic deleted before the next trial frees
    gigabytes, reported over the next 15-20 s, so without this wait a paced trial measured
    the previous trial's clean-up: its slowest 1% was one such stall."""

    def reported_kib() -> int:
        with open(counter_path, encoding="ascii") as f:
            return int(f.read())

    began = clock()
    try:
        last = reported_kib()
    except (OSError, ValueError):
        return None
    quiet_since = began
    while clock() - quiet_since < quiet_s and clock() - began < limit_s:
        sleep(0.1)
        if (current := reported_kib()) != last:
            last, quiet_since = current, clock()
    return clock() - began


def page_cache_write_mb_s(
    directory: str, total_bytes: int, passes: int = 3, settle_s: float = 0.0
) -> list[float]:
    """MB/s of 1 MiB writes of one block to a new file, no fsync; one figure per pass. With
    `settle_s`, each pass first waits that long after the previous pages were freed."""
    block = os.urandom(MiB)
    path = os.path.join(directory, "page-cache-baseline.bin")
    results = []
    for _ in range(passes):
        os.sync()  # start each pass without the previous one's writeback in flight
        time.sleep(settle_s)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            written = 0
            began = time.perf_counter()
            while written < total_bytes:
                written += os.write(fd, block)
            elapsed = time.perf_counter() - began
        finally:
            os.close(fd)
            os.unlink(path)  # drops the dirty pages: no writeback disturbs what follows
        results.append(written / elapsed / 1e6)
    return results


# --- process housekeeping ---------------------------------------------------------------------


def port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def wait_ports(ports: Sequence[int], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(not port_free(p) for p in ports):
            return True
        time.sleep(0.1)
    return False


def reap_leftovers() -> list[int]:
    """Kill servers an interrupted earlier run of this benchmark left behind: any process whose
    command line names a directory under $TMPDIR/replog-bench-produce-*. Returns their pids."""
    marker = os.path.join(tempfile.gettempdir(), TEMP_PREFIX)
    killed = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if marker in cmdline and ("nats-server" in cmdline or "replog" in cmdline):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry), signal.SIGKILL)
                killed.append(int(entry))
    return killed


def stop_process_groups(pids: Sequence[int], timeout_s: float = 5.0) -> None:
    """SIGTERM the groups led by `pids` all at once; SIGKILL what is left after `timeout_s`."""

    def alive(pid: int) -> bool:
        try:
            os.killpg(pid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


def log_tail(path: str, lines: int = 15) -> str:
    with contextlib.suppress(OSError), open(path, encoding="utf-8", errors="replace") as f:
        return "".join(f.readlines()[-lines:])
    return ""


# --- the load loops shared by both systems -----------------------------------------------------


class PacedProducer:
    """Kafka's producer at a paced rate on one partition, its batches cut from a built one.

    Every `interval_s` a linger window of `window_records` records closes (what the producer
    collected over `linger.ms`; the time a record waits in its window is not counted) and its
    records are ready to send. Ready records go at once in one request of at most
    `batch_records` (`batch.size`) while fewer than `max_in_flight` requests are unanswered
    (`max.in.flight.requests.per.connection`); when that many are, they wait, and the batches
    sent once an answer comes are fuller: Kafka's RecordAccumulator keeps filling a batch the
    sender cannot send yet. So a stall is followed by fewer, larger requests, as it is for any
    Kafka producer, not by every 5 ms batch queued behind it.

    Records are numbered from 0 in the order sent (the offsets of one partition, from the
    trial's first). Each window is one latency sample, counted from its due time (`due`) to
    the answer to, or the consumer's receipt of, the batch holding its last record
    (`windows_ending_in`). The pure accounting: `ReplogSide.paced_run` drives it."""

    def __init__(
        self,
        window_records: int,
        interval_s: float,
        first_due_s: float,
        batch_records: int,
        max_in_flight: int = PRODUCER_MAX_IN_FLIGHT,
    ) -> None:
        if not 0 < window_records <= batch_records:
            raise ValueError(f"windows of {window_records} records in batches of {batch_records}")
        self.window_records = window_records
        self.interval_s = interval_s
        self.first_due_s = first_due_s
        self.batch_records = batch_records
        self.max_in_flight = max_in_flight
        self.ready = 0  # records whose window has closed
        self.sent = 0  # records handed to a request
        self.in_flight = 0

    def due(self, window: int) -> float:
        return self.first_due_s + window * self.interval_s

    def close_window(self) -> None:
        self.ready += self.window_records

    def next_batch(self) -> tuple[int, int] | None:
        """(first record, record count) of a request to send now, or None: nothing is ready,
        or `max_in_flight` requests are unanswered."""
        if self.in_flight >= self.max_in_flight or self.sent >= self.ready:
            return None
        first, count = self.sent, min(self.ready - self.sent, self.batch_records)
        self.sent += count
        self.in_flight += 1
        return first, count

    def answered(self) -> None:
        self.in_flight -= 1

    def windows_ending_in(self, first: int, count: int) -> range:
        """The windows whose last record is one of records [first, first + count)."""
        return range(first // self.window_records, (first + count) // self.window_records)


# --- replog -----------------------------------------------------------------------------------


def replog_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "replog.cli.main", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        cwd=ROOT,
    )


def open_broker_client(address: str) -> KafkaBrokerClient:
    """The client library's client of one broker's Kafka listener at `address`, with
    connections of its own (one per lane: produce, fetch), as one producer or consumer has."""
    connections = KafkaConnections(client_id="bench-produce", setup_timeout_ms=10_000)
    return KafkaBrokerClient(address, connections)


async def close_client(client: KafkaBrokerClient) -> None:
    with contextlib.suppress(Exception):
        await client.connections.close()


class ReplogCluster:
    """3 combined broker+controller nodes started with `replog cluster start`."""

    def __init__(self, directory: str, base_port: int = REPLOG_BASE_PORT) -> None:
        self.directory = directory
        self.base_port = base_port
        self.started = False
        self.controller: ControllerClient | None = None
        self.kafka_addresses: dict[int, str] = {}  # broker id -> its Kafka listener

    @property
    def ports(self) -> list[int]:
        """The nodes' gRPC ports, then their Kafka listeners' (`replog cluster start`'s
        base port + 200)."""
        return [self.base_port + offset + i for offset in (0, 200) for i in range(3)]

    def start(self) -> None:
        self.started = True  # from here on stop() must look for pid files
        result = replog_cli(
            "cluster", "start", "--nodes", "3", "--data-dir", self.directory,
            "--base-port", str(self.base_port), "--fresh",
        )  # fmt: skip
        if result.returncode != 0:
            raise RuntimeError(f"replog cluster start failed:\n{result.stdout}{result.stderr}")
        cluster = LocalCluster.load(self.directory)
        addresses = cluster.controller_addresses()
        self.kafka_addresses = {
            n.node_id: n.kafka_address for n in cluster.nodes if n.kafka_address is not None
        }
        self.controller = ControllerClient(
            ",".join(f"{i}@{a}" for i, a in addresses.items()), default_timeout_s=60
        )
        self._wait_brokers(3, timeout_s=60)

    def _wait_brokers(self, count: int, timeout_s: float) -> None:
        assert self.controller is not None
        deadline = time.monotonic() + timeout_s
        seen = 0
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                brokers = self.controller.metadata(timeout_s=5).brokers
                seen = sum(1 for b in brokers if not b.fenced)
                if seen >= count:
                    return
            time.sleep(0.2)
        raise RuntimeError(f"replog: {seen} of {count} brokers registered and unfenced")

    def pids(self) -> list[int]:
        pids: list[int] = []
        if not LocalCluster.exists(self.directory):
            return pids
        for node in LocalCluster.load(self.directory).nodes:
            with contextlib.suppress(OSError, ValueError), open(node.pid_path) as f:
                pids.append(int(f.read().strip()))
        return pids

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.close()
            self.controller = None
        if not self.started or not LocalCluster.exists(self.directory):
            return
        pids = self.pids()
        with contextlib.suppress(Exception):
            replog_cli("cluster", "stop", "--data-dir", self.directory, "--timeout", "10")
        for pid in pids:  # whatever survived the graceful stop
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)

    def node_logs(self) -> str:
        if not LocalCluster.exists(self.directory):
            return ""
        return "\n".join(
            f"--- node {n.node_id} ---\n{log_tail(n.log_path)}"
            for n in LocalCluster.load(self.directory).nodes
        )

    # --- topics -------------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int) -> dict[int, str]:
        """Create `name` (RF 3, min.insync.replicas 2); return partition -> the leader's Kafka
        listener."""
        assert self.controller is not None
        topic = NewTopic(name, partitions, 3, configs={"min.insync.replicas": "2"})
        deadline = time.monotonic() + 60
        while True:
            [created] = self.controller.create_topics([topic], timeout_s=30)
            if created.error is None:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"replog: cannot create topic {name}: {created.error}")
            time.sleep(0.5)
        while True:
            metadata = self.controller.metadata([name], timeout_s=10)
            registered = {b.broker_id for b in metadata.brokers}
            addresses = {b: a for b, a in self.kafka_addresses.items() if b in registered}
            [info] = [t for t in metadata.topics if t.name == name]
            leaders = {p.partition: p.leader for p in info.partitions}
            if len(leaders) == partitions and all(
                leader is not None and leader in addresses for leader in leaders.values()
            ):
                return {p: addresses[leader] for p, leader in leaders.items() if leader is not None}
            if time.monotonic() > deadline:
                raise RuntimeError(f"replog: topic {name} has no leader for every partition")
            time.sleep(0.1)

    def delete_topic(self, name: str) -> None:
        """Delete `name` and wait (up to 30 s) until no node holds its files: brokers remove a
        deleted partition's files on a background thread, and a trial that started meanwhile
        would share the machine with that removal."""
        if self.controller is None:
            return
        with contextlib.suppress(Exception):
            self.controller.delete_topics([name], timeout_s=30)
        deadline = time.monotonic() + 30
        while self._partition_dirs(name) and time.monotonic() < deadline:
            time.sleep(0.05)

    def _partition_dirs(self, topic: str) -> list[str]:
        """`topic`'s partition directories (live or renamed for deletion, not stray logs set
        aside, which stay) on every node."""

        def of_topic(name: str) -> bool:
            found = parse_topic_partition(name) or renamed_topic_partition(
                name, (DELETE_DIR_SUFFIX,)
            )
            return found is not None and found[0] == topic

        return [
            os.path.join(root, d)
            for root, dirs, _files in os.walk(self.directory)
            for d in dirs
            if of_topic(d)
        ]


def produce_request(topic: str, partition: int, records: bytes) -> msg.ProduceRequest:
    return msg.ProduceRequest(
        acks=msg.ACKS_ALL,
        timeout_ms=PRODUCE_TIMEOUT_MS,
        partitions=(msg.ProducePartition(topic, partition, records),),
    )


async def produce_once(client: Any, topic: str, partition: int, records: bytes) -> str | None:
    """One acks=all produce on `client` (a `KafkaBrokerClient` or one of its `ProduceStream`s);
    None on success, else what went wrong."""
    try:
        response = await client.produce(produce_request(topic, partition, records))
    except Exception as exc:  # a failed request is counted, not fatal
        return f"{type(exc).__name__}: {exc}"
    [result] = response.partitions
    if result.error is not None:
        return f"{type(result.error).__name__}: {result.error}"
    return None


class ReplogSide:
    """One run's replog measurements on a started cluster."""

    def __init__(self, cluster: ReplogCluster, args: argparse.Namespace, run: int) -> None:
        self.cluster = cluster
        self.args = args
        self.run = run
        self.topics = 0

    async def topic(self) -> tuple[str, dict[int, str]]:
        self.topics += 1
        name = f"bench-r{self.run}-t{self.topics}"
        leaders = await asyncio.to_thread(self.cluster.create_topic, name, self.args.partitions)
        # The leaders learn of the topic through metadata: produce until every one accepts.
        probe = build_batch([(int(time.time() * 1000), None, b"probe", ())])
        deadline = time.monotonic() + 30
        for partition, address in leaders.items():
            client = open_broker_client(address)
            try:
                while (error := await produce_once(client, name, partition, probe)) is not None:
                    if time.monotonic() > deadline:
                        raise RuntimeError(
                            f"replog: no successful produce to {name}-{partition} at {address} "
                            f"in 30 s; last error: {error}\n{self.cluster.node_logs()}"
                        )
                    await asyncio.sleep(0.1)
            finally:
                await close_client(client)
        return name, leaders

    async def drop(self, name: str) -> None:
        await asyncio.to_thread(self.cluster.delete_topic, name)

    async def throughput(self, shape: BatchShape, producers: int, seconds: float) -> Trial:
        name, leaders = await self.topic()
        trial = Trial("replog", "throughput", shape.nominal_kib, producers, 0, 0, 0.0)
        partitions = sorted(leaders)
        clients = [
            open_broker_client(leaders[partitions[i % len(partitions)]]) for i in range(producers)
        ]
        streams = [client.produce_stream() for client in clients]
        try:
            # warm-up: one request per producer, not counted
            await asyncio.gather(
                *(
                    produce_once(stream, name, partitions[i % len(partitions)], shape.data)
                    for i, stream in enumerate(streams)
                )
            )
            deadline = time.perf_counter() + seconds

            async def producer(index: int) -> None:
                stream = streams[index]
                partition = partitions[index % len(partitions)]
                while time.perf_counter() < deadline:
                    began = time.perf_counter()
                    error = await produce_once(stream, name, partition, shape.data)
                    if error is None:
                        trial.add_latency(time.perf_counter() - began)
                        trial.records += shape.records
                        trial.bytes += len(shape.data)
                    else:
                        trial.errors += 1
                        trial.first_error = trial.first_error or error

            with CpuMeter(self.cluster.pids()) as meter:
                began = time.perf_counter()
                await asyncio.gather(*(producer(i) for i in range(producers)))
                trial.seconds = time.perf_counter() - began
            trial.cpu = meter.result
        finally:
            for stream in streams:
                stream.close()
            for client in clients:
                await close_client(client)
            await self.drop(name)
        return trial

    async def paced_run(
        self,
        batches: BatchShape,
        window_records: int,
        records_s: float,
        seconds: float,
        consume: bool,
    ) -> Trial:
        """Produce at `records_s` as a producer lingering `window_records` records does
        (`PacedProducer`, its batches cut from `batches`); with `consume`, also time each
        window from its due time to a consumer receiving its last record."""
        name, leaders = await self.topic()
        kind = "e2e" if consume else "latency"
        # 1 KiB records: the window's records are its KiB
        trial = Trial("replog", kind, window_records, 1, 0, 0, 0.0, target_records_s=records_s)
        partitions = sorted(leaders)
        clients = {p: open_broker_client(leaders[p]) for p in partitions}
        # A partition's requests go in order on one stream, answered in order.
        streams = {p: client.produce_stream() for p, client in clients.items()}
        consumers = {p: open_broker_client(leaders[p]) for p in partitions} if consume else {}
        # The topic starts with one probe record per partition (offset 0).
        end_offsets = {p: 1 for p in partitions}
        interval_s = window_records / records_s  # windows go to the partitions in turn
        producers: dict[int, PacedProducer] = {}
        requests: set[asyncio.Task[None]] = set()
        stop = asyncio.Event()

        async def send(partition: int, first: int, count: int) -> None:
            producer = producers[partition]
            stamp = producer.due(first // producer.window_records)
            data = batches.first_records(count, int(stamp * 1e9))
            try:
                error = await produce_once(streams[partition], name, partition, data)
            finally:
                producer.answered()
            if error is None:
                answered = time.perf_counter()
                for window in producer.windows_ending_in(first, count):
                    trial.add_latency(answered - producer.due(window))
                trial.records += count
                trial.bytes += len(data)
                end_offsets[partition] += count
            else:
                trial.errors += 1
                trial.first_error = trial.first_error or error
            pump(partition)

        def pump(partition: int) -> None:
            while (batch := producers[partition].next_batch()) is not None:
                task = asyncio.create_task(send(partition, *batch))
                requests.add(task)
                task.add_done_callback(requests.discard)

        def consumer_error(text: str) -> None:
            trial.errors += 1
            trial.first_error = trial.first_error or text
            if trial.errors > 100:
                raise RuntimeError(f"replog {name}: more than 100 errors; first: {text}")

        async def consumer(partition: int, offset: int) -> None:
            # One fetch lane, as the client library's consumer fetches (a failed fetch
            # ends it; the next opens another).
            stream = consumers[partition].fetch_stream()
            try:
                await read_from(partition, offset, stream)
            finally:
                stream.close()

        async def read_from(partition: int, offset: int, stream: Any) -> None:
            producer = producers[partition]
            first_offset = offset  # the producer's record 0
            while not (stop.is_set() and offset >= end_offsets[partition]):
                request = msg.FetchRequest(
                    partitions=(msg.FetchPartition(name, partition, offset, 4 * MiB),),
                    max_wait_ms=FETCH_MAX_WAIT_MS,
                    min_bytes=1,
                    max_bytes=8 * MiB,
                )
                try:
                    response = await stream.fetch(request)
                except ReplogError as exc:  # a timeout, a lost connection, a bad answer
                    consumer_error(f"consumer: {type(exc).__name__}: {exc}")
                    await asyncio.sleep(0.05)
                    continue
                received = time.perf_counter_ns() / 1e9
                [result] = response.partitions
                if result.error is not None:
                    consumer_error(f"consumer: {type(result.error).__name__}: {result.error}")
                    await asyncio.sleep(0.05)
                    continue
                for batch in iter_batches(result.records, strict=False):
                    stamp_ns = read_stamp(next(iter(batch.records())).value)
                    first = batch.header.base_offset - first_offset
                    if stamp_ns is not None:
                        # The stamp is the due time of the window of the batch's first record.
                        stamped_window = first // window_records
                        for window in producer.windows_ending_in(first, batch.header.records_count):
                            due = stamp_ns / 1e9 + (window - stamped_window) * producer.interval_s
                            trial.add_e2e(received - due, received)
                    offset = batch.header.last_offset + 1

        try:
            # warm-up, not counted: one batch per partition; the consumers start after it
            await asyncio.gather(
                *(
                    produce_once(stream, name, p, batches.first_records(window_records, 0))
                    for p, stream in streams.items()
                )
            )
            for p in partitions:
                end_offsets[p] += window_records
            start_offsets = dict(end_offsets)
            with CpuMeter(self.cluster.pids()) as meter:
                warm_up_s = self.args.paced_warm_up_seconds
                trial.start_counting_after(warm_up_s)
                began = time.perf_counter()
                for i, p in enumerate(partitions):
                    producers[p] = PacedProducer(
                        window_records,
                        interval_s * len(partitions),
                        began + i * interval_s,
                        batches.records,
                    )
                tasks = [asyncio.create_task(consumer(p, start_offsets[p])) for p in consumers]
                windows = int((warm_up_s + seconds) / interval_s)
                for window in range(windows):
                    delay = began + window * interval_s - time.perf_counter()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    partition = partitions[window % len(partitions)]
                    producers[partition].close_window()
                    pump(partition)
                while requests:
                    await asyncio.wait(requests)
                trial.seconds = time.perf_counter() - began
                stop.set()
                if tasks:
                    await asyncio.wait_for(asyncio.gather(*tasks), timeout=30)
            trial.cpu = meter.result
        finally:
            for stream in streams.values():
                stream.close()
            for c in [*clients.values(), *consumers.values()]:
                await close_client(c)
            await self.drop(name)
        return trial


# --- NATS JetStream ---------------------------------------------------------------------------


class NatsCluster:
    """Three nats-server processes in one JetStream cluster, data in `directory`."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.processes: list[subprocess.Popen[bytes]] = []

    @staticmethod
    def url(node: int) -> str:
        return f"nats://127.0.0.1:{NATS_CLIENT_PORT + node}"

    @property
    def ports(self) -> list[int]:
        return [p + i for p in (NATS_CLIENT_PORT, NATS_ROUTE_PORT) for i in (1, 2, 3)]

    def start(self) -> None:
        executable = shutil.which("nats-server")
        if executable is None:
            raise SystemExit("nats-server is not installed: run `bash bench/install_nats.sh`")
        os.makedirs(self.directory, exist_ok=True)
        routes = ", ".join(f"nats-route://127.0.0.1:{NATS_ROUTE_PORT + i}" for i in (1, 2, 3))
        for i in (1, 2, 3):
            store = os.path.join(self.directory, f"n{i}")
            config = os.path.join(self.directory, f"n{i}.conf")
            with open(config, "w", encoding="utf-8") as f:
                f.write(
                    f"server_name: n{i}\n"
                    f"listen: 127.0.0.1:{NATS_CLIENT_PORT + i}\n"
                    f'pid_file: "{store}.pid"\n'
                    f'jetstream {{\n  store_dir: "{store}"\n'
                    "  max_memory_store: 1GB\n  max_file_store: 64GB\n}\n"
                    f"cluster {{\n  name: replog-bench\n"
                    f"  listen: 127.0.0.1:{NATS_ROUTE_PORT + i}\n  routes: [{routes}]\n}}\n"
                )
            with open(os.path.join(self.directory, f"n{i}.log"), "wb") as log:
                self.processes.append(
                    subprocess.Popen(
                        [executable, "-c", config],
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
        if not wait_ports([NATS_CLIENT_PORT + i for i in (1, 2, 3)], 20):
            raise RuntimeError(f"nats-server did not start:\n{self.logs()}")

    def logs(self) -> str:
        return "\n".join(
            f"--- n{i} ---\n{log_tail(os.path.join(self.directory, f'n{i}.log'))}"
            for i in (1, 2, 3)
        )

    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def stop(self) -> None:
        stop_process_groups([p.pid for p in self.processes])
        for process in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)
        self.processes = []

    @staticmethod
    def version() -> str:
        executable = shutil.which("nats-server")
        if executable is None:
            return "nats-server: not installed"
        result = subprocess.run([executable, "--version"], capture_output=True, text=True)
        return result.stdout.strip()


def import_nats() -> Any:
    try:
        import nats
    except ImportError:
        raise SystemExit(
            "the nats-py client is not installed for this Python: run "
            f"`bash bench/install_nats.sh {sys.executable}`"
        ) from None
    return nats


class NatsSide:
    """One run's JetStream measurements on a started cluster: one R3 file stream per
    partition, publishers and consumers on the stream leader's server."""

    def __init__(self, cluster: NatsCluster, args: argparse.Namespace) -> None:
        self.cluster = cluster
        self.args = args
        self.nats = import_nats()
        from nats.js import api

        self.api = api
        self.filler = os.urandom(RECORD_BYTES - len(STAMP_MARKER) - STAMP.size)
        self.payload = nats_payload(0, self.filler)
        self.admin: Any = None
        self.leader_urls: dict[int, str] = {}  # stream index -> its leader's URL

    @staticmethod
    def stream(index: int) -> str:
        return f"BENCH{index}"

    @staticmethod
    def subject(index: int) -> str:
        return f"bench.{index}"

    async def connect(self, url: str) -> Any:
        return await self.nats.connect(
            url, max_reconnect_attempts=2, pending_size=256 * MiB, allow_reconnect=True
        )

    async def setup(self) -> None:
        self.admin = await self.connect(self.cluster.url(1))
        js = self.admin.jetstream()
        last: Exception | None = None
        for index in range(self.args.partitions):
            for _ in range(100):  # the JetStream meta leader may still be electing
                try:
                    await js.add_stream(
                        name=self.stream(index),
                        subjects=[self.subject(index)],
                        num_replicas=3,
                        storage=self.api.StorageType.FILE,
                    )
                    break
                except Exception as exc:  # not ready yet: retry
                    last = exc
                    await asyncio.sleep(0.3)
            else:
                raise RuntimeError(f"nats: add_stream failed: {last!r}\n{self.cluster.logs()}")
            for _ in range(100):
                info = await js.stream_info(self.stream(index))
                leader = info.cluster.leader if info.cluster else None
                if leader:
                    self.leader_urls[index] = self.cluster.url(int(leader.removeprefix("n")))
                    break
                await asyncio.sleep(0.1)
            else:
                raise RuntimeError(f"nats: stream {self.stream(index)} has no leader")

    async def close(self) -> None:
        if self.admin is not None:
            with contextlib.suppress(Exception):
                await self.admin.close()

    async def purge(self) -> None:
        js = self.admin.jetstream()
        for index in range(self.args.partitions):
            await js.purge_stream(self.stream(index))

    async def connections(self, count: int) -> list[Any]:
        streams = self.args.partitions
        return [await self.connect(self.leader_urls[i % streams]) for i in range(count)]

    async def throughput(self, window: int, producers: int, seconds: float) -> Trial:
        await self.purge()
        trial = Trial("nats", "throughput", window_kib(window), producers, 0, 0, 0.0)
        conns = await self.connections(producers)
        payload = self.payload
        try:
            contexts = [c.jetstream(publish_async_max_pending=window) for c in conns]
            for i, js in enumerate(contexts):  # warm-up, not counted
                for _ in range(window):
                    await js.publish_async(self.subject(i % self.args.partitions), payload)
            await asyncio.gather(*(js.publish_async_completed() for js in contexts))
            deadline = time.perf_counter() + seconds

            def done(fut: asyncio.Future[Any], began: float) -> None:
                if fut.cancelled() or fut.exception() is not None:
                    trial.errors += 1
                    trial.first_error = trial.first_error or repr(
                        "cancelled" if fut.cancelled() else fut.exception()
                    )
                    return
                trial.add_latency(time.perf_counter() - began)
                trial.records += 1
                trial.bytes += len(payload)

            async def publisher(index: int) -> None:
                js = contexts[index]
                subject = self.subject(index % self.args.partitions)
                while time.perf_counter() < deadline:
                    began = time.perf_counter()
                    future = await js.publish_async(subject, payload)
                    future.add_done_callback(lambda f, b=began: done(f, b))
                await asyncio.wait_for(js.publish_async_completed(), timeout=60)

            with CpuMeter(self.cluster.pids()) as meter:
                began = time.perf_counter()
                await asyncio.gather(*(publisher(i) for i in range(producers)))
                trial.seconds = time.perf_counter() - began
            trial.cpu = meter.result
        finally:
            for c in conns:
                with contextlib.suppress(Exception):
                    await c.close()
        return trial

    async def paced_run(self, records_s: float, seconds: float, consume: bool) -> Trial:
        """Publish one message at a time at `records_s` (open loop, in 1 ms ticks); with
        `consume`, an ordered push consumer per stream times each message end to end."""
        await self.purge()
        kind = "e2e" if consume else "latency"
        trial = Trial("nats", kind, 0, 1, 0, 0, 0.0, target_records_s=records_s)
        streams = self.args.partitions
        conns = await self.connections(streams)
        consumer_conns = await self.connections(streams) if consume else []
        subscriptions: list[Any] = []
        received = 0
        all_received = asyncio.Event()
        published_total = -1

        async def on_message(message: Any) -> None:
            nonlocal received
            now = time.perf_counter_ns()
            stamp = read_stamp(message.data)
            if stamp is not None:
                trial.add_e2e((now - stamp) / 1e9, now / 1e9)
            received += 1
            if received == published_total:
                all_received.set()

        def done(fut: asyncio.Future[Any], due: float, size: int) -> None:
            if fut.cancelled() or fut.exception() is not None:
                trial.errors += 1
                trial.first_error = trial.first_error or repr(
                    "cancelled" if fut.cancelled() else fut.exception()
                )
                return
            trial.add_latency(time.perf_counter() - due)
            trial.records += 1
            trial.bytes += size

        try:
            for index, c in enumerate(consumer_conns):
                js = c.jetstream()
                subscriptions.append(
                    await js.subscribe(
                        self.subject(index),
                        stream=self.stream(index),
                        cb=on_message,
                        ordered_consumer=True,
                        deliver_policy=self.api.DeliverPolicy.NEW,
                        pending_msgs_limit=-1,
                        pending_bytes_limit=-1,
                    )
                )
            contexts = [c.jetstream(publish_async_max_pending=1 << 20) for c in conns]
            with CpuMeter(self.cluster.pids()) as meter:
                warm_up_s = self.args.paced_warm_up_seconds
                trial.start_counting_after(warm_up_s)
                began = time.perf_counter()
                interval = 1.0 / records_s
                total = int((warm_up_s + seconds) * records_s)
                index = 0
                while index < total:
                    now = time.perf_counter()
                    due_count = min(total, int((now - began) / interval) + 1)
                    while index < due_count:
                        due = began + index * interval
                        payload = (
                            nats_payload(int(due * 1e9), self.filler) if consume else self.payload
                        )
                        js = contexts[index % streams]
                        future = await js.publish_async(self.subject(index % streams), payload)
                        size = len(payload)
                        future.add_done_callback(lambda f, d=due, n=size: done(f, d, n))
                        index += 1
                    await asyncio.sleep(0.001)
                published_total = total
                for js in contexts:
                    await asyncio.wait_for(js.publish_async_completed(), timeout=60)
                trial.seconds = time.perf_counter() - began
                if consume:
                    if received >= published_total:
                        all_received.set()
                    await asyncio.wait_for(all_received.wait(), timeout=30)
            trial.cpu = meter.result
        finally:
            for s in subscriptions:
                with contextlib.suppress(Exception):
                    await s.unsubscribe()
            for c in [*conns, *consumer_conns]:
                with contextlib.suppress(Exception):
                    await c.close()
        return trial


def paced_batch_records(records_s: float) -> int:
    """The records in one batch of the paced trials: what arrives in PRODUCER_LINGER_MS at
    `records_s`, within the benchmark's batch sizes (64 KiB to 1 MiB of 1 KiB records).

    A producer batches what arrives while it lingers: Kafka's producer at `linger.ms` = 5
    sends what 5 ms brought (500 records at 100k records/s, a 500 KiB batch), unless its
    `batch.size` fills first. A 1 MiB batch at half the peak rate would hold its first record
    8-16 ms before the send; a 256 KiB one (what this rule picked when it snapped to the
    throughput trials' sizes) sends twice as many requests as that producer would at 100k
    records/s, and on two cores each request's cost, not its bytes, sets the load."""
    lingered = round(records_s * PRODUCER_LINGER_MS / 1000)
    fewest, most = BATCH_RECORDS[min(BATCH_RECORDS)], BATCH_RECORDS[max(BATCH_RECORDS)]
    return max(fewest, min(most, lingered))


def paced_window_records(records_s: float, args: argparse.Namespace) -> int:
    """The records of replog's paced linger window: the records of `--latency-batch-kib`'s
    batch if given, else `paced_batch_records`."""
    if args.latency_batch_kib:
        return BATCH_RECORDS[args.latency_batch_kib]
    return paced_batch_records(records_s)


def window_kib(window: int) -> int:
    """The nominal batch size (KiB) whose records a NATS publish window of `window` matches."""
    for kib, records in BATCH_RECORDS.items():
        if records == window:
            return kib
    return window


# --- one run ----------------------------------------------------------------------------------


@dataclass
class SystemResult:
    throughput: list[Trial] = field(default_factory=list)
    latency: Trial | None = None
    e2e: Trial | None = None

    @property
    def peak(self) -> Trial:
        return max(self.throughput, key=lambda t: t.records_s)


@dataclass
class RunResult:
    run: int
    page_cache_passes: list[float]  # each started PAGE_REPORTING_SETTLE_S after a delete
    loadavg_start: str
    page_cache_reuse_passes: list[float]  # back to back, reusing the pages just freed
    page_cache_warm_up_mb_s: float  # the untimed first pass
    replog: SystemResult | None = None
    nats: SystemResult | None = None

    @property
    def page_cache_mb_s(self) -> float:
        """The goal's baseline."""
        return statistics.median(self.page_cache_passes)

    @property
    def page_cache_reuse_mb_s(self) -> float:
        return statistics.median(self.page_cache_reuse_passes)

    def figures(self) -> dict[str, float]:
        """Named figures of this run (for the medians over runs)."""
        out: dict[str, float] = {
            "page_cache_MB_s": self.page_cache_mb_s,
            "page_cache_reuse_MB_s": self.page_cache_reuse_mb_s,
        }
        for name, result in (("replog", self.replog), ("nats", self.nats)):
            if result is None or not result.throughput:
                continue
            peak = result.peak
            out[f"{name}_peak_records_s"] = peak.records_s
            out[f"{name}_peak_MB_s"] = peak.mb_s
            for kib in BATCH_RECORDS:
                trials = [t for t in result.throughput if t.batch_kib == kib]
                if trials:
                    out[f"{name}_{kib}k_records_s"] = max(t.records_s for t in trials)
            for kind, trial in (("lat", result.latency), ("e2e", result.e2e)):
                if trial is None:
                    continue
                out[f"{name}_{kind}_p50_ms"] = percentile_ms(trial.latencies_s, 0.5)
                out[f"{name}_{kind}_p99_ms"] = percentile_ms(trial.latencies_s, 0.99)
                if kind == "e2e":
                    out[f"{name}_e2e_e2e_p50_ms"] = percentile_ms(trial.e2e_s, 0.5)
                    out[f"{name}_e2e_e2e_p99_ms"] = percentile_ms(trial.e2e_s, 0.99)
        return out


def loadavg() -> str:
    with open("/proc/loadavg", encoding="ascii") as f:
        return " ".join(f.read().split()[:3])


async def measure_system(
    side: Any, system: str, args: argparse.Namespace, shapes: dict[int, BatchShape]
) -> SystemResult:
    result = SystemResult()
    for kib in args.batch_kib:
        for producers in args.producers:
            if system == "replog":
                trial = await side.throughput(shapes[kib], producers, args.seconds)
            else:
                trial = await side.throughput(BATCH_RECORDS[kib], producers, args.seconds)
            print(trial.line(), flush=True)
            result.throughput.append(trial)
    peak = result.peak
    target = peak.records_s * args.load_fraction
    if target <= 0:
        raise RuntimeError(f"{system}: no record was acknowledged in the throughput trials")
    for consume in (False, True):
        waited_s = await asyncio.to_thread(wait_for_page_reporting_idle)
        if system == "replog":
            # Batches of up to `batch.size` = the largest throughput batch, cut from it.
            batches = shapes[max(BATCH_RECORDS)]
            window = paced_window_records(target, args)
            trial = await side.paced_run(batches, window, target, args.latency_seconds, consume)
        else:
            trial = await side.paced_run(target, args.latency_seconds, consume)
        trial.page_reporting_wait_s = waited_s
        print(trial.line(), flush=True)
        if consume:
            result.e2e = trial
        else:
            result.latency = trial
    return result


async def run_nats(cluster: NatsCluster, args: argparse.Namespace) -> SystemResult:
    side = NatsSide(cluster, args)
    try:
        await side.setup()
        return await measure_system(side, "nats", args, {})
    finally:
        await side.close()


async def run_replog(
    cluster: ReplogCluster, args: argparse.Namespace, run: int, shapes: dict[int, BatchShape]
) -> SystemResult:
    await asyncio.to_thread(cluster.start)
    return await measure_system(ReplogSide(cluster, args, run), "replog", args, shapes)


def one_run(run: int, args: argparse.Namespace, shapes: dict[int, BatchShape]) -> RunResult:
    with tempfile.TemporaryDirectory(prefix=TEMP_PREFIX) as directory:
        start_load = loadavg()
        size = args.page_cache_mib * MiB
        warm_up, *reuse = page_cache_write_mb_s(directory, size, 4)
        passes = page_cache_write_mb_s(directory, size, 3, PAGE_REPORTING_SETTLE_S)
        result = RunResult(run, passes, start_load, reuse, warm_up)
        print(
            f"run {run}: load average {start_load}; page-cache write "
            f"{result.page_cache_mb_s:,.0f} MB/s (passes {PAGE_REPORTING_SETTLE_S:.0f} s apart: "
            f"{', '.join(f'{p:,.0f}' for p in passes)}); reusing just-freed pages "
            f"{result.page_cache_reuse_mb_s:,.0f} MB/s (passes: "
            f"{', '.join(f'{p:,.0f}' for p in reuse)}; untimed warm-up pass {warm_up:,.0f})",
            flush=True,
        )
        # The clusters are stopped here, outside the event loop, whatever happened in it.
        if not args.skip_nats:
            nats_cluster = NatsCluster(os.path.join(directory, "nats"))
            try:
                nats_cluster.start()
                result.nats = asyncio.run(run_nats(nats_cluster, args))
            except BaseException:
                print(f"nats-server logs:\n{nats_cluster.logs()}", file=sys.stderr)
                raise
            finally:
                nats_cluster.stop()
                shutil.rmtree(nats_cluster.directory, ignore_errors=True)
        if not args.skip_replog:
            replog_cluster = ReplogCluster(os.path.join(directory, "replog"), args.replog_base_port)
            try:
                result.replog = asyncio.run(run_replog(replog_cluster, args, run, shapes))
            except BaseException:
                print(f"replog node logs:\n{replog_cluster.node_logs()}", file=sys.stderr)
                raise
            finally:
                replog_cluster.stop()
                shutil.rmtree(replog_cluster.directory, ignore_errors=True)
        return result


# --- the table --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    figure: str
    replog: str  # key in figures()
    baseline: str
    unit: str
    goal: str = ""
    check: Callable[[float, float, float], bool] | None = None  # (replog, baseline, ratio)
    baseline_scale: float = 1.0  # the baseline figure is baseline * scale


ROWS = [
    Row("peak throughput, records/s", "replog_peak_records_s", "nats_peak_records_s",
        "rec/s", ">= 5x JetStream", lambda r, b, x: x >= 5.0),
    Row("peak throughput, MB/s vs JetStream", "replog_peak_MB_s", "nats_peak_MB_s", "MB/s"),
    Row("peak throughput, MB/s vs page cache / 3", "replog_peak_MB_s", "page_cache_MB_s",
        "MB/s", ">= 0.40x", lambda r, b, x: x >= 0.40, 1 / 3),
    Row("peak MB/s vs page cache / 3, reusing just-freed pages", "replog_peak_MB_s",
        "page_cache_reuse_MB_s", "MB/s", baseline_scale=1 / 3),
    *(
        Row(f"throughput, {k} KiB batches (window {n})", f"replog_{k}k_records_s",
            f"nats_{k}k_records_s", "rec/s")
        for k, n in BATCH_RECORDS.items()
    ),
    Row("produce latency p50 at 50% of peak", "replog_lat_p50_ms", "nats_lat_p50_ms", "ms"),
    Row("produce latency p99 at 50% of peak", "replog_lat_p99_ms", "nats_lat_p99_ms", "ms"),
    Row("end-to-end latency p50 at 50% of peak", "replog_e2e_e2e_p50_ms",
        "nats_e2e_e2e_p50_ms", "ms"),
    Row("end-to-end latency p99 at 50% of peak", "replog_e2e_e2e_p99_ms",
        "nats_e2e_e2e_p99_ms", "ms", "<= 20 ms", lambda r, b, x: r <= 20.0),
]  # fmt: skip


def fmt(value: float | None, unit: str) -> str:
    if value is None or value != value:
        return "-"
    if unit == "ms":
        return f"{value:.2f} ms"
    if unit == "MB/s":
        return f"{value:,.1f} MB/s"
    return f"{value:,.0f}"


def table(figure_sets: Sequence[dict[str, float]]) -> list[str]:
    """One line per row: medians over the runs; ratios per run, then their median."""

    def median_of(key: str, scale: float = 1.0) -> float | None:
        values = [f[key] * scale for f in figure_sets if key in f and f[key] == f[key]]
        return statistics.median(values) if values else None

    lines = [
        "| figure | replog | JetStream / baseline | ratio | goal | met? |",
        "|---|---:|---:|---:|---|---|",
    ]
    for row in ROWS:
        replog = median_of(row.replog)
        baseline = median_of(row.baseline, row.baseline_scale)
        ratios = [
            f[row.replog] / (f[row.baseline] * row.baseline_scale)
            for f in figure_sets
            if row.replog in f and row.baseline in f and f[row.baseline] > 0
        ]
        ratio = statistics.median(ratios) if ratios else None
        met = ""
        if row.check is not None and replog is not None:
            met = "yes" if row.check(replog, baseline or 0.0, ratio or 0.0) else "no"
        spread = f" ({min(ratios):.2f}-{max(ratios):.2f})" if len(ratios) > 1 else ""
        lines.append(
            f"| {row.figure} | {fmt(replog, row.unit)} | {fmt(baseline, row.unit)} | "
            + (f"{ratio:.2f}x{spread}" if ratio is not None else "-")
            + f" | {row.goal} | {met} |"
        )
    return lines


# --- main -------------------------------------------------------------------------------------


FULL_DEFAULTS = {
    "runs": 3,
    "seconds": 3.0,
    "latency_seconds": 5.0,
    "producers": [1, 2, 4, 8],
    "batch_kib": list(BATCH_RECORDS),
    "page_cache_mib": 1024,
}
QUICK_DEFAULTS = {
    "runs": 1,
    "seconds": 1.0,
    "latency_seconds": 2.0,
    "producers": [1, 4],
    "batch_kib": [64, 1024],
    "page_cache_mib": 256,
}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0],
        epilog="Defaults: full run "
        + ", ".join(f"{k}={v}" for k, v in FULL_DEFAULTS.items())
        + "; --quick "
        + ", ".join(f"{k}={v}" for k, v in QUICK_DEFAULTS.items()),
    )
    parser.add_argument("--runs", type=int, help="full runs; medians over them")
    parser.add_argument("--seconds", type=float, help="length of one throughput trial")
    parser.add_argument("--latency-seconds", type=float, help="length of one paced trial")
    parser.add_argument("--producers", type=int, nargs="+", help="producer counts to try")
    parser.add_argument("--batch-kib", type=int, nargs="+", choices=BATCH_RECORDS)
    parser.add_argument(
        "--latency-batch-kib",
        type=int,
        choices=BATCH_RECORDS,
        help="replog batch size of the paced trials (default: what linger.ms = "
        f"{PRODUCER_LINGER_MS:g} collects at the paced rate, 64-1023 records)",
    )
    parser.add_argument("--load-fraction", type=float, default=0.5, help="of the peak (paced)")
    parser.add_argument(
        "--paced-warm-up-seconds",
        type=float,
        default=PACED_WARM_UP_S,
        help="sends at the paced rate before a paced trial's counted ones (default: "
        f"{PACED_WARM_UP_S:g})",
    )
    parser.add_argument(
        "--partitions", type=int, default=1, help="replog partitions = JetStream streams"
    )
    parser.add_argument("--page-cache-mib", type=int, help="bytes per page-cache pass")
    parser.add_argument("--skip-nats", action="store_true")
    parser.add_argument("--skip-replog", action="store_true")
    parser.add_argument(
        "--replog-base-port",
        type=int,
        default=REPLOG_BASE_PORT,
        help=f"replog's `cluster start --base-port` (default: {REPLOG_BASE_PORT})",
    )
    parser.add_argument("--json", metavar="FILE", help="write every trial and figure here")
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 run, short trials")
    args = parser.parse_args(argv)
    for key, value in (QUICK_DEFAULTS if args.quick else FULL_DEFAULTS).items():
        if getattr(args, key) is None:  # an explicit option wins over --quick
            setattr(args, key, value)
    return args


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.skip_nats:
        if shutil.which("nats-server") is None:
            raise SystemExit("nats-server is not installed: run `bash bench/install_nats.sh`")
        import_nats()
    leftovers = reap_leftovers()
    if leftovers:
        print(f"# killed servers left by an earlier run: pids {leftovers}")
    replog_ports = ReplogCluster("", args.replog_base_port).ports
    busy = [p for p in [*NatsCluster("").ports, *replog_ports] if not port_free(p)]
    if busy:
        raise SystemExit(f"ports in use: {busy}")
    # The load generator must not compete with the servers for pages: with glibc's defaults its
    # per-batch buffers (stamped copies, gRPC messages, fetch answers) are mmapped and unmapped
    # each time, 15-20k fresh pages a second, each faulted in and zeroed, which on this VM costs
    # the most exactly when the servers' own page-cache growth does (docs/benchmarks.md). A
    # Kafka producer reuses its batch buffers (BufferPool); the nodes keep theirs the same way.
    keep_large_buffers()
    # SIGTERM (e.g. a CI timeout) unwinds like Ctrl-C, so every `finally` stops its servers.
    signal.signal(signal.SIGTERM, _interrupted)

    shapes = {kib: make_shape(kib) for kib in BATCH_RECORDS}
    print(
        f"# {NatsCluster.version()}; python {sys.version.split()[0]}; nproc {os.cpu_count()}; "
        f"load average {loadavg()}; {args.runs} run(s); throughput trials {args.seconds:g} s, "
        f"paced {args.latency_seconds:g} s at {args.load_fraction:.0%} of peak; "
        f"producers {args.producers}; batches "
        + ", ".join(f"{k} KiB = {shapes[k].records} x 1 KiB ({len(shapes[k].data):,} B)"
                    for k in args.batch_kib)
        + f"; partitions {args.partitions}",
        flush=True,
    )  # fmt: skip
    runs: list[RunResult] = []
    try:
        for run in range(1, args.runs + 1):
            result = one_run(run, args, shapes)
            runs.append(result)
            print(f"\nrun {run}:")
            print("\n".join(table([result.figures()])), flush=True)
            print()
    finally:
        if args.json and runs:
            document = [
                {
                    "run": r.run,
                    "loadavg_start": r.loadavg_start,
                    "page_cache_passes_MB_s": r.page_cache_passes,  # 5 s apart
                    "page_cache_reuse_passes_MB_s": r.page_cache_reuse_passes,
                    "page_cache_warm_up_MB_s": r.page_cache_warm_up_mb_s,
                    "figures": r.figures(),
                    "trials": [
                        t.summary()
                        for s in (r.nats, r.replog)
                        if s is not None
                        for t in [*s.throughput, s.latency, s.e2e]
                        if t is not None
                    ],
                }
                for r in runs
            ]
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump(document, f, indent=1)
    if len(runs) > 1:
        print(f"medians over {len(runs)} runs (ratio: median of the per-run ratios, and range):")
        print("\n".join(table([r.figures() for r in runs])))
    print(f"# load average at the end: {loadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
