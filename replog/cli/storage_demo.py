"""`replog storage-demo`: the storage engine surviving a crash, end to end, on embedded defaults.

What it does, printing progress as it goes:
1. A writer process opens a log and appends batches of keyed events, printing the offsets of
   each acknowledged append (the log's append returned).
2. The demo kills the writer with SIGKILL mid-stream: no flush, no clean shutdown.
3. It then tears the log's tail the way a power loss mid-write would: the first half of one
   more batch is left at the end of the active segment.
4. It reopens the log, which recovers: every batch after the recovery point is validated and
   the torn tail is cut (the log says which file, offset and bytes).
5. It verifies that every acknowledged event is present exactly once, at its offset, with its
   key and value, that offsets are dense, and reads the whole log back, timing it.
6. It closes the log cleanly and reopens it to show that a clean open does not rescan.

Exit code 0 when every check held, 1 otherwise.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

from replog.cli.arguments import add_documented_command
from replog.record import RecordBatch, build_batch
from replog.storage import Log, LogConfig

RECORDS_PER_BATCH = 100
VALUE_BYTES = 200
PARTITION_DIR = "demo-events-0"


def event(offset: int) -> tuple[bytes, bytes]:
    """The key and value the writer stores at `offset`: deterministic so the reader can check."""
    key = f"user-{offset % 97}".encode()
    value = (f"event-{offset}:".encode() + b"x" * VALUE_BYTES)[:VALUE_BYTES]
    return key, value


def demo_batch(first_offset: int, now_ms: int) -> bytes:
    records = []
    for i in range(RECORDS_PER_BATCH):
        key, value = event(first_offset + i)
        records.append((now_ms, key, value, ()))
    return build_batch(records)


def register(commands: Any) -> None:
    parser = add_documented_command(
        commands,
        "storage-demo",
        __doc__,
    )
    parser.add_argument(
        "--data-dir", help="where to put the log (default: a temporary dir, removed after)"
    )
    parser.add_argument(
        "--run-seconds", type=float, default=2.0, help="how long the writer runs before the kill"
    )
    parser.add_argument(
        "--segment-bytes", type=int, default=4 * 1024 * 1024, help="segment.bytes for the demo log"
    )
    parser.set_defaults(run=run)


class _CollectWarnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def run(args: argparse.Namespace) -> int:
    base = args.data_dir or tempfile.mkdtemp(prefix="replog-demo-")
    directory = os.path.join(base, PARTITION_DIR)
    if os.path.exists(directory):
        shutil.rmtree(directory)
    config = LogConfig(segment_bytes=args.segment_bytes)
    try:
        return _run(directory, config, args.run_seconds)
    finally:
        if not args.data_dir:
            shutil.rmtree(base, ignore_errors=True)


def _say(text: str) -> None:
    print(text, flush=True)


def _run(directory: str, config: LogConfig, run_seconds: float) -> int:
    _say(
        f"[1/6] starting a writer process appending {RECORDS_PER_BATCH}-record batches "
        f"to {directory}"
    )
    writer = subprocess.Popen(
        [sys.executable, "-m", "replog.cli.storage_demo", directory, str(config.segment_bytes)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout is not None
    acknowledged_end = 0
    deadline = time.monotonic() + run_seconds
    for line in writer.stdout:
        acknowledged_end = int(line.split()[1]) + 1
        if time.monotonic() >= deadline:
            break
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    writer.stdout.close()
    _say(f"[2/6] killed the writer with SIGKILL after {acknowledged_end:,} acknowledged records")
    if acknowledged_end == 0:
        _say("FAILED: the writer acknowledged nothing")
        return 1

    segments = sorted(n for n in os.listdir(directory) if n.endswith(".log"))
    active = os.path.join(directory, segments[-1])
    torn = demo_batch(0, int(time.time() * 1000))
    with open(active, "ab") as f:
        f.write(torn[: len(torn) // 2])
    _say(
        f"[3/6] tore the tail: wrote {len(torn) // 2} of {len(torn)} bytes of one more batch "
        f"to {segments[-1]}"
    )

    collector = _CollectWarnings()
    storage_log = logging.getLogger("replog.storage")
    level, propagate = storage_log.level, storage_log.propagate
    storage_log.addHandler(collector)
    storage_log.setLevel(logging.INFO)
    storage_log.propagate = False  # the demo prints these lines itself
    try:
        started = time.perf_counter()
        log = Log.open(directory, config)
        recovery_s = time.perf_counter() - started
    finally:  # as it was: the demo may run inside a bigger program (or a test session)
        storage_log.removeHandler(collector)
        storage_log.setLevel(level)
        storage_log.propagate = propagate
    _say(f"[4/6] reopened in {recovery_s * 1000:.1f} ms: {log}")
    for line in collector.lines:
        _say(f"      recovery: {line}")

    failures = _verify(log, acknowledged_end)
    log.close()
    started = time.perf_counter()
    log = Log.open(directory, config)
    clean_open_s = time.perf_counter() - started
    log.close()
    _say(f"[6/6] closed cleanly and reopened in {clean_open_s * 1000:.1f} ms without a rescan")
    if failures:
        for failure in failures:
            _say(f"FAILED: {failure}")
        return 1
    _say("OK: every acknowledged record survived the crash exactly once, in order")
    return 0


def _verify(log: Log, acknowledged_end: int) -> list[str]:
    failures = []
    if log.log_end_offset < acknowledged_end:
        failures.append(
            f"log end offset {log.log_end_offset} is below the acknowledged {acknowledged_end}"
        )
    started = time.perf_counter()
    expected = 0
    read_bytes = 0
    for _, data in log.read_batches(0):
        read_bytes += len(data)
        for record in RecordBatch.parse(data):
            if record.offset != expected:
                failures.append(f"offset {record.offset} where {expected} was expected")
                return failures
            if (record.key, record.value) != event(record.offset):
                failures.append(f"offset {record.offset} holds the wrong key or value")
                return failures
            expected += 1
    elapsed = time.perf_counter() - started
    if expected < acknowledged_end:
        failures.append(f"read {expected} records, {acknowledged_end} were acknowledged")
    _say(
        f"[5/6] read back {expected:,} records ({read_bytes / 2**20:.1f} MiB) "
        f"in {elapsed * 1000:.0f} ms, "
        f"decoding every record: {expected / max(elapsed, 1e-9):,.0f} records/s; "
        f"{expected - acknowledged_end} written but unacknowledged when killed"
    )
    return failures


def _writer_main(directory: str, segment_bytes: int) -> None:
    """The writer process: append until killed, printing each acknowledged last offset."""
    log = Log.open(directory, LogConfig(segment_bytes=segment_bytes))
    out = sys.stdout
    while True:
        batch = demo_batch(log.log_end_offset, int(time.time() * 1000))
        info = log.append_as_leader(batch, leader_epoch=0)
        out.write(f"ack {info.last_offset}\n")
        out.flush()


if __name__ == "__main__":
    _writer_main(sys.argv[1], int(sys.argv[2]))
