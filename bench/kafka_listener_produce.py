"""Produce through the Kafka listener against produce through gRPC, on one cluster, in one run
(issue #53's benchmark): MB/s and the brokers' CPU per MB of each path.

A local 3-node replog cluster (`replog cluster start`, Kafka listeners beside the gRPC ones);
1 KiB records (1024-byte values, no key) to a fresh topic of `--partitions` partitions (6, RF 3)
per path and run, acks=all, idempotent, from one producer in this process:

- `confluent`: confluent-kafka (librdkafka) through the brokers' Kafka listeners;
- `replog`: replog's own `Producer` through the brokers' gRPC listeners;
- `kafka-python`: kafka-python's `KafkaProducer` through the Kafka listeners.

Each run first measures the idle brokers (`--idle-seconds`), then takes every path once, in an
order that rotates from run to run (drift in the machine's load falls on each path in turn).
A path sends as fast as its client takes records, or at `--rate` MB/s: `--warm-up` seconds
unmeasured, then `--seconds` measured. Over the measured window:

- MB/s: record-value bytes acknowledged (MB = 1024 * 1024 bytes, as Kafka's perf tools count),
  divided by the window's length;
- broker CPU per MB: the three broker processes' user + system CPU seconds over the window
  (/proc/<pid>/stat), divided by the MB acknowledged in it, and the same after taking off the
  idle brokers' share; the client process's CPU and the machine's load average beside it;
- per run, each Kafka path's CPU per MB as a ratio of the same run's gRPC path's (the goal:
  confluent-kafka's within 1.10x).

Acknowledged bytes are counted without a Python call per record where the client allows it:
confluent-kafka reports only failed deliveries (`delivery.report.only.error`) and the count is
what was produced minus what librdkafka still holds (`len(producer)`); replog's and
kafka-python's futures call a counter. Client settings (`client_settings`, printed with the
results) are the best found for this load: large batches (`--batch-kib`, 960) and a linger
that fills them (`--linger-ms`, 50), the same for all three. A broker's cost is mostly per
batch, so clients that write batches of different sizes differ in CPU per MB for that reason
alone: `--batch-kib 256 --linger-ms 1000 --rate 8` makes every client write full batches of one
size, which compares the listener with gRPC and nothing else.

    .venv/bin/python bench/kafka_listener_produce.py [--runs 3] [--seconds 10] [--rate MB/s]
        [--batch-kib 960] [--linger-ms 50] [--paths confluent,replog,kafka-python]
        [--base-port P] [--json FILE]

The machine is shared: absolute MB/s swing with what else runs; CPU per MB moves much less
(it counts the brokers' work, not their share of the cores), which is why the goal is a ratio
of CPU per MB measured in the same run. Prints min / median / max over the runs
(docs/benchmarks.md, "Kafka listener against gRPC, produce").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# bench/ first on sys.path would let bench/timeline.py shadow the package replog imports: the
# checkout goes first, bench/ last (for replog_cli).
_BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _BENCH_DIR]
sys.path.insert(0, os.path.dirname(_BENCH_DIR))
sys.path.append(_BENCH_DIR)

from replog_cli import KAFKA_PORT_OFFSET, create_topic, node_pids, running_cluster  # noqa: E402

from replog.cli.bench import versions  # noqa: E402
from replog.cli.bench.runner import machine  # noqa: E402
from replog.cli.bench.server_cpu import cpu_seconds  # noqa: E402
from replog.cli.bench.stats import MB  # noqa: E402
from replog.cli.bench.worker import payload  # noqa: E402

PATHS = ("confluent", "replog", "kafka-python")
GRPC_PATH = "replog"
RECORD_BYTES = 1024
GOAL_CPU_RATIO = 1.10
GOAL_CONFLUENT_MB_S = 100.0
FLUSH_S = 60.0
CHUNK = 100  # records sent between two looks at the clock (and librdkafka's callbacks)


def client_settings(batch_kib: int, linger_ms: int) -> dict[str, dict[str, Any]]:
    """Each client's producer settings (on top of bootstrap servers): the same batch size and
    linger for all three (module docstring)."""
    batch = batch_kib * 1024
    return {
        "confluent": {
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": linger_ms,
            "batch.size": batch,
            "batch.num.messages": 100_000,
            "queue.buffering.max.kbytes": 256 * 1024,
            "queue.buffering.max.messages": 1_000_000,
            "delivery.report.only.error": True,
        },
        "replog": {
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": linger_ms,
            "batch.size": batch,
            "buffer.memory": 128 * 1024 * 1024,
        },
        "kafka-python": {
            "acks": "all",
            "enable_idempotence": True,
            "linger_ms": linger_ms,
            "batch_size": batch,
        },
    }


# --- measuring --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    at: float
    acked: int  # records acknowledged so far
    brokers_cpu_s: tuple[float, ...]
    client_cpu_s: float


def snapshot(acked: Callable[[], int], broker_pids: Sequence[int]) -> Snapshot:
    at, count = time.monotonic(), acked()
    cpu = cpu_seconds(broker_pids)
    missing = [pid for pid in broker_pids if pid not in cpu]
    if missing:
        raise RuntimeError(f"broker processes {missing} are gone")
    return Snapshot(at, count, tuple(cpu[pid] for pid in broker_pids), time.process_time())


@dataclass(frozen=True)
class Trial:
    path: str
    run: int
    seconds: float
    records: int
    mb_s: float
    brokers_cpu_s: float
    brokers_cpu_s_per_mb: float
    brokers_cpu_s_per_mb_above_idle: float
    per_broker_cores: tuple[float, ...]
    idle_cores: float  # the three brokers' cores with nothing produced, measured in this run
    client_cores: float
    load_average: float
    failed: int

    @classmethod
    def between(
        cls, path: str, run: int, start: Snapshot, end: Snapshot, idle_cores: float, failed: int
    ) -> Trial:
        seconds = end.at - start.at
        records = end.acked - start.acked
        mb = records * RECORD_BYTES / MB
        per_broker = [b - a for a, b in zip(start.brokers_cpu_s, end.brokers_cpu_s, strict=True)]
        brokers = sum(per_broker)
        return cls(
            path=path,
            run=run,
            seconds=round(seconds, 3),
            records=records,
            mb_s=round(mb / seconds, 2),
            brokers_cpu_s=round(brokers, 2),
            brokers_cpu_s_per_mb=round(brokers / mb, 5) if mb else float("inf"),
            brokers_cpu_s_per_mb_above_idle=(
                round((brokers - idle_cores * seconds) / mb, 5) if mb else float("inf")
            ),
            per_broker_cores=tuple(round(c / seconds, 2) for c in per_broker),
            idle_cores=round(idle_cores, 3),
            client_cores=round((end.client_cpu_s - start.client_cpu_s) / seconds, 2),
            load_average=round(os.getloadavg()[0], 1),
            failed=failed,
        )


# --- the three producers ------------------------------------------------------------------------


class Counter:
    """Acknowledged and failed records, counted by callbacks (one thread calls them)."""

    def __init__(self) -> None:
        self.acked = 0
        self.failed = 0

    def ack(self, *_: object) -> None:
        self.acked += 1

    def fail(self, *_: object) -> None:
        self.failed += 1


class Sender:
    """One path's producer, sending from its own thread until stopped, then flushing."""

    def __init__(
        self,
        path: str,
        topic: str,
        bootstrap: dict[str, str],
        settings: dict[str, Any],
        rate_mb_s: float,
    ) -> None:
        self.path = path
        self.rate_mb_s = rate_mb_s
        self.topic = topic
        self.bootstrap = bootstrap
        self.settings = settings
        self.counter = Counter()
        self.produced = 0
        self.error: str | None = None
        self._stop = threading.Event()
        self._producer: Any = None
        self._open()
        self._thread = threading.Thread(target=self._send, name=f"send-{path}", daemon=True)

    def _open(self) -> None:
        if self.path == "confluent":
            import confluent_kafka

            self._producer = confluent_kafka.Producer(
                {"bootstrap.servers": self.bootstrap["kafka"], **self.settings}
            )
        elif self.path == "replog":
            from replog import Producer

            self._producer = Producer(
                {"bootstrap.servers": self.bootstrap["grpc"], **self.settings}
            )
        else:
            import kafka

            self._producer = kafka.KafkaProducer(
                bootstrap_servers=self.bootstrap["kafka"], **self.settings
            )

    def acked(self) -> int:
        if self.path == "confluent":
            # What librdkafka holds (queued, in flight, failed reports not served) is not acked.
            return self.produced - len(self._producer) - self.counter.failed
        return self.counter.acked

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(FLUSH_S + 30)

    def _send(self) -> None:
        send_chunk = self._confluent_chunk if self.path == "confluent" else self._futures_chunk
        value = payload(RECORD_BYTES)
        per_record_s = RECORD_BYTES / (self.rate_mb_s * MB) if self.rate_mb_s else 0.0
        started = time.monotonic()
        try:
            while not self._stop.is_set():
                if per_record_s:
                    early = started + self.produced * per_record_s - time.monotonic()
                    if early > 0:
                        time.sleep(early)
                send_chunk(value)
            self._producer.flush(FLUSH_S)
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self._close()

    def _confluent_chunk(self, value: bytes) -> None:
        produce, poll, failed = self._producer.produce, self._producer.poll, self._failed
        for _ in range(CHUNK):
            while True:
                try:
                    produce(self.topic, value, on_delivery=failed)
                    break
                except BufferError:  # librdkafka's queue is full
                    poll(0.005)
        self.produced += CHUNK
        poll(0)

    def _failed(self, error: Any, _message: Any) -> None:
        if error is not None:
            self.counter.fail()

    def _futures_chunk(self, value: bytes) -> None:
        """replog's and kafka-python's futures take the same calls."""
        send, topic, counter = self._producer.send, self.topic, self.counter
        for _ in range(CHUNK):
            send(topic, value).add_callback(counter.ack).add_errback(counter.fail)
        self.produced += CHUNK

    def _close(self) -> None:
        if self.path == "confluent":
            self._producer.flush(5)
        else:
            self._producer.close(5)


@dataclass(frozen=True)
class Setup:
    bootstrap: dict[str, str]  # "grpc" and "kafka" bootstrap servers
    broker_pids: tuple[int, ...]
    partitions: int
    warm_up_s: float
    seconds: float
    rate_mb_s: float  # 0: as fast as each client goes


def idle_cores(setup: Setup, seconds: float) -> float:
    """The brokers' cores over `seconds` with nothing produced (heartbeats, fetch long polls,
    timers): the part of a trial's CPU that is not the trial's."""
    start = snapshot(lambda: 0, setup.broker_pids)
    time.sleep(seconds)
    end = snapshot(lambda: 0, setup.broker_pids)
    return (sum(end.brokers_cpu_s) - sum(start.brokers_cpu_s)) / (end.at - start.at)


def one_trial(path: str, run: int, settings: dict[str, Any], setup: Setup, idle: float) -> Trial:
    topic = f"kl-{run}-{path}"
    create_topic(setup.bootstrap["grpc"], topic, setup.partitions)
    sender = Sender(path, topic, setup.bootstrap, settings, setup.rate_mb_s)
    sender.start()
    try:
        time.sleep(setup.warm_up_s)
        start = snapshot(sender.acked, setup.broker_pids)
        time.sleep(setup.seconds)
        end = snapshot(sender.acked, setup.broker_pids)
    finally:
        sender.stop()
    if sender.error is not None:
        raise RuntimeError(f"{path}: {sender.error}")
    return Trial.between(path, run, start, end, idle, sender.counter.failed)


# --- the report ---------------------------------------------------------------------------------


def spread(values: Sequence[float]) -> str:
    return f"{min(values):.3g} / {statistics.median(values):.3g} / {max(values):.3g}"


def ratios(trials: Sequence[Trial], path: str, figure: Callable[[Trial], float]) -> list[float]:
    """`path`'s figure over the gRPC path's, run by run."""
    grpc = {t.run: figure(t) for t in trials if t.path == GRPC_PATH}
    return [figure(t) / grpc[t.run] for t in trials if t.path == path and t.run in grpc]


def report(trials: Sequence[Trial], paths: Sequence[str]) -> list[str]:
    """The table: min / median / max over the runs, and the ratios against gRPC."""
    columns = (
        ("MB/s", lambda t: t.mb_s),
        ("broker CPU s/MB", lambda t: t.brokers_cpu_s_per_mb),
        ("above idle", lambda t: t.brokers_cpu_s_per_mb_above_idle),
        ("client cores", lambda t: t.client_cores),
        ("load avg", lambda t: t.load_average),
    )
    lines = [f"{'path':13s}" + "".join(f"{name:>26s}" for name, _ in columns)]
    for path in paths:
        mine = [t for t in trials if t.path == path]
        lines.append(
            f"{path:13s}" + "".join(f"  {spread([f(t) for t in mine]):>24s}" for _, f in columns)
        )
    idle = [t.idle_cores for t in trials if t.path == paths[0]]
    lines.append(f"brokers' cores when idle, per run: {spread(idle)}")
    if GRPC_PATH in paths:
        for path in (p for p in paths if p != GRPC_PATH):
            raw = ratios(trials, path, lambda t: t.brokers_cpu_s_per_mb)
            above = ratios(trials, path, lambda t: t.brokers_cpu_s_per_mb_above_idle)
            verdict = ""
            if path == "confluent":
                met = statistics.median(raw) <= GOAL_CPU_RATIO
                verdict = f"  (goal <= {GOAL_CPU_RATIO:.2f}x: {'met' if met else 'missed'})"
            lines.append(
                f"broker CPU per MB, {path} / gRPC, per run: {spread(raw)}; "
                f"above idle {spread(above)}{verdict}"
            )
    if "confluent" in paths:
        best = statistics.median(t.mb_s for t in trials if t.path == "confluent")
        met = best >= GOAL_CONFLUENT_MB_S
        lines.append(
            f"confluent-kafka median {best:.1f} MB/s "
            f"(goal >= {GOAL_CONFLUENT_MB_S:.0f}: {'met' if met else 'missed'})"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0, help="measured, per path and run")
    parser.add_argument("--warm-up", type=float, default=3.0)
    parser.add_argument("--idle-seconds", type=float, default=5.0, help="idle brokers, per run")
    # Two partitions led by each broker: a Produce request carries one batch per partition and
    # a client keeps at most 5 requests in flight per broker, so with one partition per leader
    # the acknowledgement round trip bounds a path at 5 batches per broker.
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--batch-kib", type=int, default=960)
    parser.add_argument("--linger-ms", type=int, default=50)
    parser.add_argument(
        "--rate", type=float, default=0.0, help="MB/s every path is paced at (0: unpaced)"
    )
    parser.add_argument("--paths", default=",".join(PATHS))
    parser.add_argument("--base-port", type=int, default=23700)
    parser.add_argument("--data-dir", help="the cluster's directory (default: a temporary one)")
    parser.add_argument("--json", help="write every trial and the set-up here")
    args = parser.parse_args(argv)
    paths = [p for p in args.paths.split(",") if p]
    unknown = set(paths) - set(PATHS)
    if unknown or not paths:
        parser.error(f"--paths: unknown {sorted(unknown)} (known: {', '.join(PATHS)})")
    settings = client_settings(args.batch_kib, args.linger_ms)
    kafka_bootstrap = ",".join(
        f"127.0.0.1:{args.base_port + KAFKA_PORT_OFFSET + i}" for i in range(3)
    )
    trials: list[Trial] = []
    with tempfile.TemporaryDirectory(prefix="replog-bench-kafka-listener-") as work:
        data_dir = args.data_dir or str(Path(work) / "cluster")
        with running_cluster(data_dir, args.base_port, "--fresh") as grpc_bootstrap:
            setup = Setup(
                bootstrap={"grpc": grpc_bootstrap, "kafka": kafka_bootstrap},
                broker_pids=tuple(node_pids(data_dir)),
                partitions=args.partitions,
                warm_up_s=args.warm_up,
                seconds=args.seconds,
                rate_mb_s=args.rate,
            )
            for run in range(args.runs):
                idle = idle_cores(setup, args.idle_seconds)
                order = paths[run % len(paths) :] + paths[: run % len(paths)]
                for path in order:
                    trial = one_trial(path, run, settings[path], setup, idle)
                    trials.append(trial)
                    print(
                        f"run {run + 1} {path:13s} {trial.mb_s:7.1f} MB/s  "
                        f"{trial.brokers_cpu_s_per_mb:.4f} broker CPU s/MB "
                        f"({trial.brokers_cpu_s_per_mb_above_idle:.4f} above idle {idle:.2f} "
                        f"cores)  brokers {trial.per_broker_cores} cores  client "
                        f"{trial.client_cores} cores  load {trial.load_average}"
                        + (f"  FAILED {trial.failed}" if trial.failed else ""),
                        flush=True,
                    )
    print()
    paced = f"paced at {args.rate:g} MB/s" if args.rate else "unpaced"
    print(
        f"{args.runs} runs, {args.partitions} partitions RF 3, acks=all, 1 KiB records, {paced}, "
        f"{args.warm_up:g} s warm-up + {args.seconds:g} s measured per path"
    )
    for path in paths:
        print(f"  {path} settings: {settings[path]}")
    for line in report(trials, paths):
        print(line)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(
                {
                    "trials": [asdict(t) for t in trials],
                    "settings": {p: settings[p] for p in paths},
                    "machine": machine(),
                    "versions": versions(),
                    "args": vars(args),
                },
                f,
                indent=2,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
