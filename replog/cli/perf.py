"""`replog perf produce|consume`: client throughput and latency, like Kafka's perf-test tools.

- `produce --topic T --num-records N (--record-size B | --payload-file F) [--throughput R]
  [--producer-props KEY=VALUE ...] [--producer.config FILE]` sends N records through the
  blocking `replog.Producer` as fast as it takes them (or at R records/s; -1, the default, is
  unthrottled) and prints kafka-producer-perf-test.sh's lines: every `--reporting-interval`
  (5000 ms) a window line

      N records sent, X records/sec (Y MB/sec), A ms avg latency, M ms max latency.

  and at the end the total line, which adds the 50th, 95th, 99th and 99.9th percentiles:

      N records sent, X records/sec (Y MB/sec), A ms avg latency, M ms max latency,
      P ms 50th, P ms 95th, P ms 99th, P ms 99.9th.

- `consume --topic T --messages N [--group G] [--timeout MS] [--from-latest]
  [--consumer-props KEY=VALUE ...] [--consumer.config FILE] [--hide-header]` reads N records
  through the blocking `replog.Consumer` (subscribed to T, group G or a fresh
  `perf-consumer-NNNNN`, from the earliest offset unless `--from-latest`) and prints
  kafka-consumer-perf-test.sh's CSV header and row:

      start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
      rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec

  It stops early when no record arrived for `--timeout` ms (10000), with a warning on stderr.
  A topic the cluster does not have is a one-line error at the start (exit 1), as with
  `replog consume`; `--timeout` bounds that check's wait for the cluster too.

Rules (as Kafka's tools measure, unless said otherwise):
- A record's latency runs from just before `send` to its delivery callback (so time blocked in
  `send` on a full buffer counts). MB is 1024 * 1024 bytes of record payload (produce: value
  bytes; consume: key plus value bytes). Rates divide by the time since the first send (the
  consumer: since it started, before `subscribe`).
- "records sent" counts delivered records; records whose delivery failed are counted apart, the
  first error is printed on stderr and the exit code is 1 (Kafka counts them as sent and prints
  each stack trace).
- Percentiles are over at most 500000 latency samples (every k-th record on longer runs) and
  printed in whole milliseconds, truncated, as Kafka prints them; `--output json` prints one
  JSON document at the end instead of the lines, with fractional milliseconds, and every
  window.
- The unthrottled payload is the same random `A`-`Z` bytes for every record; a payload file is
  split at `--payload-delimiter` (default newline) and each record takes one entry at random.
- A progress bar goes to stderr when stderr is a terminal and the run has lasted 2 s
  (`--progress` forces it on, also when stderr is not a terminal; `--no-progress` off).
- Where the clients connect: Kafka listeners, `--bootstrap-server host:port,...`, else
  `bootstrap.servers` from the props or config file, else the Kafka listeners of the local
  cluster in `--data-dir` (default `./.replog/cluster`, from its `cluster.json`), else
  `127.0.0.1:9092`. `--bootstrap-server` wins over the props.
- Ctrl-C stops the run: the producer is closed at once, the totals of what was acknowledged
  are printed, then one stderr line accounts for every record of `--num-records`: acknowledged,
  failed (if any), not acknowledged (sent, its answer not come: it may have been written),
  never sent (keys "not_acknowledged" and "never_sent" in `--output json`); exit code 130. A bad
  config is one line naming the key (`ConfigError`).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import sys
import threading
import time
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, Protocol, TextIO

from replog.cli.arguments import add_command, at_least
from replog.cli.client_connection import add_client_connection_arguments, client_config
from replog.cli.console_consumer import cluster_topics, existing_topic
from replog.errors import ClientClosedError, ReplogError
from replog.record.varint import INT64_MAX

MB = 1024 * 1024
REPORTING_INTERVAL_MS = 5000
CONSUMER_TIMEOUT_MS = 10_000
MAX_LATENCY_SAMPLES = 500_000
PROGRESS_AFTER_S = 2.0  # shorter runs get no bar: it would only flicker
TICK_S = 0.2  # how often the reporter redraws the bar and closes a due window
POLL_MS = 100  # one consumer poll (Kafka's perf consumer polls in 100 ms steps too)
MIN_SLEEP_S = 0.002  # the throttle sleeps once it is this far ahead (Kafka: 2 ms)
PERCENTILES = (0.5, 0.95, 0.99, 0.999)


# --- the client interfaces the commands use (replog.Producer / replog.Consumer) -----------------


class DeliveryFuture(Protocol):
    def add_callback(self, fn: Callable[[Any], object]) -> object: ...
    def add_errback(self, fn: Callable[[BaseException], object]) -> object: ...


class PerfProducer(Protocol):
    def send(self, topic: str, value: bytes | None = None) -> DeliveryFuture: ...
    def flush(self, timeout: float | None = None) -> None: ...
    def close(self, timeout: float | None = None) -> None: ...


class PerfRecord(Protocol):
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...


class PerfConsumer(Protocol):
    def subscribe(self, topics: Sequence[str], listener: object | None = None) -> None: ...
    def poll(
        self, timeout_ms: int = 0, max_records: int | None = None
    ) -> Mapping[Any, Sequence[PerfRecord]]: ...
    def close(self) -> None: ...


def new_producer(config: dict[str, object]) -> PerfProducer:
    from replog.client.sync_producer import Producer

    producer: PerfProducer = Producer(config)
    return producer


def new_consumer(config: dict[str, object]) -> PerfConsumer:
    from replog.client.sync_consumer import Consumer

    consumer: PerfConsumer = Consumer(config=config)
    return consumer


# --- produce statistics (thread-safe: delivery callbacks run on the client's loop thread) ------


class _Rates:
    """Records/s and MB/s of `count` records of `bytes` bytes in `elapsed_s`."""

    count: int
    bytes: int
    elapsed_s: float

    @property
    def records_per_sec(self) -> float:
        return _rate(self.count, self.elapsed_s)

    @property
    def mb_per_sec(self) -> float:
        return _rate(self.bytes, self.elapsed_s) / MB


@dataclass(frozen=True)
class Window(_Rates):
    """The records completed in one reporting interval."""

    count: int
    bytes: int
    elapsed_s: float
    avg_ms: float
    max_ms: float


@dataclass(frozen=True)
class ProduceSummary(_Rates):
    count: int  # delivered
    failed: int
    bytes: int
    elapsed_s: float
    avg_ms: float
    max_ms: float
    percentiles_ms: tuple[float, ...]  # of PERCENTILES
    first_error: str | None = None
    # Records the producer gave up on when it was closed early (Ctrl-C): sent, so they may
    # have been written; and never sent (not handed to the producer, or never left it).
    not_acknowledged: int = 0
    never_sent: int = 0


class ProduceStats:
    """Latencies and counts of delivered records: totals, samples and the current window."""

    def __init__(
        self,
        num_records: int,
        reporting_interval_s: float,
        now: float,
        max_samples: int = MAX_LATENCY_SAMPLES,
    ) -> None:
        self._lock = threading.Lock()
        self._interval_s = reporting_interval_s
        self._sampling = max(1, math.ceil(num_records / max_samples))
        self._samples = array("d")
        self.start = now
        self.num_records = num_records
        self.handed = 0  # records handed to the producer's send
        self.count = 0
        self.failed = 0
        self.first_error: str | None = None
        self.closed_sent = 0  # given up on by the closing producer after it sent them
        self.closed_unsent = 0  # given up on by the closing producer before it sent them
        self._bytes = 0
        self._total_ms = 0.0
        self._max_ms = 0.0
        self._completions = 0  # delivered or failed: which samples to keep
        self._window_start = now
        self._window = [0, 0, 0.0, 0.0]  # count, bytes, total ms, max ms

    @property
    def completed(self) -> int:
        with self._lock:
            return self.count + self.failed + self.closed_sent + self.closed_unsent

    def delivered(self, sent_at: float, size: int, now: float) -> None:
        latency_ms = (now - sent_at) * 1000.0
        with self._lock:
            self.count += 1
            self._bytes += size
            self._total_ms += latency_ms
            self._max_ms = max(self._max_ms, latency_ms)
            window = self._window
            window[0] += 1
            window[1] += size
            window[2] += latency_ms
            window[3] = max(window[3], latency_ms)
            if self._completions % self._sampling == 0:
                self._samples.append(latency_ms)
            self._completions += 1

    def error(self, exc: BaseException) -> None:
        with self._lock:
            self._completions += 1
            if isinstance(exc, ClientClosedError):  # the run was stopped: no failure
                if exc.maybe_written:
                    self.closed_sent += 1
                else:
                    self.closed_unsent += 1
                return
            self.failed += 1
            if self.first_error is None:
                self.first_error = f"{type(exc).__name__}: {exc}"

    def take_window(self, now: float) -> Window | None:
        """The window, once it has lasted the reporting interval and holds a record (a window
        without records goes on: Kafka closes windows on completions only)."""
        with self._lock:
            elapsed = now - self._window_start
            count, size, total_ms, max_ms = self._window
            if elapsed < self._interval_s or count == 0:
                return None
            self._window_start = now
            self._window = [0, 0, 0.0, 0.0]
        return Window(int(count), int(size), elapsed, total_ms / count, max_ms)

    def summary(self, now: float) -> ProduceSummary:
        """The totals; every record handed to the producer without an outcome yet counts as
        not acknowledged (it may have been written), every one not handed as never sent."""
        with self._lock:
            samples = sorted(self._samples)
            settled = self.count + self.failed + self.closed_sent + self.closed_unsent
            unsettled = max(self.handed - settled, 0)
            return ProduceSummary(
                not_acknowledged=self.closed_sent + unsettled,
                never_sent=self.closed_unsent + max(self.num_records - self.handed, 0),
                count=self.count,
                failed=self.failed,
                bytes=self._bytes,
                elapsed_s=now - self.start,
                avg_ms=self._total_ms / self.count if self.count else 0.0,
                max_ms=self._max_ms,
                percentiles_ms=tuple(percentile(samples, p) for p in PERCENTILES),
                first_error=self.first_error,
            )


def percentile(ordered: Sequence[float], p: float) -> float:
    """Kafka's percentile of sorted samples: the sample at index floor(p * n); 0 for none."""
    if not ordered:
        return 0.0
    return ordered[min(int(p * len(ordered)), len(ordered) - 1)]


def _rate(amount: float, elapsed_s: float) -> float:
    return amount / elapsed_s if elapsed_s > 0 else 0.0


# --- produce output ----------------------------------------------------------------------------


def window_line(window: Window) -> str:
    return (
        f"{window.count} records sent, {window.records_per_sec:.1f} records/sec "
        f"({window.mb_per_sec:.2f} MB/sec), {window.avg_ms:.1f} ms avg latency, "
        f"{window.max_ms:.1f} ms max latency."
    )


def total_line(summary: ProduceSummary) -> str:
    p50, p95, p99, p999 = (int(p) for p in summary.percentiles_ms)
    return (
        f"{summary.count} records sent, {summary.records_per_sec:f} records/sec "
        f"({summary.mb_per_sec:.2f} MB/sec), {summary.avg_ms:.2f} ms avg latency, "
        f"{summary.max_ms:.2f} ms max latency, {p50} ms 50th, {p95} ms 95th, {p99} ms 99th, "
        f"{p999} ms 99.9th."
    )


def interrupted_line(summary: ProduceSummary) -> str:
    """What became of every record of a run stopped early (module docstring)."""
    failed = f", {summary.failed} failed" if summary.failed else ""
    return (
        f"replog perf produce: stopped early: {summary.count} records acknowledged{failed}, "
        f"{summary.not_acknowledged} not acknowledged (may have been written), "
        f"{summary.never_sent} never sent"
    )


def produce_json(summary: ProduceSummary, windows: Sequence[Window]) -> dict[str, Any]:
    p50, p95, p99, p999 = summary.percentiles_ms
    return {
        "records": summary.count,
        "failed": summary.failed,
        "not_acknowledged": summary.not_acknowledged,
        "never_sent": summary.never_sent,
        "first_error": summary.first_error,
        "bytes": summary.bytes,
        "elapsed_ms": round(summary.elapsed_s * 1000, 3),
        "records_per_sec": summary.records_per_sec,
        "mb_per_sec": summary.mb_per_sec,
        "latency_ms": {
            "avg": summary.avg_ms,
            "p50": p50,
            "p95": p95,
            "p99": p99,
            "p999": p999,
            "max": summary.max_ms,
        },
        "windows": [
            {
                "records": w.count,
                "bytes": w.bytes,
                "elapsed_ms": round(w.elapsed_s * 1000, 3),
                "records_per_sec": w.records_per_sec,
                "mb_per_sec": w.mb_per_sec,
                "avg_latency_ms": w.avg_ms,
                "max_latency_ms": w.max_ms,
            }
            for w in windows
        ],
    }


# --- throttling --------------------------------------------------------------------------------


def throttle_delay(sent: int, elapsed_s: float, throughput: float) -> float:
    """How long to sleep before the next send so that `sent` records over `elapsed_s` do not
    exceed `throughput` records/s (negative: unthrottled); 0 while less than MIN_SLEEP_S ahead
    (Kafka's throttler also lets small deficits add up before sleeping)."""
    if throughput < 0:
        return 0.0
    ahead = sent / throughput - elapsed_s
    return ahead if ahead >= MIN_SLEEP_S else 0.0


# --- consume statistics and output -------------------------------------------------------------


CONSUME_HEADER = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)


@dataclass(frozen=True)
class ConsumeSummary:
    start_ms: int  # wall clock, epoch ms
    end_ms: int
    messages: int
    bytes: int
    rebalance_ms: int = 0  # from the subscription to the group's first assignment
    timed_out: bool = False

    @property
    def elapsed_s(self) -> float:
        return (self.end_ms - self.start_ms) / 1000.0

    @property
    def fetch_ms(self) -> int:
        return self.end_ms - self.start_ms - self.rebalance_ms

    @property
    def mb(self) -> float:
        return self.bytes / MB


def kafka_time(epoch_ms: int) -> str:
    """Kafka's perf-test date format, yyyy-MM-dd HH:mm:ss:SSS in local time."""
    seconds, millis = divmod(epoch_ms, 1000)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds)) + f":{millis:03d}"


def consume_row(summary: ConsumeSummary) -> str:
    elapsed, fetch_s = summary.elapsed_s, summary.fetch_ms / 1000.0
    return (
        f"{kafka_time(summary.start_ms)}, {kafka_time(summary.end_ms)}, {summary.mb:.4f}, "
        f"{_rate(summary.mb, elapsed):.4f}, {summary.messages}, "
        f"{_rate(summary.messages, elapsed):.4f}, {summary.rebalance_ms}, {summary.fetch_ms}, "
        f"{_rate(summary.mb, fetch_s):.4f}, {_rate(summary.messages, fetch_s):.4f}"
    )


def consume_json(summary: ConsumeSummary) -> dict[str, Any]:
    elapsed, fetch_s = summary.elapsed_s, summary.fetch_ms / 1000.0
    return {
        "start_time_ms": summary.start_ms,
        "end_time_ms": summary.end_ms,
        "messages": summary.messages,
        "bytes": summary.bytes,
        "mb": summary.mb,
        "mb_per_sec": _rate(summary.mb, elapsed),
        "messages_per_sec": _rate(summary.messages, elapsed),
        "rebalance_time_ms": summary.rebalance_ms,
        "fetch_time_ms": summary.fetch_ms,
        "fetch_mb_per_sec": _rate(summary.mb, fetch_s),
        "fetch_messages_per_sec": _rate(summary.messages, fetch_s),
        "timed_out": summary.timed_out,
    }


def timeout_warning(timeout_ms: int) -> str:
    return (
        "WARNING: Exiting before consuming the expected number of messages: timeout "
        f"({timeout_ms} ms) exceeded. You can use the --timeout option to increase the timeout."
    )


# --- the progress bar and the shared terminal ---------------------------------------------------


def progress_text(done: int, total: int, elapsed_s: float, unit: str, width: int) -> str:
    """One line: a bar, percent, counts, rate and the time left, fitted into `width` columns."""
    fraction = min(done / total, 1.0) if total > 0 else 1.0
    rate = _rate(done, elapsed_s)
    if done >= total:
        eta = "done"
    elif rate > 0:
        eta = f"ETA {_duration((total - done) / rate)}"
    else:
        eta = "ETA ?"
    tail = f" {fraction * 100:5.1f}% {done}/{total} {unit} {rate:,.0f}/s {eta}"
    bar_width = max(0, min(40, width - len(tail) - 3))
    filled = int(fraction * bar_width)
    text = f"[{'#' * filled}{'-' * (bar_width - filled)}]{tail}" if bar_width >= 5 else tail[1:]
    return text[: max(0, width - 1)]


def _duration(seconds: float) -> str:
    seconds = int(seconds + 0.5)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class Console:
    """stdout lines and a stderr progress bar that do not garble each other on one terminal:
    the bar is erased before a line is printed and drawn again after it."""

    def __init__(
        self,
        *,
        total: int,
        unit: str,
        progress: bool | None,
        now: float,
        out: TextIO | None = None,
        err: TextIO | None = None,
    ) -> None:
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else sys.stderr
        self._lock = threading.Lock()
        self._total = total
        self._unit = unit
        self._start = now
        self._forced = progress is True
        self._enabled = progress is True or (progress is None and _is_terminal(self.err))
        self._shown = ""  # the bar as last drawn; "" when none is on screen

    def line(self, text: str) -> None:
        with self._lock:
            shown = self._shown
            self._erase()
            print(text, file=self.out, flush=True)
            if shown:
                self._draw(shown)

    def warn(self, text: str) -> None:
        with self._lock:
            self._erase()
            print(text, file=self.err, flush=True)

    def progress(self, done: int, now: float) -> None:
        elapsed = now - self._start
        if not self._enabled or (not self._forced and elapsed < PROGRESS_AFTER_S):
            return
        width = shutil.get_terminal_size((80, 24)).columns
        text = progress_text(done, self._total, elapsed, self._unit, width)
        with self._lock:
            self._draw(text)

    def finish(self) -> None:
        with self._lock:
            self._erase()

    def _draw(self, text: str) -> None:
        self.err.write(f"\r{text}\x1b[K")
        self.err.flush()
        self._shown = text

    def _erase(self) -> None:
        if self._shown:
            self.err.write("\r\x1b[K")
            self.err.flush()
            self._shown = ""


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


@contextmanager
def ticking(action: Callable[[], None], console: Console) -> Iterator[None]:
    """Call `action` every TICK_S in a daemon thread for the duration of the block; erase the
    progress bar when it ends (also on an error)."""
    stop = threading.Event()
    interval_s = TICK_S

    def loop() -> None:
        while not stop.wait(interval_s):
            action()

    thread = threading.Thread(target=loop, name="replog-perf-reporter", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        console.finish()


# --- configuration -----------------------------------------------------------------------------


# --- produce -----------------------------------------------------------------------------------


def payloads(args: argparse.Namespace) -> list[bytes]:
    """What the records carry (module docstring): one random payload, or the file's entries."""
    if args.payload_file is None:
        letters = random.Random()
        return [bytes(letters.randrange(65, 91) for _ in range(args.record_size))]
    try:
        with open(args.payload_file, "rb") as f:
            text = f.read()
    except OSError as exc:
        raise ReplogError(f"--payload-file {args.payload_file}: {exc.strerror or exc}") from None
    delimiter = args.payload_delimiter.encode().decode("unicode_escape").encode()
    entries = [entry for entry in text.split(delimiter) if entry]
    if not entries:
        raise ReplogError(f"--payload-file {args.payload_file}: holds no payload")
    return entries


def run_produce(args: argparse.Namespace) -> int:
    config = client_config(
        args,
        kind="producer",
        file_option="producer.config",
        props_option="producer_props",
        defaults={"client.id": "replog-perf-producer"},
    )
    values = payloads(args)
    choose = random.Random().choice
    clock = time.perf_counter
    producer = new_producer(config)
    stats = ProduceStats(args.num_records, args.reporting_interval / 1000, clock())
    console = Console(
        total=args.num_records, unit="records", progress=args.progress, now=stats.start
    )
    windows: list[Window] = []
    text = args.output == "text"

    def report() -> None:
        now = clock()
        window = stats.take_window(now)
        if window is not None:
            windows.append(window)
            if text:
                console.line(window_line(window))
        console.progress(stats.completed, now)

    interrupted = False
    with ticking(report, console):
        try:
            for i in range(args.num_records):
                delay = throttle_delay(i, clock() - stats.start, args.throughput)
                if delay:
                    time.sleep(delay)
                value = values[0] if len(values) == 1 else choose(values)
                _send(producer, args.topic, value, stats, clock)
                stats.handed += 1
            producer.flush()
        except KeyboardInterrupt:
            interrupted = True
        finally:
            with suppress(ReplogError):
                producer.close(timeout=0 if interrupted else None)
    summary = stats.summary(clock())
    if text:
        console.line(total_line(summary))
    else:
        console.line(json.dumps(produce_json(summary, windows), indent=2))
    if summary.failed:
        console.warn(
            f"replog perf produce: {summary.failed} of {summary.count + summary.failed} "
            f"records failed; first: {summary.first_error}"
        )
    if interrupted:
        console.warn(interrupted_line(summary))
        raise KeyboardInterrupt
    return 1 if summary.failed else 0


def _send(
    producer: PerfProducer,
    topic: str,
    value: bytes,
    stats: ProduceStats,
    clock: Callable[[], float],
) -> None:
    """One record; its latency ends in the delivery callback."""
    sent_at = clock()
    size = len(value)
    future = producer.send(topic, value=value)
    future.add_callback(lambda _metadata: stats.delivered(sent_at, size, clock()))
    future.add_errback(stats.error)


# --- consume -----------------------------------------------------------------------------------


def run_consume(args: argparse.Namespace) -> int:
    group = args.group or f"perf-consumer-{random.randrange(100_000)}"
    config = client_config(
        args,
        kind="consumer",
        file_option="consumer.config",
        props_option="consumer_props",
        defaults={"client.id": "replog-perf-consumer"},
        forced={
            "group.id": group,
            "auto.offset.reset": "latest" if args.from_latest else "earliest",
        },
    )
    # Before the clock starts, as `replog consume` checks it: a topic the cluster does not have
    # would only wait out --timeout and print a row of zeros.
    existing_topic(
        args.topic, cluster_topics(config, include_internal=True, timeout_ms=args.timeout)
    )
    clock = time.monotonic
    started = clock()
    start_ms = _wall_ms()
    console = Console(total=args.messages, unit="messages", progress=args.progress, now=started)
    consumer = new_consumer(config)
    joined = _JoinTimer(clock)
    count = 0
    size = 0
    interrupted = False
    end_ms = start_ms
    with ticking(lambda: console.progress(count, clock()), console):
        try:
            consumer.subscribe([args.topic], listener=joined)
            last_record = clock()
            while count < args.messages and (clock() - last_record) * 1000 <= args.timeout:
                batch = consumer.poll(
                    timeout_ms=POLL_MS, max_records=min(args.messages - count, 500)
                )
                for records in batch.values():
                    for record in records:
                        count += 1
                        size += len(record.key or b"") + len(record.value or b"")
                    if records:
                        last_record = clock()
        except KeyboardInterrupt:
            interrupted = True
        finally:
            end_ms = _wall_ms()
            with suppress(ReplogError):
                consumer.close()
    summary = ConsumeSummary(
        start_ms,
        end_ms,
        count,
        size,
        rebalance_ms=joined.rebalance_ms,
        timed_out=count < args.messages and not interrupted,
    )
    if summary.timed_out:
        console.warn(timeout_warning(args.timeout))
    if args.output == "json":
        console.line(json.dumps(consume_json(summary), indent=2))
    else:
        if not args.hide_header:
            console.line(CONSUME_HEADER)
        console.line(consume_row(summary))
    if interrupted:
        raise KeyboardInterrupt
    return 0


class _JoinTimer:
    """A rebalance listener timing the join: from the subscription to the first assignment
    (kafka-consumer-perf-test.sh's rebalance.time.ms)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._started = clock()
        self.rebalance_ms = 0

    def on_partitions_assigned(self, partitions: object) -> None:
        if not self.rebalance_ms:
            self.rebalance_ms = max(1, round((self._clock() - self._started) * 1000))

    def on_partitions_revoked(self, partitions: object) -> None:
        pass


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


# --- the command -------------------------------------------------------------------------------


def register(commands: Any) -> None:
    action = add_command(
        commands,
        "perf",
        __doc__,
        headed=False,
    )
    produce = action("produce", "send records and report throughput and latency", run_produce)
    produce.add_argument("--topic", required=True, metavar="TOPIC", help="the topic to send to")
    produce.add_argument(
        "--num-records", required=True, type=_positive_long, metavar="N", help="records to send"
    )
    payload = produce.add_mutually_exclusive_group(required=True)
    payload.add_argument(
        "--record-size", type=_non_negative_int, metavar="BYTES", help="bytes per record value"
    )
    payload.add_argument(
        "--payload-file",
        metavar="FILE",
        help="send payloads read from FILE (split at --payload-delimiter), chosen at random",
    )
    produce.add_argument(
        "--payload-delimiter",
        default="\\n",
        metavar="TEXT",
        help="what separates payloads in --payload-file (default: \\n)",
    )
    produce.add_argument(
        "--throughput",
        type=_throughput,
        default=-1.0,
        metavar="RECORDS_PER_SEC",
        help="at most this many records per second (default: -1, unthrottled)",
    )
    produce.add_argument(
        "--producer-props",
        nargs="+",
        metavar="KEY=VALUE",
        help="producer configs (acks=1 linger.ms=10 ...), over --producer.config",
    )
    produce.add_argument(
        "--producer.config",
        dest="producer.config",
        metavar="FILE",
        help="a properties file of producer configs",
    )
    produce.add_argument(
        "--reporting-interval",
        type=_positive_int,
        default=REPORTING_INTERVAL_MS,
        metavar="MS",
        help=f"a window line every MS (default: {REPORTING_INTERVAL_MS})",
    )
    _add_common(produce)

    consume = action(
        "consume",
        "read records and report throughput (CSV, like kafka-consumer-perf-test.sh)",
        run_consume,
    )
    consume.add_argument("--topic", required=True, metavar="TOPIC", help="the topic to read")
    consume.add_argument(
        "--messages", required=True, type=_positive_long, metavar="N", help="records to read"
    )
    consume.add_argument(
        "--group", metavar="GROUP", help="the consumer group (default: perf-consumer-<random>)"
    )
    consume.add_argument(
        "--timeout",
        type=_positive_int,
        default=CONSUMER_TIMEOUT_MS,
        metavar="MS",
        help=f"stop after this long without a record (default: {CONSUMER_TIMEOUT_MS})",
    )
    consume.add_argument(
        "--from-latest",
        action="store_true",
        help="without a committed offset, start at the end (default: at the beginning)",
    )
    consume.add_argument(
        "--consumer-props",
        nargs="+",
        metavar="KEY=VALUE",
        help="consumer configs (fetch.max.wait.ms=100 ...), over --consumer.config",
    )
    consume.add_argument(
        "--consumer.config",
        dest="consumer.config",
        metavar="FILE",
        help="a properties file of consumer configs",
    )
    consume.add_argument("--hide-header", action="store_true", help="print the row only")
    _add_common(consume)


def _add_common(parser: argparse.ArgumentParser) -> None:
    add_client_connection_arguments(parser)
    parser.add_argument(
        "--output",
        choices=("text", "json"),
        default="text",
        help="text: Kafka's lines (default); json: one JSON document at the end",
    )
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a progress bar on stderr (default: when stderr is a terminal, after 2 s)",
    )


_positive_int = at_least(1)
_positive_long = at_least(1, INT64_MAX)
_non_negative_int = at_least(0)


def _throughput(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value == 0 or math.isnan(value) or math.isinf(value):
        raise argparse.ArgumentTypeError(
            f"{text!r}: records per second above 0, or -1 (or any negative) for unthrottled"
        )
    return value
