"""CPU per row of a Spark task's read outside Spark, part by part (issue #56): the fetch path
(socket receive, framing, answer parse, batch walk and CRC-32C, buffers) beside the decode and
the Arrow batch.

What a Spark task runs in its Python worker (`replog.spark.range_reader.read_range`), run here
in one process against a 3-node cluster: every partition of the topic read whole, one task
after another, with the worker's kept fetch sessions (`fetch_sessions`) as a reused Python
worker has them. `--passes` reads per run; the first pass (sessions opened, code warmed) is not
counted. Per row read (ns = CPU ns per row):

- `reader`: the process's CPU (`time.process_time`), everything a worker spends on the read;
- `task thread`: the thread that runs `read_range` (Spark's task thread);
- `loop thread`: the session's fetch loop thread(s) (`replog-spark-fetch`): requests, the
  socket's receive into the answer's buffer and its callbacks, the answer's parse;
- parts, timed with `time.thread_time` around the functions that do them (names looked up
  at run time, so either side's code is timed where it has them; a part a side lacks is left
  out): `recv` (asyncio's read-ready callback: `recv_into` and the protocol's callbacks),
  `parse` (`decode_response` of each answer: its fields decoded, the records left as views of
  the answer's buffer), `walk+crc` (`_batches_to_read`: the batch walk and checks),
  of it `crc` (`compute_crc` / `crc32c` calls), `decode` (`decode_batches`), `arrow`
  (`columns_to_record_batch`); `loop other` = loop thread minus `recv` and `parse` (epoll,
  the loop's Python, requests), `task other` = task thread minus its parts;
- `task thread system`, `loop thread system`: the kernel's share of those threads (clock
  ticks from /proc, coarse); `minflt`: minor page faults per 1,000 rows (fresh memory the
  kernel maps); `answers`: fetch answers per pass; `recv KiB`: bytes per read-ready callback.

The wrappers cost CPU of their own (a few hundred ns per call, about 1 ns per row for
`recv`); both sides pay them alike.

With `--base COMMIT` each run is a fresh process per side, the sides alternating (bench/
base_commit.py), both reading the same cluster; each figure prints both sides' min / median /
max and working tree / base per run pair.

The cluster: started here (`replog cluster start` on `--base-port`..+2, data in a temporary
directory, removed at the end) with `--records` records of `--record-size` random bytes and
one of 100 keys, round-robin over 3 partitions, RF 3, as `bench/spark_read.py` produces them;
or `--bootstrap ADDRS` reads a running cluster's topic `spark-read-bench` instead.

    python bench/spark_fetch_path.py --runs 5 --base-port 25000
    python bench/spark_fetch_path.py --runs 5 --base e0bbb74 --bootstrap 127.0.0.1:25000
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

from base_commit import against_lines, runs_against, spread

# bench/timeline.py would shadow the timeline package replog imports; PYTHONPATH (the side's
# code root) goes first instead.
_BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _BENCH_DIR]

TOPIC = "spark-read-bench"
PARTS = ("recv", "parse", "walk+crc", "crc", "decode", "arrow")


class Timer:
    """Thread CPU spent inside wrapped functions, per part."""

    def __init__(self) -> None:
        self.ns: dict[str, int] = dict.fromkeys(PARTS, 0)
        self.calls: dict[str, int] = dict.fromkeys(PARTS, 0)
        self.recv_bytes = 0

    def wrap(self, owner: Any, name: str, part: str) -> None:
        """Time `owner.name` (if that side's code has it) as `part`."""
        original = getattr(owner, name, None)
        if original is None:
            return
        ns, calls, clock = self.ns, self.calls, time.thread_time_ns

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = clock()
            try:
                return original(*args, **kwargs)
            finally:
                ns[part] += clock() - started
                calls[part] += 1

        setattr(owner, name, timed)


def install(timer: Timer) -> None:
    import asyncio.selector_events as selector_events

    from replog.record import header
    from replog.spark import range_reader
    from replog.wire import kafka_connection

    transport: Any = getattr(selector_events, "_SelectorSocketTransport")  # noqa: B009 (private)
    original = transport._read_ready__get_buffer
    ns, calls, clock = timer.ns, timer.calls, time.thread_time_ns

    def read_ready(self: Any) -> None:
        started = clock()
        try:
            original(self)
        finally:
            ns["recv"] += clock() - started
            calls["recv"] += 1

    transport._read_ready__get_buffer = read_ready
    connection: Any = kafka_connection.KafkaConnection
    updated = connection.buffer_updated

    def buffer_updated(self: Any, nbytes: int) -> None:
        timer.recv_bytes += nbytes
        updated(self, nbytes)

    connection.buffer_updated = buffer_updated
    timer.wrap(kafka_connection, "decode_response", "parse")
    timer.wrap(range_reader, "_batches_to_read", "walk+crc")
    # Every CRC-32C of a read is a call of the header module's `crc32c` (`compute_crc` and the
    # inlined check in `validate_batch`).
    timer.wrap(header, "crc32c", "crc")
    timer.wrap(range_reader, "decode_batches", "decode")
    timer.wrap(range_reader, "columns_to_record_batch", "arrow")


def system_ns(names: tuple[str, ...]) -> int:
    """System (kernel) CPU of this process's threads whose names start with `names`
    (clock ticks from /proc: coarse, summed over a pass)."""
    tick_ns = 1_000_000_000 // os.sysconf("SC_CLK_TCK")
    idents = {t.native_id for t in threading.enumerate() if t.name.startswith(names)}
    total = 0
    for tid in idents:
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[12]) * tick_ns  # stime: field 15 of stat
    return total


def loop_threads_ns() -> int:
    total = 0
    for thread in threading.enumerate():
        if thread.name.startswith("replog-spark-fetch") and thread.ident is not None:
            with contextlib.suppress(OSError):  # ended since enumerate
                total += time.clock_gettime_ns(time.pthread_getcpuclockid(thread.ident))
    return total


def plan(bootstrap: str) -> list[Any]:
    """The topic's partitions as a batch read plans them: [log start, high watermark)."""
    from replog.spark.cluster_view import ClusterView
    from replog.spark.options import Subscribe
    from replog.spark.planning import OffsetRange

    view = ClusterView({"bootstrap.servers": bootstrap}, strict=True)
    try:
        partitions = view.partitions(Subscribe((TOPIC,)))
        bounds = view.bounds(partitions)
    finally:
        view.close()
    return [
        OffsetRange(t, p, bounds[(t, p)].earliest, bounds[(t, p)].latest) for t, p in partitions
    ]


def read_schema() -> Any:
    """The source's Arrow schema, as Spark hands it to a task (without headers)."""
    import pyarrow as pa

    names = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType")
    types = (pa.binary(), pa.binary(), pa.string(), pa.int32(), pa.int64())
    types += (pa.timestamp("us", tz="UTC"), pa.int32())
    return pa.schema(list(zip(names, types, strict=True)))


def measure(bootstrap: str, passes: int) -> dict[str, list[float]]:
    """Per counted pass, ns per row of each figure (module docstring)."""
    from replog.spark import range_reader
    from replog.spark.options import Mode, parse_options

    options = parse_options({"bootstrap.servers": bootstrap, "subscribe": TOPIC}, Mode.BATCH)
    pieces = plan(bootstrap)
    schema = read_schema()
    timer = Timer()
    install(timer)
    figures: dict[str, list[float]] = {}
    for index in range(passes + 1):
        parts_before = dict(timer.ns)
        recv_calls, recv_bytes = timer.calls["recv"], timer.recv_bytes
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        process, thread, loop = time.process_time_ns(), time.thread_time_ns(), loop_threads_ns()
        task_sys, loop_sys = system_ns(("MainThread",)), system_ns(("replog-spark-fetch",))
        answers = timer.calls["parse"]
        rows = 0
        for piece in pieces:
            for batch in range_reader.read_range(piece, options, schema):
                rows += batch.num_rows
        process = time.process_time_ns() - process
        thread = time.thread_time_ns() - thread
        loop = loop_threads_ns() - loop
        task_sys = system_ns(("MainThread",)) - task_sys
        loop_sys = system_ns(("replog-spark-fetch",)) - loop_sys
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
        if rows != sum(p.end - p.start for p in pieces):
            raise SystemExit(f"read {rows} rows, planned {sum(p.end - p.start for p in pieces)}")
        if index == 0:
            continue  # sessions opened, code warmed
        part = {name: timer.ns[name] - parts_before[name] for name in PARTS}
        calls = timer.calls["recv"] - recv_calls
        row: dict[str, float] = {
            "reader": process / rows,
            "task thread": thread / rows,
            "loop thread": loop / rows,
            **{name: part[name] / rows for name in PARTS},
            "loop other": (loop - part["recv"] - part["parse"]) / rows,
            "task other": (thread - part["walk+crc"] - part["decode"] - part["arrow"]) / rows,
            "task thread system": task_sys / rows,
            "loop thread system": loop_sys / rows,
            "minflt": 1000 * faults / rows,
            "answers": timer.calls["parse"] - answers,
            "recv KiB": (timer.recv_bytes - recv_bytes) / max(1, calls) / 1024,
        }
        for name, value in row.items():
            figures.setdefault(name, []).append(value)
    return figures


def start_cluster(args: argparse.Namespace, directory: str) -> str:
    """A 3-node cluster with the data set (bench/spark_read.py's); its bootstrap servers."""
    sys.path.insert(0, _BENCH_DIR)
    import spark_read

    sys.path[:] = [p for p in sys.path if p != _BENCH_DIR]  # spark_read may have done it
    cluster = spark_read.Cluster(os.path.join(directory, "cluster"), args.base_port)
    cluster.start()
    cluster.create_topic(3)
    data = spark_read.Dataset(
        args.records, args.record_size, 3, os.urandom(args.records * args.record_size),
        int(time.time() * 1000),
    )  # fmt: skip
    spark_read.produce(cluster, data)
    stop: Callable[[], None] = cluster.stop
    STOPS.append(stop)
    return cluster.bootstrap


STOPS: list[Callable[[], None]] = []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="processes (per side with --base)")
    parser.add_argument("--passes", type=int, default=3, help="counted reads per run")
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--base-port", type=int, default=25000)
    parser.add_argument("--bootstrap", help="read this running cluster's topic instead")
    parser.add_argument("--base", metavar="COMMIT", help="also time this commit's code")
    parser.add_argument("--emit-json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.emit_json:
        print(json.dumps(measure(args.bootstrap, args.passes)))
        return
    with tempfile.TemporaryDirectory(prefix="replog-bench-fetch-") as directory:
        try:
            bootstrap = args.bootstrap or start_cluster(args, directory)
            child_args = ["--bootstrap", bootstrap, "--passes", str(args.passes)]
            script = os.path.join(_BENCH_DIR, "spark_fetch_path.py")
            work, base = runs_against(script, child_args, args.runs, args.base)
        finally:
            for stop in STOPS:
                stop()
    print(
        f"# ns of CPU per row ({args.runs} runs x {args.passes} passes a side); "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    if base is None:
        for name, values in work.items():
            print(f"{name}: {spread(values)}")
    else:
        print("\n".join(against_lines(work, base, args.base)))


if __name__ == "__main__":
    main()
