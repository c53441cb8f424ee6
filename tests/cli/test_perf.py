"""`replog perf produce|consume` without a cluster: arguments, configs, statistics and output.

The commands run end to end against fake clients (`perf.new_producer` / `perf.new_consumer`
replaced), so what they print is checked line by line; the real-cluster smoke test is
tests/cluster/test_cluster_client_perf.py.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cli_runner import Outcome, replog

from replog.cli import client_connection, perf
from replog.cli import local_cluster as local_cluster_module
from replog.cli.local_cluster import LocalCluster
from replog.cli.main import build_parser
from replog.errors import ClientClosedError, ConfigError, NotEnoughReplicasError, ReplogError

TOTAL_LINE = re.compile(
    r"^(\d+) records sent, (\d+\.\d{6}) records/sec \((\d+\.\d\d) MB/sec\), (\d+\.\d\d) ms avg "
    r"latency, (\d+\.\d\d) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, "
    r"(\d+) ms 99\.9th\.$"
)
WINDOW_LINE = re.compile(
    r"^\d+ records sent, \d+\.\d records/sec \(\d+\.\d\d MB/sec\), \d+\.\d ms avg latency, "
    r"\d+\.\d ms max latency\.$"
)
CSV_ROW = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}, \d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}, "
    r"\d+\.\d{4}, \d+\.\d{4}, \d+, \d+\.\d{4}, \d+, \d+, \d+\.\d{4}, \d+\.\d{4}$"
)


def parse(*argv: str) -> Any:
    return build_parser().parse_args(["perf", *argv])


def run(*argv: str) -> Outcome:
    return replog("perf", *argv)


@pytest.fixture
def local_cluster(tmp_path: Path) -> str:
    """A written (not started) 3-node local cluster, its Kafka listeners at 29292-29294; its
    directory."""
    LocalCluster.plan(str(tmp_path / "cluster"), 3, 29092, kafka_base_port=29292).write()
    return str(tmp_path / "cluster")


@contextlib.contextmanager
def utc() -> Iterator[None]:
    saved = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    try:
        yield
    finally:
        if saved is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = saved
        time.tzset()


# --- arguments -----------------------------------------------------------------------------------


def test_produce_arguments_and_defaults() -> None:
    args = parse("produce", "--topic", "t", "--num-records", "10", "--record-size", "100")
    assert (args.topic, args.num_records, args.record_size) == ("t", 10, 100)
    assert args.throughput == -1
    assert args.reporting_interval == 5000
    assert args.output == "text"
    assert args.progress is None
    assert args.producer_props is None
    assert args.run is perf.run_produce
    args = parse(
        "produce",
        "--topic=t",
        "--num-records=5",
        "--payload-file=p.txt",
        "--throughput=100",
        "--producer-props",
        "acks=1",
        "linger.ms=10",
        "--producer.config=producer.properties",
        "--output=json",
        "--no-progress",
    )
    assert args.payload_file == "p.txt" and args.record_size is None
    assert args.throughput == 100.0
    assert args.producer_props == ["acks=1", "linger.ms=10"]
    assert getattr(args, "producer.config") == "producer.properties"
    assert args.output == "json" and args.progress is False


@pytest.mark.parametrize(
    "argv",
    [
        ["produce", "--topic", "t", "--num-records", "10"],  # neither size nor file
        ["produce", "--topic=t", "--num-records=1", "--record-size=1", "--payload-file=f"],
        ["produce", "--topic", "t", "--num-records", "0", "--record-size", "1"],
        ["produce", "--topic", "t", "--num-records", "10", "--record-size", "-1"],
        ["produce", "--topic=t", "--num-records=1", "--record-size=1", "--throughput=0"],
        ["produce", "--topic", "t", "--num-records", "x", "--record-size", "1"],
        ["produce", "--num-records", "10", "--record-size", "1"],
        ["consume", "--topic", "t"],
        ["consume", "--topic", "t", "--messages", "10", "--timeout", "0"],
        ["consume", "--topic", "t", "--messages", "10", "--output", "csv"],
    ],
)  # fmt: skip
def test_bad_arguments_are_usage_errors(argv: list[str]) -> None:
    outcome = run(*argv)
    assert outcome.returncode == 2
    assert "usage: replog perf" in outcome.stderr


def test_consume_arguments_and_defaults() -> None:
    args = parse("consume", "--topic", "t", "--messages", "1000")
    assert (args.topic, args.messages, args.group) == ("t", 1000, None)
    assert args.timeout == 10_000
    assert not args.from_latest and not args.hide_header
    assert args.run is perf.run_consume
    args = parse(
        "consume", "--topic", "t", "--messages", "1", "--group", "g", "--timeout", "500",
        "--from-latest", "--consumer-props", "fetch.max.wait.ms=10", "--hide-header",
    )  # fmt: skip
    assert (args.group, args.timeout, args.from_latest) == ("g", 500, True)
    assert args.consumer_props == ["fetch.max.wait.ms=10"]


# --- configs -------------------------------------------------------------------------------------


def produce_args(*extra: str) -> Any:
    return parse("produce", "--topic", "t", "--num-records", "1", "--record-size", "1", *extra)


def producer_config(args: Any) -> dict[str, object]:
    return client_connection.client_config(
        args,
        kind="producer",
        file_option="producer.config",
        props_option="producer_props",
        defaults={},
    )


def test_bootstrap_comes_from_the_local_cluster_by_default(
    local_cluster: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    probed: list[str] = []
    monkeypatch.setattr(
        local_cluster_module, "accepts_connections", lambda a: probed.append(a) or a.endswith("3")
    )
    config = producer_config(produce_args("--data-dir", local_cluster))
    # The brokers' Kafka listeners, not their gRPC ones (29092-29094).
    assert config["bootstrap.servers"] == "127.0.0.1:29292,127.0.0.1:29293,127.0.0.1:29294"
    assert probed == ["127.0.0.1:29292", "127.0.0.1:29293"]  # one broker that answers will do


def test_a_local_cluster_whose_brokers_do_not_answer_is_one_clear_error_at_once(
    local_cluster: str,
) -> None:
    """Produce to a stopped local cluster fails fast, not after max.block.ms (60 s)."""
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        assert local_cluster_module.accepts_connections(f"127.0.0.1:{listening.getsockname()[1]}")
    started = time.monotonic()
    with pytest.raises(
        ReplogError, match=r"no Kafka listener of the local cluster in .* answers at "
    ):
        producer_config(produce_args("--data-dir", local_cluster))  # nothing listens on 2929x
    assert time.monotonic() - started < 5


def test_bootstrap_precedence(local_cluster: str, tmp_path: Path) -> None:
    # the props win over the local cluster, in either spelling of the key ...
    for key in ("bootstrap.servers", "bootstrap_servers"):
        config = producer_config(
            produce_args("--data-dir", local_cluster, "--producer-props", f"{key}=h:1")
        )
        assert config == {key: "h:1"}
    # ... a config file too, and --bootstrap-server wins over both
    properties = tmp_path / "p.properties"
    properties.write_text("bootstrap.servers=file:1\nacks=1\n")
    args = produce_args("--producer.config", str(properties), "--bootstrap-server", "flag:1")
    assert producer_config(args) == {"bootstrap.servers": "flag:1", "acks": "1"}


def test_props_override_the_config_file_and_defaults(tmp_path: Path) -> None:
    properties = tmp_path / "p.properties"
    properties.write_text("# a comment\nacks=0\nlinger.ms=50\n")
    args = produce_args(
        "--producer.config", str(properties), "--producer-props", "acks=1", "client.id=me",
        "--bootstrap-server", "h:1",
    )  # fmt: skip
    config = client_connection.client_config(
        args,
        kind="producer",
        file_option="producer.config",
        props_option="producer_props",
        defaults={"client.id": "default", "batch.size": "1"},
    )
    assert config == {
        "client.id": "me",
        "batch.size": "1",
        "acks": "1",
        "linger.ms": "50",
        "bootstrap.servers": "h:1",
    }


def test_no_local_cluster_and_no_bootstrap_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ReplogError, match=r"no cluster in .*cluster\.json not found"):
        producer_config(produce_args("--data-dir", str(tmp_path / "none")))
    LocalCluster.plan(
        str(tmp_path / "c"), 3, 29092, roles=("controller",), kafka_base_port=29292
    ).write()
    with pytest.raises(ReplogError, match="has no brokers with a Kafka listener; pass --boot"):
        producer_config(produce_args("--data-dir", str(tmp_path / "c")))


def test_malformed_props_and_files_name_the_option(tmp_path: Path) -> None:
    with pytest.raises(ReplogError, match=r"--producer-props 'acks': expected KEY=VALUE"):
        client_connection.parse_props(["acks"], "--producer-props")
    with pytest.raises(ReplogError, match="--producer-props acks: given twice"):
        client_connection.parse_props(["acks=1", "acks=all"], "--producer-props")
    with pytest.raises(ReplogError, match=r"--producer\.config .*missing"):
        client_connection.read_config_file(str(tmp_path / "missing"), "--producer.config")
    bad = tmp_path / "bad.properties"
    bad.write_text("acks\n")
    with pytest.raises(ConfigError, match=r"bad\.properties:1: expected key=value"):
        client_connection.read_config_file(str(bad), "--producer.config")


def test_payloads(tmp_path: Path) -> None:
    (value,) = perf.payloads(produce_args())
    assert value == value.upper() and len(value) == 1
    args = parse("produce", "--topic", "t", "--num-records", "1", "--record-size", "1000")
    (value,) = perf.payloads(args)
    assert len(value) == 1000 and set(value) <= set(range(65, 91))
    source = tmp_path / "payloads"
    source.write_bytes(b"one\ntwo\n\nthree\n")
    args = parse("produce", "--topic", "t", "--num-records", "1", "--payload-file", str(source))
    assert perf.payloads(args) == [b"one", b"two", b"three"]
    source.write_bytes(b"a|b")
    args = parse(
        "produce", "--topic", "t", "--num-records", "1", "--payload-file", str(source),
        "--payload-delimiter", "|",
    )  # fmt: skip
    assert perf.payloads(args) == [b"a", b"b"]
    source.write_bytes(b"\n\n")
    with pytest.raises(ReplogError, match="holds no payload"):
        perf.payloads(parse("produce", "--topic", "t", "--num-records", "1", "--payload-file",
                            str(source)))  # fmt: skip


# --- statistics ----------------------------------------------------------------------------------


def test_percentiles_are_kafkas_floor_index() -> None:
    samples = [float(i) for i in range(1, 101)]  # 1..100
    assert [perf.percentile(samples, p) for p in perf.PERCENTILES] == [51.0, 96.0, 100.0, 100.0]
    assert perf.percentile([], 0.5) == 0.0
    assert perf.percentile([7.0], 0.999) == 7.0


def test_stats_totals_windows_and_failures() -> None:
    stats = perf.ProduceStats(num_records=4, reporting_interval_s=5.0, now=100.0)
    stats.delivered(sent_at=100.0, size=10, now=100.002)  # 2 ms
    stats.delivered(sent_at=100.0, size=10, now=100.004)  # 4 ms
    assert stats.take_window(104.9) is None  # not due yet
    window = stats.take_window(105.0)
    assert window is not None
    assert (window.count, window.bytes, window.elapsed_s) == (2, 20, 5.0)
    assert window.avg_ms == pytest.approx(3.0) and window.max_ms == pytest.approx(4.0)
    assert window.records_per_sec == pytest.approx(0.4)
    assert stats.take_window(111.0) is None  # due, but empty: the window goes on
    stats.delivered(sent_at=110.0, size=10, now=110.010)
    later = stats.take_window(111.0)
    assert later is not None and later.elapsed_s == pytest.approx(6.0) and later.count == 1
    stats.error(NotEnoughReplicasError("t-0: 1 in-sync replica, 2 required"))
    stats.error(ValueError("second"))
    summary = stats.summary(now=102.0)
    assert (summary.count, summary.failed, summary.bytes) == (3, 2, 30)
    assert summary.elapsed_s == pytest.approx(2.0)
    assert summary.records_per_sec == pytest.approx(1.5)
    assert summary.avg_ms == pytest.approx(16 / 3)
    assert summary.max_ms == pytest.approx(10.0)
    assert summary.first_error == "NotEnoughReplicasError: t-0: 1 in-sync replica, 2 required"
    assert stats.completed == 5


def test_latency_samples_are_bounded() -> None:
    stats = perf.ProduceStats(num_records=1000, reporting_interval_s=5, now=0.0, max_samples=100)
    for i in range(1000):
        stats.delivered(sent_at=0.0, size=1, now=i / 1000)  # latency i ms
    summary = stats.summary(now=1.0)
    assert summary.count == 1000
    assert summary.max_ms == pytest.approx(999.0)  # the max is exact, not sampled
    # every 10th latency kept: 0, 10, ..., 990; the median sample is index 50 -> 500 ms
    assert summary.percentiles_ms[0] == pytest.approx(500.0)


def test_throttle_delay() -> None:
    assert perf.throttle_delay(1000, 0.0, -1) == 0.0  # unthrottled
    assert perf.throttle_delay(0, 0.0, 100) == 0.0
    assert perf.throttle_delay(100, 0.5, 100) == pytest.approx(0.5)  # 1 s worth after 0.5 s
    assert perf.throttle_delay(100, 1.0, 100) == 0.0
    assert perf.throttle_delay(100, 0.999, 100) == 0.0  # 1 ms ahead: below the 2 ms minimum


# --- output --------------------------------------------------------------------------------------


def test_producer_lines_are_kafkas() -> None:
    window = perf.Window(count=49961, bytes=49961 * 1000, elapsed_s=5.002, avg_ms=178.04,
                         max_ms=712.0)  # fmt: skip
    assert perf.window_line(window) == (
        "49961 records sent, 9988.2 records/sec (9.53 MB/sec), 178.0 ms avg latency, "
        "712.0 ms max latency."
    )
    summary = perf.ProduceSummary(
        count=100000,
        failed=0,
        bytes=100000 * 1000,
        elapsed_s=3.322,
        avg_ms=697.544,
        max_ms=959.0,
        percentiles_ms=(721.9, 946.2, 955.0, 958.99),
    )
    line = perf.total_line(summary)
    assert line == (
        "100000 records sent, 30102.347983 records/sec (28.71 MB/sec), 697.54 ms avg latency, "
        "959.00 ms max latency, 721 ms 50th, 946 ms 95th, 955 ms 99th, 958 ms 99.9th."
    )
    assert TOTAL_LINE.match(line)


def test_producer_json() -> None:
    summary = perf.ProduceSummary(10, 1, 100, 2.0, 1.5, 3.0, (1.0, 2.0, 3.0, 3.0), "E: x")
    window = perf.Window(10, 100, 1.0, 1.5, 3.0)
    document = json.loads(json.dumps(perf.produce_json(summary, [window])))
    assert document["records"] == 10 and document["failed"] == 1
    assert document["first_error"] == "E: x"
    assert document["records_per_sec"] == 5.0
    assert document["latency_ms"] == {
        "avg": 1.5, "p50": 1.0, "p95": 2.0, "p99": 3.0, "p999": 3.0, "max": 3.0,
    }  # fmt: skip
    assert document["windows"][0]["records_per_sec"] == 10.0


def test_consumer_row_is_kafkas() -> None:
    with utc():
        summary = perf.ConsumeSummary(
            start_ms=1_610_811_819_022, end_ms=1_610_811_820_258, messages=100310,
            bytes=100310 * 1000,
        )  # fmt: skip
        row = perf.consume_row(summary)
    assert row == (
        "2021-01-16 15:43:39:022, 2021-01-16 15:43:40:258, 95.6631, 77.3973, 100310, "
        "81156.9579, 0, 1236, 77.3973, 81156.9579"
    )
    assert CSV_ROW.match(row)
    assert perf.CONSUME_HEADER.split(", ") == [
        "start.time", "end.time", "data.consumed.in.MB", "MB.sec", "data.consumed.in.nMsg",
        "nMsg.sec", "rebalance.time.ms", "fetch.time.ms", "fetch.MB.sec", "fetch.nMsg.sec",
    ]  # fmt: skip
    empty = perf.consume_row(perf.ConsumeSummary(5000, 5000, 0, 0))  # no division by zero
    assert empty.endswith(", 0.0000, 0.0000, 0, 0.0000, 0, 0, 0.0000, 0.0000")


def test_progress_text() -> None:
    text = perf.progress_text(250, 1000, 2.5, "records", 80)
    assert text.startswith("[##########------------------------------]")
    assert " 25.0% 250/1000 records 100/s ETA 8s" in text
    assert perf.progress_text(1000, 1000, 10, "records", 80).endswith(" done")
    assert perf.progress_text(0, 1000, 0, "records", 80).endswith("ETA ?")
    assert "ETA 16m40s" in perf.progress_text(0 + 1, 100_001, 0.01, "records", 80)
    for width in (10, 30, 200):
        assert len(perf.progress_text(5, 10, 1, "messages", width)) < width


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_console_bar_only_on_a_terminal_after_two_seconds() -> None:
    out, err = io.StringIO(), io.StringIO()
    console = perf.Console(total=10, unit="records", progress=None, now=0.0, out=out, err=err)
    console.progress(5, 100.0)
    assert err.getvalue() == ""  # not a terminal
    out, err = io.StringIO(), Terminal()
    console = perf.Console(total=10, unit="records", progress=None, now=0.0, out=out, err=err)
    console.progress(1, 1.0)
    assert err.getvalue() == ""  # a short run: no bar yet
    console.progress(5, 2.5)
    assert "5/10 records" in err.getvalue()
    console.line("a window line")
    # erased before the line, drawn again after it
    assert err.getvalue().count("5/10 records") == 2
    assert err.getvalue().endswith("\x1b[K") and out.getvalue() == "a window line\n"
    console.finish()
    assert err.getvalue().endswith("\r\x1b[K")
    out, err = io.StringIO(), io.StringIO()
    forced = perf.Console(total=10, unit="records", progress=True, now=0.0, out=out, err=err)
    forced.progress(1, 0.1)
    assert "1/10 records" in err.getvalue()
    off = perf.Console(total=10, unit="records", progress=False, now=0.0, out=out, err=Terminal())
    off.progress(1, 100.0)
    assert off.err.getvalue() == ""


# --- the commands, against fake clients ----------------------------------------------------------


class FakeFuture:
    def __init__(self) -> None:
        self.callbacks: list[Callable[[Any], object]] = []
        self.errbacks: list[Callable[[BaseException], object]] = []

    def add_callback(self, fn: Callable[[Any], object]) -> FakeFuture:
        self.callbacks.append(fn)
        return self

    def add_errback(self, fn: Callable[[BaseException], object]) -> FakeFuture:
        self.errbacks.append(fn)
        return self


@dataclass
class FakeProducer:
    """Delivers on flush; every `fail_every`-th record fails; Ctrl-C at send number
    `interrupt_at`."""

    config: dict[str, object]
    fail_every: int = 0
    interrupt_at: int = -1
    sent: list[tuple[str, bytes | None]] = field(default_factory=list)
    pending: list[FakeFuture] = field(default_factory=list)
    closed_with: list[float | None] = field(default_factory=list)

    def send(self, topic: str, value: bytes | None = None) -> FakeFuture:
        if len(self.sent) == self.interrupt_at:
            raise KeyboardInterrupt
        self.sent.append((topic, value))
        future = FakeFuture()
        self.pending.append(future)
        return future

    def flush(self, timeout: float | None = None) -> None:
        for number, future in enumerate(self.pending, start=1):
            if self.fail_every and number % self.fail_every == 0:
                for errback in future.errbacks:
                    errback(NotEnoughReplicasError("t-0: not enough in-sync replicas"))
            else:
                for callback in future.callbacks:
                    callback(object())
        self.pending.clear()

    def close(self, timeout: float | None = None) -> None:
        self.closed_with.append(timeout)


def fake_producer(monkeypatch: pytest.MonkeyPatch, **options: int) -> list[FakeProducer]:
    made: list[FakeProducer] = []

    def new(config: dict[str, object]) -> FakeProducer:
        made.append(FakeProducer(config, **options))
        return made[-1]

    monkeypatch.setattr(perf, "new_producer", new)
    return made


def test_produce_prints_kafkas_total_line(monkeypatch: pytest.MonkeyPatch) -> None:
    made = fake_producer(monkeypatch)
    outcome = run(
        "produce", "--topic", "t", "--num-records", "50", "--record-size", "100",
        "--bootstrap-server", "h:1", "--producer-props", "acks=1",
    )  # fmt: skip
    assert outcome.returncode == 0, outcome.stderr
    (line,) = outcome.stdout.splitlines()
    match = TOTAL_LINE.match(line)
    assert match and match.group(1) == "50", line
    (producer,) = made
    assert producer.config == {
        "client.id": "replog-perf-producer",
        "acks": "1",
        "bootstrap.servers": "h:1",
    }
    assert len(producer.sent) == 50 and {len(v or b"") for _, v in producer.sent} == {100}
    assert {t for t, _ in producer.sent} == {"t"}
    assert producer.closed_with == [None]
    assert outcome.stderr == ""  # stderr is no terminal: no bar


def test_produce_json_and_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_producer(monkeypatch)
    outcome = run(
        "produce", "--topic", "t", "--num-records", "20", "--record-size", "10",
        "--bootstrap-server", "h:1", "--output", "json",
    )  # fmt: skip
    assert outcome.returncode == 0, outcome.stderr
    document = json.loads(outcome.stdout)
    assert document["records"] == 20 and document["bytes"] == 200 and document["failed"] == 0
    assert set(document["latency_ms"]) == {"avg", "p50", "p95", "p99", "p999", "max"}


def test_produce_reports_failures_and_exits_1(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_producer(monkeypatch, fail_every=4)
    outcome = run(
        "produce", "--topic", "t", "--num-records", "20", "--record-size", "10",
        "--bootstrap-server", "h:1",
    )  # fmt: skip
    assert outcome.returncode == 1
    assert outcome.stdout.startswith("15 records sent, ")
    assert outcome.stderr == (
        "replog perf produce: 5 of 20 records failed; first: NotEnoughReplicasError: t-0: not "
        "enough in-sync replicas\n"
    )


def test_produce_ctrl_c_prints_what_completed_and_exits_130(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made = fake_producer(monkeypatch, interrupt_at=7)
    outcome = run(
        "produce", "--topic", "t", "--num-records", "20", "--record-size", "10",
        "--bootstrap-server", "h:1",
    )  # fmt: skip
    assert outcome.returncode == 130
    assert outcome.stdout.startswith("0 records sent, ")  # delivery only comes with flush
    assert outcome.stderr == (
        "replog perf produce: stopped early: 0 records acknowledged, 7 not acknowledged (may "
        "have been written), 13 never sent\nreplog perf: interrupted\n"
    )  # the 7 handed to the producer have no outcome: they may have been written
    assert made[0].closed_with == [0]  # no waiting for the rest


def test_produce_ctrl_c_accounts_for_every_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """A record the closing producer gave up on after sending it may have been written: it
    is not acknowledged, not "not sent"; one it never sent, and one never handed to it, are
    never sent."""

    class Closing(FakeProducer):
        def send(self, topic: str, value: bytes | None = None) -> FakeFuture:
            if len(self.sent) == 3:
                self.flush()  # the first 3 are acknowledged, one failed on the way
            return super().send(topic, value)

        def close(self, timeout: float | None = None) -> None:
            super().close(timeout)
            for number, future in enumerate(self.pending):
                error = ClientClosedError("closed", maybe_written=number < 2)
                for errback in future.errbacks:
                    errback(error)  # 2 on the wire, 2 queued
            self.pending.clear()

    made: list[FakeProducer] = []
    monkeypatch.setattr(
        perf,
        "new_producer",
        lambda config: made.append(Closing(config, fail_every=3, interrupt_at=7)) or made[-1],
    )
    outcome = run(
        "produce", "--topic", "t", "--num-records", "20", "--record-size", "10",
        "--bootstrap-server", "h:1",
    )  # fmt: skip
    assert outcome.returncode == 130
    assert outcome.stdout.startswith("2 records sent, ")
    lines = outcome.stderr.splitlines()
    assert lines == [
        "replog perf produce: 1 of 3 records failed; first: NotEnoughReplicasError: t-0: not "
        "enough in-sync replicas",
        "replog perf produce: stopped early: 2 records acknowledged, 1 failed, 2 not "
        "acknowledged (may have been written), 15 never sent",
        "replog perf: interrupted",
    ]


def test_produce_window_lines_while_it_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a 1 ms reporting interval and deliveries trickling in, window lines come before
    the total line."""

    class Trickling(FakeProducer):
        def send(self, topic: str, value: bytes | None = None) -> FakeFuture:
            self.flush()  # delivers the records sent before this one
            time.sleep(0.002)
            return super().send(topic, value)

    monkeypatch.setattr(perf, "new_producer", lambda config: Trickling(config))
    monkeypatch.setattr(perf, "TICK_S", 0.001)
    outcome = run(
        "produce", "--topic", "t", "--num-records", "100", "--record-size", "10",
        "--bootstrap-server", "h:1", "--reporting-interval", "1",
    )  # fmt: skip
    assert outcome.returncode == 0, outcome.stderr
    *windows, total = outcome.stdout.splitlines()
    assert windows and all(WINDOW_LINE.match(w) for w in windows), windows
    assert sum(int(w.split()[0]) for w in windows) <= 100
    assert TOTAL_LINE.match(total)


def test_produce_throttles(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_producer(monkeypatch)
    started = time.monotonic()
    outcome = run(
        "produce", "--topic", "t", "--num-records", "21", "--record-size", "1",
        "--bootstrap-server", "h:1", "--throughput", "100",
    )  # fmt: skip
    assert outcome.returncode == 0, outcome.stderr
    assert time.monotonic() - started >= 0.19  # record 21 is due at 0.2 s


@dataclass(frozen=True)
class Record:
    key: bytes | None
    value: bytes | None


@dataclass
class FakeConsumer:
    """Hands out `batches` (one per poll), then nothing."""

    config: dict[str, object]
    batches: list[list[Record]]
    subscribed: list[str] = field(default_factory=list)
    max_records_asked: list[int | None] = field(default_factory=list)
    closed: bool = False
    listener: Any = None
    assign_after_polls: int | None = None  # the group's assignment arrives in this poll

    def subscribe(self, topics: Sequence[str], listener: Any = None) -> None:
        self.subscribed.extend(topics)
        self.listener = listener

    def poll(self, timeout_ms: int = 0, max_records: int | None = None) -> dict[str, list[Record]]:
        self.max_records_asked.append(max_records)
        if self.listener is not None and self.assign_after_polls is not None:
            self.assign_after_polls -= 1
            if self.assign_after_polls == 0:
                time.sleep(0.05)
                self.listener.on_partitions_assigned({"t-0"})
        if not self.batches:
            time.sleep(timeout_ms / 1000)
            return {}
        return {"t-0": self.batches.pop(0)}

    def close(self) -> None:
        self.closed = True


def fake_consumer(
    monkeypatch: pytest.MonkeyPatch, batches: list[list[Record]], topics: Sequence[str] = ("t",)
) -> list[FakeConsumer]:
    """Consumers that hand out `batches`, in a cluster that has `topics`."""
    made: list[FakeConsumer] = []

    def new(config: dict[str, object]) -> FakeConsumer:
        made.append(FakeConsumer(config, batches))
        return made[-1]

    def cluster_topics(config: dict[str, object], **_: object) -> dict[str, int]:
        return dict.fromkeys(topics, 1)

    monkeypatch.setattr(perf, "new_consumer", new)
    monkeypatch.setattr(perf, "cluster_topics", cluster_topics)
    return made


def test_consume_reports_the_time_to_the_first_assignment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made = fake_consumer(monkeypatch, [[Record(None, b"v")]] * 2)
    original = perf.new_consumer

    def joining(config: dict[str, object]) -> Any:
        consumer = original(config)
        consumer.assign_after_polls = 1  # type: ignore[attr-defined]
        return consumer

    monkeypatch.setattr(perf, "new_consumer", joining)
    outcome = run("consume", "--topic", "t", "--messages", "2", "--bootstrap-server", "h:1")
    assert outcome.returncode == 0, outcome.stderr
    fields = outcome.stdout.splitlines()[1].split(", ")
    assert int(fields[6]) >= 50  # rebalance.time.ms: the 50 ms the assignment took
    assert made[0].listener is not None


def test_consume_prints_kafkas_csv(monkeypatch: pytest.MonkeyPatch) -> None:
    batches = [[Record(b"k", b"v" * 9)] * 3, [Record(None, b"v" * 10)] * 2]
    made = fake_consumer(monkeypatch, batches)
    outcome = run("consume", "--topic", "t", "--messages", "5", "--bootstrap-server", "h:1")
    assert outcome.returncode == 0, outcome.stderr
    header, row = outcome.stdout.splitlines()
    assert header == perf.CONSUME_HEADER
    assert CSV_ROW.match(row), row
    fields = row.split(", ")
    assert fields[2] == f"{50 / perf.MB:.4f}" and fields[4] == "5" and fields[6] == "0"
    (consumer,) = made
    assert consumer.subscribed == ["t"] and consumer.closed
    assert consumer.max_records_asked == [5, 2]  # never more than the rest
    group = consumer.config.pop("group.id")
    assert isinstance(group, str) and re.fullmatch(r"perf-consumer-\d+", group)
    assert consumer.config == {
        "client.id": "replog-perf-consumer",
        "auto.offset.reset": "earliest",
        "bootstrap.servers": "h:1",
    }


def test_consume_times_out_with_kafkas_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    made = fake_consumer(monkeypatch, [[Record(None, b"x")]])
    outcome = run(
        "consume", "--topic", "t", "--messages", "5", "--bootstrap-server", "h:1",
        "--timeout", "150", "--group", "g", "--from-latest", "--hide-header", "--output", "text",
    )  # fmt: skip
    assert outcome.returncode == 0
    assert outcome.stderr == perf.timeout_warning(150) + "\n"
    (row,) = outcome.stdout.splitlines()
    assert row.split(", ")[4] == "1"
    assert made[0].config["group.id"] == "g"
    assert made[0].config["auto.offset.reset"] == "latest"


def test_consume_refuses_a_topic_the_cluster_does_not_have_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As `replog consume` and `perf produce` do; it waited out --timeout and printed a row of
    zeros with exit code 0."""
    made = fake_consumer(monkeypatch, [], topics=["orders", "__consumer_offsets"])
    started = time.monotonic()
    outcome = run("consume", "--topic", "benc", "--messages", "10", "--bootstrap-server", "h:1")
    assert (outcome.returncode, outcome.stdout) == (1, "")
    assert outcome.stderr == "replog perf: --topic 'benc': no such topic (topics: orders)\n"
    assert made == [] and time.monotonic() - started < 5  # not the 10 s --timeout


def test_consume_json(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_consumer(monkeypatch, [[Record(b"ab", b"cd")] * 4])
    outcome = run(
        "consume", "--topic", "t", "--messages", "4", "--bootstrap-server", "h:1",
        "--output", "json",
    )  # fmt: skip
    assert outcome.returncode == 0, outcome.stderr
    document = json.loads(outcome.stdout)
    assert document["messages"] == 4 and document["bytes"] == 16
    assert document["timed_out"] is False and document["rebalance_time_ms"] == 0


def test_config_errors_are_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(config: dict[str, object]) -> FakeProducer:
        raise ConfigError("acks='2': accepted values: all, -1, 0, 1")

    monkeypatch.setattr(perf, "new_producer", refuse)
    outcome = run(
        "produce", "--topic", "t", "--num-records", "1", "--record-size", "1",
        "--bootstrap-server", "h:1", "--producer-props", "acks=2",
    )  # fmt: skip
    assert (outcome.returncode, outcome.stdout) == (1, "")
    assert outcome.stderr == "replog perf: acks='2': accepted values: all, -1, 0, 1\n"
