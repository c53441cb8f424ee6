"""A benchmark driver process: one producer, consumer or admin client (a metadata run's) of a
run, in a process of its own (`python -m replog.cli.bench.worker`), so that no client shares a
GIL with another.

It speaks the driver-process protocol of `replog.cli.bench.processes` (which the compiled
JetStream driver, bench/jetstream/main.go, speaks too): the task, one JSON line, on stdin;
"ready" on stdout once its client is built; "go START_NS" on stdin (start now; send times
count from START_NS, the run's start in ns since the epoch); a consumer prints "n COUNT"
(records received so far) every `PROGRESS_S` and stops at "stop" on stdin; at the end
"result {JSON}" (records, errors, this process's CPU seconds since "go", produce requests sent,
the last receipt's time) and exit 0. The samples (for each acknowledged or received record: seconds
since the start when it was sent, latency in ms) go to the task's
`samples_path` (`stats.write_samples`).

Rules: a producer sends for `run_s` seconds, or `records` records when the task gives them
(a backlog; `run_s` still bounds it), at `rate` records/s (0: unthrottled), then flushes.
With `records_per_transaction` (a transactional run) it begins a transaction, sends that
many records, commits, and so on, the last transaction with what is left; each commit's
time (from the call to its return, as the client sees it) is a sample of its own, written to
`samples_path` + COMMITS_SUFFIX, and the result counts them ("commits").
Every record's value starts with its send time (ns since the epoch, 8 bytes, big-endian):
consumers measure end-to-end latency from it. A failure to build the client is a message on
stderr and exit 1; failed sends are counted in the result, not raised.
"""

from __future__ import annotations

import json
import random
import resource
import struct
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO, cast

from replog.cli.bench.drivers import (
    BenchAdmin,
    BenchConsumer,
    BenchProducer,
    Driver,
    TransactionalProducer,
)
from replog.cli.bench.stats import COMMITS_SUFFIX, Samples, write_samples

FLUSH_S = 60.0
POLL_S = 0.1
PROGRESS_S = 0.2
KEY_SET = 10_000  # KEY_ROUND_ROBIN cycles through this many keys (as the OMB does)
SEND_TIME = struct.Struct(">q")


def payload(size: int, seed: int = 0) -> bytes:
    """`size` random bytes (the first 8 are overwritten by each send's time)."""
    return random.Random(seed).randbytes(size)


def key_source(distributor: str, producer_index: int) -> Callable[[int], bytes | None]:
    """The key of the n-th record a producer sends."""
    if distributor == "KEY_ROUND_ROBIN":
        keys = [f"key-{producer_index}-{i}".encode() for i in range(KEY_SET)]
        return lambda n: keys[n % KEY_SET]
    if distributor == "RANDOM_NANO":
        return lambda n: str(time.perf_counter_ns()).encode()
    return lambda n: None


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class _Output:
    """stdout, one whole line at a time (the progress thread and the main thread share it)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def say(self, line: str) -> None:
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()


def produce(
    task: dict[str, Any], producer: BenchProducer, start_ns: int
) -> tuple[Samples, dict[str, Any]]:
    """Send as the task says; the acknowledged records' samples and the result's fields."""
    produced = Samples()
    per_txn = int(task.get("records_per_transaction") or 0)
    # A transactional task's producer is built by `Driver.transactional_producer` (`main`).
    txn = cast(TransactionalProducer, producer)
    commits = Samples()
    body = bytearray(payload(task["message_size"], seed=task["index"]))
    keys = key_source(task["key_distributor"], task["index"])
    rate = float(task["rate"])
    limit = int(task.get("records") or 0)
    topic = task["topic"]
    perf = time.perf_counter
    start = time.monotonic() - (time.time_ns() - start_ns) / 1e9
    end = start + float(task["run_s"])
    sent = 0
    try:
        while (not limit or sent < limit) and time.monotonic() < end:
            if per_txn and sent % per_txn == 0:
                txn.begin_transaction()
            if rate:
                due = start + sent / rate
                now = time.monotonic()
                if due > now + 0.001:
                    time.sleep(due - now)
            SEND_TIME.pack_into(body, 0, time.time_ns())
            sent_at = perf()
            sent_s = time.monotonic() - start

            def done(error: str | None, sent_at: float = sent_at, sent_s: float = sent_s) -> None:
                if error is None:
                    produced.add(sent_s, (perf() - sent_at) * 1000)
                else:
                    produced.error(error)

            producer.send(topic, keys(sent), bytes(body), done)
            producer.service()
            sent += 1
            if per_txn and sent % per_txn == 0:
                commit(txn, commits, start)
        if per_txn and sent % per_txn:
            commit(txn, commits, start)
        producer.flush(FLUSH_S)
    except Exception as exc:
        produced.error(f"{type(exc).__name__}: {exc}")
    requests = producer.requests()
    producer.close()
    fields: dict[str, Any] = {"requests": requests, "last_receive_ns": 0}
    if per_txn:
        write_samples(task["samples_path"] + COMMITS_SUFFIX, commits)
        fields["commits"] = len(commits.sent_s)
    return produced, fields


def commit(producer: TransactionalProducer, commits: Samples, start: float) -> None:
    """Commit the open transaction; its sample: when the call began (s since `start`, the
    monotonic run start) and how long it took (ms). A failed commit is raised."""
    began_s = time.monotonic() - start
    began = time.perf_counter()
    producer.commit_transaction(FLUSH_S)
    commits.add(began_s, (time.perf_counter() - began) * 1000)


def create_topics(
    task: dict[str, Any], admin: BenchAdmin, start_ns: int
) -> tuple[Samples, dict[str, Any]]:
    """Send CreateTopics requests one after another for `run_s` seconds, each creating
    `topics_per_request` topics `<prefix>-<n>`; a sample per request answered."""
    answered = Samples()
    per_request = int(task["topics_per_request"])
    partitions = int(task["partitions"])
    prefix = task["prefix"]
    start = time.monotonic() - (time.time_ns() - start_ns) / 1e9
    end = start + float(task["run_s"])
    sent = 0
    while time.monotonic() < end:
        names = [f"{prefix}-{sent * per_request + k}" for k in range(per_request)]
        sent_at = time.monotonic()
        try:
            admin.create_topics(names, partitions)
        except Exception as exc:
            answered.error(f"{type(exc).__name__}: {exc}")
        else:
            answered.add(sent_at - start, (time.monotonic() - sent_at) * 1000)
        sent += 1
    admin.close()
    return answered, {"requests": sent, "last_receive_ns": 0}


def consume(
    consumer: BenchConsumer, start_ns: int, stop: threading.Event, out: _Output
) -> tuple[Samples, dict[str, Any]]:
    """Read until `stop`, printing the count received every PROGRESS_S."""
    consumed = Samples()
    unpack = SEND_TIME.unpack_from
    last_ns = 0
    next_progress = time.monotonic()
    try:
        while not stop.is_set():
            values = consumer.poll(POLL_S)
            now_ns = time.time_ns()
            for value in values:
                (sent_ns,) = unpack(value)
                consumed.add((sent_ns - start_ns) / 1e9, (now_ns - sent_ns) / 1e6)
            if values:
                last_ns = now_ns
            if time.monotonic() >= next_progress:
                out.say(f"n {len(consumed.sent_s)}")
                next_progress = time.monotonic() + PROGRESS_S
    except Exception as exc:
        consumed.error(f"{type(exc).__name__}: {exc}")
    consumer.close()
    return consumed, {"requests": 0, "last_receive_ns": last_ns}


def _wait_for_go(stdin: TextIO) -> int:
    for line in stdin:
        fields = line.split()
        if len(fields) == 2 and fields[0] == "go":
            return int(fields[1])
    raise SystemExit('worker: stdin closed before "go"')


def main(stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout) -> int:
    task = json.loads(stdin.readline())
    out = _Output(stdout)
    driver = Driver(task["driver"], task["servers"])
    try:
        if task["role"] == "produce" and task.get("records_per_transaction"):
            client: Any = driver.transactional_producer(
                task["producer_config"], task["transactional_id"]
            )
        elif task["role"] == "produce":
            client = driver.producer(task["producer_config"])
        elif task["role"] == "admin":
            client = driver.admin()
        else:
            client = driver.consumer(
                [(t, p) for t, p in task["assigned"]],
                read_committed=bool(task.get("read_committed")),
            )
    except Exception as exc:
        print(f"worker: building the {task['role']} client failed: {exc}", file=sys.stderr)
        return 1
    out.say("ready")
    start_ns = _wait_for_go(stdin)
    cpu_at_go = cpu_seconds()  # the client's start-up (imports, connections) is not the run's
    if task["role"] == "produce":
        samples, fields = produce(task, client, start_ns)
    elif task["role"] == "admin":
        samples, fields = create_topics(task, client, start_ns)
    else:
        stop = threading.Event()

        def wait_for_stop() -> None:
            for line in stdin:
                if line.strip() == "stop":
                    break
            stop.set()

        threading.Thread(target=wait_for_stop, name="bench-stop", daemon=True).start()
        samples, fields = consume(client, start_ns, stop, out)
    write_samples(task["samples_path"], samples)
    result = {
        "records": len(samples.sent_s),
        "errors": samples.errors,
        "first_error": samples.first_error,
        "cpu_s": cpu_seconds() - cpu_at_go,
        **fields,
    }
    out.say("result " + json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
