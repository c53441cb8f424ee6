"""Storage engine benchmark (issue #2, item 10): replog's `Log` against a plain file, same run.

Usage::

    .venv/bin/python bench/storage.py            # full run, a few minutes
    .venv/bin/python bench/storage.py --quick    # smoke run, well under 30 s

What it measures. Every figure is a median over `--reps` runs that alternate baseline and
replog (the order flips every run), so slow phases of a noisy machine hit both sides alike; a
first, unrecorded run of each warms both paths.

- Append: `Log.append_as_leader` of pre-built batches of 1 KiB records (16 KiB and 1 MiB
  batches) against `os.write` of the same batch bytes to a plain file. Two flush policies:
  the default (no fsync on either side: both stay in the page cache) and `flush.each.append`
  against `os.write` + `os.fdatasync` per batch. `segment.bytes` is the default 1 GiB, so no
  run rolls. Each run writes a fresh file that is deleted right after, followed by `sync`, so
  dirty pages are dropped rather than written back during a later run. The first batch of a
  run is written untimed on both sides: on the log it persists the leader-epoch checkpoint, a
  cost per leadership change, not per append.
- Read: `Log.read(offset, 1 MiB, upper_bound_offset=high watermark)` sequentially over the
  whole log against `os.pread` of 1 MiB chunks of the same segment files, warm page cache.
- Recovery: the same unflushed tail (the active segment, written after a roll flushed the
  rest) in a small and a large log with several segments, abandoned with
  `close_without_flush()`; `Log.open` is timed (warm page cache). Also a clean open of both.
  The goal is an open time independent of the log size.
- Index: writing (`flush`) and loading the `.index` and `.timeindex` of a full default
  segment of 4 KiB batches (1 GiB / `index.interval.bytes` = 262,144 entries each) against
  `os.write` / reading back the same bytes of a plain file. A roll writes the old segment's
  indexes under the log's lock, and a read of an old segment loads them, so their cost is a
  stall of the partition's appends or reads, not a throughput figure.

The batches are built with `build_batch` before any timed region, so the builder is not
measured; a pool of distinct batches (`--pool-mib`, larger than the L2 cache) is appended
round-robin by both sides. CRC-32C validation of every appended batch is part of
`append_as_leader` and is measured. MB is 10^6 bytes of batch bytes (headers included), the
same bytes on both sides. Besides wall-clock throughput, each side's CPU time (`thread_time`,
user + system) is recorded: its ratio is less disturbed by other load on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from replog.record.builder import build_batch
from replog.storage import Log, LogConfig
from replog.storage.fs import OsFileSystem
from replog.storage.index_file import IndexFile, OffsetIndex, TimeIndex

KIB = 1024
MIB = 1024 * KIB
RECORD_VALUE_BYTES = 1014  # with its ~10 bytes of record framing, a record is about 1 KiB
READ_MAX_BYTES = 1 * MIB
_FRAME = struct.Struct(">qi")


@dataclass(frozen=True)
class Mode:
    append_bytes: int  # data per append run
    sync_append_bytes: int  # data per run with an fdatasync per batch
    read_bytes: int  # size of the log read back
    reps: int
    recovery_segment_bytes: int
    recovery_tail_bytes: int
    recovery_small_bytes: int
    recovery_large_bytes: int


FULL = Mode(512 * MIB, 64 * MIB, 512 * MIB, 11, 64 * MIB, 32 * MIB, 100 * MIB, 1024 * MIB)
QUICK = Mode(64 * MIB, 4 * MIB, 64 * MIB, 5, 16 * MIB, 8 * MIB, 20 * MIB, 100 * MIB)


@dataclass(frozen=True)
class BatchShape:
    label: str
    records: int  # records per batch
    pool: list[bytes]  # distinct pre-built batches, appended round-robin

    @property
    def size(self) -> int:
        return len(self.pool[0])


@dataclass
class Timing:
    wall: list[float]
    cpu: list[float]


def build_shape(label: str, records: int, pool_bytes: int) -> BatchShape:
    """Distinct batches of `records` 1 KiB records, about `pool_bytes` in all, all one size."""
    pool: list[bytes] = []
    timestamp = 1_700_000_000_000
    while not pool or len(pool) * len(pool[0]) < pool_bytes:
        value = os.urandom(RECORD_VALUE_BYTES)
        # One timestamp per batch keeps every record (and so every batch) the same size.
        pool.append(build_batch([(timestamp, None, value, ())] * records))
        timestamp += 1
    assert len({len(b) for b in pool}) == 1
    return BatchShape(label, records, pool)


def batches_for(shape: BatchShape, total_bytes: int) -> list[bytes]:
    count = max(2, total_bytes // shape.size)
    return [shape.pool[i % len(shape.pool)] for i in range(count)]


def _clocks() -> tuple[float, float]:
    return time.perf_counter(), time.thread_time()


def _since(start: tuple[float, float]) -> tuple[float, float]:
    wall, cpu = _clocks()
    return wall - start[0], cpu - start[1]


# --- append --------------------------------------------------------------------------------


def time_plain_append(path: str, batches: list[bytes], sync: bool) -> tuple[float, float]:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write, fdatasync = os.write, os.fdatasync
        write(fd, batches[0])  # untimed, as on the log side
        rest = batches[1:]
        start = _clocks()
        if sync:
            for batch in rest:
                write(fd, batch)
                fdatasync(fd)
        else:
            for batch in rest:
                write(fd, batch)
        return _since(start)
    finally:
        os.close(fd)


def time_log_append(directory: str, batches: list[bytes], config: LogConfig) -> tuple[float, float]:
    log = Log.open(directory, config)
    try:
        append = log.append_as_leader
        # The first append of a leader epoch writes and fsyncs the leader-epoch checkpoint
        # once (a few ms): a cost per leadership change, not per append, so it is not timed.
        append(batches[0], 0)
        rest = batches[1:]
        start = _clocks()
        for batch in rest:
            append(batch, 0)
        elapsed = _since(start)
        assert log.log_end_offset == len(batches) * read_records(batches[0])
        return elapsed
    finally:
        # Abandon rather than close: close() would fsync, and the files are deleted next.
        log.close_without_flush()


def read_records(batch: bytes) -> int:
    return int.from_bytes(batch[57:61], "big")


def bench_append(
    root: str, shape: BatchShape, total: int, reps: int, sync: bool
) -> dict[str, object]:
    batches = batches_for(shape, total)
    timed = len(batches) - 1  # the first batch is written untimed
    config = LogConfig(flush_each_append=sync)  # segment.bytes: the default 1 GiB
    plain = Timing([], [])
    log = Timing([], [])
    for rep in range(reps + 1):  # rep 0 warms up both paths and is not counted
        for side in ("plain", "log") if rep % 2 == 0 else ("log", "plain"):
            target = os.path.join(root, f"append-{side}")
            if side == "plain":
                wall, cpu = time_plain_append(target, batches, sync)
            else:
                wall, cpu = time_log_append(target, batches, config)
            _remove(target)
            os.sync()  # start the next run with no dirty pages waiting for writeback
            if rep:
                timing = plain if side == "plain" else log
                timing.wall.append(wall)
                timing.cpu.append(cpu)
    return _result(timed * shape.size, timed * shape.records, plain, log)


# --- read ----------------------------------------------------------------------------------


def make_log(directory: str, shape: BatchShape, total: int, config: LogConfig) -> None:
    log = Log.open(directory, config)
    for batch in batches_for(shape, total):
        log.append_as_leader(batch, 0)
    log.high_watermark = log.log_end_offset
    log.close()


def time_log_read(log: Log, shape: BatchShape) -> tuple[float, float, int]:
    read = log.read
    batch_size, records = shape.size, shape.records
    offset = log.log_start_offset
    bound = log.high_watermark
    total = 0
    start = _clocks()
    while offset < bound:
        data = read(offset, READ_MAX_BYTES, bound)
        # Every batch has the same size and record count, so the next offset needs no framing
        # (`check_read` verified the framing once, untimed).
        offset += len(data) // batch_size * records
        total += len(data)
    return (*_since(start), total)


def time_plain_read(paths: list[str]) -> tuple[float, float, int]:
    fds = [os.open(path, os.O_RDONLY) for path in paths]
    try:
        pread = os.pread
        total = 0
        start = _clocks()
        for fd in fds:
            position = 0
            while True:
                chunk = pread(fd, READ_MAX_BYTES, position)
                if not chunk:
                    break
                position += len(chunk)
                total += len(chunk)
        return (*_since(start), total)
    finally:
        for fd in fds:
            os.close(fd)


def check_read(log: Log, shape: BatchShape) -> None:
    """The reads return whole, correctly placed batches (checked once, outside the timing)."""
    offset, bound = log.log_start_offset, log.high_watermark
    while offset < bound:
        data = log.read(offset, READ_MAX_BYTES, bound)
        assert data and len(data) % shape.size == 0, (offset, len(data))
        assert len(data) <= max(READ_MAX_BYTES, shape.size)
        for position in range(0, len(data), shape.size):
            base, length = _FRAME.unpack_from(data, position)
            assert base == offset and length + 12 == shape.size, (offset, base, length)
            offset += shape.records


def bench_read(root: str, shape: BatchShape, total: int, reps: int) -> dict[str, object]:
    directory = os.path.join(root, "read-0")
    make_log(directory, shape, total, LogConfig())
    log = Log.open(directory, LogConfig())
    try:
        paths = [segment.log_path for segment in log.segments()]
        check_read(log, shape)
        plain = Timing([], [])
        timings = Timing([], [])
        log_bytes = plain_bytes = 0
        for rep in range(reps + 1):  # rep 0 warms the page cache and is not counted
            for side in ("plain", "log") if rep % 2 == 0 else ("log", "plain"):
                if side == "plain":
                    wall, cpu, plain_bytes = time_plain_read(paths)
                else:
                    wall, cpu, log_bytes = time_log_read(log, shape)
                if rep:
                    timing = plain if side == "plain" else timings
                    timing.wall.append(wall)
                    timing.cpu.append(cpu)
        assert log_bytes == plain_bytes, (log_bytes, plain_bytes)
        records = log.high_watermark - log.log_start_offset
        return _result(log_bytes, records, plain, timings)
    finally:
        log.close()
        shutil.rmtree(directory, ignore_errors=True)


# --- recovery ------------------------------------------------------------------------------


def make_crashed_log(
    directory: str, shape: BatchShape, total: int, tail: int, segment_bytes: int
) -> int:
    """A log of `total` bytes whose last `tail` bytes were never flushed, abandoned open.

    The bulk is written first; a roll then flushes it (and persists the recovery point), and
    the tail goes into the new active segment. Returns the number of segments.
    """
    log = Log.open(directory, LogConfig(segment_bytes=segment_bytes))
    batches = batches_for(shape, total)
    tail_count = tail // shape.size
    for batch in batches[:-tail_count]:
        log.append_as_leader(batch, 0)
    log.roll()
    for batch in batches[-tail_count:]:
        log.append_as_leader(batch, 0)
    segments = log.segment_count
    assert log.recovery_point == log.active_segment.base_offset
    log.close_without_flush()
    return segments


def time_open(directory: str, config: LogConfig, *, crash: bool) -> tuple[float, int]:
    start = time.perf_counter()
    log = Log.open(directory, config)
    elapsed = time.perf_counter() - start
    end = log.log_end_offset
    if crash:
        # Leave it unclean again: the next open recovers exactly the same tail.
        log.close_without_flush()
    else:
        log.close()
    return elapsed, end


def bench_recovery(root: str, shape: BatchShape, mode: Mode, reps: int) -> dict[str, object]:
    config = LogConfig(segment_bytes=mode.recovery_segment_bytes)
    sizes = {"small": mode.recovery_small_bytes, "large": mode.recovery_large_bytes}
    dirs = {name: os.path.join(root, f"recover-{name}-0") for name in sizes}
    tail, segment_bytes = mode.recovery_tail_bytes, mode.recovery_segment_bytes
    segments = {
        name: make_crashed_log(dirs[name], shape, size, tail, segment_bytes)
        for name, size in sizes.items()
    }
    results: dict[str, object] = {"segments": segments, "sizes": sizes}
    try:
        for crash in (True, False):
            times: dict[str, list[float]] = {name: [] for name in sizes}
            ends: dict[str, set[int]] = {name: set() for name in sizes}
            if not crash:
                for name in sizes:  # one recovery plus a clean close makes the logs clean
                    Log.open(dirs[name], config).close()
            for rep in range(reps + 1):  # rep 0 is not recorded
                for name in ("small", "large") if rep % 2 == 0 else ("large", "small"):
                    elapsed, end = time_open(dirs[name], config, crash=crash)
                    ends[name].add(end)
                    if rep:
                        times[name].append(elapsed)
            assert all(len(e) == 1 for e in ends.values()), ends
            small, large = statistics.median(times["small"]), statistics.median(times["large"])
            results["unclean" if crash else "clean"] = {
                "small_s": small,
                "large_s": large,
                "small_range": (min(times["small"]), max(times["small"])),
                "large_range": (min(times["large"]), max(times["large"])),
                "ratio_large_small": large / small,
            }
    finally:
        for directory in dirs.values():
            shutil.rmtree(directory, ignore_errors=True)
    return results


INDEX_ENTRIES = 262_144  # a 1 GiB segment with an entry every 4 KiB (index.interval.bytes)
INDEX_BASE_OFFSET = 3_000_000_000  # beyond int32: the file holds offsets relative to it


def filled_index(kind: type[IndexFile], path: str) -> IndexFile:
    index = kind(path, INDEX_BASE_OFFSET, INDEX_ENTRIES + 1, OsFileSystem())
    index.reset()
    for i in range(INDEX_ENTRIES):
        if isinstance(index, OffsetIndex):
            index.append(INDEX_BASE_OFFSET + 4 * i, 4096 * i)
        elif isinstance(index, TimeIndex):
            index.maybe_append(1_700_000_000_000 + i, INDEX_BASE_OFFSET + 4 * i + 3)
    return index


def bench_index(root: str, reps: int) -> dict[str, object]:
    """Write and load each index kind against writing and reading its bytes plainly."""
    results: dict[str, object] = {}
    for kind in (OffsetIndex, TimeIndex):
        path, plain_path = os.path.join(root, "bench-index"), os.path.join(root, "plain-index")
        times: dict[str, list[float]] = {
            "write": [],
            "plain write": [],
            "load": [],
            "plain read": [],
        }
        for rep in range(reps + 1):  # rep 0 is not recorded
            index = filled_index(kind, path)
            start = time.perf_counter()
            index.flush(fsync=False)
            write_s = time.perf_counter() - start
            with open(path, "rb") as f:
                data = f.read()
            start = time.perf_counter()
            fd = os.open(plain_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.write(fd, data)
            os.close(fd)
            plain_write_s = time.perf_counter() - start
            loaded = kind(path, INDEX_BASE_OFFSET, INDEX_ENTRIES + 1, OsFileSystem())
            start = time.perf_counter()
            loaded.load(2**31 - 1)
            load_s = time.perf_counter() - start
            start = time.perf_counter()
            with open(plain_path, "rb") as f:
                read_back = f.read()
            plain_read_s = time.perf_counter() - start
            assert read_back == data and loaded.entries() == index.entries()
            if rep:
                for name, value in zip(
                    times, (write_s, plain_write_s, load_s, plain_read_s), strict=True
                ):
                    times[name].append(value)
            os.remove(path)
            os.remove(plain_path)
        medians = {name: statistics.median(values) for name, values in times.items()}
        results[kind.__name__] = {
            "entries": INDEX_ENTRIES,
            "bytes": len(data),
            **{f"{name.replace(' ', '_')}_s": value for name, value in medians.items()},
            "write_ratio": medians["write"] / medians["plain write"],
            "load_ratio": medians["load"] / medians["plain read"],
        }
    return results


def print_index(results: dict[str, object], r: dict[str, object]) -> None:
    results["index"] = r
    print(
        f"\n## Index files of a full segment ({INDEX_ENTRIES:,} entries each)\n\n"
        "| index | bytes | write ms | plain write ms | ratio | load ms | plain read ms | ratio |\n"
        "|---|---|---|---|---|---|---|---|"
    )
    for name, x in r.items():
        f: dict[str, float] = x  # type: ignore[assignment]
        print(
            f"| {name} | {f['bytes']:,} | {f['write_s'] * 1e3:.1f} | "
            f"{f['plain_write_s'] * 1e3:.1f} | {f['write_ratio']:.1f}x | "
            f"{f['load_s'] * 1e3:.1f} | {f['plain_read_s'] * 1e3:.1f} | {f['load_ratio']:.1f}x |"
        )


# --- reporting -----------------------------------------------------------------------------


def _remove(path: str) -> None:
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.remove(path)


def _result(nbytes: int, records: int, plain: Timing, log: Timing) -> dict[str, object]:
    plain_s, log_s = statistics.median(plain.wall), statistics.median(log.wall)
    return {
        "bytes": nbytes,
        "records": records,
        "runs": len(log.wall),
        "log_mb_s": nbytes / log_s / 1e6,
        "log_mb_s_range": (nbytes / max(log.wall) / 1e6, nbytes / min(log.wall) / 1e6),
        "log_records_s": records / log_s,
        "plain_mb_s": nbytes / plain_s / 1e6,
        "plain_mb_s_range": (nbytes / max(plain.wall) / 1e6, nbytes / min(plain.wall) / 1e6),
        "ratio": plain_s / log_s,  # log throughput / baseline throughput, from the medians
        "paired_ratio": statistics.median(p / q for p, q in zip(plain.wall, log.wall, strict=True)),
        "cpu_ratio": statistics.median(plain.cpu) / statistics.median(log.cpu),
        "log_wall_s": log.wall,
        "plain_wall_s": plain.wall,
    }


def machine() -> dict[str, str]:
    def run(*cmd: str) -> str:
        try:
            result = subprocess.run(cmd, capture_output=True, text=True, check=False)
        except OSError:
            return "?"
        return result.stdout.strip()

    mem_kib = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    disk = run("df", "-h", "/tmp").splitlines()
    dirty = run("git", "status", "--porcelain", "--untracked-files=no")
    commit = run("git", "rev-parse", "--short", "HEAD")
    return {
        "nproc": run("nproc"),
        "memory": f"{mem_kib / 1024 / 1024:.1f} GiB",
        "python": platform.python_version(),
        "disk": " ".join(disk[-1].split()) if disk else "?",
        "commit": commit + (" with uncommitted changes" if dirty else ""),
    }


def _row(name: str, r: dict[str, object], goal: float | None) -> str:
    ratio = float(r["ratio"])  # type: ignore[arg-type]
    spread: tuple[float, float] = r["log_mb_s_range"]  # type: ignore[assignment]
    lo, hi = spread
    verdict = "" if goal is None else f">= {goal}x: {'met' if ratio >= goal else 'MISSED'}"
    return (
        f"| {name} | {r['log_mb_s']:,.0f} [{lo:,.0f}-{hi:,.0f}] | {r['log_records_s']:,.0f} | "
        f"{r['plain_mb_s']:,.0f} | {ratio:.2f}x | {r['cpu_ratio']:.2f}x | {verdict} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, finishes in < 30 s")
    parser.add_argument("--reps", type=int, help="measured runs per figure (default 11, quick 5)")
    parser.add_argument(
        "--only", choices=("append", "sync", "read", "recovery", "index"), action="append"
    )
    parser.add_argument("--pool-mib", type=int, default=16, help="distinct batches to cycle")
    parser.add_argument("--json", help="also write every result to this file")
    args = parser.parse_args(argv)
    mode = QUICK if args.quick else FULL
    reps = args.reps or mode.reps
    parts = args.only or ["append", "sync", "read", "recovery", "index"]
    began = time.perf_counter()

    pool_bytes = args.pool_mib * MIB
    shapes = [build_shape("16 KiB", 16, pool_bytes), build_shape("1 MiB", 1023, pool_bytes)]
    goals = {"16 KiB": 0.5, "1 MiB": 0.8}
    info = machine()
    kind = "quick" if args.quick else "full"
    print(f"# replog storage benchmark ({kind}, {reps} runs per figure, medians)")
    print("# " + ", ".join(f"{k} {v}" for k, v in info.items()))
    for shape in shapes:
        print(
            f"# {shape.label} batch: {shape.records} records of ~1 KiB = {shape.size:,} bytes; "
            f"pool of {len(shape.pool)} distinct batches"
        )
    results: dict[str, object] = {"machine": info, "mode": kind, "reps": reps}
    header = (
        "| case | replog MB/s [min-max] | replog records/s | baseline MB/s | ratio "
        "| CPU-time ratio | goal |\n|---|---|---|---|---|---|---|"
    )
    root = tempfile.mkdtemp(prefix="replog-bench-", dir="/tmp")
    try:
        if "append" in parts or "sync" in parts:
            print(f"\n## Append (segment.bytes = default 1 GiB: no roll in a run)\n\n{header}")
        for sync in (False, True):
            if ("sync" if sync else "append") not in parts:
                continue
            total = mode.sync_append_bytes if sync else mode.append_bytes
            for shape in shapes:
                r = bench_append(root, shape, total, reps, sync)
                policy = "flush.each.append vs write+fdatasync" if sync else "vs os.write"
                name = f"append {shape.label} batches, {policy} ({total // MIB} MiB)"
                results[name] = r
                print(_row(name, r, None if sync else goals[shape.label]), flush=True)
        if "read" in parts:
            print(f"\n## Read (warm cache, max_bytes 1 MiB, bound = high watermark)\n\n{header}")
            for shape in shapes:
                r = bench_read(root, shape, mode.read_bytes, reps)
                name = f"read {shape.label} batches ({mode.read_bytes // MIB} MiB) vs pread 1 MiB"
                results[name] = r
                print(_row(name, r, goals[shape.label]), flush=True)
        if "recovery" in parts:
            print_recovery(results, bench_recovery(root, shapes[0], mode, reps), mode, shapes[0])
        if "index" in parts:
            print_index(results, bench_index(root, reps))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"\n# took {time.perf_counter() - began:.1f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2, default=str)
    return 0


def print_recovery(
    results: dict[str, object], r: dict[str, object], mode: Mode, shape: BatchShape
) -> None:
    results["recovery"] = r
    segments: dict[str, int] = r["segments"]  # type: ignore[assignment]
    print(
        f"\n## Open (warm cache; {shape.label} batches; segment.bytes "
        f"{mode.recovery_segment_bytes // MIB} MiB; unflushed tail "
        f"{mode.recovery_tail_bytes // MIB} MiB = the active segment)\n"
    )
    small, large = mode.recovery_small_bytes // MIB, mode.recovery_large_bytes // MIB
    print(
        f"| open | {small} MiB log ({segments['small']} segments), ms | "
        f"{large} MiB log ({segments['large']} segments), ms | ratio large/small |"
    )
    print("|---|---|---|---|")
    for key in ("unclean", "clean"):
        x: dict[str, object] = r[key]  # type: ignore[assignment]
        ms: list[str] = []
        for size in ("small", "large"):
            median = float(x[f"{size}_s"]) * 1e3  # type: ignore[arg-type]
            spread: tuple[float, float] = x[f"{size}_range"]  # type: ignore[assignment]
            ms.append(f"{median:.1f} [{spread[0] * 1e3:.1f}-{spread[1] * 1e3:.1f}]")
        print(f"| {key} | {ms[0]} | {ms[1]} | {x['ratio_large_small']:.2f} |")


if __name__ == "__main__":
    sys.exit(main())
