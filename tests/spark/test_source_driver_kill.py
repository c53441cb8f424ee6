"""A streaming query's driver killed (SIGKILL, no clean stop) and restarted from its checkpoint
delivers every committed record exactly once.

The driver is a process of its own (`stream_driver.py`: a Python and its JVM, killed together as
one process group) reading with `trigger(processingTime=...)` into a Parquet directory while
records keep arriving; it is killed while a micro-batch is in flight (logged in the checkpoint's
offsets, not yet committed) when the test catches one, else between two. Another driver (the
test's own session: a second JVM start would double the test's time) then resumes from the
checkpoint with `trigger(availableNow=True)`: it replays the logged micro-batch with exactly its
range and reads on to the end. The file sink ignores a killed batch's partial
files, so the output holds each record once exactly when the source replays exact ranges.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from client_cluster import ClientCluster
from pyspark.sql import SparkSession
from source_helpers import delivered, produce, run_available_now
from stream_driver import MAX_OFFSETS_PER_TRIGGER

from replog import Producer

DRIVER = Path(__file__).with_name("stream_driver.py")
START_TIMEOUT_S = 120  # a JVM and its Python workers on a shared 2-core machine
MAX_RECORDS = 400  # per partition, in all: about 8 micro-batches of stream_driver's 100


def batch_ids(directory: Path) -> set[int]:
    return {int(p.name) for p in directory.glob("[0-9]*")} if directory.is_dir() else set()


def start_driver(
    cluster: ClientCluster, topic: str, out: Path, ckpt: Path, log: Path
) -> subprocess.Popen[bytes]:
    scratch = log.parent / "driver-scratch"  # made by the driver's local_session
    with log.open("ab") as sink:  # a file, not a pipe nobody reads while the driver runs
        return subprocess.Popen(
            [
                sys.executable,
                str(DRIVER),
                cluster.bootstrap,
                topic,
                str(out),
                str(ckpt),
                str(scratch),
            ],
            start_new_session=True,  # its own process group: the JVM and workers die with it
            stdout=sink,
            stderr=sink,
        )


def tail(log: Path) -> str:
    return log.read_text(errors="replace")[-3000:]


@pytest.mark.slow  # a JVM of its own: 30-40 s on a quiet machine
def test_a_killed_driver_restarts_from_its_checkpoint_exactly_once(
    spark: SparkSession, replog_cluster: ClientCluster, tmp_path: Path
) -> None:
    topic = "s-driver-kill"
    replog_cluster.create_topic(topic, 2, 3)
    written = {p: [b"%d-%d" % (p, i) for i in range(200)] for p in (0, 1)}
    for p, values in written.items():
        produce(replog_cluster, topic, p, values)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"

    stop_writing = threading.Event()

    def keep_writing() -> None:  # records arriving while the first driver runs
        with Producer(bootstrap_servers=replog_cluster.bootstrap, acks="all") as producer:
            while not stop_writing.wait(0.1) and len(written[0]) < MAX_RECORDS:
                for p, values in written.items():
                    more = [b"%d-%d" % (p, len(values) + i) for i in range(5)]
                    for value in more:
                        producer.send(topic, value, partition=p).get(timeout=30)
                    values.extend(more)

    log = tmp_path / "drivers.log"
    driver = start_driver(replog_cluster, topic, out, ckpt, log)
    writer = threading.Thread(target=keep_writing)
    writer.start()
    in_flight = False
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and driver.poll() is None:
            committed = batch_ids(ckpt / "commits")
            logged = batch_ids(ckpt / "offsets")
            if len(committed) >= 2 and logged - committed:
                in_flight = True  # a micro-batch logged and not committed: kill it now
                break
            if len(committed) >= 5:
                break  # no luck catching one in flight: a kill between batches
            time.sleep(0.005)
        assert driver.poll() is None, tail(log)
        assert len(batch_ids(ckpt / "commits")) >= 2, tail(log)
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(30)
    finally:
        stop_writing.set()
        writer.join()
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    logged_before = batch_ids(ckpt / "offsets")

    # The restart: this test's own session (a driver too) resumes from the checkpoint.
    run_available_now(
        spark, replog_cluster, topic, out, ckpt, maxOffsetsPerTrigger=MAX_OFFSETS_PER_TRIGGER
    )
    assert logged_before <= batch_ids(ckpt / "commits"), "a logged batch was never committed"

    got = delivered(spark, out)
    expected = sorted((p, i, v) for p, values in written.items() for i, v in enumerate(values))
    assert len(got) == len(set(got)), "a record was delivered twice"
    assert got == expected, f"killed in flight: {in_flight}"
